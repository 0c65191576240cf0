"""The vanilla min cells' one pass (``_min_scan_numba.mingru_scan_into``, ``minlstm_scan_into``) for float32 arrays,
the gates in float32 registers (Feng et al., "Were RNNs All We Needed?", Sec. 3.1-3.2; ``minimal.cells.mingru``,
``minimal.cells.minlstm``). The formulas, outputs, order and the recurrence (the storage dtype, no fused multiply-add)
are those kernels'; the gates, minLSTM's slopes and the step's derivatives j are float32 arithmetic, with
``exp_nonpositive_f32`` (twice the vector lanes of the float64 form and a shorter series) and float32 constants (a
Python float would promote the arithmetic to float64). So they are not the gates kernels' bit for bit: z is within a
few float32 roundings, minLSTM's f' and i' within a few roundings times 1 + |k_f| + |k_i|, since their exps' arguments
are differences such as k_i − k_f rounded to float32 first (tests/test_gates_numba.py bounds both against the
float64-register kernels). Their reverse passes are ``_min_scan_numba``'s, which read only the stored arrays.

``python bench/f32_gates.py`` times the two forms side by side on (64, 64, 192) float32 arrays: minGRU's pass
0.769-0.796 ms in float64 registers against 0.326-0.442 ms here, minLSTM's 1.477-1.543 against 0.705-0.884 ms, three
runs (``bench/results/train_cpu_2026-12-03_f32_gates.txt``, section 3, with the whole steps before and after).

Arrays: C-contiguous (B, T, H), time the outer loop and the channel the inner one; h0 (B, H).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..scan.numba_linear import all_zero
from ..scan.numba_log import exp_nonpositive_f32

__all__ = ["mingru_scan_into_f32", "minlstm_scan_into_f32", "normalised_scaled_f32"]

_F32 = np.float32
_ZERO_F32, _ONE_F32 = _F32(0.0), _F32(1.0)


@njit(cache=True, fastmath={"contract"})
def _exp_fma_f32(x):
    """The exp with fused multiply-adds, compiled apart as ``_min_scan_numba._exp_fma`` is."""
    return exp_nonpositive_f32(x)


@njit(cache=True, error_model="numpy")
def mingru_scan_into_f32(k_z, k_h, b_z, b_h, h0, z, j_z, h):
    """``mingru_scan_into`` for float32 arrays, σ and j_z in float32 registers (``_exp_fma_f32``); the
    recurrence as there. Returns whether every input and h_t is finite."""
    B, T, H = k_z.shape
    prev, a, b = np.empty(H, np.float32), np.empty(H, np.float32), np.empty(H, np.float32)
    w, kh = np.empty(H, np.float32), np.empty(H, np.float32)
    bad = np.zeros(H, np.float32)
    finite = True
    for i in range(B):
        for c in range(H):
            prev[c] = h0[i, c]
        for t in range(T):
            for c in range(H):
                kz = k_z[i, t, c] + b_z[c]
                bad[c] += _ZERO_F32 * kz
                e = _exp_fma_f32(-abs(kz))
                zc = (_ONE_F32 if kz >= _ZERO_F32 else e) / (_ONE_F32 + e)
                z[i, t, c] = zc
                w[c] = zc * (_ONE_F32 - zc)
                kh[c] = k_h[i, t, c] + b_h[c]
                a[c] = _ONE_F32 - zc
                b[c] = zc * kh[c]
            for c in range(H):
                j_z[i, t, c] = w[c] * (kh[c] - prev[c])
                v = a[c] * prev[c] + b[c]
                prev[c] = v
                h[i, t, c] = v
        for c in range(H):
            finite = finite and np.isfinite(h[i, T - 1, c])
    return finite and all_zero(bad)


@njit(cache=True, inline="always")
def normalised_scaled_f32(kf, ki):
    """``_gates_numba.normalised_scaled`` for float32 k_f, k_i in float32 arithmetic: (f', i', s_f, s_i)."""
    u, v = -kf, -ki
    zero_max = u <= _ZERO_F32 and v <= _ZERO_F32         # m = 0
    u_max = u >= v                                       # else m = −k_f (u_max) or −k_i
    eP = _exp_fma_f32(u if zero_max else (-u if u_max else u - v))
    eQ = _exp_fma_f32(v if zero_max else (v - u if u_max else -v))
    e0 = _ONE_F32 if zero_max else (eP if u_max else eQ)           # e^{−m}
    e_f = eP if zero_max or not u_max else _ONE_F32                # e^{−k_f − m}
    e_i = eQ if zero_max or u_max else _ONE_F32                    # e^{−k_i − m}
    A = e0 + e_f
    C = e0 + e_i
    r = _ONE_F32 / (A + C)
    f, i = C * r, A * r
    return f, i, f * r * e_f, i * r * e_i


@njit(cache=True, error_model="numpy")
def minlstm_scan_into_f32(k_f, k_i, k_h, b_f, b_i, b_h, h0, f_n, i_n, j_f, j_i, h):
    """``minlstm_scan_into`` for float32 arrays, the gates, slopes and j in float32 registers (above); the
    recurrence as there (the storage dtype, no fused multiply-add). Returns whether every input and h_t is finite."""
    B, T, H = k_f.shape
    prev, b = np.empty(H, np.float32), np.empty(H, np.float32)
    sf, si, kh = np.empty(H, np.float32), np.empty(H, np.float32), np.empty(H, np.float32)
    bad = np.zeros(H, np.float32)     # as in ``mingru_scan_into``
    finite = True
    for i in range(B):
        for c in range(H):
            prev[c] = h0[i, c]
        for t in range(T):
            for c in range(H):
                kf, ki = k_f[i, t, c] + b_f[c], k_i[i, t, c] + b_i[c]
                bad[c] += _ZERO_F32 * kf + _ZERO_F32 * ki
                fc, ic, sfc, sic = normalised_scaled_f32(kf, ki)
                sf[c] = sfc
                si[c] = sic
                f_n[i, t, c] = fc
                i_n[i, t, c] = ic
                kh[c] = k_h[i, t, c] + b_h[c]
                b[c] = ic * kh[c]
            for c in range(H):
                d = kh[c] - prev[c]
                j_f[i, t, c] = -sf[c] * d
                j_i[i, t, c] = si[c] * d
                s = f_n[i, t, c] * prev[c] + b[c]
                prev[c] = s
                h[i, t, c] = s
        for c in range(H):
            finite = finite and np.isfinite(h[i, T - 1, c])
    return finite and all_zero(bad)
