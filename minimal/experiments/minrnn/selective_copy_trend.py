"""Selective copying as the sequence length T grows: one and two minGRU layers in log space (the form the paper
trains) at T = 64, 128 and 256 (``lengths(depth)``), 3 seeds each, every other setting
that of ``selective_copy.Config()`` (16 data tokens, width D = 32, trained until no learning rate helps: the plateau
rule, cap 30,000 steps); and one and two layers at the paper's width D = 64 (App. C.2) at T = 64
(``lengths(depth, D=64)``).
Table 1 reports the paper's T = 4096 (App. C.3): 37.0 ± 2.3 % with one layer, 96.8 ± 3.2 % with two.

The grids, ``CONFIGS`` and ``CONFIGS_2`` ({T: Config}, one and two layers; ``config(T, depth=...)``): ``Config()``
with ``kinds=("mingru",)``, ``depths=(depth,)``, ``log_space=(True,)`` and the length T, so their jobs are those of
the command that trained them,

    python -m minimal reproduce minrnn --full --only selective_copy --set T=128 kinds=mingru depths=1 log_space=true

(``depths=2`` for two layers, ``D=64`` added for the paper's width; with
``sweep_dir=data/minrnn/sweeps/selective_copy`` added, the job files go to the committed folder); a job file is
named by a hash of its job (``minimal.run.job_files``), so any other field changed would name other files. At
T = 64 the jobs are three of ``Config()``'s 36 (for each depth), the committed Table 1 grid.

``records(T, depth=1, D=32)`` reads a length's job files and ``summary(depths=(1,), D=32)`` summarises every length
(``selective_copy_summary.summarise``: mean and std over the seeds, ddof = 0); a file that is missing, damaged or
holds another job's record is an ``InputError`` naming it and the command that makes it, never left out.

What they find (notebook ``minrnn_c_selective_copy``, section 4.4, asserts each number): one layer reaches
41.6 ± 2.3 % at T = 64 (seeds 43.09 / 38.28 / 43.31) and 35.2 ± 1.9 % at T = 128 (seeds 33.24 / 34.50 / 37.80);
every T = 128 run is below every T = 64 run; and 35.7 ± 1.2 % at T = 256 (seeds 36.27 / 36.85 / 33.97), within
the spreads of T = 128 and of Table 1's 37.0 ± 2.3 %. Two layers reach 95.8 ± 2.2 % at T = 64 (seeds 94.06 /
94.51 / 98.93), 95.1 ± 0.3 % at T = 128 (seeds 94.82 / 94.97 / 95.54) and 91.1 ± 4.9 % at T = 256 (seeds 85.57 /
90.37 / 97.49): 4.0 points below T = 128, within the two spreads, with two seeds below every T = 128 run and one
above them all, and 5.7 below Table 1's 96.8 ± 3.2; every two-layer run at D = 32 is more than 40 points above every
one-layer run at D = 32. At D = 64 and T = 64 one layer reaches 42.6 ± 0.7 % (seeds 41.95 / 43.55 /
42.33), within the spreads of D = 32's 41.6 ± 2.3 % and above Table 1's: of the two, the length (at D = 32), not
the width (at T = 64), brings one layer to the paper's level (3 seeds each; no other setting varied). Two layers at
D = 64 and T = 64 reach 88.1 ± 3.3 % (seeds 83.60 / 89.41 / 91.38), 7.7 points below D = 32's 95.8 ± 2.2 % with
every seed lower than the same seed at D = 32, and 8.7 below Table 1's 96.8 ± 3.2; still 40.1 points above every
one-layer run at D = 64 (the learning rate and budget of D = 32; whether others would close the gap: not measured).
"""
from __future__ import annotations

import dataclasses

from ...run.job_files import job_key, job_path, read_record
from ...validate import InputError
from . import selective_copy as S
from .selective_copy_summary import summarise

__all__ = ["LENGTHS", "DEPTHS", "WIDTHS", "CONFIGS", "CONFIGS_2", "lengths", "command", "config", "unreadable",
           "finished", "records", "summary"]

LENGTHS = (64, 128, 256)     # the sequence lengths trained at one depth or more (the paper: 4096)
DEPTHS = (1, 2)              # minGRU layers
WIDTHS = (32, 64)            # D: Config()'s, and the paper's (App. C.2)
_LENGTHS = {(1, 32): (64, 128, 256), (2, 32): (64, 128, 256), (1, 64): (64,), (2, 64): (64,)}   # of each (depth, D)


def lengths(depth=1, D=32):
    """The sequence lengths trained with ``depth`` layers of width ``D`` (an ``InputError`` for another depth or
    width); ``records`` reads their job files, or names those not committed yet and the command that trains them."""
    if depth not in DEPTHS:
        raise InputError(f"depth must be one of the depths trained {list(DEPTHS)}, got {depth!r}")
    if isinstance(D, bool) or not isinstance(D, int) or D not in WIDTHS:
        raise InputError(f"D must be one of the widths trained {list(WIDTHS)}, got {D!r}")
    return _LENGTHS[(depth, D)]


def config(T, sweep_dir=None, depth=1, D=32):
    """``Config()`` (Table 1's grid, trained until no learning rate helps) with ``depth`` log-space minGRU layers of
    width ``D`` at length ``T``; ``sweep_dir``: another folder for its job files (default: the committed one)."""
    return dataclasses.replace(S.Config(), T=T, D=D, kinds=("mingru",), depths=(depth,), log_space=(True,),
                               sweep_dir=sweep_dir)


CONFIGS = {T: config(T) for T in lengths(1)}                  # one layer
CONFIGS_2 = {T: config(T, depth=2) for T in lengths(2)}       # two layers


def command(T, depth=1, D=32):
    """The command that trains the runs of length ``T`` into the committed folder (run from the repository)."""
    width = "" if D == S.Config().D else f" D={D}"
    return (f"python -m minimal reproduce minrnn --full --only selective_copy --set T={T}{width} kinds=mingru "
            f"depths={depth} log_space=true sweep_dir=data/minrnn/sweeps/selective_copy")


def unreadable(T, sweep_dir=None, depth=1, D=32):
    """``[(path, why)]``: the job files of length ``T`` (``depth``, ``D``) that do not read as their job's record
    (``why``: "missing", damaged, or computed for another job; ``minimal.run.job_files.read_record``)."""
    c = config(T, sweep_dir, depth, D)
    out = []
    for job in S.jobs(c):
        path = job_path(S.SWEEP.dir(c), S.SWEEP.job, job, name=S.SWEEP.name)
        why = read_record(path, job_key(S.SWEEP.job, job))[1]
        if why is not None:
            out.append((path, why))
    return out


def finished(sweep_dir=None, depth=1, D=32):
    """True if every job file of every length of ``depth`` layers of width ``D`` (``lengths(depth, D)``) is on disk
    and readable."""
    return not any(unreadable(T, sweep_dir, depth, D) for T in lengths(depth, D))


def records(T, sweep_dir=None, depth=1, D=32):
    """The job records of length ``T`` (``depth``, ``D``), one per seed in seed order.

    Raises:
        InputError: ``T`` was not trained (``lengths``), or a job file is missing, damaged or holds another job's
            record: every such file named, with why and the command that makes the runs.
    """
    if T not in lengths(depth, D):
        raise InputError(f"T must be one of the lengths trained with {depth} layer(s) of width D = {D} "
                         f"{list(lengths(depth, D))}, got {T!r}")
    bad = unreadable(T, sweep_dir, depth, D)
    if bad:
        files = "; ".join(f"{p} ({why})" for p, why in bad)
        raise InputError(f"selective-copying trend, T = {T}, {depth} layer(s), D = {D}: {len(bad)} of "
                         f"{len(S.jobs(config(T, depth=depth, D=D)))} job files do not read: {files}. "
                         f"Train them with: {command(T, depth, D)}")
    c = config(T, sweep_dir, depth, D)
    return [read_record(job_path(S.SWEEP.dir(c), S.SWEEP.job, j, name=S.SWEEP.name), job_key(S.SWEEP.job, j))[0]
            for j in sorted(S.jobs(c), key=lambda j: j.seed)]


def summary(sweep_dir=None, depths=(1,), D=32):
    """{T: ``summarise`` of the records of every depth in ``depths`` (width ``D``)} for every T with runs of each of
    them: keys ``mingru_1`` (mean accuracy, %), ``mingru_1_std`` (ddof = 0), ``mingru_1_runs`` (per seed),
    ``mingru_1_steps_run``, ... and ``mingru_2...`` for two layers (``summarise``)."""
    Ts = [T for T in LENGTHS if all(T in lengths(d, D) for d in depths)]
    return {T: summarise([r for d in depths for r in records(T, sweep_dir, d, D)]) for T in Ts}
