"""Run a student's notebook with no rights over anything else.

``run(nb_path, scratch, ...)`` executes one notebook inside bubblewrap (``bwrap``, the Debian/Ubuntu package
``bubblewrap``; a well-kept tool that Flatpak uses, so that this project writes no sandbox of its own):

- **what it sees**: a fresh root holding only the system's ``/usr`` (and the ``/bin``, ``/lib`` links), the few files
  of ``/etc`` that Python and its libraries read (``ETC``),
  the Python installation and virtual environment, the ``minimal`` package and its data, all read-only, and the
  scratch folder (the notebook, its records, a home, caches), the one place it can write. Not the course folder
  (no ``source/``, ``gradebook.db``, other students' work), not the instructor's home, not the repository's
  ``notebooks/`` (the solutions). No network (its own empty network namespace), its own process and IPC
  namespaces, a new session (no terminal to write into);
- **who it is**: run as root, bubblewrap builds that view with root's rights (so a Python installed under the
  instructor's ``0700`` home can be shown read-only) and ``setpriv`` then drops to the unprivileged user ``nobody``
  (65534) with every capability gone, before anything of the student's runs; run as a normal user, bubblewrap's
  user namespace keeps that user's own uid but shows it nothing else;
- **how much**: ``prlimit`` caps its address space (``memory``), processes (``processes``, counted per user),
  CPU seconds, file sizes and open files, and the run as a whole has a wall-clock limit; every process it
  started ends with it (a process namespace dies with its first process).

``isolation()`` says which of these is available here, or why none is (``run`` then refuses unless
``unsafe=True``, which executes the notebook as the current user with only the timeouts). Inside the sandbox
``python -m minimal.course.sandbox NB OUT TIMEOUT`` executes the notebook with nbclient.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Limits", "isolation", "run", "NOBODY"]

NOBODY = 65534
WARM_CACHE_BYTES = 256 * 2 ** 20     # a numba cache up to this size is copied into each sandbox


@dataclass(frozen=True)
class Limits:
    memory: int = 6 * 2 ** 30          # bytes of address space per process (numba and OpenBLAS reserve a lot)
    processes: int = 128               # tasks (threads count) of the sandbox's user beyond those it already has
    cpu_seconds: int = 1800            # per process
    file_bytes: int = 256 * 2 ** 20    # largest file it can write
    open_files: int = 512
    cell_timeout: int = 120            # seconds per cell (nbclient)
    wall_seconds: int = 1800           # the whole run


def _bwrap():
    return shutil.which("bwrap")


def isolation():
    """``(kind, sentence)``: kind is ``"bwrap-nobody"`` (root: bubblewrap as the user nobody), ``"bwrap-user"``
    (a normal user's bubblewrap) or ``None``, with the sentence that says why."""
    bwrap = _bwrap()
    if bwrap is None:
        return None, ("bubblewrap is not installed (apt-get install bubblewrap, or your distribution's package "
                      "'bubblewrap')")
    root = os.geteuid() == 0
    if root and shutil.which("setpriv") is None:
        return None, "running as root needs setpriv (util-linux) to drop to the user nobody"
    cmd = [bwrap, "--unshare-pid", "--unshare-net", *([] if root else ["--unshare-user"]), "--die-with-parent",
           "--ro-bind", "/usr", "/usr"] + _links() + (
        [shutil.which("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if root else []) + [
        "/usr/bin/true"]
    probe = subprocess.run(cmd, capture_output=True, text=True)
    if probe.returncode != 0:
        return None, f"bubblewrap cannot make a sandbox here ({probe.stderr.strip() or probe.returncode}): user " \
                     f"namespaces may be disabled"
    if root:
        return "bwrap-nobody", "bubblewrap as the user nobody (uid 65534): no network, only its own scratch folder"
    return "bwrap-user", (f"bubblewrap in a user namespace as uid {os.getuid()}: no network, only its own scratch "
                          f"folder")


def _links():
    """/bin, /lib, /lib64, /sbin as on this system: links into /usr (merged /usr), else read-only binds."""
    out = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / name
        if p.is_symlink():
            out += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            out += ["--ro-bind", str(p), str(p)]
    return out


ETC = ("passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "hosts",
       "fonts", "mime.types", "ssl")     # what Python, NumPy, Matplotlib and Jupyter read of /etc; nothing else of it


def _etc():
    out = []
    for name in ETC:
        p = Path("/etc") / name
        if p.exists():
            out += ["--ro-bind", str(p), str(p)]
    return out


def _needed():
    """The folders the kernel must read: Python's installation, the environment, the package and its data."""
    from ..data import DATA_ROOT

    pkg = Path(__file__).resolve().parents[1]   # the package minimal/, not only minimal/course/
    need = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), pkg, Path(DATA_ROOT).resolve()}
    kernels = pkg.parent / "cuda_kernels"
    if kernels.is_dir():
        need.add(kernels)
    for p in sys.path:      # site-packages outside the prefix (a user site, a second environment)
        q = Path(p).resolve() if p else None
        if q and q.is_dir() and "site-packages" in q.parts and not any(q.is_relative_to(n) for n in need):
            need.add(q)
    # a folder inside another needed one is bound with it
    return sorted(n for n in need if n.exists() and not any(n != m and n.is_relative_to(m) for m in need))


def _env(scratch):
    home = scratch / "home"
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
           "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
           "NUMBA_CACHE_DIR": str(scratch / "cache" / "numba"), "MPLCONFIGDIR": str(scratch / "cache" / "mpl"),
           "IPYTHONDIR": str(home / ".ipython"), "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
           "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
           "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"), "MINIMAL_GRADING_DIR": str(scratch / "records"),
           "TMPDIR": "/tmp"}
    for k in ("OPENBLAS_CORETYPE", "NUMBA_CPU_NAME", "NUMBA_DISABLE_JIT", "NUMBA_ENABLE_CUDASIM", "MINIMAL_QUICK"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def _user_tasks(uid):
    """Tasks (threads included) that ``uid`` already runs: RLIMIT_NPROC counts them all."""
    n = 0
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if d.stat().st_uid == uid:
                    n += len(os.listdir(d / "task"))
            except OSError:
                pass
    return n


def prepare(scratch, numba_cache=None):
    """Make ``scratch`` the sandbox's folder: home, caches, records (copying a warm numba cache in, as data)."""
    scratch = Path(scratch)
    for sub in ("home", "cache/numba", "cache/mpl", "runtime", "records"):
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    if numba_cache and Path(numba_cache).is_dir():     # a warm cache saves each run its compiles; not a huge one
        files = [p for p in Path(numba_cache).rglob("*") if p.is_file()]
        if sum(p.stat().st_size for p in files) <= WARM_CACHE_BYTES:
            shutil.copytree(numba_cache, scratch / "cache" / "numba", dirs_exist_ok=True)
    if os.geteuid() == 0:
        for dirpath, dirnames, filenames in os.walk(scratch):
            os.chown(dirpath, NOBODY, NOBODY)
            for f in filenames:
                os.chown(os.path.join(dirpath, f), NOBODY, NOBODY, follow_symlinks=False)
    os.chmod(scratch, 0o700)


def run(nb_name, scratch, limits=Limits(), unsafe=False):
    """Execute ``scratch/nb_name`` into ``scratch/executed.ipynb``; returns ``(returncode, isolation sentence,
    stderr tail)``. The kernel's records land in ``scratch/records``."""
    scratch = Path(scratch).resolve()
    kind, sentence = isolation()
    inner = [sys.executable, "-m", "minimal.course.sandbox", str(scratch / nb_name), str(scratch / "executed.ipynb"),
             str(limits.cell_timeout)]
    env = _env(scratch)
    if kind is None:
        if not unsafe:
            raise PermissionError(f"no sandbox for student code here: {sentence}. Install it, or pass --unsafe to "
                                  f"grade with the students' code running with your rights (only for work you trust)")
        log = tempfile.TemporaryFile()
        rc, err = _wait(subprocess.Popen(inner, env={**os.environ, **env}, cwd=scratch, stdout=subprocess.DEVNULL,
                                         stderr=log, start_new_session=True), limits, log)
        return rc, f"NO SANDBOX (--unsafe: {sentence})", err
    root = kind == "bwrap-nobody"
    uid = NOBODY if root else os.getuid()
    binds, parents = [], set()
    for path in _needed():
        binds += ["--ro-bind", str(path), str(path)]
        parents.update(p for p in path.parents if p != Path("/"))
    parents.update(p for p in scratch.parents if p != Path("/"))
    dirs = []    # the folders above each bound one, traversable (bubblewrap would copy a 0700 home's mode)
    for p in sorted(parents, key=lambda q: len(q.parts)):
        if str(p) not in ("/usr", "/etc", "/proc", "/dev", "/tmp") and p.parts[1] not in ("usr", "etc"):
            dirs += ["--perms", "0755", "--dir", str(p)]
    limit = [shutil.which("prlimit"), f"--as={limits.memory}", f"--nproc={_user_tasks(uid) + limits.processes}",
             f"--cpu={limits.cpu_seconds}", f"--fsize={limits.file_bytes}", f"--nofile={limits.open_files}",
             "--core=0", "--"]
    # as root: bubblewrap makes the namespaces and the view with root's rights (no user namespace), then setpriv
    # drops to nobody with every capability gone before anything of the student's runs; as a user: a user namespace
    box = [_bwrap(), "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
           *([] if root else ["--unshare-user"]), "--die-with-parent", "--new-session", "--clearenv",
           "--ro-bind", "/usr", "/usr", *_links(), *_etc(), "--proc", "/proc", "--dev", "/dev",
           "--tmpfs", "/tmp", *dirs, *binds, "--bind", str(scratch), str(scratch), "--chdir", str(scratch)]
    for k, v in env.items():
        box += ["--setenv", k, v]
    drop = [shutil.which("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs"]
    cmd = box + drop + limit + inner if root else limit + box + inner
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    rc, err = _wait(proc, limits, log)
    return rc, sentence, err


def _wait(proc, limits, err):
    """Wait for the run (killing its process group at the wall-clock limit); the tail of its stderr, which went to a
    file of the grader's (a pipe would keep whatever the kernel writes in the grader's memory)."""
    try:
        proc.wait(timeout=limits.wall_seconds)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        code = 124
    err.seek(0, os.SEEK_END)
    err.seek(max(0, err.tell() - 2000))
    tail = err.read().decode("utf-8", "replace")
    err.close()
    return code, tail + ("\n(stopped: the wall-clock limit)" if code == 124 else "")


def _execute(src, out, cell_timeout):
    """Inside the sandbox: run every cell of ``src`` (errors do not stop the run) and write ``out``."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(src, as_version=4)
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, resources={"metadata": {"path": str(Path(src).parent)}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, out)


if __name__ == "__main__":
    _execute(sys.argv[1], sys.argv[2], int(sys.argv[3]))
