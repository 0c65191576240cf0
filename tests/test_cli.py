"""The command line: `python -m minimal check` reports every cell and fails loudly on errors."""
import subprocess
import sys

import pytest
from _fakes import fake_experiment

from minimal.__main__ import main
from minimal import gradcheck


def test_check_one_cell_prints_a_passing_row(capsys):
    assert main(["check", "--only", "linear", "--no-scans"]) == 0
    out = capsys.readouterr().out
    assert "linear/" in out and "pass" in out and "FAIL" not in out


def test_check_unknown_cell_exits_with_message(capsys):
    assert main(["check", "--only", "nope", "--no-scans"]) == 2
    assert capsys.readouterr().err.startswith("error: --only must be one of ")
    assert main(["check", "--only", "linear", "--no-scans", "--seed", "-1"]) == 2
    assert capsys.readouterr().err.startswith("error: --seed must be an integer >= 0")


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
    err = capsys.readouterr().err   # after the one line that says what check is doing
    assert err.splitlines()[-1] == "error: x must be a numpy.ndarray, got NoneType" and "Traceback" not in err


def test_bench_window_runs_the_cpu_benchmark_by_default(monkeypatch, capsys):
    from minimal.bench import kernels as bench

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
    assert "WORK must be one of ['all', 'gril', 'kernel', 'minrnn', 'zucchet']" in capsys.readouterr().err
    assert main(["reproduce", "al"]) == 2
    assert "'all'" in capsys.readouterr().err
    assert main(["reproduce", "zucchet", "--only", "nope"]) == 2
    assert "error: --only must name experiments" in capsys.readouterr().err


def test_errors_name_the_flag_the_user_typed(capsys):
    # one wording: "<flag> must ..." for --only, --seed, --size, --repeats and --out alike
    assert main(["bench", "scan", "--size", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --size must be an integer >= 2")
    assert main(["bench", "train", "--repeats", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --repeats must be")


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
    assert fd.tolerance == gradcheck.TOLERANCE and fd.passed and fd.max_rel_error > 0, fd


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


def test_reproduce_quick_loads_a_finished_full_sweep_and_says_so(tmp_path, monkeypatch):
    """--quick runs the quick Config, except for a sweep whose full grid is all on disk (nothing to train)."""
    from minimal.reproduce import work as R

    fake = fake_experiment
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"plain": fake(None), "todo": fake(False), "done": fake(True)})
    res = R.reproduce("zucchet", quick=True, out_dir=tmp_path, progress=False)
    assert {k: (v["metrics"]["size"], v["mode"]) for k, v in res.items()} == {
        "plain": (1, "quick"), "todo": (1, "quick"), "done": (10, "full, all runs on disk")}
    assert "| done | size | 10 | 10 | matches | ±5% / ±25% | full, all runs on disk |" in (tmp_path / "results.md").read_text()
    assert "## done (full, all runs on disk)" in (tmp_path / "measurements.md").read_text()
    res = R.reproduce("zucchet", quick=False, out_dir=tmp_path, progress=False)
    assert {v["mode"] for v in res.values()} == {"full"}


def test_reproduce_full_writes_the_metrics_of_modules_that_ask(tmp_path, monkeypatch):
    """A full run writes data/WORK/NAME_full.json for modules with SAVE_METRICS (the notebooks load it)."""
    import json

    from minimal import data
    from minimal.reproduce import work as R

    saving, silent = fake_experiment(SAVE_METRICS=True), fake_experiment()
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"saving": saving, "silent": silent})
    monkeypatch.setattr(data, "DATA_ROOT", tmp_path / "data")   # the repository's data/, whatever the cwd
    monkeypatch.chdir(tmp_path)
    R.reproduce("gril", quick=True, out_dir=tmp_path / "out", progress=False)
    assert not (tmp_path / "data").exists()
    R.reproduce("gril", quick=False, out_dir=tmp_path / "out", progress=False)
    assert json.loads((tmp_path / "data" / "gril" / "saving_full.json").read_text()) == {"size": 10}
    assert not (tmp_path / "data" / "gril" / "silent_full.json").exists()


def test_reproduce_kernel_says_the_work_is_its_notebook(capsys):
    assert main(["reproduce", "kernel"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the kernel work has nothing to reproduce") and "kernel_attention_is_an_rnn" in err


def test_bench_size_sets_the_time_steps_and_is_refused_with_quick(monkeypatch, capsys):
    from minimal.bench import kernels as bench

    calls = []
    monkeypatch.setattr(bench, "bench_window", lambda **kw: calls.append(kw) or [])
    monkeypatch.setattr(bench, "bench_scan", lambda **kw: calls.append(kw) or [])
    assert main(["bench", "window", "--size", "1025"]) == 0
    assert main(["bench", "scan", "--size", "512"]) == 0
    assert calls == [{"backend": "numba", "shape": (64, 1025, 10, 3, 1)}, {"backend": "numba", "shape": (64, 512, 256)}]
    assert "peak memory about" in capsys.readouterr().err
    assert main(["bench", "scan", "--size", "512", "--quick"]) == 2
    assert main(["bench", "scan", "--size", "0"]) == 2
    assert "--size must be an integer >= 2" in capsys.readouterr().err


def test_bench_cuda_without_a_gpu_names_the_cli_flag_not_a_library_backend(monkeypatch):
    from minimal.bench import kernels as bench
    from minimal.scan import checks as scan

    def no_gpu(name):
        raise ValueError("backend='cuda' needs a CUDA GPU, and none is available (numba finds no CUDA driver and "
                         "GPU). Use backend='numba' or 'numpy' on the CPU")

    monkeypatch.setattr(scan, "cuda_module", no_gpu)
    with pytest.raises(ValueError) as e:
        bench.bench_scan(backend="cuda")
    assert "--backend numba" in str(e.value) and "'numpy'" not in str(e.value)
    assert "numba finds no CUDA driver and GPU" in str(e.value)


def test_help_names_every_command():
    out = subprocess.run([sys.executable, "-m", "minimal", "--help"], capture_output=True, text=True).stdout
    assert out.startswith("usage: python -m minimal [-h] {check,bench,reproduce,course}")
    assert "{check,bench,reproduce,course} ..." in out


def test_help_shows_no_rest_markup_and_bench_help_describes_its_benchmarks():
    out = subprocess.run([sys.executable, "-m", "minimal", "--help"], capture_output=True, text=True).stdout
    assert "``" not in out
    bench = subprocess.run([sys.executable, "-m", "minimal", "bench", "--help"], capture_output=True, text=True).stdout
    for what in ("scan ", "window ", "step ", "train "):
        assert f"\n  {what}" in bench, what
