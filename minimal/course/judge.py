"""The verdict of a check, reached outside the student's kernel from data alone.

Each check cell of a lesson records the student's answers with ``grading.record(CHECK, name=value, ...)`` (see
``minimal.course.grading``). The instructor's copy of the lesson says how each record is judged, in the keywords of that
call, which ``rules(nb)`` reads from the source with ``ast`` (nothing of the submission is read as code):

- no ``rule``: every recorded value equals the reference run's value of the same name: same shape, strings and
  True/False exactly, numbers within ``rtol`` (default 1e-8) of the largest reference magnitude, plus ``atol``;
- ``rule="EXPR"``: for exercises with many right answers, the Python expression EXPR, evaluated in the grader's
  process with the student's values as names, ``ref`` (the reference run's values of this check), ``np`` and
  ``module`` (``importlib.import_module``) for the library's functions; the check passes when it is true;
- ``message="..."``: the sentence the student reads when the check fails (it says what was expected, never the
  answer).

The student's values are read from ``<check>.npz`` files of at most ``MAX_BYTES``, with ``allow_pickle=False`` and
only number, bool and string arrays accepted: a submission can write those files, but only as data, and a file it
forged holds the right answer only if the student computed it. ``judge(nb, reference_dir, student_dir)`` returns
``{grade_id: Verdict}`` for every autograder test cell of the source notebook ``nb``.
"""
from __future__ import annotations

import ast
import importlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Rule", "Verdict", "rules", "load", "judge", "MAX_BYTES"]

MAX_BYTES = 64 * 2 ** 20          # one check's answers; the largest reference record is far below this
DEFAULT_RTOL = 1e-8
DEFAULT_MESSAGE = "your answer is not the one this check expects: read the exercise again"
_KW = ("rule", "rtol", "atol", "message")


@dataclass(frozen=True)
class Rule:
    check: str
    names: tuple
    rule: str | None = None
    rtol: float = DEFAULT_RTOL
    atol: float = 0.0
    message: str = DEFAULT_MESSAGE


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str


def _is_record(node):
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "record" and isinstance(f.value, ast.Name)
            and f.value.id == "grading") or (isinstance(f, ast.Name) and f.id == "record")


def cell_rules(source):
    """The ``Rule`` of every ``grading.record`` call in one cell's source, in order."""
    import re

    tree = ast.parse(re.sub(r"(?m)^\s*[%!].*$", "", source))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_record(node):
            if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
                raise ValueError(f"grading.record needs the check's name as a string first: {ast.unparse(node)}")
            kw = {k.arg: k.value for k in node.keywords}
            lit = {k: ast.literal_eval(kw[k]) for k in _KW if k in kw}
            if "rule" in lit:
                compile(lit["rule"], "<rule>", "eval")
            out.append(Rule(node.args[0].value, tuple(k for k in kw if k not in _KW), lit.get("rule"),
                            float(lit.get("rtol", DEFAULT_RTOL)), float(lit.get("atol", 0.0)),
                            lit.get("message", DEFAULT_MESSAGE)))
    return out


def _test_cells(nb):
    for cell in nb.cells:
        md = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and md.get("grade") and not md.get("solution"):
            yield md["grade_id"], cell


def rules(nb):
    """``{grade_id: [Rule, ...]}`` of every autograder test cell of an nbgrader source notebook; a test cell without a
    record, or a check name used twice, is a ValueError (the lesson must be fixed)."""
    out, seen = {}, set()
    for grade_id, cell in _test_cells(nb):
        hidden = cell.source.split("### BEGIN HIDDEN TESTS", 1)[1] if "### BEGIN HIDDEN TESTS" in cell.source else ""
        if cell_rules(hidden.split("### END HIDDEN TESTS", 1)[0]) if hidden else False:
            raise ValueError(f"test cell {grade_id} records an answer inside a hidden check: the grader sends no "
                             f"hidden check into the sandbox, so move the record above it")
        rs = cell_rules(cell.source)
        if not rs:
            raise ValueError(f"test cell {grade_id} records no answer (grading.record): it cannot be graded")
        for r in rs:
            if r.check in seen:
                raise ValueError(f"check {r.check!r} is recorded twice")
            seen.add(r.check)
        out[grade_id] = rs
    return out


def load(folder, check):
    """The values recorded for ``check`` in ``folder`` as ``{name: array or scalar}`` (dicts rebuilt from dotted
    names), or None when there is no such file; a file that is too large, not an npz of plain arrays, or holds
    objects is a ValueError."""
    path = Path(folder) / f"{check}.npz"
    if not path.is_file() or path.is_symlink():
        return None
    if path.stat().st_size > MAX_BYTES:
        raise ValueError("the recorded answer is too large")
    try:
        with zipfile.ZipFile(path) as z:
            if sum(i.file_size for i in z.infolist()) > MAX_BYTES:
                raise ValueError("the recorded answer is too large")
        with np.load(path, allow_pickle=False) as f:
            flat = {}
            for k in f.files:
                with f.zip.open(f"{k}.npy") as member:     # the header's shape, before anything is allocated
                    version = np.lib.format.read_magic(member)
                    if version not in ((1, 0), (2, 0)):
                        raise ValueError("the recorded answer is not a plain .npy array")
                    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                        np.lib.format.read_array_header_2_0
                    shape, _, dtype = read(member)
                if dtype.itemsize * int(np.prod(shape, dtype=object)) > MAX_BYTES:
                    raise ValueError("the recorded answer is too large")
                flat[k] = f[k]
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"the recorded answer cannot be read ({type(e).__name__})") from None
    out = {}
    for key, arr in flat.items():
        if arr.dtype.kind not in "biufU":
            raise ValueError(f"the recorded answer {key!r} is not numbers, True/False or text")
        value = arr.item() if arr.ndim == 0 else arr
        node, *rest = key.split(".")
        if rest:
            d = out.setdefault(node, {})
            for part in rest[:-1]:
                d = d.setdefault(part, {})
            if not isinstance(d, dict):
                raise ValueError(f"the recorded answer {key!r} is both a value and a group")
            d[rest[-1]] = value
        else:
            out[key] = value
    return out


def _same(s, r, rtol, atol):
    if isinstance(r, dict):
        return isinstance(s, dict) and s.keys() == r.keys() and all(_same(s[k], r[k], rtol, atol) for k in r)
    s, r = np.asarray(s), np.asarray(r)
    if s.shape != r.shape:
        return False
    if r.dtype.kind in "bU" or s.dtype.kind in "bU":
        return s.dtype.kind == r.dtype.kind and bool(np.all(s == r))
    s, r = s.astype(np.float64), r.astype(np.float64)
    if not np.all(np.isfinite(s) == np.isfinite(r)) or not np.all(s[~np.isfinite(s)] == r[~np.isfinite(r)]):
        return False
    fin = np.isfinite(r)
    if not fin.any():
        return True
    scale = float(np.max(np.abs(r[fin])))
    return bool(np.max(np.abs(s[fin] - r[fin])) <= rtol * scale + atol)


def verdict(rule, reference, student):
    """One record judged: ``reference`` and ``student`` as returned by ``load``."""
    if reference is None:
        raise RuntimeError(f"the reference run recorded nothing for {rule.check!r}: run the instructor's lesson")
    if student is None:
        return Verdict(False, "not answered yet, or the cells before this check did not run")
    if rule.rule is None:
        ok = student.keys() == reference.keys() and all(_same(student[k], reference[k], rule.rtol, rule.atol)
                                                         for k in reference)
    else:
        names = {k: student[k] for k in rule.names if k in student}     # what the record call named, no more
        names.update(ref=reference, np=np, module=importlib.import_module)
        try:        # the rule is the instructor's code; the names are globals so that a comprehension sees them
            with np.errstate(all="ignore"):
                r = np.asarray(eval(compile(rule.rule, f"<rule of {rule.check}>", "eval"), names))
                ok = r.size > 0 and bool(np.all(r))       # an empty answer makes no rule true
        except Exception:          # a student's value of the wrong shape or kind: the rule cannot hold
            ok = False
    return Verdict(ok, "passed" if ok else rule.message)


def judge(nb, reference_dir, student_dir):
    """``{grade_id: Verdict}`` for every test cell of the source notebook ``nb``: passed when every record of the
    cell passes; the first failing record's message otherwise."""
    out = {}
    for grade_id, rs in rules(nb).items():
        result = Verdict(True, "passed")
        for r in rs:
            reference = load(reference_dir, r.check)       # the instructor's: an error here is the lesson's
            try:
                v = verdict(r, reference, load(student_dir, r.check))
            except ValueError as e:
                v = Verdict(False, str(e))
            except Exception:      # a forged record (a dotted name over a plain one, a header of 10^15 items...)
                v = Verdict(False, "the recorded answer cannot be read as numbers, True/False or text")
            if not v.passed:
                result = v
                break
        out[grade_id] = result
    return out
