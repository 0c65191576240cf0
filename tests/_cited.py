"""Measured numbers in prose and the files that hold them (used by ``tests/test_cited_numbers.py``).

The rule: prose states what the code does; where it quotes a measurement it cites the committed file that holds it
and quotes a number found in that file.

- A *citation* is a path of a committed results file written in the text: ``bench/results/NAME.EXT`` or
  ``data/...NAME.EXT`` (EXT a text format: txt, json, jsonl, log, csv, md, patch), bare, in backticks or in
  parentheses. Templates (``bench/results/scan_<GPU>.json``) and folders are not citations.
- A *unit* of text is what one citation covers: a paragraph (lines up to a blank line) of a docstring or a README;
  for a Markdown table, one row, together with the citations of the table's caption (the nearest prose paragraph
  above it, skipping headings and the tables between: consecutive tables share one legend).
- A *measured number* is a number with a unit: a time (ns, µs, us, ms, s, seconds, min, minutes, hours, CPU-s,
  CPU minutes), a ratio written ``3.7x`` or ``3.7×``, a rate (GB/s, MB/s, GFLOP/s, TFLOP/s), a size (KiB, MiB, GiB,
  kB, MB, GB) or a percentage; in a README unit that cites a file, also every decimal number without a unit (the
  fractions of a copy, the losses). A range ``2.7-3.4 ms`` gives both ends the unit. Integers without a unit,
  numbers inside identifiers (``v1``, ``sm_90``, ``2^20``), versions (``0.68.0``) and exponents (``1e-7``) are
  not measurements.
- A quoted number is *found* in a cited file when some number of the file, rounded half up to the quoted number's
  decimals, equals it: ``1285 us`` is found in a file holding ``1285.2 us``, ``0.47`` in one holding
  ``0.4712``. A time may be quoted in another unit than the file's: the file's seconds, milliseconds or
  microseconds are also tried scaled to the quoted unit (``1285 us`` is found in ``"seconds": 0.0012852``), and a
  percentage is also tried as 100 times a fraction.

"Found" is a weak match on purpose (no parsing of each file's format): a stale number can pass by equalling some
unrelated number of a large cited file, so cite the smallest file that holds the numbers (a table rather than
all the rows), and keep a table's caption to the file it is drawn from.

A unit that quotes a time (or a speed ratio, ``2x faster``) and cites nothing fails. The caller's allow-list names
the few quantities that are not measurements (a target, an estimate); they are not checked at all."""
import ast
import re
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP
from pathlib import Path

CITATION = re.compile(r"(?<![\w/.<])((?:bench/results|data)/(?:[\w+-]+/)*[\w.+-]*\w\."
                      r"(?:txt|jsonl|json|log|csv|md|patch))(?![\w/<*])")

_NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d|\.\d)"
TIME_UNITS = {"ns": -9, "µs": -6, "us": -6, "ms": -3, "s": 0, "sec": 0, "second": 0, "seconds": 0, "CPU-s": 0,
              "min": "min", "minute": "min", "minutes": "min", "CPU minutes": "min", "CPU-minutes": "min",
              "hour": "h", "hours": "h", "CPU hours": "h", "CPU-hours": "h"}
OTHER_UNITS = ("x", "×", "GB/s", "MB/s", "GFLOP/s", "TFLOP/s", "KiB", "MiB", "GiB", "kB", "MB", "GB", "%")
_UNIT = "|".join(re.escape(u) for u in sorted([*TIME_UNITS, *OTHER_UNITS], key=len, reverse=True))
QUANTITY = re.compile(rf"(?<![\w.^/\-+])(?<!e-)(?P<first>{_NUMBER})(?:\s*[-–]\s*(?P<last>{_NUMBER}))?"
                      rf"(?:(?P<sep>\s?)(?P<unit>{_UNIT}))?(?![\w^]|\.\d)")
SPEED = re.compile(r"^\s*(?:faster|slower|the time|the speed)")
CODE = re.compile(r"`[^`\n]*`")


def citations(text):
    """The results files a text cites, in order."""
    return CITATION.findall(text)


def quantities(text, unitless):
    """(number as written, unit or None, start, end) for every measured number of ``text``; ``unitless``: also
    decimals without a unit. Inline code (`...`) is not prose and is skipped."""
    prose = CODE.sub(lambda m: " " * len(m.group()), text)
    found = []
    for m in QUANTITY.finditer(prose):
        unit = m.group("unit")
        if unit in ("x", "×") and m.group("sep"):
            unit = None                                   # "8 x 8" is a shape, "8x" a ratio
        numbers = [n for n in (m.group("first"), m.group("last")) if n]
        for n in numbers:
            if unit or (unitless and "." in n):
                found.append((n, unit, m.start(), m.end()))
    return found


def is_time(unit):
    return unit in TIME_UNITS


def is_uncited_measurement(text, quantity):
    """A time, or a ratio said to be a speed (``2x faster``): what must cite a file even where nothing else does."""
    n, unit, start, end = quantity
    return is_time(unit) or (unit in ("x", "×") and bool(SPEED.match(text[end:])))


_FILE_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def file_numbers(path):
    """Every number written in a text file, as Decimals."""
    out = set()
    for s in _FILE_NUMBER.findall(Path(path).read_text(encoding="utf-8", errors="replace")):
        try:
            out.add(Decimal(s))
        except InvalidOperation:
            continue
    return out


def _scales(unit):
    """Factors that take a file's number to the quoted unit (a file keeps seconds, ms or µs; minutes or hours)."""
    kind = TIME_UNITS.get(unit)
    if kind is None:
        return [Decimal(1), Decimal(100)] if unit == "%" else [Decimal(1)]
    if kind == "min":
        return [Decimal(1), Decimal(1) / 60]
    if kind == "h":
        return [Decimal(1), Decimal(1) / 60, Decimal(1) / 3600]
    return [Decimal(10) ** (file_exp - kind) for file_exp in (0, -3, -6)]


def is_found(number, unit, numbers):
    """Whether ``number`` (as written) equals some file number in the quoted unit, rounded to its decimals."""
    q = Decimal(number.replace(",", ""))
    step = Decimal(1).scaleb(q.as_tuple().exponent)
    for x in numbers:
        for k in _scales(unit):
            if (x * k).quantize(step, rounding=ROUND_HALF_UP) == q:
                return True
    return False


def markdown_units(text):
    """(line number, text, caption) for every paragraph and table row of a Markdown text; ``caption`` is the
    text of a table row's legend (its nearest prose paragraph above), else ''. Fenced code blocks are units too
    (their comments are prose a reader takes as stated)."""
    blocks, current, start = [], [], 0
    for i, line in enumerate(text.splitlines() + [""], 1):
        if line.strip():
            if not current:
                start = i
            current.append(line)
        elif current:
            blocks.append((start, current))
            current = []
    units, caption = [], ""
    for start, lines in blocks:
        if lines[0].lstrip().startswith("|"):
            for k, row in enumerate(lines):
                if not set(row) <= set("|-: "):
                    units.append((start + k, row, caption))
        elif lines[0].startswith("#") and len(lines) == 1:
            continue
        else:
            units.append((start, "\n".join(lines), ""))
            caption = "\n".join(lines)
    return units


def docstring_units(path):
    """(line number, paragraph) for every paragraph of every docstring of a Python file."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    units = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if not doc:
                continue
            line = node.body[0].lineno
            for para in re.split(r"\n\s*\n", doc):
                units.append((line, para))
                line += para.count("\n") + 2
    return units


def check_unit(text, caption, root, unitless, allowed=()):
    """Problems of one unit of text: a cited file that does not exist, a measured number not found in the files
    the unit cites, a time quoted with no citation. ``allowed``: regular expressions whose matches are not
    measurements (an estimate, a target); a quantity inside one is not checked."""
    problems = []
    cited = citations(text) + citations(caption)
    missing = [c for c in cited if not (Path(root) / c).is_file()]
    problems += [f"cites {c}, which does not exist" for c in missing]
    spans = [m.span() for pattern in allowed for m in re.finditer(pattern, text)]
    if not cited:
        for q in quantities(text, unitless=False):
            if is_uncited_measurement(text, q) and not any(a <= q[2] and q[3] <= b for a, b in spans):
                problems.append(f"quotes {text[q[2]:q[3]]!r} and cites no file that holds it")
        return problems
    numbers = set()
    for c in cited:
        if c not in missing:
            numbers |= file_numbers(Path(root) / c)
    for n, unit, start, end in quantities(text, unitless):
        if not any(a <= start and end <= b for a, b in spans) and not is_found(n, unit, numbers):
            problems.append(f"quotes {n}{' ' + unit if unit else ''} ({text[start:end]!r}), found in none of "
                            f"{', '.join(cited)}")
    return problems
