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
comparison sweep (``sweeps/comparison``: the one-layer LSA stand-in, 200 steps), and minRNN's Shakespeare runs
(``data/minrnn/shakespeare_vanilla.json``: the vanilla minGRU's first 48 steps; ``shakespeare_small.json``: the
Transformer's and the log-space minGRU's first 8; ``shakespeare_fixed.json``: the Transformer's and the log-space
minLSTM's first 48; ``shakespeare_full.json``, trained until the best test loss stopped improving: the Transformer's
and the log-space minGRU's first chunk; and each one's test loss at step 0).
Zucchet: the teacher-student run (``data/zucchet/teacher_student_full.npz`` stores every step's loss: the first 40
steps), the ICL run (``icl_full.npz``: the first of its 200 curve means, 4,800 steps) and two jobs of the
architecture sweep (a teacher-student LRU In-Skip job, an ICL GRU job: the first of their 40 curve points). They
train in float32 and predate the current dλ/dν formula (-exp(ν - exp(ν)) instead of -exp(ν)·λ), so their tolerance
is ``RTOL_ZUCCHET`` = 1e-5.
Not covered: runs that store no curve (GRIL's regression weights, the ablation and selective-copy sweeps store only
a final tail mean).
"""
import json

import numpy as np
import pytest

from minimal.data import data_path
from minimal.run.job_files import job_path
from minimal.experiments.minrnn import shakespeare_model as SM

RTOL = 1e-9       # float64 runs
RTOL32 = 1e-6     # float32 runs
RTOL_ZUCCHET = 1e-5   # float32 runs made before the dλ/dν formula changed


class _Stop(Exception):
    pass


def _first_steps(monkeypatch, module, steps):
    """Make ``module.train`` run only the first ``steps`` steps of the call it gets (same schedule, same rng),
    record their losses and stop the caller there; returns the list the losses land in."""
    real = module.train
    got = []

    def short(loss_and_grads, params, total=None, **kw):
        total = kw["setup"].steps if total is None else total      # a TrainSetup's schedule spans its steps
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


def _needs(path):
    if not path.exists():
        pytest.skip(f"{path} is not committed here")
    return path


def _json(*parts):
    return json.loads(_needs(data_path(*parts)).read_text())


def test_gril_multistep_two_layers(monkeypatch):
    from minimal.experiments.gril import multistep as MS

    stored = _json("gril", "multistep_full.json")
    cfg = stored["config"]
    n = _chunk(cfg["steps"], len(stored["train_curve_gril2"]))
    got = _first_steps(monkeypatch, MS, n)
    job = MS.Job(L=cfg["L"], N=cfg["N"], f=cfg["f"], seed=cfg["seed"], steps=cfg["steps"], lr=cfg["lr"],
                 c_init=cfg["c_init"], x_scale=cfg.get("x_scale", 1.0))   # runs that predate the field: U(-1, 1)
    with pytest.raises(_Stop):
        MS.train_job(job)
    assert np.mean(got[0]) == pytest.approx(stored["train_curve_gril2"][0], rel=RTOL)


def test_gril_classification_softmax_without_phi(monkeypatch):
    from minimal.experiments.gril import classification as CL

    stored = _json("gril", "classification_full.json")
    cfg = {"x_scale": 1.0} | stored["config"]      # runs that predate the field were made at U(-1, 1)
    config = CL.Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()})
    assert config.seeds == (0,) or list(config.seeds) == [0]       # the stored curve is then one run's
    n = _chunk(config.steps, len(stored["softmax_nophi_train_curve"]))
    got = _first_steps(monkeypatch, CL, n)
    with pytest.raises(_Stop):
        CL.train_job(CL._job(config, "softmax", False, config.seeds[0]))
    assert np.mean(got[0]) == pytest.approx(stored["softmax_nophi_train_curve"][0], rel=RTOL)


def test_gril_comparison_sweep_job(monkeypatch):
    from minimal.experiments.gril import comparison as CMP
    from minimal.run.job_files import load_records

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


def _replay_shakespeare(monkeypatch, file, kind):
    from minimal.experiments.minrnn import shakespeare as S
    from minimal.tasks import char_lm

    stored = _json("minrnn", file)
    config = S.Config.from_saved(stored["config"])
    m = stored["models"][kind]
    n = _chunk(m.get("steps_run", config.steps), len(m["train_curve"]))   # a stopped run trained steps_run steps
    got = _first_steps(monkeypatch, S, n)
    evals = []
    real_evaluate = SM.evaluate
    monkeypatch.setattr(S, "evaluate", lambda *a: evals.append(real_evaluate(*a)) or evals[-1])
    data = char_lm.load()
    eval_set = char_lm.eval_windows(data.test, config.T, config.eval_windows)
    with pytest.raises(_Stop):
        S._train_one(kind, config, data, eval_set, None, False)
    assert m["curve_steps"][0] == 0
    assert config.dtype == "float32"
    assert evals[0] == pytest.approx(m["curve"][0], rel=RTOL32)        # the initial model on the test subset
    assert np.mean(got[0]) == pytest.approx(m["train_curve"][0], rel=RTOL32)


def test_minrnn_shakespeare_vanilla_mingru(monkeypatch):
    _replay_shakespeare(monkeypatch, "shakespeare_vanilla.json", "mingru_vanilla")


@pytest.mark.parametrize("kind", ["attention", "mingru"])
def test_minrnn_shakespeare_small(monkeypatch, kind):
    _replay_shakespeare(monkeypatch, "shakespeare_small.json", kind)


@pytest.mark.parametrize("kind", ["attention", "minlstm"])
def test_minrnn_shakespeare_fixed(monkeypatch, kind):
    _replay_shakespeare(monkeypatch, "shakespeare_fixed.json", kind)


@pytest.mark.parametrize("kind", ["attention", "mingru"])
def test_minrnn_shakespeare_full(monkeypatch, kind):
    """Config(): the learning rate of its first steps is the plateau schedule's (warm-up, then 3e-3)."""
    if not data_path("minrnn", "shakespeare_full.json").exists():
        pytest.skip("shakespeare_full.json is not committed here")
    _replay_shakespeare(monkeypatch, "shakespeare_full.json", kind)


# --- Zucchet ------------------------------------------------------------------------------------------

def _first_edge(steps, n_points):
    """How many steps the first curve point averages (the experiments cut the losses at linspace(0, steps, n + 1))."""
    return int(np.linspace(0, steps, n_points + 1).astype(int)[1])


def test_teacher_student_first_steps(monkeypatch):
    from minimal.experiments.zucchet import teacher_student as ts

    _, _, losses, _ = ts.load_weights(_needs(data_path("zucchet", "teacher_student_full.npz")))
    got = _first_steps(monkeypatch, ts, 40)
    with pytest.raises(_Stop):
        ts.train_student(ts.Config(), progress=False)
    np.testing.assert_allclose(got[0], losses[:40], rtol=RTOL_ZUCCHET)


def test_icl_first_curve_point(monkeypatch):
    from minimal.experiments.zucchet import icl

    _, meta = icl.load_weights(_needs(data_path("zucchet", "icl_full.npz")))
    cfg = icl.Config(**meta["config"])
    curve = meta["metrics"]["train_loss_curve"]
    got = _first_steps(monkeypatch, icl, _first_edge(cfg.steps, len(curve)))
    with pytest.raises(_Stop):
        icl.run(cfg, progress=False)
    assert np.mean(got[0]) == pytest.approx(curve[0], rel=RTOL_ZUCCHET)


@pytest.mark.parametrize("task,arch,hidden,layers", [("teacher", "lru_in_skip", 8, 1), ("icl", "gru", 4, 1)])
def test_architecture_sweep_jobs_first_curve_point(monkeypatch, task, arch, hidden, layers):
    from minimal.experiments.zucchet import architectures as A

    job = next(j for j in A.jobs(A.Config()) if (j.task, j.arch, j.hidden, j.layers) == (task, arch, hidden, layers))
    record = json.loads(_needs(job_path(A.SWEEP_DIR / "architectures", A.run_job, job, name="arch")).read_text())
    curve = record["result"]["curve"]
    got = _first_steps(monkeypatch, A, _first_edge(job.steps, len(curve)))
    with pytest.raises(_Stop):
        A.run_job(job)
    assert np.mean(got[0]) == pytest.approx(curve[0], rel=RTOL_ZUCCHET)
