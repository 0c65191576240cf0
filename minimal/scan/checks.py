"""The scans' argument checks (a ValueError naming the argument), the CUDA module loader and the (B, T, C) views
the Numba kernels take; shapes as in the ``minimal.scan`` docstring."""
from __future__ import annotations

import importlib

import numpy as np

from ..validate import InputError, check_array, check_same_shape, overflow_error

def cuda_module(name):
    """``cuda_kernels.<name>``, imported only when the CUDA backend is asked for; a ValueError (InputError) if it
    cannot be, or if there is no CUDA GPU to run it on."""
    try:
        module = importlib.import_module(f"cuda_kernels.{name}")
    except ImportError as e:
        raise ValueError(f"backend='cuda' needs the module cuda_kernels.{name}, which could not be imported "
                         f"({e}); use a CPU backend") from e
    check_gpu()
    return module


def check_gpu():
    """Refuse backend="cuda" up front when numba finds no GPU (else numba's CudaSupportError comes from deep
    inside the first launch). The simulator (NUMBA_ENABLE_CUDASIM=1) counts as a GPU."""
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        return
    why = None
    if not cuda.is_available():
        why = "numba finds no CUDA driver and GPU"
    else:
        try:
            if len(cuda.gpus) == 0:
                why = "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)"
        except Exception as e:  # noqa: BLE001 - numba's CudaSupportError and driver errors
            why = f"the CUDA driver failed: {e}"
    if why is not None:
        raise InputError(f"backend='cuda' needs a CUDA GPU, and none is available ({why}). Use backend='numba' "
                         f"or 'numpy' on the CPU, or run the CUDA kernels on the CPU in numba's simulator: set "
                         f"NUMBA_ENABLE_CUDASIM=1 in the environment before Python starts (slow: for testing).")


def device_inputs(backend, x):
    """Whether this call takes device arrays: only backend="cuda" does, and x (the first input) decides."""
    return backend == "cuda" and not isinstance(x, np.ndarray) and cuda_module("scan").is_device(x)


def _check_device_array(name, x, ref_name):
    cs = cuda_module("scan")
    if not cs.is_device(x):
        raise ValueError(f"{name} must be a CUDA device array like {ref_name} (all inputs on one side), "
                         f"got {type(x).__name__}")
    if np.dtype(x.dtype).kind != "f":
        raise ValueError(f"{name} must have a floating dtype, got {x.dtype}")


def _check_device_finite(name, x):
    if not cuda_module("scan").all_finite(x):
        raise ValueError(f"{name} contains NaN or inf")


def check_input(name, x, device, ref_name, min_ndim=None, finite=True, kind="f"):
    """check_array for NumPy inputs; for device arrays the same checks, NaN/inf on the device. ``finite=False``
    leaves NaN/inf to the caller (the Numba kernels check them in their own pass). ``kind``: "f", or "fc" where
    complex arrays are taken too (NumPy inputs only)."""
    if not device:
        return check_array(name, x, kind=kind, min_ndim=min_ndim, finite=finite)
    _check_device_array(name, x, ref_name)
    if min_ndim is not None and len(x.shape) < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {x.shape}")
    _check_device_finite(name, x)
    return x


COMPLEX_BACKEND = "numpy"   # the one backend of ``linear_scan`` that takes complex64 / complex128


def check_scan_inputs(a, b, h0, a_name="a", b_name="b", h0_name="h0", device=False, finite=True, backend=None):
    """Shapes, dtypes and (with ``finite``) NaN/inf of a scan's inputs. ``backend``: that of a linear scan, whose
    NumPy backend also takes complex64 / complex128 and whose other backends refuse them naming the dtype and
    the backend that takes it; None (the log-space scans): float32 or float64 only."""
    kind = "fc" if backend == COMPLEX_BACKEND else "f"
    if backend not in (None, COMPLEX_BACKEND) and isinstance(a, np.ndarray) and a.dtype.kind == "c":
        raise ValueError(f"{a_name} is {a.dtype}, and backend={backend!r} computes in float32 or float64 only: "
                         f"complex scans run on backend={COMPLEX_BACKEND!r}")
    check_input(a_name, a, device, a_name, min_ndim=2, finite=finite, kind=kind)
    check_input(b_name, b, device, a_name, min_ndim=2, finite=finite, kind=kind)
    if a.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise ValueError(f"{a_name} must be float32 or float64 (or complex64 / complex128 on backend "
                         f"{COMPLEX_BACKEND!r}), got {a.dtype}")
    check_same_shape(b_name, b, a_name, a)
    if a.dtype != b.dtype:
        raise ValueError(f"{b_name} must have the dtype of {a_name} ({a.dtype}), got {b.dtype}")
    if a.shape[1] < 1:
        raise ValueError(f"{a_name} must have at least one time step (axis 1), got shape {a.shape}")
    if h0 is not None:
        check_input(h0_name, h0, device, a_name, finite=finite, kind=kind)
        want = (a.shape[0],) + a.shape[2:]
        if h0.shape != want:
            raise ValueError(f"{h0_name} must have shape (B, ...) = {want} to match {a_name} {a.shape}, "
                             f"got {h0.shape}")
        if h0.dtype != a.dtype:
            raise ValueError(f"{h0_name} must have the dtype of {a_name} ({a.dtype}), got {h0.dtype}")


def check_same_dtype(name, x, ref_name, ref):
    if x.dtype != ref.dtype:
        raise ValueError(f"{name} must have the dtype of {ref_name} ({ref.dtype}), got {x.dtype}")


def n_channels(shape):
    """C = the product of the trailing axes (1 for none); explicit because reshape(..., -1) of an empty
    array cannot infer it."""
    return int(np.prod(shape[2:], dtype=np.int64))


def as_btc(x):
    """(B, T, ...) -> a C-contiguous (B, T, C) view (a copy only if x is not contiguous)."""
    return np.ascontiguousarray(x).reshape(x.shape[0], x.shape[1], n_channels(x.shape))


def as_bc(x, like):
    """(B, ...) or None -> a C-contiguous (B, C) array; None becomes zeros."""
    B, C = like.shape[0], like.shape[2]
    if x is None:
        return np.zeros((B, C), dtype=like.dtype)
    return np.ascontiguousarray(x).reshape(B, C)



def check_out(out, shape, dtype, inputs, like="a"):
    """``out`` must be a writeable, C-contiguous ndarray of the given shape and dtype (those of ``like``) that
    shares no memory with the inputs (the kernels read a_t and b_t after writing h_{t-1}, so an overlap would
    change the result). ``like`` names what out must match in the messages: a cell names its own arrays."""
    if not isinstance(out, np.ndarray):
        raise InputError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise InputError(f"out must have the shape of {like} {tuple(shape)}, got {out.shape}")
    if out.dtype != dtype:
        raise InputError(f"out must have the dtype of {like} ({np.dtype(dtype)}), got {out.dtype}")
    if not out.flags.c_contiguous:
        raise InputError("out must be C-contiguous (np.empty(a.shape, a.dtype) is); got a non-contiguous view")
    if not out.flags.writeable:
        raise InputError("out must be writeable, got a read-only array")
    for name, x in inputs.items():
        if x is not None and np.shares_memory(out, x):
            raise InputError(f"out must not share memory with {name}: the scan would overwrite its own input")


def raise_non_finite(a, b, h0, names=("a", "b", "h0"), what="the scan h_t = a_t h_{t-1} + b_t", extra=None):
    """After a kernel whose finiteness flag was down: name the input that holds a NaN or inf, or, when all are
    finite, say that ``what`` overflowed. ``extra``: further inputs (name -> array) searched after these."""
    inputs = dict(zip(names, (a, b, h0)))
    inputs.update(extra or {})
    inputs = {k: v for k, v in inputs.items() if v is not None}
    for name, x in inputs.items():
        if not np.all(np.isfinite(x)):
            raise InputError(f"{name} contains NaN or inf")
    advice = "scale them down" + (", or use float64" if a.dtype == np.float32 else "")
    raise overflow_error(what, inputs, advice)
