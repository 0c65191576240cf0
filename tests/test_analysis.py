"""minimal.analysis.polynomial and .identification on networks whose answer is known exactly: the
Fig. 1 construction of Zucchet et al. (minimal.constructions) is linear self-attention, so its polynomial
distance, KV score and Q score are 0, and pruning a padded copy removes exactly the padding."""
import numpy as np
import pytest

from minimal.run import io
from minimal.constructions import lsa_as_gated_rnn
from minimal.analysis import identification, polynomial
from minimal.cells import gated_rnn, lsa
from minimal.tasks import lsa_teacher


@pytest.fixture
def teacher(rng):
    return lsa_teacher.make_teacher(rng, 3)


def _rnn_last(params, lam):
    return lambda z: gated_rnn.forward(params, lsa_teacher.append_one(z), lam=lam)[0][:, -1]


def _lsa_last(teacher):
    return lambda z: lsa_teacher.targets(teacher, z)[:, -1]


# --- polynomial ----------------------------------------------------------------------------------------
def test_monomials_count_and_order():
    exps = polynomial.monomials(3, 4)
    assert exps.shape == (35, 3)                      # C(3 + 4, 4)
    assert len({tuple(e) for e in exps}) == 35
    assert np.all(np.diff(exps.sum(axis=1)) >= 0)     # ordered by degree


def test_coefficients_recover_a_known_polynomial(rng):
    exps = polynomial.monomials(2, 3)
    coef = rng.standard_normal((exps.shape[0], 2))
    p = polynomial.coefficients(polynomial.Polynomial(exps, coef), 2, 3)
    np.testing.assert_allclose(p.coef, coef, atol=1e-11)


def test_lsa_instantaneous_polynomial_symbolic_equals_fitted(teacher):
    """Two independent computations: the symbolic W_V x (x^T W_K^T W_Q x) and the least-squares fit."""
    fitted = polynomial.instantaneous_polynomial(_lsa_last(teacher), 3)
    symbolic = polynomial.lsa_polynomial(teacher.W_V, teacher.W_K, teacher.W_Q)
    np.testing.assert_allclose(fitted.coef, symbolic.coef, atol=1e-11)
    # LSA is homogeneous of degree 3.
    for k in (0, 1, 2, 4):
        assert np.max(np.abs(symbolic.degree_part(k))) == 0.0
    assert np.max(np.abs(symbolic.degree_part(3))) > 0.1


@pytest.mark.parametrize("build", [lsa_as_gated_rnn.lsa_to_gated_rnn, lsa_as_gated_rnn.lsa_to_gated_rnn_compact])
def test_polynomial_distance_zero_between_lsa_and_its_construction(teacher, build):
    c = build(teacher.W_V, teacher.W_K, teacher.W_Q)
    student = polynomial.instantaneous_polynomial(_rnn_last(c.params, c.lam), 3)
    reference = polynomial.lsa_polynomial(teacher.W_V, teacher.W_K, teacher.W_Q)
    assert polynomial.distance(reference, student) < 1e-10
    # ... also with memory: y_2 as a polynomial of (x_1, x_2).
    two_rnn = polynomial.network_polynomial(_rnn_last(c.params, c.lam), 3, T=2)
    two_lsa = polynomial.network_polynomial(_lsa_last(teacher), 3, T=2)
    assert polynomial.distance(two_lsa, two_rnn) < 1e-9


def test_polynomial_distance_sees_a_forgetting_student(teacher):
    """λ = 0.9 on the key-value neurons: the same instantaneous polynomial, a different memory."""
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(teacher.W_V, teacher.W_K, teacher.W_Q)
    lam = np.where(c.lam == 1.0, 0.9, 0.0)
    two_rnn = polynomial.network_polynomial(_rnn_last(c.params, lam), 3, T=2)
    two_lsa = polynomial.network_polynomial(_lsa_last(teacher), 3, T=2)
    assert polynomial.distance(two_lsa, two_rnn) > 0.01
    one = polynomial.instantaneous_polynomial(_rnn_last(c.params, lam), 3)
    assert polynomial.distance(polynomial.lsa_polynomial(teacher.W_V, teacher.W_K, teacher.W_Q), one) < 1e-10


def test_distance_is_relative_and_averaged_over_outputs():
    exps = polynomial.monomials(1, 1)
    ref = polynomial.Polynomial(exps, np.array([[1.0, 10.0], [0.0, 0.0]]))
    other = polynomial.Polynomial(exps, np.array([[1.5, 10.0], [0.0, 5.0]]))
    assert polynomial.distance(ref, other) == pytest.approx((0.5 + 0.5) / 2)


def test_coefficients_rejects_a_non_polynomial_or_too_low_degree():
    with pytest.raises(ValueError, match="f is not a polynomial"):
        polynomial.coefficients(lambda x: np.exp(x), 2, 4)
    with pytest.raises(ValueError, match="f is not a polynomial of degree <= 2"):
        polynomial.coefficients(lambda x: x ** 3, 2, 2)


def test_polynomial_bad_inputs():
    exps = polynomial.monomials(2, 2)
    with pytest.raises(ValueError, match="degree"):
        polynomial.monomials(2, -1)
    with pytest.raises(ValueError, match="x must have shape"):
        polynomial.design_matrix(np.zeros((3, 4)), exps)
    with pytest.raises(ValueError, match="f\\(x\\)"):
        polynomial.coefficients(lambda x: x[:, 0], 2, 2)
    a = polynomial.Polynomial(exps, np.ones((6, 1)))
    with pytest.raises(ValueError, match="other must use reference's monomials"):
        polynomial.distance(a, polynomial.Polynomial(polynomial.monomials(2, 3), np.ones((10, 1))))
    with pytest.raises(ValueError, match="reference has an output whose polynomial is 0"):
        polynomial.distance(polynomial.Polynomial(exps, np.zeros((6, 1))), a)
    with pytest.raises(ValueError, match="W_K"):
        polynomial.lsa_polynomial(np.ones((2, 2)), np.ones((2, 3)), np.ones((2, 3)))


# --- KV and Q scores -------------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [lsa_as_gated_rnn.lsa_to_gated_rnn, lsa_as_gated_rnn.lsa_to_gated_rnn_compact])
def test_kv_and_q_scores_are_zero_for_the_construction(teacher, rng, build):
    c = build(teacher.W_V, teacher.W_K, teacher.W_Q)
    x = rng.standard_normal((8, 7, 3))
    s = identification.kv_q_scores(c.params, teacher, x, lam=c.lam)
    assert (s.n_kv, s.n_q) == (c.n_kv, c.n_q)
    assert s.kv < 1e-12 and s.q < 1e-12


def test_scores_measure_information_not_weights(teacher, rng):
    other = lsa_teacher.make_teacher(rng, 3)
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(other.W_V, other.W_K, other.W_Q)
    x = rng.standard_normal((8, 7, 3))
    s = identification.kv_q_scores(c.params, teacher, x, lam=c.lam)
    # The key-value neurons of any construction store every product x_a x_b: still a perfect KV score.
    assert s.kv < 1e-12
    # Its queries are another linear map of x, a rank-3 map of R^3: the Q score stays 0 too, unless
    # the query neurons are removed, which leaves nothing to regress on.
    assert s.q < 1e-12
    keep = c.lam == 1.0
    sub = {k: (v[keep] if k in ("W_in_m", "W_in_x", "nu") else v) for k, v in c.params.items()}
    sub["W_out_m"], sub["W_out_x"] = c.params["W_out_m"][:, keep], c.params["W_out_x"][:, keep]
    s2 = identification.kv_q_scores(sub, teacher, x, lam=c.lam[keep])
    assert s2.n_q == 0 and s2.q == 1.0


def test_scores_use_only_the_neurons_kept_by_pruning_when_given(teacher, rng):
    # Sec. 3.1: the KV score regresses on the 10 kept key-value neurons, the Q score on the 4 kept query neurons
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(teacher.W_V, teacher.W_K, teacher.W_Q)
    x = rng.standard_normal((8, 7, 3))
    kv = np.flatnonzero(c.lam == 1.0)
    q = np.flatnonzero(c.lam == 0.0)
    full = identification.kv_q_scores(c.params, teacher, x, lam=c.lam, neurons=np.arange(c.lam.size))
    assert (full.n_kv, full.n_q) == (c.n_kv, c.n_q) and full.kv < 1e-12
    half = identification.kv_q_scores(c.params, teacher, x, lam=c.lam, neurons=np.concatenate([kv[:4], q]))
    assert half.n_kv == 4 and half.n_q == q.size and half.kv > 0.1 and half.q < 1e-12
    with pytest.raises(ValueError, match="neurons must be"):
        identification.kv_q_scores(c.params, teacher, x, lam=c.lam, neurons=np.array([c.lam.size]))


def test_kv_score_of_forgetting_neurons_is_positive(teacher, rng):
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(teacher.W_V, teacher.W_K, teacher.W_Q)
    lam = np.where(c.lam == 1.0, 0.96, 0.0)    # still "kv" at lam_tol = 0.05
    s = identification.kv_q_scores(c.params, teacher, rng.standard_normal((8, 9, 3)), lam=lam)
    assert s.n_kv == 9 and s.kv > 1e-4


def test_one_minus_r2_known_values(rng):
    X = rng.standard_normal((50, 2))
    Y = np.column_stack([X @ [1.0, -2.0] + 3.0, rng.standard_normal(50)])
    score = identification.one_minus_r2(X, Y)
    # first target exact (0), second target: the fit explains a little of pure noise
    assert 0.3 < score < 0.5
    assert identification.one_minus_r2(X, Y[:, :1]) < 1e-25
    assert identification.one_minus_r2(X[:, :0], Y) == 1.0


def test_teacher_key_values_match_lsa_recurrent_state(teacher, rng):
    x = rng.standard_normal((2, 5, 3))
    cache = lsa.forward(teacher.params(), x, mode="sequential")[1]
    np.testing.assert_allclose(identification.teacher_key_values(teacher, x),
                               cache.W.reshape(2, 5, -1), atol=1e-13)


# --- pruning and merged kernel ---------------------------------------------------------------------------
def _padded_construction(teacher, rng, n_dead_in=3, n_dead_out=2, n_dead_gates=4):
    """The Fig. 1 construction plus neurons that do nothing: zero input rows, zero output columns, gates
    with a zero readout column or a zero row."""
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(teacher.W_V, teacher.W_K, teacher.W_Q)
    p, H, H_out = c.params, c.params["nu"].size, c.params["D"].shape[1]
    extra_h, extra_g = n_dead_in + n_dead_out, n_dead_gates
    W_in_m = np.vstack([p["W_in_m"], rng.standard_normal((extra_h, 4))])
    W_in_x = np.vstack([p["W_in_x"], rng.standard_normal((extra_h, 4))])
    W_in_x[H:H + n_dead_in] = 0.0                      # no input: dead
    W_out_m = np.zeros((H_out + extra_g, H + extra_h))
    W_out_x = np.zeros_like(W_out_m)
    W_out_m[:H_out, :H], W_out_x[:H_out, :H] = p["W_out_m"], p["W_out_x"]
    W_out_m[:H_out, H:H + n_dead_in] = 1.0             # read by live gates, but have no input
    W_out_m[H_out:, :] = rng.standard_normal((extra_g, H + extra_h))
    W_out_x[H_out:, :] = rng.standard_normal((extra_g, H + extra_h))
    W_out_x[H_out:H_out + 2] = 0.0                     # gates with a zero row
    D = np.hstack([p["D"], np.zeros((3, extra_g))])
    D[:, H_out + 2:] = 0.0                             # gates with a zero readout
    lam = np.concatenate([c.lam, rng.uniform(0, 1, extra_h)])
    params = {"W_in_m": W_in_m, "W_in_x": W_in_x, "nu": np.zeros(H + extra_h), "W_out_m": W_out_m,
              "W_out_x": W_out_x, "D": D}
    return c, params, lam


def test_prune_removes_exactly_the_dead_neurons(teacher, rng):
    c, params, lam = _padded_construction(teacher, rng)
    x = rng.standard_normal((4, 6, 3))
    y_full = gated_rnn.forward(params, lsa_teacher.append_one(x), lam=lam)[0]
    np.testing.assert_allclose(y_full, lsa_teacher.targets(teacher, x), atol=1e-10)
    pruned = identification.prune(params, lam=lam)
    np.testing.assert_array_equal(pruned.hidden, np.arange(12))    # d^2 + d = 9 + 3 remain
    np.testing.assert_array_equal(pruned.gates, np.arange(9))       # d^2 gates remain
    np.testing.assert_array_equal(pruned.lam, c.lam)
    assert identification.pruned_relative_loss(pruned, lsa_teacher.append_one(x),
                                               lsa_teacher.targets(teacher, x)) < 1e-24


def test_prune_iterates_a_gate_reading_only_dead_neurons(teacher, rng):
    c, params, lam = _padded_construction(teacher, rng, n_dead_gates=0)
    params = dict(params)
    # One more gate reading only the input-less neurons 12..14 in both factors: it must go too.
    row = np.zeros((1, params["W_out_m"].shape[1]))
    row[0, 12:15] = 1.0
    params["W_out_m"] = np.vstack([params["W_out_m"], row])
    params["W_out_x"] = np.vstack([params["W_out_x"], row])
    params["D"] = np.hstack([params["D"], np.ones((3, 1))])
    pruned = identification.prune(params, lam=lam)
    assert pruned.gates.size == 9 and pruned.hidden.size == 12


def test_prune_by_function_removes_what_the_output_does_not_need(teacher, rng):
    """The padded construction plus neurons with small but nonzero weights (1e-2 of the others: kept by the
    magnitude rule at tol 1e-3, yet ~1e-8 of the output): functional pruning keeps exactly the construction."""
    c, params, lam = _padded_construction(teacher, rng, n_dead_gates=0)
    params = dict(params)
    n_small, H = 4, params["nu"].size
    params["W_in_m"] = np.vstack([params["W_in_m"], 1e-2 * rng.standard_normal((n_small, 4))])
    params["W_in_x"] = np.vstack([params["W_in_x"], 1e-2 * rng.standard_normal((n_small, 4))])
    params["nu"] = np.zeros(H + n_small)
    small_cols = 1e-2 * rng.standard_normal((params["W_out_m"].shape[0], n_small))
    params["W_out_m"] = np.hstack([params["W_out_m"], small_cols])
    params["W_out_x"] = np.hstack([params["W_out_x"], small_cols[::-1]])
    lam = np.concatenate([lam, np.ones(n_small)])
    x = rng.standard_normal((8, 6, 3))
    x_tilde, y_star = lsa_teacher.append_one(x), lsa_teacher.targets(teacher, x)
    assert identification.prune(params, lam=lam).hidden.size > 12          # the small neurons survive
    pruned = identification.prune_by_function(params, x_tilde, y_star, lam=lam)
    np.testing.assert_array_equal(pruned.hidden, np.arange(12))            # d^2 + d = 9 + 3 remain
    np.testing.assert_array_equal(pruned.gates, np.arange(9))
    assert identification.pruned_relative_loss(pruned, x_tilde, y_star) < 1e-20


def test_prune_by_function_keeps_the_exact_construction_whole(teacher, rng):
    c = lsa_as_gated_rnn.lsa_to_gated_rnn_compact(teacher.W_V, teacher.W_K, teacher.W_Q)
    x = rng.standard_normal((8, 6, 3))
    pruned = identification.prune_by_function(c.params, lsa_teacher.append_one(x),
                                              lsa_teacher.targets(teacher, x), lam=c.lam)
    assert (pruned.hidden.size, pruned.gates.size) == (c.n_kv + c.n_q, c.params["D"].shape[1])


@pytest.mark.parametrize("build", [lsa_as_gated_rnn.lsa_to_gated_rnn, lsa_as_gated_rnn.lsa_to_gated_rnn_compact])
def test_key_values_need_d_d_plus_1_over_2_dimensions_and_queries_d(teacher, rng, build):
    """Sec. 3.1: the key-value state is a symmetric d x d matrix's worth of information (d(d+1)/2 = 6 for
    d = 3) even when the full construction spreads it over d^2 = 9 neurons; the queries need d = 3."""
    c = build(teacher.W_V, teacher.W_K, teacher.W_Q)
    x = rng.standard_normal((8, 6, 3))
    x_tilde, y_star = lsa_teacher.append_one(x), lsa_teacher.targets(teacher, x)
    kv = identification.needed_dimensions(c.params, x_tilde, y_star, "kv", lam=c.lam)
    q = identification.needed_dimensions(c.params, x_tilde, y_star, "q", lam=c.lam)
    assert (kv.needed, q.needed) == (6, 3)
    assert kv.losses.shape == (c.n_kv + 1,) and kv.losses[0] > 0.5 and kv.losses[5] > 1e-6
    assert np.all(kv.losses[6:] < 1e-20) and q.losses[2] > 1e-6


def test_merged_kernel_of_the_construction_couples_only_kv_and_q(teacher, rng):
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(teacher.W_V, teacher.W_K, teacher.W_Q)
    K = identification.merged_kernel(c.params)
    blocks = identification.kernel_block_norms(K, identification.neuron_kinds(c.lam))
    assert blocks["kv-kv"] == 0.0 and blocks["q-q"] == 0.0 and blocks["other"] == 0.0
    assert blocks["kv-q"] > 0
    # y_i = h^T K_i h reproduces the network's output from its states.
    x = rng.standard_normal((2, 4, 3))
    y, cache = gated_rnn.forward(c.params, lsa_teacher.append_one(x), lam=c.lam)
    np.testing.assert_allclose(np.einsum("bth,iha,bta->bti", cache.h, K, cache.h), y, atol=1e-12)


def test_neuron_kinds():
    kinds = identification.neuron_kinds(np.array([1.0, 0.97, 0.5, 0.02, 0.0]))
    assert list(kinds) == ["kv", "kv", "other", "q", "q"]


def test_identification_bad_inputs(teacher, rng):
    c = lsa_as_gated_rnn.lsa_to_gated_rnn(teacher.W_V, teacher.W_K, teacher.W_Q)
    with pytest.raises(ValueError, match="lam_tol"):
        identification.neuron_kinds(c.lam, lam_tol=0.7)
    with pytest.raises(ValueError, match="x must have shape"):
        identification.kv_q_scores(c.params, teacher, rng.standard_normal((2, 3, 4)), lam=c.lam)
    with pytest.raises(ValueError, match="tol"):
        identification.prune(c.params, lam=c.lam, tol=0.0)
    with pytest.raises(ValueError, match="lam must have shape"):
        identification.prune(c.params, lam=c.lam[:-1])
    x_tilde, y_star = np.ones((2, 3, 4)), np.ones((2, 3, 3))
    with pytest.raises(ValueError, match="budget"):
        identification.prune_by_function(c.params, x_tilde, y_star, lam=c.lam, budget=0.5)
    with pytest.raises(ValueError, match="floor"):
        identification.prune_by_function(c.params, x_tilde, y_star, lam=c.lam, floor=0.0)
    with pytest.raises(ValueError, match="lam must have shape"):
        identification.prune_by_function(c.params, x_tilde, y_star, lam=c.lam[:-1])
    with pytest.raises(ValueError, match="kind must be"):
        identification.needed_dimensions(c.params, x_tilde, y_star, "other", lam=c.lam)
    with pytest.raises(ValueError, match="y_star must have shape"):
        identification.needed_dimensions(c.params, x_tilde, y_star[..., :2], "kv", lam=c.lam)
    with pytest.raises(ValueError, match="Y has a constant column"):
        identification.one_minus_r2(np.ones((5, 1)), np.ones((5, 1)))
    with pytest.raises(ValueError, match="Y must have shape"):
        identification.one_minus_r2(np.ones((5, 1)), np.ones((4, 1)))
    with pytest.raises(ValueError, match="K must have shape"):
        identification.kernel_block_norms(np.ones((2, 2)), ["kv", "q"])
