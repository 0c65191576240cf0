"""numba.cuda kernels for GRIL's windowed cross-product block, forward and backward.

Tian et al., "Learning in the Recurrent State: Gradient Descent with Linear Recurrent Networks"
(arXiv:2410.11687, Def. 4.2), with the conventions of ``minimal.cells.gril``:

    C_k = [x_{ks}, ..., x_{ks+w-1}]     (f, w)   C_k[i, m] = x[k s + m, i]; column w-1 is the newest token
    U_k = C_k Q C_k^T                   (f, f)
    Z_k = A ⊙ Z_{k-1} + U_k, Z_{-1} = 0  (f, f)
    o_k = β ⊙ (Z_k r_k),  r_k = C_k q    (f,)     β is (1,) (scalar) or (f,)

Windows start only when full, k = 0 .. T'-1 with T' = (T - w) / s + 1, and (T - w) % s == 0 is required.
Glossary: B batch, T input steps, f features, w window width, s stride, T' windows.

Kernel versions (the unfused one is the reference the fused one is tested against):

    v1 unfused  ``updates`` writes every U_k (B, T', f*f); ``cuda_kernels.scan.linear_scan`` (Blelloch)
                runs Z over k with a_k = A; ``readout`` computes o. Three launches, U and Z in memory.
    v2 fused    one block per batch element, one thread per entry (i, j) of Z (f*f <= 1024 threads):
                for each window, stage C_k in shared memory, compute U_k[i, j] in registers, update
                Z[i, j] in a register and read out o_k. U is never written, Z only if asked for
                (the backward needs it). Parallel over (b, i, j), sequential over windows.

Backward (the adjoint of the forward; the same equations as ``minimal.cells.gril.backward``):
    4. r = C q, m = Z r:     dβ = Σ do ⊙ m,  dZ_k += (β ⊙ do_k) r_k^T,  dr_k = Z_k^T (β ⊙ do_k),
                             dq = Σ_k C_k^T dr_k,  dC_k += dr_k q^T
    3. Z = scan(A, U):       G_k = dZ_k + A ⊙ G_{k+1} (``linear_scan_backward``), dA = Σ_k G_k ⊙ Z_{k-1}
    2. U = C Q C^T:          dQ = Σ_k C_k^T G_k C_k,  dC_k += G_k C_k Q^T + G_k^T C_k Q
    1. C = window(x):        dx[k s + m, i] += dC_k[i, m] (windows overlap when s < w: atomic adds)
Parameter gradients are sums over (b, k) made with atomic adds, so their last bits depend on the order
of the additions.
"""
from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

import numpy as np
from numba import cuda

from .scan import _NB_TYPES, is_device, linear_scan, linear_scan_backward, to_device

__all__ = ["gril_forward", "gril_backward", "n_windows", "to_device", "DEFAULT_BLOCK"]

DEFAULT_BLOCK = 128  # threads per block of the elementwise kernels


# ---------------------------------------------------------------------------------------------------------
# v1 and the backward: elementwise kernels, one thread per output entry, no barriers


@lru_cache(maxsize=None)
def _elementwise(dtype):
    """The elementwise kernels for one dtype (accumulators in that dtype: float32 stays float32)."""
    nbdt = _NB_TYPES[np.dtype(dtype)]

    @cuda.jit
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


    @cuda.jit
    def _fill_rows(A, a):
        """a[b, k, :] = A.ravel(): the scan takes one coefficient per step, so A is written out explicitly."""
        B, Tp, ff = a.shape
        idx = cuda.grid(1)
        if idx < B * Tp * ff:
            a[idx // (Tp * ff), (idx // ff) % Tp, idx % ff] = A[(idx % ff) // A.shape[1], idx % A.shape[1]]


    @cuda.jit
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


    @cuda.jit
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


    @cuda.jit
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


    @cuda.jit
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


    @cuda.jit
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


    @cuda.jit
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


    @cuda.jit
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
def _fused_kernel(dtype, f, w):
    """Shared arrays need compile-time sizes: one kernel per (dtype, f, w)."""
    nbdt = _NB_TYPES[np.dtype(dtype)]
    FW, FF, WW = f * w, f * f, w * w

    @cuda.jit
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
            t0 = k * s
            for p in range(tid, FW, FF):  # consecutive threads read consecutive features of one token
                sC[(p % f) * w + p // f] = x[b, t0 + p // f, p % f]
            # C_k (and, at k = 0, Q and q) must be complete before any thread multiplies with it.
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

    return fused


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


def _zeros(shape, dtype):
    y = cuda.device_array(shape, dtype=dtype)
    _elementwise(dtype).zero[_grid(y.size)](y.reshape(y.size))
    return y


def gril_forward(x, Q, q, beta, A, w, s, *, fused=True, return_Z=False, scan_block=None):
    """The GRIL block on the GPU: o_k = β ⊙ (Z_k C_k q), Z_k = A ⊙ Z_{k-1} + C_k Q C_k^T.

    Args:
        x: (B, T, f) float32 or float64; Q: (w, w); q: (w,); beta: (1,) or (f,); A: (f, f), one dtype;
            NumPy or device arrays (results go where x is).
        w: window width (= Q's size); s: stride, with w <= T and (T - w) % s == 0.
        fused: v2 (one kernel, needs f*f <= 1024) or v1 (updates, Blelloch scan, readout).
        return_Z: also return the states Z (B, T', f, f), which ``gril_backward`` needs.
        scan_block: threads per block of the v1 scan (``cuda_kernels.scan``'s default if None).
    Returns:
        o: (B, T', f), o[:, k] belongs to input step k s + w - 1; or (o, Z) if return_Z.
    """
    on_device, (B, T, f, w, T_out) = _check(x, Q, q, beta, A, w, s)
    xd, Qd, qd, betad, Ad = (to_device(v) for v in (x, Q, q, beta, A))
    o = cuda.device_array((B, T_out, f), dtype=x.dtype)
    ker = _elementwise(x.dtype)
    if fused:
        if f * f > 1024:
            raise ValueError(f"x must have f <= 32 features for the fused kernel (one thread per entry of "
                             f"Z), got f={f}; use fused=False")
        Z = cuda.device_array((B, T_out, f * f) if return_Z else (1, 1, 1), dtype=x.dtype)
        _fused_kernel(x.dtype, f, w)[B, f * f](xd, Qd, qd, betad, Ad, s, return_Z, o, Z)
    else:
        U = cuda.device_array((B, T_out, f * f), dtype=x.dtype)
        ker.updates[_grid(U.size)](xd, Qd, s, U)
        a = cuda.device_array((B, T_out, f * f), dtype=x.dtype)
        ker.fill_rows[_grid(a.size)](Ad, a)
        kw = {} if scan_block is None else {"block": scan_block}
        Z = linear_scan(a, U, None, "blelloch", **kw)
        ker.readout[_grid(o.size)](xd, qd, betad, Z, s, o)
    out = (o, Z.reshape((B, T_out, f, f))) if return_Z else (o,)
    out = out if on_device else tuple(v.copy_to_host() for v in out)
    return out if return_Z else out[0]


def gril_backward(x, Q, q, beta, A, w, s, Z, do, *, scan_block=None):
    """Gradients of ``gril_forward`` (numbered steps in the module docstring).

    Args:
        x, Q, q, beta, A, w, s: as in ``gril_forward``.
        Z: (B, T', f, f) the forward's states (``return_Z=True``); do: (B, T', f) dL/do.
    Returns:
        dx (B, T, f) and {"Q": (w, w), "q": (w,), "beta": beta's shape, "A": (f, f)}, where x is.
    """
    on_device, (B, T, f, w, T_out) = _check(x, Q, q, beta, A, w, s, [("Z", Z), ("do", do)])
    if tuple(Z.shape) != (B, T_out, f, f):
        raise ValueError(f"Z must have shape (B, T', f, f) = {(B, T_out, f, f)}, got {tuple(Z.shape)}")
    if tuple(do.shape) != (B, T_out, f):
        raise ValueError(f"do must have shape (B, T', f) = {(B, T_out, f)}, got {tuple(do.shape)}")
    xd, Qd, qd, betad, Ad, Zd, dod = (to_device(v) for v in (x, Q, q, beta, A, Z, do))
    Zd = Zd.reshape((B, T_out, f * f))
    dt = x.dtype
    ker = _elementwise(dt)
    dx = _zeros((B, T, f), dt)
    dQ, dq, dbeta = _zeros((w, w), dt), _zeros((w,), dt), _zeros(tuple(beta.shape), dt)
    dA = cuda.device_array((f, f), dtype=dt)
    # 4. readout
    dZ = cuda.device_array((B, T_out, f * f), dtype=dt)
    ker.readout_backward_rows[_grid(B * T_out * f)](xd, qd, betad, Zd, dod, s, dbeta, dZ)
    ker.readout_backward_cols[_grid(B * T_out * f)](xd, qd, betad, Zd, dod, s, dq, dx)
    # 3. the scan over windows: G = dL/dU, da = G ⊙ Z_{k-1}
    a = cuda.device_array((B, T_out, f * f), dtype=dt)
    ker.fill_rows[_grid(a.size)](Ad, a)
    kw = {} if scan_block is None else {"block": scan_block}
    da, G, _ = linear_scan_backward(a, Zd, dZ, None, "blelloch", **kw)
    ker.sum_over_windows[_grid(f * f)](da, dA)
    # 2. U = C Q C^T, 1. scattered onto x
    ker.update_backward_x[_grid(B * T_out * f * w)](xd, Qd, G, s, dx)
    ker.update_backward_Q[_grid(B * T_out * w * w)](xd, G, s, dQ)
    grads = {"Q": dQ, "q": dq, "beta": dbeta, "A": dA}
    if on_device:
        return dx, grads
    return dx.copy_to_host(), {k: v.copy_to_host() for k, v in grads.items()}
