"""`python -m minimal course {student,html} OUT`: the course built from ``notebooks/``.

The syllabus is ``notebooks/README.md``: the order in which it first links each notebook is the course order
(``lessons()``). Every notebook is committed executed, and its exercises' solutions are ordinary cells that nbval
runs in CI, marked the way nbgrader marks them:

- a solution cell carries the cell tag ``solution`` (JupyterLab: the property inspector's "Cell Tags");
- in a code cell the lines from ``### BEGIN SOLUTION`` to ``### END SOLUTION`` are the solution, and the lines
  around them (a prediction to fill in, the checks) stay in the student edition; a tagged cell without markers is a
  solution as a whole;
- a markdown cell tagged ``solution`` is an answer (a derivation, an explanation).

``student(out)`` writes the student edition: ``ClearSolutions`` (an nbconvert ``Preprocessor``) replaces every
solution region of a tagged cell with nbgrader's stubs (``# YOUR CODE HERE`` / ``raise NotImplementedError()`` in
code, "YOUR ANSWER HERE" in markdown) and clears that cell's outputs; every other cell keeps its outputs, so the
lesson still reads as executed. nbgrader itself is not a dependency: it needs a gradebook database and server
extensions for what is here one preprocessor, and its markers work unchanged if an instructor moves to it.

``html(out)`` renders the executed notebooks with nbconvert's ``HTMLExporter`` (the JupyterLab template, MathJax
from its CDN): one page per lesson with a bar linking the syllabus and the previous and next lesson, solutions
folded into ``<details>`` so that a reader can try first, links between notebooks pointing at the pages, and
``index.html`` rendered from the syllabus. Nothing is executed: the pages show the committed outputs.
"""
from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor

from .validate import InputError

__all__ = ["NOTEBOOKS", "SOLUTION_TAG", "BEGIN", "END", "lessons", "title", "ClearSolutions", "student_notebook",
           "student", "html"]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SYLLABUS = "README.md"
SOLUTION_TAG = "solution"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
TEXT_STUB = "YOUR ANSWER HERE"

_LINK = re.compile(r"\]\(([^)\s]+?)\)")


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


class ClearSolutions(Preprocessor):
    """nbconvert preprocessor: the solution regions of cells tagged ``solution`` -> nbgrader's stubs, and those
    code cells' outputs cleared (module docstring)."""

    def preprocess_cell(self, cell, resources, index):
        if _is_solution(cell):
            if cell.cell_type == "code":
                cell.source = _strip(cell.source, CODE_STUB)
                cell.outputs, cell.execution_count = [], None
            else:
                cell.source = _strip(cell.source, TEXT_STUB)
        return cell, resources


def student_notebook(nb):
    """A copy of ``nb`` (an nbformat notebook) with its solutions stripped."""
    nb, _ = ClearSolutions().preprocess(copy.deepcopy(nb), {})
    return nb


def _read(path):
    return nbformat.read(path, as_version=4)


def student(out_dir, notebooks=None):
    """Write the student edition of every lesson, and the syllabus, to ``out_dir``; returns the written paths."""
    src = _notebooks_dir(notebooks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [Path(shutil.copyfile(src / SYLLABUS, out / SYLLABUS))]
    for name in lessons(src):
        path = out / name
        nbformat.write(student_notebook(_read(src / name)), path)
        written.append(path)
    return written


# --- the site ------------------------------------------------------------------------------------------------
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
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


def _exporter(mathjax_url=None):
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    kw = {} if mathjax_url is None else {"mathjax_url": mathjax_url}
    return HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"minimal_course.html.j2": _TEMPLATE})],
                        template_file="minimal_course.html.j2", **kw)


def html(out_dir, notebooks=None, mathjax_url=None):
    """Render the syllabus (``index.html``) and every lesson (``NAME.html``) into ``out_dir``; returns the
    written paths, the index first. ``mathjax_url``: where the pages load MathJax 2 from (default nbconvert's,
    a CDN; give a local copy's ``MathJax.js?config=TeX-AMS_CHTML-full,Safe`` to read offline)."""
    src = _notebooks_dir(notebooks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exporter = _exporter(mathjax_url)
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
