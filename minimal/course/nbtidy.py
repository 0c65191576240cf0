"""`python -m minimal course tidy [--check] NOTEBOOK...`: committed notebooks whose re-run is a small diff.

Two things in a stored notebook change on every run without changing the lesson, and make a student's or an
instructor's save rewrite a hundred lines:

- ``metadata.execution`` of each cell: the timestamps ``jupyter nbconvert --execute`` records (JupyterLab does
  not record them by default, so a save there drops them all);
- timing text in the outputs of machine-dependent cells (those marked ``# NBVAL_IGNORE_OUTPUT``): "in 14 s",
  "167.3 ms". Strict nbval does not compare these cells, so the text is noise in every diff.

``problems(nb)`` lists both; ``tidy(nb)`` removes them: it drops the execution metadata and, in a cell marked
``# NBVAL_IGNORE_OUTPUT``, every line of text output that states a duration (a stream's lines, or a text-only
result), keeping figures and every other line. A lesson should not print durations in the first place (a re-run
prints them again): the check is what keeps the committed text clean. A lesson whose subject is a measurement
(a timing table it discusses) tags those cells ``timing`` (``TIMING_TAG``): their text is kept and not reported.

A third thing changes from one machine to another: the digits of a number at float-rounding level (the error of
an exact identity, a construction's residual, analytic against finite-difference gradients). They differ with the
CPU, the BLAS kernel and the thread count, so a lesson prints such a number as the bound its assert checks
(``< 1e-12``), never with its digits. ``rounding_digits(nb)`` lists every stored number below ``TINY`` printed
with its digits rather than as a bound (a bound the code writes as a literal: one computed from the value, such
as the power of ten above it, moves with the value's digits and is listed too); ``tidy`` cannot fix that (the
lesson's code must print the bound), so it is reported apart from ``problems``. A small number that is not
rounding (a trained model's residual loss of 2.0e-10, computed from committed weights) may keep its digits when
they were measured to be the same under every BLAS kernel: its cell carries the tag ``digits-hold``
(``DIGITS_HOLD``), and strict nbval under a second kernel in CI is what keeps that claim true, so such a cell
must not be marked ``# NBVAL_IGNORE_OUTPUT``.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import nbformat

from ..validate import InputError

__all__ = ["IGNORE", "TIMING_TAG", "DIGITS_HOLD", "DURATION", "TINY", "problems", "rounding_digits", "tidy",
           "tidy_files"]

IGNORE = "NBVAL_IGNORE_OUTPUT"
TIMING_TAG = "timing"       # a cell whose printed durations are the lesson's content
# a number followed by a unit of time: "14 s", "167.3 ms", "2.5e-3 s", "12.2 min", "(9 s)", "1,500 µs"
DURATION = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:e-?\d+)?\s?(?:ns|µs|us|ms|s|sec|seconds|min|minutes|h)\b")
TINY = 1e-8   # below this, a printed number is at or near float64 rounding for the quantities the lessons check
# a number in scientific notation; the 24 characters before it on its line tell a bound ("< 1e-12") from a value
_SCI = re.compile(r"(?<![\w.])(?P<num>\d+(?:\.\d+)?[eE][-+]?\d+)")
_BOUND = re.compile(r"(<|<=|≤|>|>=|≥|\bbelow|\bunder|\bwithin|\bto|\bthan|\bbetween\s+\S+\s+and)\s*$")
DIGITS_HOLD = "digits-hold"   # cell tag: small numbers whose printed digits were measured to hold on every kernel


def _text(output):
    if output.output_type == "stream":
        return output.text
    if output.output_type in ("execute_result", "display_data") and set(output.data) == {"text/plain"}:
        return output.data["text/plain"]
    return None


def _timed(cell):
    return (cell.cell_type == "code" and IGNORE in cell.source
            and TIMING_TAG not in cell.get("metadata", {}).get("tags", []))


def problems(nb):
    """``[(cell index, what)]``: execution timestamps, and durations in the text of machine-dependent cells."""
    out = []
    for i, cell in enumerate(nb.cells):
        if "execution" in cell.metadata:
            out.append((i, "metadata.execution (run timestamps)"))
        if _timed(cell):
            for o in cell.outputs:
                text = _text(o)
                for line in (text or "").splitlines():
                    if DURATION.search(line):
                        out.append((i, f"timing text in a stored output: {line.strip()[:80]!r}"))
    return out


def _all_text(output):
    """Every text a reader sees in a stored output: a stream, or a result's plain text / Markdown."""
    if output.output_type == "stream":
        return output.text
    if output.output_type in ("execute_result", "display_data"):
        return "\n".join(str(output.data.get(k, "")) for k in ("text/plain", "text/markdown"))
    return ""


def _numbers_written(source):
    """The values of the number literals of Python ``source`` (not the digits in its comments or strings)."""
    try:
        return {float(t.string.replace("_", "")) for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type == tokenize.NUMBER and not t.string.lower().endswith("j")}
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):   # not Python (a cell magic): none
        return set()


def rounding_digits(nb):
    """``[(cell index, number, its line)]``: every stored number smaller than ``TINY`` in magnitude (and not
    zero) printed in scientific notation, in cells without the tag ``digits-hold``, other than as a bound (after
    ``<``, ``<=``, ``≤``, ``>``, ``>=``, ``≥``, "below", "under", "within", "to", "than" or "between ... and")
    whose number one of the notebook's code cells writes as a literal (a Python number, not a comment or a string).

    A bound computed from the value (the power of ten above it, say) moves with the value's digits. It is listed
    unless the same number happens to be written in the code for another purpose, so this catches most such
    bounds, not all: strict nbval under a second BLAS kernel (CI) is what catches the rest."""
    out = []
    written = set().union(*(_numbers_written(c.source) for c in nb.cells if c.cell_type == "code"))
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or DIGITS_HOLD in cell.get("metadata", {}).get("tags", []):
            continue
        for o in cell.get("outputs", []):
            for line in _all_text(o).splitlines():
                for m in _SCI.finditer(line):
                    value = abs(float(m["num"]))
                    pre = line[max(0, m.start() - 24):m.start()]
                    if 0 < value < TINY and not (_BOUND.search(pre) and value in written):
                        out.append((i, m["num"], line.strip()[:100]))
    return out


def tidy(nb):
    """Remove what ``problems`` finds, in place; returns the number of changes."""
    changes = 0
    for cell in nb.cells:
        if cell.metadata.pop("execution", None) is not None:
            changes += 1
        if not _timed(cell):
            continue
        kept = []
        for o in cell.outputs:
            text = _text(o)
            if text is None:
                kept.append(o)
                continue
            lines = text.splitlines(keepends=True)
            clean = "".join(line for line in lines if not DURATION.search(line))
            changes += len(lines) - len(clean.splitlines(keepends=True))
            if clean.strip():
                if o.output_type == "stream":
                    o.text = clean
                else:
                    o.data["text/plain"] = clean
                kept.append(o)
        cell.outputs = kept
    return changes


def read_notebook(path):
    """``nbformat.read(path, as_version=4)``; a file that is not a readable notebook (a git merge conflict, a
    truncated or hand-edited file, one that is not there) is an InputError naming the file and what is wrong,
    not a traceback of nbformat's internals."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"notebook {str(path)!r} cannot be read ({getattr(e, 'strerror', None) or e})") from None
    conflict = re.search(r"^(<<<<<<<|=======$|>>>>>>>)", text, flags=re.M)
    if conflict:
        line = text.count("\n", 0, conflict.start()) + 1
        raise InputError(f"notebook {str(path)!r} holds a git merge conflict (a {conflict.group(1)!r} marker at line "
                         f"{line}); resolve it (e.g. `git checkout --theirs` or `--ours`, then re-run) and try again")
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as e:  # noqa: BLE001 - nbformat raises NotJSONError, ValidationError, KeyError, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise InputError(f"notebook {str(path)!r} is not a readable notebook ({type(e).__name__}"
                         f"{': ' + first[:200] if first else ''})") from None


def tidy_files(paths, check=False):
    """Tidy (or with ``check`` only report) each notebook file; returns ``{path: problems}`` of the files that
    had any (with ``check``, nothing is written)."""
    found = {}
    for path in map(Path, paths):
        if path.suffix != ".ipynb" or not path.is_file():
            raise InputError(f"NOTEBOOK must be a notebook file (.ipynb) that exists, got {str(path)!r}")
        nb = read_notebook(path)
        issues = problems(nb)
        if issues:
            found[path] = issues
            if not check:
                tidy(nb)
                nbformat.write(nb, path)
    return found
