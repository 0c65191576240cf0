"""The log-space min cells' linear form (``_min_log_linear.mingru_log_linear_into``, ``minlstm_log_linear_into``)
for float32 arrays, the gates in float32 registers (Feng et al., "Were RNNs All We Needed?", App. B.3;
``minimal.cells.mingru``, ``minimal.cells.minlstm``).

What stays as there: the outputs and their order, the biases added in the storage dtype, the state h_t = a_t h_{t−1}
+ b_t carried in float64 (a_t and b_t widened exactly), the check that every b_t is at least float32's smallest
normal number and every input finite (False leaves the cell to the log-space pass), and the reverse passes, which
read only the stored arrays. What is float32 arithmetic here: the gates σ(±k_z), g(k_h) and g'(k_h), minLSTM's f',
i' and slopes (``_min_scan_f32.normalised_scaled_f32``), b_t = z_t h̃_t or i'_t h̃_t, and log h, taken of the stored
float32 h (``log_normal_f32``); the step's derivatives j_z, j_f, j_i multiply a float32 slope by h̃_t − h_{t−1}
formed in float64 from the carry, as there. The exps are ``exp_nonpositive_f32`` (twice the vector lanes of the
float64 form, a shorter series), where the float64 kernels spend two or three float64 exps and a float64 log an
element. So the gates are within a few float32 roundings of the float64-register kernels' (minLSTM's f', i' within
a few roundings times 1 + |k_f| + |k_i|, as in ``_min_scan_f32``), and h within a few roundings of its largest
entry: tests/test_min_log_linear.py bounds both, and holds the cells' float32 h, dx and gradients to the same bound
against the float64 reference as the float64-register kernels. One more difference: the float32 gates' a_t + b_t / h̃_t
can round above 1, so a state of float32's largest size could round past it and be stored as inf; as the exact state
is a convex combination of h0 and the candidates, at most float32's largest number, the state is capped there (the
float64-register kernels' exceeds it by less than its rounding to float32 takes back).

Arrays: C-contiguous (B, T, H) float32, time the outer loop and the channel the inner one; h0 (B, H) > 0, read only
when ``has_h0``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..scan.numba_linear import all_zero
from ..scan.numba_log import exp_nonpositive_f32
from ._min_log_linear import at_least
from ._min_scan_f32 import normalised_scaled_f32

__all__ = ["log_normal_f32", "mingru_log_linear_into_f32", "minlstm_log_linear_into_f32"]

_F32 = np.float32
_ZERO, _HALF, _ONE, _TWO = _F32(0.0), _F32(0.5), _F32(1.0), _F32(2.0)
_TINY = _F32(np.finfo(np.float32).tiny)
_MAX = float(np.finfo(np.float32).max)      # a Python float: compared with the float64 state
_SQRT2 = _F32(1.41421356237309504880)
_LN2_HI, _LN2_LO = _F32(0.693359375), _F32(-2.12194440e-4)    # ln 2 split as in exp_nonpositive_f32
_ATANH = tuple(_F32(1.0 / (2 * n + 1)) for n in range(5))      # 1, 1/3, ..., 1/9


@njit(cache=True, inline="always")
def log_normal_f32(x):
    """log x for a positive normal float32 x, float32 arithmetic, to a few float32 ulp: x = m 2^e with m in
    [1/√2, √2), log x = e ln 2 + 2 atanh(s), s = (m − 1) / (m + 1), |s| <= 0.172, the series to s^9 (remainder
    about 2e-9 relative, below float32's half ulp); m − 1 exact (Sterbenz), e ln 2 in two parts (e * _LN2_HI exact)."""
    bits = np.float32(x).view(np.int32)
    e = np.float32((bits >> 23) - 127)
    m = np.int32((bits & np.int32(0x007FFFFF)) | np.int32(0x3F800000)).view(np.float32)   # in [1, 2)
    big = m > _SQRT2
    m = m * _HALF if big else m
    e = e + _ONE if big else e
    u = m - _ONE
    s = u / (_TWO + u)
    z = s * s
    c = _ATANH
    p = (c[0] + z * c[1]) + (z * z) * ((c[2] + z * c[3]) + (z * z) * c[4])
    return e * _LN2_HI + (e * _LN2_LO + _TWO * s * p)


@njit(cache=True, inline="always")
def _candidate_slope_f32(kh):
    """``_min_log_linear._candidate_slope`` in float32: (g(k_h), g'(k_h))."""
    eh = exp_nonpositive_f32(-abs(kh))
    pos = kh >= _ZERO
    q = _ONE / (_ONE + eh)
    g = eh * q
    return (kh + _HALF if pos else g), (_ONE if pos else g * q)


@njit(cache=True, inline="always")
def _log_row(h, log_h):
    """log h of one row of float32 states (>= float32's smallest normal number when the kernel returns True): a
    loop of its own, which vectorises (one loop that also carried the recurrence, j and the smallest b did not:
    four times slower, timed once at (64, 64, 192))."""
    for c in range(h.shape[0]):
        log_h[c] = log_normal_f32(max(h[c], _TINY))


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def mingru_log_linear_into_f32(k_z, k_h, b_z, b_h, h0, has_h0, tiny, z, h, log_h, a_out, j_z, j_h):
    """``_min_log_linear.mingru_log_linear_into`` for float32 arrays, the gates in float32 registers (module
    docstring); the same outputs, j_z = z_t (1 − z_t) (h̃_t − h_{t−1}), j_h = z_t g'(k_h,t)."""
    B, T, H = k_z.shape
    s = np.empty(H, np.float64)
    a, b, w, g = np.empty(H, np.float32), np.empty(H, np.float32), np.empty(H, np.float32), np.empty(H, np.float32)
    lo = np.full(H, np.inf, np.float32)
    bad = np.zeros(H, np.float32)
    for i in range(B):
        for c in range(H):
            s[c] = np.float64(h0[i, c]) if has_h0 else 0.0
        for t in range(T):
            for c in range(H):
                kz, kh = k_z[i, t, c] + b_z[c], k_h[i, t, c] + b_h[c]
                bad[c] += _ZERO * kz + _ZERO * kh
                e = exp_nonpositive_f32(-abs(kz))
                big = _ONE / (_ONE + e)
                small = e * big
                pos = kz >= _ZERO
                zc, ac = (big if pos else small), (small if pos else big)    # σ(k_z), σ(−k_z)
                gc, dg = _candidate_slope_f32(kh)
                z[i, t, c] = zc
                a_out[i, t, c] = ac
                j_h[i, t, c] = zc * dg
                w[c] = zc * ac
                g[c] = gc
                a[c] = ac
                b[c] = zc * gc
                lo[c] = min(lo[c], b[c])
            for c in range(H):                           # s: h_{t−1} in float64, a and b widened exactly
                prev = s[c]
                j_z[i, t, c] = np.float64(w[c]) * (np.float64(g[c]) - prev)
                v = min(np.float64(a[c]) * prev + np.float64(b[c]), _MAX)    # module docstring
                s[c] = v
                h[i, t, c] = v
            _log_row(h[i, t], log_h[i, t])
    return all_zero(bad) and at_least(lo, tiny)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_log_linear_into_f32(k_f, k_i, k_h, b_f, b_i, b_h, h0, has_h0, tiny, f_n, i_n, h, log_h, j_f, j_i, j_h):
    """``_min_log_linear.minlstm_log_linear_into`` for float32 arrays, the gates and slopes in float32 registers
    (module docstring); the same outputs, j_f = −s_f (h̃_t − h_{t−1}), j_i = s_i (h̃_t − h_{t−1}),
    j_h = i'_t g'(k_h,t)."""
    B, T, H = k_f.shape
    s = np.empty(H, np.float64)
    a, b, g = np.empty(H, np.float32), np.empty(H, np.float32), np.empty(H, np.float32)
    sf, si = np.empty(H, np.float32), np.empty(H, np.float32)
    lo = np.full(H, np.inf, np.float32)
    bad = np.zeros(H, np.float32)
    for i in range(B):
        for c in range(H):
            s[c] = np.float64(h0[i, c]) if has_h0 else 0.0
        for t in range(T):
            for c in range(H):
                kf, ki, kh = k_f[i, t, c] + b_f[c], k_i[i, t, c] + b_i[c], k_h[i, t, c] + b_h[c]
                bad[c] += _ZERO * kf + _ZERO * ki + _ZERO * kh
                fc, ic, sfc, sic = normalised_scaled_f32(kf, ki)
                gc, dg = _candidate_slope_f32(kh)
                f_n[i, t, c] = fc
                i_n[i, t, c] = ic
                j_h[i, t, c] = ic * dg
                sf[c] = sfc
                si[c] = sic
                g[c] = gc
                a[c] = fc
                b[c] = ic * gc
                lo[c] = min(lo[c], b[c])
            for c in range(H):                           # as in mingru_log_linear_into_f32
                prev = s[c]
                d = np.float64(g[c]) - prev
                j_f[i, t, c] = -np.float64(sf[c]) * d
                j_i[i, t, c] = np.float64(si[c]) * d
                v = min(np.float64(a[c]) * prev + np.float64(b[c]), _MAX)    # module docstring
                s[c] = v
                h[i, t, c] = v
            _log_row(h[i, t], log_h[i, t])
    return all_zero(bad) and at_least(lo, tiny)
