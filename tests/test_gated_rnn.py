"""The gated linear RNN of Zucchet et al. (Eq. 2): gradients, the two modes, λ in [0, 1], and the paper's
claim that λ = 1 neurons accumulate the input gating and, with λ = 0 query neurons, give linear attention."""
import warnings

import numpy as np
import pytest

from minimal.cells import gated_rnn
from minimal.gradcheck import TOLERANCE, backward_rel_errors, check_cell

EXAMPLES = gated_rnn.examples(np.random.default_rng(0))
IDS = [ex.name for ex in EXAMPLES]
SCANS = [("sequential", "numpy"), ("blelloch", "numpy"), ("blelloch", "numba")]


@pytest.mark.parametrize("ex", EXAMPLES, ids=IDS)
def test_every_example_passes_gradcheck_with_its_own_scan(ex):
    errors = check_cell(gated_rnn, ex)
    assert set(errors) == set(ex.params) | {"x"}
    assert max(errors.values()) <= TOLERANCE, errors


@pytest.mark.parametrize("ex", EXAMPLES, ids=IDS)
def test_every_example_passes_gradcheck_on_the_sequential_scan(ex):
    scans = "A" not in ex.params and ex.kwargs.get("readout", "all") == "all"   # method is refused elsewhere
    ex = ex._replace(kwargs={**ex.kwargs, **({"method": "sequential"} if scans else {}), "backend": "numpy"})
    errors = check_cell(gated_rnn, ex)
    assert max(errors.values()) <= TOLERANCE, errors


@pytest.mark.parametrize("recurrence", ["diagonal", "dense"])
@pytest.mark.parametrize("T", [1, 5])
def test_blas_backward_equals_the_einsum_reference(rng, recurrence, T):
    """The fast path (weight gradients as (B T, .) matmuls) against the plain einsum form of the same sums."""
    params = gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2, d_gate=3, recurrence=recurrence)
    x = rng.standard_normal((2, T, 3))
    y, cache = gated_rnn.forward(params, x)
    dy = rng.standard_normal(y.shape)
    dx_ref, g_ref = gated_rnn.backward_reference(params, cache, dy)
    dx, g = gated_rnn.backward(params, cache, dy)
    assert np.max(np.abs(dx - dx_ref)) <= 1e-12 * np.max(np.abs(dx_ref))
    assert list(g) == list(g_ref) == list(params)
    for k in g:
        assert np.max(np.abs(g[k] - g_ref[k])) <= 1e-12 * np.max(np.abs(g_ref[k])), k


@pytest.mark.parametrize("recurrence", ["diagonal", "dense"])
@pytest.mark.parametrize("T", [1, 2, 9])
def test_readout_last_is_the_last_step_of_readout_all_gradients_included(rng, recurrence, T):
    """readout="last" (closed-form h_T for the diagonal case) equals running every step and keeping y_T."""
    params = gated_rnn.init(rng, d_in=3, d_hidden=5, d_out=2, d_gate=4, recurrence=recurrence)
    x = rng.standard_normal((3, T, 3))
    y_all, cache_all = gated_rnn.forward(params, x)
    y_last, cache_last = gated_rnn.forward(params, x, readout="last")
    assert y_last.shape == (3, 1, 2)
    np.testing.assert_allclose(y_last, y_all[:, -1:], rtol=1e-13, atol=1e-15)
    dy_last = rng.standard_normal(y_last.shape)
    dy_all = np.zeros_like(y_all)
    dy_all[:, -1:] = dy_last
    dx_all, g_all = gated_rnn.backward(params, cache_all, dy_all)
    for backward in (gated_rnn.backward, gated_rnn.backward_reference):
        dx, g = backward(params, cache_last, dy_last)
        np.testing.assert_allclose(dx, dx_all, rtol=1e-12, atol=1e-14)
        for k in g:
            np.testing.assert_allclose(g[k], g_all[k], rtol=1e-12, atol=1e-14, err_msg=k)


def test_readout_last_handles_lambda_exactly_zero_and_one(rng):
    params = gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2)
    x = rng.standard_normal((2, 6, 3))
    lam = np.array([0.0, 1.0, 0.5, 1.0])
    y_all, _ = gated_rnn.forward(params, x, lam=lam)
    y_last, cache = gated_rnn.forward(params, x, lam=lam, readout="last")
    np.testing.assert_allclose(y_last, y_all[:, -1:], rtol=1e-13, atol=1e-15)
    assert np.all(np.isfinite(gated_rnn.backward(params, cache, np.ones_like(y_last))[0]))


def test_readout_must_be_all_or_last(small):
    params, x = small
    with pytest.raises(ValueError, match="readout must be one of"):
        gated_rnn.forward(params, x, readout="first")


def test_float32_backward_keeps_float32_and_matches_float64(rng):
    """Training runs in float32: gradients stay float32 and agree with the float64 ones to float32 rounding."""
    p64 = gated_rnn.init(rng, d_in=5, d_hidden=8, d_out=4)
    x64, dy64 = rng.standard_normal((3, 7, 5)), rng.standard_normal((3, 7, 4))
    p32 = {k: v.astype(np.float32) for k, v in p64.items()}
    dx64, g64 = gated_rnn.backward(p64, gated_rnn.forward(p64, x64)[1], dy64)
    dx32, g32 = gated_rnn.backward(p32, gated_rnn.forward(p32, x64.astype(np.float32))[1],
                                   dy64.astype(np.float32))
    assert dx32.dtype == np.float32 and all(g.dtype == np.float32 for g in g32.values())
    assert np.max(np.abs(dx32 - dx64)) <= 1e-5 * np.max(np.abs(dx64))
    for k in g64:
        assert np.max(np.abs(g32[k] - g64[k])) <= 1e-5 * np.max(np.abs(g64[k])), k


def _step_mode(params, x, lam=None):
    h = np.zeros((x.shape[0], gated_rnn._check_params(params)[2]))
    ys = []
    for t in range(x.shape[1]):
        y_t, h = gated_rnn.step_forward(params, x[:, t], h, lam=lam)
        ys.append(y_t)
    return np.stack(ys, axis=1)


@pytest.mark.parametrize("method,backend", SCANS)
@pytest.mark.parametrize("recurrence", ["diagonal", "dense"])
def test_step_mode_equals_scan_mode(rng, recurrence, method, backend):
    params = gated_rnn.init(rng, d_in=3, d_hidden=6, d_out=2, d_gate=4, recurrence=recurrence)
    x = rng.standard_normal((3, 13, 3))
    scan_kw = {"method": method} if recurrence == "diagonal" else {}     # the dense recurrence runs no scan
    y, _ = gated_rnn.forward(params, x, backend=backend, **scan_kw)
    y_step = _step_mode(params, x)
    assert np.max(np.abs(y - y_step)) <= 1e-12 * np.max(np.abs(y_step))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_blelloch_and_sequential_backward_agree(rng, backend):
    params = gated_rnn.init(rng, d_in=3, d_hidden=5, d_out=2)
    x, dy = rng.standard_normal((2, 11, 3)), rng.standard_normal((2, 11, 2))
    out = {}
    for method in ("sequential", "blelloch"):
        y, cache = gated_rnn.forward(params, x, method=method, backend=backend)
        out[method] = (y, *gated_rnn.backward(params, cache, dy))
    (y0, dx0, g0), (y1, dx1, g1) = out["sequential"], out["blelloch"]
    assert np.allclose(y1, y0, rtol=1e-12, atol=0) and np.allclose(dx1, dx0, rtol=1e-12, atol=1e-14)
    for k in params:
        assert np.max(np.abs(g1[k] - g0[k])) <= 1e-12 * np.max(np.abs(g0[k])), k


def test_lambda_lies_in_the_unit_interval(rng):
    params = gated_rnn.init(rng, d_in=2, d_hidden=500, d_out=1)
    lam = gated_rnn.lam_from_nu(params["nu"])
    assert np.all((lam > 0) & (lam < 1))
    # Any finite ν, however extreme, maps into [0, 1] (the bounds are reached only in floating point).
    lam = gated_rnn.lam_from_nu(np.linspace(-50, 50, 1001))
    assert np.all((lam >= 0) & (lam <= 1)) and lam[0] == 1.0 and lam[-1] == 0.0
    assert np.allclose(gated_rnn.nu_from_lam(np.array([0.1, 0.5, 0.9])), np.log(-np.log([0.1, 0.5, 0.9])))


@pytest.mark.parametrize("method,backend", SCANS)
def test_lambda_one_accumulates_and_lambda_zero_holds_the_current_input_gating(rng, method, backend):
    params = gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2)
    x = rng.standard_normal((2, 9, 3))
    lam = np.array([1.0, 0.0, 1.0, 0.0])
    _, cache = gated_rnn.forward(params, x, lam=lam, method=method, backend=backend)
    g_in = (x @ params["W_in_m"].T) * (x @ params["W_in_x"].T)
    assert np.allclose(cache.h[..., 0::2], np.cumsum(g_in[..., 0::2], axis=1), rtol=1e-13, atol=1e-13)
    assert np.array_equal(cache.h[..., 1::2], g_in[..., 1::2])


def test_lam_override_gives_nu_no_gradient(rng):
    params = gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2)
    x = rng.standard_normal((2, 5, 3))
    y, cache = gated_rnn.forward(params, x, lam=np.ones(4), method="sequential")
    _, grads = gated_rnn.backward(params, cache, np.ones_like(y))
    assert np.array_equal(grads["nu"], np.zeros(4))
    assert np.any(grads["W_in_m"] != 0)


@pytest.mark.parametrize("method,backend", SCANS)
def test_one_kv_neuron_and_one_query_neuron_implement_scalar_causal_linear_attention(rng, method, backend):
    # Sec. 3 in one dimension: y_t = q_t Σ_{s<=t} v_s k_s with v = w_v x, k = w_k x, q = w_q x.
    # The constant 1 appended to the input lets the λ = 0 neuron store q_t alone (no biases).
    w_v, w_k, w_q = 0.7, -1.3, 2.1
    params = {
        "W_in_m": np.array([[w_v, 0.0], [w_q, 0.0]]),   # rows: kv neuron, query neuron; columns: (x, 1)
        "W_in_x": np.array([[w_k, 0.0], [0.0, 1.0]]),
        "nu": np.zeros(2),                               # unused: λ is given exactly
        "W_out_m": np.array([[1.0, 0.0]]),
        "W_out_x": np.array([[0.0, 1.0]]),
        "D": np.array([[1.0]]),
    }
    xs = rng.standard_normal((2, 7, 1))
    x = np.concatenate([xs, np.ones_like(xs)], axis=-1)
    y, _ = gated_rnn.forward(params, x, lam=np.array([1.0, 0.0]), method=method, backend=backend)
    v, k, q = w_v * xs, w_k * xs, w_q * xs
    attention = q * np.cumsum(v * k, axis=1)
    assert np.allclose(y, attention, rtol=1e-12, atol=1e-12)


def test_output_is_causal_and_includes_the_current_token(rng):
    params = gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2)
    x = rng.standard_normal((1, 6, 3))
    y, _ = gated_rnn.forward(params, x, method="sequential")
    x2 = x.copy()
    x2[:, 3] += 1.0
    y2, _ = gated_rnn.forward(params, x2, method="sequential")
    assert np.array_equal(y2[:, :3], y[:, :3])
    assert np.all(np.abs(y2[:, 3] - y[:, 3]) > 0)


# --- bad input -------------------------------------------------------------------------------------------

@pytest.fixture
def small(rng):
    return gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2), rng.standard_normal((2, 5, 3))


def test_x_with_wrong_shape_or_dtype_is_rejected(small):
    params, x = small
    with pytest.raises(ValueError, match="x must have shape"):
        gated_rnn.forward(params, x[0])
    with pytest.raises(ValueError, match="x must have shape"):
        gated_rnn.forward(params, x[..., :2])
    with pytest.raises(ValueError, match="x must have a floating dtype"):
        gated_rnn.forward(params, np.ones((2, 5, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="x must have at least one time step"):
        gated_rnn.forward(params, x[:, :0])


def test_params_with_wrong_shapes_or_keys_are_rejected(small):
    params, x = small
    with pytest.raises(ValueError, match="W_out_x must have shape"):
        gated_rnn.forward({**params, "W_out_x": params["W_out_x"][:, :2]}, x)
    with pytest.raises(ValueError, match="nu must have shape"):
        gated_rnn.forward({**params, "nu": params["nu"][:3]}, x)
    with pytest.raises(ValueError, match="nu contains NaN or inf"):
        gated_rnn.forward({**params, "nu": np.array([-np.inf, 0.0, 0.0, 0.0])}, x)
    with pytest.raises(ValueError, match="exactly one of 'nu'"):
        gated_rnn.forward({**params, "A": np.eye(4)}, x)
    with pytest.raises(ValueError, match="params must have exactly the keys"):
        gated_rnn.forward({k: v for k, v in params.items() if k != "D"}, x)


def test_lam_override_is_checked(rng, small):
    params, x = small
    with pytest.raises(ValueError, match="lam must have shape"):
        gated_rnn.forward(params, x, lam=np.ones(3))
    with pytest.raises(ValueError, match=r"lam must lie in \[0, 1\]"):
        gated_rnn.forward(params, x, lam=np.array([0.5, 1.5, 0.0, 1.0]))
    dense = gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2, recurrence="dense")
    with pytest.raises(ValueError, match="lam overrides"):
        gated_rnn.forward(dense, x, lam=np.ones(4))


def test_dy_and_step_inputs_are_checked(small):
    params, x = small
    y, cache = gated_rnn.forward(params, x, method="sequential")
    with pytest.raises(ValueError, match="dy must have shape"):
        gated_rnn.backward(params, cache, y[:, :-1])
    with pytest.raises(ValueError, match="h_prev must have shape"):
        gated_rnn.step_forward(params, x[:, 0], np.zeros((2, 3)))
    with pytest.raises(ValueError, match="x_t must have shape"):
        gated_rnn.step_forward(params, x, np.zeros((2, 4)))


def test_init_arguments_are_checked(rng):
    with pytest.raises(ValueError, match="recurrence must be one of"):
        gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2, recurrence="full")
    with pytest.raises(ValueError, match="lam_min, lam_max"):
        gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2, lam_max=1.0)
    with pytest.raises(ValueError, match="d_hidden must be an integer"):
        gated_rnn.init(rng, d_in=3, d_hidden=0, d_out=2)


def test_a_fully_pruned_layer_outputs_zeros(rng):
    """Pruning may remove every neuron (H = 0, H_out = 0): the layer is then the zero map, not an error."""
    params = {"W_in_m": np.zeros((0, 3)), "W_in_x": np.zeros((0, 3)), "nu": np.zeros(0),
              "W_out_m": np.zeros((0, 0)), "W_out_x": np.zeros((0, 0)), "D": np.zeros((2, 0))}
    for readout, T_out in (("all", 4), ("last", 1)):
        y, cache = gated_rnn.forward(params, rng.standard_normal((2, 4, 3)), readout=readout)
        assert y.shape == (2, T_out, 2) and not np.any(y)
        dx, _ = gated_rnn.backward(params, cache, np.ones_like(y))
        assert dx.shape == (2, 4, 3) and not np.any(dx)


# --- reliability (issue 12) ------------------------------------------------------------------------------

@pytest.mark.parametrize("readout", ["all", "last"])
def test_nu_past_709_gives_lambda_zero_and_a_zero_gradient_not_nan(small, readout):
    """exp(ν) overflows for ν > 709, so λ = 0 exactly; dλ/dν = -exp(ν) λ was then -inf · 0 = NaN."""
    params, x = small
    params = {**params, "nu": np.array([800.0, 0.3, -1.0, 750.0])}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either: λ = 0 is the exact limit
        y, cache = gated_rnn.forward(params, x, readout=readout)
        _, grads = gated_rnn.backward(params, cache, np.ones_like(y))
    assert np.all(np.isfinite(grads["nu"])) and grads["nu"][0] == 0.0 and grads["nu"][3] == 0.0
    # the same layer with λ = 0 given exactly
    lam = gated_rnn.lam_from_nu(params["nu"])
    y_lam, _ = gated_rnn.forward(params, x, lam=lam, readout=readout)
    np.testing.assert_array_equal(y, y_lam)
    np.testing.assert_allclose(gated_rnn.dlam_dnu(np.array([0.3, -1.0])),
                               -np.exp([0.3, -1.0]) * gated_rnn.lam_from_nu(np.array([0.3, -1.0])), rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_an_input_of_another_dtype_than_the_params_is_refused_not_promoted(small, dtype):
    """One rule for every cell: x must have the params' dtype (float32 x on float64 params returned float64)."""
    params, x = small

    def refused(name, want):   # float16 is refused for itself first (issue 32: no compiled path computes in it)
        return f"{name} must be float32 or float64" if dtype == np.float16 else want
    with pytest.raises(ValueError, match=refused("x", f"x must have the params' dtype float64, got {np.dtype(dtype)}")):
        gated_rnn.forward(params, x.astype(dtype))
    with pytest.raises(ValueError, match=refused("x_t", "x_t must have the params' dtype float64")):
        gated_rnn.step_forward(params, x[:, 0].astype(dtype), np.zeros((2, 4)))
    with pytest.raises(ValueError, match=refused("h_prev", "h_prev must have the params' dtype float64")):
        gated_rnn.step_forward(params, x[:, 0], np.zeros((2, 4), dtype))
    with pytest.raises(ValueError, match=refused("W_out_m", "W_out_m must have the dtype of W_in_m")):
        gated_rnn.forward({**params, "W_out_m": params["W_out_m"].astype(dtype)}, x)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own overflow warnings come first
def test_overflow_names_what_the_caller_gave_not_internal_arrays(small):
    params, x = small
    p32 = {k: v.astype(np.float32) for k, v in params.items()}
    huge = (x * 1e20).astype(np.float32)      # (W_in_m x)(W_in_x x) ~ 1e40: inf in float32
    for kw in ({}, {"backend": "numpy"}, {"readout": "last"}):
        with pytest.raises(ValueError, match=r"^x has float32 values up to [0-9.]+e\+20, W_in_m has float32 .*: "
                                             r"the .* overflowed to inf or NaN \(float32 holds at most 3.4e\+38\); "
                                             r"scale them down, or use float64"):
            gated_rnn.forward(p32, huge, **kw)
    for kw in ({}, {"readout": "last"}, {"method": "sequential", "backend": "numpy"}):
        y, cache = gated_rnn.forward(p32, (x * 100).astype(np.float32), **kw)   # y ~ 1e8
        with pytest.raises(ValueError, match=r"^dy has float32 values up to 1e\+37, x has .*overflowed"):
            gated_rnn.backward(p32, cache, np.full_like(y, 1e37))
    with pytest.raises(ValueError, match=r"^x_t has float32 values up to .*e\+20.*the output y_t overflowed"):
        gated_rnn.step_forward(p32, huge[:, 0], np.zeros((2, 4), np.float32))


def test_bench_step_breakdown_replays_the_cells_own_calls(rng):
    """``bench.gated_rnn_parts`` times the cell's scans and BLAS products apart: each replayed product is the
    one ``forward`` / ``backward`` compute (so the breakdown cannot drift from the cell it describes)."""
    from minimal.bench import step as bench

    B, T, D_in, H, D_out = 3, 7, 5, 6, 4
    params = gated_rnn.init(rng, D_in, H, D_out, d_gate=H)
    x = rng.standard_normal((B, T, D_in))
    dy = rng.standard_normal((B, T, D_out))
    y, cache = gated_rnn.forward(params, x)
    dx, grads = gated_rnn.backward(params, cache, dy)
    parts = bench.gated_rnn_parts(params, cache, dy)
    m = {k: fn() for k, fn in parts["matmuls"].items()}
    assert len(m) == 15
    flat = (lambda z: z.reshape(B * T, -1))
    np.testing.assert_allclose(m["p"] * m["q"], flat(cache.p * cache.q), rtol=1e-13)
    np.testing.assert_allclose(m["r"] * m["s"], flat(cache.r * cache.s), rtol=1e-13)
    np.testing.assert_allclose(m["y"], flat(y), rtol=1e-13)
    for name in ("D", "W_out_m", "W_out_x", "W_in_m", "W_in_x"):
        np.testing.assert_allclose(m["d" + name], grads[name], rtol=1e-12)
    np.testing.assert_allclose(m["dx_m"] + m["dx_x"], flat(dx), rtol=1e-12)
    np.testing.assert_allclose(parts["scans"]["linear_scan"](), cache.h, rtol=1e-13)
    # db of the replayed adjoint is dL/d(p q): with p = W_in_m x and q = W_in_x x, dW_in_m = (db q)^T x
    db = parts["scans"]["linear_scan_backward"]()[1]
    np.testing.assert_allclose(flat(db * cache.q).T @ flat(x), grads["W_in_m"], rtol=1e-12)
    with pytest.raises(ValueError, match="readout='all'"):
        bench.gated_rnn_parts(params, gated_rnn.forward(params, x, readout="last")[1], dy[:, -1:])


def test_out_receives_the_states_and_changes_nothing(rng, small):
    """``out=``: the scan writes h into the caller's buffer (the cache holds it), with the same numbers and
    gradients as a fresh array; where no scan runs (readout 'last', the dense recurrence) it is refused."""
    params, x = small
    y_ref, cache_ref = gated_rnn.forward(params, x)
    out = np.full(cache_ref.h.shape, np.nan)
    y, cache = gated_rnn.forward(params, x, out=out)
    assert cache.h is out
    np.testing.assert_array_equal(y, y_ref)
    errors = backward_rel_errors(gated_rnn.backward, params, cache, cache_ref, rng.standard_normal(y_ref.shape))
    assert set(errors.values()) == {0.0}, errors       # bit-identical
    with pytest.raises(ValueError, match="^out receives the scan's states.*readout 'last'"):
        gated_rnn.forward(params, x, readout="last", out=out)
    dense = gated_rnn.init(rng, d_in=3, d_hidden=4, d_out=2, recurrence="dense")
    with pytest.raises(ValueError, match="^out receives the scan's states.*recurrence 'dense'"):
        gated_rnn.forward(dense, x, out=out)
    with pytest.raises(ValueError, match=r"^out must have the dtype of the states h \(B, T, H\) \(float64\)"):
        gated_rnn.forward(params, x, out=out.astype(np.float32))
    with pytest.raises(ValueError, match=r"^out must have the shape of the states h \(B, T, H\) \(2, 5, 4\)"):
        gated_rnn.forward(params, x, out=out[:, 1:])
    with pytest.raises(ValueError, match="^out is not supported with backend='cuda'"):
        gated_rnn.forward(params, x, backend="cuda", out=out)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_an_adjoint_that_overflows_inside_the_scan_names_the_callers_dy(rng):
    """dy = 1e35 in float32 with λ = 1: dL/dh is finite, its reverse running sum over 64 steps is not. The Numba
    scan's fused check catches the overflow inside the adjoint; the cell names dy and the params, not the
    scan's internal a, h, dh."""
    p = {k: v.astype(np.float32) for k, v in gated_rnn.init(rng, 3, 4, 2).items()}
    x = rng.standard_normal((2, 64, 3)).astype(np.float32)
    y, cache = gated_rnn.forward(p, x, lam=np.ones(4))
    with pytest.raises(ValueError, match=r"^dy has float32 values up to 1e\+35, x has .*: the recurrence's adjoint "
                                         r"overflowed to inf or NaN"):
        gated_rnn.backward(p, cache, np.full_like(y, 1e35))
