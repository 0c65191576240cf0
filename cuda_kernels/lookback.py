"""v4 of the linear-recurrence scan: one launch, one pass, decoupled look-back, the thread's steps in registers.

Glossary as in ``scan.py``: B batch, T time, C channels, arrays (B, T, C) with channels contiguous; pairs
(a1, b1) ∘ (a2, b2) = (a1 a2, a2 b1 + b2) (or the log-space form). Written for the few-channel regime (a long
sequence with too few channels to give one thread per channel enough work in flight), where the bound is
reading a and b once and writing h once: 3 array passes, which v2 (5 passes) and v3's reduce carry (5) cannot
reach, and which v3's look-back carry reaches on paper but not on the H200 (0.15 of a copy at (1, 2^20, 256),
``bench/results/gpu_check_H200_2026-11-26_tables.txt``). v4 is that look-back with what v3's lacks:

    - one launch per call: the descriptors' flags carry an epoch (``EPOCH``, one more per launch) instead of
      being zeroed by two extra launches, and tile ids are ``blockIdx.x`` (as CUB's ``DeviceScan`` does: the
      hardware starts blocks in index order, so a block only waits on blocks that started before it) instead
      of an atomic counter;
    - the state leaving a chunk (INCLUSIVE) is published as soon as the look-back has found the state entering
      it, before the rescan and the stores (v3 published it after them);
    - the look-back reads a window of TW predecessors at once, one per time-thread (as CUB's look-back reads
      32 tiles with one warp), instead of one dependent atomic read per predecessor by one thread per lane;
      the first H100 run of v4 (``bench/results/gpu_round2_H100_2026-11-27_run1_table.txt``) still walked back one
      chunk at a time and reached 0.47 of a copy at (1, 2^20, 256) and 226 us at (1, 2^20, 1);
    - no staging through shared memory: a thread loads its K consecutive steps of one channel straight into
      registers (with CW = 32 channel lanes each load of a warp is one 128-byte line), scans them there, and
      writes h from registers.

A block is CW channel lanes x TW time-threads (NT = CW TW threads, thread id cx + CW ty); a thread owns K
consecutive steps, a chunk is L = TW K steps of CW channels, one chunk per block. Per block:

    1. load + reduce   thread (cx, ty) loads steps s0 + ty K + j, j < K, of channel c0 + cx into registers and
                       reduces them to one pair;
    2. warp            the P = 32 / CW time-threads of a lane inside one warp scan their pairs (Hillis-Steele,
                       ``cuda.shfl_up_sync``, or the same steps in shared memory, ``shuffle=False``, which the
                       simulator runs);
    3. block           warp totals through shared memory: each thread gets its exclusive prefix in the chunk,
                       and the last time-thread of each lane holds the chunk's aggregate;
    4. look-back       the last time-thread of each lane publishes the aggregate (flag 2 EPOCH); then, in
                       rounds, time-thread ty reads chunk base - (TW - 1 - ty) of its lane (spinning while its
                       flag is older than this epoch): an INCLUSIVE chunk (flag 2 EPOCH + 1) or the sequence's
                       start is the pair (0, state), which absorbs everything before it, an AGGREGATE its pair;
                       the window's pairs are combined in time order by the same lane scan as step 2-3, in
                       front of what earlier rounds found, until every lane has met a state; the state leaving
                       the chunk is published (INCLUSIVE) at once;
    5. rescan          each thread applies its prefix to that state and runs its K steps again from registers,
                       writing h (or the backward's gradients) directly.

Memory ordering as v3's look-back (``chunked_kernels.py``): values, ``threadfence``, then the flag by an atomic
exchange; the flag read by an atomic (never a stale cached copy), ``threadfence``, then the values. Aggregate
and inclusive values live in separate arrays.

Backward: the same kernel in reverse time with the shifted coefficient (``_device.pair_loader``), writing
dL/da, dL/db, dL/dh0 (``_device.grads_writer``); log space: the log operator.

Descriptors (flags int32, agg_a, agg_b, inc; each (B, n_chunks, C)) come from a ``Workspace`` when given; the
flags are zeroed once, when they are allocated, and every later launch's epoch is larger than any value they
hold, so no launch has to clear them.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numba
import numpy as np
from numba import cuda

from ._device import (NB_TYPES, chunk_scratch, combine_linear, combine_log, grads_writer, kernel, make_start_state,
                      pair_loader, warp_scanner, zero_int32)
from .workspace import check_workspace, dummy

__all__ = ["forward", "backward", "tile", "check_options", "DEFAULT_BLOCK", "DEFAULT_STEPS", "EPOCH"]


WARP = 32
DEFAULT_BLOCK = 256     # threads per block
# K, steps per thread held in registers, by direction: the fastest (block, K) of v4's rows in the H100 run of
# 2026-11-27 (``bench/results/gpu_round2_H100_2026-11-27_scan_rows.jsonl``, float32, fraction of a same-run numba
# copy at (1, 2^20, 256) / (1, 2^20, 16); block 256 throughout):
#     forward   K = 8: 0.463 / 0.442,  K = 16: 0.634 / 0.555,  K = 32: 0.714 / 0.664
#     backward  K = 16: 0.610 / 0.511,  K = 32: 0.528 / 0.326
# (blocks 128, 512, 1024 were slower at both shapes; at (1, 2^20, 1) block 1024 K = 8 forward, 225 us, and block
# 512 K = 16 backward, 270 us, beat the defaults' 248 us and 405 us).
DEFAULT_STEPS = {"forward": 32, "backward": 16}
MAX_STEPS = 32
EPOCH = [0]             # launches so far (a list: mutable module state); flags hold 2 epoch (+1 for INCLUSIVE)
# Test hook (tests/test_cuda_scan_v4.py): only chunk 0 and chunks k with (k + 1) % INCLUSIVE_EVERY == 0 publish
# INCLUSIVE, so that the simulator (which runs blocks in order, every predecessor finished) shows look-backs
# that combine AGGREGATE-only chunks over several windows. 1: every chunk does (the value in use).
INCLUSIVE_EVERY = 1
EPOCH_LIMIT = 2 ** 30   # 2 epoch + 1 stays an int32 (a process that launches v4 this often gets a RuntimeError)


def tile(C, block):
    """(CW, TW): CW channel lanes (a power of two <= min(32, block), the fewest covering C) x TW time-threads."""
    CW = 1
    while CW < min(C, WARP, block):
        CW *= 2
    return CW, block // CW


def check_options(block, steps_per_thread, shuffle, kind="forward"):
    """(block, K, shuffle) validated; None gives the defaults (K: ``DEFAULT_STEPS[kind]``, kind "forward" or
    "backward"; shuffle: on a GPU yes, in the simulator no)."""
    block = DEFAULT_BLOCK if block is None else block
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1 or block > 1024 \
            or block & (block - 1):
        raise ValueError(f"block must be a power of two in [1, 1024], got {block!r}")
    K = DEFAULT_STEPS[kind] if steps_per_thread is None else steps_per_thread
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or not 1 <= K <= MAX_STEPS:
        raise ValueError(f"steps_per_thread must be an integer in [1, {MAX_STEPS}], got {steps_per_thread!r}")
    if shuffle is None:
        shuffle = not numba.config.ENABLE_CUDASIM
    if shuffle:
        from .chunked import shuffle_available

        if not shuffle_available():
            raise ValueError("shuffle=True needs warp shuffles, which the CUDA simulator does not have")
        if block < WARP:
            raise ValueError(f"shuffle=True needs whole warps: block must be >= {WARP}, got {block}")
    return int(block), int(K), bool(shuffle)


@lru_cache(maxsize=None)
def _kernel(dtype, CW, TW, K, op, reverse, shuffle):
    nbdt = NB_TYPES[np.dtype(dtype)]
    combine = combine_linear if op == "linear" else combine_log
    ID_A, ID_B = (1.0, 0.0) if op == "linear" else (0.0, -math.inf)
    ABSORB = 0.0 if op == "linear" else -math.inf   # the coefficient of a known state: (ABSORB, s) ∘ x keeps s's part
    NT = CW * TW
    WS = min(WARP, NT)      # threads per warp (smaller when the block is)
    P = WS // CW            # time-threads of one lane inside a warp
    NW = NT // WS           # warps per block
    L = TW * K
    load = pair_loader(dtype, op, reverse)
    write_grads = grads_writer(dtype)
    warp_scan = warp_scanner(dtype, op, CW, P, shuffle)
    start_state = make_start_state(dtype, op, reverse)
    scratch = chunk_scratch(dtype, NT, K, shuffle)

    @cuda.jit(device=True, inline=True)
    def lane_scan(A, H, tid, cx, hs_a, hs_b, wa, wb):
        """Over the TW time-threads of each lane, in ty order: the thread's exclusive (ea, eb) and inclusive
        (ia, ib) prefix and the lane's total (ta, tb). Every thread of the block must call it (barriers and
        full-mask shuffles); it starts with a barrier, so its shared arrays can be reused call after call."""
        cuda.syncthreads()   # the previous call's readers of hs_a, hs_b, wa, wb are done
        lane = tid % WS
        tyw = lane // CW
        w = tid // WS
        A, H, ea, eb = warp_scan(A, H, tid, tyw, hs_a, hs_b)
        if tyw == P - 1:
            wa[w * CW + cx] = A
            wb[w * CW + cx] = H
        cuda.syncthreads()   # the warp totals are visible
        pa = nbdt(ID_A)
        pb = nbdt(ID_B)
        ta = nbdt(ID_A)
        tb = nbdt(ID_B)
        for v in range(NW):
            xa = wa[v * CW + cx]
            xb = wb[v * CW + cx]
            if v < w:
                pa, pb = combine(pa, pb, xa, xb)
            ta, tb = combine(ta, tb, xa, xb)
        ea, eb = combine(pa, pb, ea, eb)
        ia, ib = combine(pa, pb, A, H)
        return ea, eb, ia, ib, ta, tb

    @kernel(NT)
    def scan(x1, x2, h0, has_h0, out, hsrc, db, dh0, flags, agg_a, agg_b, inc, epoch, inclusive_every):
        """Forward: x1 = a, x2 = b, out = h. Backward: x1 = a, x2 = dh, out = da, hsrc = the forward's h.
        ``inclusive_every`` (1 in use; a test hook): chunks k > 0 with (k + 1) % inclusive_every != 0 publish
        only their aggregate, so that look-backs must combine aggregates over several rounds."""
        ra, rb, hs_a, hs_b, wa, wb = scratch()
        found = cuda.shared.array(CW, numba.int32)
        B, T, C = x2.shape
        cx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = cx + CW * ty
        k = cuda.blockIdx.x
        n_tiles = (C + CW - 1) // CW
        c0 = (k % n_tiles) * CW
        k //= n_tiles
        bb = k % B
        chunk = k // B      # chunk slowest: a block's predecessor in time started B * n_tiles blocks earlier
        c = c0 + cx
        s0 = chunk * L + ty * K
        if ty == 0:
            found[cx] = 0    # visible after lane_scan's first barrier
        # 1. load + reduce
        A = nbdt(ID_A)
        H = nbdt(ID_B)
        for j in range(K):
            xa, xb = load(x1, x2, bb, s0 + j, c, T, C)
            ra[j] = xa
            rb[j] = xb
            A, H = combine(A, H, xa, xb)
        # 2-3. the thread's exclusive prefix in the chunk and the chunk's aggregate (ta, tb), in every thread
        ea, eb, _, _, ta, tb = lane_scan(A, H, tid, cx, hs_a, hs_b, wa, wb)
        agg_flag = 2 * epoch
        if ty == TW - 1 and c < C and chunk > 0:
            agg_a[bb, chunk, c] = ta
            agg_b[bb, chunk, c] = tb
            cuda.threadfence()   # release: the values before the flag
            cuda.atomic.exch(flags, (bb, chunk, c), agg_flag)
        # 4. look-back, the whole block at once: in each round thread ty reads chunk base - (TW - 1 - ty) of its
        # lane (a window of TW chunks, oldest at ty = 0), as CUB's warp reads 32 tiles at once. A chunk that
        # published INCLUSIVE, or the sequence's start, is the pair (ABSORB, state): nothing before it counts,
        # so the window's total in time order (lane_scan) is exact wherever it stops. The rounds go on until
        # every lane has met such a pair; q then holds (ABSORB, the state entering this chunk).
        qa = nbdt(ID_A)
        qb = nbdt(ID_B)
        done = c >= C
        base = chunk - 1
        while True:
            xa = nbdt(ID_A)
            xb = nbdt(ID_B)
            if not done:
                j = base - (TW - 1 - ty)
                if j < 0:
                    if j == -1:   # the sequence's start: only the thread just past it carries the state
                        xa = nbdt(ABSORB)
                        xb = start_state(h0, has_h0, bb, c, C)
                        found[cx] = 1
                else:
                    f = cuda.atomic.add(flags, (bb, j, c), 0)
                    while f < agg_flag:   # nothing published in this launch yet
                        cuda.nanosleep(32)
                        f = cuda.atomic.add(flags, (bb, j, c), 0)
                    cuda.threadfence()   # acquire: the flag before the values
                    if f > agg_flag:
                        xa = nbdt(ABSORB)
                        xb = inc[bb, j, c]
                        found[cx] = 1
                    else:
                        xa = agg_a[bb, j, c]
                        xb = agg_b[bb, j, c]
            _, _, _, _, wa_t, wb_t = lane_scan(xa, xb, tid, cx, hs_a, hs_b, wa, wb)
            if not done:
                qa, qb = combine(wa_t, wb_t, qa, qb)
                done = found[cx] != 0
            base -= TW
            if cuda.syncthreads_and(1 if done else 0):
                break
        s = qb
        if ty == TW - 1 and c < C and (chunk == 0 or (chunk + 1) % inclusive_every == 0):
            # the state leaving this chunk, published before the rescan so that successors stop here
            _, out_state = combine(ta, s, ta, tb)
            inc[bb, chunk, c] = out_state
            cuda.threadfence()
            cuda.atomic.exch(flags, (bb, chunk, c), agg_flag + 1)
        # 5. rescan from registers, stores straight to device memory
        _, state = combine(ea, s, ea, eb)
        if c < C:
            for j in range(K):
                _, state = combine(ra[j], state, ra[j], rb[j])
                t = s0 + j
                if t < T:
                    if not reverse:
                        out[bb, t, c] = state
                    else:
                        write_grads(x1, hsrc, h0, has_h0, out, db, dh0, bb, T - 1 - t, c, state)

    return scan


def _descriptors(workspace, shape, dtype):
    """(flags, agg_a, agg_b, inc) for (B, n_chunks, C); fresh flags are zeroed (once per buffer)."""
    key = ("v4 descriptors", tuple(int(v) for v in shape), np.dtype(dtype).str)
    bufs = None if workspace is None else workspace._buffers.get(key)
    fresh = bufs is None
    if fresh:
        bufs = (cuda.device_array(shape, dtype=np.int32),) + tuple(cuda.device_array(shape, dtype=dtype)
                                                                   for _ in range(3))
        zero_int32(bufs[0])
        if workspace is not None:
            workspace._buffers[key] = bufs
    return bufs, fresh


def _next_epoch():
    """The next launch's epoch: larger than any flag an earlier launch left in any buffer."""
    if EPOCH[0] + 1 >= EPOCH_LIMIT:
        raise RuntimeError(f"v4 has run {EPOCH_LIMIT - 1} launches in this process: its flag epochs are spent")
    EPOCH[0] += 1
    return EPOCH[0]


def _run(op, reverse, x1, x2, h0, has_h0, outs, block, K, shuffle, workspace):
    B, T, C = x1.shape
    CW, TW = tile(C, block)
    kern = _kernel(x1.dtype, CW, TW, K, op, reverse, shuffle)
    n_chunks = -(-T // (TW * K))
    n_blocks = n_chunks * B * (-(-C // CW))
    (flags, agg_a, agg_b, inc), fresh = _descriptors(workspace, (B, n_chunks, C), x1.dtype)
    epoch = _next_epoch()
    kern[n_blocks, (CW, TW)](x1, x2, h0, has_h0, *outs, flags, agg_a, agg_b, inc, np.int32(epoch),
                             np.int32(INCLUSIVE_EVERY))


def forward(op, a, b, h0, has_h0, block=None, steps_per_thread=None, shuffle=None, h=None, workspace=None):
    """Device-level v4 forward of (B, T, C) device arrays into h (allocated if None); returns h."""
    check_workspace(workspace)
    block, K, shuffle = check_options(block, steps_per_thread, shuffle)
    h = cuda.device_array(a.shape, dtype=a.dtype) if h is None else h
    if h0 is None:
        h0 = dummy(2, a.dtype, workspace)
    d3, d2 = dummy(3, a.dtype, workspace), dummy(2, a.dtype, workspace)
    _run(op, False, a, b, h0, has_h0, (h, d3, d3, d2), block, K, shuffle, workspace)
    return h


def backward(a, h, dh, h0, has_h0, block=None, steps_per_thread=None, shuffle=None, grads=None, workspace=None):
    """Device-level v4 backward: (da, db, dh0) (allocated if None) from the reverse scan of (a_{t+1}, dh_t)."""
    check_workspace(workspace)
    block, K, shuffle = check_options(block, steps_per_thread, shuffle, "backward")
    B, T, C = a.shape
    if grads is None:
        grads = (cuda.device_array((B, T, C), dtype=a.dtype), cuda.device_array((B, T, C), dtype=a.dtype),
                 cuda.device_array((B, C), dtype=a.dtype))
    if h0 is None:
        h0 = dummy(2, a.dtype, workspace)
    da, db, dh0 = grads
    _run("linear", True, a, dh, h0, has_h0, (da, h, db, dh0), block, K, shuffle, workspace)
    return da, db, dh0
