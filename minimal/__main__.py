"""Command line: python -m minimal {check,bench,reproduce,course} ...

    python -m minimal check [--only NAME ...] [--no-scans]
        gradient check of every registered cell and the scan equivalence checks; exit code 1 on any failure.
        A first run compiles the Numba kernels (cached afterwards).
    python -m minimal bench scan [--backend numba|cuda] [--quick | --size T]
    python -m minimal bench window [--backend numba|cuda] [--quick | --size T]
        speed as ratios to a same-run memory copy (see minimal.bench.kernels); window: GRIL's block, fused Numba
        kernels against the NumPy path on the CPU (default), or minimal.bench.gpu on the GPU. At the default
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
        (see minimal.course.build); over an earlier edition it refuses files that differ unless --update (rewrites the
        lessons the student has not edited and writes an edited one's new version beside it as NAME.new.ipynb;
        never deletes) or --force (overwrites).
    python -m minimal course release OUT [--lesson NAME ...]
        an nbgrader course directory: source/ with nbgrader metadata made from the solution marks, release/ by
        `nbgrader generate_assignment`, rubric.json (see minimal.course.assignments and notebooks/INSTRUCTOR.md).
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
        drop execution timestamps and timing text from committed notebooks (see minimal.course.nbtidy).
"""
from __future__ import annotations

import argparse
import sys

from .bench import cli as bench_cli
from .reproduce import cli as reproduce_cli
from .validate import InputError, check_choice, check_out_dir, check_positive_int


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


def _course(args):
    import time
    from pathlib import Path

    from .course import build as course
    from .course import nbtidy

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
        from .course import assignments

        assignments.grade(args.course_dir, args.lesson_name.removesuffix(".ipynb"), unsafe=args.unsafe)
        return 0
    if len(args.out) != 1:
        raise InputError(f"course {args.what} takes one output folder, got {args.out}")
    out, notes = args.out[0], []
    t0 = time.perf_counter()
    if args.what == "student":
        written = course.student(out, force=args.force, update=args.update, notes=notes)
    elif args.what == "release":
        from .course import assignments

        rubrics = assignments.release(out, names=[n if n.endswith(".ipynb") else n + ".ipynb"
                                                  for n in args.lesson] if args.lesson else None)
        for lesson, r in rubrics.items():
            notes.append(f"{lesson}: {r['total']} points" + (f" (no check: {', '.join(r['ungraded'])})"
                                                              if r["ungraded"] else ""))
        written = sorted(Path(out).glob("release/*/*.ipynb"))
    elif args.what == "html":
        from .course import site

        written = site.html(out, mathjax_url=args.mathjax_url, notes=notes, instructor=args.instructor)
        notes.append("the INSTRUCTOR's site: every solution and hidden check is in it; do not publish it to students"
                     if args.instructor else "the student site: no solution, no hidden check, no instructor's guide")
    else:
        from .course import slides

        written = slides.slides(out, mathjax_url=args.mathjax_url, reveal=args.reveal, notes=notes,
                                cdn=args.reveal_cdn)
    for note in notes:
        print(note)
    print(f"wrote {len(written)} files to {out} in {time.perf_counter() - t0:.1f} s"
          + (f"; open {written[0]}" if args.what in ("html", "slides") and written else ""))
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m minimal", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("check", help="gradient-check every cell and check every scan")
    p.add_argument("--only", nargs="+", metavar="NAME", help="registered cell names to check")
    p.add_argument("--no-scans", action="store_true", help="skip the scan checks")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs and parameters (default 0)")
    p.set_defaults(func=_check)

    bench_cli.add_parser(sub)
    reproduce_cli.add_parser(sub)

    p = sub.add_parser("course", help="the course: student edition, nbgrader release and grading, HTML site, "
                                      "slides; tidy committed notebooks",
                       description="The course built from notebooks/: `python -m minimal course WHAT --help` for each.")
    p.set_defaults(func=_course, force=False, update=False, lesson=None, mathjax_url=None, reveal=None,
                   reveal_cdn=False, check=False, unsafe=False, instructor=False)
    what = p.add_subparsers(dest="what", required=True, metavar="WHAT")

    c = what.add_parser("student", help="the student edition of every lesson, with a student README",
                        description="Write the student edition into OUT: every solution replaced by a stub, the "
                                    "outputs of exercises cleared, a student README (see minimal.course.build).")
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
                        description="Drop execution timestamps and timing text from notebooks (minimal.course.nbtidy).")
    c.add_argument("out", nargs="*", metavar="NOTEBOOK", help="the notebook files")
    c.add_argument("--check", action="store_true", help="only report; exit code 1 if a notebook needs it")
    return parser


def _interrupted(e):
    """Say in one line what an interrupt left behind and how to go on; exit 130 (Ctrl-C) or 143 (SIGTERM)."""
    import shlex

    from .run.interrupt import Terminated

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
        if args.command == "course" and args.what not in ("tidy", "grade"):
            if len(args.out) != 1:
                raise InputError(f"course {args.what} takes one output folder, got {args.out}")
            check_out_dir(args.out[0], "OUT")
        return args.func(args)
    except KeyboardInterrupt as e:      # Ctrl-C, or SIGTERM during training (interrupt.Terminated): one line, no traceback
        return _interrupted(e)
    except InputError as e:  # a bad argument reaches the user as one line; any other error keeps its traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
