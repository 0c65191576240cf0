"""numba.cuda kernels of GRIL's windowed cross-product block, backward versions v1-v2.

The adjoint of the forward (``window_forward.py``; the same equations as ``minimal.cells.gril.backward``),
numbered as the forward's steps in reverse (r = C q, m = Z r, G = dL/dU; shapes and glossary in ``window.py``,
whose ``gril_backward`` launches these kernels):

    4. r = C q, m = Z r:     dβ = Σ do ⊙ m,  dZ_k += (β ⊙ do_k) r_k^T,  dr_k = Z_k^T (β ⊙ do_k),
                             dq = Σ_k C_k^T dr_k,  dC_k += dr_k q^T
    3. Z = scan(A, U):       G_k = dZ_k + A ⊙ G_{k+1}, dA = Σ_k G_k ⊙ Z_{k-1}
    2. U = C Q C^T:          dQ = Σ_k C_k^T G_k C_k,  dC_k += G_k C_k Q^T + G_k^T C_k Q
    1. C = window(x):        dx[k s + m, i] += dC_k[i, m] (windows overlap when s < w)

Both versions need the forward's Z (``return_Z=True``):

    v1 elementwise  ``elementwise_backward``: one kernel per step with one thread per output entry; G from
                    ``linear_scan_backward`` (G and dZ written to memory); the sums over (b, k) and the
                    overlapping dx by atomic adds, so their last bits depend on the order of the additions.
    v2 fused        ``segmented_backward``: the segments of forward v3, one block per (b, segment), one thread
                    per entry (i, j): G_k runs in a register in reverse time; per window the block stages C_k,
                    do_k, Z_k and G_k in shared memory and forms G C, G^T C, dr_k, dC_k; dA, dQ, dq, dβ are
                    summed per block (dA in a register, the rest in shared memory, each entry owned by one
                    thread) and written as one partial per block, which ``sum_partials`` adds in block order.
                    The carry of G across segments is reduce-then-scan in reverse time: ``reduce_backward``
                    gives each segment's G at its first window from G = 0, ``linear_scan_backward`` over the
                    totals (a = A^L, forward v3's ``fill_power``) gives the full G there, and each block reruns
                    from the next segment's. dx without atomics: a block owns the tokens [k0 s, k1 s) of its
                    windows k0 .. k1 - 1, and continues G through the h = floor((w - 1) / s) windows before k0
                    (halo windows, nothing added to the parameter sums) whose dC reach those tokens; dC_k is
                    added into a circular buffer of the w tokens of the current window and a token is written
                    once, when the reverse sweep leaves it. Tokens in no window (s > w) are written as 0. No
                    atomics anywhere: the result does not depend on scheduling.
"""
from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

import numpy as np
from numba import cuda

from ._device import NB_TYPES, kernel
from .window_forward import DEFAULT_BLOCK, make_r_entry, segment, thread_entry

# ---------------------------------------------------------------------------------------------------------
# v1: elementwise kernels, one thread per output entry, atomics for the sums over windows


@lru_cache(maxsize=None)
def elementwise_backward(dtype):
    """v1's kernels for one dtype (accumulators in that dtype: float32 stays float32)."""
    nbdt = NB_TYPES[np.dtype(dtype)]
    r_entry = make_r_entry(dtype)

    @kernel(DEFAULT_BLOCK)
    def _readout_backward_rows(x, q, beta, Z, do, s, dbeta, dZ):
        """Per (b, k, i): dβ += do_i (Z r)_i and dZ_k[i, j] = β_i do_i r_j (step 4)."""
        B, Tp, f = do.shape
        ok, b, k, i, _ = thread_entry(B, Tp, f, 1)
        if not ok:
            return
        bi = i if beta.shape[0] > 1 else 0
        dm = beta[bi] * do[b, k, i]
        m_i = nbdt(0.0)
        for j in range(f):
            r = r_entry(x, q, b, k * s, j, q.shape[0])
            m_i += Z[b, k, i * f + j] * r
            dZ[b, k, i * f + j] = dm * r
        cuda.atomic.add(dbeta, bi, do[b, k, i] * m_i)

    @kernel(DEFAULT_BLOCK)
    def _readout_backward_cols(x, q, beta, Z, do, s, dq, dx):
        """Per (b, k, j): dr_j = Σ_i Z_k[i, j] β_i do_i; dq_m += C_k[j, m] dr_j; dx[ks+m, j] += dr_j q_m."""
        B, Tp, f = do.shape
        w = q.shape[0]
        ok, b, k, j, _ = thread_entry(B, Tp, f, 1)
        if not ok:
            return
        dr = nbdt(0.0)
        for i in range(f):
            dr += Z[b, k, i * f + j] * beta[i if beta.shape[0] > 1 else 0] * do[b, k, i]
        for m in range(w):
            cuda.atomic.add(dq, m, x[b, k * s + m, j] * dr)
            cuda.atomic.add(dx, (b, k * s + m, j), dr * q[m])

    @kernel(DEFAULT_BLOCK)
    def _sum_over_windows(da, dA):
        """dA[i, j] = Σ_{b,k} da[b, k, i*f + j]: one thread per entry, a deterministic order."""
        B, Tp, ff = da.shape
        p = cuda.grid(1)
        if p >= ff:
            return
        acc = nbdt(0.0)
        for b in range(B):
            for k in range(Tp):
                acc += da[b, k, p]
        dA[p // dA.shape[1], p % dA.shape[1]] = acc

    @kernel(DEFAULT_BLOCK)
    def _update_backward_x(x, Q, G, s, dx):
        """Per (b, k, i, m): dC_k[i, m] = Σ_j G[i, j] (C Q^T)[j, m] + G[j, i] (C Q)[j, m] (step 2), onto dx."""
        B, Tp, ff = G.shape
        f = x.shape[2]
        w = Q.shape[0]
        ok, b, k, i, m = thread_entry(B, Tp, f, w)
        if not ok:
            return
        t0 = k * s
        acc = nbdt(0.0)
        for j in range(f):
            cqt = nbdt(0.0)  # (C Q^T)[j, m]
            cq = nbdt(0.0)   # (C Q)[j, m]
            for n in range(w):
                cqt += x[b, t0 + n, j] * Q[m, n]
                cq += x[b, t0 + n, j] * Q[n, m]
            acc += G[b, k, i * f + j] * cqt + G[b, k, j * f + i] * cq
        cuda.atomic.add(dx, (b, t0 + m, i), acc)

    @kernel(DEFAULT_BLOCK)
    def _update_backward_Q(x, G, s, dQ):
        """Per (b, k, m, n): dQ[m, n] += Σ_{i,j} C_k[i, m] G_k[i, j] C_k[j, n] (step 2)."""
        B, Tp, ff = G.shape
        f = x.shape[2]
        w = dQ.shape[0]
        ok, b, k, m, n = thread_entry(B, Tp, w, w)
        if not ok:
            return
        t0 = k * s
        acc = nbdt(0.0)
        for i in range(f):
            gc = nbdt(0.0)  # (G C)[i, n]
            for j in range(f):
                gc += G[b, k, i * f + j] * x[b, t0 + n, j]
            acc += x[b, t0 + m, i] * gc
        cuda.atomic.add(dQ, (m, n), acc)

    @kernel(DEFAULT_BLOCK)
    def _zero(y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = 0.0

    return SimpleNamespace(readout_backward_rows=_readout_backward_rows,
                           readout_backward_cols=_readout_backward_cols, sum_over_windows=_sum_over_windows,
                           update_backward_x=_update_backward_x, update_backward_Q=_update_backward_Q, zero=_zero)


# ---------------------------------------------------------------------------------------------------------
# v2: fused, one block per (b, segment) as forward v3, no atomics


@lru_cache(maxsize=None)
def segmented_backward(dtype, f, w):
    """v2's kernels for one (dtype, f, w) (shared arrays need compile-time sizes).

    ``reduce_backward`` and ``backward`` run forward v3's grid: B * n_seg blocks, block (b, g) = blockIdx
    b * n_seg + g (``window_forward.segment``), one thread per entry p = i f + j of Z (f*f threads), segment g
    holding windows k0 = g L .. k1 - 1 = min(k0 + L, T') - 1.
    """
    nbdt = NB_TYPES[np.dtype(dtype)]
    FW, FF, WW = f * w, f * f, w * w
    r_entry = make_r_entry(dtype)
    # Compiled with the launch bound f*f (``_device.kernel``): at f = 32 each thread may use at most 64 registers.

    @kernel(FF)
    def reduce_backward(x, q, beta, A, do, s, L, Gloc):
        """Backward pass 1: Gloc[b, g, p] = G_{k0} of segment g started from G_{k1} = 0,
        Σ_{k=k0}^{k1-1} A^{k-k0} ⊙ dZ_k with dZ_k[i, j] = β_i do_k[i] r_k[j]. No barriers."""
        Tp = do.shape[1]
        b, g, k0, k1 = segment(Tp, Gloc.shape[1], L)
        p = cuda.threadIdx.x
        i = p // f
        j = p - i * f
        a_ij = A[i, j]
        beta_i = beta[i if beta.shape[0] > 1 else 0]
        G = nbdt(0.0)
        for k in range(k1 - 1, k0 - 1, -1):
            G = beta_i * do[b, k, i] * r_entry(x, q, b, k * s, j, w) + a_ij * G
        Gloc[b, g, p] = G

    @kernel(FF)
    def backward(x, Q, q, beta, A, Z, do, s, L, Gs, carry, dx, P):
        """Backward pass 3 (the only pass with one segment), block (b, g), thread p = (i, j).

        Runs G_k = dZ_k + A ⊙ G_{k+1} over k = k1 - 1 .. k0 in registers, from G_{k1} = Gs[b, g + 1] (the
        full adjoint at the next segment's first window, from pass 2) if carry, else from 0, and then
        h = floor((w - 1) / s) halo windows k0 - h .. k0 - 1 of the previous segment, whose dC_k reach this
        segment's first tokens. The block owns the tokens t in [k0 s, k1 s) ([k0 s, T) for the last segment)
        and writes each of their dx[b, t] exactly once: dC_k is added into a circular buffer of w tokens
        (slot t mod w), and a token is written out when the reverse sweep leaves it (it is in no earlier
        window). Tokens of this segment's windows at or after k1 s are left to the next block, which reaches
        them through its halo. So dx needs no atomics and no zero fill; halo windows add nothing to the
        parameter sums. P[b * n_seg + g] = this block's [dA (f*f) | dQ (w*w) | dq (w) | dβ (1 or f)].
        """
        sC = cuda.shared.array(FW, nbdt)    # C_k (f, w) row-major
        sQ = cuda.shared.array(WW, nbdt)
        sq = cuda.shared.array(w, nbdt)
        sdo = cuda.shared.array(f, nbdt)    # do_k
        sr = cuda.shared.array(f, nbdt)     # r_k = C_k q
        sZ = cuda.shared.array(FF, nbdt)    # Z_k
        sG = cuda.shared.array(FF, nbdt)    # G_k
        sGC = cuda.shared.array(FW, nbdt)   # G_k C_k (f, w)
        sGtC = cuda.shared.array(FW, nbdt)  # G_k^T C_k (f, w)
        sdr = cuda.shared.array(f, nbdt)    # dr_k = Z_k^T (β ⊙ do_k)
        sdx = cuda.shared.array(FW, nbdt)   # dx of the w tokens of the current window, slot (t mod w, i)
        sdQ = cuda.shared.array(WW, nbdt)   # this block's sums; entry e belongs to thread e mod f*f
        sdq = cuda.shared.array(w, nbdt)
        sdb = cuda.shared.array(f, nbdt)
        Tp = do.shape[1]
        n_seg = -(-Tp // L)
        b, g, k0, k1 = segment(Tp, n_seg, L)
        own_lo = k0 * s
        own_hi = k1 * s if g < n_seg - 1 else x.shape[1]
        k_last = max(k0 - (w - 1) // s, 0)   # the last window of the reverse sweep (halo included)
        gap = s - w if s > w else 0          # tokens after each window that no window holds: dx = 0
        tid = cuda.threadIdx.x
        i = tid // f
        j = tid - i * f
        for p in range(tid, WW, FF):
            sQ[p] = Q[p // w, p % w]
            sdQ[p] = 0.0
        for p in range(tid, w, FF):
            sq[p] = q[p]
            sdq[p] = 0.0
        for p in range(tid, FW, FF):
            sdx[p] = 0.0
        if tid < f:
            sdb[tid] = 0.0
        a_ij = A[i, j]
        beta_i = beta[i if beta.shape[0] > 1 else 0]
        G = Gs[b, g + 1, tid] if carry and g < n_seg - 1 else nbdt(0.0)
        dA = nbdt(0.0)
        z = Z[b, k1 - 1, tid]
        for k in range(k1 - 1, k_last - 1, -1):
            own = k >= k0
            t0 = k * s
            for p in range(tid, FW, FF):
                sC[(p % f) * w + p // f] = x[b, t0 + p // f, p % f]
            if tid < f:
                sdo[tid] = do[b, k, tid]
            sZ[tid] = z
            # C_k, do_k and Z_k (and, in the first window, Q, q and the zeroed sums) are complete.
            cuda.syncthreads()
            r_j = nbdt(0.0)
            for m in range(w):
                r_j += sC[j * w + m] * sq[m]
            if i == 0:
                sr[j] = r_j
            G = beta_i * sdo[i] * r_j + a_ij * G    # G_k = dZ_k + A ⊙ G_{k+1}
            sG[tid] = G
            z_prev = Z[b, k - 1, tid] if k > 0 else nbdt(0.0)
            if own:
                dA += G * z_prev
            z = z_prev
            # G_k and r_k are complete.
            cuda.syncthreads()
            for p in range(tid, FW, FF):
                ii = p // w
                n = p - ii * w
                gc = nbdt(0.0)
                gtc = nbdt(0.0)
                for jj in range(f):
                    gc += sG[ii * f + jj] * sC[jj * w + n]
                    gtc += sG[jj * f + ii] * sC[jj * w + n]
                sGC[p] = gc
                sGtC[p] = gtc
            if tid < f:
                dr = nbdt(0.0)
                m_i = nbdt(0.0)
                for ll in range(f):
                    dr += sZ[ll * f + tid] * beta[ll if beta.shape[0] > 1 else 0] * sdo[ll]
                    m_i += sZ[tid * f + ll] * sr[ll]
                sdr[tid] = dr
                if own:
                    sdb[tid] += sdo[tid] * m_i           # dβ_i += do_i (Z_k r_k)_i
            # G C, G^T C and dr_k are complete.
            cuda.syncthreads()
            for p in range(tid, FW, FF):  # entry (i, m) of dC_k, token-major: dx writes are coalesced
                mm = p // f
                ii = p - mm * f
                dc = sdr[ii] * sq[mm]                    # dr q^T + G C Q^T + G^T C Q
                for n in range(w):
                    dc += sGC[ii * w + n] * sQ[mm * w + n] + sGtC[ii * w + n] * sQ[n * w + mm]
                t = t0 + mm
                slot = (t % w) * f + ii
                acc = sdx[slot] + dc
                if mm >= w - s or k == k_last:          # token t is in no earlier window: it is final
                    if own_lo <= t and t < own_hi:
                        dx[b, t, ii] = acc
                    sdx[slot] = 0.0
                else:
                    sdx[slot] = acc
            if own:
                for p in range(tid, f * gap, FF):
                    t = t0 + w + p // f
                    if t < own_hi:
                        dx[b, t, p % f] = 0.0
                for p in range(tid, WW, FF):
                    mm = p // w
                    n = p - mm * w
                    acc = nbdt(0.0)
                    for ii in range(f):
                        acc += sC[ii * w + mm] * sGC[ii * w + n]
                    sdQ[p] += acc                        # dQ += C^T G C
                for mm in range(tid, w, FF):
                    acc = nbdt(0.0)
                    for jj in range(f):
                        acc += sC[jj * w + mm] * sdr[jj]
                    sdq[mm] += acc                       # dq += C^T dr
            # The next window overwrites every staged array; the sums above have read them. (After the
            # last window this barrier also makes sdb complete for the scalar-β sum below.)
            cuda.syncthreads()
        blk = cuda.blockIdx.x
        P[blk, tid] = dA
        for p in range(tid, WW, FF):
            P[blk, FF + p] = sdQ[p]
        for p in range(tid, w, FF):
            P[blk, FF + WW + p] = sdq[p]
        if beta.shape[0] > 1:
            if tid < f:
                P[blk, FF + WW + w + tid] = sdb[tid]
        elif tid == 0:
            acc = nbdt(0.0)
            for ii in range(f):
                acc += sdb[ii]
            P[blk, FF + WW + w] = acc

    @kernel(DEFAULT_BLOCK)
    def sum_partials(P, dA, dQ, dq, dbeta):
        """The gradients from the blocks' partials: one thread per column of P, the blocks summed in order
        (deterministic)."""
        c = cuda.grid(1)
        if c >= P.shape[1]:
            return
        acc = nbdt(0.0)
        for blk in range(P.shape[0]):
            acc += P[blk, c]
        if c < FF:
            dA[c // f, c % f] = acc
        elif c < FF + WW:
            dQ[(c - FF) // w, (c - FF) % w] = acc
        elif c < FF + WW + w:
            dq[c - FF - WW] = acc
        else:
            dbeta[c - FF - WW - w] = acc

    return SimpleNamespace(reduce_backward=reduce_backward, backward=backward, sum_partials=sum_partials)
