"""v3 of the linear-recurrence scan: a chunked scan with thread coarsening and a warp-level combine.

Glossary as in ``scan.py``: B batch, T time, C channels, arrays (B, T, C) with channels contiguous; the pairs
x_s = (a_s, b_s) are combined with (a1, b1) ∘ (a2, b2) = (a1 a2, a2 b1 + b2) (or its log-space form), and
the state after step s is h_s = A_s h_in + H_s for the prefix (A_s, H_s) = x_1 ∘ ... ∘ x_s.

One block is CW channel lanes x TW time-threads (NT = CW TW threads, thread id tid = cx + CW ty, so a warp
holds P = 32 / CW time-threads of CW channels); a thread owns K consecutive steps, a chunk is L = TW K steps.
For each chunk the block runs

    1. stage     the block reads the chunk's a and b into shared memory, element e = tid + k NT at step
                 e // CW, lane e % CW: consecutive threads read consecutive channels, then the next step, so
                 the loads are coalesced whatever CW is (one word of padding every 32 against bank conflicts);
    2. registers thread (cx, ty) copies its K steps into registers and reduces them to one pair (K combines,
                 no synchronisation): the coarsening that v2's tree lacks;
    3. warp      the P time-threads of a lane inside one warp scan their pairs (Hillis-Steele, log2 P steps):
                 ``cuda.shfl_up_sync`` on real hardware (``shuffle=True``), or the same steps through shared
                 memory with block barriers (``shuffle=False``: the simulator has no shuffles);
    4. block     each warp's total goes to shared memory; each thread combines the totals of the warps before
                 its own (at most NT / 32) with its exclusive prefix inside the warp;
    5. rescan    the thread applies that prefix to the state entering the chunk and runs its K steps again
                 from registers, staging h in shared memory, which the block then writes coalesced. The state
                 leaving the chunk (thread ty = TW - 1) is carried in shared memory to the block's next chunk.

A block loops over ``n_iter`` consecutive chunks (a segment). When B x (channel tiles) alone gives enough
blocks (``TARGET_BLOCKS``), a segment is the whole sequence: one pass that reads a and b once and writes h
once (3 array passes, the minimum). With few channels and long T the sequence is split into segments, which
are combined as v2 combines its chunks (reduce-then-scan): ``reduce`` (steps 1-4) writes each segment's total,
the totals are scanned from h0 by this same scan (recursively), and ``scan`` reruns each segment from its
carried state: 5 array passes. A single-pass carry (decoupled look-back) would bring that back to 3; it needs
inter-block spinning that only real hardware can test.

Backward: as v2, the same kernels in reverse time with the coefficient shifted (x_s = (a_{t+1}, dh_t) at
t = T-1-s), and the store phase writes dL/db_t = g_t, dL/da_t = g_t h_{t-1} and dL/dh0 = a_1 g_1.
Log space: the same kernels with the log-space operator (``scan._combine_log``).

The tuning constants (``DEFAULT_STEPS``, ``TARGET_BLOCKS``) are not yet measured on a GPU.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numba
import numpy as np
from numba import cuda

from .scan import _NB_TYPES, LOG_NUM_BANKS, _combine_linear, _combine_log, _dummy, _pad

__all__ = ["forward", "backward", "plan", "tile", "check_options", "shuffle_available", "DEFAULT_STEPS",
           "TARGET_BLOCKS", "SHARED_BYTES"]

DEFAULT_STEPS = 8          # K, steps per thread
TARGET_BLOCKS = 1024       # split T into segments until the grid has about this many blocks (H100: 132 SMs x 8)
SHARED_BYTES = 48 * 1024   # static shared memory per block
WARP = 32
FULL_MASK = 0xFFFFFFFF


def _shared_words(NT, K):
    """Padded length of one staging array: L CW = NT K elements, one spare word every 32."""
    n = NT * K
    return n + (n >> LOG_NUM_BANKS)


def shuffle_available():
    """Whether ``cuda.shfl_up_sync`` can run here: always on a GPU; in the simulator only where a test has
    supplied an emulation (``tests/test_cuda_scan_v3.py``), since numba's simulator has no warp shuffles."""
    if not numba.config.ENABLE_CUDASIM:
        return True
    from numba.cuda.simulator import kernelapi

    return hasattr(kernelapi.FakeCUDAModule, "shfl_up_sync")


def check_options(dtype, block, steps_per_thread, chunks_per_block, shuffle):
    """Validate v3's keywords; returns (K, chunks_per_block or None, shuffle as a bool)."""
    K = DEFAULT_STEPS if steps_per_thread is None else steps_per_thread
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1 or K > 64:
        raise ValueError(f"steps_per_thread must be an integer in [1, 64], got {steps_per_thread!r}")
    if chunks_per_block is not None and (isinstance(chunks_per_block, bool)
                                         or not isinstance(chunks_per_block, (int, np.integer))
                                         or chunks_per_block < 1):
        raise ValueError(f"chunks_per_block must be None or an integer >= 1, got {chunks_per_block!r}")
    need = 2 * _shared_words(block, int(K)) * np.dtype(dtype).itemsize
    if need > SHARED_BYTES - 4096:
        raise ValueError(f"block * steps_per_thread = {block} * {K} needs {need} bytes of shared memory for "
                         f"{np.dtype(dtype).name}, more than a block has ({SHARED_BYTES}); use fewer steps per "
                         f"thread or a smaller block")
    if shuffle is None:
        shuffle = not numba.config.ENABLE_CUDASIM
    if shuffle and not shuffle_available():
        raise ValueError("shuffle=True needs warp shuffles (cuda.shfl_up_sync), which the CUDA simulator does "
                         "not have; use shuffle=False (the shared-memory path) in the simulator")
    if shuffle and block < WARP:
        raise ValueError(f"shuffle=True needs whole warps: block must be >= {WARP}, got {block}")
    return int(K), (None if chunks_per_block is None else int(chunks_per_block)), bool(shuffle)


def tile(C, block, channel_tile):
    """(CW, TW): CW channel lanes (a power of two <= min(32, block)) x TW time-threads."""
    ws = min(WARP, block)
    if channel_tile is None:
        CW = 1
        while CW < min(C, ws):
            CW *= 2
    else:
        if isinstance(channel_tile, bool) or not isinstance(channel_tile, (int, np.integer)) \
                or channel_tile < 1 or channel_tile > ws or channel_tile & (channel_tile - 1):
            raise ValueError(f"channel_tile must be a power of two in [1, min(32, block) = {ws}], "
                             f"got {channel_tile!r}")
        CW = int(channel_tile)
    return CW, block // CW


def plan(shape3, CW, TW, K, chunks_per_block=None, target_blocks=TARGET_BLOCKS):
    """(n_iter, n_seg, n_blocks): chunks per block, segments along T, blocks in the grid.

    With ``chunks_per_block=None`` the sequence is split into the fewest segments that give about
    ``target_blocks`` blocks (one segment, a single pass, when B x channel tiles is already that many)."""
    B, T, C = shape3
    n_chunks = -(-T // (TW * K))
    rows = B * (-(-C // CW))
    if chunks_per_block is None:
        want = max(1, -(-target_blocks // rows))
        n_iter = max(1, -(-n_chunks // want))
    else:
        n_iter = chunks_per_block
    n_seg = -(-n_chunks // n_iter)
    return n_iter, n_seg, rows * n_seg


@lru_cache(maxsize=None)
def _kernels(dtype, CW, TW, K, op, reverse, shuffle):
    """(reduce, scan) for one configuration; shared-array sizes, K and the warp path are compile-time."""
    nbdt = _NB_TYPES[np.dtype(dtype)]
    combine = _combine_linear if op == "linear" else _combine_log
    ID_A, ID_B = (1.0, 0.0) if op == "linear" else (0.0, -math.inf)
    NT = CW * TW                 # threads per block
    WS = min(WARP, NT)           # threads per warp (a smaller "warp" when the block is smaller than one)
    P = WS // CW                 # time-threads of one lane inside a warp
    L = TW * K                   # steps per chunk
    NS = _shared_words(NT, K)

    @cuda.jit(device=True, inline=True)
    def load(x1, x2, bb, s, c, T, C):
        """Pair x_s of channel c; positions past T and channels past C are the identity."""
        if s >= T or c >= C:
            return nbdt(ID_A), nbdt(ID_B)
        if reverse:
            t = T - 1 - s
            coef = x1[bb, t + 1, c] if t + 1 < T else nbdt(0.0)  # g_{T+1} = 0: any coefficient would do
            return coef, x2[bb, t, c]
        return x1[bb, s, c], x2[bb, s, c]

    @cuda.jit(device=True, inline=True)
    def block_coords(C, T, n_iter):
        """(bb, seg, c0): blocks are numbered channel tile fastest, then segment, then batch."""
        n_tiles = (C + CW - 1) // CW
        n_seg = ((T + L - 1) // L + n_iter - 1) // n_iter
        k = cuda.blockIdx.x
        t = k % n_tiles
        k //= n_tiles
        return k // n_seg, k % n_seg, t * CW

    @cuda.jit(device=True, inline=True)
    def warp_scan(A, H, tid, tyw, hs_a, hs_b):
        """Steps 3: inclusive and exclusive prefix of the thread's pair among the P time-threads of its lane
        in its warp. Every thread of the block must call this (barriers and full-mask shuffles)."""
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

    @cuda.jit(device=True, inline=True)
    def chunk_prefix(x1, x2, sa, sb, hs_a, hs_b, wa, wb, ra, rb, bb, s0, c0, cx, ty, T, C):
        """Steps 1-4 for the chunk starting at position s0. Fills ra, rb with the thread's K pairs; returns
        the thread's exclusive prefix (ea, eb) and inclusive prefix (ia, ib) within the chunk."""
        tid = cx + CW * ty
        # 1. stage. The previous chunk's readers of sa / sb (its store phase) must be done.
        cuda.syncthreads()
        for k in range(K):
            e = tid + k * NT
            p = e // CW
            xa, xb = load(x1, x2, bb, s0 + p, c0 + (e - p * CW), T, C)
            sa[_pad(e)] = xa
            sb[_pad(e)] = xb
        # The staged chunk must be complete before threads read steps that other threads loaded.
        cuda.syncthreads()
        # 2. registers: K consecutive steps of channel cx
        A = nbdt(ID_A)
        H = nbdt(ID_B)
        for j in range(K):
            i = _pad((ty * K + j) * CW + cx)
            ra[j] = sa[i]
            rb[j] = sb[i]
            A, H = combine(A, H, ra[j], rb[j])
        # 3. warp
        lane = tid % WS
        IA, IH, ea, eb = warp_scan(A, H, tid, lane // CW, hs_a, hs_b)
        # 4. block: the last time-thread of each lane in each warp publishes the warp's total
        w = tid // WS
        if lane // CW == P - 1:
            wa[w * CW + cx] = IA
            wb[w * CW + cx] = IH
        # The warp totals must be visible before other warps combine them.
        cuda.syncthreads()
        pa = nbdt(ID_A)
        pb = nbdt(ID_B)
        for v in range(w):
            pa, pb = combine(pa, pb, wa[v * CW + cx], wb[v * CW + cx])
        ea, eb = combine(pa, pb, ea, eb)
        ia, ib = combine(pa, pb, IA, IH)
        return ea, eb, ia, ib

    @cuda.jit
    def reduce(x1, x2, n_iter, tot_a, tot_b):
        """Each segment's total (A, H) -> tot_a, tot_b of shape (B, n_seg, C)."""
        sa = cuda.shared.array(NS, nbdt)
        sb = cuda.shared.array(NS, nbdt)
        hs_a = cuda.shared.array(NT, nbdt)
        hs_b = cuda.shared.array(NT, nbdt)
        wa = cuda.shared.array(NT, nbdt)
        wb = cuda.shared.array(NT, nbdt)
        ra = cuda.local.array(K, nbdt)
        rb = cuda.local.array(K, nbdt)
        B, T, C = x2.shape
        bb, seg, c0 = block_coords(C, T, n_iter)
        cx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        ta = nbdt(ID_A)
        tb = nbdt(ID_B)
        for it in range(n_iter):
            s0 = (seg * n_iter + it) * L
            if s0 >= T:  # the same for the whole block: barriers stay uniform
                break
            _, _, ia, ib = chunk_prefix(x1, x2, sa, sb, hs_a, hs_b, wa, wb, ra, rb, bb, s0, c0, cx, ty, T, C)
            if ty == TW - 1:  # its inclusive prefix is the chunk's total
                ta, tb = combine(ta, tb, ia, ib)
        if ty == TW - 1 and c0 + cx < C:
            tot_a[bb, seg, c0 + cx] = ta
            tot_b[bb, seg, c0 + cx] = tb

    @cuda.jit(device=True, inline=True)
    def segment_start(carry, h0, has_h0, bb, seg, c, C):
        """The state entering a segment: the carried state S_{seg-1}, h0 (forward), or the identity's b."""
        if c < C and seg > 0:
            return carry[bb, seg - 1, c]
        if c < C and has_h0 and not reverse:
            return h0[bb, c]
        return nbdt(ID_B)

    @cuda.jit
    def scan(x1, x2, carry, h0, has_h0, n_iter, out, hsrc, db, dh0):
        """Rescan each segment from its carried state and write the result.

        Forward: x1 = a, x2 = b, out = h (hsrc, db, dh0 unused). Backward: x1 = a, x2 = dh, out = da,
        hsrc = the forward's h, db, dh0 as named."""
        sa = cuda.shared.array(NS, nbdt)
        sb = cuda.shared.array(NS, nbdt)
        hs_a = cuda.shared.array(NT, nbdt)
        hs_b = cuda.shared.array(NT, nbdt)
        wa = cuda.shared.array(NT, nbdt)
        wb = cuda.shared.array(NT, nbdt)
        st = cuda.shared.array(CW, nbdt)
        ra = cuda.local.array(K, nbdt)
        rb = cuda.local.array(K, nbdt)
        B, T, C = x2.shape
        bb, seg, c0 = block_coords(C, T, n_iter)
        cx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = cx + CW * ty
        if ty == 0:  # published by the first barrier of chunk_prefix
            st[cx] = segment_start(carry, h0, has_h0, bb, seg, c0 + cx, C)
        for it in range(n_iter):
            s0 = (seg * n_iter + it) * L
            if s0 >= T:  # uniform across the block
                break
            ea, eb, _, _ = chunk_prefix(x1, x2, sa, sb, hs_a, hs_b, wa, wb, ra, rb, bb, s0, c0, cx, ty, T, C)
            # 5. rescan from the state entering the chunk. sa is free: every thread passed the barrier after
            # the warp totals, so all register loads from sa are done.
            _, state = combine(ea, st[cx], ea, eb)
            for j in range(K):
                _, state = combine(ra[j], state, ra[j], rb[j])
                sa[_pad((ty * K + j) * CW + cx)] = state
            # The staged results must be complete before the coalesced store, and every thread must have read
            # st[cx] before it is replaced by the state leaving the chunk.
            cuda.syncthreads()
            if ty == TW - 1:
                st[cx] = state
            for k in range(K):
                e = tid + k * NT
                p = e // CW
                s = s0 + p
                c = c0 + e - p * CW
                if s < T and c < C:
                    v = sa[_pad(e)]
                    if not reverse:
                        out[bb, s, c] = v
                    else:
                        t = T - 1 - s
                        if t > 0:
                            h_prev = hsrc[bb, t - 1, c]
                        elif has_h0:
                            h_prev = h0[bb, c]
                        else:
                            h_prev = nbdt(0.0)
                        db[bb, t, c] = v
                        out[bb, t, c] = v * h_prev
                        if t == 0:
                            dh0[bb, c] = x1[bb, 0, c] * v

    return reduce, scan


def _carry(op, tot_a, tot_b, h0, has_h0, block, channel_tile, K, shuffle):
    """S_k, the state after segment k: the segment totals scanned by this same scan."""
    return forward(op, tot_a, tot_b, h0, has_h0, block, channel_tile, K, None, shuffle)


def forward(op, a, b, h0, has_h0, block, channel_tile, K, chunks_per_block, shuffle):
    """Device-level v3 forward scan of (B, T, C) device arrays; returns h (B, T, C) on the device."""
    B, T, C = a.shape
    CW, TW = tile(C, block, channel_tile)
    reduce, scan = _kernels(a.dtype, CW, TW, K, op, False, shuffle)
    n_iter, n_seg, n_blocks = plan(a.shape, CW, TW, K, chunks_per_block)
    if n_seg > 1:
        tot_a = cuda.device_array((B, n_seg, C), dtype=a.dtype)
        tot_b = cuda.device_array((B, n_seg, C), dtype=a.dtype)
        reduce[n_blocks, (CW, TW)](a, b, n_iter, tot_a, tot_b)
        carry = _carry(op, tot_a, tot_b, h0, has_h0, block, channel_tile, K, shuffle)
    else:
        carry = _dummy(3, a.dtype)
    h = cuda.device_array((B, T, C), dtype=a.dtype)
    d3, d2 = _dummy(3, a.dtype), _dummy(2, a.dtype)
    scan[n_blocks, (CW, TW)](a, b, carry, h0, has_h0, n_iter, h, d3, d3, d2)
    return h


def backward(a, h, dh, h0, has_h0, block, channel_tile, K, chunks_per_block, shuffle):
    """Device-level v3 backward: the reverse scan of (a_{t+1}, dh_t); returns (da, db, dh0) on the device."""
    B, T, C = a.shape
    CW, TW = tile(C, block, channel_tile)
    reduce, scan = _kernels(a.dtype, CW, TW, K, "linear", True, shuffle)
    n_iter, n_seg, n_blocks = plan(a.shape, CW, TW, K, chunks_per_block)
    if n_seg > 1:
        tot_a = cuda.device_array((B, n_seg, C), dtype=a.dtype)
        tot_b = cuda.device_array((B, n_seg, C), dtype=a.dtype)
        reduce[n_blocks, (CW, TW)](a, dh, n_iter, tot_a, tot_b)
        # Totals are in scan (reversed-time) order, so the carries are a forward scan from 0, as in v2.
        carry = _carry("linear", tot_a, tot_b, _dummy(2, a.dtype), False, block, channel_tile, K, shuffle)
    else:
        carry = _dummy(3, a.dtype)
    da = cuda.device_array((B, T, C), dtype=a.dtype)
    db = cuda.device_array((B, T, C), dtype=a.dtype)
    dh0 = cuda.device_array((B, C), dtype=a.dtype)
    scan[n_blocks, (CW, TW)](a, dh, carry, h0, has_h0, n_iter, da, h, db, dh0)
    return da, db, dh0
