"""Run a grid of experiment jobs through dask.distributed, one JSON file per finished job, resumable.

    from minimal.run.sweep import run_sweep
    records = run_sweep(my_experiment.run_one, [cfg_a, cfg_b, ...], out_dir="data/zucchet/sweeps/fig4")

An experiment that sweeps names its grid once, where its jobs and summary are defined, as a ``Sweep`` (a name,
a grid of jobs, a summary); its ``finished`` and ``run`` are the Sweep's:

    SWEEP = Sweep("arch", run_job, jobs, summarise, SWEEP_DIR / "architectures", Config, "architectures")
    finished, run = SWEEP.finished, SWEEP.run

A job is ``fn(config) -> dict`` (JSON-serialisable metrics). ``fn`` must be a module-level function (dask
pickles it to the workers); ``config`` a dataclass or a dict of plain values. Each job is named by a stable
hash of (fn's import path, config), so the same job always maps to the same file
``<out_dir>/<name>-<hash>.json`` (its format, keys and reading: ``minimal.run.job_files``).

Files are written by the client as jobs finish, atomically (temporary file + ``os.replace``), so a killed
sweep leaves only whole files, and a worker on another machine needs no shared file system. A re-run loads
the jobs whose file exists and computes only the rest (resume); with ``checkpoint_dir`` a long job also resumes
from its own last checkpoint (``fn(config, checkpoint_path=...)``). A job file that cannot be read as a record
(empty, truncated, garbage, a git merge conflict) counts as missing: the job is computed again and its file
rewritten, with a ``RuntimeWarning`` naming the file; so does a file whose record was computed for another job
(its function and config do not hash to the file's job key: another job's file copied over it). A job that
raises is not written (a re-run retries it); the others finish first, then ``run_sweep`` raises ``SweepError``
listing the failures.

Scheduling (``minimal.run.scheduler``): ``scheduler=None`` starts a ``distributed.LocalCluster`` for the sweep
(``n_workers`` worker processes with ``threads_per_worker`` threads each; the default, one worker with one thread,
suits these ~1-core machines), listening on 127.0.0.1 only, its dashboard included; ``scheduler="tcp://host:port"``
connects to a running cluster instead (workers there must be able to import ``minimal``), after asking it
dask's handshake within ``connect_timeout`` seconds (default 30): an address that does not answer as a
scheduler (its dashboard's port, a silent listener) raises ``SchedulerUnreachable`` naming it instead of
waiting forever. ``processes=False`` runs the workers as threads of this process (fast start-up; what the
tests use).

Committed grids: a ``Sweep``'s ``folder`` (under ``data/<work>/sweeps``) holds the committed job files. The
experiment's quick grid (``Config.quick()``) never writes there: its files go to ``Sweep.quick_folder()``, a
per-user cache, unless ``sweep_dir`` names a folder. ``Sweep.unreadable`` lists a grid's damaged and missing
files (``reproduce`` recomputes a damaged job of an otherwise complete committed grid, naming the file).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import math
import time
import warnings
from pathlib import Path
from typing import Callable, Optional, Sequence

from tqdm import tqdm

from .job_files import all_on_disk, checkpoint_path, config_dict, fn_name, job_key, job_path, plain, OTHER_JOB, \
    read_record, refusal, write_record
from .scheduler import check_scheduler, open_client
from ..validate import InputError, check_config, check_positive_int

__all__ = ["Sweep", "SweepConfig", "run_sweep", "with_sweep_summary", "SweepError"]


class SweepError(RuntimeError):
    """Some jobs of a sweep raised; ``failures`` maps each job's file name to the error text."""

    def __init__(self, failures):
        self.failures = dict(failures)
        lines = "\n".join(f"  {k}: {v}" for k, v in self.failures.items())
        super().__init__(f"{len(self.failures)} sweep job(s) failed (not written; a re-run retries them):\n{lines}")


def _timed(fn, config, checkpoint_path=None):
    """What a worker runs: the job (given ``checkpoint_path`` when there is one) and its wall time."""
    t0 = time.perf_counter()
    result = fn(config) if checkpoint_path is None else fn(config, checkpoint_path=checkpoint_path)
    return result, time.perf_counter() - t0


def run_sweep(fn: Callable, configs: Sequence, out_dir, *, name=None, scheduler=None, n_workers=1,
              threads_per_worker=1, processes=True, progress=True, desc="sweep", connect_timeout=30.0,
              checkpoint_dir=None):
    """Run ``fn(config)`` for every config not yet on disk; return all records in the order of ``configs``.

    Args:
        fn: module-level function config -> dict of JSON-serialisable metrics.
        configs: dataclass instances or dicts (duplicates are run once).
        out_dir: folder for the job files (created).
        name: file-name prefix (default fn's name).
        scheduler: None (a LocalCluster for this call, listening on 127.0.0.1 only, its dashboard too) or a
            running scheduler's address "tcp://host:port".
        n_workers, threads_per_worker, processes: the LocalCluster's shape (ignored with ``scheduler``).
        progress: show a tqdm bar over the jobs still to run. desc: its label.
        connect_timeout: seconds (> 0) that ``scheduler`` has to answer dask's handshake as a scheduler; only
            asked when there is a job to run.
        checkpoint_dir: None, or a folder: each job is called as ``fn(config, checkpoint_path=...)``
            (``checkpoint_path``), so a killed sweep resumes a long job from its last checkpoint, not only from
            the last finished job; a job's ``<name>-<job_key>.*`` files there are deleted once its job file is
            written.
    Returns:
        list of records ``{"function", "config", "result", "seconds"}``, one per config.
    Raises:
        SweepError: after every other job finished and was written, if some jobs raised.
        SchedulerUnreachable: ``scheduler`` did not answer as a dask scheduler within ``connect_timeout``.
        ValueError: a bad argument, naming it.
    """
    fn_name(fn)
    check_scheduler(scheduler)
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, (int, float)) \
            or not math.isfinite(connect_timeout) or connect_timeout <= 0:
        raise InputError(f"connect_timeout must be a finite number of seconds > 0, got {connect_timeout!r}")
    configs = list(configs)
    n_workers = check_positive_int("n_workers", n_workers)
    threads_per_worker = check_positive_int("threads_per_worker", threads_per_worker)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [job_path(out_dir, fn, c, name) for c in configs]
    records, todo = {}, {}
    for path, config in zip(paths, configs):
        if path in records or path in todo:
            continue
        record, why = read_record(path, job_key(fn, config))
        if record is not None:
            records[path] = record
            continue
        if why != "missing":
            warnings.warn(refusal(path, why, "computing the job again and rewriting the file"), RuntimeWarning,
                          stacklevel=2)
        todo[path] = config
    failures = {}
    if todo:
        client, cluster = open_client(scheduler, n_workers, threads_per_worker, processes, float(connect_timeout))
        try:
            from distributed import as_completed

            ckpts = {p: None if checkpoint_dir is None else checkpoint_path(checkpoint_dir, fn, c, name)
                     for p, c in todo.items()}
            for c in ckpts.values():
                if c is not None:
                    c.parent.mkdir(parents=True, exist_ok=True)
            futures = {client.submit(_timed, fn, c, ckpts[p], pure=False): p for p, c in todo.items()}
            bar = tqdm(total=len(futures), disable=not progress, desc=desc)
            for future in as_completed(futures):
                path = futures[future]
                try:
                    result, seconds = future.result()
                    record = {"function": fn_name(fn), "config": config_dict(todo[path]),
                              "result": plain(result), "seconds": float(seconds)}
                    write_record(path, record)
                    records[path] = record
                    if ckpts[path] is not None:            # the job is on disk: its checkpoint is not needed
                        for f in ckpts[path].parent.glob(ckpts[path].stem + ".*"):
                            f.unlink()
                except Exception as e:  # noqa: BLE001 - one failing job must not lose the others
                    failures[path.name] = f"{type(e).__name__}: {e}"
                bar.update(1)
            bar.close()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    if failures:
        raise SweepError(failures)
    # What was written, read back: a record goes through JSON (tuples become lists, NaN stays NaN) either way.
    return [json.loads(json.dumps(records[p], sort_keys=True)) for p in paths]


def with_sweep_summary(result, records, seconds):
    """Add the sweep's timing to ``result`` (a summary dict of ``records``) and return it."""
    result["sweep_seconds"] = seconds
    result["job_seconds_total"] = float(sum(r["seconds"] for r in records))
    result["n_jobs"] = len(records)
    return result


@dataclasses.dataclass(kw_only=True)
class SweepConfig:
    """Where a sweeping experiment's grid runs: the fields its ``Sweep`` reads besides ``n_workers`` (which each
    grid sets beside its own fields). An experiment's ``Config`` extends it; these fields are keyword-only, so
    the grid's own fields keep their positions. Every field of the subclass is checked by its own name, before
    any work (``validate.check_config``, rules from the defaults)."""
    scheduler: Optional[str] = None    # "tcp://host:port" to run on a running dask cluster; None: a LocalCluster
    processes: bool = True             # LocalCluster workers as processes (False: threads, as the tests run them)
    sweep_dir: Optional[str] = None    # the job files' folder; None: the Sweep's own, under data/<work>/sweeps
    connect_timeout: float = 30.0      # seconds a ``scheduler`` has to answer as a dask scheduler

    __post_init__ = check_config


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A sweeping experiment: a grid of jobs, run by ``run_sweep``, and the summary of their records.

    Fields:
        name: prefix of the job files, ``<folder>/<name>-<job_key>.json`` (part of every committed file's name).
        job: module-level function job config -> dict of metrics (one grid point; dask pickles it by name).
        jobs: ``jobs(config) -> [job config, ...]``, the grid of an experiment ``Config``.
        summarise: ``summarise(records)`` or ``summarise(records, config) -> dict``, the experiment's result.
        folder: where the job files go unless ``config.sweep_dir`` names another folder.
        Config: the experiment's config class; ``Config()`` (the paper grid) is used when config is None.
        desc: the progress bar's label.
        checkpoints: ``job`` takes ``checkpoint_path=`` and resumes from it: ``run`` passes ``run_sweep`` the
            folder ``checkpoint_folder()``.
    A ``Config`` is a ``SweepConfig`` with its grid's fields and ``n_workers`` (see ``run_sweep``).
    """
    name: str
    job: Callable
    jobs: Callable
    summarise: Callable
    folder: Path
    Config: type
    desc: str = "sweep"
    checkpoints: bool = False

    def is_quick(self, config):
        """True if ``config``'s grid is the experiment's quick grid (``Config.quick()``'s jobs, whatever the
        scheduler fields): a smoke run whose job files must not mix with the committed ones."""
        quick = getattr(self.Config, "quick", None)
        if quick is None:
            return False
        key = lambda jobs: sorted(job_key(self.job, j) for j in jobs)   # noqa: E731
        return key(self.jobs(config)) == key(self.jobs(quick()))

    def quick_folder(self):
        """Where the quick grid's job files go unless ``sweep_dir`` says: a per-user cache
        (``$XDG_CACHE_HOME`` or ``~/.cache``)/minimal/quick-sweeps/<name>, never the committed ``folder``."""
        import os

        cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        return Path(cache) / "minimal" / "quick-sweeps" / self.name

    def checkpoint_folder(self):
        """Where the jobs of a Sweep with ``checkpoints`` keep their checkpoints while they run: a per-user cache
        (``$XDG_CACHE_HOME`` or ``~/.cache``)/minimal/sweep-checkpoints/<name>, never a committed folder."""
        return self.quick_folder().parent.parent / "sweep-checkpoints" / self.name

    def dir(self, config):
        """The folder of ``config``'s job files: ``config.sweep_dir`` if set; else ``quick_folder()`` for the quick
        grid (``is_quick``: quick-run files never go into a committed sweep folder); else ``folder``."""
        if config.sweep_dir:
            return Path(config.sweep_dir)
        return self.quick_folder() if self.is_quick(config) else Path(self.folder)

    def unreadable(self, config=None):
        """``(damaged, missing)``: the job files of ``config``'s grid (default ``Config()``) that exist but do not
        read as records (truncated, garbage, a merge conflict) or hold another job's record, and those that do
        not exist."""
        config = self.Config() if config is None else config
        damaged, missing = [], []
        for j in self.jobs(config):
            path = job_path(self.dir(config), self.job, j, name=self.name)
            why = read_record(path, job_key(self.job, j))[1]
            if why is not None and path not in damaged and path not in missing:
                (missing if why == "missing" else damaged).append(path)
        return damaged, missing

    def finished(self, config=None):
        """True if every job of ``config``'s grid is on disk, so that ``run(config)`` trains nothing."""
        config = self.Config() if config is None else config
        return all_on_disk(self.job, self.jobs(config), self.dir(config), name=self.name)

    def record(self, job_config, config=None):
        """The record of one job if its file is on disk and readable (in ``config``'s folder), else None. A file
        that holds another job's record (its function and config are not ``job_config``'s) is refused: None, with
        a ``RuntimeWarning`` naming the file (``run`` computes the job again and rewrites it)."""
        folder = self.dir(self.Config() if config is None else config)
        path = job_path(folder, self.job, job_config, name=self.name)
        record, why = read_record(path, job_key(self.job, job_config))
        if why is not None and why.startswith(OTHER_JOB):
            warnings.warn(refusal(path, why, "not using it (a run of the sweep computes the job again and "
                                              "rewrites the file)"), RuntimeWarning, stacklevel=2)
        return record

    def run(self, config=None, out_dir=None, progress=True):
        """Run (or resume) the grid through dask and summarise it; returns the summary with the sweep's timing
        (``with_sweep_summary``). ``out_dir`` is the experiment protocol's folder (``reproduce`` passes it to every
        ``run``); a sweep writes nothing there: its job files go to the sweep folder and its summary is returned, so
        that ``reproduce`` writes it once, into ``results.json``."""
        config = self.Config() if config is None else config
        t0 = time.perf_counter()
        records = run_sweep(self.job, self.jobs(config), self.dir(config), name=self.name,
                            scheduler=config.scheduler, n_workers=config.n_workers, processes=config.processes,
                            progress=progress, desc=self.desc,
                            connect_timeout=getattr(config, "connect_timeout", 30.0),
                            checkpoint_dir=self.checkpoint_folder() if self.checkpoints else None)
        takes_config = len(inspect.signature(self.summarise).parameters) > 1
        result = self.summarise(records, config) if takes_config else self.summarise(records)
        return with_sweep_summary(result, records, time.perf_counter() - t0)
