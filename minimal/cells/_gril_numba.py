"""Fused Numba CPU kernels for the GRIL block (``minimal.cells.gril``, backend="numba"). Private: call them
through ``gril.forward`` / ``gril.backward``, or ``gril_forward`` below for inference without the states.

Tian et al., Def. 4.2, with the conventions of ``minimal.cells.gril`` (C_k[i, m] = x[k s + m, i]):

    U_k = C_k Q C_k^T,   Z_k = A ⊙ Z_{k-1} + U_k (Z_{-1} = 0),   o_k = β ⊙ (Z_k r_k),  r_k = C_k q

Forward: one pass over the windows per batch element. C_k is never built (the kernels index x directly),
U_k is formed entry by entry as Z is updated, and Z lives in an (f, f) local buffer: the (B, T', f, f)
stack of states is written only when asked for (``return_Z``), which the backward needs (Z_{k-1} enters
dA; recomputing it as (Z_k - U_k) / A is not exact and fails where A has zeros).

Backward: one reverse pass over the windows per batch element, with the total adjoint of the state
G_k = dL/dZ_k = A ⊙ G_{k+1} + (β ⊙ do_k) r_k^T kept in an (f, f) local buffer:

    4. o = β ⊙ (Z r):   dβ += do_k ⊙ (Z_k r_k),  dr_k = Z_k^T (β ⊙ do_k),  dq += C_k^T dr_k,  dC_k = dr_k q^T
    3. Z = A ⊙ Z_prev + U:  dA += G_k ⊙ Z_{k-1}, and G_{k-1} gets A ⊙ G_k
    2. U = C Q C^T:      H = G_k C_k, K = G_k^T C_k (f, w);  dQ += C_k^T H,  dC_k += H Q^T + K Q
    1. C = window(x):    dx[k s + m, i] += dC_k[i, m] (tokens in several windows, s < w, get the sum)

Everything accumulates in the input dtype (float32 stays float32). The parameter gradients are summed per
batch element in local buffers and then added to the totals, a two-level sum that keeps float32 rounding
closer to that of a pairwise sum than one running total over all B T' windows would.
Plain loops, batch rows one after another: ``prange`` gives no speedup on the project's CPUs (measured here).

Glossary: B batch, T input steps, f features, w window width, s stride, T' = (T - w) / s + 1 windows.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["gril_forward", "gril_backward"]


@njit(cache=True)
def _forward_into(x, Q, q, beta, A, s, o, Z_out):
    """Writes o (B, T', f), and Z_out (B, T', f, f) unless Z_out.shape[0] == 0 (forward only).

    x (B, T, f); Q (w, w); q (w,); beta (f,) (a scalar β broadcast by the caller); A (f, f); one dtype."""
    B, T_out, f = o.shape
    w = Q.shape[0]
    store = Z_out.shape[0] > 0
    # The state is kept transposed, Zt[j, i] = Z[i, j], so that the loop over i, innermost below, is a
    # contiguous elementwise sweep (Zt, At, pt rows) that the compiler vectorises without reordering sums.
    At = np.ascontiguousarray(A.T)
    Zt = np.empty((f, f), x.dtype)
    # pt[n, i] = (C_k Q)[i, n]; at least 3 rows, the unused ones zero, for the w <= 3 sweep below
    pt = np.zeros((max(w, 3), f), x.dtype)
    r = np.empty(f, x.dtype)  # r_k = C_k q
    acc = np.empty(f, x.dtype)  # Z_k r_k
    for b in range(B):
        Zt[:, :] = 0.0
        for k in range(T_out):
            t0 = k * s
            for n in range(w):
                for i in range(f):
                    pt[n, i] = x[b, t0, i] * Q[0, n]
                for m in range(1, w):
                    qmn = Q[m, n]
                    for i in range(f):
                        pt[n, i] += x[b, t0 + m, i] * qmn
            for j in range(f):
                r[j] = x[b, t0, j] * q[0]
            for m in range(1, w):
                for j in range(f):
                    r[j] += x[b, t0 + m, j] * q[m]
            acc[:] = 0.0
            # column j of Z: Z[i, j] = A[i, j] Z[i, j] + Σ_n (C_k Q)[i, n] x[t0 + n, j], and its share
            # Z[i, j] r[j] of the readout; every loop over i is a contiguous sweep of length f.
            if w <= 3:
                # One sweep per column with the three terms written out: faster at f = 10, w = 3 than
                # the general loop below (one sweep instead of w + 2). For w < 3 the missing terms are zero
                # rows of pt times a real (finite) token, so they add exact zeros.
                for j in range(f):
                    x0 = x[b, t0, j]
                    x1 = x[b, t0 + min(1, w - 1), j]
                    x2 = x[b, t0 + min(2, w - 1), j]
                    rj = r[j]
                    for i in range(f):
                        z = At[j, i] * Zt[j, i] + pt[0, i] * x0 + pt[1, i] * x1 + pt[2, i] * x2
                        Zt[j, i] = z
                        acc[i] += z * rj
            for j in range(f if w > 3 else 0):
                for i in range(f):
                    Zt[j, i] *= At[j, i]
                for n in range(w):
                    xn = x[b, t0 + n, j]
                    for i in range(f):
                        Zt[j, i] += pt[n, i] * xn
                rj = r[j]
                for i in range(f):
                    acc[i] += Zt[j, i] * rj
            for i in range(f):
                o[b, k, i] = beta[i] * acc[i]
            if store:
                for i in range(f):
                    for j in range(f):
                        Z_out[b, k, i, j] = Zt[j, i]


@njit(cache=True)
def _backward_into(x, Q, q, beta, A, s, Z, do, dx, dQ, dq, dbeta, dA):
    """Adds the gradients into dx (B, T, f) (zeroed by the caller), dQ (w, w), dq (w,), dbeta (f,) and
    dA (f, f) (all zeroed by the caller). Z (B, T', f, f) are the forward's states, do (B, T', f)."""
    B, T_out, f = do.shape
    w = Q.shape[0]
    G = np.empty((f, f), x.dtype)  # G[i, j] = dL/dZ_k[i, j], carried backwards through A
    r = np.empty(f, x.dtype)
    dm = np.empty(f, x.dtype)  # β ⊙ do_k
    dr = np.empty(f, x.dtype)  # Z_k^T dm
    H = np.empty((f, w), x.dtype)  # G C
    K = np.empty((f, w), x.dtype)  # G^T C
    # per-batch-element partial sums (module docstring)
    dQ_b = np.empty((w, w), x.dtype)
    dq_b = np.empty(w, x.dtype)
    dbeta_b = np.empty(f, x.dtype)
    dA_b = np.empty((f, f), x.dtype)
    for b in range(B):
        G[:, :] = 0.0
        dQ_b[:, :] = 0.0
        dq_b[:] = 0.0
        dbeta_b[:] = 0.0
        dA_b[:, :] = 0.0
        for k in range(T_out - 1, -1, -1):
            t0 = k * s
            # 4. the readout o_k = β ⊙ (Z_k r_k)
            for j in range(f):
                r[j] = x[b, t0, j] * q[0]
            for m in range(1, w):
                for j in range(f):
                    r[j] += x[b, t0 + m, j] * q[m]
            for i in range(f):
                dm[i] = beta[i] * do[b, k, i]
            dr[:] = 0.0
            for i in range(f):
                m_i = Z[b, k, i, 0] * r[0]
                for j in range(1, f):
                    m_i += Z[b, k, i, j] * r[j]
                dbeta_b[i] += do[b, k, i] * m_i
                for j in range(f):
                    dr[j] += Z[b, k, i, j] * dm[i]
            for m in range(w):
                for i in range(f):
                    dq_b[m] += x[b, t0 + m, i] * dr[i]
            # 3. G_k = A ⊙ G_{k+1} + dm r^T (the total adjoint); dA += G_k ⊙ Z_{k-1}, Z_{-1} = 0
            for i in range(f):
                for j in range(f):
                    G[i, j] = A[i, j] * G[i, j] + dm[i] * r[j]
            if k > 0:
                for i in range(f):
                    for j in range(f):
                        dA_b[i, j] += G[i, j] * Z[b, k - 1, i, j]
            # 2. U_k = C_k Q C_k^T: H = G C, K = G^T C
            H[:, :] = 0.0
            K[:, :] = 0.0
            for n in range(w):
                for i in range(f):
                    xi = x[b, t0 + n, i]
                    for j in range(f):
                        H[j, n] += G[j, i] * xi
                        K[j, n] += G[i, j] * xi
            for m in range(w):
                for n in range(w):
                    for i in range(f):
                        dQ_b[m, n] += x[b, t0 + m, i] * H[i, n]
            # 1. dC_k[i, m] = dr[i] q[m] + (H Q^T)[i, m] + (K Q)[i, m], scattered onto the window's tokens
            for m in range(w):
                for i in range(f):
                    g = dr[i] * q[m]
                    for n in range(w):
                        g += H[i, n] * Q[m, n] + K[i, n] * Q[n, m]
                    dx[b, t0 + m, i] += g
        dQ += dQ_b
        dq += dq_b
        dbeta += dbeta_b
        dA += dA_b


def _common(x, Q, q, beta, A):
    """The arrays as C-contiguous arrays of one dtype (NumPy's result type, as the NumPy path computes in),
    with β broadcast to (f,)."""
    dtype = np.result_type(x, Q, q, beta, A)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"the Numba GRIL kernels take float32 or float64 arrays, got {dtype}")
    x, Q, q, A = (np.ascontiguousarray(a, dtype=dtype) for a in (x, Q, q, A))
    beta = np.ascontiguousarray(np.broadcast_to(np.asarray(beta, dtype=dtype), (x.shape[2],)))
    return x, Q, q, beta, A


def gril_forward(x, Q, q, beta, A, w, s, return_Z=False):
    """The block's forward in one fused pass (inputs as checked by ``minimal.cells.gril``).

    Args:
        x: (B, T, f); Q: (w, w); q: (w,); beta: (1,) or (f,); A: (f, f); float32 or float64 (computed in
        their common result type). w: window width (Q's size); s: stride, (T - w) % s == 0.
        return_Z: also return the states; without it no (B, T', f, f) array is allocated (inference).
    Returns:
        o (B, T', f), or (o, Z) with Z (B, T', f, f) the state after each window.
    """
    if Q.shape != (w, w):
        raise ValueError(f"w must equal the size of Q (w, w) = {Q.shape}, got w={w}")
    x, Q, q, beta, A = _common(x, Q, q, beta, A)
    B, T, f = x.shape
    T_out = (T - w) // s + 1   # the windows' count; T, w and s were checked by gril.n_windows
    o = np.empty((B, T_out, f), x.dtype)
    Z = np.empty((B, T_out, f, f) if return_Z else (0, 0, f, f), x.dtype)
    _forward_into(x, Q, q, beta, A, s, o, Z)
    return (o, Z) if return_Z else o


def gril_backward(x, Q, q, beta, A, w, s, Z, do):
    """Gradients of ``gril_forward`` in one fused reverse pass.

    Args:
        x, Q, q, beta, A, w, s: as given to ``gril_forward``; Z: (B, T', f, f) its states (return_Z=True);
        do: (B, T', f) dL/do.
    Returns:
        dx (B, T, f) and {"Q", "q", "beta", "A"} with the params' shapes (beta (1,) for a scalar β).
    """
    scalar_beta = np.shape(beta) == (1,)
    x, Q, q, beta, A = _common(x, Q, q, beta, A)
    B, T, f = x.shape
    T_out = (T - w) // s + 1   # the windows' count; T, w and s were checked by gril.n_windows
    if Z.shape != (B, T_out, f, f) or do.shape != (B, T_out, f):
        raise ValueError(f"Z must have shape {(B, T_out, f, f)} and do {(B, T_out, f)}, got {Z.shape}, "
                         f"{do.shape}")
    Z = np.ascontiguousarray(Z, dtype=x.dtype)
    do = np.ascontiguousarray(do, dtype=x.dtype)
    dx = np.zeros_like(x)
    dQ, dq, dbeta, dA = np.zeros_like(Q), np.zeros_like(q), np.zeros_like(beta), np.zeros_like(A)
    _backward_into(x, Q, q, beta, A, s, Z, do, dx, dQ, dq, dbeta, dA)
    return dx, {"Q": dQ, "q": dq, "beta": dbeta.sum(keepdims=True) if scalar_beta else dbeta, "A": dA}
