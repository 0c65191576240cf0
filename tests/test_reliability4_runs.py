"""Reliability round 4 (issue 48), items 11-14: a plateau rule whose metric is NaN from the first evaluation stops;
a sweep job file holding another job's record is refused (recomputed, with a warning naming the file); ``bench scan``
/ ``bench window`` refuse, before allocating, a size whose memory estimate exceeds the machine's memory; ``bench
step`` / ``bench train`` refuse ``--size`` rather than ignore it."""
import json
import math
import re
import shutil

import pytest

from minimal.bench import kernels as bench
from minimal.run import job_files, sweep
from minimal.__main__ import main
from minimal.run.stopping import Plateau, ReduceOnPlateau
from minimal.validate import InputError

from test_sweep import Cfg, Grid, calls, grid_jobs, log, run, square_job  # noqa: F401 - log is a fixture

NAN_STEPS = range(25, 1001, 25)


# --- 11: a metric that is NaN from the first evaluation -----------------------------------------------------------
@pytest.mark.parametrize("mode", ["min", "max"])
def test_a_plateau_whose_metric_is_nan_from_the_first_evaluation_stops_after_patience(mode):
    rule = Plateau(patience=50, min_gain=0.1, mode=mode)
    stopped = None
    for step in NAN_STEPS:
        assert rule.update(step, math.nan) is False
        if rule.stale(step):
            stopped = step
            break
    assert stopped == 75                                  # the NaN evaluations span 50 steps: 25 .. 75
    assert rule.best is None and rule.reference is None   # nothing to score: callers keep the initial weights
    replayed = Plateau.replay({s: math.nan for s in (25, 50, 75)}, 50, 0.1, mode)
    assert replayed.stale(75) and not Plateau.replay({25: math.nan, 50: math.nan}, 50, 0.1, mode).stale(50)


def test_a_finite_value_after_leading_nans_starts_the_ordinary_clock():
    rule = Plateau(patience=50, min_gain=0.1)
    rule.update(25, math.nan)
    rule.update(50, math.nan)
    assert rule.update(60, 3.0) is True and (rule.reference, rule.clock) == (3.0, 60)
    assert not rule.stale(100) and rule.stale(110)        # the NaNs before 3.0 no longer count


def test_reduce_on_plateau_with_a_nan_metric_from_the_start_is_done_after_its_reductions():
    rule = ReduceOnPlateau(lr=1.0, patience=50, min_gain=0.1, reductions=2)
    done = None
    for step in NAN_STEPS:
        rule.update(step, math.nan)
        if rule.done:
            done = step
            break
    assert rule.starts == [75, 150] and done == 225 and rule.best is None


def test_the_selective_copy_rule_stops_a_run_whose_accuracy_is_nan():
    from minimal.experiments.minrnn import selective_copy as S

    job = S.Job(eval_every=200, patience=400)
    curve = {"steps": [200, 400, 600], "accuracy": [math.nan] * 3}
    assert S._stops(job, S.replay(curve, job), 600)
    assert not S._stops(job, S.replay({"steps": [200, 400], "accuracy": [math.nan] * 2}, job), 400)


# --- 12: a job file that holds another job's record ---------------------------------------------------------------
def test_a_job_file_copied_over_another_jobs_file_is_recomputed_with_a_warning_naming_it(tmp_path, log):  # noqa: F811
    out = tmp_path / "out"
    first = run([Cfg(1), Cfg(2)], out)
    one, two = job_files.job_path(out, square_job, Cfg(1)), job_files.job_path(out, square_job, Cfg(2))
    shutil.copyfile(one, two)                               # a valid record, of the wrong job
    assert not job_files.all_on_disk(square_job, [Cfg(1), Cfg(2)], out)
    with pytest.raises(InputError, match=f"sweep job file {re.escape(str(two))} was computed for another job"):
        job_files.load_records(out)
    with pytest.warns(RuntimeWarning, match=f"sweep job file {re.escape(str(two))} was computed for another job.*"
                                            f"computing the job again"):
        again = run([Cfg(1), Cfg(2)], out)
    assert calls(log) == [1, 2, 2]                          # only the mispaired job ran again
    assert [r["result"] for r in again] == [r["result"] for r in first] and again[0] == first[0]
    assert again[1]["config"] == {"a": 2, "b": 0.5, "tag": "x"}
    assert json.loads(two.read_text()) == again[1]          # rewritten with its own record
    assert job_files.all_on_disk(square_job, [Cfg(1), Cfg(2)], out)


def test_a_sweeps_record_of_another_job_is_refused_and_counted_as_damaged(tmp_path, log):  # noqa: F811
    folder = tmp_path / "grid"
    sq = sweep.Sweep("sq", square_job, grid_jobs, lambda records: {"n": len(records)}, folder, Grid)
    sq.run(Grid(), progress=False)
    one, two = (job_files.job_path(folder, square_job, Cfg(a), name="sq") for a in (1, 2))
    record = json.loads(one.read_text())
    two.write_text(json.dumps(record))
    with pytest.warns(RuntimeWarning, match=f"sweep job file {re.escape(str(two))} was computed for another job"):
        assert sq.record(Cfg(2)) is None
    assert sq.record(Cfg(1)) == record
    assert sq.unreadable() == ([two], []) and not sq.finished()
    # the same config under another function is another job too
    two.write_text(json.dumps(dict(json.loads(two.read_text()), config={"a": 2, "b": 0.5, "tag": "x"},
                                   function="somewhere.else")))
    with pytest.warns(RuntimeWarning, match="computed for another job"):
        assert sq.record(Cfg(2)) is None


def test_every_committed_job_file_holds_the_job_its_name_says():
    from minimal.data import data_path

    files = sorted(data_path().glob("*/sweeps/*/*.json"))
    if not files:
        pytest.skip("no committed sweeps here")
    bad = [str(p) for p in files if job_files.read_record(p, job_files._key_of(p))[0] is None]
    assert bad == []


# --- 13: a size the machine's memory cannot hold ------------------------------------------------------------------
@pytest.mark.parametrize("what", ["scan", "window"])
def test_bench_refuses_a_size_beyond_the_machines_memory_before_allocating(monkeypatch, capsys, what):
    ran = []
    monkeypatch.setattr(bench, f"bench_{what}", lambda **kw: ran.append(kw) or [])
    assert main(["bench", what, "--size", "100000000"]) == 2     # tens of TB: more than any machine here
    err = capsys.readouterr().err
    assert ran == [] and err.count("\n") == 1
    assert re.match(rf"error: bench {what} --size 100000000 needs about [\d,.]+ GB of memory .*more than the "
                    rf"[\d,.]+ GB this machine has available.*give a smaller --size \(T <= [\d,]+ fits\)", err)


def test_bench_compares_its_estimate_with_the_memory_the_machine_reports(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(bench, "bench_scan", lambda **kw: ran.append(kw) or [])
    monkeypatch.setattr(bench, "machine_memory_gb", lambda: (1.0, 2.0))
    assert main(["bench", "scan", "--size", "4096"]) == 2          # 2.4 GB > 1.0 GB available
    err = capsys.readouterr().err
    assert "needs about 2.4 GB" in err and "1.0 GB this machine has available (of 2.0 GB)" in err
    assert "T <= 1,706 fits" in err
    assert main(["bench", "scan", "--size", "1024"]) == 0 and len(ran) == 1    # 0.6 GB fits


def test_the_library_benchmarks_check_memory_before_allocating(monkeypatch):
    monkeypatch.setattr(bench, "machine_memory_gb", lambda: (1e-9, 1e-9))
    with pytest.raises(InputError, match=r"bench scan at shape \(2, 64, 8\) needs about"):
        bench.bench_scan(shape=(2, 64, 8), repeats=1)
    with pytest.raises(InputError, match=r"bench window at shape \(2, 64, 2, 3, 1\) needs about"):
        bench.bench_window(backend="numba", shape=(2, 64, 2, 3, 1), repeats=1)


def test_machine_memory_is_read():
    available, total = bench.machine_memory_gb()
    assert total is not None and 0 < available <= total * 1.01


# --- 14: --size where it means nothing ----------------------------------------------------------------------------
@pytest.mark.parametrize("what,module,fn", [("step", "bench.step", "bench_step"), ("train", "bench.train", "bench_train")])
def test_bench_step_and_train_refuse_size(monkeypatch, capsys, what, module, fn):
    import importlib

    ran = []
    monkeypatch.setattr(importlib.import_module(f"minimal.{module}"), fn, lambda **kw: ran.append(kw) or [])
    assert main(["bench", what, "--size", "64"]) == 2
    err = capsys.readouterr().err
    assert ran == [] and err == (f"error: --size applies to bench scan and bench window only (their time steps T); "
                                 f"bench {what} times the experiments' fixed shapes: drop --size 64\n")
