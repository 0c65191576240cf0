"""Linear-recurrence scans: h_t = a_t * h_{t-1} + b_t along the time axis (axis 1).

Glossary: B batch, T time (axis 1), C channels = the product of the trailing axes, which stay contiguous.
Shapes: ``a``, ``b`` and the result ``h`` are (B, T, ...) with one shape and one dtype (float32 or float64;
complex64 or complex128 on backend "numpy", whose NumPy loops are the same for complex numbers: the LRU's complex
diagonal recurrence, ``cells.lru``; the compiled backends refuse them, naming the dtype and the backend);
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
Files: this one holds the public functions and their dispatch; ``reference.py`` the NumPy references;
``numba_linear.py`` and ``numba_log.py`` the compiled kernels that run by default (backend "numba"), tested
against the references; ``checks.py`` the argument checks and ``cuda_module``, which imports the CUDA versions by
name when backend "cuda" asks for them: the top-level package ``cuda_kernels/`` (``cuda_kernels/scan.py`` the
host functions and their checks, ``sequential.py`` v1, ``blelloch.py`` and ``blelloch_host.py`` v2,
``chunked.py`` v3, ``lookback.py`` v4, ``dispatch.py`` the "auto" table; ``cuda_kernels/README.md``). Their
benchmarks are measurement, in ``minimal/bench/gpu.py``.

Backends (``backend=``):
    "numpy"  sequential = the reference loop; blelloch = the teaching version, one strided NumPy op per level.
    "numba"  compiled loops (``numba_linear.py``, ``numba_log.py``), time outer, contiguous channel axis inner. The NaN/inf
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
so every backward reuses the forward's algorithm on time-reversed, shifted coefficients. For complex arrays (a real
loss, gradients written ḡ_w = dL/dRe w + i dL/dIm w, as in ``cells.lru``) the coefficients enter conjugated:
g_t = ḡ_{h_t} + conj(a_{t+1}) g_{t+1}, ḡ_{a_t} = g_t conj(h_{t-1}), ḡ_{h0} = conj(a_0) g_0.
"""
from __future__ import annotations

import numpy as np

from ..conventions import CHOICES, choose
from ..validate import InputError, check_same_shape
from . import reference
from .checks import (as_bc, as_btc, check_input, check_out, check_same_dtype, check_scan_inputs, cuda_module,
                     device_inputs, raise_non_finite)

__all__ = ["linear_scan", "linear_scan_backward", "log_scan", "log_scan_backward", "resolve_method", "METHODS", "AUTO",
           "BACKENDS", "LOG_BACKENDS"]

AUTO = "auto"
METHODS = tuple(m for m in CHOICES["method"] if m != AUTO)   # the algorithms "auto" chooses between
BACKENDS = CHOICES["backend"]
LOG_BACKENDS = BACKENDS


def resolve_method(method, backend, where):
    """(method, backend) checked, None replaced by the default (``minimal.conventions``); "auto" becomes
    "sequential" on the CPU backends (module docstring) and stays "auto" for "cuda", where ``cuda_kernels.scan``
    picks per shape."""
    method, backend = choose("method", method, where), choose("backend", backend, where)
    return ("sequential" if method == AUTO and backend != "cuda" else method), backend


def linear_scan(a, b, h0=None, method=None, backend=None, out=None):
    """h_t = a_t * h_{t-1} + b_t, h_{-1} = h0 (zeros if None).

    Args:
        a, b: (B, T, ...) float32 or float64 arrays of one shape and dtype (complex64 / complex128 on backend
            "numpy"), finite, T >= 1.
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
    every h_t is finite (``numba_linear.sequential_into_checked``, ``blelloch_into_checked``); only when it is
    not are a, b and h0 searched for the culprit. Backend "numpy" checks the inputs first, as before.
    """
    method, backend = resolve_method(method, backend, "linear_scan")
    fused = backend == "numba"
    check_scan_inputs(a, b, h0, device=device_inputs(backend, a), finite=not fused, backend=backend)
    if out is not None:
        if backend == "cuda":
            raise InputError("out is not supported with backend='cuda' (the result is a new device array, or a "
                             "NumPy copy of one); pass out=None")
        check_out(out, a.shape, a.dtype, {"a": a, "b": b, "h0": h0})
    if backend == "cuda":
        return cuda_module("scan").linear_scan(a, b, h0, method)
    if backend == "numpy":
        return reference.sequential(a, b, h0, out) if method == "sequential" else reference.blelloch(a, b, h0, out)
    from . import numba_linear

    a3, b3 = as_btc(a), as_btc(b)
    h = np.empty(a.shape, dtype=a.dtype) if out is None else out
    h3 = h.reshape(a3.shape)  # a view: h is C-contiguous
    if method == "sequential":
        finite = numba_linear.sequential_into_checked(a3, b3, as_bc(h0, a3), h3)
    else:
        finite = numba_linear.blelloch_into_checked(a3, b3, as_bc(h0, a3), h3, numba_linear.scratch_for(a3))
    if not finite:
        raise_non_finite(a, b, h0)
    return h



def linear_scan_backward(a, h, dh, h0=None, method=None, backend=None):
    """Vector-Jacobian product of ``linear_scan``.

    Args:
        a: (B, T, ...) the forward's coefficients; h: (B, T, ...) the forward's output;
        dh: (B, T, ...) dL/dh; h0: (B, ...) or None as in the forward. All of one dtype.
        method, backend: as in ``linear_scan`` (None: "auto", the fastest for the backend, and "numba"; the
            adjoint scan uses the same algorithm); with backend="cuda" device arrays in give device arrays out.
    Returns:
        (da, db, dh0): dL/da and dL/db of shape (B, T, ...), dL/dh0 of shape (B, ...)
        (returned even when h0 is None, as the gradient with respect to a zero initial state); for complex
        arrays (backend "numpy") the gradients ḡ = dL/dRe + i dL/dIm of a real loss (module docstring).
    """
    method, backend = resolve_method(method, backend, "linear_scan_backward")
    device = device_inputs(backend, a)
    fused = backend == "numba"
    check_scan_inputs(a, h, h0, b_name="h", device=device, finite=not fused, backend=backend)
    check_input("dh", dh, device, "a", finite=not fused, kind="fc" if a.dtype.kind == "c" else "f")
    check_same_shape("dh", dh, "h", h)
    check_same_dtype("dh", dh, "a", a)
    if backend == "cuda":
        return cuda_module("scan").linear_scan_backward(a, h, dh, h0, method)
    if backend == "numpy":
        conj = np.conj if a.dtype.kind == "c" else (lambda v: v)   # complex: the coefficients conjugated (above)
        g = reference.adjoint(conj(a), dh, method)
        h_prev = np.empty_like(h)
        h_prev[:, 0] = 0.0 if h0 is None else h0
        h_prev[:, 1:] = h[:, :-1]
        return g * conj(h_prev), g, conj(a[:, 0]) * g[:, 0]
    from . import numba_linear

    a3, h3, dh3 = as_btc(a), as_btc(h), as_btc(dh)
    fn = numba_linear.sequential_backward if method == "sequential" else numba_linear.blelloch_backward
    da, db, dh0, finite = fn(a3, h3, dh3, as_bc(h0, a3))
    if not finite:
        raise_non_finite(a, h, h0, ("a", "h", "h0"), "the adjoint g_t = dh_t + a_{t+1} g_{t+1}", {"dh": dh})
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
    check_scan_inputs(log_a, log_b, log_h0, a_name="log_a", b_name="log_b", h0_name="log_h0",
                       device=device_inputs(backend, log_a), finite=not fused)
    if backend == "cuda":
        return cuda_module("scan").log_linear_scan(log_a, log_b, log_h0, method="auto")
    if backend == "numba":
        from . import numba_log

        la, lb = as_btc(log_a), as_btc(log_b)
        lh0 = None if log_h0 is None else as_bc(log_h0, la)
        log_h, finite = numba_log.log_scan(la, lb, lh0)
        if not finite:
            raise_non_finite(log_a, log_b, log_h0, ("log_a", "log_b", "log_h0"), _LOG_WHAT)
        return log_h.reshape(log_a.shape)
    return reference.log_scan(log_a, log_b, log_h0)


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
    device = device_inputs(backend, log_a)
    fused = backend == "numba"
    check_scan_inputs(log_a, log_b, log_h0, a_name="log_a", b_name="log_b", h0_name="log_h0", device=device,
                       finite=not fused)
    for name, x in (("log_h", log_h), ("dlog_h", dlog_h)):
        check_input(name, x, device, "log_a", finite=not fused)
        check_same_shape(name, x, "log_a", log_a)
        check_same_dtype(name, x, "log_a", log_a)
    if backend == "cuda":
        return cuda_module("scan").log_linear_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, method="auto")
    if backend == "numba":
        from . import numba_log

        la, lb, lh, dlh = as_btc(log_a), as_btc(log_b), as_btc(log_h), as_btc(dlog_h)
        lh0 = None if log_h0 is None else as_bc(log_h0, la)
        dla, dlb, dlh0, finite = numba_log.log_scan_backward(la, lb, lh, dlh, lh0)
        if not finite:
            raise_non_finite(log_a, log_b, log_h0, ("log_a", "log_b", "log_h0"), "the log-space scan's adjoint",
                              {"log_h": log_h, "dlog_h": dlog_h})
        return (dla.reshape(log_a.shape), dlb.reshape(log_a.shape),
                dlh0.reshape((log_a.shape[0],) + log_a.shape[2:]))
    return reference.log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0)
