"""The course: the syllabus lists every notebook, solutions are marked and stripped for students, the HTML site
has every page and every relative link resolves."""
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pytest

from minimal import course
from minimal.__main__ import main

NOTEBOOKS = sorted(p.name for p in course.NOTEBOOKS.glob("*.ipynb"))
GRADED = list(NOTEBOOKS)   # every lesson has exercises


def test_the_syllabus_orders_every_notebook_once():
    order = course.lessons()
    assert sorted(order) == NOTEBOOKS
    assert len(set(order)) == len(order)


def _nb(*cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def _code(src, tags=(), outputs=()):
    c = nbformat.v4.new_code_cell(src)
    c.metadata["tags"] = list(tags)
    c.outputs = [nbformat.v4.new_output("stream", text=t) for t in outputs]
    c.execution_count = 1
    return c


def _md(src, tags=()):
    c = nbformat.v4.new_markdown_cell(src)
    c.metadata["tags"] = list(tags)
    return c


def test_clear_solutions_keeps_the_scaffold_and_strips_the_marked_region():
    nb = _nb(_md("## Exercise 1"),
             _code("guess = None\n### BEGIN SOLUTION\nguess = 42\n### END SOLUTION\nassert guess == 42",
                   tags=["solution"], outputs=["42\n"]),
             _code("def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n", tags=["solution"]),
             _md("**Answer.** Because $2 + 2 = 4$.", tags=["solution"]),
             _code("print(1)", outputs=["1\n"]))
    out = course.student_notebook(nb)
    assert out.cells[1].source == "guess = None\n# YOUR CODE HERE\nraise NotImplementedError()\nassert guess == 42"
    assert out.cells[1].outputs == [] and out.cells[1].execution_count is None
    assert out.cells[2].source == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    assert out.cells[3].source == course.TEXT_STUB
    assert out.cells[4].outputs == nb.cells[4].outputs            # other cells keep their outputs
    assert nb.cells[1].source.count(course.BEGIN) == 1            # the input is not modified


@pytest.mark.parametrize("src", ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION",
                                 "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"])
def test_unbalanced_markers_are_refused(src):
    with pytest.raises(ValueError, match="SOLUTION"):
        course.student_notebook(_nb(_code(src, tags=["solution"])))


@pytest.mark.parametrize("name", GRADED)
def test_every_lesson_opens_with_objectives_and_closes_with_solved_exercises(name):
    nb = nbformat.read(course.NOTEBOOKS / name, as_version=4)
    head = nb.cells[0].source
    assert "Learning objectives" in head and "Prerequisites" in head, name
    assert "(README.md)" in head, "a link back to the syllabus"
    ex = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## Exercises")]
    assert len(ex) == 1, name
    tail = nb.cells[ex[0]:]
    exercises = [c for c in tail if c.cell_type == "markdown" and re.match(r"### Exercise \d", c.source)]
    assert 3 <= len(exercises) <= 5, name
    assert any(course._is_solution(c) and c.cell_type == "code" for c in tail), name
    for c in nb.cells:
        if course.BEGIN in c.source:
            assert course._is_solution(c), f"{name}: solution markers in a cell not tagged 'solution'"
    # the kernelspec that JupyterLab writes, so that opening the notebook does not modify it
    assert nb.metadata.kernelspec == {"display_name": "Python 3 (ipykernel)", "language": "python",
                                      "name": "python3"}
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown").lower()
    for word in ("issue", "our previous run", "targets:"):
        assert word not in text, f"{name} mentions {word!r}"


def test_student_edition_strips_every_solution(tmp_path):
    assert main(["course", "student", str(tmp_path)]) == 0
    assert (tmp_path / "README.md").exists()
    for name in NOTEBOOKS:
        nb = nbformat.read(tmp_path / name, as_version=4)
        for c in nb.cells:
            assert course.BEGIN not in c.source and course.END not in c.source
            if course._is_solution(c):
                assert course.TEXT_STUB in c.source or "raise NotImplementedError()" in c.source
                assert c.cell_type != "code" or c.outputs == []
    for name in GRADED:
        nb = nbformat.read(tmp_path / name, as_version=4)
        assert any(course._is_solution(c) for c in nb.cells), name


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("href", "src") and v:
                self.links.append(v)


def _relative(link):
    u = urlparse(link)
    return None if u.scheme or u.netloc or not u.path else unquote(u.path)


def test_html_site_has_every_page_and_every_relative_link_resolves(tmp_path):
    assert main(["course", "html", str(tmp_path)]) == 0
    pages = sorted(p.name for p in tmp_path.glob("*.html"))
    assert pages == sorted(["index.html"] + [n.replace(".ipynb", ".html") for n in NOTEBOOKS])
    linked = {}
    for page in pages:
        text = (tmp_path / page).read_text(encoding="utf-8")
        assert "MathJax" in text, page
        parser = _Links()
        parser.feed(text)
        rel = [r for r in map(_relative, parser.links) if r is not None]
        missing = [r for r in rel if not (tmp_path / r).exists()]
        assert not missing, f"{page} links to missing {missing}"
        linked[page] = set(rel)
    # the index reaches every lesson, and every lesson leads back to the index
    assert linked["index.html"] >= {p for p in pages if p != "index.html"}
    assert all("index.html" in links for page, links in linked.items() if page != "index.html")
    # solutions are folded, not hidden: the page still holds them
    graded = (tmp_path / GRADED[0].replace(".ipynb", ".html")).read_text(encoding="utf-8")
    assert '<details class="solution">' in graded


def test_course_refuses_a_folder_without_a_syllabus(tmp_path, capsys):
    with pytest.raises(ValueError, match="syllabus"):
        course.lessons(tmp_path)
    assert Path(course.NOTEBOOKS / course.SYLLABUS).exists()
