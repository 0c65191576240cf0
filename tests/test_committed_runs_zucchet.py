"""Zucchet's committed long runs still come out of today's code: re-run their first steps and compare with the
stored losses (the method of ``test_committed_runs``: the experiment's own training function, ``train`` stopped
after the first steps, the schedule still spanning the whole run).

Covered: the teacher-student run (``data/zucchet/teacher_student_full.npz`` stores every step's loss: the first 40
steps), the ICL run (``icl_full.npz`` stores 200 means: the first one, 4,800 steps), and two jobs of the
architecture sweep (a teacher-student LRU In-Skip job and an ICL GRU job: the first of their 40 curve points).
All train in float32; the tolerance (1e-5) allows a different BLAS summation order on another machine and the
rounding of dλ/dν, whose formula changed after the runs (-exp(ν - exp(ν)) instead of -exp(ν)·λ); a 0.1% error in
AdamW's step moves these losses by far more.
"""
import json

import numpy as np
import pytest

from minimal.data import data_path
from minimal.sweep import job_path

RTOL32 = 1e-5


class _Stop(Exception):
    pass


def _first_steps(monkeypatch, module, steps):
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


def _first_edge(steps, n_points):
    """How many steps the first curve point averages (the experiments cut the losses at linspace(0, steps, n + 1))."""
    return int(np.linspace(0, steps, n_points + 1).astype(int)[1])


def _needs(path):
    if not path.exists():
        pytest.skip(f"{path} is not committed here")
    return path


def test_teacher_student_first_steps(monkeypatch):
    from minimal.experiments import teacher_student as ts

    _, _, losses, _ = ts.load_weights(_needs(data_path("zucchet", "teacher_student_full.npz")))
    got = _first_steps(monkeypatch, ts, 40)
    with pytest.raises(_Stop):
        ts.train_student(ts.Config(), progress=False)
    np.testing.assert_allclose(got[0], losses[:40], rtol=RTOL32)


def test_icl_first_curve_point(monkeypatch):
    from minimal.experiments import icl

    _, meta = icl.load_weights(_needs(data_path("zucchet", "icl_full.npz")))
    cfg = icl.Config(**meta["config"])
    curve = meta["metrics"]["train_loss_curve"]
    got = _first_steps(monkeypatch, icl, _first_edge(cfg.steps, len(curve)))
    with pytest.raises(_Stop):
        icl.run(cfg, progress=False)
    assert np.mean(got[0]) == pytest.approx(curve[0], rel=RTOL32)


@pytest.mark.parametrize("task,arch,hidden,layers", [("teacher", "lru_in_skip", 8, 1), ("icl", "gru", 4, 1)])
def test_architecture_sweep_jobs_first_curve_point(monkeypatch, task, arch, hidden, layers):
    from minimal.experiments import architectures as A

    job = next(j for j in A.jobs(A.Config()) if (j.task, j.arch, j.hidden, j.layers) == (task, arch, hidden, layers))
    record = json.loads(_needs(job_path(A.SWEEP_DIR / "architectures", A.run_job, job, name="arch")).read_text())
    curve = record["result"]["curve"]
    got = _first_steps(monkeypatch, A, _first_edge(job.steps, len(curve)))
    with pytest.raises(_Stop):
        A.run_job(job)
    assert np.mean(got[0]) == pytest.approx(curve[0], rel=RTOL32)
