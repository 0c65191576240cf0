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
``<out_dir>/<name>-<hash>.json``, holding

    {"function": "pkg.module.fn", "config": {...}, "result": {...}, "seconds": wall time of the job}

Files are written by the client as jobs finish, atomically (temporary file + ``os.replace``), so a killed
sweep leaves only whole files, and a worker on another machine needs no shared file system. A re-run loads
the jobs whose file exists and computes only the rest (resume); with ``checkpoint_dir`` a long job also resumes
from its own last checkpoint (``fn(config, checkpoint_path=...)``). A job file that cannot be read as a record
(empty, truncated, garbage, a git merge conflict) counts as missing: the job is computed again and its file
rewritten, with a ``RuntimeWarning`` naming the file; so does a file whose record was computed for another job
(its function and config do not hash to the file's job key: another job's file copied over it). A job that
raises is not written (a re-run retries it); the others finish first, then ``run_sweep`` raises ``SweepError``
listing the failures.

Scheduling: ``scheduler=None`` starts a ``distributed.LocalCluster`` for the sweep (``n_workers`` worker
processes with ``threads_per_worker`` threads each; the default, one worker with one thread, suits these
~1-core machines), listening on 127.0.0.1 only, its dashboard included; ``scheduler="tcp://host:port"``
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
import hashlib
import inspect
import json
import math
import time
import warnings
from pathlib import Path
from typing import Callable, Optional, Sequence
from urllib.parse import urlsplit

import numpy as np
from tqdm import tqdm

from .io import write_json
from ..validate import InputError, check_config, check_positive_int

__all__ = ["Sweep", "SweepConfig", "run_sweep", "with_sweep_summary", "config_dict", "job_key", "job_path",
           "checkpoint_path", "all_on_disk", "load_records",
           "finite_or_nan", "check_scheduler", "SweepError", "SchedulerUnreachable",
           "SCHEDULER_PROTOCOLS"]

SCHEDULER_PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx", "inproc")  # dask's comm protocols


class SweepError(RuntimeError):
    """Some jobs of a sweep raised; ``failures`` maps each job's file name to the error text."""

    def __init__(self, failures):
        self.failures = dict(failures)
        lines = "\n".join(f"  {k}: {v}" for k, v in self.failures.items())
        super().__init__(f"{len(self.failures)} sweep job(s) failed (not written; a re-run retries them):\n{lines}")


def _plain(value):
    """JSON-ready copy: NumPy scalars/arrays to Python numbers/lists, tuples to lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise ValueError(f"config and results must hold plain values (numbers, strings, lists, dicts), "
                     f"got {type(value).__name__}: {value!r}")


def config_dict(config):
    """A config (dataclass or dict) as a dict of plain JSON values."""
    if not ((dataclasses.is_dataclass(config) and not isinstance(config, type)) or isinstance(config, dict)):
        raise ValueError(f"config must be a dataclass instance or a dict, got {type(config).__name__}")
    return _plain(config)


def _fn_name(fn):
    if not callable(fn):
        raise ValueError(f"fn must be a callable config -> dict, got {type(fn).__name__}")
    return f"{fn.__module__}.{fn.__qualname__}"


def _key(function, config):
    """The job key of a function's import path (a string) and a plain config dict."""
    text = json.dumps({"function": function, "config": config}, sort_keys=True, separators=(",", ":"),
                      allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def job_key(fn, config):
    """Stable 16-hex-digit hash of fn's import path and the config's values (key order does not matter)."""
    return _key(_fn_name(fn), config_dict(config))


def job_path(out_dir, fn, config, name=None):
    """``<out_dir>/<name>-<job_key>.json``; ``name`` defaults to fn's name."""
    key = job_key(fn, config)
    return Path(out_dir) / f"{name or fn.__name__}-{key}.json"


_OTHER_JOB = "computed for another job"     # how ``_read_record`` begins the why of a record that is not the job's


def _record_key(record):
    """The job key of the function and config a record says it was computed for (None if they do not hash)."""
    try:
        return _key(record["function"], config_dict(record["config"]))
    except (TypeError, ValueError):
        return None


def _short(value, n=120):
    text = json.dumps(value, sort_keys=True, allow_nan=True)
    return text if len(text) <= n else text[:n - 3] + "..."


def _read_record(path, key=None):
    """``(record, None)`` for a readable job file, ``(None, why)`` for a missing or unreadable one; with ``key``
    (the job key the file is for) also ``(None, why)`` for a record computed for another job: one whose function
    and config do not hash to ``key`` (a job file copied over another's), ``why`` starting with ``_OTHER_JOB``."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as e:
        return None, f"{type(e).__name__}: {e}"
    try:
        record = json.loads(text)
    except ValueError as e:  # json.JSONDecodeError: empty, truncated, garbage, merge-conflict markers
        return None, f"not valid JSON ({e})"
    if not (isinstance(record, dict) and {"function", "config", "result", "seconds"} <= set(record)):
        return None, "not a job record (no function, config, result and seconds)"
    if key is not None and _record_key(record) != key:
        return None, (f"{_OTHER_JOB}: it holds {record['function']} with config {_short(record['config'])}, "
                      f"job key {_record_key(record)}, not {key}")
    return record, None


def _key_of(path):
    """The job key in a job file's name ``<name>-<job_key>.json`` (None for a name of another form)."""
    tail = Path(path).stem.rsplit("-", 1)[-1]
    return tail if len(tail) == 16 and all(c in "0123456789abcdef" for c in tail) else None


def _refusal(path, why, then):
    """The message for a job file that is not the job's record: unreadable, or computed for another job."""
    if why.startswith(_OTHER_JOB):
        return f"sweep job file {path} was {why}; {then}"
    return f"sweep job file {path} is unreadable ({why}); {then}"


def all_on_disk(fn, configs, out_dir, name=None):
    """True if every config's job file exists under ``out_dir`` and reads as a record: ``run_sweep`` would
    compute nothing."""
    return all(_read_record(job_path(out_dir, fn, c, name), job_key(fn, c))[0] is not None for c in configs)


def _write_json_atomic(path, record):
    write_json(path, record, sort_keys=True)   # keys sorted: a record's text depends on its content alone


def _timed(fn, config, checkpoint_path=None):
    """What a worker runs: the job (given ``checkpoint_path`` when there is one) and its wall time."""
    t0 = time.perf_counter()
    result = fn(config) if checkpoint_path is None else fn(config, checkpoint_path=checkpoint_path)
    return result, time.perf_counter() - t0


def checkpoint_path(checkpoint_dir, fn, config, name=None):
    """``<checkpoint_dir>/<name>-<job_key>.npz``: where a job of a sweep with ``checkpoint_dir`` keeps its
    checkpoint (and whatever it writes beside it, ``<name>-<job_key>.*``) until its job file is written."""
    return Path(checkpoint_dir) / (job_path(checkpoint_dir, fn, config, name).stem + ".npz")


def load_records(out_dir, name=None):
    """Every job record (dict) under ``out_dir`` (optionally only files named ``<name>-*.json``), sorted by file.

    Raises:
        ValueError: a file that is not a readable record, or (a file named ``<name>-<job_key>.json``) whose record
            was computed for another job, naming it (a re-run of the sweep recomputes it).
    """
    pattern = f"{name}-*.json" if name else "*.json"
    records = []
    for p in sorted(Path(out_dir).glob(pattern)):
        record, why = _read_record(p, _key_of(p))
        if record is None:
            raise InputError(_refusal(p, why, "re-run the sweep to recompute it, or delete the file"))
        records.append(record)
    return records


def check_scheduler(scheduler):
    """Return ``scheduler`` if it is None or looks like a dask scheduler address, ``protocol://host:port`` with
    a protocol of ``SCHEDULER_PROTOCOLS`` (``inproc://...`` takes any rest); connects to nothing, so a command
    line can check it before the experiments that come before the first sweep (a bad address otherwise failed
    only there, after ``connect_timeout`` seconds of retries).

    Raises:
        InputError: naming ``scheduler``, the expected form and what is wrong.
    """
    if scheduler is None:
        return None
    why = None
    if not isinstance(scheduler, str):
        why = f"not a string but {type(scheduler).__name__}"
    else:
        protocol, sep, rest = scheduler.partition("://")
        if not sep:
            why = "no protocol:// in front"
        elif protocol not in SCHEDULER_PROTOCOLS:
            why = f"unknown protocol {protocol!r} (dask knows {', '.join(SCHEDULER_PROTOCOLS)})"
        elif protocol == "inproc":
            why = None if rest else "nothing after inproc://"
        else:
            parts = urlsplit(f"{protocol}://{rest}")
            try:
                port = parts.port
            except ValueError:
                port = -1
            if not parts.hostname:
                why = "no host"
            elif port is None or port <= 0:
                why = "no port number (1-65535) after host:"
            elif parts.path or parts.query or parts.fragment:
                why = f"something after the port ({rest.split(':')[-1]!r})"
    if why is not None:
        raise InputError(f"scheduler must be None or an address like 'tcp://host:8786', got {scheduler!r}: {why}")
    return scheduler


class SchedulerUnreachable(InputError):
    """``scheduler`` did not answer as a dask scheduler within the connect timeout (nothing listens there, a
    dashboard's web port, a silent listener, a worker's address); the message names the address."""


_SCHEDULER_HINT = ("a scheduler address is the one `dask scheduler` prints as 'Scheduler at: tcp://HOST:PORT' "
                   "(port 8786 by default; 8787 is its dashboard, a web page)")


def probe_scheduler(scheduler, timeout):
    """Connect to ``scheduler``, do dask's handshake and ask its identity, all within ``timeout`` seconds.

    dask's own ``Client(address, timeout=...)`` bounds only the TCP connect: against a listener that accepts and
    never answers the protocol (a dashboard's HTTP port, a silent socket) it waited for the handshake forever.
    The probe runs on a fresh event loop in a thread of its own, so it works inside Jupyter's running loop too.

    Raises:
        SchedulerUnreachable: naming the address, the timeout, what went wrong and what an address looks like.
    """
    import asyncio
    import concurrent.futures

    from distributed.comm import connect
    from distributed.security import Security

    args = Security().get_connection_args("client")   # what Client uses by default (tls:// from dask's config)

    async def identity():
        comm = await connect(scheduler, timeout=timeout, **args)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sweep-probe")
    try:
        # wait_for bounds the whole probe; the outer result() is a backstop should the loop itself not return
        info = pool.submit(asyncio.run, asyncio.wait_for(identity(), timeout)).result(timeout + 5)
    except (asyncio.TimeoutError, TimeoutError, concurrent.futures.TimeoutError):
        why = f"no dask handshake within {timeout:g} s"
    except Exception as e:  # noqa: BLE001 - OSError (refused, unreachable), CommClosedError, a garbled reply ...
        why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'closed'}"
    else:
        kind = info.get("type") if isinstance(info, dict) else None
        why = None if kind == "Scheduler" else (f"it answered as a dask {kind}, not a scheduler" if kind else
                                                 f"it answered {str(info)[:80]!r}, not as a dask scheduler")
    finally:
        pool.shutdown(wait=False)
    if why is not None:
        raise SchedulerUnreachable(f"scheduler {scheduler!r} did not answer as a dask scheduler ({why}); "
                                   f"{_SCHEDULER_HINT}; connect_timeout sets how long to wait")


def _client(scheduler, n_workers, threads_per_worker, processes, connect_timeout=30.0):
    from distributed import Client, LocalCluster  # imported here: importing dask is slow, most users never sweep

    if scheduler is not None:
        if not check_scheduler(scheduler).startswith("inproc://"):   # inproc: this process's own, nothing to ask
            probe_scheduler(scheduler, connect_timeout)
        return Client(scheduler, timeout=connect_timeout), None
    # the scheduler, its dashboard and the workers listen on the loopback interface only: a library should not
    # open a port to the network on a user's machine unless asked (a running cluster is what ``scheduler`` is for)
    # (processes=False: in-process comms, no port but the dashboard's; any free port: sweeps may share a machine)
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=processes,
                           dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
                           **({"host": "127.0.0.1"} if processes else {}))
    return Client(cluster), cluster


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
    _fn_name(fn)
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
        record, why = _read_record(path, job_key(fn, config))
        if record is not None:
            records[path] = record
            continue
        if why != "missing":
            warnings.warn(_refusal(path, why, "computing the job again and rewriting the file"), RuntimeWarning,
                          stacklevel=2)
        todo[path] = config
    failures = {}
    if todo:
        client, cluster = _client(scheduler, n_workers, threads_per_worker, processes, float(connect_timeout))
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
                    record = {"function": _fn_name(fn), "config": config_dict(todo[path]),
                              "result": _plain(result), "seconds": float(seconds)}
                    _write_json_atomic(path, record)
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


def with_sweep_summary(result, records, seconds, out_dir=None):
    """Add the sweep's timing to ``result`` (a summary dict of ``records``) and write it to
    ``out_dir/summary.json`` when ``out_dir`` is given. Returns ``result``."""
    result["sweep_seconds"] = seconds
    result["job_seconds_total"] = float(sum(r["seconds"] for r in records))
    result["n_jobs"] = len(records)
    if out_dir is not None:
        write_json(Path(out_dir) / "summary.json", result)
    return result


def finite_or_nan(x):
    """float(x), with inf mapped to nan (JSON has neither; ``json`` writes NaN, which it reads back)."""
    x = float(x)
    return x if math.isfinite(x) else float("nan")


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
            why = _read_record(path, job_key(self.job, j))[1]
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
        record, why = _read_record(path, job_key(self.job, job_config))
        if why is not None and why.startswith(_OTHER_JOB):
            warnings.warn(_refusal(path, why, "not using it (a run of the sweep computes the job again and "
                                              "rewrites the file)"), RuntimeWarning, stacklevel=2)
        return record

    def run(self, config=None, out_dir=None, progress=True):
        """Run (or resume) the grid through dask and summarise it; returns the summary with the sweep's timing
        (``with_sweep_summary``), also written to ``out_dir/summary.json`` when out_dir is given."""
        config = self.Config() if config is None else config
        t0 = time.perf_counter()
        records = run_sweep(self.job, self.jobs(config), self.dir(config), name=self.name,
                            scheduler=config.scheduler, n_workers=config.n_workers, processes=config.processes,
                            progress=progress, desc=self.desc,
                            connect_timeout=getattr(config, "connect_timeout", 30.0),
                            checkpoint_dir=self.checkpoint_folder() if self.checkpoints else None)
        takes_config = len(inspect.signature(self.summarise).parameters) > 1
        result = self.summarise(records, config) if takes_config else self.summarise(records)
        return with_sweep_summary(result, records, time.perf_counter() - t0, out_dir)
