"""The NumPy references of the scans, which every kernel (``numba_linear.py``, ``numba_log.py`` beside this
file; ``cuda_kernels``) is tested against: the plain loop, the teaching Blelloch scan, the adjoint, and the log-space
closed form with its backward. Shapes: the ``minimal.scan`` docstring. The linear ones are written once for real and
complex arrays (the complex recurrence of ``cells.lru`` runs on ``sequential``). ``sequential_scan`` and
``blelloch_scan_numpy`` check their inputs; the other functions are the unchecked bodies ``minimal.scan`` runs for
backend="numpy"."""
from __future__ import annotations

import numpy as np

from .checks import check_scan_inputs

__all__ = ["sequential_scan", "blelloch_scan_numpy", "sequential", "blelloch", "adjoint", "log_scan",
           "log_scan_backward"]


def sequential_scan(a, b, h0=None):
    """Reference loop. a, b: (B, T, ...); h0: (B, ...) or None. Returns h: (B, T, ...).

    Inputs are checked as in ``linear_scan`` (a ValueError naming the argument); ``sequential`` is the
    unchecked loop that the checked entry points share."""
    check_scan_inputs(a, b, h0, backend="numpy")
    return sequential(a, b, h0)


def sequential(a, b, h0=None, out=None):
    h = np.empty_like(b) if out is None else out
    prev = np.zeros_like(b[:, 0]) if h0 is None else h0
    for t in range(a.shape[1]):
        prev = a[:, t] * prev + b[:, t]
        h[:, t] = prev
    return h


def blelloch_scan_numpy(a, b, h0=None):
    """Work-efficient scan, one vectorised strided op per level (teaching version). Shapes and checks as
    ``linear_scan``; the algorithm is ``blelloch``'s (below)."""
    check_scan_inputs(a, b, h0, backend="numpy")
    return blelloch(a, b, h0)


def blelloch(a, b, h0=None, out=None):
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


def adjoint(a, dh, method):
    """g_t = dh_t + a_{t+1} g_{t+1}: the forward scan on reversed time with coefficients shifted by one."""
    a_next = np.zeros_like(a)
    a_next[:, :-1] = a[:, 1:]
    scan = sequential if method == "sequential" else blelloch
    return scan(a_next[:, ::-1], dh[:, ::-1])[:, ::-1]


def log_scan(log_a, log_b, log_h0=None):
    """Heinsen's closed form log h_t = a*_t + logcumsumexp_{s<=t}(log b_s − a*_s) (``minimal.scan.log_scan``,
    backend="numpy"), inputs as checked there."""
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


def log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0=None):
    """The vector-Jacobian product of ``log_scan`` (the shares w_t, v_t and the reverse-time adjoint of
    ``minimal.scan.log_scan_backward``'s docstring), inputs as checked there."""
    # 1. the shares w_t and v_t; l_{-1} = log h0, or -inf (h0 = 0, w_0 = 0) when there is none
    l_prev = np.empty_like(log_h)
    l_prev[:, 1:] = log_h[:, :-1]
    l_prev[:, 0] = -np.inf if log_h0 is None else log_h0
    w = np.exp(log_a + l_prev - log_h)
    v = np.exp(log_b - log_h)
    # 2. the reverse-time adjoint scan
    G = adjoint(w, dlog_h, "sequential")
    # 3. distribute G to the inputs
    return w * G, v * G, w[:, 0] * G[:, 0]
