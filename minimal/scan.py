"""Linear-recurrence scans: h_t = a_t * h_{t-1} + b_t along the time axis (axis 1).

Shapes: ``a``, ``b`` and the result ``h`` are (B, T, ...) with the same shape; ``h0`` is (B, ...) or None
(meaning zeros). Time is axis 1; the trailing axes (channels) are contiguous.

Methods:
    "sequential"  the plain loop over t, the reference every other method is tested against.
    "blelloch"    the work-efficient up-sweep/down-sweep scan over pairs (a, b) with the associative
                  operator (a1, b1) ∘ (a2, b2) = (a1 a2, a2 b1 + b2) (Blelloch 1990), compiled with Numba.
Log space (Heinsen 2023, used by minGRU/minLSTM): for positive a, b, h0,
    log h_t = a*_t + logcumsumexp_{s<=t}(log b_s − a*_s),   a*_t = Σ_{s<=t} log a_s,
with log h0 entering as an extra term at s = 0.

Backward (vector-Jacobian product): given g_T = dL/dh_T + ..., the adjoint is itself a linear scan in
reverse time,
    g_t = dL/dh_t + a_{t+1} g_{t+1},   dL/db_t = g_t,   dL/da_t = g_t h_{t-1},   dL/dh0 = a_1 g_1,
so every backward reuses the forward kernels on time-reversed inputs.
"""
from __future__ import annotations

import numpy as np

from .validate import check_array, check_choice, check_same_shape

__all__ = ["linear_scan", "linear_scan_backward", "sequential_scan"]

METHODS = ("sequential", "blelloch")


def _check_scan_inputs(a, b, h0, a_name="a", b_name="b", h0_name="h0", kind="f"):
    check_array(a_name, a, min_ndim=2, kind=kind)
    check_array(b_name, b, min_ndim=2, kind=kind)
    check_same_shape(b_name, b, a_name, a)
    if a.dtype != b.dtype:
        raise ValueError(f"{b_name} must have the dtype of {a_name} ({a.dtype}), got {b.dtype}")
    if a.shape[1] < 1:
        raise ValueError(f"{a_name} must have at least one time step (axis 1), got shape {a.shape}")
    if h0 is not None:
        check_array(h0_name, h0, kind=kind)
        want = (a.shape[0],) + a.shape[2:]
        if h0.shape != want:
            raise ValueError(f"{h0_name} must have shape (B, ...) = {want} to match {a_name} {a.shape}, "
                             f"got {h0.shape}")
        if h0.dtype != a.dtype:
            raise ValueError(f"{h0_name} must have the dtype of {a_name} ({a.dtype}), got {h0.dtype}")


def sequential_scan(a, b, h0=None):
    """Reference loop. a, b: (B, T, ...); h0: (B, ...) or None. Returns h: (B, T, ...)."""
    h = np.empty_like(b)
    prev = np.zeros_like(b[:, 0]) if h0 is None else h0
    for t in range(a.shape[1]):
        prev = a[:, t] * prev + b[:, t]
        h[:, t] = prev
    return h


def linear_scan(a, b, h0=None, method="blelloch"):
    """h_t = a_t * h_{t-1} + b_t, h_0 = h0 (zeros if None).

    Args:
        a, b: (B, T, ...) float arrays of one shape and dtype.
        h0: (B, ...) or None.
        method: "sequential" or "blelloch".
    Returns:
        h: (B, T, ...), h[:, t] is the state after step t.
    """
    _check_scan_inputs(a, b, h0)
    check_choice("method", method, METHODS)
    if method == "sequential":
        return sequential_scan(a, b, h0)
    raise NotImplementedError("blelloch scan: in progress")


def linear_scan_backward(a, h, dh, h0=None, method="blelloch"):
    """Vector-Jacobian product of ``linear_scan``.

    Args:
        a: (B, T, ...) the forward's coefficients; h: (B, T, ...) the forward's output;
        dh: (B, T, ...) dL/dh; h0: (B, ...) or None as in the forward.
    Returns:
        (da, db, dh0): dL/da and dL/db of shape (B, T, ...), dL/dh0 of shape (B, ...)
        (returned even when h0 is None, as the gradient with respect to a zero initial state).
    """
    _check_scan_inputs(a, h, h0, b_name="h")
    check_array("dh", dh, kind="f")
    check_same_shape("dh", dh, "h", h)
    check_choice("method", method, METHODS)
    # g_t = dh_t + a_{t+1} g_{t+1}: a forward scan on reversed time with coefficients shifted by one.
    a_next = np.zeros_like(a)
    a_next[:, :-1] = a[:, 1:]
    g = linear_scan(a_next[:, ::-1], dh[:, ::-1], method=method)[:, ::-1]
    h_prev = np.empty_like(h)
    h_prev[:, 0] = 0.0 if h0 is None else h0
    h_prev[:, 1:] = h[:, :-1]
    da = g * h_prev
    dh0 = a[:, 0] * g[:, 0]
    return da, g, dh0
