"""minGRU and minLSTM (Feng et al., "Were RNNs All We Needed?", Sec. 3, App. A-B) do what the paper says.

- Both modes compute one function: sequential (step loop) = parallel (scan), vanilla and log space, to 1e-12.
- The minLSTM normalised gates f' = f / (f + i), i' = i / (f + i) sum to one, so h_t is a convex combination of
  h_0 and the candidates (its scale does not grow with t); the same holds for minGRU's (1 − z, z).
- Log space (App. B.3) keeps every state positive and stays finite for saturated gates.
- Parameter counts: minGRU uses 33 / 22 / 17 / 13 % of a GRU's parameters and minLSTM 38 / 25 / 19 / 15 % of an
  LSTM's at expansion α = H / D = 1 / 2 / 3 / 4.
- Gradients match finite differences (every param and the input), and bad input is a clear ValueError.
"""
import importlib.util
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import expit

from minimal.cells import gru, lstm, mingru, minlstm
from minimal.gradcheck import TOLERANCE, backward_rel_errors, check_cell, rel_error
from minimal.cells import _gates

CELLS = {"mingru": mingru, "minlstm": minlstm}
EXAMPLES = [(name, i) for name, mod in CELLS.items() for i in range(len(mod.examples(np.random.default_rng(0))))]
# Parallel-mode scans to compare with the step loop: every CPU implementation the scan module offers.
HAVE_NUMBA_SCAN = importlib.util.find_spec("minimal.scan.numba_linear") is not None
LINEAR_SCANS = [("sequential", "numpy"), ("blelloch", "numpy")] + (
    [("sequential", "numba"), ("blelloch", "numba")] if HAVE_NUMBA_SCAN else [])
LOG_SCANS = ["numpy"] + (["numba"] if HAVE_NUMBA_SCAN else [])


def _run(mod, params, x, dy, **kw):
    h, cache = mod.forward(params, x, **kw)
    dx, grads = mod.backward(params, cache, dy)
    return h, dx, grads


def _setup(mod, rng, T, bias=True, h0=True, B=3, D=4, H=5):
    params = mod.init(rng, D, H, bias=bias)
    x = rng.standard_normal((B, T, D))
    kw = {"h0": rng.uniform(0.2, 1.5, (B, H))} if h0 else {}
    return params, x, rng.standard_normal((B, T, H)), kw


# --- gradients ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,i", EXAMPLES, ids=[f"{n}-{i}" for n, i in EXAMPLES])
def test_gradients_match_finite_differences(name, i):
    mod = CELLS[name]
    ex = mod.examples(np.random.default_rng(0))[i]
    kwargs = dict(ex.kwargs)
    if kwargs.get("mode") == "parallel" and not HAVE_NUMBA_SCAN:
        kwargs["backend"] = "numpy"
    errors = check_cell(mod, ex._replace(kwargs=kwargs))
    assert set(errors) == {"x"} | set(ex.params)
    assert max(errors.values()) <= TOLERANCE, errors


def test_examples_cover_both_modes_both_spaces_t1_and_odd_t():
    for mod in CELLS.values():
        cases = {(ex.kwargs["mode"], ex.kwargs.get("log_space", False), ex.x.shape[1])
                 for ex in mod.examples(np.random.default_rng(0))}
        for mode in mod.MODES:
            for log_space in (False, True):
                Ts = {T for m, ls, T in cases if m == mode and ls == log_space}
                assert Ts and any(T % 2 == 1 for T in Ts), (mod.__name__, mode, log_space)
        assert any(T == 1 for _, _, T in cases)
        assert all(ex.n_params() + ex.x.size <= 400 for ex in mod.examples(np.random.default_rng(0)))


# --- the two modes are one function -----------------------------------------------------------------------
@pytest.mark.parametrize("name", CELLS)
@pytest.mark.parametrize("method,backend", LINEAR_SCANS)
@pytest.mark.parametrize("T", [1, 2, 33])
def test_parallel_mode_equals_sequential_mode(name, method, backend, T):
    mod = CELLS[name]
    params, x, dy, kw = _setup(mod, np.random.default_rng(T), T)
    h_seq, dx_seq, g_seq = _run(mod, params, x, dy, mode="sequential", **kw)
    h_par, dx_par, g_par = _run(mod, params, x, dy, mode="parallel", method=method, backend=backend, **kw)
    assert np.max(np.abs(h_par - h_seq)) <= 1e-12
    assert rel_error(dx_par, dx_seq) <= 1e-12
    for k in params:
        assert rel_error(g_par[k], g_seq[k]) <= 1e-12, k


@pytest.mark.parametrize("name", CELLS)
@pytest.mark.parametrize("backend", LOG_SCANS)
@pytest.mark.parametrize("T,h0", [(1, True), (2, False), (33, True), (33, False)])
def test_log_space_parallel_equals_log_space_sequential(name, backend, T, h0):
    mod = CELLS[name]
    params, x, dy, kw = _setup(mod, np.random.default_rng(100 + T), T, h0=h0)
    h_seq, dx_seq, g_seq = _run(mod, params, x, dy, mode="sequential", log_space=True, **kw)
    h_par, dx_par, g_par = _run(mod, params, x, dy, mode="parallel", log_space=True, backend=backend, **kw)
    assert np.max(np.abs(h_par - h_seq)) <= 1e-12
    assert rel_error(dx_par, dx_seq) <= 1e-12
    for k in params:
        assert rel_error(g_par[k], g_seq[k]) <= 1e-12, k


def test_forward_matches_the_papers_equations_written_out():
    """An independent per-step evaluation of Sec. 3 (naive f / (f + i), no scan, no shared helpers)."""
    rng = np.random.default_rng(7)
    B, T, D, H = 2, 7, 3, 4
    x = rng.standard_normal((B, T, D))
    h0 = rng.uniform(0.1, 1.0, (B, H))
    p = mingru.init(rng, D, H)
    q = minlstm.init(rng, D, H)

    def lin(params, n, xt):
        return xt @ params[f"W_{n}"].T + params[f"b_{n}"]

    for log_space in (False, True):
        cand = (lambda k: np.where(k >= 0, k + 0.5, 1.0 / (1.0 + np.exp(-k)))) if log_space else (lambda k: k)
        hg, hl = h0.copy(), h0.copy()
        want_g, want_l = [], []
        for t in range(T):
            z = 1.0 / (1.0 + np.exp(-lin(p, "z", x[:, t])))
            hg = (1 - z) * hg + z * cand(lin(p, "h", x[:, t]))
            f = 1.0 / (1.0 + np.exp(-lin(q, "f", x[:, t])))
            i = 1.0 / (1.0 + np.exp(-lin(q, "i", x[:, t])))
            hl = f / (f + i) * hl + i / (f + i) * cand(lin(q, "h", x[:, t]))
            want_g.append(hg)
            want_l.append(hl)
        for mode in _gates.MODES:
            kw = {"h0": h0, "mode": mode, "log_space": log_space, "backend": "numpy"}
            np.testing.assert_allclose(mingru.forward(p, x, **kw)[0], np.stack(want_g, 1), rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(minlstm.forward(q, x, **kw)[0], np.stack(want_l, 1), rtol=1e-13, atol=1e-13)


def test_step_forward_is_one_step_of_the_sequence():
    rng = np.random.default_rng(3)
    for mod in CELLS.values():
        params, x, _, kw = _setup(mod, rng, 4)
        for log_space in (False, True):
            h = mod.forward(params, x, mode="sequential", log_space=log_space, **kw)[0]
            np.testing.assert_array_equal(mod.step_forward(params, x[:, 2], h[:, 1], log_space), h[:, 2])


@pytest.mark.parametrize("name", CELLS)
@pytest.mark.parametrize("mode", ["sequential", "parallel"])
@pytest.mark.parametrize("log_space", [False, True])
def test_float32_runs_in_float32(name, mode, log_space):
    mod = CELLS[name]
    params, x, dy, kw = _setup(mod, np.random.default_rng(9), 6)
    f32 = {k: v.astype(np.float32) for k, v in params.items()}
    h, dx, grads = _run(mod, f32, x.astype(np.float32), dy.astype(np.float32), mode=mode, log_space=log_space,
                        h0=kw["h0"].astype(np.float32))
    assert h.dtype == dx.dtype == np.float32 and all(g.dtype == np.float32 for g in grads.values())
    h64 = mod.forward(params, x, mode=mode, log_space=log_space, **kw)[0]
    assert rel_error(h, h64) <= 1e-5


# --- what the normalisation and the log space buy -------------------------------------------------------
def test_minlstm_normalised_gates_sum_to_one_and_equal_f_over_f_plus_i():
    k_f = np.linspace(-40, 40, 81)[:, None] * np.ones((1, 81))
    k_i = k_f.T
    f_n, i_n, _ = minlstm.normalised_gates(k_f, k_i)
    np.testing.assert_allclose(f_n + i_n, 1.0, rtol=0, atol=1e-15)
    f, i = expit(k_f), expit(k_i)
    np.testing.assert_allclose(f_n, f / (f + i), rtol=1e-12)
    np.testing.assert_allclose(i_n, i / (f + i), rtol=1e-12)


@pytest.mark.parametrize("name", CELLS)
def test_state_is_a_convex_combination_so_its_scale_is_time_independent(name):
    """(1 − z) + z = f' + i' = 1: h_t lies between the smallest and largest of h_0 and h̃_1 .. h̃_t."""
    mod = CELLS[name]
    params, x, _, kw = _setup(mod, np.random.default_rng(11), 200, B=2, D=3, H=4)
    params = {k: 3.0 * v for k, v in params.items()}       # push gates towards 0 and 1
    h, cache = mod.forward(params, x, mode="parallel", backend="numpy", **kw)
    lo = np.minimum(kw["h0"][:, None], np.minimum.accumulate(cache.h_tilde, axis=1))
    hi = np.maximum(kw["h0"][:, None], np.maximum.accumulate(cache.h_tilde, axis=1))
    assert np.all(h >= lo - 1e-12) and np.all(h <= hi + 1e-12)


@pytest.mark.parametrize("name", CELLS)
def test_log_space_states_are_positive_and_finite_for_saturated_gates(name):
    mod = CELLS[name]
    params, x, dy, kw = _setup(mod, np.random.default_rng(5), 300, B=2, D=3, H=4)
    params = {k: 40.0 * v for k, v in params.items()}      # pre-activations of order ±50
    h, dx, grads = _run(mod, params, x, dy, mode="parallel", log_space=True, backend="numpy", **kw)
    assert np.all(h > 0) and np.all(np.isfinite(h))
    assert np.all(np.isfinite(dx)) and all(np.all(np.isfinite(g)) for g in grads.values())
    h_seq = mod.forward(params, x, mode="sequential", log_space=True, **kw)[0]
    assert rel_error(h, h_seq) <= 1e-12


def test_g_is_positive_continuous_and_log_g_is_its_log():
    k = np.concatenate([np.linspace(-30, 30, 601), [0.0, -1e-300, 1e-300]])
    assert np.all(_gates.g(k) > 0)
    np.testing.assert_allclose(_gates.log_g(k), np.log(_gates.g(k)), rtol=1e-14, atol=0)
    assert _gates.g(np.array(0.0)) == 0.5 and abs(_gates.g(np.array(-1e-12)) - 0.5) < 1e-12
    eps = 1e-6
    kk = k[np.abs(k) > 1e-3]
    for f, df in ((_gates.g, _gates.dg), (_gates.log_g, _gates.dlog_g)):
        np.testing.assert_allclose(df(kk), (f(kk + eps) - f(kk - eps)) / (2 * eps), rtol=1e-7, atol=1e-10)


# --- parameter counts (Feng et al. Sec. 3.1, 3.2) -----------------------------------------------------------
PAPER_PERCENT = {"mingru": [33, 22, 17, 13], "minlstm": [38, 25, 19, 15]}


def test_n_params_counts_what_init_creates():
    rng = np.random.default_rng(0)
    for mod in (mingru, minlstm, gru, lstm):
        for D, H in ((3, 5), (4, 4), (2, 8)):
            for bias in (True, False):
                params = mod.init(rng, D, H, bias=bias)
                assert sum(p.size for p in params.values()) == mod.n_params(D, H, bias=bias)


@pytest.mark.parametrize("alpha", [1, 2, 3, 4])
def test_parameter_ratios_reproduce_the_paper(alpha):
    """The paper counts weights: GRU 3 d_h (d_x + d_h), minGRU 2 d_h d_x; LSTM 4 d_h (d_x + d_h), minLSTM
    3 d_h d_x; with d_h = α d_x the ratios are 2 / (3 (1 + α)) and 3 / (4 (1 + α)) for any d_x."""
    for D in (8, 64, 256):
        H = alpha * D
        r_gru = Fraction(mingru.n_params(D, H, bias=False), gru.n_params(D, H, bias=False))
        r_lstm = Fraction(minlstm.n_params(D, H, bias=False), lstm.n_params(D, H, bias=False))
        assert r_gru == Fraction(2, 3 * (1 + alpha))
        assert r_lstm == Fraction(3, 4 * (1 + alpha))
        assert round(100 * r_gru) == PAPER_PERCENT["mingru"][alpha - 1]
        assert round(100 * r_lstm) == PAPER_PERCENT["minlstm"][alpha - 1]
    # Counting biases too (one per gate) shifts the ratios by O(1/D); from D = 256 they round the same.
    D, H = 256, alpha * 256
    assert round(100 * mingru.n_params(D, H) / gru.n_params(D, H)) == PAPER_PERCENT["mingru"][alpha - 1]
    assert round(100 * minlstm.n_params(D, H) / lstm.n_params(D, H)) == PAPER_PERCENT["minlstm"][alpha - 1]


# --- bad input ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CELLS)
@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_log_space_rejects_a_non_positive_h0(name, mode):
    mod = CELLS[name]
    params, x, _, kw = _setup(mod, np.random.default_rng(0), 3)
    for bad in (0.0, -0.5):
        h0 = kw["h0"].copy()
        h0[1, 2] = bad
        with pytest.raises(ValueError, match="h0 must be positive"):
            mod.forward(params, x, h0=h0, mode=mode, log_space=True)
        mod.forward(params, x, h0=h0, mode="sequential", log_space=False)  # vanilla: any real h0


@pytest.mark.parametrize("name", CELLS)
def test_bad_input_is_a_clear_error(name):
    mod = CELLS[name]
    rng = np.random.default_rng(0)
    params, x, dy, kw = _setup(mod, rng, 3)
    B, T, D = x.shape
    H = dy.shape[2]
    cases = [
        ("x", dict(x=x[:, :, :-1])),
        ("x", dict(x=x[0])),
        ("x", dict(x=x[:, :0])),
        ("x", dict(x=x.astype(np.float32))),
        ("x", dict(x=np.where(x > 1, np.nan, x))),
        ("h0", dict(h0=kw["h0"][:, :-1])),
        ("h0", dict(h0=kw["h0"][None])),
        ("mode", dict(mode="scan")),
        ("log_space", dict(log_space="yes")),
        ("method", dict(method="fft", backend="numpy")),
        ("params", dict(params={k: v for k, v in params.items() if k != "W_h"})),
        ("W_h", dict(params=dict(params, W_h=params["W_h"][:, :-1]))),
        ("b_h", dict(params=dict(params, b_h=params["b_h"][:-1]))),
        ("d_in", None),
    ]
    for arg, change in cases:
        with pytest.raises(ValueError, match=arg):
            if change is None:
                mod.init(rng, 0, H)
            else:
                call = {"params": params, "x": x, **kw, **change}
                mod.forward(call.pop("params"), call.pop("x"), **call)
    _, cache = mod.forward(params, x, mode="sequential", **kw)
    with pytest.raises(ValueError, match="dy"):
        mod.backward(params, cache, dy[:, :-1])
    with pytest.raises(ValueError, match="h_prev"):
        mod.step_forward(params, x[:, 0], kw["h0"][:-1])
    with pytest.raises(ValueError, match="x_t"):
        mod.step_forward(params, x[:, 0, :-1], kw["h0"])


@pytest.mark.parametrize("log_space", [False, True])
@pytest.mark.parametrize("name", sorted(CELLS))
def test_out_receives_the_states_and_changes_nothing(name, log_space):
    """A training loop's reused buffer: h is written into ``out`` (the cache holds it) and every number, the
    gradients included, is what the fresh-array call gives; the sequential mode and a bad buffer are refused."""
    mod = CELLS[name]
    params, x, dy, kw = _setup(mod, np.random.default_rng(21), 6)
    kw = {**kw, "log_space": log_space}
    if log_space:
        kw["h0"] = np.abs(kw["h0"]) + 0.1
    h_ref, cache_ref = mod.forward(params, x, **kw)
    out = np.full_like(h_ref, np.nan)
    h, cache = mod.forward(params, x, out=out, **kw)
    assert h is out
    np.testing.assert_array_equal(h, h_ref)
    errors = backward_rel_errors(mod.backward, params, cache, cache_ref, dy)
    assert set(errors.values()) == {0.0}, errors       # bit-identical
    with pytest.raises(ValueError, match="^out receives the scan's states in mode='parallel'"):
        mod.forward(params, x, out=out, **{**kw, "mode": "sequential"})
    with pytest.raises(ValueError, match=r"^out must have the shape of the states h \(B, T, H\) \(3, 6, 5\)"):
        mod.forward(params, x, out=out[:, 1:], **kw)
    with pytest.raises(ValueError, match=r"^out must have the dtype of the states h"):
        mod.forward(params, x, out=out.astype(np.float32), **kw)
    with pytest.raises(ValueError, match="^out is not supported with backend='cuda'"):
        mod.forward(params, x, out=out, **{**kw, "backend": "cuda"})
