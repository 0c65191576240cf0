"""The elementwise kernels of the log-space backward (``scan.log_linear_scan_backward``; ``scan.py``'s docstring
derives it): ``shares`` forms w_t = a_t h_{t-1} / h_t and v_t = b_t / h_t from differences of logs, one thread per
(b, t, c), and ``times`` writes dlog_b = v G once the linear backward's kernels have run the adjoint G.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import cuda

from ._device import NB_TYPES, kernel
from .sequential import SEQUENTIAL_BLOCK

__all__ = ["log_share_kernels"]


@lru_cache(maxsize=None)
def log_share_kernels(dtype):
    nbdt = NB_TYPES[np.dtype(dtype)]

    @kernel(SEQUENTIAL_BLOCK)
    def shares(log_a, log_b, log_h, log_h0, has_h0, w, w_as_h, w0, v):
        """Per (b, t, c): w_t = exp(log a_t + l_{t-1} - l_t), v_t = exp(log b_t - l_t).

        w_t is also written where the linear backward reads h_{t-1} (w_as_h[b, t-1], or w0 at t = 0), so
        that its da_t = g_t h_{t-1} comes out as w_t G_t = dlog_a_t and its dh0 = a_0 g_0 as w_0 G_0."""
        i = cuda.grid(1)
        B, T, C = log_a.shape
        if i >= B * T * C:
            return
        bb = i // (T * C)
        t = (i // C) % T
        c = i % C
        if t > 0:
            l_prev = log_h[bb, t - 1, c]
        elif has_h0:
            l_prev = log_h0[bb, c]
        else:
            l_prev = nbdt(-math.inf)  # h0 = 0: w_0 = exp(-inf) = 0
        wt = math.exp(log_a[bb, t, c] + l_prev - log_h[bb, t, c])
        w[bb, t, c] = wt
        if t > 0:
            w_as_h[bb, t - 1, c] = wt
        else:
            w0[bb, c] = wt
        v[bb, t, c] = math.exp(log_b[bb, t, c] - log_h[bb, t, c])

    @kernel(SEQUENTIAL_BLOCK)
    def times(v, G):
        """v <- v ⊙ G (flat arrays): dlog_b = v G, written over v."""
        i = cuda.grid(1)
        if i < v.shape[0]:
            v[i] = v[i] * G[i]

    return shares, times
