"""The recurrence of the gated RNN (``minimal.cells.gated_rnn``; Zucchet et al., Eq. 2) and its adjoint, from the
gated inputs b_t = g_in(x_t) to the states h_t. Private: ``gated_rnn.forward`` / ``gated_rnn.backward`` call it
after their checks, and form b and read h out themselves.

    diagonal   h_t = λ ⊙ h_{t-1} + b_t,  h_0 = 0    on ``minimal.scan.linear_scan`` (by default its Numba kernel,
                                                     ``scan/numba_linear.py``); the adjoint is a reverse-time scan
    dense      h_t = A h_{t-1} + b_t                 a plain loop over time; the adjoint loops back
    readout "last", diagonal: the closed form h_T = Σ_t λ^{T-t} ⊙ b_t,  dh_T/dλ = Σ_t (T-t) λ^{T-t-1} ⊙ b_t

Gradients are with respect to λ or A: the parametrisation λ = exp(-exp(ν)) and the ``lam`` override belong to the
cell, which applies dλ/dν. Glossary: B batch, T time, H recurrent neurons; b, h, dh (B, T, H); λ (H,), A (H, H).
"""
from __future__ import annotations

import numpy as np

from .. import scan
from ..validate import InputError, OverflowInputError, check_finite_result, overflow_error

__all__ = ["flat", "recurrence_forward", "recurrence_backward", "dense_scan", "dense_adjoint", "dense_scan_backward",
           "diagonal_scan_backward", "decay_powers", "last_state_backward"]


def flat(a):
    """(B, T, F) -> (B T, F), a view when ``a`` is contiguous."""
    return a.reshape(a.shape[0] * a.shape[1], a.shape[2])    # explicit: -1 is ambiguous when F = 0


def recurrence_forward(A, lam, b, readout, method, backend, out, inputs):
    """The states from the gated inputs b (B, T, H).

    Args:
        A: (H, H) for the dense recurrence, or None for the diagonal one with λ = ``lam`` (H,).
        readout: "all" or "last"; method, backend, out: passed to ``linear_scan`` (diagonal, readout "all").
        inputs: what the caller gave (x and the params), named if b or h overflows.
    Returns:
        (h, h_all): h (B, T, H), or h_T (B, 1, H) for readout "last"; h_all (B, T, H) every state, kept for a
        dense recurrence with readout "last" (its backward needs them), else None.
    """
    T = b.shape[1]
    h_all = None
    if A is None and readout == "last":
        h = np.einsum("bth,th->bh", b, decay_powers(lam, T, b.dtype)[0])[:, None]   # h_T, (B, 1, H)
    elif A is None:
        a = np.broadcast_to(lam.astype(b.dtype), b.shape).copy()
        try:
            h = scan.linear_scan(a, b, method=method, backend=backend, out=out)
        except InputError as e:  # the scan names its own inputs; an overflowed b or h comes from the caller's x
            if not np.all(np.isfinite(b)):
                raise overflow_error("the input gating (W_in_m x) ⊙ (W_in_x x)", inputs) from None
            if isinstance(e, OverflowInputError):
                raise overflow_error("the recurrence h_t = λ ⊙ h_{t-1} + b_t", inputs) from None
            raise
    else:
        h = dense_scan(A, b)
        if readout == "last":
            h_all, h = h, h[:, -1:]
    return h, h_all


def recurrence_backward(A, cache, dh, inputs):
    """The adjoint of ``recurrence_forward``: (dλ, or dA for a dense A; db (B, T, H)) from dh = dL/dh (the shape of
    ``cache.h``); cache: ``gated_rnn.forward``'s; inputs: what the caller gave (dy, x, the params), named if the
    reverse scan overflows."""
    if cache.readout == "last":
        return last_state_backward(A, cache, dh)
    if A is not None:
        return dense_scan_backward(A, cache.h, dh)
    try:
        return diagonal_scan_backward(cache.lam, cache.h, dh, cache.method, cache.backend)
    except InputError as e:  # the scan names its own inputs; an overflow here comes from the caller's dy
        check_finite_result("the gradient dL/dh", dh, inputs)
        if isinstance(e, OverflowInputError):
            raise overflow_error("the recurrence's adjoint", inputs) from None
        raise


def dense_scan(A, b):
    """h_t = A h_{t-1} + b_t, h_0 = 0. A: (H, H); b: (B, T, H). Returns h: (B, T, H)."""
    h = np.empty_like(b)
    prev = np.zeros_like(b[:, 0])
    for t in range(b.shape[1]):
        prev = prev @ A.T + b[:, t]
        h[:, t] = prev
    return h


def dense_adjoint(A, dh):
    """g_t = dh_t + A^T g_{t+1} (g_T = 0): the adjoint of ``dense_scan``, (B, T, H)."""
    g = np.empty_like(dh)
    nxt = np.zeros_like(dh[:, 0])
    for t in range(dh.shape[1] - 1, -1, -1):
        nxt = dh[:, t] + nxt @ A
        g[:, t] = nxt
    return g


def dense_scan_backward(A, h, dh):
    """VJP of ``dense_scan``: returns (dA, db) with db_t = g_t and dA = Σ_{b,t} g_t h_{t-1}^T."""
    g = dense_adjoint(A, dh)
    h_prev = np.concatenate([np.zeros_like(h[:, :1]), h[:, :-1]], axis=1)
    return flat(g).T @ flat(h_prev), g


def diagonal_scan_backward(lam, h, dh, method, backend):
    """(dλ, db) through h_t = λ ⊙ h_{t-1} + b_t."""
    a = np.broadcast_to(lam.astype(h.dtype), h.shape).copy()
    da, db, _ = scan.linear_scan_backward(a, h, dh, method=method, backend=backend)
    return da.sum(axis=(0, 1)), db


def decay_powers(lam, T, dtype):
    """w (T, H) with w_t = λ^{T-t}, and dw/dλ = (T-t) λ^{T-t-1} (t = 1..T): h_T = Σ_t w_t ⊙ b_t."""
    k = np.arange(T - 1, -1, -1, dtype=np.float64)[:, None]           # T - t
    lam64 = np.asarray(lam, dtype=np.float64)[None, :]
    w = lam64 ** k
    dw = k * lam64 ** np.maximum(k - 1.0, 0.0)                        # 0 at k = 0 (also for λ = 0)
    return w.astype(dtype), dw.astype(dtype)


def last_state_backward(A, cache, dh):
    """(dλ, or dA for a dense A; db) for readout "last": dh is dL/dh_T, (B, 1, H); db is (B, T, H)."""
    x, p, q, lam = cache[:4]
    if A is not None:
        dh_all = np.zeros_like(cache.h_all)
        dh_all[:, -1] = dh[:, 0]
        return dense_scan_backward(A, cache.h_all, dh_all)
    w, dw = decay_powers(lam, x.shape[1], p.dtype)
    db = dh * w[None]                                                 # dL/db_t = λ^{T-t} ⊙ dL/dh_T
    return np.einsum("bh,bth,th->h", dh[:, 0], p * q, dw), db
