"""numba.cuda kernels for GRIL's windowed cross-product block, forward and backward.

Tian et al., "Learning in the Recurrent State: Gradient Descent with Linear Recurrent Networks"
(arXiv:2410.11687, Def. 4.2), with the conventions of ``minimal.cells.gril``:

    C_k = [x_{ks}, ..., x_{ks+w-1}]     (f, w)   C_k[i, m] = x[k s + m, i]; column w-1 is the newest token
    U_k = C_k Q C_k^T                   (f, f)
    Z_k = A ⊙ Z_{k-1} + U_k, Z_{-1} = 0  (f, f)
    o_k = β ⊙ (Z_k r_k),  r_k = C_k q    (f,)     β is (1,) (scalar) or (f,)

Windows start only when full, k = 0 .. T'-1 with T' = (T - w) / s + 1, and (T - w) % s == 0 is required.
Glossary: B batch, T input steps, f features, w window width, s stride, T' windows.

Forward versions (v1 is the reference the fused ones are tested against; ``gril_forward(version=)``):

    v1 unfused    ``updates`` writes every U_k (B, T', f*f); ``cuda_kernels.scan.linear_scan`` (Blelloch)
                  runs Z over k with a_k = A; ``readout`` computes o. Three launches, U and Z in memory.
    v2 fused      one block per batch element, one thread per entry (i, j) of Z (f*f <= 1024 threads):
                  for each window, stage C_k in shared memory, compute U_k[i, j] in registers, update
                  Z[i, j] in a register and read out o_k. U is never written, Z only if asked for
                  (the backward needs it). Parallel over (b, i, j), sequential over windows: with B = 1
                  one block runs all T' windows and the GPU idles. The readable version.
    v3 segmented  what v2 lacks: T is split across blocks. The windows are cut into n_seg segments of L
                  (``plan_segments``: enough for ``TARGET_THREADS`` threads, one segment when B is large
                  enough), one block per (b, segment). Z_k = A ⊙ Z_{k-1} + U_k has a constant coefficient,
                  so segment g maps the state before it to A^L ⊙ Z_in + Zloc_g; reduce-then-scan:
                      1. ``reduce``: block (b, g) runs its windows from Z = 0 and writes Zloc_g (no barriers);
                      2. S_g = A^L ⊙ S_{g-1} + Zloc_g, the state after segment g: ``linear_scan`` (Blelloch)
                         over the (B, n_seg, f*f) totals with a = A^L (``fill_power``, repeated squaring);
                      3. ``scan``: v2's loop over segment g's windows from Z = S_{g-1}, writing o (and Z).
                  With one segment only pass 3 runs, from Z = 0: v2's single pass.

Backward (the adjoint of the forward; the same equations as ``minimal.cells.gril.backward``):
    4. r = C q, m = Z r:     dβ = Σ do ⊙ m,  dZ_k += (β ⊙ do_k) r_k^T,  dr_k = Z_k^T (β ⊙ do_k),
                             dq = Σ_k C_k^T dr_k,  dC_k += dr_k q^T
    3. Z = scan(A, U):       G_k = dZ_k + A ⊙ G_{k+1}, dA = Σ_k G_k ⊙ Z_{k-1}
    2. U = C Q C^T:          dQ = Σ_k C_k^T G_k C_k,  dC_k += G_k C_k Q^T + G_k^T C_k Q
    1. C = window(x):        dx[k s + m, i] += dC_k[i, m] (windows overlap when s < w)
Both versions need the forward's Z (``return_Z=True``); ``gril_backward(version=)``:

    v1 elementwise  one kernel per step with one thread per output entry; G from ``linear_scan_backward``
                    (G and dZ written to memory); the sums over (b, k) and the overlapping dx by atomic adds,
                    so their last bits depend on the order of the additions.
    v2 fused        the segments of forward v3, one block per (b, segment), one thread per entry (i, j):
                    G_k runs in a register in reverse time; per window the block stages C_k, do_k, Z_k and
                    G_k in shared memory and forms G C, G^T C, dr_k, dC_k; dA, dQ, dq, dβ are summed per
                    block (dA in a register, the rest in shared memory, each entry owned by one thread) and
                    written as one partial per block, which ``sum_partials`` adds in block order. The carry
                    of G across segments is reduce-then-scan in reverse time: ``reduce_backward`` gives each
                    segment's G at its first window from G = 0, ``linear_scan_backward`` over the totals
                    (a = A^L) gives the full G there, and each block reruns from the next segment's.
                    dx without atomics: a block owns the tokens [k0 s, k1 s) of its windows k0 .. k1 - 1,
                    and continues G through the h = floor((w - 1) / s) windows before k0 (halo windows,
                    nothing added to the parameter sums) whose dC reach those tokens; dC_k is added into a
                    circular buffer of the w tokens of the current window and a token is written once, when
                    the reverse sweep leaves it. Tokens in no window (s > w) are written as 0. No atomics
                    anywhere: the result does not depend on scheduling.

Defaults: forward v3 and backward v2 when f <= 32 (one thread per entry of Z), else v1. v3 with one
segment runs v2's single pass, so the default keeps v2's structure where B alone fills the GPU and splits T
where it does not. ``fused=False`` / ``fused=True`` (the older switch) still select v1 / a fused version.

Not measured on a GPU yet: forward v3, backward v2 and their constants (``TARGET_THREADS``,
``MIN_SEGMENT``) were written and tested in the CUDA simulator only (``tests/test_cuda_window.py``).
"""
from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

import numpy as np
from numba import cuda

from ._device import _NB_TYPES, kernel
from .scan import _check_out, is_device, linear_scan, linear_scan_backward, to_device
from .workspace import _alloc, _check_workspace

__all__ = ["gril_forward", "gril_backward", "n_windows", "plan_segments", "to_device", "DEFAULT_BLOCK",
           "FORWARD_VERSIONS", "BACKWARD_VERSIONS", "TARGET_THREADS", "MIN_SEGMENT"]

DEFAULT_BLOCK = 128          # threads per block of the elementwise kernels
FORWARD_VERSIONS = (1, 2, 3)
BACKWARD_VERSIONS = (1, 2)
# How far the segmented kernels split T (``plan_segments``). Not measured on a GPU: TARGET_THREADS is the
# resident-thread count of an H100 (132 SMs x 2048 = 270336, rounded to 2^18); MIN_SEGMENT keeps the extra
# work of reduce-then-scan (pass 1, and the backward's halo windows) small next to a segment's own.
TARGET_THREADS = 2 ** 18
MIN_SEGMENT = 32


# ---------------------------------------------------------------------------------------------------------
# Forward v1 and backward v1: elementwise kernels, one thread per output entry, no barriers


@lru_cache(maxsize=None)
def _elementwise(dtype):
    """The elementwise kernels for one dtype (accumulators in that dtype: float32 stays float32)."""
    nbdt = _NB_TYPES[np.dtype(dtype)]

    @kernel(DEFAULT_BLOCK)
    def _updates(x, Q, s, U):
        """U[b, k, i*f + j] = Σ_{m,n} C_k[i, m] Q[m, n] C_k[j, n]."""
        B, Tp, ff = U.shape
        f = x.shape[2]
        w = Q.shape[0]
        idx = cuda.grid(1)
        if idx >= B * Tp * ff:
            return
        b, rest = divmod(idx, Tp * ff)
        k, p = divmod(rest, ff)
        i, j = divmod(p, f)
        t0 = k * s
        acc = nbdt(0.0)
        for m in range(w):
            qc = nbdt(0.0)  # (Q C_k^T)[m, j]
            for n in range(w):
                qc += Q[m, n] * x[b, t0 + n, j]
            acc += x[b, t0 + m, i] * qc
        U[b, k, p] = acc


    @kernel(DEFAULT_BLOCK)
    def _fill_rows(A, a):
        """a[b, k, :] = A.ravel(): the scan takes one coefficient per step, so A is written out explicitly."""
        B, Tp, ff = a.shape
        idx = cuda.grid(1)
        if idx < B * Tp * ff:
            a[idx // (Tp * ff), (idx // ff) % Tp, idx % ff] = A[(idx % ff) // A.shape[1], idx % A.shape[1]]


    @kernel(DEFAULT_BLOCK)
    def _readout(x, q, beta, Z, s, o):
        """o[b, k, i] = β_i Σ_j Z_k[i, j] r_k[j], r_k[j] = Σ_m x[k s + m, j] q_m."""
        B, Tp, f = o.shape
        w = q.shape[0]
        idx = cuda.grid(1)
        if idx >= B * Tp * f:
            return
        b, rest = divmod(idx, Tp * f)
        k, i = divmod(rest, f)
        acc = nbdt(0.0)
        for j in range(f):
            r = nbdt(0.0)
            for m in range(w):
                r += x[b, k * s + m, j] * q[m]
            acc += Z[b, k, i * f + j] * r
        o[b, k, i] = beta[i if beta.shape[0] > 1 else 0] * acc


    # ----------------------------------------------------------------------------------------------------
    # Backward kernels (elementwise, atomics for the sums over windows)


    @kernel(DEFAULT_BLOCK)
    def _readout_backward_rows(x, q, beta, Z, do, s, dbeta, dZ):
        """Per (b, k, i): dβ += do_i (Z r)_i and dZ_k[i, j] = β_i do_i r_j (step 4)."""
        B, Tp, f = do.shape
        w = q.shape[0]
        idx = cuda.grid(1)
        if idx >= B * Tp * f:
            return
        b, rest = divmod(idx, Tp * f)
        k, i = divmod(rest, f)
        bi = i if beta.shape[0] > 1 else 0
        dm = beta[bi] * do[b, k, i]
        m_i = nbdt(0.0)
        for j in range(f):
            r = nbdt(0.0)
            for m in range(w):
                r += x[b, k * s + m, j] * q[m]
            m_i += Z[b, k, i * f + j] * r
            dZ[b, k, i * f + j] = dm * r
        cuda.atomic.add(dbeta, bi, do[b, k, i] * m_i)


    @kernel(DEFAULT_BLOCK)
    def _readout_backward_cols(x, q, beta, Z, do, s, dq, dx):
        """Per (b, k, j): dr_j = Σ_i Z_k[i, j] β_i do_i; dq_m += C_k[j, m] dr_j; dx[ks+m, j] += dr_j q_m."""
        B, Tp, f = do.shape
        w = q.shape[0]
        idx = cuda.grid(1)
        if idx >= B * Tp * f:
            return
        b, rest = divmod(idx, Tp * f)
        k, j = divmod(rest, f)
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
        idx = cuda.grid(1)
        if idx >= B * Tp * f * w:
            return
        b, rest = divmod(idx, Tp * f * w)
        k, rest = divmod(rest, f * w)
        i, m = divmod(rest, w)
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
        idx = cuda.grid(1)
        if idx >= B * Tp * w * w:
            return
        b, rest = divmod(idx, Tp * w * w)
        k, rest = divmod(rest, w * w)
        m, n = divmod(rest, w)
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



    return SimpleNamespace(updates=_updates, fill_rows=_fill_rows, readout=_readout,
                           readout_backward_rows=_readout_backward_rows,
                           readout_backward_cols=_readout_backward_cols, sum_over_windows=_sum_over_windows,
                           update_backward_x=_update_backward_x, update_backward_Q=_update_backward_Q,
                           zero=_zero)


# ---------------------------------------------------------------------------------------------------------
# v2: fused forward


@lru_cache(maxsize=None)
def _window_step(dtype, f, w):
    """One window k of the fused forward, the loop body of v2 and of v3's last pass: a device function run by
    every thread tid = i f + j of a block of f*f, on the block's shared arrays sC (f*w), sQ (w*w, filled),
    sq (w, filled), sr (f), sZ (f*f). Takes the thread's Z[i, j] before the window, returns it after, writes
    o[b, k] (and Z_out[b, k] if save_Z)."""
    nbdt = _NB_TYPES[np.dtype(dtype)]
    FW, FF = f * w, f * f

    @cuda.jit(device=True)
    def window(x, beta, b, k, s, sC, sQ, sq, sr, sZ, tid, a_ij, z, save_Z, o, Z_out):
        i = tid // f
        j = tid - i * f
        t0 = k * s
        for p in range(tid, FW, FF):  # consecutive threads read consecutive features of one token
            sC[(p % f) * w + p // f] = x[b, t0 + p // f, p % f]
        # C_k (and, in the first window, Q and q) must be complete before any thread multiplies with it.
        cuda.syncthreads()
        if tid < f:
            r = nbdt(0.0)
            for m in range(w):
                r += sC[tid * w + m] * sq[m]
            sr[tid] = r
        u = nbdt(0.0)
        for m in range(w):
            qc = nbdt(0.0)
            for n in range(w):
                qc += sQ[m * w + n] * sC[j * w + n]
            u += sC[i * w + m] * qc
        z = a_ij * z + u
        sZ[tid] = z
        if save_Z:
            Z_out[b, k, tid] = z
        # The readout of row i sums Z_k[i, :] and r_k written by other threads.
        cuda.syncthreads()
        if tid < f:
            acc = nbdt(0.0)
            for jj in range(f):
                acc += sZ[tid * f + jj] * sr[jj]
            o[b, k, tid] = beta[tid if beta.shape[0] > 1 else 0] * acc
        # The next window overwrites sC, sr and sZ: the readout above must have finished reading them.
        cuda.syncthreads()
        return z

    return window


@lru_cache(maxsize=None)
def _fused_kernel(dtype, f, w):
    """Shared arrays need compile-time sizes: one kernel per (dtype, f, w)."""
    nbdt = _NB_TYPES[np.dtype(dtype)]
    FW, FF, WW = f * w, f * f, w * w
    window = _window_step(dtype, f, w)

    @kernel(FF)
    def fused(x, Q, q, beta, A, s, save_Z, o, Z_out):
        sC = cuda.shared.array(FW, nbdt)   # the window C_k, row-major (f, w)
        sQ = cuda.shared.array(WW, nbdt)
        sq = cuda.shared.array(w, nbdt)
        sr = cuda.shared.array(f, nbdt)    # r_k = C_k q
        sZ = cuda.shared.array(FF, nbdt)   # Z_k, for the readout's sum over j
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        i = tid // f
        j = tid - i * f
        for p in range(tid, WW, FF):  # strided: there may be fewer threads (f*f) than entries (w*w)
            sQ[p] = Q[p // w, p % w]
        for p in range(tid, w, FF):
            sq[p] = q[p]
        a_ij = A[i, j]
        z = nbdt(0.0)
        for k in range(o.shape[1]):
            z = window(x, beta, b, k, s, sC, sQ, sq, sr, sZ, tid, a_ij, z, save_Z, o, Z_out)

    return fused


# ---------------------------------------------------------------------------------------------------------
# Forward v3 and backward v2: one block per (b, segment), reduce-then-scan over the segments


@lru_cache(maxsize=None)
def _segmented_kernels(dtype, f, w):
    """v3 forward and the fused backward for one (dtype, f, w) (shared arrays need compile-time sizes).

    ``reduce``, ``scan``, ``reduce_backward`` and ``backward`` run a grid of B * n_seg blocks, block (b, g) =
    blockIdx b * n_seg + g, and one thread per entry p = i f + j of Z (f*f threads); segment g holds windows
    k0 = g L .. k1 - 1 = min(k0 + L, T') - 1.
    """
    nbdt = _NB_TYPES[np.dtype(dtype)]
    FW, FF, WW = f * w, f * f, w * w
    window = _window_step(dtype, f, w)
    # Every kernel of a block of f*f threads is compiled with that launch bound (``scan.kernel``): at f = 32
    # each thread may use at most 64 registers, or the launch fails (forward v3 did, on an H200).

    @cuda.jit(device=True, inline=True)
    def power(a, L):
        """a^L for an integer L >= 0 by repeated squaring (about log2 L roundings instead of L)."""
        out = nbdt(1.0)
        while L > 0:
            if L & 1:
                out *= a
            a *= a
            L >>= 1
        return out

    @kernel(DEFAULT_BLOCK)
    def fill_power(A, L, a):
        """a[b, g, p] = (A^L)[p] for every (b, g): the coefficient of one whole segment of L windows."""
        B, n_seg, ff = a.shape
        idx = cuda.grid(1)
        if idx < B * n_seg * ff:
            p = idx % ff
            a[idx // (n_seg * ff), (idx // ff) % n_seg, p] = power(A[p // f, p % f], L)

    @cuda.jit(device=True, inline=True)
    def segment(Tp, n_seg, L):
        """(b, g, k0, k1) of this block."""
        blk = cuda.blockIdx.x
        b = blk // n_seg
        g = blk - b * n_seg
        k0 = g * L
        return b, g, k0, min(k0 + L, Tp)

    @kernel(FF)
    def reduce(x, Q, A, s, L, Zloc):
        """Pass 1: Zloc[b, g, p] = Z after segment g's windows started from Z = 0,
        Σ_{k=k0}^{k1-1} A^{k1-1-k} ⊙ U_k. No barriers: each thread reads rows i and j of C_k from x."""
        Tp = (x.shape[1] - w) // s + 1
        b, g, k0, k1 = segment(Tp, Zloc.shape[1], L)
        p = cuda.threadIdx.x
        i = p // f
        j = p - i * f
        a_ij = A[i, j]
        z = nbdt(0.0)
        for k in range(k0, k1):
            t0 = k * s
            u = nbdt(0.0)
            for m in range(w):
                qc = nbdt(0.0)
                for n in range(w):
                    qc += Q[m, n] * x[b, t0 + n, j]
                u += x[b, t0 + m, i] * qc
            z = a_ij * z + u
        Zloc[b, g, p] = z

    @kernel(FF)
    def scan(x, Q, q, beta, A, s, L, S, carry, save_Z, o, Z_out):
        """Pass 3 (the only pass with one segment): v2's loop over the windows of segment g, started from
        Z = S[b, g - 1] (the state after segment g - 1, from pass 2) if carry and g > 0, else from 0."""
        sC = cuda.shared.array(FW, nbdt)   # the window C_k, row-major (f, w)
        sQ = cuda.shared.array(WW, nbdt)
        sq = cuda.shared.array(w, nbdt)
        sr = cuda.shared.array(f, nbdt)    # r_k = C_k q
        sZ = cuda.shared.array(FF, nbdt)   # Z_k, for the readout's sum over j
        Tp = o.shape[1]
        b, g, k0, k1 = segment(Tp, -(-Tp // L), L)
        tid = cuda.threadIdx.x
        i = tid // f
        j = tid - i * f
        for p in range(tid, WW, FF):
            sQ[p] = Q[p // w, p % w]
        for p in range(tid, w, FF):
            sq[p] = q[p]
        a_ij = A[i, j]
        z = S[b, g - 1, tid] if carry and g > 0 else nbdt(0.0)
        for k in range(k0, k1):
            z = window(x, beta, b, k, s, sC, sQ, sq, sr, sZ, tid, a_ij, z, save_Z, o, Z_out)

    # ------------------------------------------------------------------------------------------------------
    # Fused backward

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
            r = nbdt(0.0)
            for m in range(w):
                r += x[b, k * s + m, j] * q[m]
            G = beta_i * do[b, k, i] * r + a_ij * G
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

    return SimpleNamespace(fill_power=fill_power, reduce=reduce, scan=scan, reduce_backward=reduce_backward,
                           backward=backward, sum_partials=sum_partials)


# ---------------------------------------------------------------------------------------------------------
# Host side


def n_windows(T, w, s):
    """T' = (T - w) / s + 1; ValueError naming w, s or T unless the windows tile x exactly."""
    # The same rule as minimal.cells.gril.n_windows, repeated because cuda_kernels must not import minimal.
    for name, v in (("w", w), ("s", s)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if w > T:
        raise ValueError(f"w must be <= T (a window cannot be wider than the sequence), got w={w}, T={T}")
    if (T - w) % s != 0:
        raise ValueError(f"T must satisfy (T - w) % s == 0 so that the last window ends at the last token, "
                         f"got T={T}, w={w}, s={s}")
    return (T - w) // s + 1


def _check(x, Q, q, beta, A, w, s, extra=()):
    """Validate shapes, dtypes and placement; returns (on_device, (B, T, f, w, T'))."""
    named = [("x", x), ("Q", Q), ("q", q), ("beta", beta), ("A", A)] + list(extra)
    on_device = is_device(x)
    for name, v in named:
        if not (isinstance(v, np.ndarray) or is_device(v)):
            raise ValueError(f"{name} must be a numpy.ndarray or a CUDA device array, got {type(v).__name__}")
        if is_device(v) != on_device:
            raise ValueError(f"{name} must live where x does ({'device' if on_device else 'host'})")
        if np.dtype(v.dtype) not in _NB_TYPES:
            raise ValueError(f"{name} must have dtype float32 or float64, got {v.dtype}")
        if v.dtype != x.dtype:
            raise ValueError(f"{name} must have the dtype of x ({x.dtype}), got {v.dtype}")
    if len(x.shape) != 3:
        raise ValueError(f"x must have shape (B, T, f), got {tuple(x.shape)}")
    B, T, f = x.shape
    T_out = n_windows(T, w, s)
    want = {"Q": (w, w), "q": (w,), "A": (f, f)}
    for name, v in named[1:5]:
        if name == "beta":
            if tuple(v.shape) not in ((1,), (f,)):
                raise ValueError(f"beta must have shape (1,) or (f,) = ({f},), got {tuple(v.shape)}")
        elif tuple(v.shape) != want[name]:
            raise ValueError(f"{name} must have shape {want[name]} (w = {w}, f = {f}), got {tuple(v.shape)}")
    return on_device, (B, T, f, w, T_out)


def _grid(n, block=DEFAULT_BLOCK):
    return max(1, -(-n // block)), block


def _zeros(shape, dtype, y=None):
    """A device array of zeros (y itself, zeroed, if given)."""
    y = cuda.device_array(shape, dtype=dtype) if y is None else y
    _elementwise(dtype).zero[_grid(y.size)](y.reshape(y.size))
    return y


def _is_int(v):
    """An int or NumPy integer, not a bool (True == 1) and not a float (3.0 == 3)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_int(name, v, lo, hi, what):
    if not _is_int(v) or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}] ({what}), got {v!r}")
    return int(v)


def plan_segments(B, T_out, f, segments=None):
    """(n_seg, L): the T' windows cut into n_seg segments of L windows (the last one may be shorter).

    segments=None: as many segments as bring the grid to ``TARGET_THREADS`` threads (B * n_seg blocks of f*f
    threads), but no segment shorter than ``MIN_SEGMENT`` windows; one segment (the single pass) when B alone
    is enough. An integer asks for that many; n_seg = ceil(T' / L) with L = ceil(T' / segments) can be
    smaller (T' = 10, segments = 4: L = 3 and n_seg = 4; segments = 6: L = 2 and n_seg = 5).
    """
    if segments is None:
        n = max(1, min(-(-TARGET_THREADS // (B * f * f)), T_out // MIN_SEGMENT))
    else:
        n = _check_int("segments", segments, 1, T_out, f"segments of the T' = {T_out} windows")
    L = -(-T_out // n)
    return -(-T_out // L), L


def _fits_fused(f):
    if f * f > 1024:
        raise ValueError(f"x must have f <= 32 features for the fused kernels (one thread per entry of Z), "
                         f"got f={f}; use version=1")


def _forward_version(version, fused, segments, f):
    """The forward's version from ``version``, ``fused`` (the older switch) and ``segments``."""
    if fused is not None and not isinstance(fused, (bool, np.bool_)):
        raise ValueError(f"fused must be True, False or None, got {fused!r}")
    if version is None:
        version = 1 if fused is False or (fused is None and f * f > 1024) else 3
    elif not _is_int(version) or version not in FORWARD_VERSIONS:
        raise ValueError(f"version must be 1 (unfused), 2 (fused, one block per batch element) or 3 (fused, "
                         f"T split into segments), got {version!r}")
    elif fused is not None and bool(fused) != (version != 1):
        raise ValueError(f"fused={fused} contradicts version={version} (version 1 is the unfused one)")
    if segments is not None and version != 3:
        raise ValueError(f"segments applies to version=3 only, got segments={segments!r} with version={version}")
    if version != 1:
        _fits_fused(f)
    return version


def gril_forward(x, Q, q, beta, A, w, s, *, version=None, fused=None, segments=None, return_Z=False,
                 scan_block=None, out=None, workspace=None):
    """The GRIL block on the GPU: o_k = β ⊙ (Z_k C_k q), Z_k = A ⊙ Z_{k-1} + C_k Q C_k^T.

    Args:
        x: (B, T, f) float32 or float64; Q: (w, w); q: (w,); beta: (1,) or (f,); A: (f, f), one dtype;
            NumPy or device arrays (results go where x is).
        w: window width (= Q's size); s: stride, with w <= T and (T - w) % s == 0.
        version: 1 unfused (updates, Blelloch scan, readout), 2 fused (one block per batch element),
            3 fused with T split into segments (module docstring). None: 3 when f <= 32, else 1.
        fused: the older switch, kept working: False is version 1, True a fused version (3 unless version
            says 2); it must agree with ``version`` when both are given.
        segments: version 3 only: how many segments to cut the windows into (``plan_segments``); None picks
            the number from ``TARGET_THREADS``, and 1 is v2's single pass.
        return_Z: also return the states Z (B, T', f, f), which ``gril_backward`` needs.
        scan_block: threads per block of the Blelloch scans (v1's scan over windows, v3's scan over segment
            totals); ``cuda_kernels.scan``'s default if None.
        out: device arrays to write the results into (inputs on the device): o, or (o, Z) with return_Z;
            None: fresh arrays.
        workspace: a ``cuda_kernels.scan.Workspace`` for the temporaries (U, the segment totals), or None.
    Returns:
        o: (B, T', f), o[:, k] belongs to input step k s + w - 1; or (o, Z) if return_Z.
    """
    on_device, (B, T, f, w, T_out) = _check(x, Q, q, beta, A, w, s)
    version = _forward_version(version, fused, segments, f)
    names, shapes = (("o", "Z"), ((B, T_out, f), (B, T_out, f, f))) if return_Z else (("o",), ((B, T_out, f),))
    outs = _check_out(out, names, shapes, x.dtype, on_device)
    _check_workspace(workspace)
    xd, Qd, qd, betad, Ad = (to_device(v) for v in (x, Q, q, beta, A))
    o = cuda.device_array((B, T_out, f), dtype=x.dtype) if outs is None else outs[0]
    kw = {} if scan_block is None else {"block": scan_block}
    kw["workspace"] = workspace
    Z_given = None if outs is None or not return_Z else outs[1].reshape((B, T_out, f * f))
    if version == 1:
        ker = _elementwise(x.dtype)
        U = _alloc(workspace, "U", (B, T_out, f * f), x.dtype)
        ker.updates[_grid(U.size)](xd, Qd, s, U)
        a = _alloc(workspace, "A rows", (B, T_out, f * f), x.dtype)
        ker.fill_rows[_grid(a.size)](Ad, a)
        Z = Z_given if Z_given is not None else _alloc(None if return_Z else workspace, "Z", a.shape, x.dtype)
        linear_scan(a, U, None, "blelloch", out=Z, **kw)
        ker.readout[_grid(o.size)](xd, qd, betad, Z, s, o)
    else:
        if Z_given is not None:
            Z = Z_given
        elif return_Z:
            Z = cuda.device_array((B, T_out, f * f), dtype=x.dtype)
        else:
            Z = _alloc(workspace, "unused3", (1, 1, 1), x.dtype)
        if version == 2:
            _fused_kernel(x.dtype, f, w)[B, f * f](xd, Qd, qd, betad, Ad, s, return_Z, o, Z)
        else:
            n_seg, L = plan_segments(B, T_out, f, segments)
            ker = _segmented_kernels(x.dtype, f, w)
            S = _alloc(workspace, "unused3", (1, 1, 1), x.dtype)
            if n_seg > 1:
                # 1. each segment's own end state; 2. S[b, g] = A^L ⊙ S[b, g - 1] + Zloc[b, g], the state
                # after segment g; 3. (below) every segment rerun from the state before it.
                Zloc = _alloc(workspace, "Zloc", (B, n_seg, f * f), x.dtype)
                ker.reduce[B * n_seg, f * f](xd, Qd, Ad, s, L, Zloc)
                a = _alloc(workspace, "A^L", (B, n_seg, f * f), x.dtype)
                ker.fill_power[_grid(a.size)](Ad, L, a)
                S = linear_scan(a, Zloc, None, "blelloch", out=_alloc(workspace, "S", a.shape, x.dtype), **kw)
            ker.scan[B * n_seg, f * f](xd, Qd, qd, betad, Ad, s, L, S, n_seg > 1, return_Z, o, Z)
    if outs is not None:
        return outs if return_Z else outs[0]
    res = (o, Z.reshape((B, T_out, f, f))) if return_Z else (o,)
    res = res if on_device else tuple(v.copy_to_host() for v in res)
    return res if return_Z else res[0]


def gril_backward(x, Q, q, beta, A, w, s, Z, do, *, version=None, segments=None, scan_block=None, out=None,
                  workspace=None):
    """Gradients of ``gril_forward`` (numbered steps in the module docstring).

    Args:
        x, Q, q, beta, A, w, s: as in ``gril_forward``.
        Z: (B, T', f, f) the forward's states (``return_Z=True``, any forward version); do: (B, T', f) dL/do.
        version: 1 (elementwise kernels, the reverse Blelloch scan, atomic adds) or 2 (fused: one block per
            (b, segment), no atomics, deterministic). None: 2 when f <= 32, else 1.
        segments: version 2 only, as in ``gril_forward`` (``plan_segments``).
        scan_block: threads per block of the Blelloch scans (v1's, and v2's over segment totals).
        out: (dx, {"Q": dQ, "q": dq, "beta": dbeta, "A": dA}) device arrays to write the results into (inputs
            on the device), or None.
        workspace: a ``cuda_kernels.scan.Workspace`` for the temporaries, or None.
    Returns:
        dx (B, T, f) and {"Q": (w, w), "q": (w,), "beta": beta's shape, "A": (f, f)}, where x is.
    """
    on_device, (B, T, f, w, T_out) = _check(x, Q, q, beta, A, w, s, [("Z", Z), ("do", do)])
    if tuple(Z.shape) != (B, T_out, f, f):
        raise ValueError(f"Z must have shape (B, T', f, f) = {(B, T_out, f, f)}, got {tuple(Z.shape)}")
    if tuple(do.shape) != (B, T_out, f):
        raise ValueError(f"do must have shape (B, T', f) = {(B, T_out, f)}, got {tuple(do.shape)}")
    if version is None:
        version = 2 if f * f <= 1024 else 1
    elif not _is_int(version) or version not in BACKWARD_VERSIONS:
        raise ValueError(f"version must be 1 (elementwise, atomic adds) or 2 (fused, T split into segments), "
                         f"got {version!r}")
    if segments is not None and version != 2:
        raise ValueError(f"segments applies to version=2 only, got segments={segments!r} with version={version}")
    if version == 2:
        _fits_fused(f)
    dt = x.dtype
    outs = None
    if out is not None:
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[1], dict)
                and set(out[1]) == {"Q", "q", "beta", "A"}):
            raise ValueError('out must be (dx, {"Q": dQ, "q": dq, "beta": dbeta, "A": dA}) device arrays, got '
                             f"{type(out).__name__}")
        outs = _check_out((out[0],) + tuple(out[1][k] for k in ("Q", "q", "beta", "A")),
                          ("dx", "Q", "q", "beta", "A"), ((B, T, f), (w, w), (w,), tuple(beta.shape), (f, f)),
                          dt, on_device)
    _check_workspace(workspace)
    xd, Qd, qd, betad, Ad, Zd, dod = (to_device(v) for v in (x, Q, q, beta, A, Z, do))
    Zd = Zd.reshape((B, T_out, f * f))
    kw = {} if scan_block is None else {"block": scan_block}
    kw["workspace"] = workspace
    if outs is None:
        outs = (cuda.device_array((B, T, f), dtype=dt), cuda.device_array((w, w), dtype=dt),
                cuda.device_array((w,), dtype=dt), cuda.device_array(tuple(beta.shape), dtype=dt),
                cuda.device_array((f, f), dtype=dt))
    dx, dQ, dq, dbeta, dA = outs
    if version == 2:
        n_seg, L = plan_segments(B, T_out, f, segments)
        ker = _segmented_kernels(dt, f, w)
        Gs = _alloc(workspace, "unused3", (1, 1, 1), dt)
        if n_seg > 1:
            # 1. each segment's own G at its first window; 2. Gs[b, g] = Gloc[b, g] + A^L ⊙ Gs[b, g + 1],
            # the full adjoint at segment g's first window (the reverse scan; its h argument only feeds the
            # dL/da that is not used); 3. (below) every segment rerun from Gs[b, g + 1].
            Gloc = _alloc(workspace, "Gloc", (B, n_seg, f * f), dt)
            ker.reduce_backward[B * n_seg, f * f](xd, qd, betad, Ad, dod, s, L, Gloc)
            a = _alloc(workspace, "A^L", (B, n_seg, f * f), dt)
            ker.fill_power[_grid(a.size)](Ad, L, a)
            scan_out = tuple(_alloc(workspace, name, sh, dt) for name, sh in
                             (("dA^L", a.shape), ("Gs", a.shape), ("dh0 unused", (B, f * f))))
            _, Gs, _ = linear_scan_backward(a, Gloc, Gloc, None, "blelloch", out=scan_out, **kw)
        P = _alloc(workspace, "partials", (B * n_seg, f * f + w * w + w + beta.shape[0]), dt)
        ker.backward[B * n_seg, f * f](xd, Qd, qd, betad, Ad, Zd, dod, s, L, Gs, n_seg > 1, dx, P)
        ker.sum_partials[_grid(P.shape[1])](P, dA, dQ, dq, dbeta)
    else:
        _backward_v1(xd, Qd, qd, betad, Ad, Zd, dod, s, T, beta.shape, kw, outs)
    if out is not None:
        return out
    grads = {"Q": dQ, "q": dq, "beta": dbeta, "A": dA}
    if on_device:
        return dx, grads
    return dx.copy_to_host(), {k: v.copy_to_host() for k, v in grads.items()}


def _backward_v1(xd, Qd, qd, betad, Ad, Zd, dod, s, T, beta_shape, kw, outs):
    """v1: elementwise kernels, the reverse Blelloch scan, atomic adds for the sums over windows, into
    outs = (dx, dQ, dq, dbeta, dA)."""
    B, T_out, ff = Zd.shape
    f, w = xd.shape[2], Qd.shape[0]
    dt = xd.dtype
    ker = _elementwise(dt)
    workspace = kw["workspace"]
    dx, dQ, dq, dbeta, dA = outs
    for y in (dx, dQ, dq, dbeta):  # sums of atomic adds start from 0
        _zeros(y.shape, dt, y)
    # 4. readout
    dZ = _alloc(workspace, "dZ", (B, T_out, ff), dt)
    ker.readout_backward_rows[_grid(B * T_out * f)](xd, qd, betad, Zd, dod, s, dbeta, dZ)
    ker.readout_backward_cols[_grid(B * T_out * f)](xd, qd, betad, Zd, dod, s, dq, dx)
    # 3. the scan over windows: G = dL/dU, da = G ⊙ Z_{k-1}
    a = _alloc(workspace, "A rows", (B, T_out, ff), dt)
    ker.fill_rows[_grid(a.size)](Ad, a)
    scan_out = tuple(_alloc(workspace, name, sh, dt) for name, sh in
                     (("da", a.shape), ("G", a.shape), ("dh0 unused", (B, ff))))
    da, G, _ = linear_scan_backward(a, Zd, dZ, None, "blelloch", out=scan_out, **kw)
    ker.sum_over_windows[_grid(ff)](da, dA)
    # 2. U = C Q C^T, 1. scattered onto x
    ker.update_backward_x[_grid(B * T_out * f * w)](xd, Qd, G, s, dx)
    ker.update_backward_Q[_grid(B * T_out * w * w)](xd, G, s, dQ)
    return dx, dQ, dq, dbeta, dA
