"""``minimal.bench.jax_models``, only where JAX is installed: each JAX twin computes our model (float64, dropout
off, loss and every gradient within ``EQUAL_TOL``), the jitted step trains, the cell step times. No speed is
asserted (timings live in ``python -m minimal bench train``'s printout)."""
import importlib.util

import numpy as np
import pytest

from minimal.bench import train as bt

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed: the jax "
                                "twins are not checked (pip install -e \".[anchors]\")")

# The second version of the recurrence (associative scan, Heinsen) compiles slowly: checked on the x2 selective-copy
# models, which cover both cells in both forms; the first version on all 13 models.
SECOND_VERSION_ON = ("selective copy mingru x2", "selective copy minlstm x2",
                     "selective copy mingru x2 log", "selective copy minlstm x2 log")


@pytest.fixture(scope="module")
def jm():
    from minimal.bench import jax_models

    return jax_models


def _only(jm, monkeypatch, version):
    monkeypatch.setattr(jm, "versions", lambda model: [version])


def test_jax_twins_compute_our_models_in_float64(jm, monkeypatch):
    worst = {}
    for m in bt.models():
        m64 = bt.as_dtype(m, np.float64)
        for version in jm.versions(m)[:2 if m.name in SECOND_VERSION_ON else 1]:
            with monkeypatch.context() as mp:
                _only(jm, mp, version)
                check = jm.check_equal(m64)
            worst[f"{m.name}: {version}"] = check["max_rel"]
            assert check["max_rel"] <= bt.EQUAL_TOL, (m.name, version, check)
    assert len(worst) == 13 + len(SECOND_VERSION_ON)


def test_an_unused_param_is_reported(jm):
    m = bt.models(quick=True)[0]
    m64 = bt.as_dtype(m, np.float64)
    loss, grads = m64.loss_and_grads(m64.params, m64.batch, 0.0, None)
    extra = m64._replace(params={**m64.params, "9.W": np.ones(3)},
                         loss_and_grads=lambda *args: (loss, {**grads, "9.W": np.ones(3)}))
    check = jm.check_equal(extra)
    assert check["max_rel"] == float("inf") and "'9.W'" in check["why"]


def test_the_jitted_step_trains_the_model(jm):
    import jax

    model = bt.models(quick=True)[0]
    version = jm.versions(model)[0]
    ours = {k: v.copy() for k, v in model.params.items()}
    before = float(jm.loss(jm._arrays(model.params), jm._batch(model), model, version))
    run = jm.step(model, version, lr=1e-2)
    for _ in range(5):
        parts = run()
    assert set(parts) == {"step"} and parts["step"] > 0
    assert all(v.dtype == np.float32 for v in jax.tree_util.tree_leaves(run.state["params"]))
    after = float(jm.loss(run.state["params"], jm._batch(model), model, version))
    assert after < before      # five AdamW steps on one batch lower its loss
    assert all(np.array_equal(model.params[k], v) for k, v in ours.items())   # donation left ours' params alone


def test_the_cell_step_times_the_cell(jm):
    model = bt.models(quick=True)[0]
    _, args = bt._cell_step(model)
    parts = jm.cell_step(model, jm.versions(model)[0], *args)()
    assert set(parts) == {"cell"} and isinstance(parts["cell"], float) and parts["cell"] > 0


def test_jaxs_matrix_product_rate_is_timed_on_the_steps_shapes():
    from minimal.bench import jax_models

    seconds = jax_models.matmul_seconds([(64, 32, 16, 1), (16, 8, 4, 3)], repeats=2)
    assert np.isfinite(seconds) and 0 < seconds < 1
