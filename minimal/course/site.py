"""`python -m minimal course html OUT`: the course as a web site, and the nbconvert exporter and MathJax set-up that
the slides (``minimal.course.slides``) share with it (``make_exporter``, ``mathjax_for``, ``MATHJAX_FONTS``,
``NO_LOADERS``).

``html(out)`` renders the executed notebooks with nbconvert's ``HTMLExporter`` (the JupyterLab template): one page
per lesson with a bar linking the syllabus and the previous and next lesson. The default is the student site, each
lesson as its student edition (no solution, no hidden check); ``html(out, instructor=True)`` is the instructor's,
solutions folded into ``<details>``, the guide as ``instructor.html`` and a banner on every page saying so;
links between notebooks pointing at the pages, and ``index.html`` rendered from
the syllabus. Nothing is executed: the pages show the committed outputs. MathJax comes from a local copy when one
is installed (``local_mathjax``: PyPI's ``jupyter-server-mathjax``, which the ``[notebooks]`` extra brings, copied
next to the pages; else Debian's ``libjs-mathjax``), else from its CDN with a printed note; require.js, jQuery and
mermaid, which the pages do not use, are not loaded.
"""
from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path

import nbformat

from .build import LINK, SOLUTION_TAG, SYLLABUS, lessons, notebooks_dir, read_lesson, student_notebook, title

__all__ = ["local_mathjax", "html"]


# jupyter-server-mathjax ships the STIX-Web fonts only (MathJax's default, TeX, gives "Math Processing Error"s)
MATHJAX_FONTS = """MathJax.Hub.Config({"HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web",
                                  imageFont: null}});"""
NO_LOADERS = """
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_jquery -%}{%- endblock html_head_js_jquery -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""
_NO_CDN = """
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
""" + MATHJAX_FONTS + """
</script>
{{ super() }}
{%- endblock html_head_js_mathjax -%}""" + NO_LOADERS
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
MATHJAX_CDN = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe"
DEBIAN_MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")


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


def mathjax_for(out, mathjax_url, notes):
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
    return LINK.sub(sub, text)


def make_exporter(mathjax_url, template=_TEMPLATE, kind="HTMLExporter", **kw):
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
    exporter = make_exporter(mathjax_for(out, mathjax_url, notes))
    order = lessons(src)
    books = {name: read_lesson(src / name) for name in order}
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
