"""The ``bench`` command of ``python -m minimal``: its parser (``add_parser``, called by ``minimal.__main__``) and
its handler, which runs ``kernels`` (scan, window), ``step`` or ``train`` and prints their tables."""
from __future__ import annotations

import argparse
import os
import sys

from ..validate import InputError, check_positive_int

__all__ = ["add_parser"]


BENCH_HELP = """Speed, as ratios measured in one run on this machine. The four benchmarks:

  scan     the linear recurrence h_t = a_t h_{t-1} + b_t: the NumPy loop, the Numba sequential, Blelloch and
           log-space kernels and the public calls, as ratios to a same-run memory copy of the same bytes (CPU:
           minutes, peak about 2.4 GB at the default T = 4096; --backend cuda: the numba.cuda kernels on a GPU)
  window   GRIL's windowed cross-product block: the fused Numba kernels against the NumPy path and a memory copy
           (CPU: about 2 minutes, peak about 3.5 GB at T = 16385; --backend cuda: minimal.bench.gpu on a GPU)
  step     the gated RNN's forward + backward on the Zucchet tasks' shapes; the ICL readout "all" against
           "last"; time in scans vs BLAS vs the rest (CPU)
  train    one training step (forward, loss, backward, clip, AdamW) of every model the course trains; with
           PyTorch and / or JAX installed (pip install -e ".[anchors]"), the same models in each beside them,
           checked equal in float64 first (CPU). Fair setting: LD_PRELOAD=/usr/lib/x86_64-linux-gnu/
           libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 and --pin CPU on a quiet machine

--quick runs a seconds-sized problem; --size T sets scan's / window's time steps on the CPU."""


def add_parser(subparsers):
    """The ``bench`` sub-command, added to ``python -m minimal``'s ``subparsers``."""
    p = subparsers.add_parser("bench", help="speed, as ratios measured in one run",
                              formatter_class=argparse.RawDescriptionHelpFormatter, description=BENCH_HELP)
    p.add_argument("what", choices=["scan", "window", "step", "train"], help="the benchmark (above)")
    p.add_argument("--backend", choices=["numba", "cuda"], default="numba")
    p.add_argument("--quick", action="store_true", help="a small problem size (seconds)")
    p.add_argument("--size", type=int, metavar="T",
                   help="scan / window on the CPU: T time steps instead of the default (4096 / 16385), for a machine "
                        "with less memory: peak about 2.4 GB x T / 4096 (scan), 3.5 GB x T / 16385 (window)")
    p.add_argument("--repeats", type=int, help="train: rounds to take the minimum over (default 20; with --profile 5, "
                                               "with --quick 3)")
    p.add_argument("--anchors", nargs="+", metavar="FRAMEWORK", choices=["torch", "jax"],
                   help="train: the frameworks to compare with (default: torch and jax, each where installed)")
    p.add_argument("--no-anchors", action="store_true", help="train: time our steps only")
    p.add_argument("--pin", type=int, metavar="CPU", help="train: run this process on that CPU core only")
    p.add_argument("--only", nargs="+", metavar="ROW", help="train: time these rows only (their names, quoted)")
    p.add_argument("--no-cells", action="store_true", help="train: do not time the cells alone")
    p.add_argument("--burst", type=int, metavar="K",
                   help="train: run each step K times in a row per round (default 1); the steps after the first of "
                        "each burst, each right after one of its own as in a training loop, give a second table "
                        "(warm)")
    p.add_argument("--profile", action="store_true",
                   help="train: where each step's time goes (cProfile by part of the library), its FLOPs and the "
                        "share of the same-run sgemm rate it reaches (minimal.bench.profile), instead of the table; "
                        "with --anchors (default: those installed) each framework's own matrix product on the "
                        "same shapes")
    p.set_defaults(func=_bench)
    return p


def _bench(args):
    from . import kernels as bench

    if args.size is not None and args.what not in ("scan", "window"):
        # step and train time fixed shapes (the experiments' own): a --size they would ignore is refused
        raise InputError(f"--size applies to bench scan and bench window only (their time steps T); bench "
                         f"{args.what} times the experiments' fixed shapes: drop --size {args.size}")
    train_only = [f for f, on in (("--anchors", args.anchors), ("--no-anchors", args.no_anchors),
                                  ("--pin", args.pin is not None), ("--only", args.only),
                                  ("--no-cells", args.no_cells), ("--burst", args.burst is not None)) if on]
    if train_only and args.what != "train":
        raise InputError(f"{', '.join(train_only)} apply to bench train only; drop them from bench {args.what}")
    if args.profile and args.what != "train":
        raise InputError(f"--profile applies to bench train only (where one training step's time goes); drop it "
                         f"from bench {args.what}")
    if args.size is not None:   # checked here to name the flag; the library checks its own argument again
        check_positive_int("--size", args.size, minimum=2 if args.what == "scan" else 4)
    if args.repeats is not None:
        check_positive_int("--repeats", args.repeats)
    # (what the user passed, the fix) for bench.check_memory's refusal of a size this machine cannot hold
    words = ((f"--size {args.size}", "give a smaller --size") if args.size is not None else
             ("--quick" if args.quick else "at its default size", "give --size T"))
    try:
        if args.what == "train":
            from . import train as bench_train

            if args.backend == "cuda":
                print("error: bench train runs on the CPU; drop --backend cuda", file=sys.stderr)
                return 2
            if args.repeats is not None:   # 0 is refused, not read as "the default" (``args.repeats or ...`` did)
                check_positive_int("--repeats", args.repeats)
            repeats = args.repeats if args.repeats is not None else (3 if args.quick else None)
            if args.pin is not None:
                _pin(args.pin)
            if args.no_anchors and args.anchors:
                raise InputError("--anchors and --no-anchors contradict each other: give one")
            anchors = () if args.no_anchors else tuple(args.anchors or bench_train.ANCHORS)
            from ..run import speed

            advice = speed.blas_kernel_advice()   # a step's products run at the kernel's rate: say when it is off
            if advice:
                print(advice, file=sys.stderr)
            if args.profile:
                from . import profile

                if args.no_cells:   # the profile times our step alone, never a cell on its own
                    raise InputError("--no-cells does not apply to --profile (it profiles the whole step); drop it")
                if args.burst is not None:   # the profile runs our steps back to back already
                    raise InputError("--burst does not apply to --profile (it times our steps back to back "
                                     "already); drop it")
                print(profile.profile_models(quick=args.quick, repeats=repeats or 5, only=args.only,
                                             anchors=anchors, log=lambda s: print(s, file=sys.stderr)))
                return 0
            if anchors and ("jemalloc" not in os.environ.get("LD_PRELOAD", "")
                            or "dirty_decay_ms:-1" not in os.environ.get("MALLOC_CONF", "")):
                print("note: the fair setting preloads jemalloc with its decay off for every side (LD_PRELOAD=.../"
                      "libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1): without it JAX's step, or "
                      "ours, page-faults (minimal.bench.train's docstring)", file=sys.stderr)
            if args.burst is not None:
                check_positive_int("--burst", args.burst)
            rows = bench_train.bench_train(repeats=repeats, quick=args.quick, anchors=anchors, only=args.only,
                                           cells=not args.no_cells, burst=args.burst or 1,
                                           log=lambda s: print(s, file=sys.stderr))
            print(bench_train.format_train_table(rows))
            return 0
        if args.what == "step":
            if args.backend == "cuda":
                print("error: bench step runs on the CPU (NumPy); drop --backend cuda", file=sys.stderr)
                return 2
            from . import step

            print(step.format_step_table(step.bench_step(repeats=2 if args.quick else None)))
            return 0
        if args.size is not None and (args.quick or args.backend == "cuda"):
            raise InputError("--size sets the CPU benchmark's time steps; it goes without --quick and --backend cuda")
        if args.what == "scan":
            kw = {"shape": (16, 4096, 256)} if args.quick and args.backend != "cuda" else {}
            kw = {"shape": bench.scaled_shape("scan", args.size)} if args.size is not None else kw
            if args.backend != "cuda":   # the estimate against this machine's memory, before allocating anything
                bench.check_memory("scan", kw.get("shape", bench.DEFAULT_SHAPE), *words)
            _say_bench("scan", args, kw.get("shape", bench.DEFAULT_SHAPE))
            rows = bench.bench_scan(backend=args.backend, **kw)
        elif args.backend == "cuda":
            rows = bench.bench_window(backend="cuda")
        else:
            shape = (16, 2 ** 12 + 1, 10, 3, 1) if args.quick else None
            shape = bench.scaled_shape("window", args.size) if args.size is not None else shape
            bench.check_memory("window", shape or bench.WINDOW_SHAPE, *words)
            _say_bench("window", args, shape or bench.WINDOW_SHAPE)
            print(bench.format_window_table(bench.bench_window(backend="numba", shape=shape), shape))
            return 0
    except RuntimeError as e:  # the CUDA benchmark refuses to run without a GPU or in the simulator
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.backend != "cuda":  # the CUDA benchmark prints and saves its own tables
        print(bench.format_table(rows))
    return 0


def _pin(cpu):
    """This process (and the threads it starts) on core ``cpu`` only, or an InputError naming the cores it may use."""
    import os

    allowed = sorted(os.sched_getaffinity(0))
    if cpu not in allowed:
        raise InputError(f"--pin {cpu}: this process may run on cores {allowed}; give one of them")
    os.sched_setaffinity(0, {cpu})


def _say_bench(what, args, shape):
    """One line on stderr before a CPU benchmark that runs for minutes: what it does and its peak memory."""
    if args.backend == "cuda":
        return
    from . import kernels as bench

    default = bench.DEFAULT_SHAPE if what == "scan" else bench.WINDOW_SHAPE
    gb = bench.PEAK_GB[what] * shape[1] * shape[0] / (default[1] * default[0])
    print(f"bench {what}: shape {tuple(shape)}, peak memory about {gb:.1g} GB; compiling the Numba kernels, then "
          f"timing each row{' (minutes at the default size)' if tuple(shape) == default else ''}...",
          file=sys.stderr, flush=True)
