"""Selective copying as the sequence length T grows: one minGRU layer in log space (the form the paper trains) at
T = 64 and T = 128, 3 seeds each, every other setting that of ``selective_copy.Config()`` (16 data tokens, width
D = 32, trained until no learning rate helps: the plateau rule, cap 30,000 steps). Table 1 reports one layer at
the paper's T = 4096 (App. C.3): 37.0 ± 2.3 %.

The grid, ``CONFIGS`` ({T: Config}): ``Config()`` with ``kinds=("mingru",)``, ``depths=(1,)``,
``log_space=(True,)`` and the length T, so its jobs are those of the command that trained them,

    python -m minimal reproduce minrnn --full --only selective_copy --set T=128 kinds=mingru depths=1 log_space=true

(with ``sweep_dir=data/minrnn/sweeps/selective_copy`` added, the job files go to the committed folder); a job file
is named by a hash of its job (``minimal.run.job_files``), so any other field changed would name other files. At
T = 64 the jobs are three of ``Config()``'s 36, the committed Table 1 grid.

``records(T)`` reads a length's job files and ``summary()`` summarises every length
(``selective_copy_summary.summarise``: mean and std over the seeds, ddof = 0); a file that is missing, damaged or
holds another job's record is an ``InputError`` naming it and the command that makes it, never left out.

What they find (notebook ``minrnn_c_selective_copy``, section 4.4, asserts each number): one layer reaches
41.6 ± 2.3 % at T = 64 (seeds 43.09 / 38.28 / 43.31) and 35.2 ± 1.9 % at T = 128 (seeds 33.24 / 34.50 / 37.80);
every T = 128 run is below every T = 64 run.
"""
from __future__ import annotations

import dataclasses

from ...run.job_files import job_key, job_path, read_record
from ...validate import InputError
from . import selective_copy as S
from .selective_copy_summary import summarise

__all__ = ["LENGTHS", "CONFIGS", "command", "config", "unreadable", "finished", "records", "summary"]

LENGTHS = (64, 128)     # the sequence lengths with committed runs (the paper: 4096)


def config(T, sweep_dir=None):
    """``Config()`` (Table 1's grid, trained until no learning rate helps) with one log-space minGRU layer at length
    ``T``; ``sweep_dir``: another folder for its job files (default: the committed one)."""
    return dataclasses.replace(S.Config(), T=T, kinds=("mingru",), depths=(1,), log_space=(True,), sweep_dir=sweep_dir)


CONFIGS = {T: config(T) for T in LENGTHS}


def command(T):
    """The command that trains the runs of length ``T`` into the committed folder (run from the repository)."""
    return (f"python -m minimal reproduce minrnn --full --only selective_copy --set T={T} kinds=mingru depths=1 "
            "log_space=true sweep_dir=data/minrnn/sweeps/selective_copy")


def unreadable(T, sweep_dir=None):
    """``[(path, why)]``: the job files of length ``T`` that do not read as their job's record (``why``:
    "missing", damaged, or computed for another job; ``minimal.run.job_files.read_record``)."""
    c = config(T, sweep_dir)
    out = []
    for job in S.jobs(c):
        path = job_path(S.SWEEP.dir(c), S.SWEEP.job, job, name=S.SWEEP.name)
        why = read_record(path, job_key(S.SWEEP.job, job))[1]
        if why is not None:
            out.append((path, why))
    return out


def finished(sweep_dir=None):
    """True if every job file of every length in ``LENGTHS`` is on disk and readable."""
    return not any(unreadable(T, sweep_dir) for T in LENGTHS)


def records(T, sweep_dir=None):
    """The job records of length ``T``, one per seed in seed order.

    Raises:
        InputError: ``T`` has no committed runs, or a job file is missing, damaged or holds another job's record:
            every such file named, with why and the command that makes the runs.
    """
    if T not in LENGTHS:
        raise InputError(f"T must be one of the lengths with committed runs {list(LENGTHS)}, got {T!r}")
    bad = unreadable(T, sweep_dir)
    if bad:
        files = "; ".join(f"{p} ({why})" for p, why in bad)
        raise InputError(f"selective-copying trend, T = {T}: {len(bad)} of {len(S.jobs(config(T)))} job files do not "
                         f"read: {files}. Train them with: {command(T)}")
    c = config(T, sweep_dir)
    return [read_record(job_path(S.SWEEP.dir(c), S.SWEEP.job, j, name=S.SWEEP.name), job_key(S.SWEEP.job, j))[0]
            for j in sorted(S.jobs(c), key=lambda j: j.seed)]


def summary(sweep_dir=None):
    """{T: ``summarise(records(T))``} for every T in ``LENGTHS``: keys ``mingru_1`` (mean accuracy, %),
    ``mingru_1_std`` (ddof = 0), ``mingru_1_runs`` (per seed), ``mingru_1_steps_run``, ... (``summarise``)."""
    return {T: summarise(records(T, sweep_dir)) for T in LENGTHS}
