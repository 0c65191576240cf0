"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one.

    with atomic_write("run.npz") as f:
        np.savez(f, **arrays)

The data goes to a temporary file in the target's folder (so ``os.replace`` stays on one file system and is
atomic), is flushed and fsync'ed, and only then replaces the target. If the block raises, the temporary file
is removed and the target is left as it was. Used by ``minimal.run.io`` (every results JSON, job records and
weights) and ``minimal.run.checkpoint`` (checkpoints).

The temporary file is ``<name>.<host>.<pid>.<random>.tmp``. A writer that is killed (SIGKILL, power loss)
cannot remove it, so every write first removes the temporary files of the same target left by writers of
this host whose process no longer exists; those of a live process, or of another host sharing the folder,
are left alone. The file is created with mode 0o666 filtered by the umask, as ``open`` would (``mkstemp``
would give 0o600 whatever the umask), or with the mode of the file it replaces.
"""
from __future__ import annotations

import os
import secrets
import socket
import stat
from contextlib import contextmanager

__all__ = ["atomic_write"]

_HOST = socket.gethostname().replace(os.sep, "_")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)  # signal 0: checks that the process exists, sends nothing
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _remove_stale(folder, name):
    """Remove ``<name>.<this host>.<pid>.<random>.tmp`` files whose writer process is gone."""
    prefix = f"{name}.{_HOST}."
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        parts = entry[len(prefix):-len(".tmp")].split(".")
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        if pid != os.getpid() and not _pid_alive(pid):
            try:
                os.remove(os.path.join(folder, entry))
            except FileNotFoundError:  # another writer cleaned it first
                pass


def _create_temp(folder, name, mode):
    """Open a new temporary file next to the target; returns (fd, path)."""
    while True:
        tmp = os.path.join(folder, f"{name}.{_HOST}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), tmp  # the umask applies
        except FileExistsError:
            continue


@contextmanager
def atomic_write(path, mode="wb"):
    """Yield a file object opened with ``mode`` ("wb" or "w"); on a clean exit it atomically becomes ``path``."""
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    path = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(path)
    _remove_stale(folder, name)
    fd, tmp = _create_temp(folder, name, 0o666)
    try:
        with os.fdopen(fd, mode) as f:
            try:
                os.fchmod(f.fileno(), stat.S_IMODE(os.stat(path).st_mode))  # replacing a file keeps its mode
            except FileNotFoundError:
                pass
            yield f
            f.flush()
            os.fsync(f.fileno())  # the bytes reach the disk before the name points at them
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):  # only when something failed before the replace
            os.remove(tmp)
