"""The fused passes of minLSTM's and minGRU's gates (``minimal.cells._gates_numba``) and of GELU (``layers._gelu_numba``)
against the NumPy formulas they replace (the cells with backend="numpy" and ``mlp.gelu`` / ``gelu_grad`` keep them
as the reference), their float64 gradient checks, and the vectorisable log."""
import warnings

import numpy as np
import pytest
from scipy.special import expit

from minimal.cells import _gates_numba as gn
from minimal.cells import _gates, _min_modes, mingru, minlstm


def test_log_normal_matches_numpy_to_a_few_ulp():
    x = np.concatenate([0.5 + np.linspace(0.0, 10.0, 10_001), np.geomspace(0.5, 1e300, 5_001),
                        np.geomspace(np.finfo(np.float64).tiny, 0.5, 5_001), np.linspace(1e-3, 1.0, 5_001),
                        np.array([0.5, 1.0, np.sqrt(2.0), 2.0, 1e38, np.finfo(np.float32).tiny])])
    got = np.array([gn.log_normal(v) for v in x])
    np.testing.assert_allclose(got, np.log(x), rtol=4e-16, atol=4e-16)


def _numpy_gates(k_f, k_i, k_h):
    f_n, i_n, delta = minlstm.normalised_gates(k_f, k_i)
    return f_n, i_n, _gates.log_sigmoid(-delta), _gates.log_sigmoid(delta) + _gates.log_g(k_h), _gates.g(k_h)


@pytest.mark.parametrize("scale", [1.0, 30.0, 800.0])
def test_fused_gates_equal_the_numpy_formulas_in_float64(rng, scale):
    k_f, k_i, k_h = (scale * rng.standard_normal(4001) for _ in range(3))
    f_n, i_n, a, b, h_tilde, slopes = minlstm._fused_gates(k_f, k_i, k_h, True)
    assert slopes is None
    # log a and log b are sums of terms of size ~scale: compared to a few ulp of those terms (a log's absolute
    # error is its exp's relative error); the exp of an argument below -708 is 0 (error < 3.3e-308)
    atols = (3.3e-308, 3.3e-308, 4e-15 * scale, 4e-15 * scale, 3.3e-308)
    for got, want, atol in zip((f_n, i_n, a, b, h_tilde), _numpy_gates(k_f, k_i, k_h), atols):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=atol)
    # vanilla: f' = C / (A + C), i' = A / (A + C) (no δ); the δ form's own rounding, a few ulp of terms of size
    # ~scale in δ, is its relative error in f' and i'
    f_v, i_v, a_v, b_v, h_v, (s_f, s_i) = minlstm._fused_gates(k_f, k_i, k_h, False)
    rtol = max(1e-14, 4e-15 * scale)
    # the slopes the vanilla backward multiplies: ∂f'/∂k_f = f' i' σ(−k_f), ∂i'/∂k_i = f' i' σ(−k_i)
    for got, want in ((f_v, f_n), (i_v, i_n), (b_v, i_n * k_h), (s_f, f_n * i_n * expit(-k_f)),
                      (s_i, f_n * i_n * expit(-k_i))):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=3.3e-308)
    np.testing.assert_allclose(f_v + i_v, 1.0, rtol=0, atol=3e-16)
    assert a_v is f_v and h_v is k_h


def test_the_normalised_gates_stay_exact_when_both_gates_underflow():
    # σ(-800) underflows to 0 in float64: f / (f + i) would be 0 / 0; δ = softplus(800) - softplus(801) = -1
    k_f, k_i, k_h = np.array([-800.0]), np.array([-801.0]), np.array([0.3])
    f_n, i_n, a, b, _, _ = minlstm._fused_gates(k_f, k_i, k_h, True)
    np.testing.assert_allclose(f_n, 1 / (1 + np.exp(-1.0)), rtol=1e-15)
    np.testing.assert_allclose(i_n, 1 / (1 + np.exp(1.0)), rtol=1e-15)
    np.testing.assert_allclose(a, -np.log1p(np.exp(-1.0)), rtol=1e-15)
    f_v, i_v, _, b_v, _, (s_f, s_i) = minlstm._fused_gates(k_f, k_i, k_h, False)   # C / (A + C), both scaled
    np.testing.assert_allclose(f_v, 1 / (1 + np.exp(-1.0)), rtol=1e-15)
    np.testing.assert_allclose(i_v, 1 / (1 + np.exp(1.0)), rtol=1e-15)
    np.testing.assert_allclose(b_v, 0.3 / (1 + np.exp(1.0)), rtol=1e-15)
    # σ(−k_f) = σ(−k_i) = 1 to float64: both slopes are f' i' = σ(1) σ(−1), not 0 · ∞
    for s in (s_f, s_i):
        np.testing.assert_allclose(s, 1 / ((1 + np.exp(-1.0)) * (1 + np.exp(1.0))), rtol=1e-15)


@pytest.mark.parametrize("scale", [1.0, 30.0, 800.0])
def test_fused_mingru_gates_equal_the_numpy_formulas_in_float64(rng, scale):
    from scipy.special import expit

    k_z, k_h = (scale * rng.standard_normal(4001) for _ in range(2))
    z, a, b, h_tilde = mingru._fused_gates(k_z, k_h, True)
    want = (expit(k_z), _gates.log_sigmoid(-k_z), _gates.log_sigmoid(k_z) + _gates.log_g(k_h), _gates.g(k_h))
    for got, ref, atol in zip((z, a, b, h_tilde), want, (3.3e-308, 4e-15 * scale, 4e-15 * scale, 3.3e-308)):
        np.testing.assert_allclose(got, ref, rtol=1e-14, atol=atol)
    z_v, a_v, b_v, h_v = mingru._fused_gates(k_z, k_h, False)
    np.testing.assert_array_equal(z_v, z)
    np.testing.assert_allclose(a_v, 1.0 - z, rtol=1e-15)
    np.testing.assert_allclose(b_v, z * k_h, rtol=1e-15)
    assert h_v is k_h


@pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
@pytest.mark.parametrize("log_space", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 3e-6)])
def test_fused_cell_equals_the_numpy_reference(rng, cell, log_space, dtype, tol):
    params = {k: v.astype(dtype) for k, v in cell.init(rng, 5, 7).items()}
    x = rng.standard_normal((3, 9, 5)).astype(dtype)
    h0 = rng.uniform(0.1, 1.0, (3, 7)).astype(dtype)
    dy = rng.standard_normal((3, 9, 7)).astype(dtype)
    out = {}
    for backend in ("numpy", "numba"):
        h, cache = cell.forward(params, x, h0, log_space=log_space, backend=backend)
        dx, grads = cell.backward(params, cache, dy)
        out[backend] = (h, dx) + tuple(grads.values())
    for ref, got in zip(out["numpy"], out["numba"]):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
def test_fused_backward_passes_the_float64_gradient_check(rng, cell):
    from minimal.gradcheck import check_cell

    for ex in cell.examples(rng):
        if ex.kwargs.get("mode", "parallel") == "parallel":
            errors = check_cell(cell, ex)
            assert max(errors.values()) <= 1e-6, (ex.name, errors)


@pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
@pytest.mark.parametrize("bias", [True, False])
def test_the_vanilla_one_pass_passes_the_float64_gradient_check_with_and_without_biases(rng, cell, bias):
    """The default CPU path (the one pass, which adds the biases itself and keeps ∂h_t/∂k_t) against central
    finite differences, with an initial state of either sign, biases of scale 1 or none."""
    from minimal.gradcheck import check_function

    params = {k: (3.0 * v if k.startswith("b_") else v) for k, v in cell.init(rng, 3, 4, bias=bias).items()}
    x, h0 = rng.standard_normal((2, 7, 3)), rng.uniform(-1.0, 1.0, (2, 4))
    h, cache = cell.forward(params, x, h0)
    assert (cache.j_z if cell is mingru else cache.j_f) is not None       # the one pass ran
    errors = check_function(cell.forward, cell.backward, params, x, {"h0": h0})
    assert max(errors.values()) <= 1e-6, errors


def test_fused_gelu_and_its_backward_equal_the_numpy_reference(rng):
    from minimal.layers import mlp

    u = np.concatenate([rng.standard_normal(5000) * s for s in (1e-8, 1.0, 5.0, 100.0)] + [np.array([0.0])])
    dh = rng.standard_normal(u.shape)
    # 1/2 (1 + tanh y) cancels where tanh y ~ -1: NumPy's form there has an absolute error ~1e-16 |u|, the fused
    # σ(2y) form none (checked against scipy's expit, which has none either). In the tail s ~ e^{2y} inherits the
    # rounding of its argument 2y (|2y| up to ~700 before s underflows): relative errors up to ~|2y| ulp there
    from scipy.special import expit

    s = expit(2 * mlp._C * (u + mlp._A * u ** 3))
    np.testing.assert_allclose(mlp._gelu_fused(u), u * s, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(mlp._gelu_fused(u), mlp.gelu(u), rtol=1e-14, atol=1e-15 * np.abs(u).max())
    grad = s + 2 * u * s * (1 - s) * mlp._C * (1 + 3 * mlp._A * u ** 2)
    np.testing.assert_allclose(mlp._gelu_backward_fused(u, dh), dh * grad, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(mlp._gelu_backward_fused(u, dh), dh * mlp.gelu_grad(u), rtol=1e-13,
                               atol=1e-15 * np.abs(dh * u).max())
    # float32 arrays take the float32-arithmetic kernels: the test below


def test_float32_gelu_and_its_backward_are_within_a_few_float32_ulp(rng):
    """float32 arrays take the float32-arithmetic kernels (``_gelu_numba``'s ``_f32`` pair). Against the exact
    values of their float32 inputs, with e = 2^-23 (a float32 ulp is e to 2e of the value): GELU(u) within 4 e of
    itself times 1 + |2y| (the tail's e^{2y} inherits the rounding of 2y), GELU'(u) dh within 4 e of its larger
    terms |dh| (s + |t|) times 1 + |2y| (the two cancel near u ~ -0.75), t = 2 u s (1 - s) c (1 + 3 a u^2); plus,
    where exp's argument is below -87 and s or 1 - s is taken as 0, the value so dropped (< 1.7e-38 s's share), and
    float32's smallest subnormal. Over seeds 0-19 of these inputs the errors reach 1.35 and 1.66 of that unit
    (4 allowed). |u| up to 3e38: u^2 overflows float32 there, and the gradient is still finite."""
    from scipy.special import expit
    from minimal.layers import mlp

    u = np.concatenate([rng.standard_normal(20000) * s for s in (1e-8, 1.0, 5.0, 100.0)]
                       + [np.array([0.0, -0.7518, 1e-40, -1e-40, 1e20, -1e20, 3e38, -3e38])])
    u32, dh32 = u.astype(np.float32), rng.standard_normal(u.shape).astype(np.float32)
    u64, dh = u32.astype(np.float64), dh32.astype(np.float64)
    ulp, tiny, cut = 2.0 ** -23, 2.0 ** -149, 1.7e-38
    y2 = 2 * mlp._C * (u64 + mlp._A * u64 ** 3)
    s = expit(y2)
    got = mlp._gelu_fused(u32)
    assert got.dtype == np.float32
    bound = 4 * ulp * np.abs(u64 * s) * (1 + np.abs(y2)) + cut * np.abs(u64) + tiny
    assert np.all(np.abs(got - u64 * s) <= bound)
    t = 2 * u64 * s * (1 - s) * mlp._C * (1 + 3 * mlp._A * u64 ** 2)
    got = mlp._gelu_backward_fused(u32, dh32)
    assert got.dtype == np.float32
    dropped = cut * (1 + 2 * np.abs(u64) * mlp._C * (1 + 3 * mlp._A * u64 ** 2))
    bound = np.abs(dh) * (4 * ulp * (s + np.abs(t)) * (1 + np.abs(y2)) + dropped) + tiny
    assert np.all(np.abs(got - dh * (s + t)) <= bound)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2048, 256), (3, 5, 7), (1, 1), (0, 4)])
def test_the_gelu_pass_adds_the_bias_and_sums_its_gradient(rng, dtype, shape):
    """GELU(u + b) bit for bit GELU of u + b added first in the storage dtype (as ``linear.forward`` adds a bias),
    its backward bit for bit that of u + b, and db = Σ du over the leading indices: the float64 sum of the stored du
    in row order (what NumPy's float64 sum over axis 0 adds), rounded to du's dtype."""
    from minimal.layers import mlp

    u = (3.0 * rng.standard_normal(shape)).astype(dtype)
    b = rng.standard_normal(shape[-1]).astype(dtype)
    dh = rng.standard_normal(shape).astype(dtype)
    h = mlp._gelu_fused(u, b)
    assert h.dtype == dtype and h.shape == shape
    np.testing.assert_array_equal(h, mlp._gelu_fused(u + b))
    du, db = mlp._gelu_backward_sums(u, dh, b)
    assert du.dtype == db.dtype == dtype and du.shape == shape and db.shape == shape[-1:]
    np.testing.assert_array_equal(du, mlp._gelu_backward_fused(u + b, dh))
    np.testing.assert_array_equal(db, du.reshape(-1, shape[-1]).astype(np.float64).sum(axis=0).astype(dtype))


def test_mlp_with_the_fused_gelu_passes_the_float64_gradient_check(rng):
    from minimal.gradcheck import check_cell
    from minimal.layers import mlp

    for ex in mlp.examples(rng):
        errors = check_cell(mlp, ex)
        assert max(errors.values()) <= 1e-6, (ex.name, errors)


@pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 3e-6)])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_vanilla_cells_run_gates_and_scan_in_one_pass_and_equal_the_reference(rng, cell, dtype, tol, with_h0, bias):
    """The default CPU path of vanilla minGRU and minLSTM (method "auto" = the sequential scan): gates and scan in
    one pass, which adds the biases (zeros without them), their backward in one reverse pass (``*_scan_into`` /
    ``*_scan_backward``), against the NumPy reference and the unfused Blelloch path; ``out`` receives h."""
    params = {k: v.astype(dtype) for k, v in cell.init(rng, 5, 7, bias=bias).items()}
    x = rng.standard_normal((3, 9, 5)).astype(dtype)
    h0 = rng.standard_normal((3, 7)).astype(dtype) if with_h0 else None
    dy = rng.standard_normal((3, 9, 7)).astype(dtype)
    out = {}
    for name, kw in (("numpy", {"backend": "numpy"}), ("blelloch", {"method": "blelloch"}), ("fused", {})):
        h, cache = cell.forward(params, x, h0, **kw)
        dx, grads = cell.backward(params, cache, dy)
        out[name] = (h, dx) + tuple(grads.values())
    for name in ("blelloch", "fused"):
        for ref, got in zip(out["numpy"], out[name]):
            assert got.dtype == dtype
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())
    buf = np.empty((3, 9, 7), dtype)
    h, _ = cell.forward(params, x, h0, out=buf)
    assert h is buf and np.array_equal(buf, out["fused"][0])


@pytest.mark.parametrize("cell,weight", [(minlstm, "W_h"), (minlstm, "W_f"), (minlstm, "W_i"), (mingru, "W_h"),
                                         (mingru, "W_z")], ids=lambda v: getattr(v, "__name__", v).split(".")[-1])
@pytest.mark.parametrize("log_space", [False, True])
def test_the_one_pass_scan_reports_an_overflow_as_the_unfused_path_does(rng, cell, weight, log_space):
    """A pre-activation that overflows (float32 weights of 1e30) is reported by the same error on every path,
    naming x and the params (not the scan's internal b), with no NumPy warning before it; a gate's too, which a
    saturated σ would otherwise turn into a finite gate of 0 or 1."""
    from minimal.validate import OverflowInputError

    params = cell.init(rng, 5, 7)
    params = {k: (v * 1e30 if k == weight else v).astype(np.float32) for k, v in params.items()}
    x = rng.standard_normal((3, 9, 5)).astype(np.float32) * 1e9
    errors = []
    for kw in ({}, {"backend": "numpy"}) if log_space else ({}, {"method": "blelloch"}, {"backend": "numpy"}):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(OverflowInputError) as e:
                cell.forward(params, x, log_space=log_space, **kw)
        errors.append(str(e.value))
    assert len(set(errors)) == 1
    assert errors[0].startswith("x has float32 values up to") and f"{weight} has float32 values up to" in errors[0]
    assert "the gate pre-activations x W^T + b overflowed" in errors[0]


def _vanilla_runs(cell, with_h0, rng, monkeypatch):
    """A float32 vanilla cell run with the one pass and with the two passes (``scan_fused`` off): for each,
    (h, {n: dL/dk_n as the backward hands them to ``affine_backward``, before its flush}, the cache)."""
    params = {k: v.astype(np.float32) for k, v in cell.init(rng, 6, 40).items()}
    x = rng.standard_normal((4, 33, 6)).astype(np.float32)
    h0 = rng.uniform(-1.0, 1.0, (4, 40)).astype(np.float32) if with_h0 else None
    dy = rng.standard_normal((4, 33, 40)).astype(np.float32)
    runs, seen = [], []
    monkeypatch.setattr(cell, "affine_backward", lambda params, x, dk: (
        seen.append({n: v.copy() for n, v in dk.items()}) or _min_modes.affine_backward(params, x, dk)))
    for one_pass in (True, False):
        if not one_pass:
            monkeypatch.setattr(cell, "scan_fused", lambda *args: False)
        h, cache = cell.forward(params, x, h0)
        cell.backward(params, cache, dy)
        runs.append((h, seen[-1], cache))
    return runs, h0, dy


def _float64_registers(monkeypatch):
    """Let the float32 one pass run the float64-register kernels (``_min_scan_numba``'s ``*_scan_into``, which take
    any storage dtype) in place of their float32-register twins (``_min_scan_f32``)."""
    from minimal.cells import _min_scan_f32, _min_scan_numba as k

    monkeypatch.setattr(_min_scan_f32, "mingru_scan_into_f32", k.mingru_scan_into)
    monkeypatch.setattr(_min_scan_f32, "minlstm_scan_into_f32", k.minlstm_scan_into)


@pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_vanilla_one_pass_gates_and_states_are_the_two_passes_bit_for_bit(rng, cell, dtype, monkeypatch):
    """σ (f', i') in the float64-register one pass are the gates kernels' to the last bit, in float64 as in float32
    storage: the exps inside run with fused multiply-adds in both (``_min_scan_numba._exp_fma``), though the one
    pass's recurrence does not; so the states h are the two passes' too. (A float32 cell runs the float32-register
    twin, ``_min_scan_f32``, bounded against this pass below; here it is made to run this one.)"""
    if dtype == np.float32:
        _float64_registers(monkeypatch)
    params = {k: v.astype(dtype) for k, v in cell.init(rng, 6, 40).items()}
    x = (4.0 * rng.standard_normal((4, 33, 6))).astype(dtype)
    caches = [cell.forward(params, x)[1]]
    monkeypatch.setattr(cell, "scan_fused", lambda *args: False)
    caches.append(cell.forward(params, x)[1])
    assert caches[0].j_z is not None if cell is mingru else caches[0].j_f is not None   # the one pass ran
    assert (caches[1].j_z if cell is mingru else caches[1].j_f) is None                  # and then the two
    for n in ("z", "h") if cell is mingru else ("f_n", "i_n", "h"):
        one, two = (getattr(c, n) for c in caches)
        assert one.dtype == dtype and np.array_equal(one, two), n


@pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
@pytest.mark.parametrize("with_h0", [False, True])
def test_in_float32_the_vanilla_one_pass_rounds_as_the_two_passes_but_for_one_product(rng, cell, with_h0,
                                                                                     monkeypatch):
    """The float64-register one pass on float32 arrays (what a float32 cell ran before ``_min_scan_f32``, and the
    reference that twin is bounded against; the reverse pass is the same for both). Vanilla, the one pass runs the
    gates and the recurrence with the two passes' rounding (a and b in the storage dtype, the state in it with no
    fused multiply-add), so h is theirs bit for bit. Its backward multiplies the adjoint g_t by the cached
    ∂h_t/∂k_t: dL/dk_h = g_t z_t (g_t i'_t) bit for bit, and dL/dk_z (dk_f, dk_i) = g_t s (h̃_t − h_{t−1}) with
    s = z_t (1 − z_t) (−s_f, s_i), where the two passes round g_t h_{t−1} to float32 before they subtract it from
    g_t h̃_t. The two sides round five times in all (the one pass j, then g_t j; the two passes the stored slope,
    g_t h_{t−1} and the result; four for minGRU, whose z (1 − z) both take from the stored z), each by at most
    2^-24 of |s| (|g_t h̃_t| + |g_t h_{t−1}|), so they differ by less than 2^-21 of it. Below float32's smallest
    normal number (which ``affine_backward`` sets to 0 before the products) a rounding is absolute: up to that
    number."""
    from minimal import scan

    _float64_registers(monkeypatch)     # the argument is the float64-register pass's (the docstring)
    ((h1, dk1, _), (h2, dk2, cache)), h0, dy = _vanilla_runs(cell, with_h0, rng, monkeypatch)
    assert np.array_equal(h1, h2)
    a = 1.0 - cache.z if cell is mingru else cache.f_n
    g = scan.linear_scan_backward(a, h2, dy, h0, "sequential", "numba")[1].astype(np.float64)  # dL/dh_t in total
    prev = np.concatenate([np.zeros_like(h2[:, :1]) if h0 is None else h0[:, None], h2[:, :-1]], axis=1)
    scale = np.abs(g) * (np.abs(cache.k_h.astype(np.float64)) + np.abs(prev.astype(np.float64)))
    if cell is mingru:
        z = cache.z.astype(np.float64)
        slopes = {"z": z * (1.0 - z)}
    else:
        slopes = {"f": cache.s_f.astype(np.float64), "i": cache.s_i.astype(np.float64)}
    assert np.array_equal(dk1["h"], dk2["h"])
    for n, s in slopes.items():
        diff = np.abs(dk1[n].astype(np.float64) - dk2[n])
        assert np.all(diff <= 2.0 ** -21 * np.abs(s) * scale + np.finfo(np.float32).tiny), n
        assert np.any(diff > 0)         # the roundings do differ (36-47 % of entries here): the bound is tested


@pytest.mark.parametrize("scale", [1.0, 4.0, 30.0, 60.0])
def test_the_float32_register_one_pass_rounds_its_gates_as_float32_arithmetic_does(scale):
    """A float32 vanilla cell takes its gates in float32 registers (``_min_scan_f32.*_scan_into_f32``: twice the
    vector lanes). Against the float64-register pass on the same float32 pre-activations, a gate g is off by the
    float32 exp's and division's roundings, plus the exp's absolute error where its argument is below −87 (it gives 0
    there, off by less than 1.7e-38; f' and i' sum two such exps), with tiny = float32's smallest normal number
    (1.18e-38): z's argument −|k_z| is exact, so |Δz| <= 8 · 2^-24 |z| + 3 tiny; f' and i' take the exps of
    differences such as k_i − k_f, rounded to float32 first, which the exp turns into a relative error |argument|
    times that rounding, so |Δg| <= 4 · 2^-24 (1 + |k_f| + |k_i|) |g| + 3 tiny (biases added). Over this test's 40
    problems the largest error above 3 tiny was 4.00 times 2^-24 |z| (z), and 1.93 (f') and 1.96 (i') times
    2^-24 (1 + |k_f| + |k_i|) |g|; in every problem some entries differ (the arithmetic is not float64's). The
    states and the step's derivatives j then stay within 4.5e-7 of each array's largest entry (the same problems:
    h 1.9e-7, j_z 4.5e-7), held to 2e-6."""
    from minimal.cells import _min_scan_f32 as k32, _min_scan_numba as k

    f32, tiny = np.float32, np.finfo(np.float32).tiny
    for seed in range(10):
        rng = np.random.default_rng(seed)
        k_f, k_i, k_z, k_h = ((scale * rng.standard_normal((4, 33, 40))).astype(f32) for _ in range(4))
        b_f, b_i, b_h = (rng.standard_normal(40).astype(f32) for _ in range(3))
        h0 = rng.uniform(-1.0, 1.0, (4, 40)).astype(f32)
        lstm, gru = {}, {}
        for regs, run_lstm, run_gru in (("f64", k.minlstm_scan_into, k.mingru_scan_into),
                                        ("f32", k32.minlstm_scan_into_f32, k32.mingru_scan_into_f32)):
            lstm[regs] = [np.empty_like(k_f) for _ in range(5)]      # f', i', j_f, j_i, h
            gru[regs] = [np.empty_like(k_f) for _ in range(3)]       # z, j_z, h
            assert run_lstm(k_f, k_i, k_h, b_f, b_i, b_h, h0, *lstm[regs])
            assert run_gru(k_z, k_h, b_f, b_h, h0, *gru[regs])
        k_sum = np.abs((k_f + b_f).astype(np.float64)) + np.abs((k_i + b_i).astype(np.float64))
        rel_lstm = 4 * 2.0 ** -24 * (1.0 + k_sum)
        for want, got, rel in ((lstm["f64"][0], lstm["f32"][0], rel_lstm), (lstm["f64"][1], lstm["f32"][1], rel_lstm),
                               (gru["f64"][0], gru["f32"][0], 8 * 2.0 ** -24)):
            assert got.dtype == f32
            err = np.abs(got.astype(np.float64) - want)
            assert np.all(err <= rel * np.abs(want.astype(np.float64)) + 3 * tiny)
            assert np.any(err > 0)
        for want, got in zip(lstm["f64"][2:] + gru["f64"][1:], lstm["f32"][2:] + gru["f32"][1:]):
            assert np.abs(got.astype(np.float64) - want).max() <= 2e-6 * np.abs(want).max()


@pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
@pytest.mark.parametrize("with_h0", [False, True])
def test_in_float32_the_log_space_one_pass_is_the_gates_then_the_scan_bit_for_bit(rng, cell, with_h0, monkeypatch):
    """In log space the one pass keeps the two passes' rounding (log a, log b in the storage dtype, the state in
    float64), so a float32 cell gives exactly what the fused gates followed by the Numba scan give (the path with
    ``scan_fused`` off), forward and backward. This is the log-space pass, which runs when the linear form
    (``_min_log_linear``, tests/test_min_log_linear.py) refuses. (Vanilla: the test above.)"""
    from minimal.cells import _min_log_linear, _min_log_linear_f32

    for module in (_min_log_linear, _min_log_linear_f32):
        for name in module.__all__:
            if name.endswith("_into") or name.endswith("_into_f32"):
                monkeypatch.setattr(module, name, lambda *args: False)
    params = {k: v.astype(np.float32) for k, v in cell.init(rng, 6, 40).items()}
    x = rng.standard_normal((4, 33, 6)).astype(np.float32)
    h0 = rng.uniform(0.1, 1.0, (4, 40)).astype(np.float32) if with_h0 else None
    dy = rng.standard_normal((4, 33, 40)).astype(np.float32)
    runs = []
    for one_pass in (True, False):
        if not one_pass:
            monkeypatch.setattr(cell, "scan_fused", lambda *args: False)
        h, cache = cell.forward(params, x, h0, log_space=True)
        dx, grads = cell.backward(params, cache, dy)
        runs.append((h, dx, *grads.values()))
    for a, b in zip(*runs):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("cell", [minlstm, mingru], ids=["minlstm", "mingru"])
def test_a_non_finite_log_space_scan_is_named_as_the_two_passes_name_it(rng, cell, monkeypatch):
    """Pre-activations that overflow float32 (weights of 1e30) give infinite log coefficients inside the one pass,
    which then leaves the error to the two passes: the same error with the one pass as without it."""
    params = {k: (v * 1e30 if k.startswith("W_") else v).astype(np.float32) for k, v in cell.init(rng, 5, 7).items()}
    x = rng.standard_normal((3, 9, 5)).astype(np.float32) * 1e9
    errors = []
    for one_pass in (True, False):
        if not one_pass:
            monkeypatch.setattr(cell, "scan_fused", lambda *args: False)
        with pytest.raises(Exception) as e:
            cell.forward(params, x, log_space=True)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 5), (1000, 3), (3, 1000), (0, 4), (4, 0)])
def test_flush_and_sum_zeroes_the_subnormals_only_and_sums_as_numpy(rng, dtype, shape):
    tiny = np.finfo(dtype).tiny
    a = rng.standard_normal(shape).astype(dtype)
    pick = rng.random(shape)
    a[pick < 0.3] *= tiny / 4                       # subnormal (and a few exact zeros)
    a[(pick >= 0.3) & (pick < 0.35)] *= tiny * 4    # small but normal: kept
    special = np.array([np.nan, np.inf, -np.inf, -0.0, tiny, -tiny, tiny / 2, -tiny / 2], dtype)
    if a.size >= special.size:
        a.reshape(-1)[:special.size] = special
    want = np.where(np.abs(a) < tiny, dtype(0), a)   # NaN compares False: kept
    out = np.empty(shape[1], dtype)
    with np.errstate(invalid="ignore"):
        gn.flush_and_sum_(a, tiny, out)
        np.testing.assert_array_equal(a, want)
        np.testing.assert_array_equal(out, want.sum(axis=0))
    assert not np.any((a != 0) & (np.abs(a) < tiny))


@pytest.mark.parametrize("cell", [mingru, minlstm])
def test_the_gates_products_drop_subnormal_gradients_and_change_no_normal_result(rng, cell):
    """The gradients into x W_n^T + b_n with a third of them subnormal: every normal entry of the W_n, b_n and dx
    grads equal, bit for bit, to NumPy's products of the unflushed gradients (a subnormal adds less than float32's
    smallest normal number to a sum), the subnormal ones 0 (dx at the early steps), and no subnormal left in the
    gradients passed in."""
    B, T, D, H = 4, 9, 6, 8
    params = {k: v.astype(np.float32) for k, v in cell.init(rng, D, H).items()}
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    tiny = np.finfo(np.float32).tiny
    dk = {}
    for n in sorted({k[2:] for k in params if k.startswith("W_")}):
        d = rng.standard_normal((B, T, H)).astype(np.float32)
        d[:, :3] *= tiny / 8                        # the early steps' gradients underflowed to subnormal
        dk[n] = d
    raw = {n: d.copy() for n, d in dk.items()}
    dx, grads = _min_modes.affine_backward(params, x, dk)
    x2 = x.reshape(B * T, D)
    want_dx = sum(raw[n].reshape(B * T, H) @ params[f"W_{n}"] for n in raw).reshape(x.shape)
    np.testing.assert_array_equal(dx, np.where(np.abs(want_dx) < tiny, 0, want_dx))
    assert np.all(dx[:, :3] == 0) and np.all(np.abs(dx[:, 3:]) >= tiny)
    for n, d in raw.items():
        d2 = d.reshape(B * T, H)
        np.testing.assert_array_equal(grads[f"W_{n}"], d2.T @ x2)
        np.testing.assert_array_equal(grads[f"b_{n}"], d2.sum(axis=0))
        assert np.all(dk[n][:, :3] == 0) and np.array_equal(dk[n][:, 3:], d[:, 3:])
