"""The scans of `minimal.scan`: every method and backend computes the recurrence h_t = a_t h_{t-1} + b_t of the
sequential reference, the backward is the VJP (central differences) and a reverse scan, and the log-space
scan of Heinsen (2023) is the log of the linear scan, also for 100 000 steps."""
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minimal.bench import kernels as bench
from minimal import scan
from minimal.scan import reference
from minimal.gradcheck import TOLERANCE, check_function, rel_error

CPU_CASES = [("sequential", "numpy"), ("blelloch", "numpy"), ("sequential", "numba"), ("blelloch", "numba")]
LENGTHS = [1, 2, 3, 7, 64, 1000, 1025]
# Agreement between two orders of summation: float64 to ~1e-12 (design card); float32 has 2^29 x coarser
# rounding, and 1e-5 relative to the array's scale leaves room for T ~ 1000 steps of it.
TOL = {np.float64: 1e-12, np.float32: 1e-5}


def _problem(rng, shape, dtype=np.float64, with_h0=True):
    a = rng.uniform(-1, 1, shape).astype(dtype)
    b = rng.standard_normal(shape).astype(dtype)
    h0 = rng.standard_normal((shape[0],) + shape[2:]).astype(dtype) if with_h0 else None
    dh = rng.standard_normal(shape).astype(dtype)
    return a, b, h0, dh


def _ref(a, b, h0):
    return scan.linear_scan(a, b, h0, method="sequential", backend="numpy")


def _ref_backward(a, h, dh, h0):
    return scan.linear_scan_backward(a, h, dh, h0, method="sequential", backend="numpy")


# ---------------------------------------------------------------------------------------------------------
# every method equals the sequential recurrence
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("T", LENGTHS)
@pytest.mark.parametrize("method,backend", CPU_CASES)
def test_every_method_agrees_with_the_sequential_reference(method, backend, T, dtype):
    rng = np.random.default_rng(T)
    for shape in [(2, T), (2, T, 3), (2, T, 2, 3)]:
        a, b, h0, dh = _problem(rng, shape, dtype)
        ref = _ref(a, b, h0)
        h = scan.linear_scan(a, b, h0, method=method, backend=backend)
        assert h.shape == shape and h.dtype == dtype
        assert rel_error(h, ref) < TOL[dtype]
        grads = scan.linear_scan_backward(a, h, dh, h0, method=method, backend=backend)
        for g, g_ref in zip(grads, _ref_backward(a, ref, dh, h0)):
            assert g.shape == g_ref.shape and g.dtype == dtype
            assert rel_error(g, g_ref) < TOL[dtype]


@pytest.mark.parametrize("method,backend", CPU_CASES)
def test_no_h0_means_a_zero_initial_state(method, backend):
    a, b, h0, dh = _problem(np.random.default_rng(1), (3, 9, 4))
    zeros = np.zeros_like(h0)
    assert np.array_equal(scan.linear_scan(a, b, None, method, backend), scan.linear_scan(a, b, zeros, method, backend))
    h = scan.linear_scan(a, b, None, method, backend)
    for g, g0 in zip(scan.linear_scan_backward(a, h, dh, None, method, backend),
                     scan.linear_scan_backward(a, h, dh, zeros, method, backend)):
        assert np.array_equal(g, g0)


@pytest.mark.parametrize("method,backend", CPU_CASES)
def test_first_step_is_a0_h0_plus_b0(method, backend):
    a, b, h0, _ = _problem(np.random.default_rng(2), (2, 5, 3))
    h = scan.linear_scan(a, b, h0, method, backend)
    np.testing.assert_allclose(h[:, 0], a[:, 0] * h0 + b[:, 0], rtol=1e-15, atol=0)
    np.testing.assert_allclose(h[:, 1], a[:, 1] * h[:, 0] + b[:, 1], rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("method,backend", CPU_CASES)
def test_non_contiguous_inputs_give_the_same_result(method, backend):
    a, b, h0, dh = _problem(np.random.default_rng(3), (2, 14, 6))
    sl = (slice(None), slice(None, None, 2), slice(None, None, 2))  # every other step and channel
    h = scan.linear_scan(a[sl], b[sl], h0[:, ::2], method, backend)
    ref = _ref(np.ascontiguousarray(a[sl]), np.ascontiguousarray(b[sl]), np.ascontiguousarray(h0[:, ::2]))
    assert rel_error(h, ref) < 1e-12
    grads = scan.linear_scan_backward(a[sl], h, dh[sl], h0[:, ::2], method, backend)
    for g, g_ref in zip(grads, _ref_backward(a[sl], ref, dh[sl], h0[:, ::2])):
        assert rel_error(g, g_ref) < 1e-12


shapes = st.tuples(st.integers(1, 3), st.integers(1, 70), st.lists(st.integers(1, 3), max_size=2))


@settings(max_examples=40, deadline=None)
@given(shape=shapes, case=st.sampled_from(CPU_CASES), seed=st.integers(0, 2**16))
def test_property_random_shapes_agree_with_the_reference(shape, case, seed):
    B, T, rest = shape
    a, b, h0, dh = _problem(np.random.default_rng(seed), (B, T, *rest))
    ref = _ref(a, b, h0)
    h = scan.linear_scan(a, b, h0, *case)
    assert rel_error(h, ref) < 1e-12
    for g, g_ref in zip(scan.linear_scan_backward(a, h, dh, h0, *case), _ref_backward(a, ref, dh, h0)):
        assert rel_error(g, g_ref) < 1e-12


@settings(max_examples=40, deadline=None)
@given(T1=st.integers(1, 40), T2=st.integers(1, 40), case=st.sampled_from(CPU_CASES), seed=st.integers(0, 2**16))
def test_property_scan_of_a_concatenation_continues_from_the_first_part(T1, T2, case, seed):
    """scan(a, b)[T1:] = scan(a[T1:], b[T1:], h0 = scan(a, b)[T1 - 1]): the state carries everything."""
    a, b, h0, _ = _problem(np.random.default_rng(seed), (2, T1 + T2, 3))
    first = scan.linear_scan(a[:, :T1], b[:, :T1], h0, *case)
    second = scan.linear_scan(a[:, T1:], b[:, T1:], first[:, -1].copy(), *case)
    whole = scan.linear_scan(a, b, h0, *case)
    assert rel_error(np.concatenate([first, second], axis=1), whole) < 1e-12


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 40), case=st.sampled_from(CPU_CASES), seed=st.integers(0, 2**16))
def test_property_backward_is_the_transpose(T, case, seed):
    """h is linear in (b, h0): <dh, h> = <db, b> + <dh0, h0> for the VJP (db, dh0) of the same dh."""
    a, b, h0, dh = _problem(np.random.default_rng(seed), (2, T, 3))
    h = scan.linear_scan(a, b, h0, *case)
    _, db, dh0 = scan.linear_scan_backward(a, h, dh, h0, *case)
    lhs, rhs = np.sum(dh * h), np.sum(db * b) + np.sum(dh0 * h0)
    assert abs(lhs - rhs) <= 1e-12 * (np.sum(np.abs(dh * h)) + 1)


# ---------------------------------------------------------------------------------------------------------
# backward = central finite differences
# ---------------------------------------------------------------------------------------------------------

def _gradcheck_linear(method, backend, a, b, h0):
    params = {"a": a, "b": b} if h0 is None else {"a": a, "b": b, "h0": h0}

    def forward(p, x):
        h = scan.linear_scan(p["a"], p["b"], p.get("h0"), method, backend)
        return h, h

    def backward(p, h, dh):
        da, db, dh0 = scan.linear_scan_backward(p["a"], h, dh, p.get("h0"), method, backend)
        grads = {"a": da, "b": db}
        if "h0" in p:
            grads["h0"] = dh0
        return None, grads

    return check_function(forward, backward, params, None)


@pytest.mark.parametrize("T", [1, 5, 8])
@pytest.mark.parametrize("method,backend", CPU_CASES)
def test_linear_backward_matches_finite_differences(method, backend, T):
    rng = np.random.default_rng(10 + T)
    a, b, h0, _ = _problem(rng, (2, T, 3))
    errors = _gradcheck_linear(method, backend, a, b, h0)
    assert max(errors.values()) <= TOLERANCE, errors
    errors = _gradcheck_linear(method, backend, a, b, None)
    assert max(errors.values()) <= TOLERANCE, errors


def _log_problem(rng, shape, dtype=np.float64):
    log_a = np.log(rng.uniform(0.5, 1, shape)).astype(dtype)
    log_b = np.log(rng.uniform(0.1, 1, shape)).astype(dtype)
    log_h0 = np.log(rng.uniform(0.1, 1, (shape[0],) + shape[2:])).astype(dtype)
    return log_a, log_b, log_h0


@pytest.mark.parametrize("with_h0", [True, False])
@pytest.mark.parametrize("T", [1, 5, 8])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_log_backward_matches_finite_differences(backend, T, with_h0):
    log_a, log_b, log_h0 = _log_problem(np.random.default_rng(20 + T), (2, T, 3))
    params = {"log_a": log_a, "log_b": log_b}
    if with_h0:
        params["log_h0"] = log_h0

    def forward(p, x):
        log_h = scan.log_scan(p["log_a"], p["log_b"], p.get("log_h0"), backend=backend)
        return log_h, log_h

    def backward(p, log_h, dlog_h):
        dla, dlb, dlh0 = scan.log_scan_backward(p["log_a"], p["log_b"], log_h, dlog_h, p.get("log_h0"),
                                                backend=backend)
        if not with_h0:
            assert np.array_equal(dlh0, np.zeros_like(dlh0))  # h0 = 0: w_0 = 0
        grads = {"log_a": dla, "log_b": dlb}
        if with_h0:
            grads["log_h0"] = dlh0
        return None, grads

    errors = check_function(forward, backward, params, None)
    assert max(errors.values()) <= TOLERANCE, errors


# ---------------------------------------------------------------------------------------------------------
# complex arrays: backend "numpy" (the LRU's complex diagonal recurrence, cells.lru)
# ---------------------------------------------------------------------------------------------------------

NUMPY_METHODS = ["sequential", "blelloch"]


def _complex_problem(rng, shape, dtype=np.complex128):
    """|a| < 1 on the unit disc's inside, b and h0 complex Gaussian."""
    a = rng.uniform(0, 0.99, shape) * np.exp(1j * rng.uniform(0, 2 * np.pi, shape))
    b = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    h0 = rng.standard_normal((shape[0],) + shape[2:]) + 1j * rng.standard_normal((shape[0],) + shape[2:])
    return a.astype(dtype), b.astype(dtype), h0.astype(dtype)


def _complex_loop(a, b, h0):
    """h_t = a_t h_{t-1} + b_t written out as the loop over t that ``cells.lru`` carried before it called the scan."""
    h = np.empty_like(b)
    prev = np.zeros_like(b[:, 0]) if h0 is None else h0
    for t in range(a.shape[1]):
        prev = a[:, t] * prev + b[:, t]
        h[:, t] = prev
    return h


def _parts(z):
    return np.stack([z.real, z.imag])


@pytest.mark.parametrize("dtype,tol", [(np.complex128, 1e-13), (np.complex64, 1e-5)])
@pytest.mark.parametrize("T", [1, 2, 7, 64, 100])
@pytest.mark.parametrize("method", NUMPY_METHODS)
def test_complex_scan_equals_the_loop(method, T, dtype, tol):
    rng = np.random.default_rng(30 + T)
    for shape, with_h0 in (((2, T), True), ((2, T, 3), False), ((1, T, 2, 2), True)):
        a, b, h0 = _complex_problem(rng, shape, dtype)
        h0 = h0 if with_h0 else None
        h = scan.linear_scan(a, b, h0, method=method, backend="numpy")
        assert h.dtype == dtype and rel_error(_parts(h), _parts(_complex_loop(a, b, h0))) <= tol
        if method == "sequential":   # the reference loop: the loop's products and sums, in its order
            assert np.array_equal(h, _complex_loop(a, b, h0))
            assert np.array_equal(reference.sequential_scan(a, b, h0), h)
        assert np.array_equal(reference.blelloch_scan_numpy(a, b, h0), scan.linear_scan(a, b, h0, "blelloch", "numpy"))


@pytest.mark.parametrize("with_h0", [True, False])
@pytest.mark.parametrize("T", [1, 5, 8])
@pytest.mark.parametrize("method", NUMPY_METHODS)
def test_complex_backward_matches_finite_differences(method, T, with_h0):
    """A real loss L = Σ Re(conj(R) h): the backward gives ḡ = dL/dRe + i dL/dIm of a, b and h0 (``minimal.scan``
    docstring), checked against central differences of the real and imaginary parts in float64."""
    a, b, h0 = _complex_problem(np.random.default_rng(40 + T), (2, T, 3))
    params = {"a_re": a.real.copy(), "a_im": a.imag.copy(), "b_re": b.real.copy(), "b_im": b.imag.copy()}
    if with_h0:
        params.update(h0_re=h0.real.copy(), h0_im=h0.imag.copy())

    def complex_of(p, name):
        return p[f"{name}_re"] + 1j * p[f"{name}_im"] if f"{name}_re" in p else None

    def forward(p, x):
        a, b, h0 = (complex_of(p, n) for n in ("a", "b", "h0"))
        h = scan.linear_scan(a, b, h0, method, "numpy")
        return np.stack([h.real, h.imag]), (a, h, h0)   # L = Σ R_re Re h + R_im Im h

    def backward(p, cache, dy):
        a, h, h0 = cache
        g = dict(zip(("a", "b", "h0"), scan.linear_scan_backward(a, h, dy[0] + 1j * dy[1], h0, method, "numpy")))
        return None, {k: g[k[:-3]].real if k.endswith("_re") else g[k[:-3]].imag for k in p}

    errors = check_function(forward, backward, params, None)
    assert max(errors.values()) <= TOLERANCE, errors


def test_the_real_backward_is_unchanged_by_the_complex_rule():
    """conj(a) = a for real a: the NumPy backward of a real scan is bit for bit the plain formula."""
    a, b, h0, dh = _problem(np.random.default_rng(3), (2, 9, 3))
    h = scan.linear_scan(a, b, h0, "sequential", "numpy")
    da, db, dh0 = scan.linear_scan_backward(a, h, dh, h0, "sequential", "numpy")
    g = reference.adjoint(a, dh, "sequential")
    assert np.array_equal(db, g) and np.array_equal(dh0, a[:, 0] * g[:, 0])
    assert np.array_equal(da, g * np.concatenate([h0[:, None], h[:, :-1]], axis=1))


@pytest.mark.parametrize("backend", ["numba", "cuda"])
def test_complex_arrays_are_refused_by_the_compiled_backends_naming_the_dtype_and_numpy(backend):
    a, b, h0 = _complex_problem(np.random.default_rng(5), (2, 4, 3))
    want = rf"^a is complex128, and backend='{backend}' computes in float32 or float64 only: complex scans run on " \
           r"backend='numpy'"
    with pytest.raises(ValueError, match=want):
        scan.linear_scan(a, b, h0, backend=backend)
    with pytest.raises(ValueError, match=want):
        scan.linear_scan_backward(a, b, b, h0, backend=backend)
    with pytest.raises(ValueError, match=r"^log_a must have a floating dtype, got complex128"):
        scan.log_scan(a, b, backend="numpy")     # log space is real: no complex on any backend
    with pytest.raises(ValueError, match=r"^b must have the dtype of a \(complex128\), got complex64"):
        scan.linear_scan(a, b.astype(np.complex64), backend="numpy")
    with pytest.raises(ValueError, match=r"^b must have the dtype of a \(float64\), got complex128"):
        scan.linear_scan(a.real.copy(), b, backend="numpy")
    with pytest.raises(ValueError, match=r"^a must have a floating or complex dtype, got int64"):
        scan.linear_scan(np.ones((1, 2), np.int64), np.ones((1, 2), np.int64), backend="numpy")


# ---------------------------------------------------------------------------------------------------------
# log space (Heinsen 2023; Feng et al. App. B)
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("with_h0", [True, False])
@pytest.mark.parametrize("T", LENGTHS)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_log_scan_is_the_log_of_the_linear_scan(backend, T, with_h0):
    rng = np.random.default_rng(30 + T)
    log_a, log_b, log_h0 = _log_problem(rng, (2, T, 2, 3))
    if not with_h0:
        log_h0 = None
    log_h = scan.log_scan(log_a, log_b, log_h0, backend=backend)
    ref = _ref(np.exp(log_a), np.exp(log_b), None if log_h0 is None else np.exp(log_h0))
    assert log_h.shape == log_a.shape
    assert np.max(np.abs(np.exp(log_h) - ref) / ref) < 1e-12


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_log_backward_is_the_linear_backward_by_the_chain_rule(backend):
    """dL/dlog a = a dL/da, dL/dlog b = b dL/db, dL/dlog h0 = h0 dL/dh0, with dL/dh = dL/dlog h / h."""
    log_a, log_b, log_h0 = _log_problem(np.random.default_rng(4), (2, 33, 3))
    dlog_h = np.random.default_rng(5).standard_normal(log_a.shape)
    log_h = scan.log_scan(log_a, log_b, log_h0, backend=backend)
    a, b, h0, h = np.exp(log_a), np.exp(log_b), np.exp(log_h0), np.exp(log_h)
    da, db, dh0 = _ref_backward(a, h, dlog_h / h, h0)
    got = scan.log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, backend=backend)
    for g, want in zip(got, (a * da, b * db, h0 * dh0)):
        assert rel_error(g, want) < 1e-12


@pytest.fixture(scope="module")
def long_problem():
    """T = 100 000 steps with a_t in (0.999, 1): the state remembers ~1000 steps and a*_T ~ -50."""
    rng = np.random.default_rng(6)
    T = 100_000
    a = rng.uniform(0.999, 1, (1, T, 2))
    b = rng.uniform(0.01, 1, (1, T, 2))
    h0 = rng.uniform(0.1, 1, (1, 2))
    dlog_h = rng.standard_normal((1, T, 2))
    h = scan.linear_scan(a, b, h0, "sequential", "numba")  # = the NumPy reference, tested above
    return a, b, h0, h, dlog_h


@pytest.mark.parametrize("dtype,backend,tol", [
    (np.float64, "numpy", 1e-11), (np.float64, "numba", 1e-12),
    # float32 keeps ~2.4e-7 relative in h when log h ~ 7. Heinsen's closed form sums in float64 (in float32 it
    # lost the cumsum's rounding of a*_t, ~ -50 after 1e5 terms: 1e-3), the recurrence has a float64 carry.
    (np.float32, "numpy", 1e-6), (np.float32, "numba", 1e-6)])
def test_log_scan_stays_accurate_for_100000_steps(long_problem, dtype, backend, tol):
    a, b, h0, ref, _ = long_problem
    log_h = scan.log_scan(np.log(a).astype(dtype), np.log(b).astype(dtype), np.log(h0).astype(dtype),
                          backend=backend)
    assert np.all(np.isfinite(log_h))
    assert np.max(np.abs(np.exp(log_h.astype(np.float64)) - ref) / ref) < tol


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_float32_log_scan_of_min_gru_gates_matches_float64_for_100000_steps(backend):
    """minGRU's log-space scan (Feng et al. App. B): log a = log(1 - z), log b = log z + log g(h~), z a sigmoid.
    In float32 Heinsen's closed form was off by 0.017 in log h (1.7% in h); every CPU backend must keep float32's
    rounding of log h instead."""
    rng = np.random.default_rng(9)
    T = 100_000
    z = 1.0 / (1.0 + np.exp(-rng.standard_normal((1, T, 1))))
    log_a, log_b = np.log1p(-z).astype(np.float32), (np.log(z) + np.log(0.1 + rng.uniform(size=(1, T, 1))))
    log_b = log_b.astype(np.float32)
    ref = scan.log_scan(log_a.astype(np.float64), log_b.astype(np.float64), backend="numba")
    got = scan.log_scan(log_a, log_b, backend=backend)
    assert got.dtype == np.float32
    assert np.max(np.abs(got - ref) / np.maximum(1.0, np.abs(ref))) < 1e-6


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_log_backward_stays_accurate_for_100000_steps(long_problem, backend):
    a, b, h0, h, dlog_h = long_problem
    got = scan.log_scan_backward(np.log(a), np.log(b), np.log(h), dlog_h, np.log(h0), backend=backend)
    da, db, dh0 = scan.linear_scan_backward(a, h, dlog_h / h, h0, "sequential", "numba")
    for g, want in zip(got, (a * da, b * db, h0 * dh0)):
        assert np.all(np.isfinite(g))
        assert rel_error(g, want) < 1e-10


# ---------------------------------------------------------------------------------------------------------
# bad input: a ValueError naming the argument
# ---------------------------------------------------------------------------------------------------------

def _good():
    a, b, h0, dh = _problem(np.random.default_rng(7), (2, 4, 3))
    return a, b, h0, dh


BAD_SCAN_INPUTS = [
    (lambda a, b, h0: (a[:, :, :2], b, None), "b must have the same shape as a"),
    (lambda a, b, h0: (a, b[:, :3], None), "b must have the same shape as a"),
    (lambda a, b, h0: (a, b.astype(np.float32), None), "b must have the dtype of a"),
    (lambda a, b, h0: (a[:, 0, 0], b[:, 0, 0], None), "a must have at least 2 dimensions"),
    (lambda a, b, h0: (a[:, :0], b[:, :0], None), "a must have at least one time step"),
    (lambda a, b, h0: (a.astype(np.int64), b.astype(np.int64), None), "a must have a floating (or complex )?dtype"),
    (lambda a, b, h0: (a.astype(np.float16), b.astype(np.float16), None), "a must be float32 or float64"),
    (lambda a, b, h0: (a.tolist(), b, None), "a must be a numpy.ndarray"),
    (lambda a, b, h0: (np.where(a > 0, np.nan, a), b, None), "a contains NaN or inf"),
    (lambda a, b, h0: (a, np.where(b > 0, np.inf, b), None), "b contains NaN or inf"),
    (lambda a, b, h0: (a, b, h0[:, :2]), r"h0 must have shape \(B, ...\) = \(2, 3\)"),
    (lambda a, b, h0: (a, b, h0[None]), "h0 must have shape"),
    (lambda a, b, h0: (a, b, h0.astype(np.float32)), "h0 must have the dtype of a"),
    (lambda a, b, h0: (a, b, np.full_like(h0, np.nan)), "h0 contains NaN or inf"),
]


@pytest.mark.parametrize("bad,match", BAD_SCAN_INPUTS)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_bad_scan_inputs_name_the_argument(bad, match, backend):
    a, b, h0, _ = _good()
    a, b, h0 = bad(a, b, h0)
    with pytest.raises(ValueError, match=match):
        scan.linear_scan(a, b, h0, backend=backend)


@pytest.mark.parametrize("bad,match", BAD_SCAN_INPUTS)
@pytest.mark.parametrize("fn", [reference.sequential_scan, reference.blelloch_scan_numpy], ids=lambda f: f.__name__)
def test_the_public_numpy_scans_check_their_inputs_too(bad, match, fn):
    """They are public: T = 0 once gave an IndexError from inside the loop."""
    a, b, h0, _ = _good()
    a, b, h0 = bad(a, b, h0)
    with pytest.raises(ValueError, match=match):
        fn(a, b, h0)


def test_cuda_backend_without_a_gpu_says_so_and_names_the_simulator(monkeypatch):
    """Without a GPU, numba's CudaSupportError used to come from inside the driver at the first launch."""
    import numba
    from numba import cuda

    import cuda_kernels.scan  # noqa: F401 - imported (its kernels decorated) under the simulator, as in a full run
    monkeypatch.setattr(numba.config, "ENABLE_CUDASIM", 0)
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    a, b, h0, dh = _good()
    for call in (lambda: scan.linear_scan(a, b, h0, backend="cuda"),
                 lambda: scan.linear_scan_backward(a, b, dh, h0, backend="cuda"),
                 lambda: scan.log_scan(a, np.abs(b), backend="cuda")):
        with pytest.raises(ValueError, match="backend='cuda' needs a CUDA GPU, and none is available.*"
                                             "backend='numba'.*NUMBA_ENABLE_CUDASIM=1"):
            call()


def test_cuda_backend_without_a_gpu_outside_the_simulator():
    """The same, for real: a fresh process with the simulator off and no device visible."""
    code = ("import numpy as np; from minimal import scan\n"
            "try:\n    scan.linear_scan(np.ones((1, 3, 1)), np.ones((1, 3, 1)), backend='cuda')\n"
            "except ValueError as e:\n    print(e)\n")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "needs a CUDA GPU, and none is available" in out.stdout, out.stdout + out.stderr


def test_unknown_method_or_backend_is_named():
    a, b, h0, dh = _good()
    with pytest.raises(ValueError, match="method must be one of"):
        scan.linear_scan(a, b, h0, method="hillis-steele")
    with pytest.raises(ValueError, match="backend must be one of"):
        scan.linear_scan(a, b, h0, backend="jax")
    with pytest.raises(ValueError, match="method must be one of"):
        scan.linear_scan_backward(a, b, dh, h0, method="tree")
    with pytest.raises(ValueError, match="backend must be one of"):
        scan.linear_scan_backward(a, b, dh, h0, backend="torch")
    with pytest.raises(ValueError, match="backend must be one of"):
        scan.log_scan(a, b, backend="jax")
    with pytest.raises(ValueError, match="backend must be one of"):
        scan.log_scan_backward(a, b, a, dh, backend="torch")


def test_bad_backward_inputs_name_the_argument():
    a, b, h0, dh = _good()
    h = _ref(a, b, h0)
    with pytest.raises(ValueError, match="dh must have the same shape as h"):
        scan.linear_scan_backward(a, h, dh[:, :3], h0)
    with pytest.raises(ValueError, match="dh must have the dtype of a"):
        scan.linear_scan_backward(a, h, dh.astype(np.float32), h0)
    with pytest.raises(ValueError, match="dh contains NaN or inf"):
        scan.linear_scan_backward(a, h, np.full_like(dh, np.inf), h0)
    with pytest.raises(ValueError, match="h must have the same shape as a"):
        scan.linear_scan_backward(a, h[:, :2], dh, h0)
    with pytest.raises(ValueError, match="h0 must have shape"):
        scan.linear_scan_backward(a, h, dh, h0[:1])


def test_bad_log_inputs_name_the_argument():
    log_a, log_b, log_h0 = _log_problem(np.random.default_rng(8), (2, 4, 3))
    log_h = scan.log_scan(log_a, log_b, log_h0)
    with pytest.raises(ValueError, match="log_b must have the same shape as log_a"):
        scan.log_scan(log_a, log_b[:, :2], log_h0)
    with pytest.raises(ValueError, match="log_a contains NaN or inf"):
        scan.log_scan(np.full_like(log_a, -np.inf), log_b, log_h0)
    with pytest.raises(ValueError, match="log_h0 must have shape"):
        scan.log_scan(log_a, log_b, log_h0[:, :1])
    with pytest.raises(ValueError, match="log_h0 must have the dtype of log_a"):
        scan.log_scan(log_a, log_b, log_h0.astype(np.float32))
    with pytest.raises(ValueError, match="log_h must have the same shape as log_a"):
        scan.log_scan_backward(log_a, log_b, log_h[:, 1:], log_h, log_h0)
    with pytest.raises(ValueError, match="dlog_h must have the dtype of log_a"):
        scan.log_scan_backward(log_a, log_b, log_h, log_h.astype(np.float32), log_h0)
    with pytest.raises(ValueError, match="dlog_h contains NaN or inf"):
        scan.log_scan_backward(log_a, log_b, log_h, np.full_like(log_h, np.nan), log_h0)


@pytest.mark.parametrize("backend", scan.LOG_BACKENDS)
def test_b_zero_is_rejected_by_every_log_backend(backend):
    """One rule for all backends: log b = -inf (b = 0) never reaches a kernel (minGRU/minLSTM have b > 0)."""
    log_a, log_b, log_h0 = _log_problem(np.random.default_rng(8), (1, 3, 1))
    log_h = scan.log_scan(log_a, log_b, log_h0, backend="numpy")
    log_b[0, 1, 0] = -np.inf
    with pytest.raises(ValueError, match="log_b contains NaN or inf"):
        scan.log_scan(log_a, log_b, log_h0, backend=backend)
    with pytest.raises(ValueError, match="log_b contains NaN or inf"):
        scan.log_scan_backward(log_a, log_b, log_h, log_h, log_h0, backend=backend)


# ---------------------------------------------------------------------------------------------------------
# out=: the caller's buffer; the Numba backend's NaN/inf check fused into the kernel (issue 13)
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method,backend", CPU_CASES)
def test_out_gives_the_fresh_call_bit_for_bit_and_is_returned(method, backend, dtype):
    rng = np.random.default_rng(11)
    for shape in [(2, 1), (2, 7, 3), (3, 64, 2, 5), (1, 1025, 4)]:
        a, b, h0, _ = _problem(rng, shape, dtype)
        for h0_ in (h0, None):
            fresh = scan.linear_scan(a, b, h0_, method, backend)
            out = np.full(shape, np.nan, dtype=dtype)  # stale contents must not leak into the result
            got = scan.linear_scan(a, b, h0_, method, backend, out=out)
            assert got is out and np.array_equal(out, fresh)
    sl = (slice(None), slice(None, None, 2), slice(None, None, 2))  # non-contiguous inputs, contiguous out
    a, b, h0, _ = _problem(rng, (2, 14, 6), dtype)
    out = np.empty((2, 7, 3), dtype=dtype)
    scan.linear_scan(a[sl], b[sl], h0[:, ::2], method, backend, out=out)
    assert np.array_equal(out, scan.linear_scan(a[sl], b[sl], h0[:, ::2], method, backend))


def _bad_outs(a, b, h0):
    big = np.empty(a.shape + (2,), dtype=a.dtype)
    read_only = np.empty_like(a)
    read_only.flags.writeable = False
    return [
        (a.tolist(), "out must be a numpy.ndarray, got list"),
        (np.empty(a.shape[:2], a.dtype), r"out must have the shape of a \(2, 4, 3\), got \(2, 4\)"),
        (np.empty(a.shape, np.float32), r"out must have the dtype of a \(float64\), got float32"),
        (big[..., 0], "out must be C-contiguous"),
        (np.empty(a.shape[::-1], a.dtype).T, "out must be C-contiguous"),
        (read_only, "out must be writeable"),
        (a, "out must not share memory with a"),
        (b, "out must not share memory with b"),
        (np.broadcast_to(np.empty(a.shape[2:]), a.shape), "out must be C-contiguous"),
    ]


@pytest.mark.parametrize("method,backend", CPU_CASES)
def test_bad_out_is_rejected_with_its_name(method, backend):
    a, b, h0, _ = _good()
    for out, match in _bad_outs(a, b, h0):
        with pytest.raises(ValueError, match=match):
            scan.linear_scan(a, b, h0, method, backend, out=out)
    # an out that holds h0 in its memory: a flat buffer, h0 a view of its start
    buf = np.zeros(a.size + h0.size)
    out, h0_view = buf[:a.size].reshape(a.shape), buf[:h0.size].reshape(h0.shape)
    h0_view[...] = h0
    with pytest.raises(ValueError, match="out must not share memory with h0"):
        scan.linear_scan(a, b, h0_view, method, backend, out=out)
    # disjoint parts of one buffer are fine
    buf = np.empty(2 * a.size)
    a2, out = buf[:a.size].reshape(a.shape), buf[a.size:].reshape(a.shape)
    a2[...] = a
    got = scan.linear_scan(a2, b, h0, method, backend, out=out)
    assert np.array_equal(got, scan.linear_scan(a, b, h0, method, backend))


def test_out_with_the_cuda_backend_is_refused_by_name():
    a, b, h0, _ = _good()
    with pytest.raises(ValueError, match="out is not supported with backend='cuda'"):
        scan.linear_scan(a, b, h0, backend="cuda", out=np.empty_like(a))


def _with(x, index, value):
    x = x.copy()
    x[index] = value
    return x


@pytest.mark.parametrize("method", scan.METHODS)
@pytest.mark.parametrize("index", [(0, 0, 0), (1, 3, 2), (1, 7, 1), (0, 7, 2)], ids=str)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_numba_names_a_non_finite_input_through_the_fused_check(method, index, value):
    """The Numba backend no longer reads a and b before the scan: the kernel's flag fails, then the culprit
    is named as before, at the first, a middle and the last step, with and without out=."""
    a, b, h0, _ = _problem(np.random.default_rng(12), (2, 8, 3))
    cases = [("a", (_with(a, index, value), b, h0)), ("b", (a, _with(b, index, value), h0)),
             ("h0", (a, b, _with(h0, (index[0], index[2]), value)))]
    for name, args in cases:
        for out in (None, np.empty_like(a)):
            with pytest.raises(ValueError, match=f"^{name} contains NaN or inf$"):
                scan.linear_scan(*args, method=method, backend="numba", out=out)


def test_a_inf_times_a_zero_state_is_caught():
    """inf * 0 = NaN: a_t = inf where h_{t-1} = 0 exactly (b = 0, h0 = 0) still fails the flag."""
    a, b = np.ones((1, 4, 2)), np.zeros((1, 4, 2))
    a[0, 2, 1] = np.inf
    for method in scan.METHODS:
        with pytest.raises(ValueError, match="^a contains NaN or inf$"):
            scan.linear_scan(a, b, method=method, backend="numba")


@pytest.mark.parametrize("method", scan.METHODS)
def test_finite_inputs_whose_scan_overflows_name_the_inputs(method):
    """h_1 = 1e30 * 1e10 overflows float32; a_2 = 0 then gives 0 * inf = NaN, and the NaN is carried to the
    last step (the sequential kernel reads its flag there). The Numba backend says so, naming a, b and h0."""
    a = np.array([[[1.0], [1e30], [0.0], [1.0]]], dtype=np.float32)
    b = np.array([[[1e10], [0.0], [1.0], [1.0]]], dtype=np.float32)
    h0 = np.zeros((1, 1), np.float32)
    with pytest.raises(ValueError, match=r"^a has float32 values up to 1e\+30, b has float32 values up to 1e\+10, "
                                         r"h0 has float32 values up to 0: the scan h_t = a_t h_\{t-1\} \+ b_t "
                                         r"overflowed to inf or NaN \(float32 holds at most 3.4e\+38\); scale them "
                                         r"down, or use float64$"):
        scan.linear_scan(a, b, h0, method=method, backend="numba")
    with pytest.raises(ValueError, match=r"^a has float64 .*overflowed to inf or NaN \(float64 holds at most "
                                         r"1.8e\+308\); scale them down$"):
        scan.linear_scan(np.full((1, 3, 1), 1e200), np.full((1, 3, 1), 1e200), method=method, backend="numba")


@pytest.mark.parametrize("T", [1, 2, 3, 8, 9])
def test_checked_kernels_flag_every_position(T):
    """The kernels' own flags: False for a NaN at any (b, t, c), True for finite inputs; the sequential one
    reads it off the last step (NaN and inf are absorbing in the recurrence), the Blelloch one off all of h."""
    from minimal.scan import numba_linear as _scan_numba

    rng = np.random.default_rng(T)
    a, b = rng.uniform(-1, 1, (2, T, 3)), rng.standard_normal((2, T, 3))
    h0, h = np.zeros((2, 3)), np.empty((2, T, 3))
    scratch = _scan_numba.scratch_for(a)
    assert _scan_numba.sequential_into_checked(a, b, h0, h)
    assert _scan_numba.blelloch_into_checked(a, b, h0, h, scratch)
    for index in np.ndindex(a.shape):
        for x in ("a", "b"):
            args = {"a": a, "b": b}
            args[x] = _with(args[x], index, np.nan)
            assert not _scan_numba.sequential_into_checked(args["a"], args["b"], h0, h)
            assert not _scan_numba.blelloch_into_checked(args["a"], args["b"], h0, h, scratch)
    h[1, T // 2, 2] = np.inf
    assert not _scan_numba.all_finite(h)


@pytest.mark.parametrize("T", [1, 2, 5])
def test_backward_kernels_flag_every_position(T):
    """The backward kernels read their flag off their outputs (and h's last step, which the adjoint never reads):
    a NaN, inf or -inf at any position of a, h, dh or h0 fails it, in the loop and in the tree. Zeros in dh make
    the inf * 0 = NaN paths run too."""
    from minimal.scan import numba_linear as _scan_numba

    rng = np.random.default_rng(T)
    a, h, dh = rng.uniform(-1, 1, (2, T, 3)), rng.standard_normal((2, T, 3)), rng.standard_normal((2, T, 3))
    dh[1] = 0.0
    h0 = rng.standard_normal((2, 3))
    kernels = (_scan_numba.sequential_backward, _scan_numba.blelloch_backward)
    for fn in kernels:
        assert fn(a, h, dh, h0)[3]
    for value in (np.nan, np.inf, -np.inf):
        for name, x in (("a", a), ("h", h), ("dh", dh), ("h0", h0)):
            for index in np.ndindex(x.shape):
                args = {"a": a, "h": h, "dh": dh, "h0": h0}
                args[name] = _with(x, index, value)
                for fn in kernels:
                    assert not fn(args["a"], args["h"], args["dh"], args["h0"])[3], (fn.__name__, name, index)


@pytest.mark.parametrize("method", scan.METHODS)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_numba_backward_names_a_non_finite_input(method, value):
    """No pass over the inputs before the adjoint: the culprit is named after the kernel's flag fails."""
    a, b, h0, dh = _problem(np.random.default_rng(13), (2, 6, 3))
    h = scan.linear_scan(a, b, h0, method, "numba")
    for name, x in (("a", a), ("h", h), ("dh", dh), ("h0", h0)):
        args = {"a": a, "h": h, "dh": dh, "h0": h0}
        args[name] = _with(x, (1, 2) if name == "h0" else (1, 5, 2), value)  # the last step of h: never read
        with pytest.raises(ValueError, match=f"^{name} contains NaN or inf$"):
            scan.linear_scan_backward(args["a"], args["h"], args["dh"], args["h0"], method, "numba")


def test_numba_backward_overflow_names_the_inputs():
    a = np.full((1, 3, 1), 1e200)
    with pytest.raises(ValueError, match=r"^a has float64 values up to 1e\+200, .*the adjoint g_t = dh_t \+ "
                                         r"a_\{t\+1\} g_\{t\+1\} overflowed to inf or NaN"):
        scan.linear_scan_backward(a, np.ones_like(a), a, None, "sequential", "numba")


def test_vectorised_exp_and_log1p_agree_with_numpy():
    """The log-space kernels' own exp (x in [-708, 0]) and log1p (e in [0, 1]), written so that Numba
    vectorises them, agree with NumPy's to a few float64 ulp; outside their ranges they clamp as documented."""
    from numba import njit

    from minimal.scan import numba_log as K

    @njit
    def apply(fn_id, x):
        y = np.empty_like(x)
        for i in range(x.size):
            y[i] = K.exp_nonpositive(x[i]) if fn_id == 0 else K.log1p_unit(x[i])
        return y

    rng = np.random.default_rng(0)
    x = -np.concatenate([np.linspace(0, 708, 200_001), np.geomspace(1e-300, 708, 10_001), rng.uniform(0, 60, 10**5)])
    ulp = np.finfo(np.float64).eps
    assert np.max(np.abs(apply(0, x) / np.exp(x) - 1)) <= 2 * ulp
    e = np.concatenate([np.linspace(0, 1, 200_001)[1:], np.geomspace(1e-300, 1, 10_001), rng.uniform(0, 1, 10**5)])
    assert np.max(np.abs(apply(1, e) / np.log1p(e) - 1)) <= 4 * ulp
    assert apply(1, np.zeros(1))[0] == 0.0
    edge = apply(0, np.array([0.0, 1e-300, 3.0, -708.5, -1e10, -np.inf, np.nan]))
    assert list(edge[:6]) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0] and np.isnan(edge[6])


def test_float32_exp_agrees_with_numpy_to_two_float32_ulp():
    """The float32 kernels' exp (GELU's, the causal softmax's) is within 2 float32 ulp of the exact exp of its
    float32 argument on [-87, 0], 0 below -87 (where exp < 1.7e-38) and 1 above 0, NaN for NaN,
    and float32 throughout."""
    from numba import njit

    from minimal.scan import numba_log as K

    @njit
    def apply(x):
        y = np.empty_like(x)
        for i in range(x.size):
            y[i] = K.exp_nonpositive_f32(x[i])
        return y

    rng = np.random.default_rng(0)
    x = -np.concatenate([np.linspace(0, 87, 1_000_001), np.geomspace(1e-38, 87, 10_001),
                         rng.uniform(0, 20, 10**5)]).astype(np.float32)
    y = apply(x)
    assert y.dtype == np.float32
    exact = np.exp(x.astype(np.float64))
    assert np.all(np.abs(y - exact) <= 2 * np.spacing(exact.astype(np.float32)).astype(np.float64))
    edge = apply(np.array([0.0, 1e-38, 3.0, -87.5, -1e10, -np.inf, np.nan], dtype=np.float32))
    assert list(edge[:6]) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0] and np.isnan(edge[6])


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_numba_log_scan_names_a_non_finite_input_through_the_fused_check(value):
    """The log-space kernels check inputs (and outputs) in their own pass; -inf matters here: log a = -inf
    (a = 0) would give a finite step, so the inputs themselves are flagged."""
    rng = np.random.default_rng(14)
    log_a, log_b, log_h0 = _log_problem(rng, (2, 6, 3))
    log_h = scan.log_scan(log_a, log_b, log_h0)
    dlog_h = rng.standard_normal(log_h.shape)
    for index in [(0, 0, 0), (1, 3, 2), (1, 5, 1)]:
        for name in ("log_a", "log_b", "log_h0"):
            args = {"log_a": log_a, "log_b": log_b, "log_h0": log_h0}
            args[name] = _with(args[name], (index[0], index[2]) if name == "log_h0" else index, value)
            with pytest.raises(ValueError, match=f"^{name} contains NaN or inf$"):
                scan.log_scan(args["log_a"], args["log_b"], args["log_h0"])
            with pytest.raises(ValueError, match=f"^{name} contains NaN or inf$"):
                scan.log_scan_backward(args["log_a"], args["log_b"], log_h, dlog_h, args["log_h0"])
        for name in ("log_h", "dlog_h"):
            args = {"log_h": log_h, "dlog_h": dlog_h}
            args[name] = _with(args[name], index, value)
            with pytest.raises(ValueError, match=f"^{name} contains NaN or inf$"):
                scan.log_scan_backward(log_a, log_b, args["log_h"], args["dlog_h"], log_h0)


def test_numba_log_scan_overflow_names_the_inputs():
    """Finite logs near float64's limit: log a + log h0 overflows to inf, and the error says so."""
    log_a = np.full((1, 2, 1), 1e308)
    with pytest.raises(ValueError, match=r"^log_a has float64 values up to 1e\+308, .*the log-space scan .* "
                                         r"overflowed to inf or NaN"):
        scan.log_scan(log_a, np.zeros_like(log_a), np.full((1, 1), 1e308))


# ---------------------------------------------------------------------------------------------------------
# no elements: B = 0 or an empty channel axis gives empty results (T = 0 is an error, tested above)
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(0, 5, 3), (0, 5), (2, 5, 0), (2, 3, 0, 4)], ids=str)
@pytest.mark.parametrize("method,backend", CPU_CASES)
def test_no_elements_give_empty_results(method, backend, shape):
    a, b, h0, dh = _problem(np.random.default_rng(9), shape)
    h = scan.linear_scan(a, b, h0, method, backend)
    assert h.shape == shape and h.dtype == a.dtype
    grads = scan.linear_scan_backward(a, h, dh, h0, method, backend)
    assert [g.shape for g in grads] == [shape, shape, h0.shape]
    log_h = scan.log_scan(a, b, h0, backend=backend)
    assert log_h.shape == shape
    grads = scan.log_scan_backward(a, b, log_h, dh, h0, backend=backend)
    assert [g.shape for g in grads] == [shape, shape, h0.shape]


# ---------------------------------------------------------------------------------------------------------
# the CUDA backend delegates to cuda_kernels.scan
# ---------------------------------------------------------------------------------------------------------

def test_cuda_backend_without_its_module_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda_kernels.scan", None)  # makes the import fail
    a, b, h0, dh = _good()
    with pytest.raises(ValueError, match="backend='cuda' needs the module cuda_kernels.scan"):
        scan.linear_scan(a, b, h0, backend="cuda")
    with pytest.raises(ValueError, match="backend='cuda' needs the module cuda_kernels.scan"):
        scan.linear_scan_backward(a, b, dh, h0, backend="cuda")
    with pytest.raises(ValueError, match="backend='cuda' needs the module cuda_kernels.scan"):
        scan.log_scan(a, b, h0, backend="cuda")


def test_cuda_bench_without_its_module_says_so(monkeypatch):
    """The GPU benchmark (minimal.bench.gpu) runs the kernels of cuda_kernels: without them it is refused up front."""
    monkeypatch.setitem(sys.modules, "cuda_kernels.scan", None)
    with pytest.raises(ValueError, match="backend='cuda' needs the module cuda_kernels.scan"):
        bench.bench_scan(backend="cuda")
    with pytest.raises(ValueError, match="backend='cuda' needs the module cuda_kernels.scan"):
        bench.bench_window()


def test_cuda_backend_calls_cuda_kernels_scan_with_the_agreed_signature(monkeypatch):
    import cuda_kernels

    calls = []
    fake = types.ModuleType("cuda_kernels.scan")
    fake.linear_scan = lambda a, b, h0, method: calls.append(("fwd", method)) or _ref(a, b, h0)
    fake.linear_scan_backward = lambda a, h, dh, h0, method: (calls.append(("bwd", method))
                                                              or _ref_backward(a, h, dh, h0))
    fake.log_linear_scan = lambda la, lb, lh0, method: (calls.append(("log fwd", method))
                                                        or scan.log_scan(la, lb, lh0, "numpy"))
    fake.log_linear_scan_backward = lambda la, lb, lh, dlh, lh0, method: (
        calls.append(("log bwd", method)) or scan.log_scan_backward(la, lb, lh, dlh, lh0, "numpy"))
    monkeypatch.setitem(sys.modules, "cuda_kernels.scan", fake)
    monkeypatch.setattr(cuda_kernels, "scan", fake, raising=False)
    a, b, h0, dh = _good()
    h = scan.linear_scan(a, b, h0, method="sequential", backend="cuda")
    scan.linear_scan_backward(a, h, dh, h0, method="blelloch", backend="cuda")
    log_h = scan.log_scan(a, b, h0, backend="cuda")
    scan.log_scan_backward(a, b, log_h, dh, h0, backend="cuda")
    scan.linear_scan(a, b, h0, method="auto", backend="cuda")
    assert calls == [("fwd", "sequential"), ("bwd", "blelloch"), ("log fwd", "auto"), ("log bwd", "auto"),
                     ("fwd", "auto")]
    with pytest.raises(ValueError, match="h0 must have shape"):  # inputs are checked before delegating
        scan.linear_scan(a, b, h0[:1], backend="cuda")


# ---------------------------------------------------------------------------------------------------------
# the benchmark runs and reports against a same-run copy
# ---------------------------------------------------------------------------------------------------------

def test_bench_scan_reports_every_scan_against_a_copy():
    rows = bench.bench_scan(shape=(2, 64, 16), repeats=1)
    names = [r["name"] for r in rows]
    assert names == ["np.copyto (bound)", "np.copyto, fresh dst", "np.add a + b -> h", "numpy sequential",
                     "numba sequential",
                     "public linear_scan", "public linear_scan out=", "numba blelloch", "numba log-space",
                     "public log_scan"]
    for r in rows:
        assert r["bytes"] == 3 * 4 * 2 * 64 * 16 and r["seconds"] > 0 and r["vs_copy"] > 0
    table = bench.format_table(rows)
    assert "numba blelloch" in table and "blelloch / numba sequential" in table
    assert "public linear_scan: method='sequential'" in table


def test_bench_rejects_unknown_backend_and_arguments():
    with pytest.raises(ValueError, match="backend must be one of"):
        bench.bench_scan(backend="numpy")
    with pytest.raises(ValueError, match="shape must be"):
        bench.bench_scan(shape=(2, 64))
