"""The committed long runs still come out of today's code: re-run their first steps and compare with the stored
curves.

Notebooks assert numbers of frozen runs under ``data/``; a bug in the training code (the optimiser, a backward,
a sampler, a schedule) would pass them. Here the first stored point of each committed curve is recomputed: the
experiment's own training function runs with the run's stored configuration, but ``train`` stops after the steps
that point averages (the cosine schedule still spans the whole run), and the mean training loss over those steps
must equal the stored one to float rounding (``RTOL``: 1e-9 for the float64 GRIL runs, which come out
bit-identical here; 1e-6 for the float32 Shakespeare run, whose BLAS summation order may differ between machines:
7e-9 was seen). The sampling, the initialisation and AdamW are all inside that
number, so a changed seed, batch or bias correction moves it far beyond 1e-9.

Covered: GRIL's multi-step run (``data/gril/multistep_full.json``: the two-layer model, 200 steps) and classification
run (``classification_full.json``: the softmax model without feature map, 400 steps), one job of GRIL's model
comparison sweep (``sweeps/comparison``: the one-layer LSA stand-in, 200 steps), and minRNN's Shakespeare run
(``data/minrnn/shakespeare_full.json``: the minGRU model's first 48 steps, and its test loss at step 0).
Not covered: runs that store no curve (GRIL's regression weights, the ablation and selective-copy sweeps store only
a final tail mean), and Zucchet's committed runs, which are being regenerated.
"""
import json

import numpy as np
import pytest

from minimal.data import data_path

RTOL = 1e-9       # float64 runs
RTOL32 = 1e-6     # float32 runs


class _Stop(Exception):
    pass


def _first_steps(monkeypatch, module, steps):
    """Make ``module.train`` run only the first ``steps`` steps of the call it gets (same schedule, same rng),
    record their losses and stop the caller there; returns the list the losses land in."""
    real = module.train
    got = []

    def short(loss_and_grads, params, total, **kw):
        assert steps <= total
        kw["checkpoint_path"] = None
        kw["progress"] = False
        got.append(real(loss_and_grads, params, steps, **kw).losses)
        raise _Stop

    monkeypatch.setattr(module, "train", short)
    return got


def _chunk(total, n):
    """How many steps the first of ``n`` np.array_split chunks of ``total`` losses holds."""
    return len(np.array_split(np.arange(total), n)[0])


def _json(*parts):
    path = data_path(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not committed here")
    return json.loads(path.read_text())


def test_gril_multistep_two_layers(monkeypatch):
    from minimal.experiments.gril import multistep as MS

    stored = _json("gril", "multistep_full.json")
    cfg = stored["config"]
    n = _chunk(cfg["steps"], len(stored["train_curve_gril2"]))
    got = _first_steps(monkeypatch, MS, n)
    job = MS.Job(L=cfg["L"], N=cfg["N"], f=cfg["f"], seed=cfg["seed"], steps=cfg["steps"], lr=cfg["lr"],
                 c_init=cfg["c_init"])
    with pytest.raises(_Stop):
        MS.train_job(job)
    assert np.mean(got[0]) == pytest.approx(stored["train_curve_gril2"][0], rel=RTOL)


def test_gril_classification_softmax_without_phi(monkeypatch):
    from minimal.experiments.gril import classification as CL

    stored = _json("gril", "classification_full.json")
    config = CL.Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored["config"].items()})
    assert config.seeds == (0,) or list(config.seeds) == [0]       # the stored curve is then one run's
    n = _chunk(config.steps, len(stored["softmax_nophi_train_curve"]))
    got = _first_steps(monkeypatch, CL, n)
    with pytest.raises(_Stop):
        CL.train_job(CL._job(config, "softmax", False, config.seeds[0]))
    assert np.mean(got[0]) == pytest.approx(stored["softmax_nophi_train_curve"][0], rel=RTOL)


def test_gril_comparison_sweep_job(monkeypatch):
    from minimal.experiments.gril import comparison as CMP
    from minimal.sweep import load_records

    recs = [r for r in load_records(CMP.SWEEP_DIR / "comparison", name="cmp")
            if r["config"].get("model") == "lsa_1"] if (CMP.SWEEP_DIR / "comparison").exists() else []
    if not recs:
        pytest.skip("the comparison sweep's lsa_1 job file is not committed here")
    rec = recs[0]
    curve = rec["result"]["curve"]
    n = _chunk(rec["config"]["steps"], len(curve))
    got = _first_steps(monkeypatch, CMP, n)
    with pytest.raises(_Stop):
        CMP.run_job(dict(rec["config"]))
    assert np.mean(got[0]) == pytest.approx(curve[0], rel=RTOL)


def test_minrnn_shakespeare_mingru(monkeypatch):
    from minimal.experiments.minrnn import shakespeare as S
    from minimal.tasks import char_lm

    stored = _json("minrnn", "shakespeare_full.json")
    cfg = dict(stored["config"])
    cfg["kinds"] = tuple(cfg["kinds"])
    config = S.Config(**cfg)
    m = stored["models"]["mingru"]
    n = _chunk(config.steps, len(m["train_curve"]))
    got = _first_steps(monkeypatch, S, n)
    evals = []
    real_evaluate = S.evaluate
    monkeypatch.setattr(S, "evaluate", lambda *a: evals.append(real_evaluate(*a)) or evals[-1])
    data = char_lm.load()
    eval_set = char_lm.eval_windows(data.test, config.T, config.eval_windows)
    with pytest.raises(_Stop):
        S._train_one("mingru", config, data, eval_set, None, False)
    assert m["curve_steps"][0] == 0
    assert config.dtype == "float32"
    assert evals[0] == pytest.approx(m["curve"][0], rel=RTOL32)        # the initial model on the test subset
    assert np.mean(got[0]) == pytest.approx(m["train_curve"][0], rel=RTOL32)
