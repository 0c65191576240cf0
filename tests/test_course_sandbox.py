"""Grading untrusted submissions: ``course grade`` against a student who attacks the grader.

One lesson (zucchet_a, four checks, 40 points) is released, and submitted by honest students (the reference
answers; the same with an answer in another form; one exercise done) and by hostile ones, each trying one attack
from the answer cell of Exercise 1: read the solutions and the gradebook, answer with objects whose ``==`` is always
true, wrap every later cell in ``try/except`` with an IPython input transformer, write its own score into
``gradebook.db`` (now and from a detached process later), edit another student's submission and the instructor's
source, leave a process running. ``python -m minimal course grade`` grades them all at once. Every hostile one must
score 0 and change nothing outside its own folder, no feedback page may hold a solution or hidden-check line, no
process may survive, and the honest ones keep their marks. Needs nbgrader and bubblewrap (``bwrap``; CI installs the
Debian package); skipped, with the reason, without them.

Measured on the shared 2-core machine (2026-11-29, under load): the whole module about 2-3 minutes.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from minimal.course import assignments as A
from minimal.course import build as course
from minimal.course import sandbox

LESSON = "zucchet_a_lsa_is_an_rnn"
MARK = "minimal-hostile-7f3a"          # in the command line of every process a hostile submission starts

pytestmark = [pytest.mark.skipif(not A.nbgrader_available(), reason="nbgrader is not installed (the [dev] extra)"),
              pytest.mark.skipif(sandbox.isolation()[0] is None,
                                 reason=f"no sandbox here: {sandbox.isolation()[1]}")]

LEAK = '''import glob, os
found = []
for pattern in ["../../../source/*/*.ipynb", "/tmp/**/source/*/*.ipynb", "{root}/source/*/*.ipynb", "{root}/*",
                "/work/**/notebooks/*.ipynb", os.path.expanduser("~") + "/**/*.ipynb", "{repo}/notebooks/*.ipynb"]:
    for p in glob.glob(pattern, recursive=True):
        try:
            found.append(open(p, errors="replace").read())
        except OSError:
            pass
print("\\n".join(found))
'''
ALWAYS_EQUAL = '''class Anything:
    def __eq__(self, other):
        return True
    __ne__ = lambda self, other: False
    def __array__(self, *a, **k):
        raise TypeError
'''
TRANSFORMER = '''def _wrap(lines):
    return ["try:\\n"] + ["    " + l for l in lines] + ["\\nexcept BaseException:\\n    pass\\n"]
get_ipython().input_transformers_cleanup.append(_wrap)
'''
GRADEBOOK = '''import sqlite3, subprocess, sys
code = """
import sqlite3, time
time.sleep({{delay}})
db = sqlite3.connect("{root}/gradebook.db")
db.execute("update grade set manual_score = max_score")
db.commit()
"""
try:
    exec(code.format(delay=0))
except Exception as e:
    print("write failed:", type(e).__name__)
subprocess.Popen([sys.executable, "-c", code.format(delay=20), "{mark}"], start_new_session=True)
'''.replace("{mark}", MARK)
VANDAL = '''import glob
for p in glob.glob("{root}/submitted/honest/*/*.ipynb") + glob.glob("{root}/source/*/*.ipynb"):
    try:
        open(p, "w").write("{{}}")
    except OSError as e:
        print("cannot write", type(e).__name__)
'''
DETACHED = '''import os, subprocess
for _ in range(5):
    subprocess.Popen(["/bin/sh", "-c", "sleep 600 # {mark}"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 600 # {mark}"])
'''.replace("{mark}", MARK)


RECORDS_LINK = '''import os, shutil
shutil.rmtree("records", ignore_errors=True)
os.symlink("{root}/reference/{lesson}/records", "records")        # the grader would read the reference's
'''
CWD_LINK = '''import os, shutil
shutil.rmtree("records", ignore_errors=True)
os.symlink("/proc/self/cwd/reference/{lesson}/records", "records")
'''
SCRIPT = "<script>document.title = 'minimal-hostile'</script> [click](javascript:alert(1)) <img src=x onerror=alert(1)>"


def _answers(root):
    """{grade_id: source} of the answer cells of the source (the reference solutions)."""
    src = nbformat.read(root / "source" / LESSON / f"{LESSON}.ipynb", as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c.source for c in src.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}


def _submit(root, student, answers):
    nb = nbformat.read(root / "release" / LESSON / f"{LESSON}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    folder = root / "submitted" / student / LESSON
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{LESSON}.ipynb")


def _digest(folder):
    h = hashlib.sha256()
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + p.read_bytes())
    return h.hexdigest()


def _marked_processes():
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if MARK.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def _solution_lines(root):
    """Distinctive lines of every solution region and hidden check of the source: none may reach a student."""
    src = nbformat.read(root / "source" / LESSON / f"{LESSON}.ipynb", as_version=4)
    lines = set()
    for cell in src.cells:
        md = cell.metadata.get("nbgrader", {})
        text = cell.source
        if md.get("solution") and cell.cell_type == "code":
            inside = False
            for line in text.splitlines():
                if line.strip() in (course.BEGIN, course.HIDDEN_BEGIN):
                    inside = True
                elif line.strip() in (course.END, course.HIDDEN_END):
                    inside = False
                elif inside and len(line.strip()) > 24:
                    lines.add(line.strip())
        if md.get("grade") and not md.get("solution") and course.HIDDEN_BEGIN in text:
            hidden = text.split(course.HIDDEN_BEGIN, 1)[1].split(course.HIDDEN_END, 1)[0]
            lines.update(line.strip() for line in hidden.splitlines() if len(line.strip()) > 24)
        if md.get("solution") and cell.cell_type == "markdown":
            lines.update(line.strip() for line in text.splitlines() if len(line.strip()) > 40)
    return lines


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    A.release(root, names=[LESSON + ".ipynb"])
    ref = _answers(root)
    fmt = {"root": str(root), "repo": str(Path(course.NOTEBOOKS).parent)}
    _submit(root, "honest", ref)
    _submit(root, "untouched", {})
    _submit(root, "partial", {"ex1-answer": ref["ex1-answer"]})
    _submit(root, "tuple", {**ref, "ex1-answer": ref["ex1-answer"].replace(
        "predicted_rank = [min(t, d_r) for t in range(1, T_r + 1)]",
        "predicted_rank = tuple(min(t, d_r) for t in range(1, T_r + 1))")})
    _submit(root, "leak", {"ex1-answer": LEAK.format(**fmt)})
    _submit(root, "always_equal", {
        "ex1-answer": ALWAYS_EQUAL + "predicted_rank = Anything()",
        "ex2-answer": "y_decay_parallel = y_decay_scan = Anything()",
        "ex3-answer": "y_changes = state_changes = Anything()",
        "ex4-answer": "parallel_cache_size = recurrent_cache_size = lambda *a: Anything()"})
    _submit(root, "transformer", {"ex1-answer": TRANSFORMER})
    _submit(root, "gradebook", {"ex1-answer": GRADEBOOK.format(**fmt)})
    _submit(root, "vandal", {"ex1-answer": VANDAL.format(**fmt)})
    _submit(root, "detached", {"ex1-answer": DETACHED})
    _submit(root, "records_link", {"ex1-answer": RECORDS_LINK.format(lesson=LESSON, **fmt)})
    _submit(root, "cwd_link", {"ex1-answer": CWD_LINK.format(lesson=LESSON, **fmt)})
    _submit(root, "script", {"ex1-answer": "print('hello')"})
    nb = nbformat.read(root / "submitted" / "script" / LESSON / f"{LESSON}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(SCRIPT))
    nbformat.write(nb, root / "submitted" / "script" / LESSON / f"{LESSON}.ipynb")
    (root / "submitted" / "broken" / LESSON).mkdir(parents=True)
    (root / "submitted" / "broken" / LESSON / f"{LESSON}.ipynb").write_text("{not a notebook")
    before = {"source": _digest(root / "source"), "honest": _digest(root / "submitted" / "honest"),
              "release": _digest(root / "release")}
    lines = []
    t0 = time.perf_counter()
    scores = A.grade(root, LESSON, log=lines.append)
    seconds = time.perf_counter() - t0
    time.sleep(1)
    return root, scores, before, lines, seconds


def test_the_honest_keep_their_marks_and_every_attack_scores_zero(graded):
    root, scores, _, lines, _ = graded
    assert lines[0].startswith("isolation: bubblewrap"), lines[0]
    assert scores["honest"] == (40, 40) and scores["tuple"] == (40, 40), scores
    assert scores["partial"] == (10, 40) and scores["untouched"] == (0, 40), scores
    for hostile in ("leak", "always_equal", "transformer", "gradebook", "vandal", "detached", "records_link",
                    "cwd_link", "script"):
        assert scores[hostile] == (0, 40), (hostile, scores)
    # a submission nbgrader cannot read stops nothing: the others are graded, the failure is named
    assert "broken" not in scores or scores["broken"][0] == 0
    assert any("reported errors" in line for line in lines), lines


def test_nothing_outside_a_submissions_own_folder_changed(graded):
    root, _, before, _, _ = graded
    assert _digest(root / "source") == before["source"], "a submission changed the instructor's source"
    assert _digest(root / "submitted" / "honest") == before["honest"], "a submission changed another student's work"
    assert _digest(root / "release") == before["release"]


def test_no_process_survives_grading_and_the_late_gradebook_write_never_lands(graded):
    root, _, _, _, _ = graded
    assert _marked_processes() == [], "a process started by a submission is still running"
    time.sleep(21)                     # the detached writer would have written by now
    assert A.scores(root, LESSON)["gradebook"] == (0, 40)
    assert A.scores(root, LESSON)["honest"] == (40, 40)


def test_feedback_holds_no_solution_or_hidden_check_and_loads_nothing_from_the_network(graded):
    root, _, _, _, _ = graded
    secret = _solution_lines(root)
    assert len(secret) > 10
    pages = sorted((root / "feedback").glob(f"*/{LESSON}/{LESSON}.html"))
    assert len(pages) >= 13
    for page in pages:
        html = page.read_text(encoding="utf-8")
        import html as h

        text = h.unescape(html)
        leaked = [s for s in secret if s in text]
        assert not leaked, f"{page.parent.parent.name}'s feedback shows {leaked[:2]}"
        assert course.HIDDEN_BEGIN not in text
        assert "cdn.jsdelivr" not in html and "cdnjs" not in html, page
        assert 'src="mathjax/MathJax.js' in html and (page.parent / "mathjax" / "MathJax.js").is_file()
        assert "<script>document.title" not in html and "javascript:alert" not in html and "<img src=x" not in html
    honest = h.unescape((root / "feedback" / "untouched" / LESSON / f"{LESSON}.html").read_text())
    assert "not answered yet" in honest


def test_a_failed_check_says_what_it_expected_without_the_answer(graded):
    root, _, _, _, _ = graded
    nb = nbformat.read(root / "autograded" / "always_equal" / LESSON / f"{LESSON}.ipynb", as_version=4)
    errors = [o.evalue for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"
              and c.metadata.get("nbgrader", {}).get("grade")]
    assert len(errors) == 4 and all(e for e in errors), errors


def test_a_copied_course_grades_itself_and_release_works_without_an_activated_environment(graded, tmp_path):
    root, _, _, _, _ = graded
    copy = tmp_path / "copied"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("autograded", "feedback"))
    original = _digest(root / "autograded")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/bin:/bin"          # the environment's bin folder is not on PATH
    run = subprocess.run([sys.executable, "-m", "minimal", "course", "release", str(copy), "--lesson", LESSON],
                         env=env, capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    shutil.rmtree(copy / "submitted")
    A.submit(copy, LESSON, "honest", fill_answers=True)
    run = subprocess.run([sys.executable, "-m", "minimal", "course", "grade", str(copy), LESSON], env=env,
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "honest: 40 / 40" in run.stdout, run.stdout
    assert (copy / "autograded" / "honest" / LESSON).is_dir() and (copy / "feedback" / "honest" / LESSON).is_dir()
    assert _digest(root / "autograded") == original, "grading the copy wrote into the original course"
