"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one.

    with atomic_write("run.npz") as f:
        np.savez(f, **arrays)

The data goes to a temporary file in the target's folder (so ``os.replace`` stays on one file system and is
atomic), is flushed and fsync'ed, and only then replaces the target. If the block raises, the temporary file
is removed and the target is left as it was. Used by ``minimal.train`` (checkpoints) and ``minimal.sweep``
(job records).
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager

__all__ = ["atomic_write"]


@contextmanager
def atomic_write(path, mode="wb"):
    """Yield a file object opened with ``mode`` ("wb" or "w"); on a clean exit it atomically becomes ``path``."""
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    path = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=name, suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # the bytes reach the disk before the name points at them
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):  # only when something failed before the replace
            os.remove(tmp)
