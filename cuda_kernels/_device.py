"""Device functions and constants the scan versions share (v2 in ``scan.py``, v3 in ``chunked.py``), and the
``kernel`` decorator every kernel of this package is compiled with.

    kernel(threads)                 ``cuda.jit`` with launch bounds: a kernel launched with <= threads threads
    _combine_linear, _combine_log   the scan operator on pairs, linear and log space (``scan.py``'s docstring)
    _pad                            shared-memory index with one spare word every 32 banks (GPU Gems 3, Eq. 39-3)
    _pair_loader(dtype, op, reverse)  the load of scan position s (forward, or the backward's shifted pair)
    _grads_writer(dtype)            the backward's store of dL/da, dL/db, dL/dh0 from the adjoint g

Imports numpy and numba only: ``scan.py`` and ``chunked.py`` import this module, and it imports neither.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numba
import numpy as np
from numba import cuda, float32, float64

LOG_NUM_BANKS = 5            # 32 shared-memory banks
REGISTERS_PER_BLOCK = 65536  # 32-bit registers one block may use (compute capability 5.0 - 9.0)
_NB_TYPES = {np.dtype(np.float32): float32, np.dtype(np.float64): float64}


def kernel(threads):
    """``cuda.jit`` for a kernel that is launched with at most ``threads`` threads per block.

    On a GPU the kernel is compiled with launch bounds (PTX ``.maxntid threads``): ptxas then keeps its
    registers per thread within ``REGISTERS_PER_BLOCK / threads`` (64 at 1024 threads), spilling if it must,
    so a launch of ``threads`` threads never fails with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES. Without the bound
    ptxas gave v3's float32 backward scan at 1024 threads (K = 2) 80 registers, and the launch failed on an H200
    (``tests/test_cuda_resources.py`` compiles the kernels for sm_90 and checks the line). The simulator has
    no registers and takes no launch bounds."""
    if numba.config.ENABLE_CUDASIM:
        return cuda.jit
    return cuda.jit(launch_bounds=int(threads))


@cuda.jit(device=True, inline=True)
def _pad(n):
    """Shared-memory index of the n-th element with one spare word every 32 (GPU Gems 3, Eq. 39-3)."""
    return n + (n >> LOG_NUM_BANKS)


@cuda.jit(device=True, inline=True)
def _combine_linear(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2


@cuda.jit(device=True, inline=True)
def _logaddexp(x, y):
    m = max(x, y)
    if m == -math.inf:  # both terms are log 0; exp(x - m) would be exp(nan)
        return m
    return m + math.log1p(math.exp(-abs(x - y)))


@cuda.jit(device=True, inline=True)
def _combine_log(a1, b1, a2, b2):
    return a1 + a2, _logaddexp(a2 + b1, b2)


@lru_cache(maxsize=None)
def _pair_loader(dtype, op, reverse):
    """The load of scan position s, shared by v2 and v3: a device function giving the pair x_s of channel c
    from (B, T, C) arrays x1, x2. Forward: (a_s, b_s). Backward (``reverse``): (a_{t+1}, dh_t) at
    t = T-1-s. Positions past T and channels past C give the operator's identity (1, 0), or (0, -inf) in log
    space."""
    nbdt = _NB_TYPES[np.dtype(dtype)]
    ID_A, ID_B = (1.0, 0.0) if op == "linear" else (0.0, -math.inf)

    @cuda.jit(device=True, inline=True)
    def load(x1, x2, bb, s, c, T, C):
        if s >= T or c >= C:
            return nbdt(ID_A), nbdt(ID_B)
        if reverse:
            t = T - 1 - s
            coef = x1[bb, t + 1, c] if t + 1 < T else nbdt(0.0)  # g_{T+1} = 0: any value would do
            return coef, x2[bb, t, c]
        return x1[bb, s, c], x2[bb, s, c]

    return load


@lru_cache(maxsize=None)
def _grads_writer(dtype):
    """The backward's store, shared by v2 and v3: a device function that writes, for the adjoint g_t at
    (bb, t, c), dL/db_t = g_t, dL/da_t = g_t h_{t-1} (h_{-1} = h0, or 0 without one) and, at t = 0,
    dL/dh0 = a_0 g_0. Arrays a, h, da, db: (B, T, C); h0, dh0: (B, C)."""
    nbdt = _NB_TYPES[np.dtype(dtype)]

    @cuda.jit(device=True, inline=True)
    def write_grads(a, h, h0, has_h0, da, db, dh0, bb, t, c, g):
        if t > 0:
            h_prev = h[bb, t - 1, c]
        elif has_h0:
            h_prev = h0[bb, c]
        else:
            h_prev = nbdt(0.0)
        db[bb, t, c] = g
        da[bb, t, c] = g * h_prev
        if t == 0:
            dh0[bb, c] = a[bb, 0, c] * g

    return write_grads
