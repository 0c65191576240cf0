"""minimal.run.sweep: a grid of jobs on a dask LocalCluster, one JSON per job, resumed without recomputing."""
import dataclasses
import hashlib
import json
import os
import re

import pytest

from minimal.run import job_files, sweep
from minimal.validate import InputError


@dataclasses.dataclass
class Cfg:
    a: int
    b: float = 0.5
    tag: str = "x"


def square_job(config):
    """A job that leaves a trace of each call in a log file next to its output (counts real calls)."""
    with open(os.environ["SWEEP_TEST_LOG"], "a") as f:
        f.write(f"{config.a}\n")
    if config.a < 0:
        raise ArithmeticError(f"negative a={config.a}")
    return {"square": config.a ** 2 * config.b, "values": (config.a, config.b)}


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = tmp_path / "calls.log"
    path.write_text("")
    monkeypatch.setenv("SWEEP_TEST_LOG", str(path))
    return path


def calls(log):
    return sorted(int(s) for s in log.read_text().split())


def run(configs, out, **kw):
    return sweep.run_sweep(square_job, configs, out, processes=False, progress=False, **kw)


def test_sweep_writes_one_file_per_job_and_returns_results_in_order(tmp_path, log):
    configs = [Cfg(3), Cfg(1), Cfg(2, b=2.0)]
    records = run(configs, tmp_path / "out")
    assert [r["result"]["square"] for r in records] == [4.5, 0.5, 8.0]
    assert records[0]["config"] == {"a": 3, "b": 0.5, "tag": "x"}
    assert records[0]["function"].endswith("square_job")
    assert records[2]["result"]["values"] == [2, 2.0]
    files = sorted((tmp_path / "out").glob("*.json"))
    assert len(files) == 3
    assert not list((tmp_path / "out").glob("*.tmp"))
    assert {json.loads(f.read_text())["config"]["a"] for f in files} == {1, 2, 3}
    assert calls(log) == [1, 2, 3]


def test_second_call_recomputes_nothing_and_a_grown_grid_runs_only_new_jobs(tmp_path, log):
    out = tmp_path / "out"
    first = run([Cfg(1), Cfg(2)], out)
    mtimes = {p.name: p.stat().st_mtime_ns for p in out.glob("*.json")}
    second = run([Cfg(2), Cfg(1)], out)
    assert calls(log) == [1, 2]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.json")} == mtimes
    assert [r["result"] for r in second] == [first[1]["result"], first[0]["result"]]
    run([Cfg(1), Cfg(2), Cfg(5)], out)
    assert calls(log) == [1, 2, 5]
    assert len(list(out.glob("*.json"))) == 3


def test_duplicate_configs_run_once(tmp_path, log):
    records = run([Cfg(4), Cfg(4)], tmp_path)
    assert calls(log) == [4]
    assert records[0] == records[1]


def test_job_key_is_stable_and_depends_on_values_not_order():
    assert job_files.job_key(square_job, {"a": 1, "b": 2.0}) == job_files.job_key(square_job, {"b": 2.0, "a": 1})
    assert job_files.job_key(square_job, Cfg(1)) == job_files.job_key(square_job, {"a": 1, "b": 0.5, "tag": "x"})
    assert job_files.job_key(square_job, Cfg(1)) != job_files.job_key(square_job, Cfg(1, b=0.25))
    assert job_files.job_key(square_job, Cfg(1)) != job_files.job_key(calls, Cfg(1))
    # The documented recipe, so that the file names of saved sweeps do not depend on the Python process.
    text = json.dumps({"function": f"{square_job.__module__}.square_job", "config": {"a": 1}}, sort_keys=True,
                      separators=(",", ":"))
    assert job_files.job_key(square_job, {"a": 1}) == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_field_keyed_when_set_leaves_the_key_alone_until_it_is_set(tmp_path, log):
    """A ``keyed_when_set`` field added to a job's dataclass: while None it is not in the config, the key or the
    job file (old files keep their names and load as the new dataclass); set, it is, under a key of its own."""
    @dataclasses.dataclass(frozen=True)
    class Grown:
        a: int
        b: float = 0.5
        tag: str = "x"
        scale: float = job_files.keyed_when_set()

    assert job_files.config_dict(Grown(1)) == job_files.config_dict(Cfg(1)) == {"a": 1, "b": 0.5, "tag": "x"}
    assert job_files.job_key(square_job, Grown(1)) == job_files.job_key(square_job, Cfg(1))
    assert job_files.config_dict(Grown(1, scale=0.3))["scale"] == 0.3
    assert job_files.job_key(square_job, Grown(1, scale=0.3)) != job_files.job_key(square_job, Grown(1))
    # a dict is taken as it is (a record's config): an explicit None is a value there
    assert job_files.job_key(square_job, {"a": 1, "b": 0.5, "tag": "x", "scale": None}) != \
        job_files.job_key(square_job, Grown(1))
    old = sweep.run_sweep(square_job, [Cfg(2)], tmp_path, processes=False, progress=False)
    again = sweep.run_sweep(square_job, [Grown(2)], tmp_path, processes=False, progress=False)
    assert calls(log) == [2] and again == old and Grown(**old[0]["config"]) == Grown(2)
    sweep.run_sweep(square_job, [Grown(2, scale=1.0)], tmp_path, processes=False, progress=False)
    assert calls(log) == [2, 2] and len(list(tmp_path.glob("*.json"))) == 2


def test_a_failing_job_is_not_written_the_others_are_and_a_rerun_retries_it(tmp_path, log):
    with pytest.raises(sweep.SweepError, match="negative a=-1") as info:
        run([Cfg(1), Cfg(-1), Cfg(2)], tmp_path)
    assert len(info.value.failures) == 1
    assert len(list(tmp_path.glob("*.json"))) == 2
    with pytest.raises(sweep.SweepError):
        run([Cfg(1), Cfg(-1), Cfg(2)], tmp_path)
    assert calls(log) == [-1, -1, 1, 2]


def test_load_records_reads_what_the_sweep_wrote(tmp_path, log):
    run([Cfg(1), Cfg(2)], tmp_path, name="grid")
    records = job_files.load_records(tmp_path, name="grid")
    assert sorted(r["config"]["a"] for r in records) == [1, 2]
    assert job_files.load_records(tmp_path, name="other") == []


def test_bad_arguments_name_themselves(tmp_path, log):
    with pytest.raises(ValueError, match="config"):
        run([[1, 2]], tmp_path)
    with pytest.raises(ValueError, match="config"):
        run([{"a": object()}], tmp_path)
    with pytest.raises(ValueError, match="n_workers"):
        run([Cfg(1)], tmp_path, n_workers=0)
    with pytest.raises(InputError, match="^scheduler must be None or an address"):
        run([Cfg(1)], tmp_path, scheduler="localhost")
    with pytest.raises(ValueError, match="fn"):
        sweep.run_sweep(42, [Cfg(1)], tmp_path)


def test_finite_or_nan():
    assert job_files.finite_or_nan(2) == 2.0
    assert job_files.finite_or_nan(float("inf")) != job_files.finite_or_nan(float("inf"))  # nan


def test_a_record_that_fails_half_way_leaves_the_previous_file_whole(tmp_path):
    # json.dump streams: an unserialisable value fails after part of the file is written
    path = tmp_path / "job.json"
    job_files.write_record(path, {"a": 1})
    with pytest.raises(TypeError):
        job_files.write_record(path, {"a": 2, "z": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["job.json"]


def test_all_on_disk_says_whether_a_rerun_would_compute_anything(tmp_path, log):
    out = tmp_path / "out"
    assert not job_files.all_on_disk(square_job, [Cfg(1)], out)
    run([Cfg(1), Cfg(2)], out)
    assert job_files.all_on_disk(square_job, [Cfg(2), Cfg(1)], out)
    assert not job_files.all_on_disk(square_job, [Cfg(1), Cfg(3)], out)
    assert job_files.all_on_disk(square_job, [], out)


@pytest.mark.parametrize("damage", [b"", b"{\"function\": \"x\", \"conf", b"\x00\xff garbage \xfe",
                                    b"<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> other\n", b"[1, 2]"],
                         ids=["empty", "truncated", "garbage", "merge-conflict", "not-a-record"])
def test_an_unreadable_job_file_is_recomputed_with_a_warning_naming_it(tmp_path, log, damage):
    out = tmp_path / "out"
    first = run([Cfg(1), Cfg(2)], out)
    bad = job_files.job_path(out, square_job, Cfg(2))
    bad.write_bytes(damage)
    assert not job_files.all_on_disk(square_job, [Cfg(1), Cfg(2)], out)
    with pytest.raises(ValueError, match=f"sweep job file {re.escape(str(bad))}.*unreadable.*re-run the sweep"):
        job_files.load_records(out)
    with pytest.warns(RuntimeWarning, match=f"sweep job file {re.escape(str(bad))} is unreadable.*computing the job again"):
        again = run([Cfg(1), Cfg(2)], out)
    assert calls(log) == [1, 2, 2]  # only the damaged job ran again
    assert [r["result"] for r in again] == [r["result"] for r in first]
    assert again[0] == first[0]  # the readable file was loaded, not rewritten
    assert json.loads(bad.read_text()) == again[1]
    assert job_files.all_on_disk(square_job, [Cfg(1), Cfg(2)], out)


@dataclasses.dataclass
class Grid:
    """An experiment Config as ``Sweep`` reads it: the grid's values and where and how to run it."""
    a_values: tuple = (1, 2)
    scheduler: object = None
    n_workers: int = 1
    processes: bool = False
    sweep_dir: object = None


def grid_jobs(config):
    return [Cfg(a) for a in config.a_values]


def test_a_sweep_runs_its_grid_once_then_is_finished_and_summarises_with_or_without_its_config(tmp_path, log):
    folder = tmp_path / "grid"
    by_records = sweep.Sweep("sq", square_job, grid_jobs, lambda records: {"n": len(records)}, folder, Grid)
    by_config = sweep.Sweep("sq", square_job, grid_jobs,
                            lambda records, config: {"a": [r["config"]["a"] for r in records],
                                                     "values": list(config.a_values)}, folder, Grid)
    assert not by_records.finished() and by_records.record(Cfg(1)) is None
    summary = by_records.run(Grid(), out_dir=tmp_path / "out", progress=False)
    assert summary["n"] == summary["n_jobs"] == 2
    assert not (tmp_path / "out").exists()      # the summary is returned; reproduce writes it, into results.json
    assert sorted(p.name.split("-")[0] for p in folder.glob("*.json")) == ["sq", "sq"]
    assert by_records.finished() and not by_records.finished(Grid(a_values=(1, 3)))
    assert by_config.run(Grid(), progress=False)["a"] == [1, 2]           # loaded: nothing trained again
    assert calls(log) == [1, 2]
    assert by_records.record(Cfg(2))["result"]["square"] == 2.0
    elsewhere = Grid(sweep_dir=str(tmp_path / "elsewhere"))
    assert by_records.dir(elsewhere) == tmp_path / "elsewhere" and not by_records.finished(elsewhere)


def counting_job(config, checkpoint_path=None):
    """A long job in two halves: the first call writes its checkpoint (the first half) and dies when config.b < 0;
    a call that finds the checkpoint does only the second half. Logs "half <a>" per half it computes."""
    from pathlib import Path

    ckpt = Path(checkpoint_path)
    with open(os.environ["SWEEP_TEST_LOG"], "a") as f:
        if not ckpt.exists():
            f.write(f"1{config.a}\n")
            ckpt.write_text("first half")
            (ckpt.parent / (ckpt.stem + ".curve.json")).write_text("{}")      # what the job keeps beside it
            if config.b < 0:
                raise RuntimeError("killed after its checkpoint")
        f.write(f"2{config.a}\n")
    return {"from": str(ckpt)}


def test_a_checkpointed_job_resumes_from_its_checkpoint_and_leaves_none_behind(tmp_path, log):
    """With ``checkpoint_dir`` each job gets its own path (named by its job key); a job killed after its checkpoint
    resumes from it on the re-run (its first half is not computed again), and once a job's file is written its
    checkpoint files are gone."""
    out, ck = tmp_path / "out", tmp_path / "ckpt"
    kw = dict(processes=False, progress=False, checkpoint_dir=ck)
    with pytest.raises(sweep.SweepError):
        sweep.run_sweep(counting_job, [Cfg(a=1), Cfg(a=2, b=-1.0)], out, **kw)
    assert calls(log) == [11, 12, 21]                           # job 2 died after its first half
    assert sorted(p.name for p in ck.iterdir()) == sorted(
        job_files.checkpoint_path(ck, counting_job, Cfg(a=2, b=-1.0)).stem + s for s in (".curve.json", ".npz"))
    log.write_text("")
    records = sweep.run_sweep(counting_job, [Cfg(a=1), Cfg(a=2, b=-1.0)], out, **kw)
    assert calls(log) == [22]                                   # only job 2's second half
    assert records[1]["result"]["from"] == str(job_files.checkpoint_path(ck, counting_job, Cfg(a=2, b=-1.0)))
    assert list(ck.iterdir()) == []


def test_a_sweep_with_checkpoints_keeps_them_in_a_cache_folder_not_the_committed_one(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    s = sweep.Sweep("grid", counting_job, grid_jobs, lambda r: {}, tmp_path / "committed", Cfg, checkpoints=True)
    assert s.checkpoint_folder() == tmp_path / "cache" / "minimal" / "sweep-checkpoints" / "grid"
