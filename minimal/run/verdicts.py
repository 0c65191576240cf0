"""The verdict of one row of a results page (``minimal.run.report``): our number against the paper's, under a tolerance.

Verdicts (``judge``). First the tolerance (the module's ``TOLERANCE``: key -> ``Tolerance``, else the default):
    "rel"      |ours / paper - 1| <= match: matches; <= close: close; else differs   (default 5% / 25%)
    "at_most"  ours <= paper * (1 + match): matches; <= paper * close: close (lower is better: losses, errors)
    "log10"    |log10(ours / paper)| <= match decades: matches; <= close: close     (quantities like 5e-8)
    "exact"    ours == paper: matches; |ours - paper| <= close: close                 (counts, orderings)
    "error"    the worse of "rel" on the accuracy and "rel" on the error rate 100 - x    (accuracies in %)
A number the paper gives (an int included: 175x, 575 steps, 33 %) defaults to "rel"; a count that must come out
exactly (86 pruned neurons) says so in its TOLERANCE. A list is compared entry by entry (worst verdict).
Not verdicts at all (``minimal.run.report`` lists them apart and counts none of them as a match): a yes/no claim (a
paper value True / False), which holds or does not, and a set-up count (``is_setting``: the seeds of a run),
which is how it was run, not a result.
Then four refinements, in order:
    spread              where the paper gives a spread (± one standard deviation over its seeds), the difference
                        of the means is judged against the combined spread s = sqrt(s_paper² + s_ours²): within
                        s matches, within twice s is close (``spread_verdict``); the better of this and the
                        tolerance's verdict stands, so a number inside the paper's own spread never reads "differs".
    printed precision   a number the paper prints (at most 4 significant digits, e.g. 33 or 0.206) is matched by
                        ours rounded the same way: 33.33 matches 33 (``printed_match``). Derived ratios such as
                        0.206 / 0.207 have no printed precision and keep the tolerance alone. A float loses
                        trailing zeros (0.10 reads as 0.1, matched within 0.05): give such a number a TOLERANCE.
                        A paper value that encodes a claim, not a printed number (1.0 for "GRIL matches GD"),
                        gets a Tolerance with ``printed=False``: the tolerance alone decides.
    better              a "close" / "differs" row on the better side of the paper reads "better than the
                        paper". Which side is better is declared once per metric (``direction``): the
                        experiment's ``BETTER`` (key pattern -> "lower" / "higher"), else ``DIRECTION`` (every
                        loss is lower-is-better), else "lower" for an "at_most" tolerance; every rule uses it.
                        The row's note says what made the number better (an easier task, not a better model).
    quick               in a quick run, a "close" / "differs" row the experiment declares out of a quick run's
                        reach (``QUICK_UNREACHABLE``) reads "not reached by a quick run", not "differs".
"""
from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["Tolerance", "VERDICTS", "VOCABULARY", "TOLERANCE_RULE", "BETTER", "QUICK", "verdict", "judge",
           "printed_match", "vocabulary_markdown", "default_tolerance", "DIRECTION", "direction", "is_claim",
           "is_setting", "spread_verdict", "SETTINGS"]

_ORDER = {"matches": 0, "close": 1, "differs": 2, "n/a": 3}
BETTER, QUICK = "better than the paper", "not reached by a quick run"
VERDICTS = ("matches", "close", "differs", BETTER, QUICK, "n/a")   # the order of counts and summaries

# The one definition of the verdict words: every results page, the index and the README print it as it stands here
# (tests/test_report.py checks the README against it).
VOCABULARY = (
    ("matches", "our number is within the row's first tolerance of the paper's, or equal to it at the precision "
                "the paper prints (33.33 matches 33), or, where the paper gives a spread over seeds, within one "
                "combined standard deviation of it (sqrt(paper's² + ours²))."),
    ("close", "outside the first tolerance, within the second, or within two combined standard deviations."),
    ("differs", "outside both tolerances and, where there is a spread, beyond two combined standard deviations."),
    (BETTER, "outside the first tolerance on the side the paper counts as better (a lower loss, a higher "
             "accuracy); the row's note says what made it so, such as an easier task, which is not a claim of a "
             "better model."),
    (QUICK, "a quick run's row outside the first tolerance that its experiment declares beyond a quick run's "
            "reach; the full run is judged by the same tolerances."),
    ("n/a", "no number to compare."),
)
TOLERANCE_RULE = ("Tolerances: ±5% (matches) / ±25% (close) of the paper's number unless the row names another; a "
                  "paper number gets the same tolerance in every experiment of a work that reports it. Which side "
                  "of the paper is better is declared once per metric (a loss: lower). Yes/no claims (they hold or "
                  "not) and set-up counts (seeds) are listed apart and counted in no verdict. Every row that does "
                  "not match, and every claim that does not hold, has a note on its work's page that says why, and "
                  "the lesson (notebook) that shows it.")
DIRECTION = {"*_loss": "lower", "*_loss_*": "lower", "loss": "lower", "loss_*": "lower"}   # key pattern -> side
SETTINGS = ("seeds", "*_seeds", "n_seeds")      # set-up counts: how a run was made, not what it found


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
    """The tolerance of a row that names none: "exact" (close = 0) for a yes/no claim (a bool), else
    ``Tolerance()`` (an int the paper prints, 175x or 575 steps, is a measured number like any other)."""
    if isinstance(paper, bool):
        return Tolerance("exact", 0.0, 0.0)
    return Tolerance()


def _match(key, patterns):
    import fnmatch

    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def is_claim(paper_value):
    """A yes/no claim of the paper (True / False): it holds or not; it is not a number to match."""
    return isinstance(paper_value, (bool,)) or type(paper_value).__name__ == "bool_"


def is_setting(key):
    """A set-up count (``SETTINGS``: the number of seeds): how a run was made, not a result."""
    return _match(key, SETTINGS)


def direction(key, declared=None):
    """The better side of ``key``'s metric: ``declared`` (the experiment's BETTER entry), else ``DIRECTION``'s, else
    None."""
    if declared:
        return declared
    import fnmatch

    return next((side for pattern, side in DIRECTION.items() if fnmatch.fnmatchcase(key, pattern)), None)


def spread_verdict(paper, ours, paper_spread, ours_spread=None):
    """"matches" within one combined standard deviation sqrt(s_p² + s_o²), "close" within two, else "differs";
    "n/a" without a spread or a number."""
    try:
        p, o, sp = float(paper), float(ours), float(paper_spread)
        so = 0.0 if ours_spread is None else float(ours_spread)
    except (TypeError, ValueError):
        return "n/a"
    s = math.hypot(sp, so)
    if not all(map(math.isfinite, (p, o, s))) or s <= 0:
        return "n/a"
    d = abs(o - p)
    return "matches" if d <= s else "close" if d <= 2 * s else "differs"


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


def judge(paper, ours, tol=None, better=None, unreachable=False, paper_spread=None, ours_spread=None):
    """The row's verdict (module docstring): ``verdict``, the better of it and ``spread_verdict`` where the paper
    gives a spread, then "better than the paper" when ``better`` ("lower" / "higher") says ours is on the good
    side, then "not reached by a quick run" when ``unreachable``."""
    tol = default_tolerance(paper) if tol is None else tol
    v = verdict(paper, ours, tol)
    if paper_spread is not None:
        sv = spread_verdict(paper, ours, paper_spread, ours_spread)
        if sv != "n/a" and _ORDER[sv] < _ORDER.get(v, 3):
            v = sv
    if v not in ("close", "differs"):
        return v
    better = "lower" if better is None and tol.kind == "at_most" else better
    if better and not isinstance(paper, (list, tuple)) and _better(paper, ours, better):
        return BETTER
    return QUICK if unreachable else v
