"""Device functions and constants the scan versions share (v2 in ``blelloch.py``, v3 in ``chunked_kernels.py``,
v4 in ``lookback.py``), and the ``kernel`` decorator every kernel of this package is compiled with.

    kernel(threads)                 ``cuda.jit`` with launch bounds: a kernel launched with <= threads threads
    combine_linear, combine_log     the scan operator on pairs, linear and log space (``scan.py``'s docstring)
    pad                             shared-memory index with one spare word every 32 banks (GPU Gems 3, Eq. 39-3)
    pair_loader(dtype, op, reverse)  the load of scan position s (forward, or the backward's shifted pair)
    grads_writer(dtype)             the backward's store of dL/da, dL/db, dL/dh0 from the adjoint g
    make_start_state(dtype, op, reverse)  the state entering the sequence: h0, or the identity's b (v3, v4)
    warp_scanner(dtype, op, CW, P, shuffle)  the Hillis-Steele scan of a lane's time-threads in a warp (v3, v4)
    chunk_scratch(dtype, NT, K, shuffle)     the registers and shared arrays of a chunk's scan (v3, v4)
    zero_int32(x)                   zeroes an int32 device array on the device (the look-back flags, v3, v4)

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
FULL_MASK = 0xFFFFFFFF       # every lane of a warp takes part in a shuffle
NB_TYPES = {np.dtype(np.float32): float32, np.dtype(np.float64): float64}


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
def pad(n):
    """Shared-memory index of the n-th element with one spare word every 32 (GPU Gems 3, Eq. 39-3)."""
    return n + (n >> LOG_NUM_BANKS)


@cuda.jit(device=True, inline=True)
def combine_linear(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2


@cuda.jit(device=True, inline=True)
def _logaddexp(x, y):
    m = max(x, y)
    if m == -math.inf:  # both terms are log 0; exp(x - m) would be exp(nan)
        return m
    return m + math.log1p(math.exp(-abs(x - y)))


@cuda.jit(device=True, inline=True)
def combine_log(a1, b1, a2, b2):
    return a1 + a2, _logaddexp(a2 + b1, b2)


@lru_cache(maxsize=None)
def pair_loader(dtype, op, reverse):
    """The load of scan position s, shared by v2 and v3: a device function giving the pair x_s of channel c
    from (B, T, C) arrays x1, x2. Forward: (a_s, b_s). Backward (``reverse``): (a_{t+1}, dh_t) at
    t = T-1-s. Positions past T and channels past C give the operator's identity (1, 0), or (0, -inf) in log
    space."""
    nbdt = NB_TYPES[np.dtype(dtype)]
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
def grads_writer(dtype):
    """The backward's store, shared by v2 and v3: a device function that writes, for the adjoint g_t at
    (bb, t, c), dL/db_t = g_t, dL/da_t = g_t h_{t-1} (h_{-1} = h0, or 0 without one) and, at t = 0,
    dL/dh0 = a_0 g_0. Arrays a, h, da, db: (B, T, C); h0, dh0: (B, C)."""
    nbdt = NB_TYPES[np.dtype(dtype)]

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


@lru_cache(maxsize=None)
def make_start_state(dtype, op, reverse):
    """The state entering the sequence, shared by v3 and v4: a device function giving h0[bb, c] (forward, when
    given) or the identity's b (h = 0, g = 0; -inf in log space) for channel c of C."""
    nbdt = NB_TYPES[np.dtype(dtype)]
    ID_B = 0.0 if op == "linear" else -math.inf

    @cuda.jit(device=True, inline=True)
    def start_state(h0, has_h0, bb, c, C):
        if c < C and has_h0 and not reverse:
            return h0[bb, c]
        return nbdt(ID_B)

    return start_state


@lru_cache(maxsize=None)
def warp_scanner(dtype, op, CW, P, shuffle):
    """The warp step of v3 and v4: a device function ``warp_scan(A, H, tid, tyw, hs_a, hs_b)`` giving the
    inclusive (A, H) and exclusive (ea, eb) prefix of the thread's pair among the P time-threads of its lane in
    its warp (tyw: the thread's time-thread index in the warp; lanes are CW apart). Hillis-Steele, log2 P
    steps: ``cuda.shfl_up_sync`` (``shuffle``, real hardware) or the same steps through the shared arrays
    hs_a, hs_b of NT words with block barriers (the simulator has no shuffles). Every thread of the block must
    call it (barriers and full-mask shuffles)."""
    nbdt = NB_TYPES[np.dtype(dtype)]
    combine = combine_linear if op == "linear" else combine_log
    ID_A, ID_B = (1.0, 0.0) if op == "linear" else (0.0, -math.inf)

    @cuda.jit(device=True, inline=True)
    def warp_scan(A, H, tid, tyw, hs_a, hs_b):
        ea = nbdt(ID_A)
        eb = nbdt(ID_B)
        if shuffle:
            d = 1
            while d < P:
                # Lane tid - d CW is the same channel d time-threads earlier; every lane takes part (full mask).
                pa = cuda.shfl_up_sync(FULL_MASK, A, d * CW)
                pb = cuda.shfl_up_sync(FULL_MASK, H, d * CW)
                if tyw >= d:
                    A, H = combine(pa, pb, A, H)
                d *= 2
            if P > 1:
                pa = cuda.shfl_up_sync(FULL_MASK, A, CW)
                pb = cuda.shfl_up_sync(FULL_MASK, H, CW)
                if tyw > 0:
                    ea = pa
                    eb = pb
        else:
            hs_a[tid] = A
            hs_b[tid] = H
            d = 1
            while d < P:
                pa = nbdt(ID_A)
                pb = nbdt(ID_B)
                # The previous step's values (or the first writes above) must be visible before they are read.
                cuda.syncthreads()
                if tyw >= d:
                    pa = hs_a[tid - d * CW]
                    pb = hs_b[tid - d * CW]
                # Everyone has read before anyone overwrites: the shared array plays the shuffle's registers.
                cuda.syncthreads()
                if tyw >= d:
                    A, H = combine(pa, pb, A, H)
                    hs_a[tid] = A
                    hs_b[tid] = H
                d *= 2
            # The last step's writes must land before the exclusive prefix is read from a neighbour.
            cuda.syncthreads()
            if tyw > 0:
                ea = hs_a[tid - CW]
                eb = hs_b[tid - CW]
        return A, H, ea, eb

    return warp_scan


@lru_cache(maxsize=None)
def chunk_scratch(dtype, NT, K, shuffle):
    """The arrays of v3's and v4's chunk scan, as a device function ``scratch()`` to call from a kernel (inlined,
    so each kernel gets its own): the thread's K pairs ra, rb (registers), the warp scan's hs_a, hs_b (shared,
    NT words; one word with shuffles, which need none) and the warp totals wa, wb (shared, NT words). Returns
    (ra, rb, hs_a, hs_b, wa, wb)."""
    nbdt = NB_TYPES[np.dtype(dtype)]
    HS = 1 if shuffle else NT

    @cuda.jit(device=True, inline=True)
    def scratch():
        ra = cuda.local.array(K, nbdt)
        rb = cuda.local.array(K, nbdt)
        hs_a = cuda.shared.array(HS, nbdt)
        hs_b = cuda.shared.array(HS, nbdt)
        wa = cuda.shared.array(NT, nbdt)
        wb = cuda.shared.array(NT, nbdt)
        return ra, rb, hs_a, hs_b, wa, wb

    return scratch


@kernel(128)
def _zero_int32_kernel(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = 0


def zero_int32(x):
    """Zero the int32 device array x on the device (no host copy); returns x."""
    n = int(np.prod(x.shape))
    _zero_int32_kernel[-(-n // 128), 128](x.reshape(n))
    return x
