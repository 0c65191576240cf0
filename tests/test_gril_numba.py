"""The fused Numba kernels of the GRIL block (``minimal.cells._gril_numba``, ``gril.forward(backend="numba")``)
give the reference's outputs and gradients, and the CPU window benchmark reports its rows."""
import numpy as np
import pytest

pytest.importorskip("numba")

from minimal.bench import kernels as bench
from minimal.cells import _gril_numba  # noqa: E402
from minimal.cells import gril  # noqa: E402
from minimal.gradcheck import TOLERANCE, check_cell, rel_error  # noqa: E402

REF = {"method": "sequential", "backend": "numpy"}  # the plain scan loop
TOL = {np.float64: 1e-12, np.float32: 1e-5}

# (B, T, f, w, s): odd T, T' = 1, s < w (overlap), s == w, s > w (skipped tokens), w = 1, 2, 3, f = 1, 3, 10,
# and w = 4 (the forward's general loop; w <= 3 has its own sweep)
SHAPES = [(2, 9, 3, 3, 2), (2, 7, 3, 3, 1), (1, 3, 10, 3, 1), (2, 11, 10, 2, 1), (3, 12, 3, 2, 2),
          (2, 13, 1, 1, 3), (1, 7, 3, 1, 1), (2, 8, 10, 2, 3), (1, 1, 3, 1, 1), (2, 10, 3, 4, 2)]


def _case(rng, B, T, f, w, per_feature):
    params = gril.init(rng, f, w, per_feature)
    params["beta"] = rng.standard_normal(params["beta"].shape)  # ones would hide a missing β in a gradient
    params["A"] = rng.uniform(-1, 1, (f, f))  # signs and a zero: dA must not divide by A
    params["A"][0, -1] = 0.0
    return params, rng.standard_normal((B, T, f))


def _cast(params, x, dtype):
    return {k: v.astype(dtype) for k, v in params.items()}, x.astype(dtype)


@pytest.mark.parametrize("per_feature", [False, True], ids=["scalar_beta", "beta_f"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"B{B}-T{T}-f{f}-w{w}-s{s}" for B, T, f, w, s in SHAPES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_forward_and_backward_equal_the_numpy_parallel_and_sequential_paths(dtype, shape, per_feature, rng):
    B, T, f, w, s = shape
    params, x = _case(rng, B, T, f, w, per_feature)
    o_ref, cache_ref = gril.forward(params, x, s=s, mode="parallel", **REF)  # float64 reference
    _, cache_seq = gril.forward(params, x, s=s, mode="sequential")
    do = rng.standard_normal(o_ref.shape)
    dx_ref, g_ref = gril.backward(params, cache_ref, do)
    dx_seq, g_seq = gril.backward(params, cache_seq, do)

    p, x_d = _cast(params, x, dtype)
    o, cache = gril.forward(p, x_d, s=s, backend="numba")
    dx, g = gril.backward(p, cache, do.astype(dtype))
    assert o.dtype == dx.dtype == dtype and all(g[k].dtype == dtype for k in g)
    tol = TOL[dtype]
    assert rel_error(o, o_ref) <= tol
    assert rel_error(o, gril.gril_forward_reference(x, *(params[k] for k in ("Q", "q", "beta", "A")), w, s)) <= tol
    assert rel_error(cache.Z, cache_ref.Z) <= tol
    assert rel_error(dx, dx_ref) <= tol and rel_error(dx, dx_seq) <= tol
    for name in params:
        assert g[name].shape == params[name].shape
        assert rel_error(g[name], g_ref[name]) <= tol, name
        assert rel_error(g[name], g_seq[name]) <= tol, name


def test_kernel_fused_is_the_default_and_unfused_builds_every_window_then_scans(rng):
    params, x = _case(rng, 2, 9, 3, 3, True)
    _, fused = gril.forward(params, x, s=2, kernel="fused", backend="numba")
    _, default = gril.forward(params, x, s=2)
    _, unfused = gril.forward(params, x, s=2, method="blelloch", kernel="unfused")
    assert fused.C is None and fused.x is x and default.C is None and default.x is x
    assert unfused.x is None and unfused.C is not None  # all C_k and U_k built, then the Numba Blelloch scan
    with pytest.raises(ValueError, match="kernel must be one of"):
        gril.forward(params, x, s=2, kernel="tree")
    # the fused kernel runs no linear_scan: a scan algorithm is refused, not ignored, and the message says how
    with pytest.raises(ValueError, match=r"^method='blelloch' has no effect .*kernel='unfused'"):
        gril.forward(params, x, s=2, method="blelloch")
    with pytest.raises(ValueError, match=r"^kernel='fused' has no NumPy version"):
        gril.forward(params, x, s=2, kernel="fused", backend="numpy")


@pytest.mark.parametrize("name", ["T1-w1", "T5-w2-s1", "T7-w3-s2-beta_f", "T6-w2-s2", "T7-w1-s3"])
def test_fused_backward_matches_finite_differences(name):
    ex = {e.name: e for e in gril.examples(np.random.default_rng(0))}[f"parallel-numba-{name}"]
    assert ex.kwargs["backend"] == "numba"
    errors = check_cell(gril, ex)
    assert set(errors) == {"x", "Q", "q", "beta", "A"}
    assert max(errors.values()) <= TOLERANCE, errors


def test_forward_only_call_returns_o_without_the_states(rng):
    """Inference: ``gril_forward`` without return_Z allocates no (B, T', f, f) array and returns o alone."""
    params, x = _case(rng, 2, 9, 3, 3, False)
    args = (x, params["Q"], params["q"], params["beta"], params["A"], 3, 2)
    o = _gril_numba.gril_forward(*args)
    o_Z, Z = _gril_numba.gril_forward(*args, return_Z=True)
    assert isinstance(o, np.ndarray) and o.shape == (2, 4, 3) and Z.shape == (2, 4, 3, 3)
    np.testing.assert_array_equal(o, o_Z)


def test_a_token_in_several_windows_gets_the_sum_of_their_gradients():
    """w = 3, s = 1, f = 1, Q = e_0 e_0^T, A = 0, q = e_2: Z_k = x_k^2 (the oldest token) and r_k = x_{k+2}
    (the newest), so o_k = x_k^2 x_{k+2}, and token 2 is the oldest of window 2 and the newest of window 0."""
    x = np.arange(1.0, 6.0).reshape(1, 5, 1)
    params = {"Q": np.diag([1.0, 0.0, 0.0]), "q": np.array([0.0, 0.0, 1.0]), "beta": np.ones(1),
              "A": np.zeros((1, 1))}
    o, cache = gril.forward(params, x, s=1, backend="numba")
    np.testing.assert_allclose(o[0, :, 0], x[0, :3, 0] ** 2 * x[0, 2:, 0])
    dx, _ = gril.backward(params, cache, np.ones_like(o))
    # d/dx_t Σ_k x_k^2 x_{k+2}: 2 x_t x_{t+2} (as the oldest token, t <= 2) + x_{t-2}^2 (as the newest, t >= 2)
    t = np.arange(5)
    expect = np.where(t <= 2, 2 * x[0, t, 0] * x[0, np.minimum(t + 2, 4), 0], 0) + np.where(
        t >= 2, x[0, np.maximum(t - 2, 0), 0] ** 2, 0)
    np.testing.assert_allclose(dx[0, :, 0], expect)


def test_bench_window_reports_every_row_on_a_tiny_shape():
    rows = bench.bench_window(backend="numba", shape=(2, 9, 3, 3, 2), repeats=1)
    assert [r["name"] for r in rows] == ["np.copyto (bound)", "numpy forward", "numba forward",
                                         "numpy forward+backward", "numba forward+backward"]
    assert all({"name", "seconds", "bytes", "vs_copy"} <= set(r) for r in rows)
    assert {r["name"] for r in rows if "vs_numpy" in r} == {"numba forward", "numba forward+backward"}
    assert rows[0]["bytes"] == 4 * (2 * 9 * 3 + 2 * 4 * 3)  # read x, write o in float32
    table = bench.format_window_table(rows, (2, 9, 3, 3, 2))
    assert "numba forward" in table and "vs copy" in table
    with pytest.raises(ValueError, match="shape must be"):
        bench.bench_window(backend="numba", shape=(2, 9, 3))
