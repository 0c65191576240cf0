"""Host-side arrays of the scan kernels: where they live, what shape and dtype they must have, and the
results' shapes. ``scan.py`` and ``window.py`` check their arguments with these; ``minimal.scan`` uses
``is_device``, ``to_device`` and ``all_finite`` (through ``scan``) to take device arrays through
``backend="cuda"``.

NumPy arrays are copied to the device (and results back); numba device arrays (anything with
``__cuda_array_interface__``, or the simulator's arrays) stay where they are.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ._device import NB_TYPES, kernel
from .sequential import SEQUENTIAL_BLOCK

__all__ = ["is_device", "to_device", "all_finite"]


def is_device(x):
    """True for a numba device array (also the simulator's) or anything with ``__cuda_array_interface__``."""
    return cuda.devicearray.is_cuda_ndarray(x) or hasattr(x, "__cuda_array_interface__")


def to_device(x):
    """A NumPy array copied to the device (made contiguous first); a device array is returned as it is."""
    if isinstance(x, np.ndarray):
        return cuda.to_device(np.ascontiguousarray(x))
    return x if cuda.devicearray.is_cuda_ndarray(x) else cuda.as_cuda_array(x)


@kernel(SEQUENTIAL_BLOCK)
def _flag_nonfinite(x, flag):
    i = cuda.grid(1)
    if i < x.shape[0] and not math.isfinite(x[i]):
        flag[0] = 1  # every writer writes the same value, so the race between them is harmless


def all_finite(x):
    """Whether a (C-contiguous) device array holds no NaN or inf: one read of x on the device, one int back."""
    if x.size == 0:
        return True
    flag = cuda.to_device(np.zeros(1, dtype=np.int32))
    flat = to_device(x).reshape(x.size)
    _flag_nonfinite[-(-x.size // SEQUENTIAL_BLOCK), SEQUENTIAL_BLOCK](flat, flag)
    return int(flag.copy_to_host()[0]) == 0


def check_out(out, names, shapes, dtype, on_device):
    """``out=``: device arrays of the results' shapes and dtype, or None (fresh arrays). Returns a tuple."""
    if out is None:
        return None
    if not on_device:
        raise ValueError("out= takes device arrays and needs the inputs on the device too (NumPy inputs are "
                         "copied back into fresh host arrays anyway)")
    single = len(names) == 1
    outs = (out,) if single else out
    if not isinstance(outs, (tuple, list)) or len(outs) != len(names):
        raise ValueError(f"out must be {'a device array' if single else f'a tuple of {len(names)} device arrays'}"
                         f" ({', '.join(names)}), got {type(out).__name__}")
    for name, o, shape in zip(names, outs, shapes):
        if not is_device(o):
            raise ValueError(f"out ({name}) must be a CUDA device array, got {type(o).__name__}")
        if tuple(o.shape) != tuple(shape) or o.dtype != dtype:
            raise ValueError(f"out ({name}) must have shape {tuple(shape)} and dtype {np.dtype(dtype)}, got "
                             f"{tuple(o.shape)} {o.dtype}")
        if not cuda.devicearray.is_cuda_ndarray(o) or not o.is_c_contiguous():
            raise ValueError(f"out ({name}) must be a C-contiguous numba device array")
    return tuple(outs)


def check_block(block):
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 2 or block > 1024 \
            or block & (block - 1):
        raise ValueError(f"block must be a power of two in [2, 1024] (threads per block), got {block!r}")
    return int(block)


def check_inputs(names, arrays, h0_name, h0):
    """Validate (B, T, ...) float32/float64 arrays of one shape and dtype; returns (on_device, shape)."""
    first_name, first = names[0], arrays[0]
    on_device = is_device(first)
    for name, x in zip(names, arrays):
        if not (isinstance(x, np.ndarray) or is_device(x)):
            raise ValueError(f"{name} must be a numpy.ndarray or a CUDA device array, got {type(x).__name__}")
        if is_device(x) != on_device:
            raise ValueError(f"{name} must live where {first_name} does "
                             f"({'device' if on_device else 'host'}), got the other")
        if len(x.shape) < 2:
            raise ValueError(f"{name} must have shape (B, T, ...) with at least 2 dimensions, got {x.shape}")
        if np.dtype(x.dtype) not in NB_TYPES:
            raise ValueError(f"{name} must have dtype float32 or float64, got {x.dtype}")
        if tuple(x.shape) != tuple(first.shape):
            raise ValueError(f"{name} must have the shape of {first_name} {tuple(first.shape)}, got "
                             f"{tuple(x.shape)}")
        if x.dtype != first.dtype:
            raise ValueError(f"{name} must have the dtype of {first_name} ({first.dtype}), got {x.dtype}")
    shape = tuple(first.shape)
    if shape[1] < 1:
        raise ValueError(f"{first_name} must have at least one time step (axis 1), got shape {shape}")
    if h0 is not None:
        want = (shape[0],) + shape[2:]
        if not (isinstance(h0, np.ndarray) or is_device(h0)) or is_device(h0) != on_device:
            raise ValueError(f"{h0_name} must be an array living where {first_name} does, got "
                             f"{type(h0).__name__}")
        if tuple(h0.shape) != want:
            raise ValueError(f"{h0_name} must have shape (B, ...) = {want} to match {first_name} {shape}, "
                             f"got {tuple(h0.shape)}")
        if h0.dtype != first.dtype:
            raise ValueError(f"{h0_name} must have the dtype of {first_name} ({first.dtype}), got {h0.dtype}")
    return on_device, shape


def to_device_3d(x, shape3):
    """(B, T, ...) -> a (B, T, C) device array; NumPy inputs are copied over (contiguous)."""
    return to_device(x).reshape(shape3)


def shape3(shape):
    return (shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64)))


def empty(shape, dtype, on_device):
    """The result for inputs with no elements: nothing to launch."""
    return cuda.device_array(shape, dtype=dtype) if on_device else np.empty(shape, dtype=dtype)


def grads_out(grads, shape, on_device):
    """(B, T, C), (B, T, C), (B, C) device arrays -> the caller's shapes, where the inputs live."""
    out = (grads[0].reshape(shape), grads[1].reshape(shape), grads[2].reshape((shape[0],) + shape[2:]))
    return out if on_device else tuple(x.copy_to_host() for x in out)


def grad_shapes(shape):
    return shape, shape, (shape[0],) + tuple(shape[2:])


def grads_3d(out, s3):
    """The caller's (da, db, dh0) arrays as (B, T, C), (B, T, C), (B, C) views."""
    return out[0].reshape(s3), out[1].reshape(s3), out[2].reshape((s3[0], s3[2]))


def empty_grads(shape, dtype, on_device):
    return tuple(empty(sh, dtype, on_device) for sh in (shape, shape, (shape[0],) + shape[2:]))

