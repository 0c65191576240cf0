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
per lesson with a bar linking the syllabus and the previous and next lesson, solutions folded into ``<details>``
so that a reader can try first, links between notebooks pointing at the pages, and ``index.html`` rendered from
the syllabus. Nothing is executed: the pages show the committed outputs. MathJax comes from a local copy when one
is installed (``local_mathjax``: PyPI's ``jupyter-server-mathjax``, which the ``[notebooks]`` extra brings, copied
next to the pages; else Debian's ``libjs-mathjax``), else from its CDN with a printed note; require.js, jQuery and
mermaid, which the pages do not use, are not loaded. ``slides(out)`` writes one reveal.js deck per lesson
(nbconvert's ``SlidesExporter``, a slide per section), with reveal.js copied from a local folder when there is one
(``local_reveal``). ``python -m minimal course tidy`` is ``minimal.nbtidy``.
"""
from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor

from .validate import InputError

__all__ = ["NOTEBOOKS", "SOLUTION_TAG", "BEGIN", "END", "lessons", "title", "exercise_of", "ClearSolutions",
           "student_notebook", "bare_stubs", "student", "local_mathjax", "local_reveal", "html", "slide_notebook",
           "slides"]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SYLLABUS = "README.md"
SOLUTION_TAG = "solution"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
NOT_DONE = "not done yet"
CODE_STUB = f'# YOUR CODE HERE\nraise NotImplementedError("{NOT_DONE}")'
RAISES = "raises-exception"   # the cell tag that lets nbclient and JupyterLab's Run All go past an error
TEXT_STUB = "YOUR ANSWER HERE"

_LINK = re.compile(r"\]\(([^)\s]+?)\)")
_EXERCISE = re.compile(r"Exercise \d+")


def _notebooks_dir(notebooks):
    path = Path(notebooks) if notebooks is not None else NOTEBOOKS
    if not (path / SYLLABUS).is_file():
        raise InputError(f"notebooks must be a folder with the syllabus {SYLLABUS}, got {str(path)!r} "
                         f"(an installed copy of minimal has no notebooks/: run from a clone of the repository)")
    return path


def lessons(notebooks=None):
    """Notebook file names in course order: as the syllabus first links them (``[...](name.ipynb)``)."""
    text = (_notebooks_dir(notebooks) / SYLLABUS).read_text()
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


def _is_solution(cell):
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


def _strip(source, stub):
    """Replace each BEGIN .. END SOLUTION region of ``source`` (markers included) with ``stub``, indented like
    the BEGIN line; a source without markers is replaced whole."""
    lines = source.splitlines()
    if not any(line.strip() in (BEGIN, END) for line in lines):
        return stub
    out, inside = [], False
    for line in lines:
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ValueError(f"nested {BEGIN!r}")
            inside = True
            indent = line[:len(line) - len(line.lstrip())]
            out.extend(indent + s for s in stub.splitlines())
        elif marker == END:
            if not inside:
                raise ValueError(f"{END!r} without {BEGIN!r}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN!r} without {END!r}")
    return "\n".join(out)


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
            if _is_solution(cell):
                try:
                    cell.source = _strip(cell.source, CODE_STUB if cell.cell_type == "code" else TEXT_STUB)
                except ValueError as e:   # unbalanced markers: say which cell, and where it is
                    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
                    raise InputError(f"cell {i} ({cell.cell_type}, {exercise or 'outside the exercises'}, starting "
                                     f"{first[:60]!r}): {e}; every {BEGIN!r} needs its {END!r}") from None
                stubbed = stubbed or cell.cell_type == "code"
            if cell.cell_type == "code":
                if exercise is not None or _is_solution(cell):
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


def _write_checked(files, force):
    """Write ``{path: text}``; refuse (naming them) files that exist and differ from what would be written."""
    changed = [p for p, text in files.items() if p.exists() and p.read_text(encoding="utf-8") != text]
    if changed and not force:
        raise InputError("refusing to overwrite files that differ from what this command writes (edited by hand?): "
                         + ", ".join(str(p) for p in changed) + "; move them away or pass --force")
    for p, text in files.items():
        if not p.exists() or p.read_text(encoding="utf-8") != text:
            p.write_text(text, encoding="utf-8")
    return list(files)


def student(out_dir, notebooks=None, force=False):
    """Write the student edition of every lesson, and the syllabus, to ``out_dir``; returns the paths. A file
    already there that differs from what would be written (a student's work) is refused unless ``force``."""
    src = _notebooks_dir(notebooks)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"out_dir must be a folder, got the file {str(out)!r}")
    out.mkdir(parents=True, exist_ok=True)
    files = {out / SYLLABUS: (src / SYLLABUS).read_text(encoding="utf-8")}
    for name in lessons(src):
        try:
            files[out / name] = nbformat.writes(student_notebook(_read(src / name))) + "\n"
        except InputError as e:   # a cell's unbalanced solution markers: name the notebook too
            raise InputError(str(e) if str(src / name) in str(e) else f"notebook {str(src / name)!r}: {e}") from None
    return _write_checked(files, force)


# --- the site ------------------------------------------------------------------------------------------------
# jupyter-server-mathjax ships the STIX-Web fonts only (MathJax's default, TeX, gives "Math Processing Error"s)
_NO_CDN = """
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({"HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null}});
</script>
{{ super() }}
{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_jquery -%}{%- endblock html_head_js_jquery -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""
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
# nbconvert's reveal template loads reveal.js through require.js and jQuery from CDNs: load it with plain scripts
_SLIDES = """{%- extends 'reveal/index.html.j2' -%}""" + _NO_CDN + """
{% block footer_js %}
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ resources.reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({controls: true, progress: true, history: true, slideNumber: "{{ reveal_number }}",
                   transition: "{{ reveal_transition }}", width: {{ reveal_width }}, height: {{ reveal_height }},
                   plugins: [RevealNotes]});
// a section taller than the screen scrolls (nbconvert does this with jQuery)
function scrollTall() {
  var h = document.querySelector(".reveal").offsetHeight * 0.95;
  document.querySelectorAll("section.present, section.present section").forEach(function (s) {
    if (s.offsetHeight > h) { s.style.height = "calc(95vh)"; s.style.overflowY = "scroll"; s.style.marginTop = "20px"; }
  });
}
Reveal.on("ready", scrollTall);
Reveal.on("slidechanged", function (e) {
  if (window.MathJax && MathJax.Hub) { MathJax.Hub.Queue(["Rerender", MathJax.Hub, e.currentSlide]); }
  scrollTall();
});
</script>
{% endblock footer_js %}
"""
MATHJAX_CDN = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe"
DEBIAN_MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")
REVEAL_CDN = "https://unpkg.com/reveal.js@4.0.2"


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


def local_reveal(reveal=None):
    """A local reveal.js 4 (a folder with ``dist/reveal.js``): ``reveal``, else ``$MINIMAL_REVEAL_JS``, else
    ``node_modules/reveal.js`` of the repository (``npm install reveal.js@4``); None if there is none."""
    import os
    for cand in (reveal, os.environ.get("MINIMAL_REVEAL_JS"), NOTEBOOKS.parent / "node_modules" / "reveal.js"):
        if cand and (Path(cand) / "dist" / "reveal.js").is_file():
            return Path(cand)
    if reveal is not None:
        raise InputError(f"reveal must be a reveal.js folder holding dist/reveal.js, got {str(reveal)!r}")
    return None


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


def _page(name):
    return "index.html" if name == SYLLABUS else name[:-len(".ipynb")] + ".html"


def _site_links(text):
    """Markdown links to notebooks and to the syllabus -> links to their pages (anchors kept)."""
    def sub(m):
        target = m.group(1)
        path, sep, anchor = target.partition("#")
        if "/" in path or "://" in target:
            return m.group(0)
        if path.endswith(".ipynb") or path == SYLLABUS:
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


def html(out_dir, notebooks=None, mathjax_url=None, notes=None):
    """Render the syllabus (``index.html``) and every lesson (``NAME.html``) into ``out_dir``; returns the
    written paths, the index first. MathJax: ``mathjax_url`` if given, else a local copy (``local_mathjax``),
    else the CDN; ``notes`` (a list) receives a line saying which."""
    src = _notebooks_dir(notebooks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes = [] if notes is None else notes
    exporter = _exporter(_mathjax_for(out, mathjax_url, notes))
    order = lessons(src)
    books = {name: _read(src / name) for name in order}
    titles = {name: title(nb) for name, nb in books.items()}

    index = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(_site_links((src / SYLLABUS).read_text()))])
    body, _ = exporter.from_notebook_node(index, resources={"metadata": {"name": "minimal: the course"}})
    written = [out / "index.html"]
    written[0].write_text(body, encoding="utf-8")

    for i, name in enumerate(order):
        nb = copy.deepcopy(books[name])
        nav = ["[Course syllabus](index.html)"]
        if i > 0:
            nav.append(f"previous: [{titles[order[i - 1]]}]({_page(order[i - 1])})")
        if i + 1 < len(order):
            nav.append(f"next: [{titles[order[i + 1]]}]({_page(order[i + 1])})")
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = _site_links(cell.source)
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"*Lesson {i + 1} of {len(order)}* · " + " · ".join(nav)))
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": titles[name]}})
        path = out / _page(name)
        path.write_text(body, encoding="utf-8")
        written.append(path)
    return written


def slide_notebook(nb):
    """A copy of ``nb`` with reveal.js slide metadata: a new slide at each ``##`` section, a sub-slide (below it)
    at each ``###``, fragments for nothing else; solutions are left out of the slides."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        level, _ = _heading(cell)
        kind = "skip" if _is_solution(cell) else {1: "slide", 2: "slide", 3: "subslide"}.get(level, "-")
        cell.metadata["slideshow"] = {"slide_type": kind}
    return nb


def slides(out_dir, notebooks=None, mathjax_url=None, reveal=None, notes=None, names=None):
    """Write ``NAME.slides.html`` for every lesson into ``out_dir`` (nbconvert's reveal.js exporter, one slide per
    section; ``names``: only these lessons); returns the paths. reveal.js and MathJax are copied next to the slides when found locally
    (``local_reveal``, ``local_mathjax``), else taken from their CDNs with a line in ``notes`` saying so."""
    src = _notebooks_dir(notebooks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes = [] if notes is None else notes
    folder = local_reveal(reveal)
    if folder is None:
        prefix = REVEAL_CDN
        notes.append("reveal.js from its CDN: the slides need the network (npm install reveal.js@4, or --reveal)")
    else:
        prefix = "reveal.js"
        for part in ("dist", "plugin"):
            shutil.copytree(folder / part, out / prefix / part, dirs_exist_ok=True)
        notes.append(f"reveal.js from {folder} (works offline)")
    exporter = _exporter(_mathjax_for(out, mathjax_url, notes), template=_SLIDES, kind="SlidesExporter",
                         reveal_url_prefix=prefix, reveal_theme="white")   # "simple" imports Google fonts
    order = lessons(src)
    unknown = sorted(set(names or ()) - set(order))
    if unknown:
        raise InputError(f"names must be lessons of the syllabus, got {unknown}")
    written = []
    for name in (order if names is None else [n for n in order if n in names]):
        nb = slide_notebook(_read(src / name))
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title(nb)}})
        path = out / (name[:-len(".ipynb")] + ".slides.html")
        path.write_text(body, encoding="utf-8")
        written.append(path)
    return written
