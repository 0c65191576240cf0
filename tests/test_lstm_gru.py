"""LSTM and GRU (Zucchet et al. App. A.2-A.3; Hochreiter & Schmidhuber 1997, Cho et al. 2014).

- The sequence forward is the paper's equations written out step by step (an independent per-gate version).
- BPTT (``backward``) equals chaining ``step_backward`` in reverse time, and matches finite differences for
  every parameter and the input, at T = 1 and odd T.
- Without recurrent weights the LSTM's cell state is an input-gated diagonal linear recurrence (a scan), and
  the GRU's state the same recurrence as minGRU's with a tanh candidate.
- Bad input is a ValueError naming the argument.
"""
import numpy as np
import pytest
from scipy.special import expit

from minimal import scan
from minimal.cells import gru, lstm, mingru
from minimal.gradcheck import rel_error

CELLS = {"lstm": lstm, "gru": gru}
# The float64 gradient checks of every example, and their T = 1 and odd T: tests/test_registry.py.


def test_examples_are_small_enough_for_finite_differences():
    for mod in CELLS.values():
        assert all(ex.n_params() + ex.x.size <= 400 for ex in mod.examples(np.random.default_rng(0)))


def _lin(p, m, n, v):
    return v @ p[f"{m}_{n}"].T


def _lstm_reference(p, x, h, c):
    """App. A.2 equations, one gate at a time."""
    out = []
    for t in range(x.shape[1]):
        xt = x[:, t]
        pre = {n: _lin(p, "W", n, xt) + _lin(p, "U", n, h) + p[f"b_{n}"] for n in "fioc"}
        f, i, o = expit(pre["f"]), expit(pre["i"]), expit(pre["o"])
        c = f * c + i * np.tanh(pre["c"])
        h = o * np.tanh(c)
        out.append(h)
    return np.stack(out, 1)


def _gru_reference(p, x, h):
    """App. A.3 equations, one gate at a time."""
    out = []
    for t in range(x.shape[1]):
        xt = x[:, t]
        z = expit(_lin(p, "W", "z", xt) + _lin(p, "U", "z", h) + p["b_z"])
        r = expit(_lin(p, "W", "r", xt) + _lin(p, "U", "r", h) + p["b_r"])
        h_tilde = np.tanh(_lin(p, "W", "h", xt) + _lin(p, "U", "h", r * h) + p["b_h"])
        h = (1 - z) * h + z * h_tilde
        out.append(h)
    return np.stack(out, 1)


def test_forward_matches_the_equations_written_out():
    rng = np.random.default_rng(1)
    B, T, D, H = 2, 7, 3, 4
    x = rng.standard_normal((B, T, D))
    h0, c0 = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    p = lstm.init(rng, D, H)
    np.testing.assert_allclose(lstm.forward(p, x, h0=h0, c0=c0)[0], _lstm_reference(p, x, h0, c0),
                               rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(lstm.forward(p, x)[0], _lstm_reference(p, x, 0 * h0, 0 * c0),
                               rtol=1e-13, atol=1e-14)
    q = gru.init(rng, D, H)
    np.testing.assert_allclose(gru.forward(q, x, h0=h0)[0], _gru_reference(q, x, h0), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gru.forward(q, x)[0], _gru_reference(q, x, 0 * h0), rtol=1e-13, atol=1e-14)


def test_bptt_equals_chained_step_backward():
    rng = np.random.default_rng(2)
    B, T, D, H = 2, 5, 3, 4
    x, dy = rng.standard_normal((B, T, D)), rng.standard_normal((B, T, H))
    h0, c0 = rng.standard_normal((B, H)), rng.standard_normal((B, H))

    # LSTM: step forward, then step backward in reverse, summing the parameter gradients.
    p = lstm.init(rng, D, H)
    h, c, caches = h0, c0, []
    for t in range(T):
        h, c, cache = lstm.step_forward(p, x[:, t], h, c)
        caches.append(cache)
    y, seq_cache = lstm.forward(p, x, h0=h0, c0=c0)
    np.testing.assert_array_equal(y[:, -1], h)
    dx_seq, g_seq = lstm.backward(p, seq_cache, dy)
    dh, dc, total = np.zeros((B, H)), np.zeros((B, H)), {k: 0.0 for k in p}
    for t in reversed(range(T)):
        dx_t, dh, dc, g = lstm.step_backward(p, caches[t], dy[:, t] + dh, dc)
        assert rel_error(dx_t, dx_seq[:, t]) <= 1e-13
        total = {k: total[k] + g[k] for k in p}
    for k in p:
        assert rel_error(total[k], g_seq[k]) <= 1e-13, k

    # GRU: the same.
    q = gru.init(rng, D, H)
    h, caches = h0, []
    for t in range(T):
        h, cache = gru.step_forward(q, x[:, t], h)
        caches.append(cache)
    y, seq_cache = gru.forward(q, x, h0=h0)
    np.testing.assert_array_equal(y[:, -1], h)
    dx_seq, g_seq = gru.backward(q, seq_cache, dy)
    dh, total = np.zeros((B, H)), {k: 0.0 for k in q}
    for t in reversed(range(T)):
        dx_t, dh, g = gru.step_backward(q, caches[t], dy[:, t] + dh)
        assert rel_error(dx_t, dx_seq[:, t]) <= 1e-13
        total = {k: total[k] + g[k] for k in q}
    for k in q:
        assert rel_error(total[k], g_seq[k]) <= 1e-13, k


def test_step_gradients_include_the_initial_states():
    """dL/dh0 and dL/dc0 from step_backward match finite differences (h0, c0 are not params)."""
    rng = np.random.default_rng(4)
    B, D, H = 2, 3, 4
    x_t, dh = rng.standard_normal((B, D)), rng.standard_normal((B, H))
    h0, c0 = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    p, q = lstm.init(rng, D, H), gru.init(rng, D, H)
    _, dh0, dc0, _ = lstm.step_backward(p, lstm.step_forward(p, x_t, h0, c0)[2], dh)
    _, dh0_gru, _ = gru.step_backward(q, gru.step_forward(q, x_t, h0)[1], dh)
    eps = 1e-6
    for i in np.ndindex(h0.shape):
        e = np.zeros_like(h0)
        e[i] = eps
        num_h = np.sum(dh * (lstm.step_forward(p, x_t, h0 + e, c0)[0] - lstm.step_forward(p, x_t, h0 - e, c0)[0]))
        num_c = np.sum(dh * (lstm.step_forward(p, x_t, h0, c0 + e)[0] - lstm.step_forward(p, x_t, h0, c0 - e)[0]))
        num_g = np.sum(dh * (gru.step_forward(q, x_t, h0 + e)[0] - gru.step_forward(q, x_t, h0 - e)[0]))
        assert abs(num_h / (2 * eps) - dh0[i]) <= 1e-8
        assert abs(num_c / (2 * eps) - dc0[i]) <= 1e-8
        assert abs(num_g / (2 * eps) - dh0_gru[i]) <= 1e-8


def test_without_recurrent_weights_the_lstm_cell_is_a_gated_linear_recurrence():
    """U = 0: c_t = f_t ⊙ c_{t-1} + i_t ⊙ c̃_t with input-only gates, a diagonal linear scan (cf. Eq. 2)."""
    rng = np.random.default_rng(5)
    B, T, D, H = 2, 9, 3, 4
    p = {k: (0 * v if k.startswith("U") else v) for k, v in lstm.init(rng, D, H).items()}
    x, c0 = rng.standard_normal((B, T, D)), rng.standard_normal((B, H))
    pre = {n: x @ p[f"W_{n}"].T + p[f"b_{n}"] for n in "fioc"}
    c = scan.linear_scan(expit(pre["f"]), expit(pre["i"]) * np.tanh(pre["c"]), c0, method="sequential",
                         backend="numpy")
    h, cache = lstm.forward(p, x, c0=c0)
    np.testing.assert_allclose(cache.c, c, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(h, expit(pre["o"]) * np.tanh(c), rtol=1e-13, atol=1e-14)


def test_without_recurrent_weights_the_gru_is_mingru_with_a_tanh_candidate():
    rng = np.random.default_rng(6)
    B, T, D, H = 2, 9, 3, 4
    q = {k: (0 * v if k.startswith("U") else v) for k, v in gru.init(rng, D, H).items()}
    x, h0 = rng.standard_normal((B, T, D)), rng.standard_normal((B, H))
    # minGRU's recurrence with its candidate passed through tanh, which minGRU drops (Feng et al. Sec. 3.1)
    z = expit(x @ q["W_z"].T + q["b_z"])
    h_tilde = np.tanh(x @ q["W_h"].T + q["b_h"])
    h = scan.linear_scan(1 - z, z * h_tilde, h0, method="sequential", backend="numpy")
    np.testing.assert_allclose(gru.forward(q, x, h0=h0)[0], h, rtol=1e-13, atol=1e-14)
    # and minGRU itself, given the same gate weights, differs only by that tanh
    m = {"W_z": q["W_z"], "b_z": q["b_z"], "W_h": q["W_h"], "b_h": q["b_h"]}
    h_min = mingru.forward(m, x, h0=h0, mode="sequential")[0]
    assert not np.allclose(h_min, h)


def test_float32_runs_in_float32():
    rng = np.random.default_rng(8)
    for mod in CELLS.values():
        p = {k: v.astype(np.float32) for k, v in mod.init(rng, 3, 4).items()}
        x = rng.standard_normal((2, 5, 3)).astype(np.float32)
        h, cache = mod.forward(p, x)
        dx, grads = mod.backward(p, cache, np.ones_like(h))
        assert h.dtype == dx.dtype == np.float32
        assert all(g.dtype == np.float32 for g in grads.values())


@pytest.mark.parametrize("name", CELLS)
def test_bad_input_is_a_clear_error(name):
    mod = CELLS[name]
    rng = np.random.default_rng(0)
    B, T, D, H = 2, 3, 3, 4
    p = mod.init(rng, D, H)
    x, h0 = rng.standard_normal((B, T, D)), rng.standard_normal((B, H))
    first = next(iter(p))
    cases = [
        ("x", dict(x=x[:, :, :-1])),
        ("x", dict(x=x[0])),
        ("x", dict(x=x[:, :0])),
        ("x", dict(x=x.astype(np.float32))),
        ("x", dict(x=np.where(x > 1, np.inf, x))),
        ("h0", dict(h0=h0[:, :-1])),
        ("h0", dict(h0=h0[:1])),
        ("params", dict(p={k: v for k, v in p.items() if k != "U_h" and k != "U_c"})),
        ("params", dict(p=dict(p, extra=p[first]))),
        ("U_", dict(p={k: (v[:, :-1] if k.startswith("U") else v) for k, v in p.items()})),
        ("b_", dict(p={k: (v[:-1] if k.startswith("b") else v) for k, v in p.items()})),
    ]
    if mod is lstm:
        cases.append(("c0", dict(c0=h0[:, :-1])))
    for arg, change in cases:
        call = {"p": p, "x": x, "h0": h0, **change}
        with pytest.raises(ValueError, match=arg):
            mod.forward(call.pop("p"), call.pop("x"), **call)
    with pytest.raises(ValueError, match="d_hidden"):
        mod.init(rng, D, 0)
    h, cache = mod.forward(p, x)
    with pytest.raises(ValueError, match="dy"):
        mod.backward(p, cache, h[..., :-1])
    with pytest.raises(ValueError, match="x_t"):
        mod.step_forward(p, x[:, 0, :-1])
    with pytest.raises(ValueError, match="h_prev"):
        mod.step_forward(p, x[:, 0], h0[:, :-1])
