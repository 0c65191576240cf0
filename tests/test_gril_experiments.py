"""The GRIL in-context learner and its ablations (Tian et al. Sec. 5.1-5.2, App. C): gradients, and the claims
that can be checked without a long training run."""
import numpy as np
import pytest

from minimal.analysis import gril_gd
from minimal.experiments.gril import model as M
from minimal.gradcheck import TOLERANCE, check_function, rel_error
from minimal.tasks import gril_regression as G


@pytest.mark.parametrize("variant", M.VARIANTS)
@pytest.mark.parametrize("n_out", [1, 3])
def test_predictor_backward_matches_finite_differences(variant, n_out, rng):
    tasks = G.sample(rng, 2, N=3, f=3, n_out=n_out)
    params = M.init_params(rng, 3, variant, beta_scale=1.0)

    def forward(p, x):
        return M.predict(p, x, n_out, variant)

    def backward(p, cache, dy):
        return M.predict_backward(p, cache, dy)

    errors = check_function(forward, backward, params, tasks.tokens)
    assert max(errors.values()) <= TOLERANCE, errors


def test_state_readout_reads_the_last_state_only(rng):
    """Without the multiplicative readout the output is β ⊙ (Z u), whatever the last window holds."""
    tasks = G.sample(rng, 3, N=4, f=3)
    params = M.init_params(rng, 3, "no_readout")
    assert set(params) == {"Q", "u", "beta", "A"} and M.readout_of("no_readout") == "state"
    o, cache = M.predict(params, tasks.tokens, 3, "no_readout")
    x2 = tasks.tokens.copy()
    x2[:, -1] = 0.0   # the query enters only through U_N's cross terms, which this Q may weight
    o2, _ = M.predict(params, x2, 3, "no_readout")
    assert rel_error(o, params["beta"] * np.einsum("bij,j->bi", cache.Z[:, -1], params["u"])) <= 1e-14
    params_c = dict(params, Q=np.diag([1.0, 1.0, 0.0]))   # no product with the newest token
    o3, _ = M.predict(params_c, tasks.tokens, 3, "no_readout")
    o4, _ = M.predict(params_c, x2, 3, "no_readout")
    assert rel_error(o3, o4) <= 1e-14 and rel_error(o, o2) > 1e-3


def test_the_full_model_at_the_construction_is_one_gd_step(rng):
    """Q = e_2 e_1^T, q = e_3, A = 1, β = η/N: the model's prediction is GD's (Prop. 4.1)."""
    N, f = 10, 10
    tasks = G.sample(rng, 5, N=N, f=f)
    eta = gril_gd.eta_star(N, f)
    Q = np.zeros((3, 3)); Q[1, 0] = 1.0
    params = {"Q": Q, "q": np.array([0.0, 0.0, 1.0]), "beta": np.full(f, eta / N), "A": np.ones((f, f))}
    y_hat, _ = M.predict(params, tasks.tokens, f, "full")
    assert rel_error(y_hat, gril_gd.gd_predict(tasks.X, tasks.Y, eta)) <= 1e-12


def test_short_run_learns_and_ablation_stays_at_the_zero_predictor():
    """A 2,000-step run of the full model gets well below the zero predictor (GD: about half of it); the
    model without the window stays at it (Tables 5-6: removing the window about doubles the loss)."""
    full = M.run_job(M.Job(steps=2000, lr=3e-2, n_eval=2000))
    ablated = M.run_job(M.Job(variant="no_window", steps=300, n_eval=2000))
    assert full["over_zero"] < 0.6 and full["over_gd"] < 1.15
    assert ablated["over_zero"] > 0.98


def test_default_tasks_have_the_papers_zero_predictor():
    """x ~ U(-1/2, 1/2)^10 (App. B.1 via von Oswald et al.'s data code): predicting zero scores f a²/6 = 0.417,
    within 3% of the 0.414 of Table 6 (U(-1, 1) would give 1.67); one optimal GD step 0.206 (Table 7: 0.207)."""
    assert G.X_SCALE == 0.5 and M.Job().x_scale == 0.5
    assert G.zero_loss(10) == pytest.approx(0.414, rel=0.03)
    t = G.sample(np.random.default_rng(12345), 10_000)
    y = t.Y[:, -1]
    assert G.query_loss(np.zeros_like(y), y)[0] == pytest.approx(0.414, rel=0.03)
    assert G.query_loss(gril_gd.gd_predict(t.X, t.Y, gril_gd.eta_star(10, 10)), y)[0] == pytest.approx(0.207,
                                                                                                         rel=0.03)


def test_newton_readings_of_table_7():
    """Table 7's Newton 0.114 = 0.551 x GD: undamped Newton is exact here; a unit ridge step (one Newton step on
    App. A.5's loss with penalty (1/2N)||W||²) gives 0.55 x GD at U(-1, 1) but 0.97 x GD at U(-1/2, 1/2)."""
    from minimal.experiments.gril import regression as R

    t = G.sample(np.random.default_rng(12345), 10_000)
    t1 = G.sample(np.random.default_rng(12345), 10_000, x_scale=1.0)
    r = R.newton_readings(t, gril_gd.eta_star(10, 10), t1, gril_gd.eta_star(10, 10, 1.0))
    assert r["newton_loss"] < 1e-12 and r["newton_loss_at_a1"] < 1e-12
    assert r["ridge_over_gd_at_a1"] == pytest.approx(0.114 / 0.207, rel=0.03)
    assert r["ridge_over_gd"] == pytest.approx(0.97, abs=0.02)
    assert r["ridge_loss"] > 1.7 * 0.114


def test_job_rejects_an_unknown_variant():
    with pytest.raises(ValueError, match="variant must be one of"):
        M.window_of("bogus")


def test_ablation_summary_counts_a_job_listed_twice_once():
    """Fig. 2C's f = 10 job is the multivariate full seed-0 job: the table must not count that seed twice."""
    from minimal.experiments.gril import ablations as A

    config = A.Config(seeds=(0, 1), variants=("full",), targets=("multivariate",), f_values=(10,))
    jobs = A.jobs(config)
    assert len(jobs) == 3 and len(set(jobs)) == 2
    res = {0: {"loss": 0.2, "loss_gd": 0.2, "over_zero": 0.5, "over_gd": 1.0},
           1: {"loss": 0.3, "loss_gd": 0.2, "over_zero": 0.7, "over_gd": 1.5}}
    records = [{"config": vars(j), "result": res[j.seed]} for j in jobs]
    out = A.summarise(records, config)
    assert out["multivariate_full_seeds"] == 2 and out["multivariate_full"] == pytest.approx(0.25)
