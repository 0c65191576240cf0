"""Command line: ``python -m minimal {check,bench} ...``.

    python -m minimal check [--only NAME ...] [--no-scans]
        gradient check of every registered cell and the scan equivalence checks; exit code 1 on any failure.
    python -m minimal bench scan [--backend numba|cuda] [--quick]
    python -m minimal bench window [--backend numba|cuda] [--quick]
        speed as ratios to a same-run memory copy (see minimal.bench); window: GRIL's block, fused Numba
        kernels against the NumPy path on the CPU (default), or cuda_kernels.bench on the GPU.
    python -m minimal bench step [--quick]
        the gated RNN's forward + backward on the Zucchet tasks' shapes; ICL readout all vs last.
    python -m minimal bench train [--quick] [--repeats N] [--no-torch]
        one training step (forward, loss, backward, clip, AdamW) of every model the course trains, and with
        PyTorch installed the same models in torch beside them, checked equal in float64 first (minimal.bench_train).
    python -m minimal reproduce WORK [--quick|--full] [--only NAME ...] [--out DIR] [--scheduler ADDR]
        run a work's experiments; write a paper-vs-ours table (markdown + JSON) and figures.
    python -m minimal reproduce all [--quick|--full] [--out DIR] [--scheduler ADDR]
        every work in turn (zucchet, gril, minrnn), each into DIR/WORK, then DIR/index.md linking their
        results and figures (DIR: results).
    python -m minimal course student OUT
        the student edition of the notebooks: solutions stripped (see minimal.course).
    python -m minimal course html OUT [--mathjax-url URL]
        the executed notebooks as HTML pages with an index page from notebooks/README.md, the syllabus.
"""
from __future__ import annotations

import argparse
import sys

from .validate import InputError, check_choice, check_positive_int


def _check(args):
    from . import check
    from .cells import REGISTRY

    for name in args.only or ():
        check_choice("only", name, REGISTRY)
    check_positive_int("seed", args.seed, minimum=0)
    rows = check.run(names=args.only, seed=args.seed, scans=not args.no_scans)
    print(check.format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def _bench(args):
    from . import bench

    try:
        if args.what == "train":
            from . import bench_train

            if args.backend == "cuda":
                print("error: bench train runs on the CPU; drop --backend cuda", file=sys.stderr)
                return 2
            rows = bench_train.bench_train(repeats=args.repeats or (3 if args.quick else None), quick=args.quick,
                                           torch=not args.no_torch, log=lambda s: print(s, file=sys.stderr))
            print(bench_train.format_train_table(rows))
            return 0
        if args.what == "step":
            if args.backend == "cuda":
                print("error: bench step runs on the CPU (NumPy); drop --backend cuda", file=sys.stderr)
                return 2
            print(bench.format_step_table(bench.bench_step(repeats=2 if args.quick else None)))
            return 0
        if args.what == "scan":
            kw = {"shape": (16, 4096, 256)} if args.quick and args.backend != "cuda" else {}
            rows = bench.bench_scan(backend=args.backend, **kw)
        elif args.backend == "cuda":
            rows = bench.bench_window(backend="cuda")
        else:
            shape = (16, 2 ** 12 + 1, 10, 3, 1) if args.quick else None
            print(bench.format_window_table(bench.bench_window(backend="numba", shape=shape), shape))
            return 0
    except RuntimeError as e:  # the CUDA benchmark refuses to run without a GPU or in the simulator
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.backend != "cuda":  # the CUDA benchmark prints and saves its own tables
        print(bench.format_table(rows))
    return 0


def _reproduce(args):
    if args.work == "all":
        from .reproduce_all import reproduce_all

        if args.only:
            raise InputError("--only names experiments of one work; with 'all' run every work whole, or run "
                             "`python -m minimal reproduce WORK --only NAME ...`")
        reproduce_all(quick=not args.full, out_dir=args.out, progress=not args.no_progress,
                      scheduler=args.scheduler)
        return 0
    from .reproduce import reproduce

    reproduce(args.work, quick=not args.full, only=args.only, out_dir=args.out, progress=not args.no_progress,
              scheduler=args.scheduler)
    return 0


def _course(args):
    import time

    from . import course

    t0 = time.perf_counter()
    if args.what == "student":
        written = course.student(args.out)
    else:
        written = course.html(args.out, mathjax_url=args.mathjax_url)
    print(f"wrote {len(written)} files to {args.out} in {time.perf_counter() - t0:.1f} s"
          + (f"; open {written[0]}" if args.what == "html" else ""))
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m minimal", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("check", help="gradient-check every cell and check every scan")
    p.add_argument("--only", nargs="+", metavar="NAME", help="registered cell names to check")
    p.add_argument("--no-scans", action="store_true", help="skip the scan checks")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_check)

    p = sub.add_parser("bench", help="speed, as ratios measured in one run")
    p.add_argument("what", choices=["scan", "window", "step", "train"])
    p.add_argument("--backend", choices=["numba", "cuda"], default="numba")
    p.add_argument("--quick", action="store_true", help="a small problem size (seconds)")
    p.add_argument("--repeats", type=int, help="train: rounds to take the minimum over (default 20)")
    p.add_argument("--no-torch", action="store_true", help="train: do not compare with PyTorch")
    p.set_defaults(func=_bench)

    p = sub.add_parser("reproduce", help="run a work's experiments and compare with the paper")
    p.add_argument("work", help="zucchet, gril, minrnn, or all (each in turn, then an index page)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="CPU-minutes configs (default)")
    mode.add_argument("--full", action="store_true", help="the full configs")
    p.add_argument("--only", nargs="+", metavar="NAME", help="experiments to run")
    p.add_argument("--out", help="output folder (default results/WORK; with all: results)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="dask scheduler for the sweeps (default: a LocalCluster on this machine)")
    p.set_defaults(func=_reproduce)

    p = sub.add_parser("course", help="the course: student edition or HTML site of the notebooks")
    p.add_argument("what", choices=["student", "html"])
    p.add_argument("out", help="output folder")
    p.add_argument("--mathjax-url", help="html: MathJax 2 to load (default: nbconvert's CDN address)")
    p.set_defaults(func=_course)
    return parser


def _check_reproduce(args):
    """--scheduler and --out, checked before any experiment runs: a bad address used to fail only at the first
    sweep (after the experiments before it had trained for minutes), a file as --out with a traceback."""
    from pathlib import Path

    from .sweep import check_scheduler

    check_scheduler(args.scheduler)
    if args.out is not None:
        if Path(args.out).exists() and not Path(args.out).is_dir():
            raise InputError(f"--out must be a folder, but {args.out!r} is a file; give a folder path (it is "
                             f"created if missing)")
        try:
            Path(args.out).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"--out {args.out!r} cannot be made a folder ({e.strerror or e}); give another "
                             f"path") from None


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if args.command == "reproduce":
            _check_reproduce(args)
        return args.func(args)
    except InputError as e:  # a bad argument reaches the user as one line; any other error keeps its traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
