"""Device buffers for temporaries: ``Workspace`` (kept from one call to the next, so that a timed call allocates
nothing) and the helpers every host function takes its temporaries from. Imports numpy and numba only."""
from __future__ import annotations

import numpy as np
from numba import cuda

__all__ = ["Workspace"]


class Workspace:
    """Device buffers kept from one call to the next, so that a timed call allocates nothing.

    Every host function takes ``workspace=``: with None each temporary is a fresh ``cuda.device_array`` (a
    cudaMalloc per call); with a ``Workspace`` the temporaries of a given name, shape and dtype are allocated
    once and reused. Calls that share a workspace must not run concurrently (one stream, one thread)."""

    def __init__(self):
        self._buffers = {}

    def get(self, name, shape, dtype):
        key = (name, tuple(int(v) for v in shape), np.dtype(dtype).str)
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = cuda.device_array(key[1], dtype=dtype)
        return buf

    def __len__(self):
        return len(self._buffers)


def check_workspace(workspace):
    if workspace is not None and not isinstance(workspace, Workspace):
        raise ValueError(f"workspace must be a cuda_kernels.scan.Workspace or None, got {type(workspace).__name__}")


def alloc(workspace, name, shape, dtype):
    """A device array for a temporary: from ``workspace`` (reused) or freshly allocated."""
    if workspace is None:
        return cuda.device_array(tuple(shape), dtype=dtype)
    check_workspace(workspace)
    return workspace.get(name, shape, dtype)


def dummy(ndim, dtype, workspace=None):
    """A placeholder for an argument the kernel does not read (h0 without one, unused outputs)."""
    return alloc(workspace, f"unused{ndim}", (1,) * ndim, dtype)
