"""The log-space min cells' recurrence in linear form (``minimal.cells._min_log_linear``): where every b_t is a
normal number, h_t = a_t h_{t−1} + b_t in float64 is the log-space recurrence of App. B.3 to float64 rounding; where
one is not, the cells run the exact log-space pass instead."""
import numpy as np
import pytest

from minimal.cells import _min_log_linear as L
from minimal.cells import _min_log_linear_f32 as L32
from minimal.cells import mingru, minlstm

CELLS = pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
N_OUT = {mingru: 6, minlstm: 7}     # the forward kernels' output arrays: z, h, ... / f', i', h, ...


def _linear_form_off(monkeypatch):
    for module in (L, L32):
        for name in module.__all__:
            if name.endswith("_into") or name.endswith("_into_f32"):
                monkeypatch.setattr(module, name, lambda *args: False)


def _run(cell, params, x, h0, dy, **kw):
    h, cache = cell.forward(params, x, h0, log_space=True, **kw)
    dx, grads = cell.backward(params, cache, dy)
    return (h, dx) + tuple(grads.values())


def _problem(cell, rng, dtype, with_h0, B=4, T=33, D=6, H=40):
    params = {k: v.astype(dtype) for k, v in cell.init(rng, D, H).items()}
    x = rng.standard_normal((B, T, D)).astype(dtype)
    h0 = rng.uniform(0.1, 1.0, (B, H)).astype(dtype) if with_h0 else None
    dy = rng.standard_normal((B, T, H)).astype(dtype)
    return params, x, h0, dy


def _kernel_accepts(cell, params, x, h0):
    """Whether the linear-form forward kernel takes these inputs (returns True) rather than leaving them."""
    from minimal.cells._min_modes import affine, initial_state

    k = [affine(params, x, n) for n in (("f", "i", "h") if cell is minlstm else ("z", "h"))]
    k += [np.zeros(k[0].shape[-1], k[0].dtype)] * len(k)     # the kernels add the biases: here, k holds them
    outs = [np.empty_like(k[0]) for _ in range(N_OUT[cell])]
    if k[0].dtype == np.float32:      # the float32-register kernels, as the cells choose
        fn = L32.minlstm_log_linear_into_f32 if cell is minlstm else L32.mingru_log_linear_into_f32
    else:
        fn = L.minlstm_log_linear_into if cell is minlstm else L.mingru_log_linear_into
    return fn(*k, initial_state(h0, k[0]), h0 is not None, L.tiny(k[0]), *outs)


@CELLS
@pytest.mark.parametrize("with_h0", [False, True])
def test_in_float64_the_linear_form_is_the_log_space_reference(rng, cell, with_h0):
    """h, dx and every gradient against the NumPy log-space cell (log a, log b, logaddexp): float64 rounding."""
    params, x, h0, dy = _problem(cell, rng, np.float64, with_h0)
    assert _kernel_accepts(cell, params, x, h0)
    ref = _run(cell, params, x, h0, dy, backend="numpy")
    for got, want in zip(_run(cell, params, x, h0, dy), ref):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.abs(want).max())


@CELLS
def test_the_linear_form_keeps_the_steps_derivatives_for_its_reverse_pass_and_no_pre_activations(rng, cell):
    """The linear form caches ∂h_t/∂k_n,t for every gate n and a_t (minGRU: σ(−k_z,t); minLSTM: f'_t), which its
    reverse pass multiplies by the adjoint, and neither the pre-activations nor h̃ (the reverse pass reads no k).
    minGRU's a_t is 1 − z_t to float64 rounding; each j is the derivative of the kernel's own h_t, by central
    differences."""
    params, x, h0, dy = _problem(cell, rng, np.float64, True)
    h, cache = cell.forward(params, x, h0, log_space=True)
    gates = ("f", "i", "h") if cell is minlstm else ("z", "h")
    j = {"f": cache.j_f, "i": cache.j_i, "h": cache.j_h} if cell is minlstm else {"z": cache.j_z, "h": cache.j_h}
    assert all(getattr(cache, "k_" + n) is None for n in gates) and cache.h_tilde is None
    assert all(a is not None and a.shape == h.shape for a in j.values())
    if cell is mingru:
        assert cache.a.shape == h.shape
        np.testing.assert_allclose(cache.a, 1.0 - cache.z, rtol=1e-15, atol=1e-15)
    # h_t's rows and channels depend on step t's pre-activations each through its own, so one central difference
    # over a whole step t gives every ∂h_t/∂k_n,t of that step at once
    from minimal.cells._min_modes import affine
    fn = L.minlstm_log_linear_into if cell is minlstm else L.mingru_log_linear_into
    no_bias = [np.zeros(h0.shape[1])] * len(gates)
    eps = 1e-6
    for n in gates:
        for t in (0, 5, x.shape[1] - 1):
            moved = []
            for s in (eps, -eps):
                k = {m: affine(params, x, m) for m in gates}
                k[n][:, t] += s
                outs = [np.empty_like(k[n]) for _ in range(N_OUT[cell])]
                assert fn(*(k[m] for m in gates), *no_bias, h0, True, L.tiny(h0), *outs)
                moved.append(outs[1 if cell is mingru else 2][:, t])      # h
            fd = (moved[0] - moved[1]) / (2 * eps)
            assert np.abs(fd - j[n][:, t]).max() <= 1e-6 * np.abs(j[n][:, t]).max()


@CELLS
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_adds_the_biases_as_the_affine_layer_does_bit_for_bit(rng, cell, dtype):
    """k + b read inside the kernel (storage dtype, then float64) gives every output bit for bit as k already
    holding b (``_min_modes.affine``) with zero biases."""
    from minimal.cells._min_modes import affine

    params = {k: (v + rng.standard_normal(v.shape)).astype(dtype) for k, v in cell.init(rng, 6, 40).items()}
    x = rng.standard_normal((4, 33, 6)).astype(dtype)
    h0 = rng.uniform(0.1, 1.0, (4, 40)).astype(dtype)
    gates = ("f", "i", "h") if cell is minlstm else ("z", "h")
    fn = L.minlstm_log_linear_into if cell is minlstm else L.mingru_log_linear_into
    runs = []
    for k, b in (([affine(params, x, n, bias=False) for n in gates], [params["b_" + n] for n in gates]),
                 ([affine(params, x, n) for n in gates], [np.zeros(40, dtype)] * len(gates))):
        outs = [np.empty_like(k[0]) for _ in range(N_OUT[cell])]
        assert fn(*k, *b, h0, True, L.tiny(k[0]), *outs)
        runs.append(outs)
    assert all(np.array_equal(a, b) for a, b in zip(*runs))


@CELLS
@pytest.mark.parametrize("seed", range(4))
def test_in_float32_the_linear_form_is_as_close_to_float64_as_the_log_pass(cell, seed, monkeypatch):
    """float32 h, dx, grads against the float64 NumPy reference of the same inputs: the largest error relative to
    each array's largest entry, 20 seeds of this problem, was 6.4e-7 (minGRU; 5.6e-7 when its reverse pass
    recomputed the gates instead of reading the forward's derivatives) / 7.1e-7 (minLSTM, either way) for the
    linear form and 6.4e-7 / 6.2e-7 for the log-space pass; both are held to the fused cells' float32 bound, 3e-6."""
    rng = np.random.default_rng(seed)
    params, x, h0, dy = _problem(cell, rng, np.float32, seed % 2 == 1)
    ref = _run(cell, {k: v.astype(np.float64) for k, v in params.items()}, x.astype(np.float64),
               None if h0 is None else h0.astype(np.float64), dy.astype(np.float64), backend="numpy")
    linear = _run(cell, params, x, h0, dy)
    _linear_form_off(monkeypatch)
    log_pass = _run(cell, params, x, h0, dy)
    for lin, log, want in zip(linear, log_pass, ref):
        assert lin.dtype == np.float32
        scale = np.abs(want).max()
        assert np.abs(lin - want).max() <= 3e-6 * scale
        assert np.abs(log - want).max() <= 3e-6 * scale


@CELLS
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_coefficient_below_the_normal_range_leaves_the_cell_to_the_log_space_pass(rng, cell, dtype, monkeypatch):
    """A gate bias of −800 (float64) / −100 (float32) puts z_t (minGRU) or i'_t (minLSTM) of one channel below the
    dtype's smallest normal number, so b_t = z_t h̃_t underflows: the kernel refuses, and the cell gives exactly
    what the log-space pass gives, forward and backward."""
    params, x, h0, dy = _problem(cell, rng, dtype, True)
    gate = "b_i" if cell is minlstm else "b_z"
    params[gate][3] = -800.0 if dtype == np.float64 else -100.0
    assert not _kernel_accepts(cell, params, x, h0)
    got = _run(cell, params, x, h0, dy)
    _linear_form_off(monkeypatch)
    for a, b in zip(got, _run(cell, params, x, h0, dy)):
        assert np.array_equal(a, b)
    assert all(np.isfinite(a).all() for a in got)


def test_tiny_is_the_storage_dtypes_smallest_normal_number():
    assert L.tiny(np.zeros(1, np.float32)) == np.finfo(np.float32).tiny
    assert L.tiny(np.zeros(1, np.float64)) == np.finfo(np.float64).tiny


@CELLS
@pytest.mark.parametrize("log_space", [True, False])
def test_no_hidden_unit_runs_forward_and_backward(rng, cell, log_space):
    """H = 0 (params cut to no row; ``init`` itself asks for H >= 1): the forward gives the (B, T, 0) states, as
    the log-space pass does (the kernel's check holds over no channel), and the backward a zero dx and empty
    gradients of the params' shapes."""
    params = {k: v[:0] for k, v in cell.init(rng, 3, 2).items()}
    x = rng.standard_normal((2, 4, 3))
    if log_space:
        assert _kernel_accepts(cell, params, x, None)
    h, cache = cell.forward(params, x, log_space=log_space)
    assert h.shape == (2, 4, 0)
    if log_space:
        assert cache.log_h.shape == (2, 4, 0)
    dx, grads = cell.backward(params, cache, np.zeros_like(h))
    assert dx.shape == x.shape and not dx.any()
    assert {k: g.shape for k, g in grads.items()} == {k: v.shape for k, v in params.items()}


def test_the_cached_log_h_is_log_h_down_to_float64_s_smallest_normal_number(rng):
    """A float64 minGRU state of ~1e-305 (k_z = −702: b_t = z_t h̃_t above float64's tiny, so the linear form
    keeps it) caches log h = log(h), not the log of a clamped value."""
    params = mingru.init(rng, 2, 3)
    params["b_z"][:] = -702.0
    params["W_z"][:] = 0.0
    x = rng.standard_normal((1, 5, 2))
    assert _kernel_accepts(mingru, params, x, None)
    h, cache = mingru.forward(params, x, log_space=True)
    assert h.max() < 1e-300 and h.min() > np.finfo(np.float64).tiny
    np.testing.assert_allclose(cache.log_h, np.log(h), rtol=1e-14)


def test_the_float32_log_is_within_two_roundings_of_its_size():
    """``log_normal_f32`` over 2 million float32 numbers drawn uniformly from the bit patterns of the normal range,
    and the range's ends: |error| <= 2 · 2^-24 (1 + |log x|) against float64's log (the largest seen: 0.99 of
    2^-24 (1 + |log x|), 3.0 float32 ulp of the result)."""
    from numba import njit

    @njit
    def run(x, out):
        for n in range(x.shape[0]):
            out[n] = L32.log_normal_f32(x[n])

    rng = np.random.default_rng(0)
    x = rng.integers(0x00800000, 0x7F800000, 2_000_000).astype(np.int32).view(np.float32)
    x = np.concatenate([x, np.float32([np.finfo(np.float32).tiny, np.finfo(np.float32).max, 1.0, 0.5, 2.0,
                                       np.sqrt(2.0), np.nextafter(np.float32(1.0), 0), np.nextafter(np.float32(1.0), 2)])])
    got = np.empty_like(x)
    run(x, got)
    want = np.log(x.astype(np.float64))
    assert got.dtype == np.float32 and got[-6] == 0.0       # log 1 = 0 exactly
    assert np.all(np.abs(got - want) <= 2 * 2.0 ** -24 * (1.0 + np.abs(want)))


@pytest.mark.parametrize("scale", [1.0, 4.0, 8.0])
def test_the_float32_register_linear_form_rounds_its_gates_as_float32_arithmetic_does(scale):
    """A float32 log-space cell runs the linear form with its gates in float32 registers (``_min_log_linear_f32``).
    Against the float64-register kernels on the same float32 pre-activations (both accept every problem here: each
    b_t stays above float32's smallest normal number, tiny), each gate is off by float32's roundings as in the
    vanilla twin (tests/test_gates_numba.py): |Δz|, |Δ(1 − z)| <= 8 · 2^-24 |z| + 3 tiny (|1 − z|), |Δf'|, |Δi'| <=
    4 · 2^-24 (1 + |k_f| + |k_i|) |f'| + 3 tiny (|i'|); j_h = z g'(k_h) (i' g'(k_h)) takes two more products, so 16 · 2^-24
    |j_h| + 3 tiny (minGRU) and 8 · 2^-24 (1 + |k_f| + |k_i|) |j_h| + 3 tiny (minLSTM). Over these 30 problems the
    largest errors were 4.14 (z, 1 − z), 1.94 / 1.96 (f', i'), 7.76 / 3.81 (j_h) of those units, and some entries
    differ in every array. The states and the step's derivatives j_z, j_f, j_i stay within 3.4e-7 of each array's
    largest entry (held to 2e-6, the vanilla twin's bound), and log h is the float32 log of the kernel's own h
    (the bound of the test above)."""
    f32, tiny, u = np.float32, np.finfo(np.float32).tiny, 2.0 ** -24
    for seed in range(10):
        rng = np.random.default_rng(seed)
        k_f, k_i, k_z, k_h = ((scale * rng.standard_normal((4, 33, 40))).astype(f32) for _ in range(4))
        b_f, b_i, b_h = (rng.standard_normal(40).astype(f32) for _ in range(3))
        h0 = rng.uniform(0.1, 1.0, (4, 40)).astype(f32)
        lstm, gru = {}, {}
        for regs, run_lstm, run_gru in (("f64", L.minlstm_log_linear_into, L.mingru_log_linear_into),
                                        ("f32", L32.minlstm_log_linear_into_f32, L32.mingru_log_linear_into_f32)):
            lstm[regs] = [np.empty_like(k_f) for _ in range(7)]      # f', i', h, log h, j_f, j_i, j_h
            gru[regs] = [np.empty_like(k_f) for _ in range(6)]       # z, h, log h, 1 − z, j_z, j_h
            assert run_lstm(k_f, k_i, k_h, b_f, b_i, b_h, h0, True, tiny, *lstm[regs])
            assert run_gru(k_z, k_h, b_f, b_h, h0, True, tiny, *gru[regs])
        k_sum = 1.0 + np.abs((k_f + b_f).astype(np.float64)) + np.abs((k_i + b_i).astype(np.float64))
        lstm64, lstm32, gru64, gru32 = lstm["f64"], lstm["f32"], gru["f64"], gru["f32"]
        for want, got, rel in ((lstm64[0], lstm32[0], 4 * u * k_sum), (lstm64[1], lstm32[1], 4 * u * k_sum),
                               (lstm64[6], lstm32[6], 8 * u * k_sum), (gru64[0], gru32[0], 8 * u),
                               (gru64[3], gru32[3], 8 * u), (gru64[5], gru32[5], 16 * u)):
            assert got.dtype == f32
            err = np.abs(got.astype(np.float64) - want)
            assert np.all(err <= rel * np.abs(want.astype(np.float64)) + 3 * tiny)
            assert np.any(err > 0)
        for want, got in zip([lstm64[n] for n in (2, 4, 5)] + [gru64[n] for n in (1, 4)],
                             [lstm32[n] for n in (2, 4, 5)] + [gru32[n] for n in (1, 4)]):
            assert np.abs(got.astype(np.float64) - want).max() <= 2e-6 * np.abs(want).max()
        for h, log_h in ((lstm32[2], lstm32[3]), (gru32[1], gru32[2])):
            want = np.log(h.astype(np.float64))
            assert np.all(np.abs(log_h - want) <= 2 * u * (1.0 + np.abs(want)))


@CELLS
def test_a_float32_cell_runs_the_float32_register_linear_form(rng, cell, monkeypatch):
    name = "minlstm_log_linear_into_f32" if cell is minlstm else "mingru_log_linear_into_f32"
    kernel, calls = getattr(L32, name), []
    monkeypatch.setattr(L32, name, lambda *args: calls.append(args[0].dtype) or kernel(*args))
    for dtype in (np.float32, np.float64):
        params, x, h0, dy = _problem(cell, rng, dtype, True)
        cell.forward(params, x, h0, log_space=True)
    assert calls == [np.float32]


@CELLS
def test_states_at_float32_s_largest_size_stay_finite(rng, cell, monkeypatch):
    """Pre-activations and h0 at float32's largest number: the float32 gates' a_t + b_t / h̃_t can round above 1, so
    the state is capped at that number (module docstring of ``_min_log_linear_f32``); the cell's h is finite, as the
    float64-register kernel's is, and equal to it within 2e-6 of the largest entry."""
    big = np.finfo(np.float32).max
    params = {k: v.astype(np.float32) for k, v in cell.init(rng, 1, 256).items()}
    for k in params:
        params[k][:] = 0.0 if k.startswith("W") else rng.uniform(-5.0, 5.0, params[k].shape)
    params["W_h"][:], params["b_h"][:] = 1.0, 0.0
    x, h0 = np.full((1, 3, 1), big, np.float32), np.full((1, 256), big, np.float32)
    assert _kernel_accepts(cell, params, x, h0)
    h, _ = cell.forward(params, x, h0, log_space=True)
    name = "minlstm_log_linear_into" if cell is minlstm else "mingru_log_linear_into"
    monkeypatch.setattr(L32, name + "_f32", getattr(L, name))
    h64, _ = cell.forward(params, x, h0, log_space=True)
    assert np.isfinite(h).all() and np.isfinite(h64).all() and h.max() == big
    assert np.abs(h.astype(np.float64) - h64).max() <= 2e-6 * big
