"""The course's nbgrader round trip, headless: ``course release`` builds the nbgrader course directory and generates
every lesson's assignment; for each lesson the reference solutions (the release with every answer cell filled from
the source) and the untouched release are submitted and ``nbgrader autograde``d; the reference must get the rubric's
full points in every test cell and the untouched release 0.

Autograding executes each submitted notebook whole, so a lesson costs about two runs of itself. Measured on the
shared 2-core machine under load (2026-11-27, load average ~15), all 15 lessons: 17 passed in 8.5 minutes (every
reference 30 or 40 points of 30 or 40, every untouched release 0; 570 points in all). Per lesson (the pair of
autogrades): zucchet_d 82 s, kernel 74, zucchet_e 70, gril_c 59, zucchet_f 46 (``SLOW``: only with
``MINIMAL_ROUND_TRIP=all``), then minrnn_c 27, minrnn_d 22, zucchet_b 18, zucchet_c 17, zucchet_a 17, gril_b 13,
minrnn_b 11, minrnn_a 11, gril_a 9, gril_d 9; ``course release`` of all 15: 23 s. The default run, ten lessons,
took 2.7 minutes (12 passed, 5 skipped; load ~10).
Skipped, with the reason in pytest's summary, where nbgrader is not installed (it is
in the ``[dev]`` extra)."""
import os
import re
import warnings

import nbformat
import pytest

from minimal.course import assignments as A
from minimal.course import build as course
from minimal.course import sandbox

if not A.nbgrader_available():
    warnings.warn("NBGRADER ROUND TRIP SKIPPED: nbgrader is not installed (pip install -e '.[dev]')")
pytestmark = pytest.mark.skipif(not A.nbgrader_available(),
                                reason="NBGRADER ROUND TRIP SKIPPED: nbgrader is not installed (the [dev] extra)")

LESSONS = [A.lesson_id(n) for n in course.lessons()]
# the pair of autogrades took more than ~45 s here (module docstring): opt-in with MINIMAL_ROUND_TRIP=all
SLOW = {"kernel_attention_is_an_rnn", "zucchet_d_teacher_student", "zucchet_e_in_context_regression",
        "zucchet_f_architectures", "gril_c_trained_vs_gd"}
ALL = os.environ.get("MINIMAL_ROUND_TRIP") == "all"
# exercises with no autograded check (a written answer only): none; such an exercise would carry no points
UNGRADED = {}


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    return root, A.release(root)


def _release(root, lesson):
    return nbformat.read(root / "release" / lesson / f"{lesson}.ipynb", as_version=4)


def test_the_release_withholds_every_solution_and_hidden_check(released):
    root, rubrics = released
    assert sorted(rubrics) == sorted(LESSONS)
    for lesson in LESSONS:
        src = nbformat.read(root / "source" / lesson / f"{lesson}.ipynb", as_version=4)
        rel = _release(root, lesson)
        text = "\n".join(c.source for c in rel.cells)
        assert course.BEGIN not in text and course.END not in text and A.HIDDEN_BEGIN not in text, lesson
        answers = [c for c in rel.cells if c.metadata.get("nbgrader", {}).get("solution")]
        assert answers and all(course.NOT_DONE in c.source or course.TEXT_STUB in c.source for c in answers), lesson
        # no output of an exercise in the release; the lesson's own figures stay
        for cell, exercise in zip(rel.cells, course.exercise_of(rel)):
            assert exercise is None or cell.cell_type != "code" or not cell.get("outputs"), (lesson, exercise)
        assert any(c.get("outputs") for c in rel.cells if c.cell_type == "code"), lesson
        # every test cell is locked and worth points; the rubric is POINTS per exercise with a check
        tests = [c.metadata.nbgrader for c in src.cells if c.metadata.get("nbgrader", {}).get("grade")
                 and not c.metadata.nbgrader.get("solution")]
        assert tests and all(t["locked"] and t["points"] > 0 for t in tests), lesson
        r = rubrics[lesson]
        assert r["ungraded"] == UNGRADED.get(lesson, []), lesson
        assert r["total"] == A.POINTS * len(r["exercises"]) == sum(t["points"] for t in tests), lesson
    assert sum(r["total"] for r in rubrics.values()) == A.POINTS * (57 - sum(map(len, UNGRADED.values())))


def test_every_failing_check_says_what_it_expected(released):
    """A bare ``assert x`` gives a student ``AssertionError:`` and nothing else: every assert of a test cell carries
    a message."""
    root, _ = released
    bare = []
    for lesson in LESSONS:
        src = nbformat.read(root / "source" / lesson / f"{lesson}.ipynb", as_version=4)
        for c in src.cells:
            md = c.metadata.get("nbgrader", {})
            if md.get("grade") and not md.get("solution"):
                bare += [f"{lesson} {md['grade_id']}: {s.strip()[:60]}" for s in _asserts(c.source)
                         if not _has_message(s)]
    assert bare == [], f"{len(bare)} checks without a message in words, e.g. {bare[:3]}"


def test_every_check_records_its_answers_and_prints_nothing_before_judging_them(released):
    """Each test cell hands its answers to the grader (``grading.record``, judged outside the kernel) and shows no
    measured value before its first assert: a failing prediction must not print the answer on its way out."""
    import ast

    from minimal.course import judge

    root, _ = released
    early = []
    for lesson in LESSONS:
        src = nbformat.read(root / "source" / lesson / f"{lesson}.ipynb", as_version=4)
        for grade_id, rs in judge.rules(src).items():       # raises on a test cell without a record
            assert rs, (lesson, grade_id)
        for c in src.cells:
            md = c.metadata.get("nbgrader", {})
            if not (md.get("grade") and not md.get("solution")):
                continue
            body = ast.parse(re.sub(r"(?m)^\s*[%!].*$", "", c.source)).body
            kinds = [("assert" if any(isinstance(n, ast.Assert) for n in ast.walk(st)) else
                      "show" if any(_shows(n) for n in ast.walk(st)) else "") for st in body
                     if not isinstance(st, (ast.FunctionDef, ast.ClassDef))]
            shown = [k for k in kinds if k]
            if shown and shown[0] == "show":
                early.append(f"{lesson} {md['grade_id']}")
    assert early == [], f"check cells that print or plot before their first assert: {early}"


def _shows(node):
    """A call that prints, displays or draws."""
    import ast

    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Name):
        return f.id in ("print", "display")
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("plt", "ax", "fig", "axes")


def _asserts(source):
    """Each assert statement of ``source`` (continuation lines joined)."""
    import ast

    tree = ast.parse(re.sub(r"(?m)^\s*[%!].*$", "", source))
    return [ast.get_source_segment(source, node) or "" for node in ast.walk(tree) if isinstance(node, ast.Assert)
            ] if tree else []


def _has_message(stmt):
    import ast

    try:
        node = ast.parse(stmt.strip()).body[0]
    except SyntaxError:
        return True
    return isinstance(node, ast.Assert) and isinstance(node.msg, (ast.Constant, ast.JoinedStr))   # words, not a value


@pytest.mark.parametrize("lesson", [
    pytest.param(n, marks=[pytest.mark.slow] + ([] if ALL else [pytest.mark.skip(
        reason="slow round trip: MINIMAL_ROUND_TRIP=all runs it")])) if n in SLOW else n for n in LESSONS])
def test_reference_solutions_get_full_points_and_the_release_none(released, lesson):
    root, rubrics = released
    A.submit(root, lesson, "reference", fill_answers=True)
    A.submit(root, lesson, "untouched")
    A.autograde(root, lesson, unsafe=sandbox.isolation()[0] is None)    # the reference is trusted work
    total = rubrics[lesson]["total"]
    ref = A.cell_scores(root, lesson, "reference")
    lost = {k: v for k, v in ref.items() if v[1] > 0 and v[0] != v[1]}
    assert not lost, f"{lesson}: the reference solutions lose points in {lost}"
    untouched = A.cell_scores(root, lesson, "untouched")
    won = {k: v for k, v in untouched.items() if v[0]}
    assert not won, f"{lesson}: the untouched release scores in {won} (a check that passes without an answer)"
    assert A.scores(root, lesson) == {"reference": (total, total), "untouched": (0, total)}
