"""Linear-recurrence scans: h_t = a_t * h_{t-1} + b_t along the time axis (axis 1).

Glossary: B batch, T time (axis 1), C channels = the product of the trailing axes, which stay contiguous.
Shapes: ``a``, ``b`` and the result ``h`` are (B, T, ...) with one shape and one dtype (float32 or float64);
``h0`` is (B, ...) or None (meaning zeros). We write h[:, t] for the state after step t (0-based), so
h[:, 0] = a[:, 0] * h0 + b[:, 0].

The words ``method`` and ``backend``, their values and their defaults ("auto" and "numba", which None means) are
those of ``minimal.conventions`` (docs/conventions.md), as in every cell.

Methods (``method=``):
    "sequential"  the plain loop over t, the reference every other method is tested against.
    "blelloch"    the work-efficient up-sweep/down-sweep scan over pairs (a, b) with the associative operator
                  (a1, b1) ∘ (a2, b2) = (a1 a2, a2 b1 + b2)  (pair 1 earlier in time; Blelloch 1990, Sec. 1.4),
                  2(T - 1) operator applications in place, any T (not only powers of two).
    "auto"        the faster of the two for the backend: "sequential" on the CPU backends (``python -m minimal
                  bench scan``: the Numba loop runs at ~0.9 of a same-run copy's bandwidth, its Blelloch tree at
                  ~0.2; one core gives the tree no parallelism to use), and for "cuda" the fastest version for
                  the nearest benchmarked shape (``cuda_kernels/dispatch.py``, a table of measured winners).
Backends (``backend=``):
    "numpy"  sequential = the reference loop; blelloch = the teaching version, one strided NumPy op per level.
    "numba"  compiled loops (``minimal._scan_numba``), time outer, contiguous channel axis inner. The NaN/inf
             check is fused into the scan (a flag from the kernel; the inputs are searched only when it fails),
             and ``linear_scan(..., out=h)`` writes into a caller's buffer (also with "numpy").
    "cuda"   delegates to ``cuda_kernels.scan`` (imported only when asked for). With this backend the
             arrays may also be numba device arrays (all of them, or none): they are checked for shape and
             dtype on the host and for NaN/inf on the device (``cuda_kernels.scan.all_finite``, one read of
             each input, one flag copied back), and the results stay on the device, so that a training step
             can keep its arrays there. NumPy inputs are copied over and the results copied back.
Arrays with no elements (B = 0 or an empty channel axis) give empty results; T = 0 is a ValueError.

Log space (Heinsen 2023, "Efficient parallelization of a ubiquitous sequential computation", Sec. 2; used by
minGRU/minLSTM in Feng et al., "Were RNNs All We Needed?", App. B) for positive a, b, h0:
    log h_t = a*_t + logcumsumexp_{s<=t}(log b_s − a*_s),   a*_t = Σ_{s<=t} log a_s,
with log h0 entering as an extra leading term of the logcumsumexp. log a, log b and log h0 must be finite on
every backend: b = 0 (log b = -inf) is rejected, as minGRU/minLSTM never produce it (their b = z ⊙ g(·) has
g > 0, Feng et al. App. B.3) and the backward's share b_t / h_t would be 0 / 0 where h_t = 0 too.

Backward (vector-Jacobian product): the adjoint is itself a linear scan in reverse time,
    g_t = dL/dh_t + a_{t+1} g_{t+1}  (g_{T-1} = dL/dh_{T-1}),
    dL/db_t = g_t,   dL/da_t = g_t h_{t-1},   dL/dh0 = a_0 g_0,
so every backward reuses the forward's algorithm on time-reversed, shifted coefficients.
"""
from __future__ import annotations

import importlib

import numpy as np

from .conventions import CHOICES, choose
from .validate import InputError, check_array, check_same_shape, overflow_error

__all__ = ["linear_scan", "linear_scan_backward", "sequential_scan", "blelloch_scan_numpy", "log_scan",
           "log_scan_backward", "cuda_module", "check_out", "METHODS", "AUTO", "BACKENDS", "LOG_BACKENDS"]

AUTO = "auto"
METHODS = tuple(m for m in CHOICES["method"] if m != AUTO)   # the algorithms "auto" chooses between
BACKENDS = CHOICES["backend"]
LOG_BACKENDS = BACKENDS


def cuda_module(name):
    """``cuda_kernels.<name>``, imported only when the CUDA backend is asked for; a ValueError (InputError) if it
    cannot be, or if there is no CUDA GPU to run it on."""
    try:
        module = importlib.import_module(f"cuda_kernels.{name}")
    except ImportError as e:
        raise ValueError(f"backend='cuda' needs the module cuda_kernels.{name}, which could not be imported "
                         f"({e}); use a CPU backend") from e
    _check_gpu()
    return module


def _check_gpu():
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


def _device_inputs(backend, x):
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


def _check_input(name, x, device, ref_name, min_ndim=None, finite=True):
    """check_array for NumPy inputs; for device arrays the same checks, NaN/inf on the device. ``finite=False``
    leaves NaN/inf to the caller (the Numba kernels check them in their own pass)."""
    if not device:
        return check_array(name, x, kind="f", min_ndim=min_ndim, finite=finite)
    _check_device_array(name, x, ref_name)
    if min_ndim is not None and len(x.shape) < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {x.shape}")
    _check_device_finite(name, x)
    return x


def _check_scan_inputs(a, b, h0, a_name="a", b_name="b", h0_name="h0", device=False, finite=True):
    _check_input(a_name, a, device, a_name, min_ndim=2, finite=finite)
    _check_input(b_name, b, device, a_name, min_ndim=2, finite=finite)
    if a.dtype not in (np.float32, np.float64):
        raise ValueError(f"{a_name} must be float32 or float64, got {a.dtype}")
    check_same_shape(b_name, b, a_name, a)
    if a.dtype != b.dtype:
        raise ValueError(f"{b_name} must have the dtype of {a_name} ({a.dtype}), got {b.dtype}")
    if a.shape[1] < 1:
        raise ValueError(f"{a_name} must have at least one time step (axis 1), got shape {a.shape}")
    if h0 is not None:
        _check_input(h0_name, h0, device, a_name, finite=finite)
        want = (a.shape[0],) + a.shape[2:]
        if h0.shape != want:
            raise ValueError(f"{h0_name} must have shape (B, ...) = {want} to match {a_name} {a.shape}, "
                             f"got {h0.shape}")
        if h0.dtype != a.dtype:
            raise ValueError(f"{h0_name} must have the dtype of {a_name} ({a.dtype}), got {h0.dtype}")


def _check_same_dtype(name, x, ref_name, ref):
    if x.dtype != ref.dtype:
        raise ValueError(f"{name} must have the dtype of {ref_name} ({ref.dtype}), got {x.dtype}")


def _n_channels(shape):
    """C = the product of the trailing axes (1 for none); explicit because reshape(..., -1) of an empty
    array cannot infer it."""
    return int(np.prod(shape[2:], dtype=np.int64))


def _as_btc(x):
    """(B, T, ...) -> a C-contiguous (B, T, C) view (a copy only if x is not contiguous)."""
    return np.ascontiguousarray(x).reshape(x.shape[0], x.shape[1], _n_channels(x.shape))


def _as_bc(x, like):
    """(B, ...) or None -> a C-contiguous (B, C) array; None becomes zeros."""
    B, C = like.shape[0], like.shape[2]
    if x is None:
        return np.zeros((B, C), dtype=like.dtype)
    return np.ascontiguousarray(x).reshape(B, C)


# ---------------------------------------------------------------------------------------------------------
# NumPy: the reference loop and the teaching Blelloch scan
# ---------------------------------------------------------------------------------------------------------

def sequential_scan(a, b, h0=None):
    """Reference loop. a, b: (B, T, ...); h0: (B, ...) or None. Returns h: (B, T, ...).

    Inputs are checked as in ``linear_scan`` (a ValueError naming the argument); ``_sequential`` is the
    unchecked loop that the checked entry points share."""
    _check_scan_inputs(a, b, h0)
    return _sequential(a, b, h0)


def _sequential(a, b, h0=None, out=None):
    h = np.empty_like(b) if out is None else out
    prev = np.zeros_like(b[:, 0]) if h0 is None else h0
    for t in range(a.shape[1]):
        prev = a[:, t] * prev + b[:, t]
        h[:, t] = prev
    return h


def blelloch_scan_numpy(a, b, h0=None):
    """Work-efficient scan, one vectorised strided op per level (teaching version). Shapes and checks as
    ``linear_scan``; the algorithm is ``_blelloch``'s (below)."""
    _check_scan_inputs(a, b, h0)
    return _blelloch(a, b, h0)


def _blelloch(a, b, h0=None, out=None):
    """The Blelloch scan of ``blelloch_scan_numpy``, unchecked.

    h0 is folded into the first pair, b_0 <- a_0 h0 + b_0, so the scan itself starts from zero.
    Up-sweep, d = 1, 2, 4, ...: pair k = 2d-1, 4d-1, ... absorbs pair k-d, after which pair k holds the
    reduction of the 2d steps (k-2d, k].
    Down-sweep, d = ..., 2, 1: pair k = 3d-1, 5d-1, ... (holding the steps (k-d, k]) absorbs the complete
    prefix at k-d. Only the b half is needed there (a2 b1 + b2 uses the later pair's a), so the prefix
    products of a are never formed. Lengths that are not powers of two need no padding: a level simply has
    fewer pairs. ``out`` (b's shape and dtype), if given, receives H instead of a copy of b.
    """
    T = a.shape[1]
    A = a.copy()
    if out is None:
        H = b.copy()
    else:
        H = out
        H[...] = b
    if h0 is not None:
        H[:, 0] += a[:, 0] * h0
    d = 1
    while d < T:  # up-sweep
        right, left = slice(2 * d - 1, T, 2 * d), slice(d - 1, T - d, 2 * d)
        H[:, right] += A[:, right] * H[:, left]
        A[:, right] *= A[:, left]
        d *= 2
    d //= 2
    while d >= 1:  # down-sweep
        right, left = slice(3 * d - 1, T, 2 * d), slice(2 * d - 1, T - d, 2 * d)
        H[:, right] += A[:, right] * H[:, left]
        d //= 2
    return H


def _adjoint_numpy(a, dh, method):
    """g_t = dh_t + a_{t+1} g_{t+1}: the forward scan on reversed time with coefficients shifted by one."""
    a_next = np.zeros_like(a)
    a_next[:, :-1] = a[:, 1:]
    scan = _sequential if method == "sequential" else _blelloch
    return scan(a_next[:, ::-1], dh[:, ::-1])[:, ::-1]


# ---------------------------------------------------------------------------------------------------------
# The public linear scan
# ---------------------------------------------------------------------------------------------------------

def _method(method, backend, where):
    """(method, backend) checked, None replaced by the default (``minimal.conventions``); "auto" becomes
    "sequential" on the CPU backends (module docstring) and stays "auto" for "cuda", where ``cuda_kernels.scan``
    picks per shape."""
    method, backend = choose("method", method, where), choose("backend", backend, where)
    return ("sequential" if method == AUTO and backend != "cuda" else method), backend


def linear_scan(a, b, h0=None, method=None, backend=None, out=None):
    """h_t = a_t * h_{t-1} + b_t, h_{-1} = h0 (zeros if None).

    Args:
        a, b: (B, T, ...) float32 or float64 arrays of one shape and dtype, finite, T >= 1.
        h0: (B, ...) of the same dtype, or None.
        method: None or "auto" (the default: the fastest method for the backend, i.e. the sequential Numba loop
            on the CPU, faster than the Blelloch tree on one core (``python -m minimal bench scan`` times both), and the
            dispatch table's pick per shape for "cuda"), "sequential" or "blelloch" (the work-efficient tree,
            one keyword away for teaching and for comparison; module docstring).
        backend: None (the default, "numba"), "numpy", "numba" or "cuda" (which also takes numba device arrays,
            module docstring).
        out: None (a new array), or a NumPy array to write h into and return (backends "numpy" and "numba"):
            a's shape and dtype, C-contiguous, writeable, sharing no memory with a, b or h0. A training loop
            that passes the same buffer every step skips the page faults of a fresh output. If the call
            raises, out's contents are unspecified.
    Returns:
        h: (B, T, ...), h[:, t] is the state after step t (``out`` itself when given); a device array when
        the inputs were.
    Raises:
        InputError (a ValueError) naming the argument: bad shapes or dtypes, a bad ``out``, NaN or inf in a, b
        or h0, or, with finite inputs, an h that overflowed to inf or NaN (backend "numba"; the NumPy backend
        returns such an h as it is).

    Backend "numba" checks NaN and inf inside its kernel: the scan is computed first, with a flag saying whether
    every h_t is finite (``_scan_numba.sequential_into_checked``, ``blelloch_into_checked``); only when it is
    not are a, b and h0 searched for the culprit. Backend "numpy" checks the inputs first, as before.
    """
    method, backend = _method(method, backend, "linear_scan")
    fused = backend == "numba"
    _check_scan_inputs(a, b, h0, device=_device_inputs(backend, a), finite=not fused)
    if out is not None:
        if backend == "cuda":
            raise InputError("out is not supported with backend='cuda' (the result is a new device array, or a "
                             "NumPy copy of one); pass out=None")
        check_out(out, a.shape, a.dtype, {"a": a, "b": b, "h0": h0})
    if backend == "cuda":
        return cuda_module("scan").linear_scan(a, b, h0, method)
    if backend == "numpy":
        return _sequential(a, b, h0, out) if method == "sequential" else _blelloch(a, b, h0, out)
    from . import _scan_numba

    a3, b3 = _as_btc(a), _as_btc(b)
    h = np.empty(a.shape, dtype=a.dtype) if out is None else out
    h3 = h.reshape(a3.shape)  # a view: h is C-contiguous
    if method == "sequential":
        finite = _scan_numba.sequential_into_checked(a3, b3, _as_bc(h0, a3), h3)
    else:
        finite = _scan_numba.blelloch_into_checked(a3, b3, _as_bc(h0, a3), h3, _scan_numba.scratch_for(a3))
    if not finite:
        _raise_non_finite(a, b, h0)
    return h


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


def _raise_non_finite(a, b, h0, names=("a", "b", "h0"), what="the scan h_t = a_t h_{t-1} + b_t", extra=None):
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


def linear_scan_backward(a, h, dh, h0=None, method=None, backend=None):
    """Vector-Jacobian product of ``linear_scan``.

    Args:
        a: (B, T, ...) the forward's coefficients; h: (B, T, ...) the forward's output;
        dh: (B, T, ...) dL/dh; h0: (B, ...) or None as in the forward. All of one dtype.
        method, backend: as in ``linear_scan`` (None: "auto", the fastest for the backend, and "numba"; the
            adjoint scan uses the same algorithm); with backend="cuda" device arrays in give device arrays out.
    Returns:
        (da, db, dh0): dL/da and dL/db of shape (B, T, ...), dL/dh0 of shape (B, ...)
        (returned even when h0 is None, as the gradient with respect to a zero initial state).
    """
    method, backend = _method(method, backend, "linear_scan_backward")
    device = _device_inputs(backend, a)
    fused = backend == "numba"
    _check_scan_inputs(a, h, h0, b_name="h", device=device, finite=not fused)
    _check_input("dh", dh, device, "a", finite=not fused)
    check_same_shape("dh", dh, "h", h)
    _check_same_dtype("dh", dh, "a", a)
    if backend == "cuda":
        return cuda_module("scan").linear_scan_backward(a, h, dh, h0, method)
    if backend == "numpy":
        g = _adjoint_numpy(a, dh, method)
        h_prev = np.empty_like(h)
        h_prev[:, 0] = 0.0 if h0 is None else h0
        h_prev[:, 1:] = h[:, :-1]
        return g * h_prev, g, a[:, 0] * g[:, 0]
    from . import _scan_numba

    a3, h3, dh3 = _as_btc(a), _as_btc(h), _as_btc(dh)
    fn = _scan_numba.sequential_backward if method == "sequential" else _scan_numba.blelloch_backward
    da, db, dh0, finite = fn(a3, h3, dh3, _as_bc(h0, a3))
    if not finite:
        _raise_non_finite(a, h, h0, ("a", "h", "h0"), "the adjoint g_t = dh_t + a_{t+1} g_{t+1}", {"dh": dh})
    return da.reshape(a.shape), db.reshape(a.shape), dh0.reshape((a.shape[0],) + a.shape[2:])


# ---------------------------------------------------------------------------------------------------------
# Log space (Heinsen 2023; Feng et al. App. B)
# ---------------------------------------------------------------------------------------------------------

_LOG_WHAT = "the log-space scan log h_t = logaddexp(log a_t + log h_{t-1}, log b_t)"


def log_scan(log_a, log_b, log_h0=None, backend=None):
    """log h for h_t = a_t h_{t-1} + b_t with a, b, h0 > 0, computed from the logs only.

        log h_t = a*_t + logcumsumexp_{s<=t}(log b_s − a*_s),   a*_t = Σ_{s<=t} log a_s    (Heinsen 2023, Sec. 2)

    with log h0 as an extra term at the front of the logcumsumexp (h0 = 0 when log_h0 is None).

    Args:
        log_a, log_b: (B, T, ...) finite float32/float64 arrays of one dtype (b = 0, log b = -inf, is
            rejected on every backend: module docstring).
        log_h0: (B, ...) or None.
        backend: None (the default, "numba"), "numpy", "numba" or "cuda". "numpy" evaluates Heinsen's closed form
            above with cumsum and ``np.logaddexp.accumulate`` (as in Feng et al. App. B), accumulated in float64
            and cast back (in float32 the cancellation between a*_t and the logcumsumexp cost 0.02 in log h at
            T = 1e5); "numba" computes the same values in one pass with the equivalent recurrence
            log h_t = logaddexp(log a_t + log h_{t-1}, log b_t), which has no cancellation between a*_t and the
            logcumsumexp (both grow like T) and so keeps its accuracy for long sequences;
            "cuda" runs a scan on (log a, log b) pairs (``cuda_kernels.scan.log_linear_scan``, the version
            ``cuda_kernels/dispatch.py`` picks for the shape), and takes device arrays as ``linear_scan`` does.
    Returns:
        log_h: (B, T, ...).
    """
    backend = choose("backend", backend, "log_scan")
    fused = backend == "numba"
    _check_scan_inputs(log_a, log_b, log_h0, a_name="log_a", b_name="log_b", h0_name="log_h0",
                       device=_device_inputs(backend, log_a), finite=not fused)
    if backend == "cuda":
        return cuda_module("scan").log_linear_scan(log_a, log_b, log_h0, method="auto")
    if backend == "numba":
        from . import _scan_numba

        la, lb = _as_btc(log_a), _as_btc(log_b)
        lh0 = None if log_h0 is None else _as_bc(log_h0, la)
        log_h, finite = _scan_numba.log_scan(la, lb, lh0)
        if not finite:
            _raise_non_finite(log_a, log_b, log_h0, ("log_a", "log_b", "log_h0"), _LOG_WHAT)
        return log_h.reshape(log_a.shape)
    # In float64 whatever the input dtype: a*_t and the logcumsumexp both grow like T and cancel in their sum,
    # so float32 sums lost ~0.02 in log h at T = 1e5 (the recurrence of the numba backend has no such sum).
    dtype = log_a.dtype
    log_a, log_b = log_a.astype(np.float64, copy=False), log_b.astype(np.float64, copy=False)
    log_h0 = None if log_h0 is None else log_h0.astype(np.float64, copy=False)
    a_star = np.cumsum(log_a, axis=1)  # (B, T, ...)
    terms = log_b - a_star
    if log_h0 is not None:
        terms = np.concatenate([log_h0[:, None], terms], axis=1)
    lcse = np.logaddexp.accumulate(terms, axis=1)
    if log_h0 is not None:
        lcse = lcse[:, 1:]
    return (a_star + lcse).astype(dtype, copy=False)


def log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0=None, backend=None):
    """Vector-Jacobian product of ``log_scan`` with respect to its log inputs.

    With l_t = log h_t = logaddexp(log a_t + l_{t-1}, log b_t), the local derivatives are the two shares of
    h_t, both in [0, 1] and formed from differences of logs (never exp of a large number):
        w_t = ∂l_t/∂l_{t-1} = ∂l_t/∂log a_t = exp(log a_t + l_{t-1} − l_t) = a_t h_{t-1} / h_t,
        v_t = ∂l_t/∂log b_t = exp(log b_t − l_t) = b_t / h_t.
    The adjoint G_t = dL/dl_t (total) is a reverse-time linear scan with coefficients w_{t+1} in [0, 1],
        G_t = dlog_h_t + w_{t+1} G_{t+1},
    and dlog_a_t = w_t G_t, dlog_b_t = v_t G_t, dlog_h0 = w_0 G_0.

    Args:
        log_a, log_b, log_h, dlog_h: (B, T, ...) of one dtype; log_h is ``log_scan``'s output.
        log_h0: (B, ...) or None as in the forward.
        backend: None (the default, "numba"), "numpy" (vectorised shares, reference reverse loop), "numba" (one
            fused reverse pass) or
            "cuda" (``cuda_kernels.scan.log_linear_scan_backward``: the shares in one elementwise pass, then
            the adjoint on the GPU's reverse linear scan, the version the dispatch table picks; device arrays
            as in ``linear_scan``).
    Returns:
        (dlog_a, dlog_b, dlog_h0), dlog_h0 of shape (B, ...) (zeros when log_h0 is None: h0 = 0 has w_0 = 0).
    """
    backend = choose("backend", backend, "log_scan_backward")
    device = _device_inputs(backend, log_a)
    fused = backend == "numba"
    _check_scan_inputs(log_a, log_b, log_h0, a_name="log_a", b_name="log_b", h0_name="log_h0", device=device,
                       finite=not fused)
    for name, x in (("log_h", log_h), ("dlog_h", dlog_h)):
        _check_input(name, x, device, "log_a", finite=not fused)
        check_same_shape(name, x, "log_a", log_a)
        _check_same_dtype(name, x, "log_a", log_a)
    if backend == "cuda":
        return cuda_module("scan").log_linear_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, method="auto")
    if backend == "numba":
        from . import _scan_numba

        la, lb, lh, dlh = _as_btc(log_a), _as_btc(log_b), _as_btc(log_h), _as_btc(dlog_h)
        lh0 = None if log_h0 is None else _as_bc(log_h0, la)
        dla, dlb, dlh0, finite = _scan_numba.log_scan_backward(la, lb, lh, dlh, lh0)
        if not finite:
            _raise_non_finite(log_a, log_b, log_h0, ("log_a", "log_b", "log_h0"), "the log-space scan's adjoint",
                              {"log_h": log_h, "dlog_h": dlog_h})
        return (dla.reshape(log_a.shape), dlb.reshape(log_a.shape),
                dlh0.reshape((log_a.shape[0],) + log_a.shape[2:]))
    # 1. the shares w_t and v_t; l_{-1} = log h0, or -inf (h0 = 0, w_0 = 0) when there is none
    l_prev = np.empty_like(log_h)
    l_prev[:, 1:] = log_h[:, :-1]
    l_prev[:, 0] = -np.inf if log_h0 is None else log_h0
    w = np.exp(log_a + l_prev - log_h)
    v = np.exp(log_b - log_h)
    # 2. the reverse-time adjoint scan
    G = _adjoint_numpy(w, dlog_h, "sequential")
    # 3. distribute G to the inputs
    return w * G, v * G, w[:, 0] * G[:, 0]
