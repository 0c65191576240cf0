"""The student edition from a wheel, not a clone: the package is built as a wheel (``pip wheel --no-build-isolation``
from a copy of the repository's files), installed with ``pip install --target`` into a folder that is the only
``PYTHONPATH`` of the lessons' kernels, and ``python -m minimal course student OUT`` is run from outside any clone.
The edition holds no solution and no exercise output, its README is the student's, and Run All reaches the last cell
of a lesson that loads committed data: headless (nbclient), and in JupyterLab in Chromium (skipped without a browser,
as in tests/test_course_browser.py)."""
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import nbformat
import pytest

from minimal.course import build as course

ROOT = Path(course.__file__).resolve().parents[2]
LESSON = "gril_d_beyond_one_step.ipynb"      # loads data/gril/ (multistep_full, classification_full): 15 s
FILES = ("setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md", "minimal", "cuda_kernels", "data",
         "notebooks")


def _env(site, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_ENABLE_CUDASIM")}
    env.update(PYTHONPATH=str(site), **extra)
    return env


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    try:
        import wheel  # noqa: F401  (bdist_wheel for setuptools < 70.1)
    except ImportError:
        import setuptools
        if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (70, 1):
            pytest.skip("building a wheel needs the wheel package or setuptools >= 70.1 (the [dev] extra has it)")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in FILES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc",
                                                                            ".ipynb_checkpoints"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    env = _env("", NUMBA_CACHE_DIR=str(tmp / "numba"))
    env.pop("PYTHONPATH")
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                          str(tmp / "dist"), str(src)], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    whl = next((tmp / "dist").glob("minimal_recurrent_attention-*.whl"))
    assert f'pip install "./{whl.name}[notebooks]"' in course.STUDENT_INTRO, "the student README names another wheel"
    site = tmp / "site"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(whl)],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    work = tmp / "class"
    work.mkdir()
    env = _env(site, NUMBA_CACHE_DIR=str(tmp / "numba"))
    run = subprocess.run([sys.executable, "-m", "minimal", "course", "student", "out"], cwd=work, capture_output=True,
                         text=True, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    return {"wheel": whl, "site": site, "out": work / "out", "env": env}


def test_the_wheel_holds_the_student_edition_and_the_data_but_no_solution(edition):
    import zipfile

    names = zipfile.ZipFile(edition["wheel"]).namelist()
    assert any(n.startswith("minimal/_data/gril/") for n in names)
    assert not any(n.startswith("notebooks/") or n.endswith("INSTRUCTOR.md") for n in names)
    with zipfile.ZipFile(edition["wheel"]) as z:
        course_files = [n for n in names if n.startswith("minimal/_course/")]
        assert len([n for n in course_files if n.endswith(".ipynb")]) == len(course.lessons())
        for n in course_files:
            text = z.read(n).decode("utf-8")
            assert course.BEGIN not in text and "HIDDEN TESTS" not in text, n


def test_the_edition_has_no_solution_or_exercise_output_and_the_students_readme(edition):
    out = edition["out"]
    assert sorted(p.name for p in out.glob("*.ipynb")) == sorted(course.lessons())
    readme = (out / "README.md").read_text()
    assert readme == course.student_readme((course.NOTEBOOKS / course.SYLLABUS).read_text())
    assert "Grading" not in readme and "INSTRUCTOR" not in readme and "course student" not in readme
    for name in course.lessons():
        nb = nbformat.read(out / name, as_version=4)
        ref = nbformat.read(course.NOTEBOOKS / name, as_version=4)
        for cell, exercise in zip(nb.cells, course.exercise_of(nb)):
            assert course.BEGIN not in cell.source, name
            assert exercise is None or cell.cell_type != "code" or cell.outputs == [], (name, exercise)
        # no solution text: every solution cell's answer part is gone
        answers = {c.source for c in ref.cells if course.is_solution(c) and c.cell_type == "markdown"}
        assert not answers & {c.source for c in nb.cells}, name


def test_run_all_reaches_the_last_cell_from_the_wheel(edition):
    from nbclient import NotebookClient

    nb = nbformat.read(edition["out"] / LESSON, as_version=4)
    probe = nbformat.v4.new_code_cell("import minimal, minimal.data\nprint(minimal.__file__)\n"
                                      "print(minimal.data.DATA_ROOT)")
    nb.cells.append(probe)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(edition["out"])}}).execute(env=edition["env"])
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "every code cell ran"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert errors and all((o.ename == "NotImplementedError" and course.NOT_DONE in o.evalue)
                          or (o.ename == "NotAnswered" and "not answered yet" in o.evalue) for o in errors), \
        {(o.ename, o.evalue[:60]) for o in errors}
    where = probe.outputs[0].text.split()
    assert where[0].startswith(str(edition["site"])) and where[1] == str(edition["site"] / "minimal" / "_data")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_run_all_in_jupyterlab_from_the_wheel(edition, tmp_path):
    from test_course_browser import CHROMIUM, WHY

    if WHY:
        warnings.warn(f"BROWSER TEST SKIPPED: {WHY}")
        pytest.skip(f"BROWSER TEST SKIPPED: {WHY}")
    from playwright.sync_api import sync_playwright

    port, token = _free_port(), "minimal-course-test"
    env = dict(edition["env"], JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               IPYTHONDIR=str(tmp_path / "ipy"))
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", "--allow-root",
                               "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={edition['out']}"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(120):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            ctx = b.new_context(viewport={"width": 1400, "height": 900})
            remote = []

            def route(r):
                if r.request.url.startswith(f"http://127.0.0.1:{port}") or r.request.url.startswith("ws://127.0.0.1"):
                    r.continue_()
                else:
                    remote.append(r.request.url)
                    r.abort()
            ctx.route("**/*", route)
            page = ctx.new_page()
            page.set_default_timeout(300_000)
            page.goto(f"http://127.0.0.1:{port}/lab/tree/{LESSON}?token={token}")
            page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell')")
            page.wait_for_function("""() => { const w = window.jupyterapp.shell.currentWidget;
                return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel &&
                       w.sessionContext.session.kernel.status === 'idle'; }""")
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_timeout(2000)
            page.wait_for_function("""() => { const w = window.jupyterapp.shell.currentWidget;
                const k = w.sessionContext.session.kernel;
                const cells = w.content.widgets.filter(c => c.model.type === 'code');
                return k.status === 'idle' && cells.every(c => c.model.executionCount !== null); }""")
            r = page.evaluate("""() => { const w = window.jupyterapp.shell.currentWidget;
                const cells = w.content.widgets.filter(c => c.model.type === 'code');
                const errs = [];
                cells.forEach(c => { for (let i = 0; i < c.model.outputs.length; i++) {
                    const o = c.model.outputs.get(i).toJSON();
                    if (o.output_type === 'error') errs.push(o.ename + ': ' + o.evalue); } });
                return {n: cells.length, ran: cells.filter(c => c.model.executionCount !== null).length,
                        last: cells[cells.length - 1].model.executionCount, errs: errs,
                        text: document.querySelector('.jp-Notebook').innerText}; }""")
            b.close()
        assert r["ran"] == r["n"] and r["last"] is not None, r
        assert r["errs"] and all(e == f"NotImplementedError: {course.NOT_DONE}" for e in r["errs"]), r["errs"]
        assert "BEGIN SOLUTION" not in r["text"] and "**Solution.**" not in r["text"]
        assert remote == [], remote
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
