"""v3 of the linear-recurrence scan, its kernels: a chunked scan with thread coarsening and a warp-level combine.

Glossary as in ``scan.py``: B batch, T time, C channels, arrays (B, T, C) with channels contiguous; the pairs
x_s = (a_s, b_s) are combined with (a1, b1) ∘ (a2, b2) = (a1 a2, a2 b1 + b2) (or its log-space form), and
the state after step s is h_s = A_s h_in + H_s for the prefix (A_s, H_s) = x_1 ∘ ... ∘ x_s. The host side
(options, plans, the carries' launches) is ``chunked.py``.

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
once (3 array passes, the minimum). With few channels and long T the sequence is split into segments, joined
by one of two carries (keyword ``carry``):

    "reduce"    (the default) as v2 joins its chunks, reduce-then-scan: ``reduce`` (steps 1-4) writes each
                segment's total, the totals are scanned from h0 by this same scan (recursively), and ``scan``
                reruns each segment from its carried state: 5 array passes.
    "lookback"  a single pass by decoupled look-back (Merrill & Garland 2016, "Single-pass Parallel Prefix
                Scan with Decoupled Look-back"): 3 array passes. Each segment is one chunk (a block keeps only
                one chunk on chip, in registers, between its look-back and its rescan), so the grid has one
                block per (chunk, b, channel tile). A block takes its tile id from an atomic counter, in the
                order chunk, b, channel tile (dynamic tile ids: a block only ever waits on tiles taken before
                its own, by blocks already running, so no schedule can deadlock). Per (b, chunk, channel) it
                keeps a descriptor: a flag (0, AGGREGATE, INCLUSIVE) and, in separate arrays, the chunk's
                aggregate (A, H) and its inclusive value, the state leaving the chunk. After steps 1-4 the
                thread ty = TW - 1 of each lane publishes the aggregate, then looks back over chunk-1, chunk-2,
                ...: it waits while a flag is 0, combines each AGGREGATE in front of the pairs met so far, and
                stops at the first INCLUSIVE (or at h0 past the first chunk); the combined pair applied to that
                state is the state entering the chunk. After step 5 it publishes the state leaving the chunk
                (the number it writes as h at the chunk's last step) as INCLUSIVE.
                Memory ordering (no packing: a float64 pair is 128 bits, too wide for one atomic word with
                its flag): the writer stores the values, ``cuda.threadfence()``, then sets the flag with
                ``cuda.atomic.exch``; the reader reads the flag with ``cuda.atomic.add(flags, i, 0)`` (an
                atomic, so neither a stale cached copy nor a load the compiler could hoist out of the spin),
                then ``cuda.threadfence()``, then plain loads of the values: the fence-then-flag and
                flag-then-fence pairs of the PTX memory model. Aggregate and inclusive values live apart so that
                publishing INCLUSIVE never overwrites a value a reader has just taken for an AGGREGATE.
                The descriptors cost 3 words and a flag per (b, chunk, channel), about 4 / L of one array,
                and the flags are zeroed before each launch (here by a copy from the host).
                Its arithmetic is simulator-tested (it is timed on GPUs, README): the simulator runs blocks one after another, so
                no spin ever waits there; the test hook ``INCLUSIVE_EVERY`` withholds INCLUSIVE from some
                chunks so that look-backs combine AGGREGATE-only predecessors, and ``LOOKBACK_TRACE`` records
                the flags and how far each look-back went.

Backward: the same kernels in reverse time with the coefficient shifted (``_device.pair_loader``), the store
phase writing dL/db_t = g_t, dL/da_t = g_t h_{t-1} and dL/dh0 = a_1 g_1 (``_device.grads_writer``).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numba
import numpy as np
from numba import cuda

from ._device import (LOG_NUM_BANKS, NB_TYPES, chunk_scratch, combine_linear, combine_log, grads_writer, kernel,
                      make_start_state, pad, pair_loader, warp_scanner)

WARP = 32
AGGREGATE, INCLUSIVE = 1, 2        # look-back flags (0: nothing published yet)


def shared_words(NT, K):
    """Padded length of one staging array: L CW = NT K elements, one spare word every 32."""
    n = NT * K
    return n + (n >> LOG_NUM_BANKS)


@lru_cache(maxsize=None)
def kernels(dtype, CW, TW, K, op, reverse, shuffle):
    """(reduce, scan, lookback) for one configuration; shared-array sizes, K and the warp path are compile-time."""
    nbdt = NB_TYPES[np.dtype(dtype)]
    combine = combine_linear if op == "linear" else combine_log
    ID_A, ID_B = (1.0, 0.0) if op == "linear" else (0.0, -math.inf)
    NT = CW * TW                 # threads per block
    WS = min(WARP, NT)           # threads per warp (a smaller "warp" when the block is smaller than one)
    P = WS // CW                 # time-threads of one lane inside a warp
    L = TW * K                   # steps per chunk
    NS = shared_words(NT, K)
    load = pair_loader(dtype, op, reverse)
    write_grads = grads_writer(dtype)
    warp_scan = warp_scanner(dtype, op, CW, P, shuffle)    # step 3
    start_state = make_start_state(dtype, op, reverse)
    scratch = chunk_scratch(dtype, NT, K, shuffle)

    @cuda.jit(device=True, inline=True)
    def block_coords(x2, n_iter):
        """(bb, seg, c0, cx, ty, T, C): this block's batch row, segment and first channel (blocks are numbered
        channel tile fastest, then segment, then batch), this thread's lane and time-thread, and x2's sizes."""
        B, T, C = x2.shape
        n_tiles = (C + CW - 1) // CW
        n_seg = ((T + L - 1) // L + n_iter - 1) // n_iter
        k = cuda.blockIdx.x
        t = k % n_tiles
        k //= n_tiles
        return k // n_seg, k % n_seg, t * CW, cuda.threadIdx.x, cuda.threadIdx.y, T, C

    @cuda.jit(device=True, inline=True)
    def chunk_arrays():
        """The arrays every kernel here works on, declared once (inlined, so each kernel gets its own): the
        staged chunk sa, sb (shared), the warp scan's hs_a, hs_b (shared, used without shuffles), the warp
        totals wa, wb (shared) and the thread's K pairs ra, rb (registers)."""
        sa = cuda.shared.array(NS, nbdt)
        sb = cuda.shared.array(NS, nbdt)
        ra, rb, hs_a, hs_b, wa, wb = scratch()
        return sa, sb, hs_a, hs_b, wa, wb, ra, rb

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
            sa[pad(e)] = xa
            sb[pad(e)] = xb
        # The staged chunk must be complete before threads read steps that other threads loaded.
        cuda.syncthreads()
        # 2. registers: K consecutive steps of channel cx
        A = nbdt(ID_A)
        H = nbdt(ID_B)
        for j in range(K):
            i = pad((ty * K + j) * CW + cx)
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

    @kernel(NT)
    def reduce(x1, x2, n_iter, tot_a, tot_b):
        """Each segment's total (A, H) -> tot_a, tot_b of shape (B, n_seg, C)."""
        sa, sb, hs_a, hs_b, wa, wb, ra, rb = chunk_arrays()
        bb, seg, c0, cx, ty, T, C = block_coords(x2, n_iter)
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
        """The state entering a segment: the carried state S_{seg-1}, or ``start_state`` (h0 or the identity's
        b: h = 0, g = 0)."""
        if c < C and seg > 0:
            return carry[bb, seg - 1, c]
        return start_state(h0, has_h0, bb, c, C)

    @cuda.jit(device=True, inline=True)
    def rescan(ra, rb, ea, eb, h_in, sa, cx, ty):
        """Step 5: the thread's K states from the state h_in entering the chunk, staged in sa; returns the
        last. The caller guarantees that every thread is done reading sa (chunk_prefix's last barrier)."""
        _, state = combine(ea, h_in, ea, eb)
        for j in range(K):
            _, state = combine(ra[j], state, ra[j], rb[j])
            sa[pad((ty * K + j) * CW + cx)] = state
        return state

    @cuda.jit(device=True, inline=True)
    def store(x1, sa, h0, has_h0, out, hsrc, db, dh0, bb, s0, c0, tid, T, C):
        """The coalesced store of the chunk staged in sa (after a barrier): h, or the backward's gradients."""
        for k in range(K):
            e = tid + k * NT
            p = e // CW
            s = s0 + p
            c = c0 + e - p * CW
            if s < T and c < C:
                v = sa[pad(e)]
                if not reverse:
                    out[bb, s, c] = v
                else:
                    write_grads(x1, hsrc, h0, has_h0, out, db, dh0, bb, T - 1 - s, c, v)

    @kernel(NT)
    def scan(x1, x2, carry, h0, has_h0, n_iter, out, hsrc, db, dh0):
        """Rescan each segment from its carried state and write the result.

        Forward: x1 = a, x2 = b, out = h (hsrc, db, dh0 unused). Backward: x1 = a, x2 = dh, out = da,
        hsrc = the forward's h, db, dh0 as named."""
        sa, sb, hs_a, hs_b, wa, wb, ra, rb = chunk_arrays()
        st = cuda.shared.array(CW, nbdt)   # the state carried from chunk to chunk, one per lane
        bb, seg, c0, cx, ty, T, C = block_coords(x2, n_iter)
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
            state = rescan(ra, rb, ea, eb, st[cx], sa, cx, ty)
            # The staged results must be complete before the coalesced store, and every thread must have read
            # st[cx] before it is replaced by the state leaving the chunk.
            cuda.syncthreads()
            if ty == TW - 1:
                st[cx] = state
            store(x1, sa, h0, has_h0, out, hsrc, db, dh0, bb, s0, c0, tid, T, C)

    @cuda.jit(device=True, inline=True)
    def look_back(flags, agg_a, agg_b, inc, h0, has_h0, bb, chunk, c, C, walked, trace):
        """The state entering chunk ``chunk`` of channel c, from its predecessors' descriptors.

        Walks j = chunk-1, chunk-2, ...: spins while descriptor j is unpublished (flag 0), combines an
        AGGREGATE's (A_j, H_j) in front of the pairs met so far, and stops at the first INCLUSIVE (the state
        S_j leaving chunk j) or at the start of the sequence (h0 or the identity); then applies the combined
        pair to that state. Only blocks that took a smaller tile id are waited on."""
        pa = nbdt(ID_A)
        pb = nbdt(ID_B)
        s = start_state(h0, has_h0, bb, c, C)
        j = chunk - 1
        n = 0
        while j >= 0:
            # An atomic read (at L2): never a stale cached copy, and the compiler cannot hoist it out of the loop.
            f = cuda.atomic.add(flags, (bb, j, c), 0)
            if f == 0:
                cuda.nanosleep(32)   # back off while the predecessor works, as CUB does (sm_70 and later)
                continue
            # Acquire: with the writer's fence before its flag, the values written before the flag are seen.
            cuda.threadfence()
            if f == INCLUSIVE:
                s = inc[bb, j, c]
                break
            pa, pb = combine(agg_a[bb, j, c], agg_b[bb, j, c], pa, pb)
            n += 1
            j -= 1
        if trace:
            walked[bb, chunk, c] = n
        _, s = combine(pa, s, pa, pb)
        return s

    @kernel(NT)
    def lookback(x1, x2, h0, has_h0, out, hsrc, db, dh0, counter, flags, agg_a, agg_b, inc, inclusive_every,
                 walked, trace):
        """Single-pass scan with decoupled look-back (Merrill & Garland 2016): one chunk per block.

        Arguments as ``scan``, plus the descriptors of every (b, chunk, channel), each (B, n_chunks, C):
        flags (int32, zeros on entry; 0 none, AGGREGATE, INCLUSIVE), agg_a, agg_b (the chunk's pair) and
        inc (the state leaving the chunk), kept apart so that publishing the inclusive state never overwrites
        a value a reader takes for an aggregate; counter (int32 (1,), zero on entry) hands out tile ids.
        ``inclusive_every`` (1 in use; a test hook) publishes INCLUSIVE only for chunks k with
        (k + 1) % inclusive_every == 0. With ``trace``, walked[b, k, c] counts the aggregates k's look-back
        combined."""
        sa, sb, hs_a, hs_b, wa, wb, ra, rb = chunk_arrays()
        st = cuda.shared.array(CW, nbdt)   # the state entering the chunk, one per lane
        tile_id = cuda.shared.array(1, numba.int32)
        B, T, C = x2.shape
        cx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = cx + CW * ty
        # Dynamic tile ids: tile k is taken only after tiles 0..k-1 were taken by blocks already running, so
        # a look-back never waits on a block that has not started, whatever order the blocks are scheduled in.
        if tid == 0:
            tile_id[0] = cuda.atomic.add(counter, 0, 1)
        # Every thread needs the tile id before it loads.
        cuda.syncthreads()
        k = tile_id[0]
        n_tiles = (C + CW - 1) // CW
        c0 = (k % n_tiles) * CW
        k //= n_tiles
        bb = k % B
        chunk = k // B  # chunk slowest: a row's predecessor was taken B * n_tiles ids earlier, not just before
        s0 = chunk * L
        c = c0 + cx
        ea, eb, ia, ib = chunk_prefix(x1, x2, sa, sb, hs_a, hs_b, wa, wb, ra, rb, bb, s0, c0, cx, ty, T, C)
        if ty == TW - 1:  # its inclusive prefix (ia, ib) is the chunk's aggregate
            if c < C:
                agg_a[bb, chunk, c] = ia
                agg_b[bb, chunk, c] = ib
                # Release: the values must be visible device-wide before the flag that announces them.
                cuda.threadfence()
                cuda.atomic.exch(flags, (bb, chunk, c), AGGREGATE)
                st[cx] = look_back(flags, agg_a, agg_b, inc, h0, has_h0, bb, chunk, c, C, walked, trace)
            else:
                st[cx] = nbdt(ID_B)
        # The carried state must be visible to every time-thread of its lane.
        cuda.syncthreads()
        state = rescan(ra, rb, ea, eb, st[cx], sa, cx, ty)
        if ty == TW - 1 and c < C and (chunk + 1) % inclusive_every == 0:
            inc[bb, chunk, c] = state  # the state leaving the chunk: the same number this block writes as h
            cuda.threadfence()
            cuda.atomic.exch(flags, (bb, chunk, c), INCLUSIVE)
        # The staged results must be complete before the coalesced store.
        cuda.syncthreads()
        store(x1, sa, h0, has_h0, out, hsrc, db, dh0, bb, s0, c0, tid, T, C)

    return reduce, scan, lookback
