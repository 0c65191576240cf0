"""The simulator's shared arrays are one per block, even when a thread is switched out while allocating one.

``_cudasim`` (applied by ``conftest.py``) makes the simulator's lookup-and-create of a shared array atomic.
These tests force a thread switch inside the allocation, where the unpatched simulator hands different
threads of one block different arrays.
"""
import time

import numba
import numpy as np
import pytest
from numba import cuda

import _cudasim

pytestmark = pytest.mark.skipif(not numba.config.ENABLE_CUDASIM, reason="the CUDA simulator's own race")

N = 64


@cuda.jit
def rotate(out):
    """out[i] = i + 1 (mod N), read from the slot another thread wrote: right only if the array is shared."""
    s = cuda.shared.array(N, numba.float64)
    i = cuda.threadIdx.x
    s[i] = i
    cuda.syncthreads()   # every slot written before any is read
    out[i] = s[(i + 1) % N]


def slow(empty, calls):
    """``empty`` that first hands the interpreter to the block's other threads; counts its calls."""
    def allocate(*args, **kwargs):
        calls.append(args)
        time.sleep(0.02)   # longer than a traceback of a deep (pytest) stack
        return empty(*args, **kwargs)
    return allocate


def launch():
    out = np.full(N, -1.0)
    rotate[1, N](out)
    return out


WANT = (np.arange(N) + 1.0) % N


def test_patched_simulator_gives_every_thread_the_same_shared_array(monkeypatch):
    calls = []
    monkeypatch.setattr(_cudasim, "_empty", slow(_cudasim._empty, calls))
    np.testing.assert_array_equal(launch(), WANT)
    assert len(calls) == 1     # one array for the block's one call site


def test_unpatched_simulator_splits_the_array_when_switched_mid_allocation(monkeypatch):
    """The premise of the fix. If numba-cuda fixes the race, this skips: then ``_cudasim`` can go."""
    from numba.cuda.simulator import kernelapi

    calls = []

    class SlowNumpy:
        empty = staticmethod(slow(np.empty, calls))

        def __getattr__(self, name):
            return getattr(np, name)

    monkeypatch.setattr(kernelapi.FakeCUDAShared, "array", _cudasim.apply())
    monkeypatch.setattr(kernelapi, "np", SlowNumpy())
    out = launch()
    if len(calls) == 1:
        pytest.skip("this numba-cuda's simulator allocates shared arrays atomically: tests/_cudasim.py can go")
    assert not np.array_equal(out, WANT)   # several arrays for one block: threads read slots nobody wrote
