"""v1 "sequential" kernels (``scan.linear_scan(..., method="sequential")``): one thread per (b, c) runs the loop
over t, consecutive threads on consecutive channels (coalesced loads), no synchronisation; ``prefetch=K`` loads
K steps ahead into registers (software pipelining). The host side (arguments, launches) is in ``scan.py``."""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import cuda

from ._device import NB_TYPES, combine_linear, combine_log, kernel

SEQUENTIAL_BLOCK = 128       # threads per block of the v1 kernels


@lru_cache(maxsize=None)
def sequential_kernels(dtype, op, K=1):
    """v1's forward and backward. Software pipelining (``prefetch=K``): each thread loads the next K steps
    of its inputs into registers before it uses the first, so every thread has K loads of each array in
    flight instead of one (the loop body's only latency is the load; the arithmetic is one multiply-add).
    K = 1 is the plain loop."""
    nbdt = NB_TYPES[np.dtype(dtype)]
    combine = combine_linear if op == "linear" else combine_log
    zero = 0.0 if op == "linear" else -math.inf  # the state "h = 0" in this op's coordinates

    @kernel(SEQUENTIAL_BLOCK)
    def forward(a, b, h0, has_h0, h):
        i = cuda.grid(1)
        B, T, C = a.shape
        if i >= B * C:
            return
        bb = i // C
        c = i - bb * C  # c fastest: a warp reads 32 consecutive channels of one time step
        state = h0[bb, c] if has_h0 else nbdt(zero)
        ra = cuda.local.array(K, nbdt)  # K is a compile-time constant: the loops unroll into registers
        rb = cuda.local.array(K, nbdt)
        for t0 in range(0, T, K):
            for j in range(K):  # K independent loads of a and of b, issued before any is used
                if t0 + j < T:
                    ra[j] = a[bb, t0 + j, c]
                    rb[j] = b[bb, t0 + j, c]
            for j in range(K):
                if t0 + j < T:
                    _, state = combine(ra[j], state, ra[j], rb[j])
                    h[bb, t0 + j, c] = state

    @kernel(SEQUENTIAL_BLOCK)
    def backward(a, h, dh, h0, has_h0, da, db, dh0):
        i = cuda.grid(1)
        B, T, C = a.shape
        if i >= B * C:
            return
        bb = i // C
        c = i - bb * C
        g = nbdt(0.0)
        a_next = nbdt(0.0)
        ra = cuda.local.array(K, nbdt)
        rd = cuda.local.array(K, nbdt)
        rh = cuda.local.array(K, nbdt)
        for t0 in range(T - 1, -1, -K):
            for j in range(K):  # the next K steps (in reverse time) of a, dh and h_{t-1}, loaded ahead
                t = t0 - j
                if t >= 0:
                    ra[j] = a[bb, t, c]
                    rd[j] = dh[bb, t, c]
                    if t > 0:
                        rh[j] = h[bb, t - 1, c]
                    elif has_h0:
                        rh[j] = h0[bb, c]
                    else:
                        rh[j] = nbdt(0.0)
            for j in range(K):
                t = t0 - j
                if t >= 0:
                    g = rd[j] + a_next * g
                    db[bb, t, c] = g
                    da[bb, t, c] = g * rh[j]
                    a_next = ra[j]
        dh0[bb, c] = a_next * g  # a_next is now a_1 and g is g_1

    return forward, backward
