"""Command line: python -m minimal {check,bench,reproduce,course} ...

    python -m minimal check [--only NAME ...] [--no-scans]
        gradient check of every registered cell and the scan equivalence checks; exit code 1 on any failure.
        A first run compiles the Numba kernels (cached afterwards).
    python -m minimal bench scan [--backend numba|cuda] [--quick | --size T]
    python -m minimal bench window [--backend numba|cuda] [--quick | --size T]
        speed as ratios to a same-run memory copy (see minimal.bench.kernels); window: GRIL's block, fused Numba
        kernels against the NumPy path on the CPU (default), or cuda_kernels.bench on the GPU. At the default
        sizes the CPU runs peak at about 2.4 GB (scan, T = 4096) and 3.5 GB (window, T = 16385) of memory and
        take minutes; --size T sets the time steps (memory scales with T), --quick a seconds-sized problem.
    python -m minimal bench step [--quick]
        the gated RNN's forward + backward on the Zucchet tasks' shapes; ICL readout all vs last.
    python -m minimal bench train [--quick] [--repeats N] [--no-torch]
        one training step (forward, loss, backward, clip, AdamW) of every model the course trains, and with
        PyTorch installed the same models in torch beside them, checked equal in float64 first (minimal.bench.train).
    python -m minimal reproduce WORK [--quick|--full] [--only NAME ...] [--set KEY=VALUE ...] [--out DIR]
                                     [--scheduler ADDR] [--connect-timeout SECONDS]
        run a work's experiments; write a paper-vs-ours table (markdown + JSON) and figures. ADDR must answer as
        a dask scheduler within SECONDS (default 30), asked before any experiment runs. --set changes fields of
        the experiments' Configs on top of --quick / --full, e.g. `reproduce minrnn --only shakespeare --set
        lr=1e-3 steps=2000`: each KEY is a Config field of at least one selected experiment (it applies to those
        that have it), each VALUE is parsed by the field's type (int, float, true/false, text, a,b,c for a tuple,
        None) and checked by the Config; the results JSON and page list the fields set (see minimal.run.overrides).
    python -m minimal reproduce all [--quick|--full] [--set KEY=VALUE ...] [--out DIR] [--scheduler ADDR]
                                    [--connect-timeout SECONDS]
        every work in turn (zucchet, gril, minrnn), each into DIR/WORK, then DIR/index.md with each work's
        matches / close / differs, linking their results and figures (DIR: results of the current folder).
        Progress bars only on a terminal. The fourth work, kernel, is its notebook alone (nothing to reproduce).
    python -m minimal course student OUT [--update | --force]
        the student edition of the notebooks: solutions stripped, exercise outputs cleared, a student README
        (see minimal.course); over an earlier edition it refuses files that differ unless --update (rewrites the
        lessons the student has not edited and writes an edited one's new version beside it as NAME.new.ipynb;
        never deletes) or --force (overwrites).
    python -m minimal course release OUT [--lesson NAME ...]
        an nbgrader course directory: source/ with nbgrader metadata made from the solution marks, release/ by
        `nbgrader generate_assignment`, rubric.json (see minimal.assignments and notebooks/INSTRUCTOR.md).
    python -m minimal course grade COURSE LESSON [--unsafe]
        grades every submission of LESSON in COURSE: each student's notebook runs in a sandbox (bubblewrap) with no
        rights over the course, its answers are judged outside the student's kernel, feedback shows no hidden check
    python -m minimal course html OUT [--instructor] [--mathjax-url URL]
        the executed notebooks as HTML pages with an index page from notebooks/README.md, the syllabus
        (MathJax from a local copy when installed: works offline). The default is the student site (each lesson's
        student edition: no solution, no hidden check); --instructor writes the instructor's site with the
        solutions folded, the guide, and a warning on every page.
    python -m minimal course slides OUT [--reveal DIR | --reveal-cdn] [--mathjax-url URL]
        one reveal.js deck per lesson (a slide per section, sub-slides of a screen); reveal.js copied next to the
        decks (a local one, else reveal.js 4.6.1 fetched once from the npm registry with npm pack): works offline.
    python -m minimal course tidy [--check] NOTEBOOK...
        drop execution timestamps and timing text from committed notebooks (see minimal.nbtidy).
"""
from __future__ import annotations

import argparse
import sys

from .run.overrides import parse_set
from .validate import InputError, check_choice, check_positive_int


def _check(args):
    from . import check
    from .cells import REGISTRY

    for name in args.only or ():
        check_choice("--only", name, REGISTRY)
    check_positive_int("--seed", args.seed, minimum=0)
    print("checking every cell's gradients and every scan (a first run compiles the Numba kernels: about 35 s)...",
          file=sys.stderr, flush=True)
    rows = check.run(names=args.only, seed=args.seed, scans=not args.no_scans)
    print(check.format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def _bench(args):
    from .bench import kernels as bench

    if args.size is not None and args.what not in ("scan", "window"):
        # step and train time fixed shapes (the experiments' own): a --size they would ignore is refused
        raise InputError(f"--size applies to bench scan and bench window only (their time steps T); bench "
                         f"{args.what} times the experiments' fixed shapes: drop --size {args.size}")
    if args.size is not None:   # checked here to name the flag; the library checks its own argument again
        check_positive_int("--size", args.size, minimum=2 if args.what == "scan" else 4)
    if args.repeats is not None:
        check_positive_int("--repeats", args.repeats)
    # (what the user passed, the fix) for bench.check_memory's refusal of a size this machine cannot hold
    words = ((f"--size {args.size}", "give a smaller --size") if args.size is not None else
             ("--quick" if args.quick else "at its default size", "give --size T"))
    try:
        if args.what == "train":
            from .bench import train as bench_train

            if args.backend == "cuda":
                print("error: bench train runs on the CPU; drop --backend cuda", file=sys.stderr)
                return 2
            if args.repeats is not None:   # 0 is refused, not read as "the default" (``args.repeats or ...`` did)
                check_positive_int("--repeats", args.repeats)
            repeats = args.repeats if args.repeats is not None else (3 if args.quick else None)
            rows = bench_train.bench_train(repeats=repeats, quick=args.quick,
                                           torch=not args.no_torch, log=lambda s: print(s, file=sys.stderr))
            print(bench_train.format_train_table(rows))
            return 0
        if args.what == "step":
            if args.backend == "cuda":
                print("error: bench step runs on the CPU (NumPy); drop --backend cuda", file=sys.stderr)
                return 2
            print(bench.format_step_table(bench.bench_step(repeats=2 if args.quick else None)))
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


def _say_bench(what, args, shape):
    """One line on stderr before a CPU benchmark that runs for minutes: what it does and its peak memory."""
    if args.backend == "cuda":
        return
    from .bench import kernels as bench

    default = bench.DEFAULT_SHAPE if what == "scan" else bench.WINDOW_SHAPE
    gb = bench.PEAK_GB[what] * shape[1] * shape[0] / (default[1] * default[0])
    print(f"bench {what}: shape {tuple(shape)}, peak memory about {gb:.1g} GB; compiling the Numba kernels, then "
          f"timing each row{' (minutes at the default size)' if tuple(shape) == default else ''}...",
          file=sys.stderr, flush=True)


def _reproduce(args):
    from .experiments import MODULES, experiments

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
        from .run.reproduce_all import reproduce_all

        if args.only:
            raise InputError("--only names experiments of one work; with 'all' run every work whole, or run "
                             "`python -m minimal reproduce WORK --only NAME ...`")
        reproduce_all(quick=not args.full, out_dir=args.out, progress=_progress(args), scheduler=args.scheduler,
                      overrides=parse_set(args.set), **_timeout(args))
        return 0
    from .run.reproduce import reproduce

    reproduce(args.work, quick=not args.full, only=args.only, out_dir=args.out, progress=_progress(args),
              scheduler=args.scheduler, overrides=parse_set(args.set), **_timeout(args))
    return 0


def _timeout(args):
    return {} if args.connect_timeout is None else {"connect_timeout": args.connect_timeout}


def _progress(args):
    """Progress bars only on a terminal: redirected to a file they wrote 750 KB of carriage returns."""
    return not args.no_progress and sys.stderr.isatty()


def _course(args):
    import time
    from pathlib import Path

    from . import course, nbtidy

    if args.what == "tidy":
        if not args.out:
            raise InputError("course tidy needs notebook files, e.g. notebooks/*.ipynb")
        found = nbtidy.tidy_files(args.out, check=args.check)
        for path, issues in found.items():
            print(f"{path}: {len(issues)} " + ("problem(s)" if args.check else "fixed") + ", e.g. cell "
                  f"{issues[0][0]}: {issues[0][1]}")
        print(f"{len(args.out)} notebook(s), {len(found)} " + ("to tidy" if args.check else "tidied"))
        return 1 if (args.check and found) else 0
    if args.what == "grade":
        from . import assignments

        assignments.grade(args.course_dir, args.lesson_name.removesuffix(".ipynb"), unsafe=args.unsafe)
        return 0
    if len(args.out) != 1:
        raise InputError(f"course {args.what} takes one output folder, got {args.out}")
    out, notes = args.out[0], []
    t0 = time.perf_counter()
    if args.what == "student":
        written = course.student(out, force=args.force, update=args.update, notes=notes)
    elif args.what == "release":
        from . import assignments

        rubrics = assignments.release(out, names=[n if n.endswith(".ipynb") else n + ".ipynb"
                                                  for n in args.lesson] if args.lesson else None)
        for lesson, r in rubrics.items():
            notes.append(f"{lesson}: {r['total']} points" + (f" (no check: {', '.join(r['ungraded'])})"
                                                              if r["ungraded"] else ""))
        written = sorted(Path(out).glob("release/*/*.ipynb"))
    elif args.what == "html":
        written = course.html(out, mathjax_url=args.mathjax_url, notes=notes, instructor=args.instructor)
        notes.append("the INSTRUCTOR's site: every solution and hidden check is in it; do not publish it to students"
                     if args.instructor else "the student site: no solution, no hidden check, no instructor's guide")
    else:
        written = course.slides(out, mathjax_url=args.mathjax_url, reveal=args.reveal, notes=notes,
                                cdn=args.reveal_cdn)
    for note in notes:
        print(note)
    print(f"wrote {len(written)} files to {out} in {time.perf_counter() - t0:.1f} s"
          + (f"; open {written[0]}" if args.what in ("html", "slides") and written else ""))
    return 0


BENCH_HELP = """Speed, as ratios measured in one run on this machine. The four benchmarks:

  scan     the linear recurrence h_t = a_t h_{t-1} + b_t: the NumPy loop, the Numba sequential, Blelloch and
           log-space kernels and the public calls, as ratios to a same-run memory copy of the same bytes (CPU:
           minutes, peak about 2.4 GB at the default T = 4096; --backend cuda: the numba.cuda kernels on a GPU)
  window   GRIL's windowed cross-product block: the fused Numba kernels against the NumPy path and a memory copy
           (CPU: about 2 minutes, peak about 3.5 GB at T = 16385; --backend cuda: cuda_kernels.bench on a GPU)
  step     the gated RNN's forward + backward on the Zucchet tasks' shapes; the ICL readout "all" against
           "last"; time in scans vs BLAS vs the rest (CPU)
  train    one training step (forward, loss, backward, clip, AdamW) of every model the course trains; with
           PyTorch installed, the same models in torch beside them, checked equal in float64 first (CPU)

--quick runs a seconds-sized problem; --size T sets scan's / window's time steps on the CPU."""


def _experiment_names():
    """Each work's experiment names, for --only's help."""
    try:
        from .experiments import MODULES

        return "; ".join(f"{w}: {', '.join(MODULES[w])}" for w in MODULES)
    except Exception:        # the help must print even if an experiment module cannot be imported
        return "see minimal/experiments/"


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m minimal", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("check", help="gradient-check every cell and check every scan")
    p.add_argument("--only", nargs="+", metavar="NAME", help="registered cell names to check")
    p.add_argument("--no-scans", action="store_true", help="skip the scan checks")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs and parameters (default 0)")
    p.set_defaults(func=_check)

    p = sub.add_parser("bench", help="speed, as ratios measured in one run",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=BENCH_HELP)
    p.add_argument("what", choices=["scan", "window", "step", "train"], help="the benchmark (above)")
    p.add_argument("--backend", choices=["numba", "cuda"], default="numba")
    p.add_argument("--quick", action="store_true", help="a small problem size (seconds)")
    p.add_argument("--size", type=int, metavar="T",
                   help="scan / window on the CPU: T time steps instead of the default (4096 / 16385), for a machine "
                        "with less memory: peak about 2.4 GB x T / 4096 (scan), 3.5 GB x T / 16385 (window)")
    p.add_argument("--repeats", type=int, help="train: rounds to take the minimum over (default 20)")
    p.add_argument("--no-torch", action="store_true", help="train: do not compare with PyTorch")
    p.set_defaults(func=_bench)

    p = sub.add_parser("reproduce", help="run a work's experiments and compare with the paper")
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

    p = sub.add_parser("course", help="the course: student edition, nbgrader release and grading, HTML site, "
                                      "slides; tidy committed notebooks",
                       description="The course built from notebooks/: `python -m minimal course WHAT --help` for each.")
    p.set_defaults(func=_course, force=False, update=False, lesson=None, mathjax_url=None, reveal=None,
                   reveal_cdn=False, check=False, unsafe=False, instructor=False)
    what = p.add_subparsers(dest="what", required=True, metavar="WHAT")

    c = what.add_parser("student", help="the student edition of every lesson, with a student README",
                        description="Write the student edition into OUT: every solution replaced by a stub, the "
                                    "outputs of exercises cleared, a student README (see minimal.course).")
    c.add_argument("out", nargs=1, metavar="OUT", help="output folder (created if missing)")
    edit = c.add_mutually_exclusive_group()
    edit.add_argument("--force", action="store_true", help="overwrite files that differ (a student's work)")
    edit.add_argument("--update", action="store_true",
                      help="rewrite the lessons not edited since the last edition; an edited one's new version goes "
                           "beside it (NAME.new.ipynb); nothing is deleted")

    c = what.add_parser("release", help="an nbgrader course directory, one assignment per lesson",
                        description="Write an nbgrader course directory into OUT: source/ with nbgrader metadata, "
                                    "release/ (no solution, no hidden check), rubric.json (notebooks/INSTRUCTOR.md).")
    c.add_argument("out", nargs=1, metavar="OUT", help="the course folder (created if missing)")
    c.add_argument("--lesson", nargs="+", metavar="NAME", help="only these lessons (file names)")

    c = what.add_parser("grade", help="grade every submission of a lesson, each in a sandbox",
                        description="Grade every submission of LESSON in COURSE (a folder written by `course "
                                    "release`): each student's notebook runs in a bubblewrap sandbox with no rights "
                                    "over the course, its recorded answers are judged outside the student's kernel "
                                    "against the reference run, and the feedback shows no hidden check. Exit 0 when "
                                    "grading completed, whatever the scores.")
    c.add_argument("course_dir", metavar="COURSE", help="the course folder (written by course release)")
    c.add_argument("lesson_name", metavar="LESSON", help="the lesson, e.g. zucchet_a_lsa_is_an_rnn")
    c.add_argument("--unsafe", action="store_true",
                   help="grade without a sandbox, the submissions running with your rights (only for work you trust)")

    c = what.add_parser("html", help="the lessons as web pages (the student site by default)",
                        description="Render the lessons as web pages with the syllabus as OUT/index.html; the "
                                    "default is the student site (no solution, no hidden check, no guide).")
    c.add_argument("out", nargs=1, metavar="OUT", help="output folder (created if missing)")
    c.add_argument("--instructor", action="store_true",
                   help="the instructor's site: every solution folded, the guide, a warning on every page")
    c.add_argument("--mathjax-url", help="MathJax 2 to load (default: a local copy, else its CDN)")

    c = what.add_parser("slides", help="one reveal.js deck per lesson",
                        description="Write one reveal.js deck per lesson into OUT (a slide per section), with "
                                    "reveal.js copied beside the decks: offline by default.")
    c.add_argument("out", nargs=1, metavar="OUT", help="output folder (created if missing)")
    c.add_argument("--reveal", help="a reveal.js 4 folder (default: $MINIMAL_REVEAL_JS, node_modules/reveal.js, else "
                                    "4.6.1 from the npm registry, kept in ~/.cache/minimal)")
    c.add_argument("--reveal-cdn", action="store_true", help="load reveal.js from its CDN (online only)")
    c.add_argument("--mathjax-url", help="MathJax 2 to load (default: a local copy, else its CDN)")

    c = what.add_parser("tidy", help="drop execution timestamps and timing text from committed notebooks",
                        description="Drop execution timestamps and timing text from notebooks (minimal.nbtidy).")
    c.add_argument("out", nargs="*", metavar="NOTEBOOK", help="the notebook files")
    c.add_argument("--check", action="store_true", help="only report; exit code 1 if a notebook needs it")
    return parser


def _check_out(out, name):
    """The output folder ``out`` (given as ``name`` on the command line) exists as a folder, or is made one; a
    file there, or a path that cannot be made a folder, is an InputError (one line, exit 2), not a traceback."""
    from pathlib import Path

    if Path(out).exists() and not Path(out).is_dir():
        raise InputError(f"{name} must be a folder, but {out!r} is a file; give a folder path (it is created if "
                         f"missing)")
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{name} {out!r} cannot be made a folder ({e.strerror or e}); give another path") from None


def _check_reproduce(args):
    """--scheduler and --out, checked before any experiment runs: a bad address used to fail only at the first
    sweep (after the experiments before it had trained for minutes), a file as --out with a traceback."""
    import math

    from .run.sweep import probe_scheduler, check_scheduler

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
        _check_out(args.out, "--out")


def _interrupted(e):
    """Say in one line what an interrupt left behind and how to go on; exit 130 (Ctrl-C) or 143 (SIGTERM)."""
    import shlex

    from .run.train import Terminated

    what, code = ("SIGTERM", 143) if isinstance(e, Terminated) else ("Ctrl-C", 130)
    again = "python -m minimal " + shlex.join(sys.argv[1:])
    ckpt = getattr(e, "checkpoint", None)
    if ckpt:
        path, step, steps = ckpt
        print(f"interrupted ({what}): checkpoint saved at step {step:,} of {steps:,} in {path}; `{again}` resumes "
              f"from it (results of finished experiments and sweep jobs are kept too)", file=sys.stderr)
    else:
        print(f"interrupted ({what}) before any training step could be saved; `{again}` starts again (finished "
              f"sweep jobs and results are kept)", file=sys.stderr)
    return code


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if args.command == "reproduce":
            _check_reproduce(args)
        elif args.command == "course" and args.what not in ("tidy", "grade"):
            if len(args.out) != 1:
                raise InputError(f"course {args.what} takes one output folder, got {args.out}")
            _check_out(args.out[0], "OUT")
        return args.func(args)
    except KeyboardInterrupt as e:      # Ctrl-C, or SIGTERM during training (train.Terminated): one line, no traceback
        return _interrupted(e)
    except InputError as e:  # a bad argument reaches the user as one line; any other error keeps its traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
