"""`python -m minimal course {student,html,slides,tidy} OUT`: the course built from ``notebooks/``.

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

``html(out)`` renders the executed notebooks with nbconvert's ``HTMLExporter`` (the JupyterLab template): one page
per lesson with a bar linking the syllabus and the previous and next lesson. The default is the student site, each
lesson as its student edition (no solution, no hidden check); ``html(out, instructor=True)`` is the instructor's,
solutions folded into ``<details>``, the guide as ``instructor.html`` and a banner on every page saying so;
links between notebooks pointing at the pages, and ``index.html`` rendered from
the syllabus. Nothing is executed: the pages show the committed outputs. MathJax comes from a local copy when one
is installed (``local_mathjax``: PyPI's ``jupyter-server-mathjax``, which the ``[notebooks]`` extra brings, copied
next to the pages; else Debian's ``libjs-mathjax``), else from its CDN with a printed note; require.js, jQuery and
mermaid, which the pages do not use, are not loaded. ``slides(out)`` writes one reveal.js deck per lesson
(nbconvert's ``SlidesExporter``, a slide per section, split into sub-slides of about a screen, every slide's
content fitted to its width: wide equations scaled down, long code lines shrunk a little and then wrapped, no
prompts; links to other lessons leading to their decks and no other relative link), with reveal.js copied next to
the decks from a local folder (``local_reveal``) or fetched once from the npm registry (``fetch_reveal``): offline by
default, a CDN only when asked. ``python -m minimal course tidy`` is ``minimal.course.nbtidy``.
"""
from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path

import nbformat

try:
    from nbconvert.preprocessors import Preprocessor
except ImportError:       # building a wheel (setup.py writes the student edition) needs nbformat alone
    class Preprocessor:
        pass

from ..validate import InputError

__all__ = ["NOTEBOOKS", "SOLUTION_TAG", "BEGIN", "END", "lessons", "title", "exercise_of", "ClearSolutions",
           "student_notebook", "bare_stubs", "student", "local_mathjax", "local_reveal", "html", "slide_notebook",
           "slides", "strip_solution", "drop_hidden"]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PACKAGED = Path(__file__).resolve().parent / "_course"   # a wheel's student edition (setup.py writes it at build)
SYLLABUS = "README.md"
SOLUTION_TAG = "solution"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"   # nbgrader's hidden checks
NOT_DONE = "not done yet"
CODE_STUB = f'# YOUR CODE HERE\nraise NotImplementedError("{NOT_DONE}")'
RAISES = "raises-exception"   # the cell tag that lets nbclient and JupyterLab's Run All go past an error
TEXT_STUB = "YOUR ANSWER HERE"

_LINK = re.compile(r"\]\(([^)\s]+?)\)")
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
    for target in _LINK.findall(text):
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


def _heading(cell):
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
        level, text = _heading(cell)
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


def _read(path):
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
                files[out / name] = nbformat.writes(student_notebook(_read(src / name))) + "\n"
            except InputError as e:   # a cell's unbalanced solution markers: name the notebook too
                raise InputError(str(e) if str(src / name) in str(e) else f"notebook {str(src / name)!r}: {e}") from None
    out.mkdir(parents=True, exist_ok=True)
    return _write_edition(out, files, force=force, update=update, notes=notes)


# --- the site ------------------------------------------------------------------------------------------------
# jupyter-server-mathjax ships the STIX-Web fonts only (MathJax's default, TeX, gives "Math Processing Error"s)
_MATHJAX_FONTS = """MathJax.Hub.Config({"HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web",
                                  imageFont: null}});"""
_NO_LOADERS = """
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_jquery -%}{%- endblock html_head_js_jquery -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""
_NO_CDN = """
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
""" + _MATHJAX_FONTS + """
</script>
{{ super() }}
{%- endblock html_head_js_mathjax -%}""" + _NO_LOADERS
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}""" + _NO_CDN + """
{% block any_cell %}
{%- if 'solution' in cell.metadata.get('tags', []) -%}
<details class="solution"><summary>Solution ({{ 'code' if cell.cell_type == 'code' else 'answer' }})</summary>
{{ super() }}
</details>
{%- else -%}
{{ super() }}
{%- endif -%}
{% endblock any_cell %}
{% block extra_css %}
<style>
details.solution { border-left: 3px solid #6a9fb5; margin: 0.4em 0 0.4em 5.5em; padding-left: 0.5em; }
details.solution > summary { cursor: pointer; color: #2a5f75; font-weight: bold;
  font-family: var(--jp-content-font-family, sans-serif); font-size: var(--jp-content-font-size1, 14px); }
</style>
{% endblock extra_css %}
"""
# The slides. nbconvert's reveal template loads reveal.js through require.js and jQuery from CDNs: plain scripts
# here. Once reveal.js is ready, MathJax typesets the deck (skipStartupTypeset), reveal.js then lays out every slide
# (viewDistance), not only those near the current one, MathJax renders the formulas again, now measured in place,
# fitWidth sizes every slide's content to the slide's width once, and reveal.js goes back to laying out the slides
# near the current one only (cheaper to move between; what was fitted stays so). A display equation wider than its
# box is scaled down to fit; code and text output shrink to at most CODE_MIN of their font size, and lines still too
# long wrap; a table shrinks to TABLE_MIN, and its cells wrap beyond that. Nothing scrolls sideways. The page sets
# data-fitted="yes" on <html> when it is done (the browser test waits for it). Input and output prompts ("In [3]:")
# are left out of the slides: they took an eighth of the width.
_SLIDES = """{%- extends 'reveal/index.html.j2' -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
""" + _MATHJAX_FONTS + """
MathJax.Hub.Config({skipStartupTypeset: true, messageStyle: "none", displayAlign: "center",
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  tex2jax: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
            processEscapes: true, processEnvironments: true}});
</script>
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}""" + _NO_LOADERS + """
{% block footer_js %}
<style>
.reveal pre { box-sizing: border-box; max-width: 100%; }
.reveal pre.fit-wrap { white-space: pre-wrap; overflow-wrap: anywhere; }
.reveal table.fit-wrap td, .reveal table.fit-wrap th { white-space: normal; overflow-wrap: anywhere; }
/* before fitWidth has run (or without JavaScript's measurements) a wide equation scrolls rather than being clipped */
.reveal .MathJax_Display, .reveal .MathJax_SVG_Display, .reveal .MathJax_CHTML { max-width: 100%; }
.reveal .MathJax_Display { overflow-x: auto; overflow-y: hidden; }
</style>
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ resources.reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({controls: true, progress: true, history: true, slideNumber: "{{ reveal_number }}",
                   transition: "{{ reveal_transition }}", width: {{ reveal_width }}, height: {{ reveal_height }},
                   plugins: [RevealNotes]});
var CODE_MIN = 0.8, TABLE_MIN = 0.7;
// Shrink every display equation (no limit), code block and text output (to CODE_MIN of its font size) and table (to
// TABLE_MIN) whose content is wider than its box; code still too wide then wraps (class fit-wrap), a table's cells
// too. Runs once, over the whole deck: all reads, then all writes, so that the browser lays the deck out a few
// times, not several times per element.
function fitWidth(root) {
  var items = [];
  root.querySelectorAll(".MathJax_Display").forEach(function (e) { items.push({e: e, least: 0}); });
  root.querySelectorAll("pre").forEach(function (e) { items.push({e: e, least: CODE_MIN}); });
  root.querySelectorAll(".jp-RenderedHTMLCommon table").forEach(function (e) {
    items.push({e: e, least: TABLE_MIN, table: true});
  });
  var measure = function (it) { it.need = it.table ? it.e.offsetWidth : it.e.scrollWidth - it.pad; };
  items.forEach(function (it) {
    var box = it.table ? it.e.parentElement : it.e, cs = getComputedStyle(box);
    it.room = box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    it.pad = it.table ? 0 : box.clientWidth - it.room;
    it.first = it.size = parseFloat(getComputedStyle(it.e).fontSize);
    measure(it);
  });
  var wide = items;
  for (var pass = 0; pass < 3; pass++) {
    wide = wide.filter(function (it) { return it.need > it.room + 0.5; });
    var shrink = wide.filter(function (it) { return it.size > it.least * it.first; });
    if (!shrink.length) { break; }
    shrink.forEach(function (it) {
      it.size = Math.max(it.least * it.first, it.size * it.room / it.need * 0.99);
      it.e.style.fontSize = it.size + "px";
    });
    shrink.forEach(measure);
  }
  wide.forEach(function (it) { if (it.need > it.room + 0.5) { it.e.classList.add("fit-wrap"); } });
}
// a section taller than the screen scrolls (nbconvert does this with jQuery): the present ones (the default), or
// every slide, before and after fitWidth, which then measures each slide's width less its scrollbar
function scrollTall(sections) {
  var h = document.querySelector(".reveal").offsetHeight * 0.95;
  (sections || document.querySelectorAll("section.present, section.present section")).forEach(function (s) {
    if (s.offsetHeight > h) { s.style.height = "calc(95vh)"; s.style.overflowY = "scroll"; s.style.marginTop = "20px"; }
  });
}
Reveal.on("ready", function () {
  var config = Reveal.getConfig(), near = {viewDistance: config.viewDistance,
                                            mobileViewDistance: config.mobileViewDistance};
  var everySlide = function () { Reveal.configure({viewDistance: 1000, mobileViewDistance: 1000}); };
  var fit = function () {
    var slides = [].filter.call(document.querySelectorAll(".reveal .slides section"),
                                function (s) { return !s.querySelector("section"); });
    scrollTall(slides);
    fitWidth(document.querySelector(".reveal .slides"));
    scrollTall(slides);
    scrollTall();
    Reveal.configure(near);     // back to laying out the slides near the current one: what is fitted stays fitted
    document.documentElement.dataset.fitted = "yes";
  };
  if (!(window.MathJax && MathJax.Hub)) { everySlide(); fit(); return; }
  // typeset while reveal.js lays out the slides near the current one only (MathJax measures nothing in a hidden
  // slide: fast), then lay out every slide, render the formulas again in place, measured, and fit the slides
  MathJax.Hub.Queue(["Typeset", MathJax.Hub], everySlide, ["Rerender", MathJax.Hub], fit);
});
Reveal.on("slidechanged", function () { scrollTall(); });
</script>
{% endblock footer_js %}
"""
MATHJAX_CDN = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe"
DEBIAN_MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")
REVEAL_CDN = "https://unpkg.com/reveal.js@4.6.1"


def local_mathjax():
    """Where a local MathJax 2 is: ``(folder to copy or None, url or None, what it is)``. The PyPI package
    ``jupyter-server-mathjax`` (the ``[notebooks]`` extra) is copied next to the pages; Debian's ``libjs-mathjax``
    is linked where it is installed; neither: ``(None, None, ...)``."""
    try:
        import jupyter_server_mathjax
        static = Path(jupyter_server_mathjax.__file__).parent / "static"
        if (static / "MathJax.js").is_file():
            return static, "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe", "jupyter-server-mathjax"
    except ImportError:
        pass
    if DEBIAN_MATHJAX.is_file():
        return None, DEBIAN_MATHJAX.as_uri() + "?config=TeX-AMS_CHTML-full,Safe", "Debian's libjs-mathjax"
    return None, None, "no local MathJax (pip install jupyter-server-mathjax, or apt-get install libjs-mathjax)"


REVEAL_VERSION = "4.6.1"
REVEAL_CACHE = Path.home() / ".cache" / "minimal" / f"reveal.js-{REVEAL_VERSION}"


def local_reveal(reveal=None):
    """A local reveal.js 4 (a folder with ``dist/reveal.js``): ``reveal``, else ``$MINIMAL_REVEAL_JS``, else
    ``node_modules/reveal.js`` of the repository, else the copy ``fetch_reveal`` keeps in ``REVEAL_CACHE``; None if
    there is none."""
    import os
    for cand in (reveal, os.environ.get("MINIMAL_REVEAL_JS"), NOTEBOOKS.parent / "node_modules" / "reveal.js",
                 REVEAL_CACHE):
        if cand and (Path(cand) / "dist" / "reveal.js").is_file():
            return Path(cand)
    if reveal is not None:
        raise InputError(f"reveal must be a reveal.js folder holding dist/reveal.js, got {str(reveal)!r}")
    return None


def fetch_reveal(cache=None):
    """reveal.js ``REVEAL_VERSION`` from the npm registry (``npm pack``, npm's own client), unpacked into ``cache``
    (default ``REVEAL_CACHE``) once; returns the folder. An InputError says what to do where npm or the registry
    cannot be reached."""
    import shutil as sh
    import subprocess
    import tarfile
    import tempfile

    cache = Path(cache) if cache is not None else REVEAL_CACHE
    if (cache / "dist" / "reveal.js").is_file():
        return cache
    npm = sh.which("npm")
    if npm is None:
        raise InputError("slides need reveal.js: no npm to fetch it with (install npm, or give --reveal DIR, a "
                         "reveal.js 4 folder; --reveal-cdn loads it from a CDN, online only)")
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([npm, "pack", "-q", f"reveal.js@{REVEAL_VERSION}"], cwd=tmp, capture_output=True,
                             text=True, timeout=300)
        packed = list(Path(tmp).glob("reveal.js-*.tgz"))
        if run.returncode != 0 or not packed:
            raise InputError(f"npm pack reveal.js@{REVEAL_VERSION} failed ({run.stderr.strip()[-300:]}); give "
                             f"--reveal DIR, a reveal.js 4 folder, or --reveal-cdn (online only)")
        part = Path(tmp) / "unpacked"
        with tarfile.open(packed[0]) as tar:
            tar.extractall(part, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(part)
        cache.parent.mkdir(parents=True, exist_ok=True)
        staged = cache.with_name(cache.name + ".part")
        sh.rmtree(staged, ignore_errors=True)
        sh.copytree(part / "package", staged)
        staged.rename(cache)
    return cache


def _mathjax_for(out, mathjax_url, notes):
    if mathjax_url is not None:
        return mathjax_url
    folder, url, what = local_mathjax()
    if url is None:
        notes.append(f"MathJax from its CDN: formulas show as raw TeX offline ({what})")
        return MATHJAX_CDN
    if folder is not None:
        shutil.copytree(folder, out / "mathjax", dirs_exist_ok=True)
    notes.append(f"MathJax from {what} (works offline)")
    return url


GUIDE = "INSTRUCTOR.md"       # the instructor's guide beside the syllabus: a page of the site too


def _page(name):
    if name == SYLLABUS:
        return "index.html"
    return "instructor.html" if name == GUIDE else name[:-len(".ipynb")] + ".html"


def _site_links(text):
    """Markdown links to notebooks and to the syllabus -> links to their pages (anchors kept)."""
    def sub(m):
        target = m.group(1)
        path, sep, anchor = target.partition("#")
        if "/" in path or "://" in target:
            return m.group(0)
        if path.endswith(".ipynb") or path in (SYLLABUS, GUIDE):
            return f"]({_page(path)}{sep}{anchor})"
        return m.group(0)
    return _LINK.sub(sub, text)


def _exporter(mathjax_url, template=_TEMPLATE, kind="HTMLExporter", **kw):
    from jinja2 import DictLoader
    import nbconvert

    name = "minimal_course.html.j2"
    base = "reveal" if kind == "SlidesExporter" else "lab"
    return getattr(nbconvert, kind)(template_name=base, extra_loaders=[DictLoader({name: template})],
                                    template_file=name, mathjax_url=mathjax_url, **kw)


INSTRUCTOR_BANNER = ("**Instructor edition: this page shows every solution and hidden check.** Do not publish it to "
                     "students; `python -m minimal course html OUT` (without `--instructor`) writes the student site.")


def html(out_dir, notebooks=None, mathjax_url=None, notes=None, instructor=False):
    """Render the syllabus (``index.html``) and every lesson (``NAME.html``) into ``out_dir``; returns the
    written paths, the index first. The default is the student site: every lesson as its student edition
    (``student_notebook``: no solution, no hidden check, no output of an exercise) and no instructor's guide.
    ``instructor=True`` writes the instructor's site: the committed lessons with their solutions folded, the guide
    as ``instructor.html``, and a banner on every page saying that it holds the answers. MathJax: ``mathjax_url``
    if given, else a local copy (``local_mathjax``), else the CDN; ``notes`` (a list) receives a line saying
    which."""
    src = notebooks_dir(notebooks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes = [] if notes is None else notes
    exporter = _exporter(_mathjax_for(out, mathjax_url, notes))
    order = lessons(src)
    books = {name: _read(src / name) for name in order}
    titles = {name: title(nb) for name, nb in books.items()}

    banner = [nbformat.v4.new_markdown_cell(INSTRUCTOR_BANNER)] if instructor else []
    syllabus = (src / SYLLABUS).read_text()
    if not instructor:      # the student site has no instructor's guide to link to
        syllabus = re.sub(r"\[([^\]]*)\]\(" + re.escape(GUIDE) + r"\)", r"\1", syllabus)
    index = nbformat.v4.new_notebook(cells=banner + [nbformat.v4.new_markdown_cell(_site_links(syllabus))])
    body, _ = exporter.from_notebook_node(index, resources={"metadata": {"name": "minimal: the course"}})
    written = [out / "index.html"]
    written[0].write_text(body, encoding="utf-8")
    if instructor and (src / GUIDE).is_file():
        guide = nbformat.v4.new_notebook(cells=banner + [nbformat.v4.new_markdown_cell(
            "[Course syllabus](index.html)\n\n" + _site_links((src / GUIDE).read_text(encoding="utf-8")))])
        body, _ = exporter.from_notebook_node(guide, resources={"metadata": {"name": "minimal: running the course"}})
        written.append(out / _page(GUIDE))
        written[-1].write_text(body, encoding="utf-8")

    for i, name in enumerate(order):
        nb = copy.deepcopy(books[name]) if instructor else student_notebook(books[name])
        if not instructor:      # a stub is not a solution to fold: the student page shows it as a cell
            for cell in nb.cells:
                tags = cell.metadata.get("tags", [])
                if SOLUTION_TAG in tags:
                    tags.remove(SOLUTION_TAG)
        nav = ["[Course syllabus](index.html)"]
        if i > 0:
            nav.append(f"previous: [{titles[order[i - 1]]}]({_page(order[i - 1])})")
        if i + 1 < len(order):
            nav.append(f"next: [{titles[order[i + 1]]}]({_page(order[i + 1])})")
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = _site_links(cell.source)
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"*Lesson {i + 1} of {len(order)}* · " + " · ".join(nav)))
        nb.cells[1:1] = copy.deepcopy(banner)      # under the bar that leads to the syllabus and the neighbours
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": titles[name]}})
        path = out / _page(name)
        path.write_text(body, encoding="utf-8")
        written.append(path)
    return written


SCREEN_LINES = 20    # what fits one slide (reveal's 700 px high here): ~20 lines of text or code


def _cell_lines(cell):
    """A rough height of a cell on a slide, in lines: wrapped text and code, text outputs, ~18 lines a figure."""
    wrap = lambda text: sum(1 + len(line) // 100 for line in text.splitlines())   # noqa: E731
    n = wrap(cell.source) + (1 if cell.cell_type == "code" else 0)
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if any(k.startswith("image/") for k in data):
            n += 18
        elif out.get("output_type") == "stream":
            n += wrap(out.get("text", ""))
        elif "text/plain" in data:
            n += wrap(data["text/plain"])
    return n


def _slide_links(text, decks):
    """Links to notebooks -> links to their decks (``decks``: the lessons whose deck is written beside this one);
    other relative links (the syllabus, a lesson without a deck, a file) -> their text: a deck has no dead link."""
    def sub(m):
        label, target = m.group(1), m.group(2)
        if "://" in target or target.startswith(("#", "mailto:")):
            return m.group(0)
        path, sep, anchor = target.partition("#")
        if path in decks:
            return f"[{label}]({path[:-len('.ipynb')]}.slides.html{sep}{anchor})"
        return label
    return re.sub(r"(?<!!)\[([^\]]*)\]\(([^)\s]+?)\)", sub, text)


def _paragraphs(cell):
    """A markdown cell taller than a screen, cut at its blank lines (never inside a ``$$`` block or a code fence)
    into cells that a sub-slide each can hold; other cells unchanged."""
    if cell.cell_type != "markdown" or _cell_lines(cell) <= SCREEN_LINES:
        return [cell]
    parts, cur = [], []
    for block in cell.source.split("\n\n"):
        cur.append(block)
        text = "\n\n".join(cur)
        if text.count("$$") % 2 == 0 and text.count("```") % 2 == 0:
            parts.append(text)
            cur = []
    if cur:
        parts.append("\n\n".join(cur))
    out, acc = [], []
    for part in parts:                       # regroup into pieces of at most a screen
        if acc and sum(1 + len(line) // 100 for line in "\n\n".join(acc + [part]).splitlines()) > SCREEN_LINES:
            out.append("\n\n".join(acc))
            acc = []
        acc.append(part)
    out.append("\n\n".join(acc))
    cells = []
    for k, text in enumerate(out):
        c = copy.deepcopy(cell)
        c.source = text
        if k and "id" in c:
            c["id"] = f"{cell['id']}-{k}"[:64]
        cells.append(c)
    return cells


def slide_notebook(nb, decks=()):
    """A copy of ``nb`` with reveal.js slide metadata: a new slide at each ``##`` section, a sub-slide (below it)
    at each ``###`` and wherever the cells so far would overflow one screen (``SCREEN_LINES``); solutions are left
    out of the slides; links to lessons lead to their decks (``decks``) and other relative links become text."""
    nb = copy.deepcopy(nb)
    nb.cells = [piece for cell in nb.cells for piece in _paragraphs(cell)]
    used = 0
    for cell in nb.cells:
        level, _ = _heading(cell)
        kind = "skip" if is_solution(cell) else {1: "slide", 2: "slide", 3: "subslide"}.get(level, "-")
        if kind != "skip":
            lines = _cell_lines(cell)
            if kind == "-" and used and used + lines > SCREEN_LINES:
                kind = "subslide"
            used = lines if kind != "-" else used + lines
        cell.metadata["slideshow"] = {"slide_type": kind}
        if cell.cell_type == "markdown":
            cell.source = _slide_links(cell.source, set(decks))
    return nb


def slides(out_dir, notebooks=None, mathjax_url=None, reveal=None, notes=None, names=None, cdn=False):
    """Write ``NAME.slides.html`` for every lesson into ``out_dir`` (nbconvert's reveal.js exporter, a slide per
    section, sub-slides that fit a screen, content that fits a slide's width: ``_SLIDES``; ``names``: only these
    lessons); returns the paths. reveal.js is copied
    next to the slides from a local folder (``local_reveal``), else fetched once from the npm registry
    (``fetch_reveal``); ``cdn`` loads it from its CDN instead (online only). MathJax: ``local_mathjax``. ``notes``
    receives a line saying where each came from."""
    src = notebooks_dir(notebooks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes = [] if notes is None else notes
    order = lessons(src)
    unknown = sorted(set(names or ()) - set(order))
    if unknown:
        raise InputError(f"names must be lessons of the syllabus, got {unknown}")
    if cdn:
        prefix = REVEAL_CDN
        notes.append("reveal.js from its CDN (--reveal-cdn): the slides need the network")
    else:
        folder = local_reveal(reveal) or fetch_reveal()
        prefix = "reveal.js"
        for part in ("dist", "plugin"):
            shutil.copytree(folder / part, out / prefix / part, dirs_exist_ok=True)
        notes.append(f"reveal.js from {folder} (works offline)")
    exporter = _exporter(_mathjax_for(out, mathjax_url, notes), template=_SLIDES, kind="SlidesExporter",
                         reveal_url_prefix=prefix, reveal_theme="white",   # "simple" imports Google fonts
                         exclude_input_prompt=True, exclude_output_prompt=True)   # "In [3]:" takes 1/8 of the width
    chosen = order if names is None else [n for n in order if n in names]
    written = []
    for name in chosen:
        nb = slide_notebook(_read(src / name), decks=chosen)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title(nb)}})
        path = out / (name[:-len(".ipynb")] + ".slides.html")
        path.write_text(body, encoding="utf-8")
        written.append(path)
    return written
