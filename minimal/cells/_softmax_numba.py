"""Causal softmax of attention scores and its backward, one compiled pass over each row (``softmax_attention``).

Forward, for each (head, query t) row of the scores A = q k^T (unscaled, (N, T, T)), in place:

    m_t = max_{s<=t} c A_{t,s},   P_{t,s} = exp(c A_{t,s} − m_t) / Σ_{s'<=t} exp(c A_{t,s'} − m_t)   (s <= t),
    P_{t,s} = 0   (s > t),        c = 1/sqrt(d) the scale.

Backward, given P and G = dL/dP (in place on G): dL/dA_{t,s} = c P_{t,s} (G_{t,s} − Σ_{s'} P_{t,s'} G_{t,s'}),
zero above the diagonal (P = 0 there).

NumPy does each in five or six passes over (N, T, T) temporaries (the mask, the max, exp, the sum, the division),
all of them over the masked upper triangle too; here each row is read and written once, only up to the diagonal,
with the vectorisable exp of ``minimal.scan.numba_log``, the row's max kept in eight running maxima (one per
vector lane) and float64 sums whatever the storage dtype. The sums are
reassociated (``fastmath`` "reassoc": vector partial sums, faster than the strict order); no other
fast-math flag, so a NaN or inf score still gives a NaN row, which the cell's finiteness check reports.
``softmax_attention.softmax_weights`` is the NumPy reference these are tested against.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..scan.numba_log import exp_nonpositive

__all__ = ["causal_softmax_", "causal_softmax_backward_"]

_LANES = 8    # float64 lanes of an AVX-512 vector


@njit(cache=True, error_model="numpy", fastmath={"contract", "reassoc"})
def causal_softmax_(A, scale):
    """A (N, T, T) scores q k^T -> the causal softmax weights P of c A, in place (module docstring)."""
    N, T, _ = A.shape
    row = np.empty(T, dtype=np.float64)
    lane = np.empty(_LANES, dtype=np.float64)
    for n in range(N):
        for t in range(T):
            # the row's max in _LANES running maxima, one per lane of a vector (a single running max is a chain
            # the compiler keeps scalar); a NaN score is skipped here, and poisons z below
            L = t + 1
            whole = L - L % _LANES
            for j in range(_LANES):
                lane[j] = -np.inf
            for s0 in range(0, whole, _LANES):
                for j in range(_LANES):
                    v = scale * np.float64(A[n, t, s0 + j])
                    row[s0 + j] = v
                    lane[j] = v if v > lane[j] else lane[j]
            m = -np.inf
            for j in range(_LANES):
                m = lane[j] if lane[j] > m else m
            for s in range(whole, L):
                v = scale * np.float64(A[n, t, s])
                row[s] = v
                m = v if v > m else m
            z = 0.0
            for s in range(t + 1):
                e = exp_nonpositive(row[s] - m)     # the max's own term is 1: z >= 1
                row[s] = e
                z += e
            r = 1.0 / z
            for s in range(t + 1):
                A[n, t, s] = row[s] * r
            for s in range(t + 1, T):
                A[n, t, s] = 0.0


@njit(cache=True, error_model="numpy", fastmath={"contract", "reassoc"})
def causal_softmax_backward_(P, G, scale):
    """G (N, T, T) = dL/dP -> dL/dA for A the unscaled scores (P = causal_softmax(c A)), in place on G."""
    N, T, _ = P.shape
    for n in range(N):
        for t in range(T):
            dot = 0.0
            for s in range(t + 1):
                dot += np.float64(P[n, t, s]) * np.float64(G[n, t, s])
            for s in range(t + 1):
                G[n, t, s] = scale * np.float64(P[n, t, s]) * (np.float64(G[n, t, s]) - dot)
            for s in range(t + 1, T):
                G[n, t, s] = 0.0
