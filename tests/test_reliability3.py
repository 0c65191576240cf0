"""Hostile-user checks, round 3 (issue 32), beside tests/test_reliability.py: one section per finding. Sweeps that
never hang or silently retrain (a scheduler address that is not one, a damaged committed job file, the dashboard's
interface), compiled paths that refuse what they cannot compute, generation that refuses bad token ids and takes a
seed, and command lines that name the broken file or argument."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


# --- 3. an empty batch through softmax attention with an output projection --------------------------------------

@pytest.mark.parametrize("sizes", [dict(D=4), dict(D=4, D_k=2, D_v=4, D_out=3)], ids=["square", "rectangular"])
@pytest.mark.parametrize("n_heads", [1, 2])
@pytest.mark.parametrize("W_O", [True, False], ids=["W_O", "no-W_O"])
def test_softmax_attention_runs_an_empty_batch_with_or_without_W_O(sizes, n_heads, W_O):
    from minimal.cells import softmax_attention as S

    sizes = sizes if W_O else {k: v for k, v in sizes.items() if k != "D_out"}
    params = S.init(np.random.default_rng(0), output_projection=W_O, **sizes)
    y, cache = S.forward(params, np.zeros((0, 5, 4)), n_heads=n_heads)
    dx, grads = S.backward(params, cache, np.zeros_like(y))
    assert y.shape[:2] == (0, 5) and dx.shape == (0, 5, 4)
    assert sorted(grads) == sorted(params)
    assert all(grads[k].shape == params[k].shape and not grads[k].any() for k in params)


# --- 5, 6. generation: bad token ids are refused by name in every model; rng takes a seed -----------------------

@pytest.fixture(scope="module")
def tiny_lms():
    from minimal.experiments.minrnn import shakespeare_model as M
    return M, {k: M.init_lm(np.random.default_rng(3), k, 5, 8, 1) for k in M.KINDS}


@pytest.mark.parametrize("kind", ["mingru", "minlstm", "attention", "mingru_vanilla", "minlstm_vanilla"])
@pytest.mark.parametrize("tokens, what", [(np.array([-1]), "tokens must hold ids in [0, V = 5), got values in [-1"),
                                          (np.array([5]), "tokens must hold ids in [0, V = 5), got values in [5"),
                                          (np.array([1.0]), "tokens must have an integer dtype, got float64"),
                                          (np.array([[1]]), "tokens must have shape (B)")],
                         ids=["minus-one", "V", "float", "2-d"])
def test_step_logits_refuses_a_token_id_outside_the_vocabulary_in_every_model(tiny_lms, kind, tokens, what):
    M, params = tiny_lms
    with pytest.raises(ValueError) as e:
        M.step_logits(params[kind], None, tokens, kind)
    assert str(e.value).startswith(what)
    z, _ = M.step_logits(params[kind], None, np.array([4, 0]), kind)    # the last id and the first still work
    assert z.shape == (2, 5)


@pytest.mark.parametrize("kind", ["mingru", "attention"])
def test_generate_takes_a_seed_as_train_does_and_refuses_other_rngs_by_name(tiny_lms, kind):
    M, params = tiny_lms
    by_seed = M.generate(params[kind], kind, np.array([1, 2]), 5, 0)
    by_generator = M.generate(params[kind], kind, np.array([1, 2]), 5, np.random.default_rng(0))
    assert by_seed.tolist() == by_generator.tolist()
    for bad in (-1, 1.5, "0", True):
        with pytest.raises(ValueError, match=r"^rng must be a numpy.random.Generator or a seed \(int >= 0\), got"):
            M.generate(params[kind], kind, np.array([1]), 3, bad)
    assert M.generate(params[kind], kind, np.array([1]), 3, None, temperature=0).shape == (3,)   # greedy: no rng


# --- 7, 8. `course student` names the notebook (and the cell) it cannot convert ---------------------------------

@pytest.fixture
def notebooks_copy(tmp_path, monkeypatch):
    """A copy of notebooks/ that `course student` reads instead of the committed one."""
    from minimal.course import build as course

    src = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", src, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    monkeypatch.setattr(course, "NOTEBOOKS", src)
    return src


def test_course_student_names_the_notebook_with_a_merge_conflict(notebooks_copy, tmp_path, capsys):
    from minimal.__main__ import main

    broken = notebooks_copy / "minrnn_c_selective_copy.ipynb"
    lines = broken.read_text().splitlines(keepends=True)
    lines[40:41] = ["<<<<<<< HEAD\n", lines[40], "=======\n", lines[40], ">>>>>>> other-branch\n"]
    broken.write_text("".join(lines))
    assert main(["course", "student", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: notebook ")
    assert f"{str(broken)!r} holds a git merge conflict (a '<<<<<<<' marker at line 41)" in err


def test_course_student_names_the_notebook_and_cell_missing_an_end_solution(notebooks_copy, tmp_path, capsys):
    import nbformat
    from minimal.__main__ import main

    broken = notebooks_copy / "gril_b_constructions.ipynb"
    nb = nbformat.read(broken, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if "### END SOLUTION" in c.source)
    nb.cells[i].source = nb.cells[i].source.replace("### END SOLUTION", "")
    nbformat.write(nb, broken)
    assert main(["course", "student", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: notebook {str(broken)!r}: cell {i} (code, ")
    assert "'### BEGIN SOLUTION' without '### END SOLUTION'" in err


def test_course_tidy_of_a_missing_notebook_is_a_one_line_error(tmp_path, capsys):
    from minimal.__main__ import main

    assert main(["course", "tidy", "--check", "nope.ipynb"]) == 2
    err = capsys.readouterr().err
    assert err == "error: NOTEBOOK must be a notebook file (.ipynb) that exists, got 'nope.ipynb'\n"
    (tmp_path / "bad.ipynb").write_text('{"cells": [')
    assert main(["course", "tidy", "--check", str(tmp_path / "bad.ipynb")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: notebook {str(tmp_path / 'bad.ipynb')!r} is not a readable notebook (")
    assert err.count("\n") == 1


# --- 10. `bench train --repeats 0` ----------------------------------------------------------------------------

@pytest.mark.parametrize("repeats", ["0", "-1"])
def test_bench_train_refuses_zero_or_negative_repeats(monkeypatch, capsys, repeats):
    from minimal.bench import train as bench_train
    from minimal.__main__ import main

    monkeypatch.setattr(bench_train, "bench_train", lambda **kw: pytest.fail("the benchmark ran"))
    assert main(["bench", "train", "--quick", "--no-anchors", "--repeats", repeats]) == 2
    assert capsys.readouterr().err == f"error: --repeats must be an integer >= 1, got {repeats}\n"


# --- 4. float16: one rule for every compiled path, refused by name at the input checks --------------------------

def _registry_examples():
    from minimal.cells import REGISTRY
    rng = np.random.default_rng(0)
    for name, mod in sorted(REGISTRY.items()):
        for ex in mod.examples(rng):
            yield pytest.param(mod, ex, id=f"{name}-{ex.name}")


def _as16(tree):
    if isinstance(tree, np.ndarray) and tree.dtype.kind == "f":
        return tree.astype(np.float16)
    if isinstance(tree, dict):
        return {k: _as16(v) for k, v in tree.items()}
    return tree


@pytest.mark.parametrize("mod, ex", list(_registry_examples()))
def test_every_cell_and_layer_refuses_float16_by_name_before_any_kernel(mod, ex):
    """float16 passed the checks and then crashed inside Numba (LayerNorm, attention, the embedding's backward) with
    ``NotImplementedError: float16``: every cell and layer now refuses it at its input checks, naming the array."""
    params, x, kw = _as16(ex.params), _as16(ex.x), _as16(ex.kwargs)
    if not any(isinstance(v, np.ndarray) and v.dtype == np.float16 for v in (*params.values(), x, *kw.values())):
        pytest.skip("no float array to make float16")
    with pytest.raises(ValueError, match=r"^[\w.]+ must be float32 or float64 \(.*\), got float16"):
        mod.forward(params, x, **kw)


def test_adamw_refuses_float16_params_by_name_as_the_scan_does():
    from minimal import scan
    from minimal.optim import adamw_init, adamw_step

    params = {"W": np.ones((3, 2), np.float16)}
    with pytest.raises(ValueError, match=r"^params\['W'\] must be float32 or float64 \(.*\), got float16"):
        adamw_step(params, {"W": np.ones((3, 2), np.float16)}, adamw_init(params), lr=1e-3)
    a = np.full((1, 4, 2), 0.5, np.float16)
    with pytest.raises(ValueError, match=r"^a must be float32 or float64"):
        scan.linear_scan(a, a)


# --- 1. a scheduler address that does not answer the dask protocol; the dashboard's interface --------------------
# A real scheduler and worker, each its own process (the `dask scheduler` / `dask worker` command lines, run as
# `python -m distributed.cli...` with this interpreter), on 127.0.0.1; started once for the section, each wait
# bounded, both stopped by pid.

def cube_job(config):
    """A sweep job the worker imports from this file (PYTHONPATH carries tests/)."""
    return {"cube": config["a"] ** 3, "pid": os.getpid()}


def listening_job(config):
    """The addresses that the sweep's process tree (the test's process and its children, less the pids in
    ``config["others"]``, started before the sweep) listens on."""
    import psutil

    root = psutil.Process(config["root"])
    found = set()
    for proc in [root, *root.children(recursive=True)]:
        if proc.pid in config["others"]:
            continue
        try:
            found |= {c.laddr.ip for c in proc.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        except psutil.Error:
            pass
    return {"addresses": sorted(found)}


def _wait_for(what, ready, proc, seconds):
    deadline = time.monotonic() + seconds
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode} before it was ready")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} was not ready within {seconds} s")
        time.sleep(0.2)


def _stop(proc):
    """SIGTERM, then SIGKILL after 10 s, by the pid we started (the worker's session: its nanny's children too)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """{"scheduler": "tcp://127.0.0.1:PORT", "dashboard": port, "worker_pid": pid, "worker": its address}: a
    `dask scheduler` and a `dask worker` (no nanny, one thread), separate processes on 127.0.0.1."""
    folder = tmp_path_factory.mktemp("dask")
    info_file = folder / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    log = open(folder / "scheduler.log", "w")
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--dashboard-address", "127.0.0.1:0", "--scheduler-file",
                                  str(info_file)], stdout=log, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
    worker, wlog = None, None
    try:
        _wait_for("dask scheduler", lambda: info_file.is_file() and info_file.stat().st_size > 0, scheduler, 60)
        info = json.loads(info_file.read_text())
        wlog = open(folder / "worker.log", "w")   # (--no-dashboard would still serve HTTP on 0.0.0.0)
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                                   str(info_file), "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny",
                                   "--dashboard-address", "127.0.0.1:0"], stdout=wlog, stderr=subprocess.STDOUT,
                                  env=env, start_new_session=True)
        _wait_for("dask worker", lambda: "Registered to" in (folder / "worker.log").read_text(), worker, 60)
        worker_at = re.search(r"Start worker at:\s+(\S+)", (folder / "worker.log").read_text()).group(1)
        yield {"scheduler": info["address"], "dashboard": info["services"]["dashboard"], "worker_pid": worker.pid,
               "worker": worker_at}
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                _stop(proc)
        for f in (wlog, log):
            if f is not None:
                f.close()


def _bounded(call, seconds):
    """Run ``call()`` in a daemon thread; return ("raised", exception) / ("returned", value), or fail the test if
    it is still running after ``seconds`` (the hang the bug was)."""
    import threading

    out = {}

    def target():
        try:
            out["returned"] = call()
        except BaseException as e:  # noqa: BLE001
            out["raised"] = e
    thread = threading.Thread(target=target, daemon=True)
    t0 = time.monotonic()
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still waiting after {seconds} s")
    return (*out.items(),)[0] + (time.monotonic() - t0,)


def test_a_sweep_on_a_real_scheduler_and_worker_gives_the_local_results(dask_cluster, tmp_path):
    from minimal.run.sweep import run_sweep

    configs = [{"a": a} for a in (2, 3, 5)]
    kind, records, _ = _bounded(lambda: run_sweep(cube_job, configs, tmp_path / "remote", progress=False,
                                                  scheduler=dask_cluster["scheduler"], connect_timeout=10), 90)
    assert kind == "returned", records
    assert [r["result"]["cube"] for r in records] == [8, 27, 125]
    assert {r["result"]["pid"] for r in records} == {dask_cluster["worker_pid"]}   # ran in the worker process
    local = run_sweep(cube_job, configs, tmp_path / "local", progress=False, processes=False)
    assert [r["result"]["cube"] for r in local] == [8, 27, 125]


@pytest.mark.parametrize("listener", ["dashboard", "silent", "worker"])
def test_a_scheduler_address_that_is_not_a_dask_scheduler_fails_in_seconds_naming_it(dask_cluster, tmp_path,
                                                                                      listener):
    """The dashboard's port (8787 instead of 8786) of a live scheduler, and a socket that accepts and never
    answers, hung ``run_sweep`` forever; now they fail after connect_timeout with the address and the hint (and a
    worker's address, which answers dask's protocol, is named as a worker's)."""
    from minimal.run.scheduler import SchedulerUnreachable
    from minimal.run.sweep import run_sweep

    silent = socket.socket()
    try:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = dask_cluster["dashboard"] if listener == "dashboard" else silent.getsockname()[1]
        address = dask_cluster["worker"] if listener == "worker" else f"tcp://127.0.0.1:{port}"
        kind, error, seconds = _bounded(lambda: run_sweep(cube_job, [{"a": 1}], tmp_path, progress=False,
                                                          scheduler=address, connect_timeout=2), 40)
    finally:
        silent.close()
    assert kind == "raised" and isinstance(error, SchedulerUnreachable), error
    assert seconds < 30
    assert str(error).startswith(f"scheduler {address!r} did not answer as a dask scheduler (")
    assert "'Scheduler at: tcp://HOST:PORT' (port 8786 by default; 8787 is its dashboard" in str(error)
    if listener == "worker":
        assert "(it answered as a dask Worker, not a scheduler)" in str(error)
    assert not list(tmp_path.glob("*.json"))


def test_reproduce_with_the_dashboard_port_is_a_one_line_error_before_any_experiment(dask_cluster, tmp_path,
                                                                                      monkeypatch, capsys):
    """Through the command line: `reproduce ... --scheduler tcp://HOST:DASHBOARD` ends with `error: ...`, exit 2,
    in seconds and before any experiment runs (not at the first sweep, after the others have trained)."""
    from minimal.reproduce import work as R
    from minimal.__main__ import main

    monkeypatch.setattr(R.registry, "experiments", lambda work: pytest.fail("an experiment was looked up"))
    address = f"tcp://127.0.0.1:{dask_cluster['dashboard']}"
    kind, code, _ = _bounded(lambda: main(["reproduce", "gril", "--scheduler", address, "--connect-timeout", "2",
                                           "--out", str(tmp_path / "out"), "--no-progress"]), 40)
    assert (kind, code) == ("returned", 2)
    err = capsys.readouterr().err
    assert err.startswith(f"error: scheduler {address!r} did not answer as a dask scheduler (") and err.count("\n") == 1
    for bad, what in ((["--connect-timeout", "0", "--scheduler", address], "--connect-timeout must be a finite"),
                      (["--connect-timeout", "5"], "--connect-timeout goes with --scheduler")):
        assert main(["reproduce", "gril", *bad]) == 2
        assert capsys.readouterr().err.startswith(f"error: {what}")


def test_a_local_sweep_listens_on_127_0_0_1_only_dashboard_included(tmp_path):
    """The LocalCluster of a sweep served its dashboard on every interface (dashboard_address=":0")."""
    import psutil
    from minimal.run.sweep import run_sweep

    others = [p.pid for p in psutil.Process().children(recursive=True)]   # e.g. the dask_cluster fixture's
    for processes in (False, True):
        record, = run_sweep(listening_job, [{"root": os.getpid(), "processes": processes, "others": others}], tmp_path,
                            progress=False, processes=processes)
        addresses = record["result"]["addresses"]
        assert addresses and set(addresses) == {"127.0.0.1"}, (processes, addresses)


# --- 2. a damaged committed sweep file: named, that job alone recomputed at the committed config -----------------

def logged_job(config):
    """A sweep job that appends its ``a`` to $SWEEP_TEST_LOG (counts real calls)."""
    with open(os.environ["SWEEP_TEST_LOG"], "a") as f:
        f.write(f"{config['a']}:{config['steps']}\n")
    return {"value": config["a"] * config["steps"]}


@pytest.fixture
def committed_grid(tmp_path, monkeypatch):
    """A sweeping experiment (a real ``Sweep``) whose full grid, steps 1500 at a = 1..4, is all on disk in its
    'committed' folder; its quick grid is steps 300 at a = 1, 2. ``reproduce`` sees only this experiment."""
    import dataclasses
    import types

    from minimal.reproduce import work as R
    from minimal.run.sweep import Sweep, SweepConfig

    @dataclasses.dataclass
    class Config(SweepConfig):
        a_values: tuple = (1, 2, 3, 4)
        steps: int = 1500
        n_workers: int = 1
        processes: bool = False

        @classmethod
        def quick(cls):
            return cls(a_values=(1, 2), steps=300)

    grid = Sweep("grid", logged_job, lambda c: [{"a": a, "steps": c.steps} for a in c.a_values],
                 lambda records: {"values": [r["result"]["value"] for r in records]}, tmp_path / "committed", Config)
    monkeypatch.setenv("SWEEP_TEST_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    grid.run(Config(), progress=False)
    (tmp_path / "calls.log").write_text("")
    mod = types.SimpleNamespace(Config=Config, PAPER={}, run=grid.run, finished=grid.finished, SWEEP=grid)
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"grid": mod})
    return grid, Config


def test_a_damaged_committed_sweep_file_is_named_and_only_its_job_recomputed_at_the_committed_config(
        committed_grid, tmp_path, capsys):
    from minimal.reproduce import work as R
    from minimal.run.job_files import job_path

    grid, Config = committed_grid
    folder = tmp_path / "committed"
    before = sorted(p.name for p in folder.iterdir())
    damaged = job_path(folder, logged_job, {"a": 3, "steps": 1500}, name="grid")
    text = damaged.read_text()
    damaged.write_text("<<<<<<< HEAD\n" + text + "=======\n" + text + ">>>>>>> other\n")
    with pytest.warns(RuntimeWarning, match=f"sweep job file {damaged} is unreadable"):
        results = R.reproduce("gril", quick=True, out_dir=tmp_path / "out", progress=False)
    out = capsys.readouterr().out
    assert f"warning: sweep job file {damaged} is unreadable" in out
    assert "recomputing that job alone at the committed grid's config" in out
    assert "(quick)" not in out and "(full, all runs on disk but 1 damaged, recomputed)" in out
    assert (tmp_path / "calls.log").read_text().split() == ["3:1500"]             # that job alone, full config
    assert results["grid"]["metrics"]["values"] == [1500, 3000, 4500, 6000]
    assert sorted(p.name for p in folder.iterdir()) == before                     # no quick-run file written there
    assert json.loads(damaged.read_text())["result"] == {"value": 4500}           # rewritten whole


def test_a_quick_run_never_writes_into_the_committed_sweep_folder(committed_grid, tmp_path, capsys):
    from minimal.reproduce import work as R
    from minimal.run.job_files import job_path

    grid, Config = committed_grid
    folder = tmp_path / "committed"
    job_path(folder, logged_job, {"a": 4, "steps": 1500}, name="grid").unlink()   # the full grid is incomplete
    before = sorted(p.name for p in folder.iterdir())
    results = R.reproduce("gril", quick=True, out_dir=tmp_path / "out", progress=False)
    assert "== gril/grid (quick)" in capsys.readouterr().out
    assert results["grid"]["metrics"]["values"] == [300, 600]
    assert sorted(p.name for p in folder.iterdir()) == before
    assert len(list((tmp_path / "cache" / "minimal" / "quick-sweeps" / "grid").glob("grid-*.json"))) == 2


@pytest.mark.parametrize("module", ["zucchet.architectures", "zucchet.hidden_size", "zucchet.icl_seeds",
                                    "gril.ablations", "gril.comparison", "minrnn.selective_copy"])
def test_every_experiments_quick_grid_goes_outside_its_committed_sweep_folder(module):
    import importlib

    mod = importlib.import_module(f"minimal.experiments.{module}")
    assert mod.SWEEP.dir(mod.Config()) == Path(mod.SWEEP.folder)
    quick = mod.SWEEP.dir(mod.Config.quick())
    assert ROOT / "data" not in quick.resolve().parents and quick != Path(mod.SWEEP.folder)
