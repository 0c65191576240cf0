"""Hostile-user checks (issue 12): atomic writes after a killed writer, and `train` killed at random moments."""
import os
import subprocess
import sys

import numpy as np
import pytest

from minimal import _atomic
from minimal._atomic import atomic_write


def _dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _temp_name(target, pid, host=None):
    return f"{target}.{host or _atomic._HOST}.{pid}.0123abcd.tmp"


def test_a_write_removes_the_temporary_files_that_a_killed_writer_left(tmp_path):
    dead, alive = _dead_pid(), os.getppid()
    stale = tmp_path / _temp_name("run.npz", dead)
    live = tmp_path / _temp_name("run.npz", alive)              # a writer still at work: not ours to remove
    remote = tmp_path / _temp_name("run.npz", dead, "otherhost")  # another machine's pids mean nothing here
    other = tmp_path / _temp_name("other.npz", dead)             # another target's
    for p in (stale, live, remote, other):
        p.write_bytes(b"half a file")
    with atomic_write(tmp_path / "run.npz") as f:
        f.write(b"whole")
    assert sorted(os.listdir(tmp_path)) == sorted(["run.npz", live.name, remote.name, other.name])
    assert (tmp_path / "run.npz").read_bytes() == b"whole"


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077], ids=["022", "002", "077"])
def test_new_files_honour_the_umask_and_a_replaced_file_keeps_its_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        with atomic_write(tmp_path / "new.json", "w") as f:
            f.write("{}")
    finally:
        os.umask(old)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o666 & ~umask
    (tmp_path / "kept.json").write_text("{}")
    os.chmod(tmp_path / "kept.json", 0o640)
    with atomic_write(tmp_path / "kept.json", "w") as f:
        f.write("[]")
    assert (tmp_path / "kept.json").stat().st_mode & 0o777 == 0o640
