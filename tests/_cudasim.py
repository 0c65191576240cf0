"""A fix for a race in numba-cuda's CUDA simulator, applied by ``conftest.py`` when the simulator is on.

``FakeCUDAShared.array`` (numba-cuda 0.30.4, ``numba/cuda/simulator/kernelapi.py``) finds a block's shared
array by the source line that asks for it, and creates it when missing, without a lock:

    res = self._allocations.get(caller)
    if res is None:
        res = np.empty(shape, dtype)
        self._allocations[caller] = res

The simulator runs every CUDA thread of a block as a Python thread. A thread switched out between the lookup
and the store lets a second thread find nothing too, and the two then work on different "shared" arrays: a
correct kernel gives wrong numbers. CI saw it once (``test_blelloch_equals_reference_loop_float64[1000]``: max
relative error 0.31, passing on every other run and on an H100); ``test_cudasim.py`` forces the switch and
shows both the failure and the fix. Here the lookup-and-create is one step under a lock, with the same key
(file name and line of the caller) and the same dynamic-shared-memory path as the original.
"""
import sys
import threading

import numpy as np

_lock = threading.Lock()


def _empty(shape, dtype):
    """The allocation (a module attribute, so that a test can make it switch threads)."""
    return np.empty(shape, dtype)


def locked_shared_array(self, shape, dtype, alignment=None):
    """``FakeCUDAShared.array`` with the lookup-and-create of a call site's array made atomic."""
    from numba.cuda.simulator import kernelapi

    if shape == 0 or alignment is not None:       # dynamic shared memory, or the original's error
        return _original(self, shape, dtype, alignment)
    if isinstance(dtype, kernelapi.types.Type):
        dtype = kernelapi.numpy_support.as_dtype(dtype)
    frame = sys._getframe(1)
    caller = (frame.f_code.co_filename, frame.f_lineno)
    with _lock:
        res = self._allocations.get(caller)
        if res is None:
            res = self._allocations[caller] = _empty(shape, dtype)
    return res


_original = None


def apply():
    """Replace ``FakeCUDAShared.array`` (idempotent); returns the original function."""
    global _original
    from numba.cuda.simulator import kernelapi

    if _original is None:
        _original = kernelapi.FakeCUDAShared.array
        kernelapi.FakeCUDAShared.array = locked_shared_array
    return _original
