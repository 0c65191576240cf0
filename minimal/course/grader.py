"""Grading submissions: the reference run, the student's run in a sandbox, the verdicts, nbgrader's bookkeeping.

``python -m minimal course grade COURSE LESSON`` (``minimal.course.assignments.grade``) grades every submission of one
lesson:

1. **The reference run** (``reference_run``; once per version of the lesson, cached in
   ``COURSE/reference/<lesson>/``, outside ``source/`` so that no release copies it): the instructor's notebook,
   solutions in, executed as the instructor with ``MINIMAL_GRADING_DIR`` set, so that every ``grading.record``
   call writes the reference answers; the time of every cell is kept to set the student's timeouts
   (``limits_for``).
2. **nbgrader autograde**, with its ``Execute`` step replaced by ``SandboxedExecute``: the notebook (the student's
   answers, the locked checks put back by nbgrader, the hidden ones removed again: a record never sits in one) is
   copied into a scratch folder and executed there by ``minimal.course.sandbox`` with no rights over anything else; the kernel's records come back as data only, and
   ``minimal.course.judge`` compares them with the reference. Each test cell's outputs are replaced by its verdict (a line
   "check passed", or an error with the check's message), which is what nbgrader scores: the student's kernel
   cannot change a score, because no score is read from it.
3. **Feedback**: nbgrader's ``generate_feedback`` with ``StripHiddenTests`` (no hidden check's source in the page)
   and MathJax copied beside each page (offline).

``minimal.course.assignments.selftest(path)`` (``python -m minimal.course.assignments NOTEBOOK``) runs one lesson as the reference
and as its untouched release and judges both, without a sandbox: the lesson author's check.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import nbformat

from . import build as course
from . import grading, judge

__all__ = ["execute", "reference_run", "limits_for", "SandboxedExecute", "StripHiddenTests", "verdict_output",
           "UNSAFE_ENV"]

REFERENCE = "reference"          # COURSE/reference/<lesson>/: the reference records, outside source/ and release/
UNSAFE_ENV = "MINIMAL_GRADE_UNSAFE"
MAX_NOTEBOOK = 64 * 2 ** 20      # an executed submission larger than this is not read back
CELL_FACTOR, CELL_MARGIN = 5, 30    # a student's cell may take this times the reference's slowest, plus seconds
RUN_FACTOR, RUN_MARGIN = 3, 120     # the whole run: this times the reference's, plus seconds
KEEP = ("text/plain", "image/png")   # output kinds a feedback page shows; no HTML or script from a submission


def execute(nb, cwd, record_dir, timeout=600, env=None):
    """Execute a copy of ``nb`` in a fresh kernel in ``cwd`` with ``MINIMAL_GRADING_DIR=record_dir``; errors do
    not stop the run (every cell runs, as nbgrader does). Returns ``(executed notebook, seconds per cell)``."""
    from nbclient import NotebookClient

    nb = copy.deepcopy(nb)
    Path(record_dir).mkdir(parents=True, exist_ok=True)
    old = {k: os.environ.get(k) for k in (grading.ENV, *(env or {}))}
    os.environ[grading.ENV] = str(Path(record_dir).resolve())
    os.environ.update(env or {})
    seconds = []
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(cwd)}})
        with client.setup_kernel():
            for i, cell in enumerate(nb.cells):
                t0 = time.perf_counter()
                client.execute_cell(cell, i)
                seconds.append(time.perf_counter() - t0)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb, seconds


def _sha(path):
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def reference_run(course_root, lesson, notebook=None):
    """The reference records of one lesson (``COURSE/reference/<lesson>/records``), from running the instructor's
    source notebook as the instructor, once per version of it (the sha256 of the source file); returns the folder,
    whose ``run.json`` holds the seconds of every cell."""
    root = Path(course_root)
    notebook = notebook or lesson
    src = root / "source" / lesson / f"{notebook}.ipynb"
    if not src.is_file():
        raise FileNotFoundError(f"no source notebook {src}: run `python -m minimal course release` first")
    folder = root / REFERENCE / lesson
    meta = folder / "run.json"
    sha = _sha(src)
    if meta.is_file() and json.loads(meta.read_text()).get("sha256") == sha:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    os.chmod(root / REFERENCE, 0o700)
    nb = nbformat.read(src, as_version=4)
    missing_before = [r.check for rs in judge.rules(nb).values() for r in rs]
    done, seconds = execute(nb, src.parent, folder / "records")
    missing = [c for c in missing_before if not (folder / "records" / f"{c}.npz").is_file()]
    if missing:
        errors = [o for c in done.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        raise RuntimeError(f"the reference run of {lesson} recorded nothing for {missing}: the lesson fails before "
                           f"those checks ({errors[0].ename}: {errors[0].evalue})" if errors else "")
    meta.write_text(json.dumps({"sha256": sha, "seconds": seconds}))
    return folder


def limits_for(reference_folder):
    """The sandbox's limits for one lesson, from its reference run: a cell may take ``CELL_FACTOR`` times the
    slowest cell of the reference plus ``CELL_MARGIN`` seconds, the whole run ``RUN_FACTOR`` times the reference
    plus ``RUN_MARGIN`` seconds (the kernel's start and a cold compile), rather than one timeout for every lesson
    whatever its cells take."""
    from .sandbox import Limits

    seconds = json.loads((Path(reference_folder) / "run.json").read_text())["seconds"]
    total = sum(seconds)
    return Limits(cell_timeout=int(CELL_FACTOR * max(seconds) + CELL_MARGIN),
                  wall_seconds=int(RUN_FACTOR * total + RUN_MARGIN), cpu_seconds=int(RUN_FACTOR * total + RUN_MARGIN))


def _clean_outputs(outputs):
    """A submission's outputs as a feedback page may show them: streams, errors, and results or displays reduced
    to plain text and PNG images (never HTML or script from the student's kernel)."""
    out = []
    for o in outputs:
        kind = o.get("output_type")
        if kind == "stream" and o.get("name") in ("stdout", "stderr"):
            out.append(nbformat.v4.new_output("stream", name=o["name"], text=str(o.get("text", ""))[-20000:]))
        elif kind == "error":
            out.append(nbformat.v4.new_output("error", ename=str(o.get("ename", ""))[:200],
                                              evalue=str(o.get("evalue", ""))[:2000], traceback=[]))
        elif kind in ("display_data", "execute_result"):
            data = {k: v for k, v in dict(o.get("data", {})).items() if k in KEEP and isinstance(v, str)}
            if data:
                if kind == "execute_result":
                    out.append(nbformat.v4.new_output(kind, data=data, execution_count=None))
                else:
                    out.append(nbformat.v4.new_output(kind, data=data))
    return out


def _collect_records(scratch, dest):
    """Copy the record files the sandbox left in ``scratch/records`` into ``dest`` (a new folder of the grader's),
    never following a link: a ``records`` that is a link (to the reference's records, say) or a file that is one
    counts as no record."""
    import re
    import stat

    dest.mkdir(mode=0o700)
    try:
        folder = os.open(scratch / "records", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return dest
    try:
        for name in os.listdir(folder):
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}\.npz", name):
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    data = f.read(judge.MAX_BYTES + 1)
                    if len(data) <= judge.MAX_BYTES:
                        (dest / name).write_bytes(data)
    finally:
        os.close(folder)
    return dest


_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_SCRIPT_URL = re.compile(r"(?i)(java|vb)script\s*:")


def _sanitise_markdown(nb):
    """Markdown a student could write (any markdown cell of a submission) shown as text: no HTML tag, no script
    URL. nbgrader's feedback and formgrader templates render markdown without sanitising it."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _SCRIPT_URL.sub("blocked-script:", _TAG.sub("&lt;", cell.source))


def verdict_output(v):
    """What a test cell shows (and nbgrader scores): a line when it passed, an error with the check's words when
    not."""
    if v.passed:
        return [nbformat.v4.new_output("stream", name="stdout", text="check passed\n")]
    return [nbformat.v4.new_output("error", ename="CheckFailed", evalue=v.message,
                                   traceback=[f"CheckFailed: {v.message}"])]


try:
    from nbgrader.preprocessors import NbGraderPreprocessor
    from traitlets import Bool, Unicode
except ImportError:        # nbgrader is the [dev] extra; without it nothing here is used
    NbGraderPreprocessor = None

if NbGraderPreprocessor is not None:
    class SandboxedExecute(NbGraderPreprocessor):
        """nbgrader's ``Execute`` step for untrusted work (module docstring): the notebook runs in
        ``minimal.course.sandbox``, its records are judged by ``minimal.course.judge`` against the reference run, and each test
        cell's outputs become its verdict. Refuses to run without a sandbox unless ``MINIMAL_GRADE_UNSAFE=1``."""

        course_root = Unicode("", help="the course folder (nbgrader_config.py sets it to its own folder)").tag(
            config=True)
        keep_scratch = Bool(False, help="keep each run's scratch folder (debugging)").tag(config=True)

        def preprocess(self, nb, resources):
            from . import sandbox

            info = resources["nbgrader"]
            lesson, name, student = info["assignment"], info["notebook"], info["student"]
            root = Path(self.course_root or os.getcwd())
            ref = reference_run(root, lesson, name)
            source = nbformat.read(root / "source" / lesson / f"{name}.ipynb", as_version=4)
            scratch = Path(tempfile.mkdtemp(prefix="minimal-grade-"))
            try:
                sent = copy.deepcopy(nb)    # no hidden check enters the sandbox: the judge needs none of them
                for cell in sent.cells:
                    if cell.cell_type == "code":
                        cell.source = course.drop_hidden(cell.source)
                nbformat.write(sent, scratch / f"{name}.ipynb")
                sandbox.prepare(scratch, numba_cache=os.environ.get("NUMBA_CACHE_DIR"))
                rc, sentence, err = sandbox.run(f"{name}.ipynb", scratch, limits_for(ref),
                                                unsafe=os.environ.get(UNSAFE_ENV) == "1")
                self.log.info("%s / %s: ran with %s (exit %s)", student, lesson, sentence, rc)
                executed = None
                path = scratch / "executed.ipynb"
                if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_NOTEBOOK:
                    try:
                        executed = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
                    except Exception:      # anything the student's kernel wrote there is only data
                        executed = None
                if executed is not None and len(executed.cells) == len(nb.cells):
                    for cell, run in zip(nb.cells, executed.cells):
                        if cell.cell_type == "code":
                            cell.outputs = _clean_outputs(run.get("outputs", []))
                else:
                    self.log.warning("%s / %s: the run left no readable notebook; every check fails", student, lesson)
                    for cell in nb.cells:
                        if cell.cell_type == "code":
                            cell.outputs = []
                verdicts = judge.judge(source, ref / "records", _collect_records(scratch, scratch.parent /
                                                                                 (scratch.name + "-records")))
                for cell in nb.cells:
                    gid = cell.metadata.get("nbgrader", {}).get("grade_id")
                    if gid in verdicts:
                        cell.outputs = verdict_output(verdicts[gid])
                    elif cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code" \
                            and not cell.metadata["nbgrader"].get("solution"):
                        cell.outputs = verdict_output(judge.Verdict(False, "this check is not in the lesson's source"))
                _sanitise_markdown(nb)
            finally:
                if not self.keep_scratch:
                    shutil.rmtree(scratch, ignore_errors=True)
                shutil.rmtree(scratch.parent / (scratch.name + "-records"), ignore_errors=True)
            return nb, resources

    class StripHiddenTests(NbGraderPreprocessor):
        """``generate_feedback``: a test cell shows its visible checks only; hidden checks are removed."""

        def preprocess(self, nb, resources):
            for cell in nb.cells:
                md = cell.metadata.get("nbgrader", {})
                if cell.cell_type == "code" and md.get("grade") and not md.get("solution"):
                    cell.source = course.drop_hidden(cell.source)
            return nb, resources
