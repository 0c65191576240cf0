"""Tian et al., Sec. 4 and App. A: GRIL blocks whose weights are set by hand compute gradient descent in context,
exactly (one step, multi-step with and without L2, the cross-entropy gradient); and the GD references they are
compared with (``minimal.analysis.gril_gd``) are themselves checked against finite differences and Monte Carlo."""
import numpy as np
import pytest

from minimal.constructions import gd_as_gril as CG
from minimal.analysis import gril_gd as G
from minimal.cells import gril
from minimal.gradcheck import numerical_gradient, rel_error
from minimal.tasks import gril_regression as tasks

EXACT = 1e-10  # float64: the constructions are exact, up to rounding
SIZES = [(f, N, n_o) for f in (1, 3, 10) for N in (1, 4, 10) for n_o in sorted({1, f})]
SIZE_IDS = [f"f{f}-N{N}-no{n_o}" for f, N, n_o in SIZES]


def _tasks(rng, f, N, n_o, B=4):
    return tasks.sample(rng, B, N, f, n_o)


# ===================================================================== the references (gril_gd)
@pytest.mark.parametrize("l2", [0.0, 0.3])
@pytest.mark.parametrize("n_o", [1, 3])
def test_gradient_of_eq15_matches_finite_differences_of_the_loss(rng, n_o, l2):
    t = _tasks(rng, 3, 5, n_o, B=1)
    W = rng.standard_normal((1, 3, n_o))
    numeric = numerical_gradient(lambda: float(G.loss(t.X, t.Y, W, l2)[0]), W)
    assert rel_error(G.gradient(t.X, t.Y, W, l2), numeric) <= 1e-8


def test_one_step_from_zero_is_eta_over_N_sum_of_x_y_transposed(rng):
    # Eq. 6 / Eq. 8: W_1 = (η/N) Σ_i x_i y_i^T, and only the N context pairs enter (the query's y is ignored)
    t = _tasks(rng, 3, 4, 2)
    Y = t.Y.copy()
    Y[:, -1] = 1e6
    W1 = G.gd_step(t.X, Y, eta=0.7)
    assert rel_error(W1, 0.7 / 4 * t.X[:, :4].transpose(0, 2, 1) @ t.Y[:, :4]) <= EXACT


def test_gd_steps_decrease_the_loss_at_a_stable_step_size(rng):
    t = _tasks(rng, 3, 10, 3)
    W, losses = None, []
    for _ in range(5):
        W = G.gd_step(t.X, t.Y, 0.5, W)
        losses.append(G.loss(t.X, t.Y, W))
    assert np.all(np.diff(np.array(losses), axis=0) < 0)


def test_eta_star_minimises_a_monte_carlo_loss_curve_within_its_error(rng):
    f, N, a, B, chunks = 3, 4, 1.0, 200_000, 20
    t = tasks.sample(rng, B, N, f, f, x_scale=a)
    e = t.Y[:, -1]                                  # the target
    g = G.gd_predict(t.X, t.Y, 1.0)                 # from W_0 = 0 the prediction is linear in η: ŷ = η g
    eg, gg = np.sum(e * g, 1), np.sum(g * g, 1)
    per_chunk = eg.reshape(chunks, -1).mean(1) / gg.reshape(chunks, -1).mean(1)
    eta_hat, stderr = eg.mean() / gg.mean(), per_chunk.std(ddof=1) / np.sqrt(chunks)
    eta = G.eta_star(N, f, a)
    assert abs(eta_hat - eta) <= 4 * stderr, (eta_hat, eta, stderr)
    curve = {s: 0.5 * np.mean((e - s * eta * g) ** 2) for s in (0.8, 1.0, 1.2)}
    assert curve[1.0] < min(curve[0.8], curve[1.2])
    per_task = 0.5 * np.mean((e - eta * g) ** 2, axis=1)
    assert abs(per_task.mean() - G.gd_loss(N, f, a)) <= 4 * per_task.std() / np.sqrt(B)


@pytest.mark.parametrize("N, f, a", [(10, 10, 1.0), (4, 3, 2.0), (1, 1, 0.5)])
def test_gd_loss_is_the_zero_predictor_times_the_kurtosis_ratio(N, f, a):
    kappa = G.KURTOSIS_UNIFORM
    ratio = (f - 2 + kappa) / (N + f - 2 + kappa)
    assert G.gd_loss(N, f, a, eta=0.0) == pytest.approx(tasks.zero_loss(f, a), rel=1e-12)
    assert G.gd_loss(N, f, a) == pytest.approx(tasks.zero_loss(f, a) * ratio, rel=1e-12)
    assert G.eta_star(N, f, a) == pytest.approx(N / (a * a / 3 * (N + f - 2 + kappa)), rel=1e-12)


def test_the_paper_setting_n10_f10_halves_the_zero_predictor_loss():
    # App. B.2: N = f = 10; the ratio 0.495 is Table 7's GD 0.207 over the 0.414-0.426 of no-learning models
    assert G.gd_loss(10, 10) / tasks.zero_loss(10) == pytest.approx(9.8 / 19.8, rel=1e-12)


@pytest.mark.parametrize("N", [3, 10])
def test_newton_without_damping_recovers_the_teacher_from_n_ge_f_noiseless_pairs(rng, N):
    t = _tasks(rng, 3, N, 2)
    W1 = G.newton_step(t.X, t.Y, W0=rng.standard_normal((4, 3, 2)))
    assert rel_error(W1, t.W) <= 1e-9
    assert rel_error(G.newton_predict(t.X, t.Y), t.Y[:, -1]) <= 1e-9


def test_heavily_damped_newton_is_gradient_descent(rng):
    # (H + δI)^{-1} = I/δ + O(1/δ²): a step ηδ with damping δ tends to a GD step of size η
    t = _tasks(rng, 3, 6, 3)
    delta = 1e7
    assert rel_error(G.newton_step(t.X, t.Y, damping=delta, eta=0.5 * delta), G.gd_step(t.X, t.Y, 0.5)) <= 1e-6
    assert rel_error(G.newton_step(t.X, t.Y, damping=1.0, eta=0.5), G.gd_step(t.X, t.Y, 0.5)) > 0.1


@pytest.mark.parametrize("K", [1, 3])
def test_cross_entropy_gradient_eq11_matches_finite_differences(rng, K):
    t = tasks.sample_classification(rng, 1, 6, 4, K)
    W = rng.standard_normal((1, 4, K))
    numeric = numerical_gradient(lambda: float(G.ce_loss(t.X, t.Y[:, :6], W)[0]), W)
    assert rel_error(G.ce_gradient(t.X, t.Y[:, :6], W), numeric) <= 1e-8


# ===================================================================== one step: Prop. 4.1, Eq. 7-10
@pytest.mark.parametrize("f, N, n_o", SIZES, ids=SIZE_IDS)
def test_prop41_one_gril_block_predicts_one_gd_step(rng, f, N, n_o):
    t = _tasks(rng, f, N, n_o)
    c = CG.one_step_gd(f, N, eta=0.9, n_out=n_o)
    for mode in gril.MODES:
        assert rel_error(CG.gril_predict(c, t.tokens, mode=mode), G.gd_predict(t.X, t.Y, 0.9)) <= EXACT


def test_prop41_every_window_reads_the_accumulated_update_on_the_next_input(rng):
    # o_t = (η/N) Z_t x_{t+1} with Z_t = Σ_{i<=t} y_i x_i^T (Eq. 7-8), at every window, not only the last
    f, N = 3, 5
    t = _tasks(rng, f, N, f)
    o, cache = gril.forward(CG.one_step_gd(f, N, 0.9).params, t.tokens, s=2)
    Z = np.cumsum(t.Y[:, :N, :, None] * t.X[:, :N, None, :], axis=1)       # (B, N, f, f)
    assert rel_error(cache.Z, Z) <= EXACT
    assert rel_error(o, 0.9 / N * np.einsum("btij,btj->bti", Z, t.X[:, 1:])) <= EXACT


def test_padding_rows_of_the_state_and_output_stay_zero(rng):
    t = _tasks(rng, 4, 3, 1)
    o, cache = gril.forward(CG.one_step_gd(4, 3, 0.9, 1).params, t.tokens, s=2)
    assert np.all(cache.Z[:, :, 1:] == 0) and np.all(o[:, :, 1:] == 0)


def test_gril_has_f2_plus_13_parameters():
    # Sec. 4.5: O(f²) learned degrees of freedom: Q (3x3), q (3), β (1) and the gate A (f x f)
    for f in (1, 3, 10):
        assert CG.n_params(CG.one_step_gd(f, 4, 1.0)) == f * f + 13


# ===================================================================== the scalar warm-up: App. A.1
@pytest.mark.parametrize("f, N", [(1, 1), (3, 4), (10, 10)])
def test_app_a1_scalar_ssm_is_one_gd_step_and_the_gril_block(rng, f, N):
    t = _tasks(rng, f, N, 1)
    z, o = CG.scalar_ssm_forward(t.X, t.Y, eta=0.6)
    assert rel_error(o[:, -1], G.gd_predict(t.X, t.Y, 0.6)[:, 0]) <= EXACT
    o_gril, _ = gril.forward(CG.one_step_gd(f, N, 0.6, 1).params, t.tokens, s=2)
    assert rel_error(o, o_gril[:, :, 0]) <= EXACT
    # the state is the unscaled gradient with the sign flipped: z_N = -N ∇L(0) (Eq. 5 stores +N ∇L)
    assert rel_error(z[:, -1], -N * G.gradient(t.X, t.Y, np.zeros((4, f, 1)))[:, :, 0]) <= EXACT


def test_app_a1_with_the_printed_beta_minus_eta_over_n_predicts_minus_the_gd_step(rng):
    t = _tasks(rng, 3, 4, 1)
    Psi, Theta = CG.scalar_maps(3)
    c = CG.scalar_context(t.X, t.Y)
    z_N = (c @ Psi.T).sum(axis=1)                               # Eq. 12 summed: Σ x_t y_t
    o_printed = -0.6 / 4 * np.einsum("bf,bf->b", z_N, c[:, -1] @ Theta.T)
    assert rel_error(o_printed, -G.gd_predict(t.X, t.Y, 0.6)[:, 0]) <= EXACT


# ===================================================================== multi-step GD: App. A.3, A.5
@pytest.mark.parametrize("l2", [0.0, 0.25])
@pytest.mark.parametrize("L", [1, 2, 3])
@pytest.mark.parametrize("f, N, n_o", SIZES, ids=SIZE_IDS)
def test_prop_a1_l_layers_predict_l_gd_steps(rng, f, N, n_o, L, l2):
    t = _tasks(rng, f, N, n_o)
    out = CG.multi_step_gd_forward(t.tokens, L, 0.4, l2, n_out=n_o)
    assert rel_error(out.y_hat, G.gd_predict(t.X, t.Y, 0.4, steps=L, l2=l2)) <= EXACT
    W = None
    for W_l in out.W:                                               # every layer's predictor, not only the last
        W = G.gd_step(t.X, t.Y, 0.4, W, l2)
        assert rel_error(W_l, W) <= EXACT


def test_the_two_heads_hold_sum_y_x_transposed_and_the_second_moment(rng):
    t = _tasks(rng, 3, 6, 2)
    out = CG.multi_step_gd_forward(t.tokens, 1, 0.4, n_out=2)
    Xc, Yc = t.X[:, :6], t.Y[:, :6]
    assert rel_error(out.Z[:, :2], Yc.transpose(0, 2, 1) @ Xc) <= EXACT
    assert np.all(out.Z[:, 2:] == 0)
    assert rel_error(out.Z_tilde, Xc.transpose(0, 2, 1) @ Xc) <= EXACT


def test_one_layer_of_the_multi_step_construction_is_the_one_step_block(rng):
    t = _tasks(rng, 3, 6, 3)
    y_multi = CG.multi_step_gd_forward(t.tokens, 1, 0.4).y_hat
    assert rel_error(y_multi, CG.gril_predict(CG.one_step_gd(3, 6, 0.4), t.tokens)) <= EXACT


def test_app_a3_readout_needs_the_transposed_state_for_multivariate_targets(rng):
    # Z = Σ y x^T from Q = e_2 e_1^T is not symmetric: reading it untransposed is not GD
    t = _tasks(rng, 3, 6, 3)
    out = CG.multi_step_gd_forward(t.tokens, 2, 0.4)
    W1 = 0.4 / 6 * out.Z                                            # the wrong layout
    W2 = W1 - 0.4 / 6 * (out.Z_tilde @ W1 - out.Z)
    y_wrong = np.einsum("bfo,bf->bo", W2, t.X[:, -1])
    assert rel_error(y_wrong, G.gd_predict(t.X, t.Y, 0.4, steps=2)) > 1e-2


def test_app_a5_printed_readout_is_gd_with_penalty_one_over_2n(rng):
    # ΔW = -(η/N)(Z̃ W - Z^T + W) is GD on 1/(2N) Σ ||·||² + l2 ||W||² with l2 = 1/(2N), not with l2 = 1
    f, N, eta = 3, 5, 0.4
    t = _tasks(rng, f, N, f)
    out = CG.multi_step_gd_forward(t.tokens, 1, eta)
    W = np.zeros((4, f, f))
    for _ in range(3):
        W = W - eta / N * (out.Z_tilde @ W - out.Z.transpose(0, 2, 1) + W)
    y_printed = np.einsum("bfo,bf->bo", W, t.X[:, -1])
    assert rel_error(y_printed, G.gd_predict(t.X, t.Y, eta, steps=3, l2=1 / (2 * N))) <= EXACT
    assert rel_error(y_printed, G.gd_predict(t.X, t.Y, eta, steps=3, l2=1.0)) > 1e-2


# ===================================================================== cross-entropy: Prop. 4.3, App. A.6
@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("N", [1, 4, 10])
def test_prop43_gril_state_accumulates_the_cross_entropy_gradient(rng, K, N):
    d = 5
    t = tasks.sample_classification(rng, 4, N, d, K)
    labels = t.Y[:, :N]
    W = rng.standard_normal((4, d, K))
    acc = CG.ce_accumulate(t.X, G.ce_residual(t.X, labels, W), eta=0.3)
    assert rel_error(acc.Z.transpose(0, 2, 1), G.ce_gradient(t.X, labels, W)) <= EXACT


@pytest.mark.parametrize("K", [1, 3])
def test_prop43_readout_gives_the_query_logits_after_one_ce_step_from_zero(rng, K):
    d, N, eta = 5, 6, 0.3
    t = tasks.sample_classification(rng, 4, N, d, K)
    labels = t.Y[:, :N]
    acc = CG.ce_accumulate(t.X, G.ce_residual(t.X, labels, np.zeros((4, d, K))), eta=eta)
    W1 = G.ce_step(t.X, labels, eta)
    assert rel_error(acc.logits, np.einsum("bdk,bd->bk", W1, t.X[:, -1])) <= EXACT
    # the residual at W = 0 is p - y with p = 1/2 (binary) or 1/K (softmax), not -y: the targets alone are not GD
    acc_targets = CG.ce_accumulate(t.X, -labels, eta=eta)
    assert rel_error(acc_targets.logits, acc.logits) > 1e-2


def test_the_constructions_read_their_states_from_the_cuda_path_too(rng):
    # backend="cuda" keeps the states on the device (the CUDA simulator on CI): they are copied back
    t = _tasks(rng, 3, 3, 2, B=2)
    out = CG.multi_step_gd_forward(t.tokens, 2, 0.5, 0.1, n_out=2, backend="cuda")
    assert rel_error(out.y_hat, G.gd_predict(t.X, t.Y, 0.5, steps=2, l2=0.1)) <= EXACT
    c = tasks.sample_classification(rng, 2, 3, 4, 3)
    W0 = np.zeros((2, 4, 3))
    acc = CG.ce_accumulate(c.X, G.ce_residual(c.X, c.Y[:, :3], W0), backend="cuda")
    assert rel_error(acc.Z.transpose(0, 2, 1), G.ce_gradient(c.X, c.Y[:, :3], W0)) <= EXACT


# ===================================================================== 5. two attention layers (the baseline's stack)
@pytest.mark.parametrize("f,N,n_o", SIZES, ids=SIZE_IDS)
def test_two_lsa_layers_compute_one_gd_step_exactly(rng, f, N, n_o):
    from minimal import models

    t = _tasks(rng, f, N, n_o)
    eta = 0.7
    spec, params = CG.attention_gd(f, N, eta)
    y = models.forward(params, t.tokens, spec, readout="last")[0][:, 0, :n_o]
    np.testing.assert_allclose(y, G.gd_predict(t.X, t.Y, eta), rtol=0, atol=EXACT)


def test_the_attention_construction_fills_the_comparisons_lsa_2_stack():
    """Same parameter names and shapes as ``comparison_models.spec`` of lsa_2 at d_model = 2f + 2N + 1."""
    from minimal import models
    from minimal.experiments.gril import comparison as CMP, comparison_models as CMM

    f, N = 10, 10
    spec, params = CG.attention_gd(f, N, 1.0)
    ref = models.init(np.random.default_rng(0), CMM.spec(CMP.Job(model="lsa_2", f=f, N=N, d_model=2 * f + 2 * N + 1)))
    assert {k: v.shape for k, v in params.items()} == {k: v.shape for k, v in ref.items()}
    assert [getattr(e, "name", None) for e in spec] == [getattr(e, "name", None) for e in CMM.spec(
        CMP.Job(model="lsa_2", d_model=2 * f + 2 * N + 1))]


def test_the_attention_construction_at_the_comparisons_size_scores_one_gd_step():
    """f = N = n_o = 10 at η*, on the comparison's seed-0 evaluation set: GD's loss to float64 precision (issue 31:
    1.8e-15, 0.2039)."""
    from minimal import models
    from minimal.experiments.gril import comparison as CMP, model as M

    eta = G.eta_star(10, 10)
    spec, params = CG.attention_gd(10, 10, eta)
    t = M.eval_tasks(CMP._gril_job(CMP.Job(model="lsa_2", n_out=10, seed=0)))
    y = models.forward(params, t.tokens, spec, readout="last")[0][:, 0, :10]
    gd = G.gd_predict(t.X, t.Y, eta)
    assert np.max(np.abs(y - gd)) <= EXACT
    loss = tasks.query_loss(y, t.Y[:, -1])[0]
    assert loss == pytest.approx(tasks.query_loss(gd, t.Y[:, -1])[0], abs=1e-12)
    assert round(loss, 4) == 0.2039
