"""The two modes of the min cells, minGRU and minLSTM (``mingru``, ``minlstm``; Feng et al., "Were RNNs All We
Needed?" (2024), Sec. 3 and App. B.3), the parts they share:

- Linear_n(x) = x W_n^T + b_n for an input-only gate n, and its backward;
- the sequential mode: the step loop, and its adjoint one step at a time (``bptt``);
- the parallel mode: the calls to ``minimal.scan`` (vanilla, and log space of App. B.3) and their backward, and
  which backends run the gates, or the gates and the scan, in one compiled pass (``fused``, ``scan_fused``).

Not registered as a cell (the leading underscore); each cell module keeps its own equations, and the checks of the
arguments are in ``_gates``.
Glossary (shapes): B batch, T time, D input features, H hidden units.
"""
from __future__ import annotations

import numpy as np

from .. import products, scan
from . import _gates_numba


def affine(params, x, n, bias=True):
    """Linear_n(x) = x W_n^T + b_n over the last axis: (..., D) to (..., H); x W_n^T alone when not ``bias`` (for a
    pass that adds b_n as it reads the result: ``add_bias``, ``bias_or_zeros``)."""
    k = products.times_t(x, params[f"W_{n}"])
    return add_bias(params, k, n) if bias else k


def add_bias(params, k, n):
    """k += b_n in place (no second (..., H) array), when params has b_n. Returns k."""
    if f"b_{n}" in params:
        k += params[f"b_{n}"]
    return k


def bias_or_zeros(params, n, k):
    """b_n (H,), or zeros of k's dtype without it: what a compiled pass adds to each row of k (..., H)."""
    b = params.get(f"b_{n}")
    return np.zeros(k.shape[-1], k.dtype) if b is None else np.ascontiguousarray(b)


def affine_backward(params, x, dk):
    """Backward of k_n = Linear_n(x) for the gates n in ``dk`` ({n: dL/dk_n (B, T, H)}, the caller's scratch:
    ``_gates_numba.flush_and_sum_`` sets their subnormals to 0 in place), in that order. Returns dx (B, T, D) =
    Σ_n dk_n W_n and the grads of W_n, b_n, with the keys of params."""
    grads, dx = {}, None
    rows = int(np.prod(x.shape[:-1]))                # B T, written out: a reshape to -1 is ambiguous at H = 0
    x2 = x.reshape(rows, x.shape[-1])
    for n, dk_n in dk.items():
        dk2 = dk_n.reshape(rows, dk_n.shape[-1])     # (B T, H)
        db = np.empty(dk2.shape[1], dk2.dtype)       # subnormals to 0 first (the products' speed), db = Σ rows
        _gates_numba.flush_and_sum_(dk2, np.finfo(dk2.dtype).tiny, db)
        grads[f"W_{n}"] = products.sum_outer(dk2, x2)
        if f"b_{n}" in params:
            grads[f"b_{n}"] = db
        if dx is None:
            dx = products.times(dk2, params[f"W_{n}"])
        else:
            dx += products.times(dk2, params[f"W_{n}"])
    return dx.reshape(x.shape), {k: grads[k] for k in params}


def step_loop(step_forward, params, x, h0, H, log_space):
    """Sequential mode: h (B, T, H) from h_t = step_forward(params, x_t, h_{t−1}, log_space), h_0 = h0 or 0."""
    B, T, _ = x.shape
    h = np.empty((B, T, H), x.dtype)
    prev = np.zeros((B, H), x.dtype) if h0 is None else h0
    for t in range(T):
        prev = step_forward(params, x[:, t], prev, log_space)
        h[:, t] = prev
    return h


def fused(backend):
    """Whether a min cell's parallel mode runs its gates fused (``_gates_numba.py``, beside this file): every
    backend (resolved, not None) but "numpy", whose parallel mode keeps the NumPy formulas as the reference the
    fused pass is tested against."""
    return backend != "numpy"


def scan_fused(log_space, method, backend):
    """Whether a min cell's parallel mode runs its gates and its scan in one compiled pass (and their backward in
    one reverse pass; ``_min_scan_numba``): on the CPU (backend "numba") with the default scan, the sequential Numba
    loop, or in log space. The Blelloch method and backend "numpy" keep the gates and the scan apart, the reference
    the one pass is tested against."""
    return backend == "numba" and (log_space or scan.resolve_method(method, backend, "the scan")[0] == "sequential")


def initial_state(h0, k, log=False):
    """h0 (``log``: log h0) as the fused kernels take it: C-contiguous (B, H), zeros when h0 is None (k: a (B, T, H)
    array of the dtype)."""
    if h0 is None:
        return np.zeros((k.shape[0], k.shape[2]), k.dtype)
    return np.log(h0) if log else np.ascontiguousarray(h0)


def parallel_scan(a, b, h0, log_space, method, backend, out=None):
    """The parallel mode's recurrence: ``minimal.scan.linear_scan`` of (a, b) (h written into ``out`` when given),
    or in log space ``log_scan`` of (log a, log b) passed as (a, b). Returns (h, log_h), log_h None when vanilla."""
    if log_space:
        log_h, h = log_scan(a, b, h0, backend, out)
        return h, log_h
    return scan.linear_scan(a, b, h0, method, backend, out=out), None


def parallel_scan_backward(a, b, log_h, h, h0, dh, log_space, method, backend):
    """(da, db) of ``parallel_scan`` given dh = dL/dh (in log space: dL/dlog a, dL/dlog b)."""
    if log_space:
        return log_scan_backward(a, b, log_h, h, h0, dh, backend)
    return linear_scan_backward(a, h, dh, h0, method, backend)


def bptt(a, h, h0, dh):
    """The sequential mode's adjoint of h_t = a_t ⊙ h_{t−1} + b_t (h, a: (B, T, H); h0 (B, H) or None), one step
    at a time in reverse, independent of the scans. Returns (da, db): da_t = g_t ⊙ h_{t−1}, db_t = g_t, where
    g_t = dL/dh_t in total (dh_t plus what reaches h_t through h_{t+1})."""
    B, T, H = h.shape
    da, db = np.empty_like(h), np.empty_like(h)
    carry = np.zeros((B, H), h.dtype)                   # dL/dh_t through h_{t+1}
    for t in reversed(range(T)):
        h_prev = h[:, t - 1] if t > 0 else (np.zeros_like(carry) if h0 is None else h0)
        d = dh[:, t] + carry
        da[:, t] = d * h_prev
        db[:, t] = d
        carry = d * a[:, t]
    return da, db


def linear_scan_backward(a, h, dh, h0, method, backend):
    """(da, db), each (B, T, H), for ``linear_scan`` given dh = dL/dh."""
    da, db, _ = scan.linear_scan_backward(a, h, dh, h0, method, backend)
    return da, db


def log_scan(log_a, log_b, h0, backend, out=None):
    """App. B.3: log h_t = log(a_t h_{t−1} + b_t) from log a, log b (B, T, H) and h0 > 0 (B, H) or None.
    Returns (log_h, h = exp(log_h)); h is written into ``out`` when given."""
    log_h = scan.log_scan(log_a, log_b, None if h0 is None else np.log(h0), backend=backend)
    return log_h, np.exp(log_h, out=out)


def log_scan_backward(log_a, log_b, log_h, h, h0, dh, backend):
    """(dlog_a, dlog_b), each (B, T, H), for ``log_scan`` given dh = dL/dh; dL/dlog h = dh ⊙ h."""
    log_h0 = None if h0 is None else np.log(h0)
    dlog_a, dlog_b, _ = scan.log_scan_backward(log_a, log_b, log_h, dh * h, log_h0, backend=backend)
    return dlog_a, dlog_b
