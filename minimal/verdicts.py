"""The verdict of one row of a results page (``minimal.report``): our number against the paper's, under a tolerance.

Verdicts (``judge``). First the tolerance (the module's ``TOLERANCE``: key -> ``Tolerance``, else the default):
    "rel"      |ours / paper - 1| <= match: matches; <= close: close; else differs   (default 5% / 25%)
    "at_most"  ours <= paper * (1 + match): matches; <= paper * close: close (lower is better: losses, errors)
    "log10"    |log10(ours / paper)| <= match decades: matches; <= close: close     (quantities like 5e-8)
    "exact"    ours == paper: matches; |ours - paper| <= close: close                 (counts, orderings)
    "error"    the worse of "rel" on the accuracy and "rel" on the error rate 100 - x    (accuracies in %)
Integers and booleans default to "exact" with close = 0. A list is compared entry by entry (worst verdict).
Then three refinements, in order:
    printed precision   a number the paper prints (at most 4 significant digits, e.g. 33 or 0.206) is matched by
                        ours rounded the same way: 33.33 matches 33 (``printed_match``). Derived ratios such as
                        0.206 / 0.207 have no printed precision and keep the tolerance alone. A float loses
                        trailing zeros (0.10 reads as 0.1, matched within 0.05): give such a number a TOLERANCE.
                        A paper value that encodes a claim, not a printed number (1.0 for "GRIL matches GD"),
                        gets a Tolerance with ``printed=False``: the tolerance alone decides.
    better              a "close" / "differs" row on the better side of the paper (the experiment's ``BETTER``:
                        key pattern -> "lower" / "higher"; "at_most" tolerances are lower-is-better) reads
                        "better than the paper"; an experiment declares BETTER only where the row's note says
                        what made the number better (an easier task, not a better model).
    quick               in a quick run, a "close" / "differs" row the experiment declares out of a quick run's
                        reach (``QUICK_UNREACHABLE``) reads "not reached by a quick run", not "differs".
"""
from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["Tolerance", "VERDICTS", "VOCABULARY", "TOLERANCE_RULE", "BETTER", "QUICK", "verdict", "judge",
           "printed_match", "vocabulary_markdown", "default_tolerance"]

_ORDER = {"matches": 0, "close": 1, "differs": 2, "n/a": 3}
BETTER, QUICK = "better than the paper", "not reached by a quick run"
VERDICTS = ("matches", "close", "differs", BETTER, QUICK, "n/a")   # the order of counts and summaries

# The one definition of the verdict words: every results page, the index and the README print it as it stands here
# (tests/test_report.py checks the README against it).
VOCABULARY = (
    ("matches", "our number is within the row's first tolerance of the paper's, or equal to it at the precision "
                "the paper prints (33.33 matches 33)."),
    ("close", "outside the first tolerance, within the second."),
    ("differs", "outside both tolerances."),
    (BETTER, "outside the first tolerance on the side the paper counts as better (a lower loss, a higher "
             "accuracy); the row's note says what made it so, such as an easier task, which is not a claim of a "
             "better model."),
    (QUICK, "a quick run's row outside the first tolerance that its experiment declares beyond a quick run's "
            "reach; the full run is judged by the same tolerances."),
    ("n/a", "no number to compare."),
)
TOLERANCE_RULE = ("Tolerances: ±5% (matches) / ±25% (close) of the paper's number unless the row names another; a "
                  "paper number gets the same tolerance in every experiment of a work that reports it. Every row "
                  "that does not match has a note on its work's page that says why, and the lesson (notebook) "
                  "that shows it.")


def vocabulary_markdown():
    """The verdict words and the tolerance rule as Markdown: one bullet per word, then the rule."""
    return "\n".join([*(f"- **{word}**: {text}" for word, text in VOCABULARY), "", TOLERANCE_RULE])


class Tolerance(NamedTuple):
    kind: str = "rel"      # "rel", "at_most", "log10", "exact" or "error" (rel on x and on 100 - x: accuracies)
    match: float = 0.05
    close: float = 0.25
    printed: bool = True   # False: the paper value encodes a claim (1.0 = "matches GD"), not a number it prints

    def describe(self):
        if self.kind == "rel":
            return f"±{100 * self.match:g}% / ±{100 * self.close:g}%"
        if self.kind == "error":
            return f"±{100 * self.match:g}% / ±{100 * self.close:g}% of the accuracy and of the error rate (100 - %)"
        if self.kind == "at_most":
            return f"<= paper x {1 + self.match:g} / x {self.close:g}"
        if self.kind == "log10":
            return f"{self.match:g} / {self.close:g} decades"
        return "equal" if self.close == 0 else f"equal / ±{self.close:g}"


def default_tolerance(paper):
    """The tolerance of a row that names none: "exact" (close = 0) for integers and booleans, else ``Tolerance()``."""
    if isinstance(paper, bool) or isinstance(paper, int):
        return Tolerance("exact", 0.0, 0.0)
    return Tolerance()


def _one(paper, ours, tol):
    try:
        p, o = float(paper), float(ours)
    except (TypeError, ValueError):
        return "n/a"
    if math.isnan(o) or math.isnan(p):
        return "n/a"
    if tol.kind == "exact":
        d = abs(o - p)
        return "matches" if d == 0 else "close" if d <= tol.close else "differs"
    if tol.kind == "at_most":
        if p <= 0:
            return "n/a"
        return "matches" if o <= p * (1 + tol.match) else "close" if o <= p * tol.close else "differs"
    if tol.kind == "log10":
        if p <= 0 or o <= 0:
            return "n/a"
        d = abs(math.log10(o / p))
        return "matches" if d <= tol.match else "close" if d <= tol.close else "differs"
    if tol.kind == "error":   # an accuracy must hold both as itself and as an error rate (99.5 vs 95.9: 8x the errors)
        on_accuracy, on_error = _one(p, o, tol._replace(kind="rel")), _one(100.0 - p, 100.0 - o, tol._replace(kind="rel"))
        return max(on_accuracy, on_error, key=_ORDER.get)
    if p == 0:
        return "n/a"
    d = abs(o / p - 1.0)
    return "matches" if d <= tol.match else "close" if d <= tol.close else "differs"


def _printed_step(paper):
    """The unit in the last printed place of a paper number (33 -> 1, 0.206 -> 0.001, 4.97e-8 -> 1e-10), or None
    for a number with more than 4 significant digits (a ratio we derived, not a number the paper prints)."""
    if isinstance(paper, bool) or not isinstance(paper, (int, float)) or not math.isfinite(paper):
        return None
    if isinstance(paper, int):
        return 1.0
    mantissa, _, exp = repr(paper).partition("e")
    digits = mantissa.replace("-", "").replace(".", "").lstrip("0") or "0"
    if len(digits) > 4:
        return None
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def printed_match(paper, ours):
    """True when ``ours`` rounded to the paper's printed precision is the paper's number (33.33 vs 33)."""
    step = _printed_step(paper)
    try:
        o = float(ours)
    except (TypeError, ValueError):
        return False
    return step is not None and math.isfinite(o) and abs(o - paper) <= 0.5 * step * (1 + 1e-9)


def verdict(paper, ours, tol=None):
    """"matches", "close", "differs" or "n/a" (no comparable number) for one metric: the tolerance, then the
    paper's printed precision (module docstring)."""
    tol = default_tolerance(paper) if tol is None else tol
    if isinstance(paper, (list, tuple)):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(paper):
            return "n/a"
        return max((verdict(p, o, tol) for p, o in zip(paper, ours)), key=_ORDER.get, default="n/a")
    v = _one(paper, ours, tol)
    return "matches" if v in ("close", "differs") and tol.printed and printed_match(paper, ours) else v


def _better(paper, ours, direction):
    try:
        p, o = float(paper), float(ours)
    except (TypeError, ValueError):
        return False
    return (direction == "lower" and o < p) or (direction == "higher" and o > p)


def judge(paper, ours, tol=None, better=None, unreachable=False):
    """The row's verdict (module docstring): ``verdict``, then "better than the paper" when ``better``
    ("lower" / "higher") says ours is on the good side, then "not reached by a quick run" when ``unreachable``."""
    tol = default_tolerance(paper) if tol is None else tol
    v = verdict(paper, ours, tol)
    if v not in ("close", "differs"):
        return v
    better = "lower" if better is None and tol.kind == "at_most" else better
    if better and not isinstance(paper, (list, tuple)) and _better(paper, ours, better):
        return BETTER
    return QUICK if unreachable else v
