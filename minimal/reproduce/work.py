"""`python -m minimal reproduce WORK`: run a work's experiments, write a results table and figures.

For each experiment module (see ``minimal.experiments``) the quick or full ``Config`` is run and every metric
that has a paper value is put side by side with it. A sweep whose full grid is already on disk (its module's
``finished(Config())``) is loaded in full even with ``quick``, since that trains nothing; if its full grid is all
there but some files are damaged (a merge conflict, a truncated file), a warning names each one and the full
grid runs, recomputing those jobs alone at the committed config, instead of silently training the quick grid
(whose job files never go into the committed folder: ``minimal.run.sweep.Sweep.dir``). Writes
``OUT/results.md``, ``OUT/results.json`` and the experiments' PNG figures; a full run also rewrites the trained
weights ``data/<work>/<name>_full.npz`` that the notebooks load (for experiments whose ``run`` takes
``save_weights_path``) and, for modules that set ``SAVE_METRICS = True``, their metrics
``data/<work>/<name>_full.json`` (notebooks load those numbers instead of retraining; where that file is the
weights' JSON sidecar, ``minimal.run.io``, the metrics are added to it and its config and array list kept). Both go to
the repository's ``data/`` (``minimal.data.data_path``), whatever the current folder. Every JSON goes through
``minimal.run.io.write_json``.

``overrides`` (the command line's ``--set KEY=VALUE ...``, ``minimal.run.overrides``) change Config fields on top
of the quick or full variant; each experiment's entry records its overrides and the config that ran, and the
page lists them (``minimal.run.report``), so a reader sees which runs were not the default.

Each experiment's entry goes into ``OUT/results.json`` as soon as it finishes, the one file that holds a run's
metrics (experiments return theirs and write none; their folders ``OUT/NAME/`` hold figures and checkpoints): the
file is read, the entry replaced and the file rewritten under a lock on the folder ``OUT`` itself (no lock file is
left behind), so that ``--only A`` then ``--only B`` into one folder keeps both, and runs sharing a folder at the
same time lose none of each other's results. ``results.md`` is rebuilt from it at the end.
"""
from __future__ import annotations

import dataclasses
import fcntl
import inspect
import json
import os
import time
from pathlib import Path

from ..run import io
from ..run import report
from ..run import overrides as overrides_
from ..data import data_path
from .. import experiments as registry  # registry.experiments(work): looked up at call time (tests replace it)
from ..experiments import notes
from ..run.job_files import job_key
from ..run.scheduler import check_scheduler
from ..validate import InputError


def reproduce(work, quick=True, only=None, out_dir=None, progress=True, scheduler=None, connect_timeout=None,
              overrides=None):
    """Run ``work``'s experiments (all, or those in ``only``); ``scheduler`` is a dask scheduler address
    (``tcp://host:port``) for the experiments that sweep, None for a LocalCluster; ``connect_timeout`` (seconds,
    None: the sweep's default, 30) how long it has to answer as one. The address's format is checked first,
    before any experiment runs (a bad one otherwise failed only at the first sweep).

    ``overrides``: {Config field: value, or its text as typed after ``--set``} applied on top of each selected
    experiment's quick or full Config, where its Config has the field (``minimal.run.overrides.plan``: every key and
    value is checked before any experiment runs; a key that no selected experiment has is an error). An
    experiment with overrides runs the variant asked for (never the committed full grid loaded in its place);
    its sweep's job files go to the per-user cache (``Sweep.quick_folder``) unless its grid is the committed one
    or ``sweep_dir`` is set, and a full run of it writes no weights or metrics under ``data/`` (the notebooks
    load those). The entry of each experiment records its ``overrides`` and the ``config`` that ran."""
    check_scheduler(scheduler)
    mods = every = registry.experiments(work)
    if only:
        unknown = sorted(set(only) - set(mods))
        if unknown:
            raise InputError(f"only must name experiments of {work!r} {sorted(mods)}, got {unknown}")
        mods = {k: v for k, v in mods.items() if k in only}
    sets = plan_overrides(work, mods, quick, overrides)
    out = Path(out_dir or f"results/{work}")
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, mod in mods.items():
        config, mode = (mod.Config.quick(), "quick") if quick else (mod.Config(), "full")
        if sets[name]:
            config = _off_committed(mod, overrides_.apply(config, sets[name], f"{work}/{name}"))
        elif quick and hasattr(mod, "finished") and mod.finished(mod.Config()):
            # a sweep whose full grid is all on disk costs nothing to load: report it instead of the quick grid
            config, mode = mod.Config(), "full, all runs on disk"
        elif quick and getattr(mod, "SWEEP", None) is not None:
            damaged, missing = mod.SWEEP.unreadable(mod.Config())
            for path in damaged:
                print(f"warning: sweep job file {path} is unreadable (damaged: truncated, garbage or a merge "
                      f"conflict)" + ("; recomputing that job alone at the committed grid's config" if not missing
                                      else "; the full grid is incomplete, so the quick grid runs instead"), flush=True)
            if damaged and not missing:
                # every other job of the committed grid is on disk: load them, recompute only the damaged ones
                # (run_sweep rewrites their files), rather than silently training another grid
                config, mode = mod.Config(), f"full, all runs on disk but {len(damaged)} damaged, recomputed"
        if scheduler is not None and hasattr(config, "scheduler"):
            config = dataclasses.replace(config, scheduler=scheduler)
        if connect_timeout is not None and hasattr(config, "connect_timeout"):
            config = dataclasses.replace(config, connect_timeout=connect_timeout)
        print(f"== {work}/{name} ({mode}" + (f", --set {overrides_.describe(sets[name])}" if sets[name] else "")
              + ")", flush=True)
        t0 = time.perf_counter()
        kw = {}
        if not quick and sets[name]:
            print(f"   (--set: data/{work}/{name}_full.* left as committed; this run's results are in {out / name})",
                  flush=True)
        elif not quick and "save_weights_path" in inspect.signature(mod.run).parameters:
            # full runs regenerate the trained weights that the notebooks load
            kw["save_weights_path"] = data_path(work, f"{name}_full.npz")   # <repo>/data, from any folder
        metrics = mod.run(config, out_dir=out / name, progress=progress, **kw)
        seconds = time.perf_counter() - t0
        if not quick and getattr(mod, "SAVE_METRICS", False) and not sets[name]:
            path = data_path(work, f"{name}_full.json")
            weights = kw.get("save_weights_path")
            if weights is not None and io.sidecar_path(weights) == path and path.is_file():
                io.update_meta(weights, metrics)   # the weights' sidecar: keep its config and array list
            else:
                io.write_json(path, metrics)
        figures = [str(p) for p in mod.plot(metrics, out / name)] if hasattr(mod, "plot") else []
        results[name] = {"metrics": metrics, "paper": dict(mod.PAPER), "seconds": seconds, "figures": figures,
                         "mode": mode, "overrides": sets[name], "config": _as_dict(config)}
        _merge(work, quick, out, results, every)
    counts = _merge(work, quick, out, results, every, markdown=True)
    print(f"== {work}: {report.summary(counts)}; page: {out / 'results.md'}", flush=True)
    return results


def plan_overrides(work, mods, quick, overrides):
    """{name: {key: typed value}} for the experiments ``mods`` ({name: module}) of ``work``: ``overrides`` checked
    against each one's quick (``quick``) or full Config before anything runs (``minimal.run.overrides.plan``)."""
    if not overrides:
        return {name: {} for name in mods}
    configs = {f"{work}/{name}": mod.Config.quick() if quick else mod.Config() for name, mod in mods.items()}
    typed = overrides_.plan(overrides, configs)
    return {name: typed[f"{work}/{name}"] for name in mods}


def _off_committed(mod, config):
    """``config`` with its sweep's job files out of the committed folder: a grid that --set changed (neither the
    quick grid nor the committed one) goes to the per-user cache ``Sweep.quick_folder()`` (job files are named
    by a hash of their job, so grids share it without mixing), unless ``sweep_dir`` names a folder."""
    sweep = getattr(mod, "SWEEP", None)
    if sweep is None or getattr(config, "sweep_dir", None) or sweep.is_quick(config):
        return config
    key = lambda c: sorted(job_key(sweep.job, j) for j in sweep.jobs(c))   # noqa: E731
    if key(config) == key(mod.Config()):
        return config
    return dataclasses.replace(config, sweep_dir=str(sweep.quick_folder()))


def _as_dict(config):
    try:
        return dataclasses.asdict(config)
    except TypeError:   # not a dataclass (a stand-in)
        return {}


def _merge(work, quick, out, results, every, markdown=False):
    """Put this run's ``results`` into ``out/results.json`` (and with ``markdown`` rebuild ``out/results.md`` and
    ``out/measurements.md``, returning the page's {verdict: count}), keeping the entries of the work's other
    experiments (``every``: the work's {name: module}) that an earlier run left there, under an exclusive lock on
    the folder ``out`` itself (``flock`` on its descriptor, so no lock file is left behind; an earlier version's
    empty ``out/.results.lock`` is removed): read, update and write happen under the lock, so runs sharing the
    folder lose none of each other's entries."""
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        stale = out / ".results.lock"
        if stale.is_file() and stale.stat().st_size == 0:
            stale.unlink()
        earlier = {}
        path = out / "results.json"
        if path.is_file():
            try:
                earlier = json.loads(path.read_text())
            except json.JSONDecodeError:
                print(f"warning: {path} is not valid JSON; its earlier entries are left out of results", flush=True)
            if not isinstance(earlier, dict):
                earlier = {}
        merged = {name: results[name] if name in results else earlier[name]
                  for name in every if name in results or name in earlier}
        io.write_json(path, merged)
        if not markdown:
            return None
        return report.write(work, quick, merged, {n: every[n] for n in merged}, out, pages=notes.pages(work, merged))
    finally:
        os.close(fd)   # closing the descriptor releases the lock
