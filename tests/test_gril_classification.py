"""GRIL on in-context classification (Tian et al. Sec. 4.4, 5.3, App. A.6, B.5-B.6): the hand-written backward,
the construction against one cross-entropy GD step (softmax exactly; binary up to the -1/2 term), and a short
training run."""
import numpy as np
import pytest

from minimal.constructions import gd_as_gril
from minimal.analysis import gril_gd
from minimal.experiments.gril import classification as C
from minimal.gradcheck import TOLERANCE, check_function, numerical_gradient, rel_error
from minimal.tasks import gril_regression as G
from minimal.experiments.gril import classifier


def _params(rng, f, phi):
    p = classifier.init_params(rng, f, phi, hidden=5)
    p["beta"] = p["beta"] * 10.0          # an O(1) output, so that every path carries gradient
    if phi:                               # non-zero biases, so that their gradients are tested too
        p["b_1"], p["b_2"] = rng.standard_normal(5), rng.standard_normal(f)
    return p


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("phi", [True, False])
def test_model_backward_matches_finite_differences(K, phi, rng):
    """φ -> GRIL -> last-window logits, for every parameter and every token (labels included)."""
    tasks = G.sample_classification(rng, 2, N=3, f=4, K=K)
    params = _params(rng, 4, phi)
    errors = check_function(lambda p, x: classifier.forward(p, x, K), classifier.backward, params, tasks.tokens)
    assert max(errors.values()) <= TOLERANCE, errors


@pytest.mark.parametrize("K", [1, 3])
def test_loss_gradients_match_finite_differences(K, rng):
    """The query CE (BCE for one logit, softmax CE otherwise) composed with the model."""
    tasks = G.sample_classification(rng, 3, N=3, f=4, K=K)
    params = _params(rng, 4, True)
    _, grads = classifier.loss_and_grads(params, tasks)
    for name, p in params.items():
        num = numerical_gradient(lambda: classifier.loss_and_grads(params, tasks)[0], p)
        assert rel_error(grads[name], num) <= TOLERANCE, name


def test_softmax_construction_is_one_ce_step(rng):
    """β = η on the raw one-hot tokens: logits η Σ y_i x_i^T x_q, GD's plus the same number in every entry."""
    tasks = G.sample_classification(rng, 50, N=10, f=10, K=3)
    eta = 0.7
    z_con = classifier.construction_logits(tasks.tokens, 3, eta)
    z_gd, _ = classifier.gd_logits(tasks.X, tasks.Y, eta)
    shift = z_con - z_gd
    assert np.abs(shift - shift[:, :1]).max() <= 1e-12                      # a per-task constant ...
    assert np.abs(shift).max() > 1e-3                                        # ... that is not zero
    assert np.abs(classifier.probabilities(z_con) - classifier.probabilities(z_gd)).max() <= 1e-12
    assert rel_error(z_gd, np.einsum("bdk,bd->bk", gril_gd.ce_step(tasks.X, tasks.Y[:, :10], eta),
                                     tasks.X[:, -1])) <= 1e-12


def test_binary_construction_misses_the_half_offset(rng):
    """Raw {0, 1} tokens: η Σ y_i x_i^T x_q = GD + (η/2) Σ x_i^T x_q; centred tokens y - 1/2 (or Prop. 4.3's
    residual 1/2 - y with β = -η) give GD exactly."""
    N, eta = 10, 0.6
    tasks = G.sample_classification(rng, 50, N=N, f=10, K=1)
    z_gd, _ = classifier.gd_logits(tasks.X, tasks.Y, eta)
    z_con = classifier.construction_logits(tasks.tokens, 1, eta)
    offset = 0.5 * eta * np.einsum("bnf,bf->b", tasks.X[:, :N], tasks.X[:, N])[:, None]
    assert np.abs(z_con - (z_gd + offset)).max() <= 1e-12 and np.abs(offset).max() > 1e-2
    centred = G.make_tokens(tasks.X, tasks.Y - 0.5)
    assert np.abs(classifier.construction_logits(centred, 1, eta) - z_gd).max() <= 1e-12
    acc = gd_as_gril.ce_accumulate(tasks.X, 0.5 - tasks.Y[:, :N], eta, mode="sequential")
    assert np.abs(acc.logits - z_gd).max() <= 1e-12


def test_raw_binary_tokens_cannot_express_the_offset(rng):
    """Every term of GRIL's first output carries a slot-0 factor: with slot 0 zero in every token (x[0] = 0,
    y = 0) the logit is 0 for any weights, while GD's, -(η/2) Σ x_i^T x_q, is not."""
    tasks = G.sample_classification(rng, 20, N=5, f=4, K=1)
    X = tasks.X.copy()
    X[..., 0] = 0.0
    Y = np.zeros_like(tasks.Y)
    tokens = G.make_tokens(X, Y)
    for _ in range(3):
        z, _ = classifier.forward(_params(rng, 4, False), tokens, 1)
        assert np.abs(z).max() == 0.0
    assert np.abs(classifier.gd_logits(X, Y, 1.0)[0]).max() > 1e-2


def test_tune_eta_finds_the_minimum(rng):
    tasks = G.sample_classification(rng, 2000, K=3)
    labels = tasks.labels[:, -1]
    eta, loss = classifier.tune_eta(tasks.X, tasks.Y, labels)
    for other in (eta * 1.05, eta / 1.05):
        assert loss < classifier.query_ce(classifier.gd_logits(tasks.X, tasks.Y, other)[0], labels)[0]


def test_short_run_beats_chance_and_tracks_gd():
    """800 steps of the softmax model with φ (about 10 s): accuracy well above chance (1/3), a loss well below
    log 3, and close to one tuned GD step (measured: GRIL / GD 1.006, sensitivity cosine 0.99)."""
    res = C.run_job(C.Job(K=3, steps=800, lr=2e-2, n_eval=1000))
    assert res["acc"] > 0.5 and res["loss"] < 0.9 * np.log(3), res
    assert res["gril_over_gd"] < 1.1 and res["sens_cos"] > 0.9, res
