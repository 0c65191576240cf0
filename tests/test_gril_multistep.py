"""The trainable L-layer GRIL of Fig. 3A and the GRIL + MLP of Fig. 3B (Tian et al., Sec. 4.3, App. A.3-A.4, B.4):
gradients against finite differences, the construction point against L GD steps, and short training runs."""
import numpy as np
import pytest

from minimal.constructions import gd_as_gril
from minimal.analysis import gril_gd
from minimal.cells import gril
from minimal.experiments.gril import model as M
from minimal.experiments.gril import multistep as MS
from minimal.experiments.gril import sine as SN
from minimal.gradcheck import TOLERANCE, check_function, rel_error
from minimal.layers import mlp
from minimal.tasks import gril_regression as G
from minimal.experiments.gril import stack


@pytest.mark.parametrize("L", [1, 2, 3])
@pytest.mark.parametrize("n_out", [3, 2])
def test_backward_matches_finite_differences(L, n_out, rng):
    tasks = G.sample(rng, 2, N=3, f=3, n_out=n_out)
    params = stack.init_params(rng, 3, L, c_init=0.3)

    def forward(p, x):
        return stack.predict(p, x, n_out)

    errors = check_function(forward, stack.predict_backward, params, tasks.tokens)
    assert max(errors.values()) <= TOLERANCE, errors


@pytest.mark.parametrize("variant", SN.SINE_VARIANTS)
def test_sine_model_backward_matches_finite_differences(variant, rng):
    tasks = SN.sample_sine(rng, 2, N=3, f=3)
    m_p = mlp.init(rng, 3, 4)
    if variant == "gd":
        g_p = SN.fixed_gd_block(3, 3, 1.0)
    else:
        g_p = {**M.init_params(rng, 3, "full"), "beta": rng.standard_normal(3)}
    params = {**m_p, **g_p}

    def split(p):
        return {k: p[k] for k in SN.GRIL_KEYS}, {k: p[k] for k in SN.MLP_KEYS}

    def forward(p, x):
        return SN.sine_predict(*split(p), x, 3)

    def backward(p, cache, dy):
        dx, g_g, g_m = SN.sine_predict_backward(*split(p), cache, dy)
        return dx, {**g_g, **g_m}

    errors = check_function(forward, backward, params, tasks.tokens)
    assert max(errors.values()) <= TOLERANCE, errors


def test_the_heads_hold_the_gril_blocks_states(rng):
    """Each head of the stack (``gril.states``, a scan) holds the states of the GRIL block's step loop (cells.gril,
    sequential mode) with that head's Q and A."""
    tasks = G.sample(rng, 3, N=5, f=4)
    p = stack.init_params(rng, 4, 2)
    _, cache = stack.predict(p, tasks.tokens, 4)
    for head, A in (("Q_1", "A_1"), ("Q_2", "A_2"), ("Q_tilde_2", "A_tilde_2")):
        block = {"Q": p[head], "q": np.zeros(3), "beta": np.ones(1), "A": p[A]}
        _, block_cache = gril.forward(block, tasks.tokens, s=2, mode="sequential")
        assert rel_error(cache.Z[head], block_cache.Z) <= 1e-13


@pytest.mark.parametrize("L", [1, 2, 3])
def test_the_construction_is_L_gd_steps(L, rng):
    N, f = 10, 10
    tasks = G.sample(rng, 20, N=N, f=f)
    eta = 1.3
    y_hat, _ = stack.predict(stack.construction(f, N, L, eta), tasks.tokens, f)
    y_gd = gril_gd.gd_predict(tasks.X, tasks.Y, eta, steps=L)
    assert np.abs(y_hat - y_gd).max() <= 1e-10
    assert np.abs(y_hat - gd_as_gril.multi_step_gd_forward(tasks.tokens, L, eta).y_hat).max() <= 1e-10
    if L > 1:   # and it is not L - 1 steps: the check can fail
        assert np.abs(y_hat - gril_gd.gd_predict(tasks.X, tasks.Y, eta, steps=L - 1)).max() > 1e-2


def test_construction_with_scalar_targets(rng):
    tasks = G.sample(rng, 10, N=6, f=4, n_out=1)
    y_hat, _ = stack.predict(stack.construction(4, 6, 2, 0.8), tasks.tokens, 1)
    assert np.abs(y_hat - gril_gd.gd_predict(tasks.X, tasks.Y, 0.8, steps=2)).max() <= 1e-10


def test_best_eta_is_the_minimum_of_the_loss(rng):
    """The exact polynomial search: its η beats its neighbours, and one step lands on η* (analytic) to ~1%."""
    tasks = G.sample(rng, 4000, N=10, f=10)
    y = tasks.Y[:, -1]
    for steps in (1, 2):
        eta, loss = MS.best_eta(tasks, steps)

        def at(e):
            return G.query_loss(gril_gd.gd_predict(tasks.X, tasks.Y, e, steps=steps), y)[0]

        assert loss == pytest.approx(at(eta), rel=1e-12)
        assert loss < at(0.98 * eta) and loss < at(1.02 * eta)
    assert MS.best_eta(tasks, 1)[0] == pytest.approx(gril_gd.eta_star(10, 10), rel=0.03)


def test_best_step_sizes_are_gd_steps(rng):
    tasks = G.sample(rng, 3000, N=10, f=10)
    etas, loss = MS.best_step_sizes(tasks, 2)
    W = None
    for e in etas:
        W = gril_gd.gd_step(tasks.X, tasks.Y, e, W)
    y = tasks.Y[:, -1]
    assert G.query_loss(np.einsum("bfo,bf->bo", W, tasks.X[:, -1]), y)[0] == pytest.approx(loss, rel=1e-10)
    assert loss < MS.best_eta(tasks, 2)[1]   # free step sizes beat one fixed step size


def test_short_training_run_beats_the_zero_predictor():
    """400 steps of the two-layer model get well below the zero predictor (one GD step: 0.5 of it)."""
    res = MS.run_job(MS.Job(L=2, steps=400, warmup_steps=40), n_eval=2000)
    assert res["over_zero"] < 0.7, res


def test_params_are_checked(rng):
    p = stack.init_params(rng, 3, 2)
    del p["Q_tilde_2"]
    with pytest.raises(ValueError, match="params must hold"):
        stack.predict(p, G.sample(rng, 1, N=2, f=3).tokens, 3)


def test_registered_with_the_gril_experiments():
    from minimal.experiments import experiments

    mod = experiments("gril")["multistep"]
    assert mod is MS and MS.Config.quick().steps < MS.Config().steps
