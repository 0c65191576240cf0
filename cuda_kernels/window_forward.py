"""numba.cuda kernels of GRIL's windowed cross-product block, forward versions v1-v3.

Tian et al., "Learning in the Recurrent State: Gradient Descent with Linear Recurrent Networks"
(arXiv:2410.11687, Def. 4.2), with the conventions of ``minimal.cells.gril`` (the equations and the shape
glossary are in ``window.py``, whose ``gril_forward`` launches these kernels):

    U_k = C_k Q C_k^T,  Z_k = A ⊙ Z_{k-1} + U_k,  o_k = β ⊙ (Z_k r_k),  r_k = C_k q,  C_k[i, m] = x[k s + m, i]

    v1 unfused    ``elementwise_forward``: ``updates`` writes every U_k (B, T', f*f); the host runs
                  ``cuda_kernels.scan.linear_scan`` (Blelloch) over k with a_k = A (``fill_rows``); ``readout``
                  computes o. Three launches, U and Z in memory.
    v2 fused      ``fused_kernel``: one block per batch element, one thread per entry (i, j) of Z (f*f <= 1024
                  threads): for each window (``_window_step``), stage C_k in shared memory, compute U_k[i, j]
                  in registers, update Z[i, j] in a register and read out o_k. U is never written, Z only if
                  asked for (the backward needs it). Parallel over (b, i, j), sequential over windows: with
                  B = 1 one block runs all T' windows and the GPU idles. The readable version.
    v3 segmented  ``segmented_forward``: what v2 lacks: T is split across blocks. The windows are cut into
                  n_seg segments of L (``window.plan_segments``), one block per (b, segment). Z_k = A ⊙ Z_{k-1}
                  + U_k has a constant coefficient, so segment g maps the state before it to A^L ⊙ Z_in +
                  Zloc_g; reduce-then-scan:
                      1. ``reduce``: block (b, g) runs its windows from Z = 0 and writes Zloc_g (no barriers);
                      2. S_g = A^L ⊙ S_{g-1} + Zloc_g, the state after segment g: ``linear_scan`` (Blelloch)
                         over the (B, n_seg, f*f) totals with a = A^L (``fill_power``, repeated squaring);
                      3. ``scan``: v2's loop over segment g's windows from Z = S_{g-1}, writing o (and Z).
                  With one segment only pass 3 runs, from Z = 0: v2's single pass.

The device functions both directions use (``thread_entry``: an elementwise thread's entry; ``make_r_entry``:
r_k[j]; ``segment``: a segmented block's windows) and ``DEFAULT_BLOCK`` live here; ``window_backward.py``
imports them.
"""
from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

import numpy as np
from numba import cuda

from ._device import NB_TYPES, kernel

DEFAULT_BLOCK = 128          # threads per block of the elementwise kernels


@cuda.jit(device=True, inline=True)
def thread_entry(B, Tp, n1, n2):
    """(in range, b, k, i, j): this thread's entry of an array (B, Tp, n1, n2), one thread per entry (the
    elementwise kernels); threads past the end get False."""
    idx = cuda.grid(1)
    b, rest = divmod(idx, Tp * n1 * n2)
    k, rest = divmod(rest, n1 * n2)
    i, j = divmod(rest, n2)
    return idx < B * Tp * n1 * n2, b, k, i, j


@lru_cache(maxsize=None)
def make_r_entry(dtype):
    """A device function r_entry(x, q, b, t0, j, w) = r_k[j] = Σ_m C_k[j, m] q_m = Σ_m x[b, t0 + m, j] q_m for
    the window of width w starting at t0 = k s (the readouts of v1, the backward's pass 1 with its compile-time
    w, as ``_u_entry``)."""
    nbdt = NB_TYPES[np.dtype(dtype)]

    @cuda.jit(device=True, inline=True)
    def r_entry(x, q, b, t0, j, w):
        r = nbdt(0.0)
        for m in range(w):
            r += x[b, t0 + m, j] * q[m]
        return r

    return r_entry


@cuda.jit(device=True, inline=True)
def segment(Tp, n_seg, L):
    """(b, g, k0, k1) of this block of a segmented kernel: block b * n_seg + g runs windows k0 .. k1 - 1."""
    blk = cuda.blockIdx.x
    b = blk // n_seg
    g = blk - b * n_seg
    k0 = g * L
    return b, g, k0, min(k0 + L, Tp)


@lru_cache(maxsize=None)
def _Qq_stager(f, w):
    """A device function stage(Q, q, sQ, sq, tid): Q (w, w) and q (w,) into shared memory, strided over the f*f
    threads (there may be fewer threads than entries). w and f*f are compile-time constants, as in the kernels
    that call it: with w read from Q's shape, p // w became a division routine with a stack frame (ptxas, sm_90)."""
    FF, WW = f * f, w * w

    @cuda.jit(device=True, inline=True)
    def stage(Q, q, sQ, sq, tid):
        for p in range(tid, WW, FF):
            sQ[p] = Q[p // w, p % w]
        for p in range(tid, w, FF):
            sq[p] = q[p]

    return stage


@lru_cache(maxsize=None)
def _u_entry(dtype):
    """A device function u_entry(x, Q, b, t0, i, j, w) = U_k[i, j] = Σ_{m,n} C_k[i, m] Q[m, n] C_k[j, n], read
    from x for the window of width w starting at t0 = k s (v1's ``updates``, v3's ``reduce``). v3 passes its
    compile-time w: with w read from Q's shape there, ``reduce`` used local memory (ptxas, sm_90)."""
    nbdt = NB_TYPES[np.dtype(dtype)]

    @cuda.jit(device=True, inline=True)
    def u_entry(x, Q, b, t0, i, j, w):
        u = nbdt(0.0)
        for m in range(w):
            qc = nbdt(0.0)  # (Q C_k^T)[m, j]
            for n in range(w):
                qc += Q[m, n] * x[b, t0 + n, j]
            u += x[b, t0 + m, i] * qc
        return u

    return u_entry


# ---------------------------------------------------------------------------------------------------------
# v1: elementwise kernels, one thread per output entry, no barriers


@lru_cache(maxsize=None)
def elementwise_forward(dtype):
    """v1's kernels for one dtype (accumulators in that dtype: float32 stays float32)."""
    nbdt = NB_TYPES[np.dtype(dtype)]
    u_entry, r_entry = _u_entry(dtype), make_r_entry(dtype)

    @kernel(DEFAULT_BLOCK)
    def _updates(x, Q, s, U):
        """U[b, k, i*f + j] = Σ_{m,n} C_k[i, m] Q[m, n] C_k[j, n]."""
        B, Tp, ff = U.shape
        f = x.shape[2]
        ok, b, k, i, j = thread_entry(B, Tp, f, f)
        if not ok:
            return
        U[b, k, i * f + j] = u_entry(x, Q, b, k * s, i, j, Q.shape[0])

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
        ok, b, k, i, _ = thread_entry(B, Tp, f, 1)
        if not ok:
            return
        acc = nbdt(0.0)
        for j in range(f):
            acc += Z[b, k, i * f + j] * r_entry(x, q, b, k * s, j, q.shape[0])
        o[b, k, i] = beta[i if beta.shape[0] > 1 else 0] * acc

    return SimpleNamespace(updates=_updates, fill_rows=_fill_rows, readout=_readout)


# ---------------------------------------------------------------------------------------------------------
# v2: fused forward


@lru_cache(maxsize=None)
def _window_step(dtype, f, w):
    """One window k of the fused forward, the loop body of v2 and of v3's last pass: a device function run by
    every thread tid = i f + j of a block of f*f, on the block's shared arrays sC (f*w), sQ (w*w, filled),
    sq (w, filled), sr (f), sZ (f*f). Takes the thread's Z[i, j] before the window, returns it after, writes
    o[b, k] (and Z_out[b, k] if save_Z)."""
    nbdt = NB_TYPES[np.dtype(dtype)]
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
def fused_kernel(dtype, f, w):
    """Shared arrays need compile-time sizes: one kernel per (dtype, f, w)."""
    nbdt = NB_TYPES[np.dtype(dtype)]
    FW, FF, WW = f * w, f * f, w * w
    window = _window_step(dtype, f, w)
    stage_Qq = _Qq_stager(f, w)

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
        stage_Qq(Q, q, sQ, sq, tid)
        a_ij = A[i, j]
        z = nbdt(0.0)
        for k in range(o.shape[1]):
            z = window(x, beta, b, k, s, sC, sQ, sq, sr, sZ, tid, a_ij, z, save_Z, o, Z_out)

    return fused


# ---------------------------------------------------------------------------------------------------------
# v3: one block per (b, segment), reduce-then-scan over the segments


@lru_cache(maxsize=None)
def segmented_forward(dtype, f, w):
    """v3's kernels for one (dtype, f, w) (shared arrays need compile-time sizes).

    ``reduce`` and ``scan`` run a grid of B * n_seg blocks, block (b, g) = blockIdx b * n_seg + g, and one
    thread per entry p = i f + j of Z (f*f threads); segment g holds windows k0 = g L .. k1 - 1 =
    min(k0 + L, T') - 1 (``segment``). ``fill_power`` is the coefficient of a whole segment, which the
    backward's carry uses too.
    """
    nbdt = NB_TYPES[np.dtype(dtype)]
    FW, FF, WW = f * w, f * f, w * w
    window = _window_step(dtype, f, w)
    u_entry = _u_entry(dtype)
    stage_Qq = _Qq_stager(f, w)
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
            z = a_ij * z + u_entry(x, Q, b, k * s, i, j, w)
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
        stage_Qq(Q, q, sQ, sq, tid)
        a_ij = A[i, j]
        z = S[b, g - 1, tid] if carry and g > 0 else nbdt(0.0)
        for k in range(k0, k1):
            z = window(x, beta, b, k, s, sC, sQ, sq, sr, sZ, tid, a_ij, z, save_Z, o, Z_out)

    return SimpleNamespace(fill_power=fill_power, reduce=reduce, scan=scan)
