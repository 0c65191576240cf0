"""The min cells' gates fused with their scans (Feng et al., "Were RNNs All We Needed?", Sec. 3.1-3.2, App. B.3;
``minimal.cells.mingru``, ``minimal.cells.minlstm``): one pass computes the gates and runs the recurrence, one
reverse pass runs the adjoint and the gates' backward, with no a, b, da, db arrays in memory between them. The
cells call them in parallel mode with the default CPU scan (``_min_modes.scan_fused``); the gates-then-scan path
(``_gates_numba`` and ``minimal.scan``) stays the reference they are tested against.

Each forward kernel computes what the two passes it replaces compute, in the same order: the gates as
``_gates_numba``'s kernels (float64 registers), a and b (or log a, log b) rounded to the storage dtype as those
kernels store them, and the recurrence and its adjoint as ``minimal.scan.numba_linear`` / ``numba_log`` do: the
vanilla state and adjoint in the storage dtype without fused multiply-adds, the log-space ones in float64; so does
each log-space reverse pass. So a log-space float32 cell's states and gradients are bit for bit those of the two
passes (tests/test_gates_numba.py), and a vanilla cell's gates and states are too, its exps taken as the gates
kernels take them (``_exp_fma``), in float64 storage. A vanilla float32 cell runs their twins in ``_min_scan_f32``
instead, whose gates are float32 arithmetic (twice the vector lanes, a shorter exp series): z within a few float32
roundings of the float64-register gates, minLSTM's f' and i' within a few roundings times 1 + |k_f| + |k_i| (their
exps' arguments are differences rounded to float32; tests/test_gates_numba.py bounds both), the state still the
storage dtype's, so a float32 counter whose 1 − h_t reaches float32's resolution stops there, as in
``notebooks/minrnn_c_selective_copy.ipynb``. The vanilla kernels also add the biases and keep each step's
derivatives for the reverse pass (below), whose gradients into k_z (k_f, k_i) then differ from the two passes'
in the last bits.

Arrays: C-contiguous (B, T, H), time the outer loop and the channel the inner one; h0 or log h0 (B, H).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..scan.numba_linear import all_zero
from ..scan.numba_log import exp_nonpositive, logaddexp
from ._gates_numba import (dlog_g, log_coefficients, normalised, normalised_exponents, normalised_from_exps,
                           sigmoid_neg)

__all__ = ["mingru_scan_into", "mingru_scan_backward", "minlstm_scan_into", "minlstm_scan_backward",
           "mingru_log_scan_into", "mingru_log_scan_backward", "minlstm_log_scan_into", "minlstm_log_scan_backward"]


# --- vanilla (``numba_linear.sequential_into`` / ``sequential_backward``'s arithmetic) -----------------------------
# The forward also stores the local derivatives of one step, ∂h_t/∂k_t for each pre-activation k (a diagonal
# Jacobian: h_t = a_t h_{t−1} + b_t is elementwise), so that the reverse pass is the adjoint g_t times them and reads
# neither k_h nor h_{t−1}:
#   minGRU   ∂h_t/∂k_z,t = z_t (1 − z_t)(h̃_t − h_{t−1}),   ∂h_t/∂k_h,t = z_t
#   minLSTM  ∂h_t/∂k_f,t = −s_f (h̃_t − h_{t−1}),   ∂h_t/∂k_i,t = s_i (h̃_t − h_{t−1}),   ∂h_t/∂k_h,t = i'_t
# (s_f = ∂f'/∂k_f, s_i = ∂i'/∂k_i, and ∂i'/∂k_f = −s_f, ∂f'/∂k_i = −s_i since f' + i' = 1). The two-pass path's
# (d_b h̃_t − d_a) with d_a = g_t h_{t−1} rounded first is the same product, g_t (h̃_t − h_{t−1}), rounded
# differently: here h̃_t − h_{t−1} is taken in float64 from the stored h̃_t and h_{t−1}, times the float64 z (1 − z)
# or slope, and rounded once into j; the reverse pass rounds g_t j once more.
# The reverse pass runs the batch rows and the channels in descending order as well as time, so that it reads and
# writes each C-contiguous (B, T, H) array as one descending stream, which the CPU's prefetchers follow; rows taken
# from the last one back and each read forward are no stream, and in a training step, where these arrays come from
# main memory, that pass was the slower for it (bench/results/train_cpu_2026-12-01_reverse.txt,
# bench/reverse_order.py). Batch rows and channels are independent: the same numbers in any order.
# The gates' exps with fused multiply-adds, the recurrence without: ``fastmath`` flags are set per function, and
# this exp is compiled apart with LLVM's contract flag, which each of its instructions keeps when LLVM inlines it
# into the kernels below (unflagged; nothing forces the inlining, but the kernels stay vectorised and faster, as
# timed below, which a call per element would not). So σ, f' and i' here are the gates kernels' (``_gates_numba``,
# contracted throughout) bit for bit, in float64 as in float32 storage (float32 cells run ``_min_scan_f32``), in
# less time: (64, 64, 192) float32, ten processes
# of each in turn, min / median of their best of 60 calls, minGRU's one pass 1.76 / 1.90 -> 1.49 / 1.69 ms,
# minLSTM's 3.54 / 3.66 -> 3.10 / 3.24 ms (an AMD EPYC, family 25; within a whole step that is less than the step's
# noise).
@njit(cache=True, fastmath={"contract"})
def _exp_fma(x):
    return exp_nonpositive(x)


@njit(cache=True, error_model="numpy")
def mingru_scan_into(k_z, k_h, b_z, b_h, h0, z, j_z, h):
    """Vanilla minGRU's gates and recurrence in one pass over C-contiguous (B, T, H) arrays: k_z + b_z and
    k_h + b_h (the biases (H,), added in the storage dtype as ``_min_modes.affine`` adds them), z_t = σ(k_z,t),
    h_t = (1 − z_t) h_{t−1} + z_t k_h,t from h0 (B, H); writes z, j_z = ∂h_t/∂k_z,t (above) and h. Time is the
    outer loop and the channel the inner one (``minimal.scan.numba_linear.sequential_into``). Returns whether every
    input and every h_t is finite: NaN and inf are absorbing here as in the scan, so the last step's states decide
    it, and a pre-activation of ±inf, which a saturated σ would turn into a finite gate, is caught on its own."""
    B, T, H = k_z.shape
    prev, a, b = np.empty(H, h.dtype), np.empty(H, h.dtype), np.empty(H, h.dtype)
    w, kh = np.empty(H, np.float64), np.empty(H, np.float64)     # z (1 − z) and h̃ of step t
    bad = np.zeros(H, np.float64)     # NaN once a pre-activation is not finite (0 · ±inf): a saturated gate would hide it
    finite = True
    for i in range(B):
        for c in range(H):
            prev[c] = h0[i, c]
        for t in range(T):
            for c in range(H):
                kz = np.float64(k_z[i, t, c] + b_z[c])
                bad[c] += 0.0 * kz
                e = _exp_fma(-abs(kz))
                zc = (1.0 if kz >= 0.0 else e) / (1.0 + e)     # ``sigmoid``
                z[i, t, c] = zc
                zs = np.float64(z[i, t, c])            # as stored: the z the two-pass backward reads
                w[c] = zs * (1.0 - zs)
                kh[c] = np.float64(k_h[i, t, c] + b_h[c])
                a[c] = 1.0 - zc
                b[c] = zc * kh[c]
            for c in range(H):
                j_z[i, t, c] = w[c] * (kh[c] - np.float64(prev[c]))
                v = a[c] * prev[c] + b[c]
                prev[c] = v
                h[i, t, c] = v
        for c in range(H):
            finite = finite and np.isfinite(h[i, T - 1, c])
    return finite and all_zero(bad)


@njit(cache=True, error_model="numpy")
def mingru_scan_backward(z, j_z, dh, dk_z, dk_h):
    """Backward of ``mingru_scan_into`` in one reverse pass, given dh = dL/dh (B, T, H): the adjoint
    g_t = dh_t + (1 − z_{t+1}) g_{t+1} (``numba_linear.sequential_backward``) times the step's derivatives:
    dk_z = g_t j_z, dk_h = g_t z_t."""
    B, T, H = z.shape
    g, a_next = np.empty(H, dh.dtype), np.empty(H, dh.dtype)     # g_{t+1}, a_{t+1} = 1 − z_{t+1}
    for i in range(B - 1, -1, -1):     # every loop descending (comment above)
        for c in range(H):
            g[c] = 0.0
            a_next[c] = 0.0
        for t in range(T - 1, -1, -1):
            z_t, j_t, dh_t, dkz_t, dkh_t = z[i, t], j_z[i, t], dh[i, t], dk_z[i, t], dk_h[i, t]
            for c in range(H - 1, -1, -1):
                gc = dh_t[c] + a_next[c] * g[c]
                zc = np.float64(z_t[c])
                dkz_t[c] = np.float64(gc) * np.float64(j_t[c])
                dkh_t[c] = np.float64(gc) * zc
                g[c] = gc
                a_next[c] = 1.0 - zc


@njit(cache=True, error_model="numpy")
def minlstm_scan_into(k_f, k_i, k_h, b_f, b_i, b_h, h0, f_n, i_n, j_f, j_i, h):
    """Vanilla minLSTM's normalised gates (``minlstm_gates``) and recurrence h_t = f'_t h_{t−1} + i'_t k_h,t in one
    pass over C-contiguous (B, T, H) arrays from h0 (B, H), the biases (H,) added as in ``mingru_scan_into``;
    writes f_n = f', i_n = i', j_f = ∂h_t/∂k_f,t, j_i = ∂h_t/∂k_i,t (above, from the slopes of
    ``normalised_scaled``) and h. As ``mingru_scan_into``."""
    B, T, H = k_f.shape
    prev, b = np.empty(H, h.dtype), np.empty(H, h.dtype)
    sf, si, kh = np.empty(H, np.float64), np.empty(H, np.float64), np.empty(H, np.float64)
    bad = np.zeros(H, np.float64)     # as in ``mingru_scan_into``
    finite = True
    for i in range(B):
        for c in range(H):
            prev[c] = h0[i, c]
        for t in range(T):
            for c in range(H):
                kf, ki = np.float64(k_f[i, t, c] + b_f[c]), np.float64(k_i[i, t, c] + b_i[c])
                bad[c] += 0.0 * kf + 0.0 * ki
                p, q = normalised_exponents(kf, ki)
                fc, ic, sfc, sic = normalised_from_exps(kf, ki, _exp_fma(p), _exp_fma(q))
                sf[c] = sfc
                si[c] = sic
                f_n[i, t, c] = fc
                i_n[i, t, c] = ic
                kh[c] = np.float64(k_h[i, t, c] + b_h[c])
                b[c] = ic * kh[c]
            for c in range(H):
                d = kh[c] - np.float64(prev[c])
                j_f[i, t, c] = -sf[c] * d
                j_i[i, t, c] = si[c] * d
                s = f_n[i, t, c] * prev[c] + b[c]
                prev[c] = s
                h[i, t, c] = s
        for c in range(H):
            finite = finite and np.isfinite(h[i, T - 1, c])
    return finite and all_zero(bad)


@njit(cache=True, error_model="numpy")
def minlstm_scan_backward(f_n, i_n, j_f, j_i, dh, dk_f, dk_i, dk_h):
    """Backward of ``minlstm_scan_into`` in one reverse pass, given dh = dL/dh (B, T, H): the adjoint
    g_t = dh_t + f'_{t+1} g_{t+1} times the step's derivatives: dk_f = g_t j_f, dk_i = g_t j_i, dk_h = g_t i'_t
    (no exp here, and neither k_h nor h read)."""
    B, T, H = f_n.shape
    g, a_next = np.empty(H, dh.dtype), np.empty(H, dh.dtype)     # g_{t+1}, f'_{t+1}
    for i in range(B - 1, -1, -1):
        for c in range(H):
            g[c] = 0.0
            a_next[c] = 0.0
        for t in range(T - 1, -1, -1):
            f_t, i_t, jf_t, ji_t, dh_t = f_n[i, t], i_n[i, t], j_f[i, t], j_i[i, t], dh[i, t]
            dkf_t, dki_t, dkh_t = dk_f[i, t], dk_i[i, t], dk_h[i, t]
            for c in range(H - 1, -1, -1):
                gc = dh_t[c] + a_next[c] * g[c]
                dkh_t[c] = np.float64(gc) * np.float64(i_t[c])
                dkf_t[c] = np.float64(gc) * np.float64(jf_t[c])
                dki_t[c] = np.float64(gc) * np.float64(ji_t[c])
                g[c] = gc
                a_next[c] = f_t[c]


# --- log space (``numba_log.log_scan_into`` / ``_log_scan_backward``'s arithmetic) ------------------------------
@njit(cache=True, inline="always")
def _log_scan_row(la, lb, l0, has_h0, first, prev, bad, log_h):
    """One step t of the log scan over the channels (H,): log h_t = logaddexp(log a_t + log h_{t−1}, log b_t) from
    the stored log a_t, log b_t (``la``, ``lb``), the float64 carry ``prev`` (log h0 ``l0`` at the first step,
    ignored unless ``has_h0``); writes ``log_h`` and the carry, and accumulates 0 × every value into ``bad``."""
    for c in range(la.shape[0]):
        a, b = np.float64(la[c]), np.float64(lb[c])
        if first:
            l_0 = np.float64(l0[c])
            bad[c] += 0.0 * l_0 if has_h0 else 0.0
            v = logaddexp(a + l_0, b) if has_h0 else b
        else:
            v = logaddexp(a + prev[c], b)
        bad[c] += 0.0 * a + 0.0 * b + 0.0 * v
        prev[c] = v
        log_h[c] = v


@njit(cache=True, inline="always")
def _log_adjoint_row(la, lb, l_t, l_prev, has_prev, dh, h, G, w_next, bad, dla, dlb):
    """One reverse step t of the log scan's adjoint over the channels (H,): dL/dlog h_t = dh_t h_t,
    G_t = dL/dlog h_t + w_{t+1} G_{t+1} (``G``, ``w_next``: float64 carries), the shares w_t = exp(log a_t +
    log h_{t−1} − log h_t) (0 at t = 0 without h0) and v_t = exp(log b_t − log h_t), written as dlog a = w G and
    dlog b = v G into ``dla``, ``dlb`` (the storage dtype); 0 × every value accumulated into ``bad``."""
    for c in range(la.shape[0]):
        a, b = np.float64(la[c]), np.float64(lb[c])
        lt = np.float64(l_t[c])
        dl = np.float64(dh[c] * h[c])
        bad[c] += 0.0 * a + 0.0 * b + 0.0 * lt + 0.0 * dl
        G[c] = dl + w_next[c] * G[c]
        bad[c] += 0.0 * G[c]
        w = exp_nonpositive(a + np.float64(l_prev[c]) - lt)
        w = w if has_prev else 0.0
        v = exp_nonpositive(b - lt)
        dla[c] = w * G[c]
        dlb[c] = v * G[c]
        w_next[c] = w


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def mingru_log_scan_into(k_z, k_h, log_h0, has_h0, z, h_tilde, log_h):
    """Log-space minGRU (App. B.3): the gates of ``_gates_numba.mingru_log_gates`` (z = σ(k_z), log a =
    −softplus(k_z), log b = −softplus(−k_z) + log g(k_h), h̃ = g(k_h)) and log h_t = logaddexp(log a_t +
    log h_{t−1}, log b_t) from log h0 (ignored, h0 = 0, unless ``has_h0``), in one pass; writes z, h_tilde and
    log_h. Returns whether every log a, log b, log h (and log h0) was finite, accumulated as the scan does."""
    B, T, H = k_z.shape
    prev = np.empty(H, np.float64)
    la, lb = np.empty(H, log_h.dtype), np.empty(H, log_h.dtype)     # log a_t, log b_t as stored by the gates
    bad = np.zeros(H, np.float64)
    for i in range(B):
        for t in range(T):
            for c in range(H):
                kz = np.float64(k_z[i, t, c])
                e = exp_nonpositive(-abs(kz))
                z[i, t, c] = (1.0 if kz >= 0.0 else e) / (1.0 + e)
                la[c], lb[c], h_tilde[i, t, c] = log_coefficients(kz, e, np.float64(k_h[i, t, c]))
            _log_scan_row(la, lb, log_h0[i], has_h0, t == 0, prev, bad, log_h[i, t])
    return all_zero(bad)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def mingru_log_scan_backward(k_z, k_h, z, log_h, h, dh, log_h0, has_h0, dk_z, dk_h):
    """Backward of ``mingru_log_scan_into`` in one reverse pass, given dh = dL/dh (B, T, H): log a, log b
    recomputed, dL/dlog h_t = dh_t h_t, the adjoint G_t = dL/dlog h_t + w_{t+1} G_{t+1} with the shares
    w_t = exp(log a_t + log h_{t−1} − log h_t), v_t = exp(log b_t − log h_t) (``minimal.scan.log_scan_backward``),
    dlog a = w G, dlog b = v G, and the gates' backward (``mingru_gates_backward``, log space):
    dk_z = dlog b (1 − z) − dlog a z, dk_h = dlog b (log g)'(k_h). Returns whether every input and G_t was finite."""
    B, T, H = k_z.shape
    G = np.empty(H, np.float64)
    w_next = np.empty(H, np.float64)
    la, lb = np.empty(H, log_h.dtype), np.empty(H, log_h.dtype)
    dla, dlb = np.empty(H, log_h.dtype), np.empty(H, log_h.dtype)   # dlog a, dlog b as the scan stores them
    bad = np.zeros(H, np.float64)
    for i in range(B):
        for c in range(H):
            G[c] = 0.0
            w_next[c] = 0.0
            bad[c] += 0.0 * np.float64(log_h0[i, c]) if has_h0 else 0.0
        for t in range(T - 1, -1, -1):
            l_prev = log_h[i, t - 1] if t > 0 else log_h0[i]
            has_prev = t > 0 or has_h0
            for c in range(H):
                kz = np.float64(k_z[i, t, c])
                e = exp_nonpositive(-abs(kz))
                la[c], lb[c], _ = log_coefficients(kz, e, np.float64(k_h[i, t, c]))
            _log_adjoint_row(la, lb, log_h[i, t], l_prev, has_prev, dh[i, t], h[i, t], G, w_next, bad, dla, dlb)
            for c in range(H):
                zc, da, db = np.float64(z[i, t, c]), np.float64(dla[c]), np.float64(dlb[c])
                dk_z[i, t, c] = db * (1.0 - zc) - da * zc
                dk_h[i, t, c] = db * dlog_g(np.float64(k_h[i, t, c]))
    return all_zero(bad)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_log_scan_into(k_f, k_i, k_h, log_h0, has_h0, f_n, i_n, h_tilde, log_h):
    """Log-space minLSTM (App. B.3): the gates of ``_gates_numba.minlstm_log_gates`` (f', i', log a = −softplus(δ),
    log b = −softplus(−δ) + log g(k_h), h̃ = g(k_h)) and the log scan, in one pass, as ``mingru_log_scan_into``;
    writes f_n, i_n, h_tilde and log_h."""
    B, T, H = k_f.shape
    prev = np.empty(H, np.float64)
    la, lb = np.empty(H, log_h.dtype), np.empty(H, log_h.dtype)
    bad = np.zeros(H, np.float64)
    for i in range(B):
        for t in range(T):
            for c in range(H):
                fc, ic, d, e = normalised(np.float64(k_f[i, t, c]), np.float64(k_i[i, t, c]))
                f_n[i, t, c] = fc
                i_n[i, t, c] = ic
                la[c], lb[c], h_tilde[i, t, c] = log_coefficients(d, e, np.float64(k_h[i, t, c]))
            _log_scan_row(la, lb, log_h0[i], has_h0, t == 0, prev, bad, log_h[i, t])
    return all_zero(bad)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_log_scan_backward(k_f, k_i, k_h, f_n, i_n, log_h, h, dh, log_h0, has_h0, dk_f, dk_i, dk_h):
    """Backward of ``minlstm_log_scan_into`` in one reverse pass, as ``mingru_log_scan_backward``, with the gates'
    backward of ``minlstm_log_gates_backward``: dδ = dlog b f' − dlog a i', dk_h = dlog b (log g)'(k_h),
    dk_f = −dδ σ(−k_f), dk_i = dδ σ(−k_i)."""
    B, T, H = k_f.shape
    G = np.empty(H, np.float64)
    w_next = np.empty(H, np.float64)
    la, lb = np.empty(H, log_h.dtype), np.empty(H, log_h.dtype)
    dla, dlb = np.empty(H, log_h.dtype), np.empty(H, log_h.dtype)
    bad = np.zeros(H, np.float64)
    for i in range(B):
        for c in range(H):
            G[c] = 0.0
            w_next[c] = 0.0
            bad[c] += 0.0 * np.float64(log_h0[i, c]) if has_h0 else 0.0
        for t in range(T - 1, -1, -1):
            l_prev = log_h[i, t - 1] if t > 0 else log_h0[i]
            has_prev = t > 0 or has_h0
            for c in range(H):
                _, _, d, e = normalised(np.float64(k_f[i, t, c]), np.float64(k_i[i, t, c]))
                la[c], lb[c], _ = log_coefficients(d, e, np.float64(k_h[i, t, c]))
            _log_adjoint_row(la, lb, log_h[i, t], l_prev, has_prev, dh[i, t], h[i, t], G, w_next, bad, dla, dlb)
            for c in range(H):
                fc, ic = np.float64(f_n[i, t, c]), np.float64(i_n[i, t, c])
                da, db = np.float64(dla[c]), np.float64(dlb[c])
                dd = db * fc - da * ic
                dk_h[i, t, c] = db * dlog_g(np.float64(k_h[i, t, c]))
                dk_f[i, t, c] = -dd * sigmoid_neg(np.float64(k_f[i, t, c]))
                dk_i[i, t, c] = dd * sigmoid_neg(np.float64(k_i[i, t, c]))
    return all_zero(bad)
