"""v2 "blelloch" kernels (``scan.linear_scan(..., method="blelloch")``): the work-efficient scan over the pairs
(a_t, b_t) in shared memory, a block of (CW, TW) threads per chunk of L = 2 TW steps x CW channels, and the
reduce / scan passes of reduce-then-scan (``scan.py``'s docstring derives them). The host side (tiling,
the pass over chunk totals, launches) is in ``blelloch_host.py``."""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import cuda

from ._device import LOG_NUM_BANKS, NB_TYPES, combine_linear, combine_log, grads_writer, kernel, pad, pair_loader


@lru_cache(maxsize=None)
def blelloch_kernels(dtype, CW, TW, op, reverse):
    """Compile-time constants: the shared-array sizes depend on (CW, TW) and its type on dtype.

    ``reverse=False`` loads x_s = (a_s, b_s) at time t = s; ``reverse=True`` (the backward) loads
    x_s = (a_{t+1}, dh_t) at time t = T-1-s, the adjoint recurrence g_t = a_{t+1} g_{t+1} + dh_t.
    """
    nbdt = NB_TYPES[np.dtype(dtype)]
    combine = combine_linear if op == "linear" else combine_log
    ID_A, ID_B = (1.0, 0.0) if op == "linear" else (0.0, -math.inf)
    L = 2 * TW                        # time steps per chunk
    N = L * CW
    NS = N + (N >> LOG_NUM_BANKS)     # padded shared size

    load = pair_loader(dtype, op, reverse)

    @cuda.jit(device=True, inline=True)
    def block_coords(x2):
        """(bb, chunk, c, cx, ty, T, C): this block's batch row and chunk (blocks are numbered channel tile
        fastest, then chunk, then batch), this thread's channel, lane and time-thread, and x2's sizes."""
        B, T, C = x2.shape
        n_tiles = (C + CW - 1) // CW
        n_chunks = (T + L - 1) // L
        k = cuda.blockIdx.x
        tile = k % n_tiles
        k //= n_tiles
        cx = cuda.threadIdx.x
        return k // n_chunks, k % n_chunks, tile * CW + cx, cx, cuda.threadIdx.y, T, C

    @cuda.jit(device=True, inline=True)
    def up_sweep(sa, sb, cx, ty):
        """Reduce in place: afterwards position L-1 holds the chunk total x_1 ∘ ... ∘ x_L."""
        offset = 1
        d = TW
        while d > 0:
            # The previous level's writes (or the loads into shared memory) must be visible before
            # this level reads them: level d reads the two partial sums written at level 2d.
            cuda.syncthreads()
            if ty < d:
                ai = pad((offset * (2 * ty + 1) - 1) * CW + cx)
                bi = pad((offset * (2 * ty + 2) - 1) * CW + cx)
                na, nb = combine(sa[ai], sb[ai], sa[bi], sb[bi])
                sa[bi] = na
                sb[bi] = nb
            offset *= 2
            d //= 2
        # The root is written by thread ty = 0 only; everyone must see it (and the other partial sums)
        # before the caller reads it or the down-sweep starts.
        cuda.syncthreads()

    @cuda.jit(device=True, inline=True)
    def down_sweep(sa, sb, cx, ty):
        """Turn the up-swept tree into the exclusive prefix: position p holds x_1 ∘ ... ∘ x_{p-1}."""
        root = pad((L - 1) * CW + cx)
        if ty == 0:
            sa[root] = ID_A
            sb[root] = ID_B
        offset = L
        d = 1
        while d < L:
            offset //= 2
            # The parent's prefix (written at the previous level, or the root just above) must be
            # visible before it is passed down to the two children.
            cuda.syncthreads()
            if ty < d:
                ai = pad((offset * (2 * ty + 1) - 1) * CW + cx)
                bi = pad((offset * (2 * ty + 2) - 1) * CW + cx)
                # Non-commutative operator: left child gets the parent's prefix P, right child P ∘ left.
                la, lb = sa[ai], sb[ai]
                pa, pb = sa[bi], sb[bi]
                sa[ai] = pa
                sb[ai] = pb
                na, nb = combine(pa, pb, la, lb)
                sa[bi] = na
                sb[bi] = nb
            d *= 2
        # The last level's writes come from other threads; they must land before anyone reads its prefix.
        cuda.syncthreads()

    @kernel(CW * TW)
    def reduce(x1, x2, tot_a, tot_b):
        """Pass 1: each chunk's total (A_k, H_k) -> tot_a, tot_b of shape (B, n_chunks, C)."""
        sa = cuda.shared.array(NS, nbdt)
        sb = cuda.shared.array(NS, nbdt)
        bb, chunk, c, cx, ty, T, C = block_coords(x2)
        load_chunk(x1, x2, sa, sb, bb, chunk, c, cx, ty, T, C)
        up_sweep(sa, sb, cx, ty)
        if ty == 0 and c < C:
            root = pad((L - 1) * CW + cx)
            tot_a[bb, chunk, c] = sa[root]
            tot_b[bb, chunk, c] = sb[root]

    @cuda.jit(device=True, inline=True)
    def load_chunk(x1, x2, sa, sb, bb, chunk, c, cx, ty, T, C):
        """Each thread loads steps ty and ty + TW of its channel (GPU Gems' two-per-thread layout: a warp
        reads consecutive channels when CW = 32, consecutive steps when CW = 1); returns them too."""
        xa0, xb0 = load(x1, x2, bb, chunk * L + ty, c, T, C)
        xa1, xb1 = load(x1, x2, bb, chunk * L + ty + TW, c, T, C)
        sa[pad(ty * CW + cx)] = xa0
        sb[pad(ty * CW + cx)] = xb0
        sa[pad((ty + TW) * CW + cx)] = xa1
        sb[pad((ty + TW) * CW + cx)] = xb1
        return xa0, xb0, xa1, xb1

    @cuda.jit(device=True, inline=True)
    def state_at(sa, sb, p, cx, xa, xb, h_in):
        """State after step p of the chunk: (exclusive prefix ∘ x_p) applied to the incoming state."""
        ia, ib = combine(sa[pad(p * CW + cx)], sb[pad(p * CW + cx)], xa, xb)
        _, hv = combine(ia, h_in, ia, ib)
        return hv

    write_grads = grads_writer(dtype)

    @cuda.jit(device=True, inline=True)
    def store(x1, hsrc, h0, has_h0, out, db, dh0, bb, s, c, T, v):
        """The result v at scan position s: h_s (forward), or the backward's gradients at t = T-1-s."""
        if reverse:
            write_grads(x1, hsrc, h0, has_h0, out, db, dh0, bb, T - 1 - s, c, v)
        else:
            out[bb, s, c] = v

    @kernel(CW * TW)
    def scan(x1, x2, carry, h0, has_h0, out, hsrc, db, dh0):
        """Pass 3 (or the only pass): the state after each step from the state entering the chunk, h_in =
        S_{k-1}, or for chunk 0 h0 (forward, when given) or 0.

        Forward: x1, x2 = a, b and h_t = A_t h_in + H_t into out = h (hsrc, db, dh0 unused). Backward
        (``reverse``): x1, x2 = a, dh, g_t in scan order from g_in = the carry, then dL/db_t = g_t,
        dL/da_t = g_t h_{t-1}, dL/dh0 = a_1 g_1 into out = da, db, dh0 (hsrc = the forward's h)."""
        sa = cuda.shared.array(NS, nbdt)
        sb = cuda.shared.array(NS, nbdt)
        bb, chunk, c, cx, ty, T, C = block_coords(x2)
        xa0, xb0, xa1, xb1 = load_chunk(x1, x2, sa, sb, bb, chunk, c, cx, ty, T, C)
        up_sweep(sa, sb, cx, ty)
        down_sweep(sa, sb, cx, ty)
        if c >= C:
            return  # no barrier follows, so idle channels may leave
        if chunk > 0:
            h_in = carry[bb, chunk - 1, c]
        elif has_h0 and not reverse:
            h_in = h0[bb, c]
        else:
            h_in = nbdt(ID_B)
        s0 = chunk * L + ty
        if s0 < T:
            store(x1, hsrc, h0, has_h0, out, db, dh0, bb, s0, c, T, state_at(sa, sb, ty, cx, xa0, xb0, h_in))
        if s0 + TW < T:
            store(x1, hsrc, h0, has_h0, out, db, dh0, bb, s0 + TW, c, T,
                  state_at(sa, sb, ty + TW, cx, xa1, xb1, h_in))

    return reduce, scan
