"""Causal softmax of attention scores and its backward, one compiled pass over each row (``softmax_attention``).

Forward, for each (head, query t) row of the scores A = q k^T (unscaled, (N, T, T)), in place:

    m_t = max_{s<=t} c A_{t,s},   P_{t,s} = exp(c A_{t,s} − m_t) / Σ_{s'<=t} exp(c A_{t,s'} − m_t)   (s <= t),
    P_{t,s} = 0   (s > t),        c = 1/sqrt(d) the scale.

Backward, given P and G = dL/dP (in place on G): dL/dA_{t,s} = c P_{t,s} (G_{t,s} − Σ_{s'} P_{t,s'} G_{t,s'}),
zero above the diagonal (P = 0 there).

NumPy does each in five or six passes over (N, T, T) temporaries (the mask, the max, exp, the sum, the division),
all of them over the masked upper triangle too; here each row is read and written once, only up to the diagonal,
with the vectorisable exp of ``minimal.scan.numba_log``, the row's max kept in eight running maxima (one per
vector lane) and float64 sums whatever the storage dtype; float32 scores in float32 registers, with ``numba_log``'s
float32 exp and an integer max (``_causal_softmax_f32_``). The sums are
reassociated (``fastmath`` "reassoc": vector partial sums, faster than the strict order); no other
fast-math flag, so a NaN or inf score still gives a NaN row, which the cell's finiteness check reports.
``softmax_attention.softmax_weights`` is the NumPy reference these are tested against.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..scan.numba_log import exp_nonpositive, exp_nonpositive_f32

__all__ = ["causal_softmax_", "causal_softmax_backward_"]

_LANES = 8    # float64 lanes of an AVX-512 vector
_PAD = 32     # float32 rows rounded up to a multiple of this


def causal_softmax_(A, scale):
    """A (N, T, T) scores q k^T -> the causal softmax weights P of c A, in place (module docstring); float32
    scores in float32 arithmetic (``exp_nonpositive_f32``, the sum still float64), others in float64."""
    if A.dtype == np.float32:
        _causal_softmax_f32_(A, np.float32(scale))
    else:
        _causal_softmax_f64_(A, scale)


@njit(cache=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _causal_softmax_f64_(A, scale):
    """``causal_softmax_`` in float64 registers, whatever the storage dtype."""
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


_SIGN_OFF = np.int32(0x7FFFFFFF)
_INT32_MIN = np.int32(-2147483648)


@njit(cache=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _causal_softmax_f32_(A, scale):
    """``causal_softmax_`` of float32 scores in float32 registers (the row's sum z in float64), three passes a row:

    - the max of the unscaled row, as integers: a float32's bits b, turned into b ^ (0x7FFFFFFF if b < 0 else 0),
      order as the floats do (-0 just below +0), and an integer max vectorises where a float max with NaN
      semantics stays a scalar chain; c max_s A_{t,s} = max_s c A_{t,s} exactly (c > 0: rounding is monotone);
    - exp in place with ``exp_nonpositive_f32`` (twice the lanes of the float64 form, a shorter series), over the
      row rounded up to a whole number of _PAD entries, those past the diagonal given a score of -inf (weight 0),
      so that the vectorised loop ends without a scalar remainder (rows are short: t + 1 <= T);
    - the division by z, and zeros up to T.

    A NaN score gives a NaN row: a NaN's key sorts above +inf or below -inf, and either way its exp poisons z."""
    N, T, _ = A.shape
    minus_inf = np.float32(-np.inf)
    zero = scale * np.float32(0.0)    # not a constant, so that the zeros are vector stores, not a memset call a row
    for n in range(N):
        for t in range(T):
            L = t + 1
            padded = min(T, (L + _PAD - 1) // _PAD * _PAD)
            a = A[n, t]
            bits = a.view(np.int32)
            key = _INT32_MIN
            for s in range(L):
                b = bits[s]
                key = max(key, b ^ ((b >> 31) & _SIGN_OFF))
            m = scale * np.int32(key ^ ((key >> 31) & _SIGN_OFF)).view(np.float32)
            z = 0.0
            for s in range(padded):
                x = scale * a[s] - m
                e = exp_nonpositive_f32(x if s < L else minus_inf)
                a[s] = e
                z += np.float64(e)
            r = np.float32(1.0 / z)
            for s in range(L):      # the padding holds exp(-inf) = 0 already (and keeps it when z is NaN)
                a[s] = a[s] * r
            for s in range(padded, T):
                a[s] = zero


def causal_softmax_backward_(P, G, scale):
    """G (N, T, T) = dL/dP -> dL/dA for A the unscaled scores (P = causal_softmax(c A)), in place on G; float32 in
    float32 registers (the dot product summed in float64), others in float64."""
    if P.dtype == np.float32 and G.dtype == np.float32:
        _causal_softmax_backward_f32_(P, G, np.float32(scale))
    else:
        _causal_softmax_backward_f64_(P, G, scale)


@njit(cache=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _causal_softmax_backward_f32_(P, G, scale):
    """``causal_softmax_backward_`` of float32 arrays in float32 registers, Σ_s P G summed in float64."""
    N, T, _ = P.shape
    zero = scale * np.float32(0.0)    # not a constant: vector stores, not a memset call a row
    for n in range(N):
        for t in range(T):
            p, g = P[n, t], G[n, t]
            dot = 0.0
            for s in range(t + 1):
                dot += np.float64(p[s] * g[s])
            d = np.float32(dot)
            for s in range(t + 1):
                g[s] = scale * p[s] * (g[s] - d)
            for s in range(t + 1, T):
                g[s] = zero


@njit(cache=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _causal_softmax_backward_f64_(P, G, scale):
    """``causal_softmax_backward_`` in float64 registers, whatever the storage dtype."""
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
