"""Process tuning for training small NumPy models on one CPU core (measured on the project's 2-core machines):
one BLAS thread, and glibc kept from handing large temporaries back to the OS every step.

    from minimal.run import speed
    speed.tune()          # once, at the start of a training run; safe to call again

Both knobs act on the running process (no environment variables needed before NumPy's import) and are no-ops
where the library is not there (no glibc, a BLAS other than NumPy's bundled OpenBLAS). Neither changes a
single computed number: they change only where memory comes from and how many threads one matmul uses.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import re

__all__ = ["tune", "set_blas_threads", "get_blas_threads", "tune_malloc"]

# glibc's mallopt parameter numbers (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads")


def _openblas():
    """The OpenBLAS shared library NumPy has loaded (found in /proc/self/maps), or None."""
    import numpy  # noqa: F401  (loads the library)
    try:
        with open("/proc/self/maps") as f:
            paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", f.read())))
    except OSError:
        return None
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _symbol(lib, names):
    for name in names:
        fn = getattr(lib, name, None) if lib is not None else None
        if fn is not None:
            return fn
    return None


def set_blas_threads(n=1):
    """Use ``n`` OpenBLAS threads from now on. Returns True when a setter was found and called."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    fn = _symbol(_openblas(), _SETTERS)
    if fn is None:
        return False
    fn(ctypes.c_int(n))
    return True


def get_blas_threads():
    """OpenBLAS's current thread count, or None where it cannot be read."""
    fn = _symbol(_openblas(), _GETTERS)
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    return int(fn())


def tune_malloc(mmap_threshold=32 << 20, trim_threshold=1 << 30):
    """glibc ``mallopt``: serve allocations below ``mmap_threshold`` bytes from the heap and keep up to
    ``trim_threshold`` bytes of freed heap, so the per-step temporaries are reused instead of mmap'ed, zeroed
    and unmapped every step (fewer page faults: a teacher-student step ran faster with it, timed once).
    Returns True on glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold))) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                                 int(trim_threshold)))


def tune(blas_threads=1):
    """One BLAS thread and the malloc thresholds above. Returns {"blas": bool, "malloc": bool} (what applied)."""
    return {"blas": set_blas_threads(blas_threads), "malloc": tune_malloc()}
