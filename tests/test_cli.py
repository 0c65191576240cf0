"""The command line: `python -m minimal check` reports every cell and fails loudly on errors."""
import subprocess
import sys

import pytest

from minimal.__main__ import main


def test_check_one_cell_prints_a_passing_row(capsys):
    assert main(["check", "--only", "linear", "--no-scans"]) == 0
    out = capsys.readouterr().out
    assert "linear/" in out and "pass" in out and "FAIL" not in out


def test_check_unknown_cell_exits_with_message(capsys):
    assert main(["check", "--only", "nope", "--no-scans"]) == 2
    assert capsys.readouterr().err.startswith("error: only must be one of ")
    assert main(["check", "--only", "linear", "--no-scans", "--seed", "-1"]) == 2
    assert capsys.readouterr().err.startswith("error: seed must be an integer >= 0")


def test_validation_errors_are_input_errors_and_still_value_errors():
    from minimal.validate import InputError, check_array

    assert issubclass(InputError, ValueError)
    with pytest.raises(InputError, match="^x must be a numpy.ndarray"):
        check_array("x", [1.0])


def test_an_internal_value_error_keeps_its_traceback(monkeypatch):
    # only errors about the user's arguments become one line; a bug's ValueError must reach the user whole
    from minimal import check

    def broken(**kw):
        raise ValueError("operands could not be broadcast together")

    monkeypatch.setattr(check, "run", broken)
    with pytest.raises(ValueError, match="could not be broadcast"):
        main(["check", "--only", "linear", "--no-scans"])


def test_a_library_input_error_reaches_the_user_as_one_line(monkeypatch, capsys):
    from minimal import check
    from minimal.validate import check_array

    monkeypatch.setattr(check, "run", lambda **kw: check_array("x", None))
    assert main(["check", "--no-scans"]) == 2
    assert capsys.readouterr().err == "error: x must be a numpy.ndarray, got NoneType\n"


def test_bench_window_runs_the_cpu_benchmark_by_default(monkeypatch, capsys):
    from minimal import bench

    calls = []
    monkeypatch.setattr(bench, "bench_window", lambda **kw: calls.append(kw) or [])  # the real one takes minutes
    assert main(["bench", "window", "--quick"]) == 0
    assert calls == [{"backend": "numba", "shape": (16, 2 ** 12 + 1, 10, 3, 1)}]
    assert "GRIL block" in capsys.readouterr().out


def test_module_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "minimal", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "check" in out.stdout


def test_reproduce_rejects_unknown_work_and_experiment(capsys):
    assert main(["reproduce", "nope"]) == 2
    assert "work must be one of" in capsys.readouterr().err
    assert main(["reproduce", "zucchet", "--only", "nope"]) == 2
    assert "only must name experiments" in capsys.readouterr().err


def test_report_puts_paper_next_to_ours_with_a_verdict_and_keeps_timings_apart():
    import types

    from minimal import report

    mod = types.SimpleNamespace(TOLERANCE={"kv": report.Tolerance("log10", 0.5, 1.0)},
                                METRICS={"loss": "mean squared error on the fixed set"},
                                QUICK_MISSES="the loss floor of the full run")
    results = {"exp": {"metrics": {"loss": 0.26, "kv": 4e-7, "n": 85, "ms_per_step": 5.0, "curve": list(range(20)),
                                   "extra": 1.5},
                       "paper": {"loss": 0.25, "kv": 4.5e-8, "n": 86}, "seconds": 3.0, "figures": ["out/exp/f.png"],
                       "mode": "quick"}}
    text = report.render("w", True, results, {"exp": mod}, "out")
    comparable = text.split("## Paper-comparable results")[1].split("##")[0]
    assert "| exp | loss | 0.25 | 0.26 | matches | ±5% / ±25% | quick |" in comparable
    assert "| exp | kv | 4.5e-08 | 4e-07 | close | 0.5 / 1 decades | quick |" in comparable
    assert "| exp | n | 86 | 85 | differs | equal | quick |" in comparable
    timings = text.split("## Timings")[1].split("##")[0]
    assert "ms_per_step" in timings and "ms_per_step" not in comparable and "wall time (s) | 3.0" in timings
    assert "the loss floor of the full run" in text and "`exp.loss`: mean squared error" in text
    assert "[f.png](exp/f.png)" in text and "curve" not in text
    assert "1 matches, 1 close, 1 differs" in text


@pytest.mark.parametrize("paper,ours,tol,want", [
    (0.1, 0.104, None, "matches"), (0.1, 0.12, None, "close"), (0.1, 0.2, None, "differs"),
    (5e-8, 3e-9, ("at_most", 0.0, 10.0), "matches"), (5e-8, 2e-7, ("at_most", 0.0, 10.0), "close"),
    (86, 86, None, "matches"), (1, 0, None, "differs"), (86, 85, ("exact", 0, 2), "close"),
    ([0.0681, 0.0682], [0.0681, 0.09], None, "differs"), (0.1, float("nan"), None, "n/a")])
def test_verdicts(paper, ours, tol, want):
    from minimal import report

    assert report.verdict(paper, ours, None if tol is None else report.Tolerance(*tol)) == want


def test_scan_methods_must_agree_to_rounding_not_to_the_finite_difference_tolerance():
    from minimal import check

    assert check.SCAN_TOLERANCE == 1e-12
    # an error that passes a gradient check would be a bug between two exact scan methods
    assert check.Row("cell/x", 3, 1e-9, "x", 0.0).passed
    assert not check.Row("scan/x", 0, 1e-9, "h", 0.0, check.SCAN_TOLERANCE).passed
    rows = {r.name: r for r in check.scan_rows()}
    for name in ("scan/numpy-blelloch", "scan/numba-sequential", "scan/numba-blelloch",
                 "scan/log-space-vs-linear", "scan/log-space-backward-vs-linear"):
        assert rows[name].tolerance == check.SCAN_TOLERANCE and rows[name].passed, rows[name]
    # the log-space backward is checked on its own, against central differences of log_scan
    fd = rows["scan/log-space-backward-vs-finite-differences"]
    assert fd.tolerance == check.TOLERANCE and fd.passed and fd.max_rel_error > 0, fd


def test_bench_step_prints_the_readout_ratio(capsys):
    assert main(["bench", "step", "--quick"]) == 0
    out = capsys.readouterr().out
    lines = {line.strip().split("  ")[0]: line for line in out.splitlines()}
    assert "teacher-student" in lines and lines["ICL, readout last"].rstrip().endswith("x")
    for part in ("of which scans", "of which BLAS matmuls", "of which the rest"):
        assert lines[part].rstrip().endswith("%"), part


def test_bench_step_refuses_the_cuda_backend(capsys):
    assert main(["bench", "step", "--backend", "cuda"]) == 2
    assert "CPU" in capsys.readouterr().err


def _fake_experiment(done=None, **attrs):
    """A stand-in experiment module: Config(size=10), quick() size 1, run returns {"size": size}; ``done``
    (None: no ``finished``) says whether the full grid is on disk."""
    import types
    from dataclasses import dataclass

    @dataclass
    class Config:
        size: int = 10

        @classmethod
        def quick(cls):
            return cls(size=1)

    def run(config, out_dir=None, progress=True):
        return {"size": config.size}

    mod = types.SimpleNamespace(Config=Config, PAPER={"size": 10}, run=run, **attrs)
    if done is not None:
        mod.finished = lambda config: done and config == Config()
    return mod


def test_reproduce_quick_loads_a_finished_full_sweep_and_says_so(tmp_path, monkeypatch):
    """--quick runs the quick Config, except for a sweep whose full grid is all on disk (nothing to train)."""
    from minimal import reproduce as R

    fake = _fake_experiment
    monkeypatch.setattr(R, "experiments", lambda work: {"plain": fake(None), "todo": fake(False), "done": fake(True)})
    res = R.reproduce("zucchet", quick=True, out_dir=tmp_path, progress=False)
    assert {k: (v["metrics"]["size"], v["mode"]) for k, v in res.items()} == {
        "plain": (1, "quick"), "todo": (1, "quick"), "done": (10, "full, all runs on disk")}
    assert "| done | wall time (s) | 0.0 | full, all runs on disk |" in (tmp_path / "results.md").read_text()
    res = R.reproduce("zucchet", quick=False, out_dir=tmp_path, progress=False)
    assert {v["mode"] for v in res.values()} == {"full"}


def test_reproduce_full_writes_the_metrics_of_modules_that_ask(tmp_path, monkeypatch):
    """A full run writes data/WORK/NAME_full.json for modules with SAVE_METRICS (the notebooks load it)."""
    import json

    from minimal import data, reproduce as R

    saving, silent = _fake_experiment(SAVE_METRICS=True), _fake_experiment()
    monkeypatch.setattr(R, "experiments", lambda work: {"saving": saving, "silent": silent})
    monkeypatch.setattr(data, "DATA_ROOT", tmp_path / "data")   # the repository's data/, whatever the cwd
    monkeypatch.chdir(tmp_path)
    R.reproduce("gril", quick=True, out_dir=tmp_path / "out", progress=False)
    assert not (tmp_path / "data").exists()
    R.reproduce("gril", quick=False, out_dir=tmp_path / "out", progress=False)
    assert json.loads((tmp_path / "data" / "gril" / "saving_full.json").read_text()) == {"size": 10}
    assert not (tmp_path / "data" / "gril" / "silent_full.json").exists()
