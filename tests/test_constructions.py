"""Zucchet et al., Sec. 3.1 / Fig. 1 and App. A: recurrent networks whose weights are set by hand compute
causal linear self-attention, exactly for the gated RNN (full and compact), in the limit of a vanishing
linearisation scale for the LSTM and the two-layer LRU; a GRU neuron cannot keep a memory and write to it."""
import numpy as np
import pytest
from scipy.special import expit

from minimal.run import io
from minimal.constructions import common, lsa_as_gated_rnn, lsa_as_gru, lsa_as_lru, lsa_as_lstm, measure
from minimal.cells import gated_rnn, gru, lru, lsa
from minimal.gradcheck import rel_error

EXACT = 1e-10  # the design target for the exact constructions (float64)


def _attention(rng, d, D=None, D_k=None, D_v=None):
    return lsa.init(rng, d if D is None else D, D_k if D_k is not None else d, D_v if D_v is not None else d)


def _weights(p):
    return p["W_V"], p["W_K"], p["W_Q"]


# --- the gated RNN, Fig. 1 ---------------------------------------------------------------------------------
@pytest.mark.parametrize("d", range(1, 9))
def test_gated_rnn_construction_is_linear_self_attention(rng, d):
    p = _attention(rng, d)
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(*_weights(p))
    for T in (1, 5, 16):
        x = rng.standard_normal((2, T, d))
        assert rel_error(lsa_as_gated_rnn.gated_rnn_attention(c, x), lsa.forward(p, x)[0]) <= EXACT


def test_gated_rnn_construction_handles_rectangular_attention(rng):
    p = _attention(rng, 3, D=5, D_k=2, D_v=4)
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(*_weights(p))
    assert (c.n_kv, c.n_q) == (4 * 2, 2)
    x = rng.standard_normal((3, 7, 5))
    assert rel_error(lsa_as_gated_rnn.gated_rnn_attention(c, x), lsa.forward(p, x)[0]) <= EXACT


def test_gated_rnn_construction_has_d2_kv_neurons_at_lam_1_and_d_queries_at_lam_0(rng):
    d = 3
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(*_weights(_attention(rng, d)))
    assert (c.n_kv, c.n_q) == (d * d, d)
    np.testing.assert_array_equal(c.lam, np.r_[np.ones(d * d), np.zeros(d)])
    assert c.params["W_out_m"].shape == (d * d, d * d + d)
    assert c.params["D"].shape == (d, d * d)


def _run_construction(rng, build, d, B, T):
    """Attention weights p (d x d), inputs x (B, T, d), the construction c = build(W_V, W_K, W_Q) and the cache
    of its gated RNN run on x̃ = [x; 1]."""
    p = _attention(rng, d)
    x = rng.standard_normal((B, T, d))
    c = build(*_weights(p))
    _, cache = gated_rnn.forward(c.params, common.append_one(x), lam=c.lam)
    return p, x, c, cache


def test_kv_neurons_hold_the_fast_weight_matrix_and_query_neurons_the_query(rng):
    d, T = 3, 6
    p, x, c, cache = _run_construction(rng, lsa_as_gated_rnn.lsa_to_gated_rnn, d, 2, T)
    _, lsa_cache = lsa.forward(p, x, mode="sequential")
    np.testing.assert_allclose(cache.h[..., :d * d], lsa_cache.W.reshape(2, T, d * d), rtol=0, atol=1e-12)
    np.testing.assert_allclose(cache.h[..., d * d:], lsa_cache.q, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method,backend", [("sequential", "numpy"), ("blelloch", "numpy")])
def test_construction_is_exact_on_every_scan_and_in_step_mode(rng, method, backend):
    d, T = 4, 9
    p = _attention(rng, d)
    x = rng.standard_normal((2, T, d))
    y_lsa = lsa.forward(p, x, mode="sequential")[0]
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(*_weights(p))
    assert rel_error(lsa_as_gated_rnn.gated_rnn_attention(c, x, method=method, backend=backend), y_lsa) <= EXACT
    h = np.zeros((2, c.n_kv + c.n_q))
    x1 = common.append_one(x)
    for t in range(T):
        y_t, h = gated_rnn.step_forward(c.params, x1[:, t], h, lam=c.lam)
        assert rel_error(y_t, y_lsa[:, t]) <= EXACT


# --- the compact construction -----------------------------------------------------------------------------
@pytest.mark.parametrize("d", range(1, 9))
def test_compact_construction_is_linear_self_attention_for_invertible_W_V(rng, d):
    p = _attention(rng, d)
    c = lsa_as_gated_rnn.lsa_to_gated_rnn_compact(*_weights(p))
    assert (c.n_kv, c.n_q) == (d * (d + 1) // 2, d)
    for T in (1, 5, 16):
        x = rng.standard_normal((2, T, d))
        assert rel_error(lsa_as_gated_rnn.gated_rnn_attention(c, x), lsa.forward(p, x)[0]) <= EXACT


def test_compact_construction_needs_no_inverse_when_keys_equal_values(rng):
    W_V = rng.standard_normal((3, 5))            # rectangular: W_V has no inverse
    p = {"W_V": W_V, "W_K": W_V.copy(), "W_Q": rng.standard_normal((3, 5))}
    c = lsa_as_gated_rnn.lsa_to_gated_rnn_compact(*_weights(p))
    np.testing.assert_array_equal(c.params["W_in_m"][c.n_kv:, :5], p["W_Q"])   # W_Q' = W_Q
    x = rng.standard_normal((2, 7, 5))
    assert rel_error(lsa_as_gated_rnn.gated_rnn_attention(c, x), lsa.forward(p, x)[0]) <= EXACT


def test_compact_kv_neurons_hold_the_symmetric_value_matrix(rng):
    d, T = 3, 5
    p, x, c, cache = _run_construction(rng, lsa_as_gated_rnn.lsa_to_gated_rnn_compact, d, 1, T)
    v = x @ p["W_V"].T
    S = np.einsum("ti,tj->ij", v[0], v[0])
    np.testing.assert_allclose(cache.h[0, -1, :c.n_kv], S[np.triu_indices(d)], rtol=0, atol=1e-12)


# --- counts ----------------------------------------------------------------------------------------------
def test_count_table_gives_the_neuron_counts_and_o_d4_parameters():
    rows = measure.count_table([1, 2, 3, 8, 16])
    for r in rows:
        d = r["d"]
        H, H_out = d * d + d, d * d
        assert r["attention_params"] == 3 * d * d
        assert (r["full_neurons"], r["full_gates"]) == (H, H_out)
        assert (r["compact_neurons"], r["compact_gates"]) == (d * (d + 1) // 2 + d, H_out)
        # W_in_m, W_in_x (H, d+1); nu (H,); W_out_m, W_out_x (H_out, H); D (d, H_out)
        assert r["full_params"] == 2 * H * (d + 1) + H + 2 * H_out * H + d * H_out
        assert r["compact_nonzero"] <= r["full_nonzero"] <= r["full_params"]
    big = rows[-1]
    assert 2 <= big["full_params"] / big["d"] ** 4 < 2.5       # leading term 2 d^4 (the output gates)
    assert big["full_params"] > 100 * big["attention_params"]


def test_n_params_counts_every_array_of_each_construction(rng):
    W = _weights(_attention(rng, 2))
    c = lsa_as_lstm.lsa_to_lstm(*W, eps=0.1)
    assert measure.n_params(c) == sum(a.size for a in c.params.values()) + c.D_read.size
    c = lsa_as_lru.lsa_to_lru(*W, eps=0.1)
    assert measure.n_params(c) == (sum(a.size for a in c.layer1.values()) + sum(a.size for a in c.layer2.values())
                             + c.D_read.size)


# --- LSTM and LRU: linearised, exact in the limit ----------------------------------------------------------
def test_the_saturating_gates_are_exact_in_float64():
    assert expit(common.FORGET_BIAS) == 1.0
    lam = lru.lambda_of({"nu_log": np.array([lsa_as_lru.LOG_ONE]), "theta_log": np.array([lsa_as_lru.LOG_ONE])})
    assert abs(lam[0]) == 1.0 and abs(lam[0].imag) < 1e-20


def _errors(build, run, p, x, scales):
    y = lsa.forward(p, x)[0]
    return np.array([rel_error(run(build(*_weights(p), eps=e), x), y) for e in scales])


@pytest.mark.parametrize("build,run", [(lsa_as_lstm.lsa_to_lstm, lsa_as_lstm.lstm_attention), (lsa_as_lru.lsa_to_lru, lsa_as_lru.lru_attention)],
                         ids=["lstm", "lru"])
def test_linearised_constructions_converge_to_attention_at_rate_eps_squared(rng, build, run):
    p = _attention(rng, 3)
    x = rng.standard_normal((2, 7, 3))
    scales = np.logspace(-1, -3, 5)
    errors = _errors(build, run, p, x, scales)
    assert np.all(np.diff(errors) < 0)
    rate, _ = measure.convergence_rate(scales, errors)
    assert 1.9 < rate < 2.1, (rate, errors)
    assert errors[-1] < 1e-4


def test_linearised_constructions_handle_rectangular_attention_and_T1(rng):
    p = _attention(rng, 3, D=4, D_k=2, D_v=3)
    for T in (1, 4):
        x = rng.standard_normal((2, T, 4))
        for build, run in [(lsa_as_lstm.lsa_to_lstm, lsa_as_lstm.lstm_attention), (lsa_as_lru.lsa_to_lru, lsa_as_lru.lru_attention)]:
            assert _errors(build, run, p, x, [1e-3])[0] < 1e-4


def test_lru_construction_is_the_same_for_both_scan_methods(rng):
    p = _attention(rng, 2)
    x = rng.standard_normal((2, 6, 2))
    c = lsa_as_lru.lsa_to_lru(*_weights(p), eps=1e-2)
    assert rel_error(lsa_as_lru.lru_attention(c, x, "parallel"), lsa_as_lru.lru_attention(c, x, "sequential")) < 1e-12


# --- GRU (App. A.3): a perfect memory, but no multiplicative input gate -------------------------------------
def test_gru_with_z_and_r_one_is_a_running_sum_up_to_the_tanh():
    # App. A.3: "One layer can implement diagonal linear recurrence by linearizing the tanh, having z = 1 and
    # r = λ": with λ = 1 the unit stores Σ x, to O(ε²) relative error
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.0, (2, 20, 3))
    exact = np.cumsum(x, axis=1)
    eps = np.array([1e-2, 3e-3, 1e-3, 3e-4])
    errors = np.array([rel_error(lsa_as_gru.gru_running_sum(x, e), exact) for e in eps])
    p, _ = measure.convergence_rate(eps, errors)
    assert abs(p - 2.0) < 0.05
    # each step's tanh drops ~u³/3 of u = ε S_t: summed over T steps, relative ~ ε² S_T² T / 12 (2x margin)
    T, S_T = x.shape[1], exact[:, -1].max()
    assert errors[-1] < eps[-1] ** 2 * S_T ** 2 * T / 6


def test_gru_product_write_forgets_at_an_input_dependent_rate():
    # App. A.3: the product (W_m x)(W_x x) would need z for one branch and h̃ for the other, "but, given that
    # z ≠ 0, the previous hidden state h_t influences the result": h_t keeps h_{t-1} with weight 1 - z_t(x_t)
    rng = np.random.default_rng(1)
    w_m, w_x = rng.standard_normal(3), rng.standard_normal(3)
    x_t = rng.standard_normal((5, 3))
    h_t, decay = lsa_as_gru.gru_product_write(x_t, w_m, w_x, np.full((5, 1), 0.7))
    z = 1.0 / (1.0 + np.exp(-(x_t @ w_m)))
    np.testing.assert_allclose(decay[:, 0], 1.0 - z, rtol=1e-12)
    np.testing.assert_allclose(h_t[:, 0], (1 - z) * 0.7 + z * np.tanh(x_t @ w_x), rtol=1e-12)
    assert np.ptp(decay) > 0.1          # no constant λ: the decay moves with the input
    # a constant decay needs a constant z, and then the write z·h̃ has only one input-dependent factor
    h_c, decay_c = lsa_as_gru.gru_product_write(x_t, np.zeros(3), w_x, np.full((5, 1), 0.7))
    np.testing.assert_allclose(decay_c, 0.5, rtol=1e-15)
    np.testing.assert_allclose(h_c[:, 0] - 0.35, 0.5 * np.tanh(x_t @ w_x), rtol=1e-12)


def test_a_gru_memory_through_the_candidate_accumulates_key_values():
    # U_h = I, r = 1: h_t ≈ h_{t-1} + z_t (W_h x_t); with z = σ(ε k_j) and offset units, 4 (A - A') / ε² → Σ v_i k_j
    rng = np.random.default_rng(2)
    W_V, W_K = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    x = rng.standard_normal((2, 9, 4))
    exact = np.cumsum(np.einsum("btv,btk->btvk", x @ W_V.T, x @ W_K.T), axis=1).reshape(2, 9, 6)
    eps = np.array([1e-2, 3e-3, 1e-3])
    errors = []
    for e in eps:
        h, _ = gru.forward(lsa_as_gru.gru_key_values(W_V, W_K, e), x)
        errors.append(rel_error(4 * (h[..., :6] - h[..., 6:]) / e ** 2, exact))
    p, _ = measure.convergence_rate(eps, np.array(errors))
    assert abs(p - 2.0) < 0.1 and errors[-1] < 1e-3


def test_two_gru_layers_approach_attention_like_eps_squared():
    # ours, against Table 3's "–" for the GRU (module docstring, item 5)
    rng = np.random.default_rng(3)
    p = lsa.init(rng, 3)
    W = (p["W_V"], p["W_K"], p["W_Q"])
    x = rng.standard_normal((3, 10, 3))
    y = lsa.forward(p, x)[0]
    eps = np.array([1e-2, 3e-3, 1e-3])
    errors = np.array([rel_error(lsa_as_gru.gru_attention(lsa_as_gru.lsa_to_gru(*W, eps=e), x), y) for e in eps])
    rate, _ = measure.convergence_rate(eps, errors)
    assert abs(rate - 2.0) < 0.1 and errors[-1] < 1e-3
    c = lsa_as_gru.lsa_to_gru(*W, eps=1e-3)
    assert c.layer1["b_z"].size == 2 * 9 + 3 and c.layer2["b_z"].size == 4 * 9
    assert measure.n_params(c) == 84 * 3 ** 4 + 34 * 3 ** 3 + 24 * 3 ** 2 + 3 * 3


# --- the rate fit and bad inputs --------------------------------------------------------------------------
def test_convergence_rate_recovers_a_power_law():
    s = np.logspace(-1, -4, 6)
    p, c = measure.convergence_rate(s, 3.0 * s ** 2)
    assert abs(p - 2) < 1e-12 and abs(c - 3) < 1e-10


@pytest.mark.parametrize("call,match", [
    (lambda W: lsa_as_gated_rnn.lsa_to_gated_rnn(W[0][0], W[1], W[2]), "W_V"),
    (lambda W: lsa_as_gated_rnn.lsa_to_gated_rnn(W[0], W[1][:, :2], W[2]), "W_K"),
    (lambda W: lsa_as_gated_rnn.lsa_to_gated_rnn(W[0], W[1], W[2][:2]), "W_Q"),
    (lambda W: lsa_as_gated_rnn.lsa_to_gated_rnn(W[0] * np.nan, W[1], W[2]), "W_V"),
    (lambda W: lsa_as_gated_rnn.lsa_to_gated_rnn_compact(np.zeros((3, 3)), W[1], W[2]), "W_V"),
    (lambda W: lsa_as_gated_rnn.lsa_to_gated_rnn_compact(W[0][:, :2] @ W[0][:2], W[1], W[2]), "W_V"),
    (lambda W: lsa_as_gated_rnn.lsa_to_gated_rnn_compact(W[0], W[1][:2], W[2][:2]), "W_K"),
    (lambda W: lsa_as_lstm.lsa_to_lstm(*W, eps=0.0), "eps"),
    (lambda W: lsa_as_lstm.lsa_to_lstm(*W, eps=2.0), "eps"),
    (lambda W: lsa_as_lru.lsa_to_lru(*W, eps=True), "eps"),
    (lambda W: lsa_as_lru.lsa_to_lru(W[0], W[1][:, :2], W[2], 0.1), "W_K"),
], ids=["W_V-1d", "W_K-cols", "W_Q-rows", "W_V-nan", "compact-singular", "compact-rank2", "compact-D_k",
        "lstm-eps0", "lstm-eps2", "lru-eps-bool", "lru-W_K"])
def test_bad_weights_name_the_argument(rng, call, match):
    W = _weights(_attention(rng, 3))
    with pytest.raises(ValueError, match=match):
        call(W)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="x"):
        common.append_one(np.ones((2, 3)))
    with pytest.raises(ValueError, match="eps"):
        lsa_as_gru.gru_running_sum(np.ones((1, 2, 1)), 2.0)
    with pytest.raises(ValueError, match="x"):
        lsa_as_gru.gru_running_sum(np.ones((2, 1)))
    with pytest.raises(ValueError, match="h_prev"):
        lsa_as_gru.gru_product_write(np.ones((2, 3)), np.ones(3), np.ones(3), np.ones((3, 1)))
    with pytest.raises(ValueError, match="ds"):
        measure.count_table([0])
    with pytest.raises(ValueError, match="construction"):
        measure.n_params({"W": np.ones(2)})
    with pytest.raises(ValueError, match="scales"):
        measure.convergence_rate(np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="errors"):
        measure.convergence_rate(np.array([1.0, 2.0]), np.array([1.0]))
