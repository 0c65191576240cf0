"""What an exercise's check cell hands to the grader: the student's answers as plain data.

A check cell of a lesson starts with ``grading.record("ex1", predicted_rank=predicted_rank)``. In the student's own
kernel (JupyterLab, the student edition) ``record`` does two things: it says "not answered yet" for an answer left
``None`` (a ``NotAnswered``, an ``AssertionError``, so the cell's checks stop with that sentence), and it returns the
answers in one canonical form, so that the cell's own checks accept every form a right answer naturally takes:

- ``True`` / ``False`` (and NumPy's bools) -> a Python ``bool``;
- a number (int, float, NumPy scalar) -> a ``float``;
- a string -> the string stripped and lower-cased (a one-word answer such as ``"b"`` or ``"Lower"``);
- a list, tuple or array -> a NumPy array of floats (a nested list of numbers too), or of strings;
- a set -> the sorted array of its items (strings in a set or list keep their case: ``{"Q", "q"}`` names two
  parameters);
- a dict -> the same dict with canonical values.

Anything else (an object with its own ``__eq__``, a function) is refused with a sentence naming the answer: a check
never compares a student's object with its own ``==``.

When the grader runs a submission (``python -m minimal course grade``, ``minimal.course.grader``) it sets
``MINIMAL_GRADING_DIR``, and ``record`` also writes the canonical answers to ``<that folder>/<check>.npz`` (plain
arrays, no pickle). The grade comes from comparing that file, outside the student's kernel, with the same record of
the instructor's reference run; the rule of each check is read from the instructor's copy of the lesson, never
from the submission. So the cell's own asserts teach, and the score cannot be changed from inside the kernel: an
answer is right only if its data are.
"""
from __future__ import annotations

import numbers
import os
import re
from pathlib import Path

import numpy as np

__all__ = ["NotAnswered", "canonical", "answered", "record", "ENV"]

ENV = "MINIMAL_GRADING_DIR"
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class NotAnswered(AssertionError):
    """An answer still ``None`` (or a stub that raises): the check says "not answered yet" and scores 0."""


def canonical(value, name="answer"):
    """``value`` in the canonical form of the module docstring; a ValueError naming ``name`` for anything else."""
    if value is None:
        raise NotAnswered(f"not answered yet: write {name} in the cell above, then run it")
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, numbers.Number) and not isinstance(value, complex):
        return float(value)
    if isinstance(value, dict):
        return {str(k): canonical(v, f"{name}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        items = [v.strip() if isinstance(v, str) else canonical(v, name) for v in value]
        if all(isinstance(v, str) for v in items):
            return np.array(sorted(items), dtype=str)
        return np.sort(_floats(items, name))
    if isinstance(value, (list, tuple, np.ndarray)):
        if isinstance(value, np.ndarray) and value.dtype.kind in "US":
            return np.char.strip(value.astype(str))
        flat = list(np.asarray(value, dtype=object).ravel()) if not isinstance(value, np.ndarray) else None
        if flat is not None and flat and all(isinstance(v, str) for v in flat):
            return np.array([v.strip() for v in flat], dtype=str).reshape(np.shape(np.asarray(value, dtype=object)))
        return _floats(value, name)
    raise ValueError(f"{name} must be a number, a string, True/False, a list, tuple, set or array of numbers "
                     f"(or a dict of them), got a {type(value).__name__}")


def _floats(value, name):
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(np.float64)
    if isinstance(value, np.ndarray) and value.dtype.kind != "O":
        raise ValueError(f"{name} must hold numbers, got an array of dtype {value.dtype}")
    try:
        items = np.asarray(value, dtype=object)
        if any(not isinstance(v, (numbers.Number, np.generic)) or isinstance(v, complex) for v in items.ravel()):
            raise TypeError
        return items.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers (a list, tuple or array of equal-length rows), got "
                         f"{type(value).__name__}") from None


def answered(**answers):
    """``NotAnswered`` ("not answered yet") for the first answer still ``None``: for an answer that is a function,
    called afterwards by the check."""
    for name, value in answers.items():
        if value is None:
            raise NotAnswered(f"not answered yet: write {name} in the cell above, then run it")


def record(check, rule=None, rtol=None, atol=None, message=None, **answers):
    """The canonical ``answers`` (one value, or a tuple in the order given); written to ``$MINIMAL_GRADING_DIR/
    <check>.npz`` when the grader runs the notebook. ``rule``, ``rtol``, ``atol`` and ``message`` are read by the
    grader from the instructor's lesson (``minimal.course.grader``); here they are ignored."""
    if not _ID.match(check):
        raise ValueError(f"check must be a short name of letters, digits, '.', '_' or '-', got {check!r}")
    values = {name: canonical(value, name) for name, value in answers.items()}
    folder = os.environ.get(ENV)
    if folder:
        flat = {}
        for name, value in values.items():
            for key, v in (_flatten(name, value)):
                flat[key] = np.asarray(v)
        path = Path(folder) / f"{check}.npz"
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **flat)
        os.replace(tmp, path)
    out = tuple(values.values())
    return out[0] if len(out) == 1 else out


def _flatten(name, value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(f"{name}.{k}", v)
    else:
        yield name, value
