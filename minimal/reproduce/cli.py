"""The ``reproduce`` command of ``python -m minimal``: its parser (``add_parser``, called by ``minimal.__main__``) and
its handler, which checks --scheduler, --connect-timeout and --out before any experiment runs, then runs
``reproduce`` (one work) or ``reproduce_all``."""
from __future__ import annotations

import sys

from ..validate import InputError, check_choice, check_out_dir
from ..run.overrides import parse_set

__all__ = ["add_parser"]


def add_parser(subparsers):
    """The ``reproduce`` sub-command, added to ``python -m minimal``'s ``subparsers``."""
    p = subparsers.add_parser("reproduce", help="run a work's experiments and compare with the paper")
    p.add_argument("work", metavar="WORK", help="zucchet, gril, minrnn, or all (each in turn, then an index page); the kernel "
                                "work is its notebook alone, notebooks/kernel_attention_is_an_rnn.ipynb")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="CPU-minutes configs (default)")
    mode.add_argument("--full", action="store_true", help="the full configs")
    p.add_argument("--only", nargs="+", metavar="NAME", help="experiments to run: " + _experiment_names())
    p.add_argument("--set", nargs="+", action="extend", metavar="KEY=VALUE",
                   help="change Config fields of the selected experiments on top of --quick / --full, e.g. --set "
                        "lr=1e-3 steps=2000; typed and checked by each Config that has the field, an unknown key "
                        "is an error; recorded in results.json and on the page")
    p.add_argument("--out", help="output folder (default results/WORK; with all: results)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (they show only on a terminal)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="dask scheduler for the sweeps (default: a LocalCluster on this machine)")
    p.add_argument("--connect-timeout", type=float, default=None, metavar="SECONDS",
                   help="with --scheduler: seconds it has to answer as a dask scheduler (default 30)")
    p.set_defaults(func=_reproduce)
    return p


def _reproduce(args):
    _check_reproduce(args)   # first: a bad --scheduler or --out, before any experiment runs
    from ..experiments import MODULES, experiments

    # the CLI's own choices: the works with experiments, "all", and "kernel" (which says it is a notebook)
    check_choice("WORK", args.work, [*MODULES, "all", "kernel"])
    if args.only and args.work in MODULES:
        names = experiments(args.work)
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            raise InputError(f"--only must name experiments of {args.work!r} {sorted(names)}, got {unknown}")
    if args.work == "kernel":
        raise InputError("the kernel work has nothing to reproduce: its notebook computes everything live; run it "
                         "with `jupyter lab notebooks/kernel_attention_is_an_rnn.ipynb` or `python -m pytest --nbval "
                         "--nbval-current-env notebooks/kernel_attention_is_an_rnn.ipynb`")
    if args.work == "all":
        from .index import reproduce_all

        if args.only:
            raise InputError("--only names experiments of one work; with 'all' run every work whole, or run "
                             "`python -m minimal reproduce WORK --only NAME ...`")
        reproduce_all(quick=not args.full, out_dir=args.out, progress=_progress(args), scheduler=args.scheduler,
                      overrides=parse_set(args.set), **_timeout(args))
        return 0
    from .work import reproduce

    reproduce(args.work, quick=not args.full, only=args.only, out_dir=args.out, progress=_progress(args),
              scheduler=args.scheduler, overrides=parse_set(args.set), **_timeout(args))
    return 0


def _timeout(args):
    return {} if args.connect_timeout is None else {"connect_timeout": args.connect_timeout}


def _progress(args):
    """Progress bars only on a terminal: redirected to a file they wrote 750 KB of carriage returns."""
    return not args.no_progress and sys.stderr.isatty()


def _experiment_names():
    """Each work's experiment names, for --only's help."""
    try:
        from ..experiments import MODULES

        return "; ".join(f"{w}: {', '.join(MODULES[w])}" for w in MODULES)
    except Exception:        # the help must print even if an experiment module cannot be imported
        return "see minimal/experiments/"


def _check_reproduce(args):
    """--scheduler and --out, checked before any experiment runs: a bad address used to fail only at the first
    sweep (after the experiments before it had trained for minutes), a file as --out with a traceback."""
    import math

    from ..run.scheduler import probe_scheduler, check_scheduler

    check_scheduler(args.scheduler)
    if args.connect_timeout is not None:
        if args.scheduler is None:
            raise InputError("--connect-timeout goes with --scheduler (a LocalCluster needs no connect)")
        if not (math.isfinite(args.connect_timeout) and args.connect_timeout > 0):
            raise InputError(f"--connect-timeout must be a finite number of seconds > 0, got {args.connect_timeout}")
    if args.scheduler is not None and not args.scheduler.startswith("inproc://"):
        # ask it now, in seconds, rather than at the first sweep after the experiments before it have trained
        probe_scheduler(args.scheduler, args.connect_timeout or 30.0)
    if args.out is not None:
        check_out_dir(args.out, "--out")
