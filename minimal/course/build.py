"""`python -m minimal course student OUT`: the student edition, and the lessons as the rest of the course tooling
reads them.

The syllabus is ``notebooks/README.md``: the order in which it first links each notebook is the course order
(``lessons()``). Every notebook is committed executed, and its exercises' solutions are ordinary cells that nbval
runs in CI, marked the way nbgrader marks them:

- a solution cell carries the cell tag ``solution`` (JupyterLab: the property inspector's "Cell Tags");
- in a code cell the lines from ``### BEGIN SOLUTION`` to ``### END SOLUTION`` are the solution, and the lines
  around them (a prediction to fill in, the checks) stay in the student edition; a tagged cell without markers is a
  solution as a whole;
- a markdown cell tagged ``solution`` is an answer (a derivation, an explanation).

An exercise runs from its ``### Exercise N`` heading to the next heading of level 2 or 3 (``exercise_of``).

``student(out)`` writes the student edition: ``ClearSolutions`` (an nbconvert ``Preprocessor``) replaces every
solution region with nbgrader's stubs (``# YOUR CODE HERE`` / ``raise NotImplementedError("not done yet")`` in
code, "YOUR ANSWER HERE" in markdown) and clears the outputs of every code cell of an exercise, so that no answer
shows before the student works it. From the first stub on, code cells carry the ``raises-exception`` tag, which
nbclient and JupyterLab honour: Run All goes past an unfinished answer (which says "not done yet") to the last
cell. ``bare_stubs(nb)`` lists the exercises whose student cell would be a stub and nothing else. A file already
in ``out`` that differs from what would be written (a student's work) is refused unless ``force``. nbgrader itself
is not a dependency: it needs a gradebook database and server extensions for what is here one preprocessor, and
its markers work unchanged if an instructor moves to it.

The other editions have modules of their own and read the lessons through the helpers here (``lessons``,
``title``, ``heading``, ``is_solution``, ``read_lesson``, ``student_notebook``): ``minimal.course.site`` (``course
html``, the HTML site), ``minimal.course.slides`` (``course slides``, the reveal.js decks),
``minimal.course.assignments`` (``course release`` and ``course grade``, nbgrader). ``python -m minimal course tidy``
is ``minimal.course.nbtidy``.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

try:
    from nbconvert.preprocessors import Preprocessor
except ImportError:       # building a wheel (setup.py writes the student edition) needs nbformat alone
    class Preprocessor:
        pass

from ..validate import InputError

__all__ = ["NOTEBOOKS", "SOLUTION_TAG", "BEGIN", "END", "lessons", "title", "exercise_of", "ClearSolutions",
           "student_notebook", "bare_stubs", "student", "strip_solution", "drop_hidden"]

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PACKAGED = Path(__file__).resolve().parents[1] / "_course"   # a wheel's student edition (setup.py writes it at build)
SYLLABUS = "README.md"
SOLUTION_TAG = "solution"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"   # nbgrader's hidden checks
NOT_DONE = "not done yet"
CODE_STUB = f'# YOUR CODE HERE\nraise NotImplementedError("{NOT_DONE}")'
RAISES = "raises-exception"   # the cell tag that lets nbclient and JupyterLab's Run All go past an error
TEXT_STUB = "YOUR ANSWER HERE"

LINK = re.compile(r"\]\(([^)\s]+?)\)")
_EXERCISE = re.compile(r"Exercise \d+")


def notebooks_dir(notebooks):
    path = Path(notebooks) if notebooks is not None else NOTEBOOKS
    if not (path / SYLLABUS).is_file():
        raise InputError(f"notebooks must be a folder with the syllabus {SYLLABUS}, got {str(path)!r} "
                         f"(an installed copy of minimal has no notebooks/: run from a clone of the repository)")
    return path


def lessons(notebooks=None):
    """Notebook file names in course order: as the syllabus first links them (``[...](name.ipynb)``)."""
    text = (notebooks_dir(notebooks) / SYLLABUS).read_text()
    order = []
    for target in LINK.findall(text):
        name = target.split("#")[0]
        if name.endswith(".ipynb") and "/" not in name and name not in order:
            order.append(name)
    return order


def title(nb):
    """The notebook's first level-1 heading (its file name if it has none)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return nb.metadata.get("name", "notebook")


def is_solution(cell):
    return SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def heading(cell):
    """The level and text of a markdown cell's first line if it is a heading, else (0, "")."""
    if cell.cell_type != "markdown" or not cell.source.startswith("#"):
        return 0, ""
    line = cell.source.splitlines()[0]
    level = len(line) - len(line.lstrip("#"))
    return level, line[level:].strip()


def exercise_of(nb):
    """For each cell of ``nb``, the exercise it belongs to (``"Exercise 3"``) or None: an exercise runs from its
    ``### Exercise N`` heading to the next heading of level 2 or 3."""
    out, current = [], None
    for cell in nb.cells:
        level, text = heading(cell)
        if level in (2, 3):
            m = _EXERCISE.match(text)
            current = m.group(0) if (level == 3 and m) else None
        out.append(current)
    return out


def _replace_regions(lines, begin, end, stub):
    """``lines`` with each ``begin`` .. ``end`` region (markers included) replaced by ``stub(indent)`` lines, where
    ``indent`` is the begin line's; unbalanced or nested markers are a ValueError naming them."""
    out, inside = [], False
    for line in lines:
        marker = line.strip()
        if marker == begin:
            if inside:
                raise ValueError(f"nested {begin!r}")
            inside = True
            out.extend(stub(line[:len(line) - len(line.lstrip())]))
        elif marker == end:
            if not inside:
                raise ValueError(f"{end!r} without {begin!r}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{begin!r} without {end!r}")
    return out


def strip_solution(source, stub):
    """Replace each BEGIN .. END SOLUTION region of ``source`` (markers included) with ``stub``, indented like
    the BEGIN line; a source without markers is replaced whole."""
    lines = source.splitlines()
    if not any(line.strip() in (BEGIN, END) for line in lines):
        return stub
    return "\n".join(_replace_regions(lines, BEGIN, END, lambda indent: [indent + s for s in stub.splitlines()]))


def drop_hidden(source):
    """``source`` without its BEGIN .. END HIDDEN TESTS regions (markers included): checks that would give the
    answer away, which nbgrader runs when it autogrades and the student edition leaves out."""
    if HIDDEN_BEGIN not in source:
        return source
    return "\n".join(_replace_regions(source.splitlines(), HIDDEN_BEGIN, HIDDEN_END, lambda indent: []))


def _scaffold(source):
    """The lines of a student cell that are neither the stub nor blank nor comments: what the student is given."""
    stub = {line.strip() for line in CODE_STUB.splitlines()}
    return [line for line in source.splitlines()
            if line.strip() and not line.strip().startswith("#") and line.strip() not in stub]


class ClearSolutions(Preprocessor):
    """nbconvert preprocessor for the student edition (module docstring): solution regions -> stubs; every code
    cell of an exercise loses its outputs; from the first stub on, code cells carry ``raises-exception`` so that
    Run All goes past an unfinished answer."""

    def preprocess(self, nb, resources):
        owner = exercise_of(nb)
        stubbed = False
        for i, (cell, exercise) in enumerate(zip(nb.cells, owner)):
            if is_solution(cell):
                try:
                    cell.source = strip_solution(cell.source, CODE_STUB if cell.cell_type == "code" else TEXT_STUB)
                except ValueError as e:   # unbalanced markers: say which cell, and where it is
                    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
                    raise InputError(f"cell {i} ({cell.cell_type}, {exercise or 'outside the exercises'}, starting "
                                     f"{first[:60]!r}): {e}; every {BEGIN!r} needs its {END!r}") from None
                stubbed = stubbed or cell.cell_type == "code"
            if cell.cell_type == "code":
                cell.source = drop_hidden(cell.source)
                if exercise is not None or is_solution(cell):
                    cell.outputs, cell.execution_count = [], None
                tags = cell.metadata.setdefault("tags", [])
                if stubbed and RAISES not in tags:
                    tags.append(RAISES)
            cell.metadata.pop("execution", None)
        return nb, resources


def student_notebook(nb):
    """A copy of ``nb`` (an nbformat notebook) as the student edition (``ClearSolutions``)."""
    nb, _ = ClearSolutions().preprocess(copy.deepcopy(nb), {})
    return nb


def bare_stubs(nb):
    """The exercises whose student edition leaves a code cell that is only a stub: nothing to start from, no check
    to run. A check-only exercise should keep its check and mark only the prediction as the solution."""
    out = []
    for cell, exercise in zip(student_notebook(nb).cells, exercise_of(nb)):
        if cell.cell_type == "code" and NOT_DONE in cell.source and not _scaffold(cell.source):
            out.append(exercise or "a cell outside the exercises")
    return out


def read_lesson(path):
    from .nbtidy import read_notebook   # an unreadable notebook is an InputError naming it
    return read_notebook(path)


MANIFEST = ".minimal-course.json"     # in a student folder: the hash of every file the last edition wrote


def _sha(text):
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _beside(path, text, manifest):
    """Where an edited lesson's new version goes: ``NAME.new.ipynb`` (``NAME.new-2.ipynb``, ... when that name is
    taken by a file the student edited); None when one of them already holds ``text``."""
    k = 1
    while True:
        cand = path.with_name(f"{path.stem}.new{'' if k == 1 else f'-{k}'}{path.suffix}")
        if not cand.exists():
            return cand
        now = cand.read_text(encoding="utf-8")
        if now == text:
            return None
        if manifest.get(cand.name) == _sha(now):
            return cand
        k += 1


def _write_edition(out, files, force=False, update=False, notes=None):
    """Write ``{path: text}`` into the folder ``out`` and record what was written in ``out/MANIFEST``.

    A file that exists and differs from what would be written is *edited* when it also differs from what the last
    edition wrote there (the manifest; with no manifest, every differing file counts as edited). An unedited file is
    rewritten with ``update`` (or ``force``); an edited one is kept as it is and, with ``update``, the new version is
    written beside it (``NAME.new.ipynb``); with ``force`` it is overwritten; with neither, nothing is written and
    the differing files are named in an InputError. Nothing is ever deleted. ``notes`` receives a line per file
    kept. Returns the paths written."""
    import json

    notes = [] if notes is None else notes
    mpath = out / MANIFEST
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8")) if mpath.is_file() else {}
    except ValueError:
        manifest = {}
    plan, refused = {}, []
    for p, text in files.items():
        if not p.exists():
            plan[p] = text
            continue
        now = p.read_text(encoding="utf-8")
        if now == text:
            continue
        edited = manifest.get(p.name) != _sha(now)
        if force or (update and not edited):
            plan[p] = text
        elif update and manifest.get(f"{p.name}@edition", manifest.get(p.name)) == _sha(text):
            continue        # the lesson has not changed since the last edition: no new version to put beside it
        elif update:
            other = _beside(p, text, manifest)
            if other is None:
                continue
            plan[other] = text
            notes.append(f"{p.name} was edited: kept as it is, its new version written beside it as {other.name}")
        else:
            refused.append((p, edited))
    if refused:
        raise InputError("refusing to overwrite files that differ from what this command writes: "
                         + ", ".join(f"{p} ({'edited' if e else 'an older edition'})" for p, e in refused)
                         + "; --update rewrites the unedited ones and writes an edited one's new version beside it "
                           "(NAME.new.ipynb), --force overwrites them all")
    for p, text in plan.items():
        try:
            p.write_text(text, encoding="utf-8")
        except OSError as e:     # a read-only folder or a full disk: one line naming the folder, not a traceback
            raise InputError(f"cannot write {p.name} into {str(out)!r} ({e.strerror or type(e).__name__}): give a "
                             f"folder you can write to") from None
        manifest[p.name] = _sha(text)
    for p, text in files.items():       # files already as this edition writes them belong to it too
        if p not in plan and p.exists() and p.read_text(encoding="utf-8") == text:
            manifest[p.name] = _sha(text)
    for p, text in files.items():       # what this edition holds for each lesson, wherever it was written
        manifest[f"{p.name}@edition"] = _sha(text)
    mpath.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return list(plan)


STUDENT_INTRO = """# The course: recurrent networks and attention, derived and checked

Fifteen lessons, one notebook each, from "attention is an RNN" to three papers that build on it. Every lesson
derives one result step by step (an equation, a few lines of code, the library's version, an asserted number) and
ends with exercises for you to work.

**Set up.** Install the course's package with its notebook extra: the wheel your instructor gives you
(`pip install "./minimal_recurrent_attention-0.1.0-py3-none-any.whl[notebooks]"`), or from a clone of the course's
repository (`pip install ".[notebooks]"` in it). Not `pip install minimal`: that name on the public index is another
project. The package imports as `minimal`; check it with
`python -m minimal check` (exit code 0 when every check passes). Then run `jupyter lab` in this folder and open
this file. The lessons load the data they need from the installed package; nothing is downloaded.

**The exercises.** Each lesson closes with 3-5 exercises: *predict, then run* (write your prediction into the cell
before you run the check), *change a parameter and explain*, and *derive a missing step*. Where an answer is
expected you find `# YOUR CODE HERE` / `raise NotImplementedError("not done yet")` (code) or "YOUR ANSWER HERE"
(text): replace them with your answer. A check after an answer says in words what it expected when it fails.
*Run > Run All Cells* goes past an unfinished exercise to the end of the lesson. Keep your work in this folder: a
new edition of the course never overwrites a lesson you have edited (its new version is put beside it, as
`NAME.new.ipynb`).

**Times.** *read* is working through the lesson's text and code, exercises not included; *ex.* is the number of
exercises (5-15 minutes each); *run* is the time to execute every cell on one core of a shared machine.
"""
STUDENT_SECTIONS = ("Part I", "Part II", "Part III", "Part IV", "What each lesson teaches", "The papers")


def student_readme(syllabus):
    """The student edition's README: ``STUDENT_INTRO``, then the syllabus's lesson tables, what each lesson teaches
    and the papers (``STUDENT_SECTIONS``); the instructor's text (how to build the editions, the session plan, the
    grading, set-up for the instructor) is left out."""
    parts = [STUDENT_INTRO]
    for block in re.split(r"(?m)^(?=## )", syllabus):
        if block.startswith("## ") and block[3:].startswith(STUDENT_SECTIONS):
            parts.append(block.rstrip() + "\n")
    return "\n".join(parts)


def student(out_dir, notebooks=None, force=False, update=False, notes=None):
    """Write the student edition of every lesson, and its README (``student_readme``), to ``out_dir``; returns the
    paths written. Over an earlier edition (``_write_edition``) a file that differs is refused unless ``update``
    (unedited files rewritten, an edited lesson's new version written beside it) or ``force`` (overwrite). In an
    installed package without ``notebooks/`` the edition packaged in the wheel (``PACKAGED``) is copied."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"out_dir must be a folder, got the file {str(out)!r}")
    if notebooks is None and not (NOTEBOOKS / SYLLABUS).is_file() and (PACKAGED / SYLLABUS).is_file():
        files = {out / p.name: p.read_text(encoding="utf-8") for p in sorted(PACKAGED.iterdir())
                 if p.name == SYLLABUS or p.suffix == ".ipynb"}
    else:
        src = notebooks_dir(notebooks)
        files = {out / SYLLABUS: student_readme((src / SYLLABUS).read_text(encoding="utf-8"))}
        for name in lessons(src):
            try:
                files[out / name] = nbformat.writes(student_notebook(read_lesson(src / name))) + "\n"
            except InputError as e:   # a cell's unbalanced solution markers: name the notebook too
                raise InputError(str(e) if str(src / name) in str(e) else f"notebook {str(src / name)!r}: {e}") from None
    out.mkdir(parents=True, exist_ok=True)
    return _write_edition(out, files, force=force, update=update, notes=notes)
