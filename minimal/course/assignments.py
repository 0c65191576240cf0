"""`python -m minimal course release OUT`: the lessons as nbgrader assignments, one per lesson.

nbgrader (a well-kept library: the ``[dev]`` extra, or ``pip install nbgrader``) does the grading; this module only
turns the course's own marks into nbgrader's cell metadata, writes a course directory and calls
``nbgrader generate_assignment``. The marks (``minimal.course.build``) become:

- a code cell tagged ``solution`` with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` is split after its last
  ``### END SOLUTION``: the part up to it is an *autograded answer* (``solution: true``), which the release replaces
  with ``# YOUR CODE HERE`` / ``raise NotImplementedError()``; the lines after it, the measurement and the checks,
  are an *autograder tests* cell (``grade: true``, ``locked: true``, ``points``). Checks that would give the answer
  away sit between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` and are left out of the release;
  nbgrader puts them back when it autogrades. A tagged code cell without markers is an answer as a whole;
- a markdown cell tagged ``solution`` is a written answer: nbgrader's *manually graded answer* worth 0 points, so
  that the instructor reads it and comments in the formgrader while the score comes from the tests;
- every other cell is given as it is, with its committed outputs (a student reads the lesson's figures), except
  the code cells of an exercise, whose outputs are cleared as in the student edition.

``rubric(nb)`` is the points of one lesson: ``POINTS`` per exercise with a test cell, split over its test cells.
``release(out)`` writes ``OUT/source/<lesson>/<lesson>.ipynb`` (the instructor's version with nbgrader metadata),
``OUT/nbgrader_config.py``, ``OUT/rubric.json``, then runs ``nbgrader generate_assignment`` for every lesson
(``OUT/release/<lesson>/``). notebooks/INSTRUCTOR.md says how to collect, autograde and return feedback.
"""
from __future__ import annotations

import copy
import json
import os
import tempfile
import time
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from . import build as course
from .nbtidy import read_notebook
from .site import local_mathjax
from ..validate import InputError

__all__ = ["POINTS", "HIDDEN_BEGIN", "HIDDEN_END", "source_notebook", "rubric", "release", "submit", "autograde",
           "grade", "selftest", "scores", "cell_scores", "lesson_id",
           "nbgrader_available"]

POINTS = 10                       # per exercise that has a check, split over its test cells
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
SCHEMA = 3                        # nbgrader's cell metadata schema (nbgrader 0.9)
CONFIG = '''import os

c = get_config()  # noqa: F821  (nbgrader's config file)
c.CourseDirectory.course_id = "minimal"
# the folder of this file: a course folder copied or moved (a new term, another machine) grades itself
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# the lesson's own figures and tables stay in the release (exercise outputs are cleared when the source is written)
from nbgrader.converters import GenerateAssignment  # noqa: E402
from nbgrader.preprocessors import ClearOutput  # noqa: E402
c.GenerateAssignment.preprocessors = [p for p in GenerateAssignment.class_traits()["preprocessors"].default()
                                      if p is not ClearOutput]
c.ClearSolutions.code_stub = {"python": '# YOUR CODE HERE\\nraise NotImplementedError("not done yet")'}
# autograde runs each submission in a sandbox (minimal.course.sandbox) and judges its recorded answers outside the
# student's kernel (minimal.course.judge); feedback shows no hidden check and no HTML from a submission (MathJax: course
# grade puts a copy beside each page)
from nbgrader.converters import Autograde, GenerateFeedback  # noqa: E402
from nbgrader.preprocessors import Execute  # noqa: E402
from minimal.course.grader import SandboxedExecute, StripHiddenTests  # noqa: E402
c.Autograde.autograde_preprocessors = [SandboxedExecute if p is Execute else p for p in
                                       Autograde.class_traits()["autograde_preprocessors"].default()]
c.SandboxedExecute.course_root = c.CourseDirectory.root
c.GenerateFeedback.preprocessors = [StripHiddenTests, *GenerateFeedback.class_traits()["preprocessors"].default()]
c.HTMLExporter.sanitize_html = True
'''


def nbgrader_available():
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        return False
    return True


def _meta(cell, grade_id, solution=False, grade=False, locked=False, points=None):
    md = {"grade_id": grade_id, "solution": solution, "grade": grade, "locked": locked, "schema_version": SCHEMA}
    if points is not None:
        md["points"] = points
    cell.metadata["nbgrader"] = md
    return cell


def _split(source):
    """(answer, checks) of a marked solution cell: the lines up to the last END SOLUTION, and the rest (or None
    when nothing but blank lines follows)."""
    lines = source.splitlines()
    ends = [i for i, line in enumerate(lines) if line.strip() == course.END]
    if not ends:
        return source, None
    cut = ends[-1] + 1
    rest = "\n".join(lines[cut:]).strip("\n")
    return "\n".join(lines[:cut]), (rest if rest.strip() else None)


def _slug(exercise, i):
    return exercise.lower().replace("exercise ", "ex") if exercise else f"cell{i}"


def source_notebook(nb):
    """A copy of ``nb`` (a course notebook) with nbgrader metadata (module docstring), exercise outputs cleared and
    the course's own tags kept; the points of its test cells are set by ``rubric``."""
    nb = copy.deepcopy(nb)
    cells, owner = [], course.exercise_of(nb)
    used = set()

    def gid(base):
        name, k = base, 2
        while name in used:
            name, k = f"{base}-{k}", k + 1
        used.add(name)
        return name

    for i, (cell, exercise) in enumerate(zip(nb.cells, owner)):
        cell.metadata.pop("execution", None)
        slug = _slug(exercise, i)
        if cell.cell_type == "code" and (exercise is not None or course.is_solution(cell)):
            cell.outputs, cell.execution_count = [], None
        if not course.is_solution(cell):
            cells.append(cell)
            continue
        if cell.cell_type == "markdown":
            cells.append(_meta(cell, gid(f"{slug}-written"), solution=True, grade=True, points=0))
            continue
        answer, checks = _split(cell.source)
        cell.source = answer
        cells.append(_meta(cell, gid(f"{slug}-answer"), solution=True))
        if checks is not None:
            test = nbformat.v4.new_code_cell(checks)
            test.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if t != course.SOLUTION_TAG]
            cells.append(_meta(test, gid(f"{slug}-check"), grade=True, locked=True, points=0))
    nb.cells = cells
    for exercise, ids in _tests(nb).items():
        share = [POINTS // len(ids) + (1 if k < POINTS % len(ids) else 0) for k in range(len(ids))]
        for cell_id, p in zip(ids, share):
            _by_id(nb, cell_id).metadata["nbgrader"]["points"] = p
    return nb


def _by_id(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _tests(nb):
    """{exercise: [grade_id of each autograder test cell]} in notebook order."""
    out = {}
    for cell, exercise in zip(nb.cells, course.exercise_of(nb)):
        md = cell.metadata.get("nbgrader", {})
        if md.get("grade") and not md.get("solution"):
            out.setdefault(exercise or md["grade_id"], []).append(md["grade_id"])
    return out


def rubric(nb):
    """The points of one lesson from its nbgrader source notebook (``source_notebook``): ``{"exercises": {name:
    {grade_id: points}}, "ungraded": [exercises without a test cell], "total": points}``."""
    exercises = {}
    for cell, exercise in zip(nb.cells, course.exercise_of(nb)):
        md = cell.metadata.get("nbgrader", {})
        if md.get("grade") and not md.get("solution"):
            exercises.setdefault(exercise or md["grade_id"], {})[md["grade_id"]] = md["points"]
    named = [e for e in dict.fromkeys(course.exercise_of(nb)) if e is not None]
    return {"exercises": exercises, "ungraded": [e for e in named if e not in exercises],
            "total": sum(p for e in exercises.values() for p in e.values())}


def _nbgrader(args, root, check=True, extra_env=None):
    """Run ``nbgrader ARGS`` in the course directory ``root`` (a subprocess: nbgrader is an application)."""
    if not nbgrader_available():
        raise InputError("course release needs nbgrader: pip install 'nbgrader>=0.9,<0.10' (the [dev] extra has it)")
    # nbgrader runs `alembic` from PATH: this interpreter's bin folder first, so that an environment used without
    # being activated works
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
    env.update(extra_env or {})
    run = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True, text=True, env=env)
    if check and (run.returncode != 0 or "Exception while loading config file" in run.stderr):
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    return run


def lesson_id(name):
    """The nbgrader assignment of a lesson: its file name without ``.ipynb``."""
    return name[:-len(".ipynb")]


def release(out_dir, notebooks=None, names=None, generate=True):
    """Write an nbgrader course directory into ``out_dir`` (module docstring) for every lesson (``names``: only
    these) and generate each assignment's release; returns ``{lesson: rubric}`` (also in ``rubric.json``)."""
    src = course.notebooks_dir(notebooks)
    root = Path(out_dir).resolve()
    if root.exists() and not root.is_dir():
        raise InputError(f"out_dir must be a folder, got the file {str(root)!r}")
    order = course.lessons(src)
    unknown = sorted(set(names or ()) - set(order))
    if unknown:
        raise InputError(f"names must be lessons of the syllabus, got {unknown}")
    root.mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    rubrics = {}
    for name in (order if names is None else [n for n in order if n in names]):
        raw = read_notebook(src / name)
        try:               # unbalanced solution markers: one line naming the lesson and the cell
            course.student_notebook(raw)
        except InputError as e:
            raise InputError(f"{name}: {e}") from None
        nb = source_notebook(raw)
        folder = root / "source" / lesson_id(name)
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / name)
        rubrics[lesson_id(name)] = rubric(nb)
    path = root / "rubric.json"         # a release of some lessons keeps the others' entries
    merged = {**(json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}), **rubrics}
    path.write_text(json.dumps({k: merged[k] for k in map(lesson_id, order) if k in merged}, indent=1) + "\n",
                    encoding="utf-8")
    if generate:     # one nbgrader run for them all: its start-up is seconds
        _nbgrader(["generate_assignment", next(iter(rubrics)) if len(rubrics) == 1 else "*", "--force"], root)
    return rubrics


def submit(root, lesson, student, fill_answers=False):
    """Put the released notebook of ``lesson`` into ``root/submitted/<student>/<lesson>/`` as a student would hand
    it in: untouched, or (``fill_answers``) with every answer cell holding the source's solution. For tests and
    for trying the pipeline; real submissions come through ``nbgrader collect`` or the exchange."""
    root = Path(root)
    name = lesson + ".ipynb"
    nb = read_notebook(root / "release" / lesson / name)
    if fill_answers:
        ref = read_notebook(root / "source" / lesson / name)
        answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in ref.cells
                   if c.metadata.get("nbgrader", {}).get("solution")}
        for cell in nb.cells:
            md = cell.metadata.get("nbgrader", {})
            if md.get("solution"):
                cell.source = answers[md["grade_id"]]
    folder = root / "submitted" / student / lesson
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    return folder / name


def autograde(root, lesson, students=None, unsafe=False, check=True):
    """``nbgrader autograde`` of ``lesson`` (``--student`` each of ``students``, else everyone submitted), each
    submission in the sandbox (``minimal.course.grader.SandboxedExecute``, set by the course's ``nbgrader_config.py``)."""
    from .grader import UNSAFE_ENV

    args = ["autograde", lesson, "--force"]
    if students:
        args += ["--CourseDirectory.student_id=" + (students[0] if len(students) == 1 else "*")]
    return _nbgrader(args, root, check=check, extra_env={UNSAFE_ENV: "1" if unsafe else "0"})


def _check_course(root, lesson):
    root = Path(root)
    if not (root / "nbgrader_config.py").is_file():
        raise InputError(f"COURSE must be a course folder written by `python -m minimal course release`, but "
                         f"{str(root)!r} has no nbgrader_config.py")
    if not (root / "source" / lesson).is_dir():
        known = sorted(p.name for p in (root / "source").iterdir()) if (root / "source").is_dir() else []
        raise InputError(f"LESSON must be one of the course's lessons {known}, got {lesson!r}")
    return root


def grade(root, lesson, unsafe=False, log=print):
    """``python -m minimal course grade COURSE LESSON``: the reference run (once per version of the lesson),
    ``nbgrader autograde`` of every submission in the sandbox, ``nbgrader generate_feedback`` with no hidden check
    and MathJax beside every page. Returns ``{student: (score, max_score)}``."""
    from . import grader, sandbox

    root = _check_course(root, lesson).resolve()
    kind, sentence = sandbox.isolation()
    if kind is None and not unsafe:
        raise InputError(f"no sandbox for student code on this machine: {sentence}. Without one a submission runs "
                         f"with your rights (it can read the solutions and write the gradebook); install it, or pass "
                         f"--unsafe for work you trust")
    log(f"isolation: {sentence if kind else 'NONE (--unsafe): ' + sentence}")
    students = sorted(p.parent.name for p in (root / "submitted").glob(f"*/{lesson}")) \
        if (root / "submitted").is_dir() else []
    if not students:
        raise InputError(f"no submission of {lesson} in {root / 'submitted'}/<student>/{lesson}/")
    grader.reference_run(root, lesson)
    # one submission nbgrader cannot process (a broken notebook) must not stop the grading of the others
    for step, run in (("autograde", autograde(root, lesson, unsafe=unsafe, check=False)),
                      ("generate_feedback", _nbgrader(["generate_feedback", lesson, "--force"], root, check=False))):
        if run.returncode != 0:
            failed = sorted(set(re.findall(r"(?:Failed|failed)[^\n]*?'?([\w.-]+)'? ?/ ?" + re.escape(lesson),
                                           run.stderr)))
            log(f"nbgrader {step} reported errors" + (f" for {', '.join(failed)}" if failed else "") +
                f" (its log, last lines: {' | '.join(run.stderr.strip().splitlines()[-3:])[-600:]})")
    folder, url, _ = local_mathjax()
    for page in (root / "feedback").glob(f"*/{lesson}"):
        if folder is None:
            continue
        if not (page / "mathjax").exists():
            try:
                shutil.copytree(folder, page / "mathjax", copy_function=os.link)   # hard links: no copies
            except OSError:
                shutil.rmtree(page / "mathjax", ignore_errors=True)
                shutil.copytree(folder, page / "mathjax")
        for html in page.glob("*.html"):   # nbgrader's feedback template names MathJax's CDN whatever is configured
            text = html.read_text(encoding="utf-8")
            text = re.sub(r'src="https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/[^"]*"', f'src="{url}"', text)
            html.write_text(text, encoding="utf-8")
    result = scores(root, lesson)
    for student, (score, top) in sorted(result.items()):
        log(f"{student}: {score:g} / {top:g}")
    return result


def scores(root, lesson):
    """``{student: (score, max_score)}`` of ``lesson`` from the course's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(root).resolve() / 'gradebook.db'}") as gb:
        a = gb.find_assignment(lesson)
        return {s.student.id: (s.score, s.max_score) for s in a.submissions}


def cell_scores(root, lesson, student):
    """``{grade_id: (score, max_score)}`` of every graded cell of one submission (a written answer not graded
    yet: score None)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(root).resolve() / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(lesson, lesson, student)
        return {g.name: (g.score if g.score is not None or g.auto_score is None else g.auto_score, g.max_score)
                for g in nb.grades}


def selftest(path, out=None):
    """Run the lesson at ``path`` as the reference (twice) and as its untouched release, judge both; returns
    ``{grade_id: (reference verdict, untouched verdict)}``. No sandbox: for the lesson's author."""
    from . import grader, judge

    path = Path(path).resolve()
    src = source_notebook(read_notebook(path))
    judge.rules(src)   # fails early on a test cell without a record
    work = Path(out or tempfile.mkdtemp(prefix="minimal-selftest-"))
    ref_nb = copy.deepcopy(src)
    grader.execute(ref_nb, path.parent, work / "ref")
    untouched = copy.deepcopy(src)
    for cell in untouched.cells:
        md = cell.metadata.get("nbgrader", {})
        if md.get("solution") and cell.cell_type == "code":
            cell.source = course.strip_solution(cell.source, course.CODE_STUB)
    grader.execute(untouched, path.parent, work / "untouched")
    ref_v = judge.judge(src, work / "ref", work / "ref")
    un_v = judge.judge(src, work / "ref", work / "untouched")
    return {g: (ref_v[g], un_v[g]) for g in ref_v}


def _main(argv):
    for path in argv:
        t0 = time.perf_counter()
        res = selftest(path)
        bad = {g: v for g, v in res.items() if not v[0].passed or v[1].passed}
        for g, (r, u) in res.items():
            print(f"{Path(path).name} {g}: reference {'PASS' if r.passed else 'FAIL: ' + r.message}; "
                  f"untouched {'PASS (wrong!)' if u.passed else 'fails: ' + u.message}")
        print(f"{Path(path).name}: {len(res) - len(bad)} of {len(res)} checks judged as intended "
              f"({time.perf_counter() - t0:.0f} s)")
        if bad:
            return 1
    return 0


if __name__ == "__main__":      # python -m minimal.course.assignments NOTEBOOK ...: the lesson author's check
    sys.exit(_main(sys.argv[1:]))
