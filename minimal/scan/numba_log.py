"""Numba kernels of the log-space scan, the default behind ``log_scan`` (``log.py`` beside this file holds the
NumPy closed form they are tested against), and the vectorisable exp / log1p the fused gate and softmax kernels
share. Arrays and conventions as in ``numba_linear.py``: C-contiguous (B, T, C), time outer, channels inner.
Private: call them through ``minimal.scan``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .numba_linear import all_zero

# ---------------------------------------------------------------------------------------------------------
# log space
# ---------------------------------------------------------------------------------------------------------

# exp and log1p from multiply-adds and selects only, so that LLVM vectorises the sweep over C: NumPy's and
# libm's exp / log1p are scalar calls here, and SVML, which would vectorise them, needs an
# llvmlite built with Intel's patch (``python -m numba -s``: "llvmlite Using SVML Patched LLVM: False" for the
# PyPI wheels). Both are accurate to a few ulp in float64 (tests/test_scan.py checks them against NumPy).
_LN2_HI = 6.93147180369123816490e-01   # ln 2 split (fdlibm): k * _LN2_HI is exact for |k| < 2^21
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00
_TWO52 = 4503599627370496.0          # 2^52
_TWO52_BITS = np.int64(0x4330000000000000)  # its bit pattern


@njit(cache=True, inline="always")
def exp_nonpositive(x):
    """exp(x) for -708 <= x <= 0 to a few ulp; x > 0 is taken as 0 (exp = 1: these exps are shares of a sum,
    in [0, 1], whose arguments are differences of logs that rounding can push just above 0), and x < -708
    gives 0 (an absolute error < 3.3e-308).

    x = k ln 2 + r with k = round(x / ln 2), 0 <= -k <= 1021 (so 2^k is a normal number), and |r| <= ln 2 / 2
    (Cody-Waite: r keeps full precision); exp(r) from its Taylor series to r^13 (remainder < 1e-17 relative);
    exp(x) = 2^k exp(r). A NaN x gives NaN."""
    x = min(x, 0.0)
    k = np.floor(x * _INV_LN2 + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    # Estrin's scheme for sum_{n<=13} r^n / n!: a tree of multiply-adds four deep, where Horner's rule is a chain
    # of 13 that leaves the vector units waiting on each multiply-add's latency (slower when timed)
    r2 = r * r
    r4 = r2 * r2
    p = (((1.0 + r) + r2 * (1.0 / 2.0 + r * (1.0 / 6.0)))
         + r4 * ((1.0 / 24.0 + r * (1.0 / 120.0)) + r2 * (1.0 / 720.0 + r * (1.0 / 5040.0)))
         + r4 * r4 * (((1.0 / 40320.0 + r * (1.0 / 362880.0)) + r2 * (1.0 / 3628800.0 + r * (1.0 / 39916800.0)))
                      + r4 * (1.0 / 479001600.0 + r * (1.0 / 6227020800.0))))
    # 2^k from its bits: 2^52 + (k + 1023) holds k + 1023 in its low mantissa bits (exact, an integer below
    # 2^52), which a shift moves into the exponent field. Bit casts only: no float -> int conversion.
    biased = np.float64(k + (_TWO52 + 1023.0)).view(np.int64) - _TWO52_BITS
    scale = np.int64(biased << 52).view(np.float64)
    return 0.0 if x < -708.0 else p * scale


# float32 constants, so that the float32 exp below stays float32 (a Python float would promote it to float64)
_F32 = np.float32
_LN2_HI_F32 = _F32(0.693359375)           # ln 2 split (Cephes' expf): k * _LN2_HI_F32 is exact for |k| < 2^15
_LN2_LO_F32 = _F32(-2.12194440e-4)
_INV_LN2_F32 = _F32(1.44269504088896341)
_TWO23_PLUS_BIAS_F32 = _F32(8388608.0 + 127.0)  # 2^23 + 127
_TWO23_BITS_F32 = np.int32(0x4B000000)          # the bit pattern of 2^23
_EXP_F32_COEF = tuple(_F32(1.0 / c) for c in (1.0, 1.0, 2.0, 6.0, 24.0, 120.0, 720.0, 5040.0))
_ZERO_F32, _HALF_F32, _MIN_X_F32 = _F32(0.0), _F32(0.5), _F32(-87.0)


@njit(cache=True, inline="always")
def exp_nonpositive_f32(x):
    """``exp_nonpositive`` in float32 arithmetic, for float32 x: exp(x) for -87 <= x <= 0 to a few float32 ulp
    (tests/test_scan.py), x > 0 taken as 0, x < -87 gives 0 (an absolute error < 1.7e-38, about 1.4 times
    float32's smallest normal number), a NaN x gives NaN. Twice the vector lanes of the float64 form, and a shorter
    series: Taylor to r^7 (|r| <= ln 2 / 2: remainder < 8e-9 relative, below float32's half ulp, 6e-8); 2^k,
    0 <= -k <= 126, from the bits of 2^23 + 127 + k as in the float64 form."""
    x = min(x, _ZERO_F32)
    k = np.floor(x * _INV_LN2_F32 + _HALF_F32)
    r = (x - k * _LN2_HI_F32) - k * _LN2_LO_F32
    c = _EXP_F32_COEF
    r2 = r * r
    r4 = r2 * r2
    p = ((c[0] + r) + r2 * (c[2] + r * c[3])) + r4 * ((c[4] + r * c[5]) + r2 * (c[6] + r * c[7]))
    biased = np.float32(k + _TWO23_PLUS_BIAS_F32).view(np.int32) - _TWO23_BITS_F32
    scale = np.int32(biased << 23).view(np.float32)
    return _ZERO_F32 if x < _MIN_X_F32 else p * scale


@njit(cache=True, inline="always")
def log1p_unit(e):
    """log(1 + e) for 0 <= e <= 1: 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...) with s = e / (2 + e) <= 1/3,
    summed to s^31 (remainder < 2e-17 relative)."""
    s = e / (2.0 + e)
    # Estrin's scheme, as in exp_nonpositive, for sum_{n<=15} z^n / (2n + 1) with z = s^2
    z = s * s
    z2 = z * z
    z4 = z2 * z2
    p = (((1.0 + z * (1.0 / 3.0)) + z2 * (1.0 / 5.0 + z * (1.0 / 7.0)))
         + z4 * ((1.0 / 9.0 + z * (1.0 / 11.0)) + z2 * (1.0 / 13.0 + z * (1.0 / 15.0)))
         + z4 * z4 * (((1.0 / 17.0 + z * (1.0 / 19.0)) + z2 * (1.0 / 21.0 + z * (1.0 / 23.0)))
                      + z4 * ((1.0 / 25.0 + z * (1.0 / 27.0)) + z2 * (1.0 / 29.0 + z * (1.0 / 31.0)))))
    return 2.0 * s * p


@njit(cache=True, inline="always")
def logaddexp(x, y):
    """log(e^x + e^y) = max(x, y) + log1p(exp(-|x - y|)), vectorisable (above)."""
    m = max(x, y)
    return m + log1p_unit(exp_nonpositive(-abs(x - y)))


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def log_scan_into(log_a, log_b, log_h0, has_h0, log_h):
    """log h_t = logaddexp(log a_t + log h_{t-1}, log b_t). (B, T, C) arrays; log_h0: (B, C), ignored
    (h0 = 0) unless has_h0; writes log_h. Returns whether every input and output was finite.

    The check rides in the scan's own pass: ``bad[c]`` accumulates 0 * log a + 0 * log b + 0 * log h (and
    0 * log h0), which is 0 for finite numbers and NaN otherwise, so it costs no extra read. The inputs are
    checked too (for the linear scan the last step's output is enough): a log a of -inf makes that step's
    output finite again.

    ~100 floating-point operations per element (the vectorised exp and log1p above): compute-bound, 0.13 of a
    same-run copy's bandwidth where the same loop on libm's scalar exp and log1p reached 0.03."""
    B, T, C = log_a.shape
    # The carry is float64 whatever the dtype: a float32 log h near 7 has a resolution of 5e-7, and the
    # rounding of every step would otherwise accumulate over the ~1/(1-a) steps the state remembers.
    prev = np.empty(C, dtype=np.float64)
    bad = np.zeros(C, dtype=np.float64)
    for i in range(B):
        for c in range(C):
            la = np.float64(log_a[i, 0, c])
            lb = np.float64(log_b[i, 0, c])
            if has_h0:
                l0 = np.float64(log_h0[i, c])
                bad[c] += 0.0 * l0
                prev[c] = logaddexp(la + l0, lb)
            else:
                prev[c] = lb
            bad[c] += 0.0 * la + 0.0 * lb + 0.0 * prev[c]
            log_h[i, 0, c] = prev[c]
        for t in range(1, T):
            for c in range(C):
                la = np.float64(log_a[i, t, c])
                lb = np.float64(log_b[i, t, c])
                v = logaddexp(la + prev[c], lb)
                bad[c] += 0.0 * la + 0.0 * lb + 0.0 * v
                prev[c] = v
                log_h[i, t, c] = v
    return all_zero(bad)


def log_scan(log_a, log_b, log_h0):
    """log h_t = logaddexp(log a_t + log h_{t-1}, log b_t). (B, T, C) arrays; log_h0: (B, C) or None (h0 = 0).
    Returns (log_h, whether every input and output was finite)."""
    has_h0 = log_h0 is not None
    if not has_h0:
        log_h0 = np.zeros((log_a.shape[0], log_a.shape[2]), dtype=log_a.dtype)
    log_h = np.empty_like(log_b)
    return log_h, log_scan_into(log_a, log_b, log_h0, has_h0, log_h)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, has_h0):
    """The reverse pass of ``log_scan_backward``; also returns whether every input and every G_t was finite
    (checked in the same pass, as in ``log_scan_into``; with every G_t finite so are the outputs, since the
    shares are in [0, 1])."""
    B, T, C = log_a.shape
    dlog_a = np.empty_like(log_a)
    dlog_b = np.empty_like(log_a)
    dlog_h0 = np.empty_like(log_h0)
    # float64 carries, as in the forward
    G = np.empty(C, dtype=np.float64)
    w_next = np.empty(C, dtype=np.float64)  # w_{t+1}, the adjoint's coefficient
    bad = np.zeros(C, dtype=np.float64)
    for i in range(B):
        for c in range(C):
            G[c] = 0.0
            w_next[c] = 0.0
            if has_h0:
                bad[c] += 0.0 * np.float64(log_h0[i, c])
        for t in range(T - 1, -1, -1):
            # l_{t-1}: the row before, or log h0 at t = 0 (w_0 = 0 without h0). Chosen once per row: a branch on t
            # inside the loop over c kept that loop scalar (2.6x slower at (64, 64, 192) float32, same values)
            l_prev = log_h[i, t - 1] if t > 0 else log_h0[i]
            has_prev = t > 0 or has_h0
            for c in range(C):
                la = np.float64(log_a[i, t, c])
                lb = np.float64(log_b[i, t, c])
                l_t = np.float64(log_h[i, t, c])
                dl = np.float64(dlog_h[i, t, c])
                bad[c] += 0.0 * la + 0.0 * lb + 0.0 * l_t + 0.0 * dl
                # 1. G_t = dlog_h_t + w_{t+1} G_{t+1}
                G[c] = dl + w_next[c] * G[c]
                bad[c] += 0.0 * G[c]
                # 2. the shares w_t = exp(log a_t + l_{t-1} - l_t), v_t = exp(log b_t - l_t), both <= 0 in exact
                # arithmetic (a rounding above 0 is taken as exp(0) = 1)
                w = exp_nonpositive(la + np.float64(l_prev[c]) - l_t)
                w = w if has_prev else 0.0
                v = exp_nonpositive(lb - l_t)
                # 3. distribute
                dlog_a[i, t, c] = w * G[c]
                dlog_b[i, t, c] = v * G[c]
                w_next[c] = w
        for c in range(C):
            dlog_h0[i, c] = w_next[c] * G[c]
    return dlog_a, dlog_b, dlog_h0, all_zero(bad)


def log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0):
    """VJP of ``log_scan`` (see ``minimal.scan.log_scan_backward``). Returns (dlog_a, dlog_b, dlog_h0, whether
    every input and output was finite)."""
    has_h0 = log_h0 is not None
    if not has_h0:
        log_h0 = np.zeros((log_a.shape[0], log_a.shape[2]), dtype=log_a.dtype)
    return _log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, has_h0)
