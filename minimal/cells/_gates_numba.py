"""The gates of minLSTM and minGRU and their backward in one compiled pass each (Feng et al., "Were RNNs All We
Needed?", Sec. 3.1-3.2, App. B.3; ``minimal.cells.minlstm``, ``minimal.cells.mingru``), elementwise over flat arrays.

NumPy spends most of a minLSTM step here: δ = softplus(−k_f) − softplus(−k_i), f' = σ(−δ), i' = σ(δ) (and in log
space log f' = −softplus(δ), log i' = −softplus(−δ), log g(k_h)) take some ten passes over (B, T, H) arrays, each
exp and log1p a scalar libm call. Here every element is read once and its
outputs written once, with the vectorisable exp and log1p of the log-space scan (``minimal.scan.numba_log``) and a
log of the same kind, all in float64 registers whatever the storage dtype. The formulas are the cells' (their
module docstrings): minLSTM's δ form stays exact when both gates underflow, as in NumPy.

Glossary: n = B·T·H elements; k_f, k_i, k_z, k_h the pre-activations Linear_n(x).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..scan.numba_log import exp_nonpositive, log1p_unit

__all__ = ["minlstm_gates", "minlstm_log_gates", "minlstm_gates_backward", "minlstm_log_gates_backward",
           "normalised_scaled", "normalised_exponents", "normalised_from_exps", "mingru_gates", "mingru_log_gates",
           "mingru_gates_backward", "sigmoid", "sigmoid_neg", "normalised", "log_coefficients", "dlog_g", "log_normal",
           "flush_and_sum_"]

_LN2 = 6.93147180559945309417e-01
_MANTISSA = np.int64(0x000FFFFFFFFFFFFF)
_ONE_BITS = np.int64(0x3FF0000000000000)      # the bits of 1.0
_SQRT2 = 1.41421356237309504880


@njit(cache=True, inline="always")
def _log_normal_parts(x):
    """(e, m − 1) with x = m 2^e, m in [1/√2, √2), for a positive normal float64 x (here x >= 1/2): then
    log x = e ln 2 + log1p(m − 1), m − 1 exact (Sterbenz) and in [−0.3, 0.42], where the atanh series of
    ``log1p_unit`` converges as fast (|s| <= 0.18)."""
    bits = np.float64(x).view(np.int64)
    e = np.float64((bits >> 52) - 1023)
    m = np.int64((bits & _MANTISSA) | _ONE_BITS).view(np.float64)    # in [1, 2)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    e = e + 1.0 if big else e
    return e, m - 1.0


@njit(cache=True, inline="always")
def log_normal(x):
    """log x for a positive normal float64 x (here x >= 1/2; ``_min_log_linear``: a state >= the storage dtype's
    smallest normal number) to a few ulp, vectorisable (``_log_normal_parts``)."""
    e, u = _log_normal_parts(x)
    return e * _LN2 + log1p_unit(u)


@njit(cache=True, inline="always")
def _softplus_neg(k):
    """softplus(−k) = max(−k, 0) + log1p(exp(−|k|))."""
    return max(-k, 0.0) + log1p_unit(exp_nonpositive(-abs(k)))


@njit(cache=True, inline="always")
def sigmoid_neg(k):
    """σ(−k) = 1 / (1 + e^k), from e = exp(−|k|) <= 1 (no overflow)."""
    e = exp_nonpositive(-abs(k))
    # one division of a selected numerator: a select between two divisions computed both (a slower backward)
    return (e if k >= 0.0 else 1.0) / (1.0 + e)


@njit(cache=True, inline="always")
def _g_and_log_g(kh):
    """g(k) = k + 1/2 (k >= 0) or σ(k) (k < 0), and log g(k) (Feng et al. App. B.3), from exp(−|k|) <= 1."""
    eh = exp_nonpositive(-abs(kh))
    pos = kh >= 0.0
    g = kh + 0.5 if pos else eh / (1.0 + eh)
    # log(k + 1/2) = e ln 2 + log1p(m − 1) (``log_normal``) or log σ(k) = k − log1p(e^k): one log1p of the
    # selected argument, not one per branch (both evaluated, one kept); equal to an ulp in float64
    # (tests/test_log_space_kernels.py), 10 % off the minGRU log-space gates (timed once, (64, 64, 192) float32)
    e, u = _log_normal_parts(max(kh, 0.0) + 0.5)
    l = log1p_unit(u if pos else eh)
    log_g = e * _LN2 + l if pos else kh - l
    return g, log_g


@njit(cache=True, inline="always")
def dlog_g(kh):
    """(log g)'(k) = 1 / (k + 1/2) for k >= 0, 1 − σ(k) = σ(−k) for k < 0."""
    return 1.0 / (max(kh, 0.0) + 0.5) if kh >= 0.0 else sigmoid_neg(kh)


@njit(cache=True, inline="always")
def normalised(kf, ki):
    """(f', i', δ, e) with δ = softplus(−k_f) − softplus(−k_i), f' = σ(−δ), i' = σ(δ), e = exp(−|δ|)."""
    d = _softplus_neg(kf) - _softplus_neg(ki)
    e = exp_nonpositive(-abs(d))
    r = 1.0 / (1.0 + e)
    big, small = r, e * r                     # σ(|δ|), σ(−|δ|)
    return (small, big, d, e) if d >= 0.0 else (big, small, d, e)


@njit(cache=True, inline="always")
def log_coefficients(d, e, kh):
    """(log σ(−d), log σ(d) + log g(kh), g(kh)) from the gate's logit d and e = exp(−|d|): the log-space scan
    coefficients log a = −softplus(d), log b = −softplus(−d) + log g(k_h) and h̃ = g(k_h) of both cells
    (minLSTM: d = δ, a = f'; minGRU: d = k_z, a = 1 − z)."""
    l = log1p_unit(e)
    g, log_g = _g_and_log_g(kh)
    return -(max(d, 0.0) + l), -(max(-d, 0.0) + l) + log_g, g


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_gates(k_f, k_i, k_h, f_n, i_n, b, s_f, s_i):
    """Vanilla forward gates over flat (n,) arrays: f_n = f', i_n = i', b = i' k_h (the scan's a is f'), and the
    slopes s_f = ∂f'/∂k_f, s_i = ∂i'/∂k_i that the backward multiplies (``normalised_scaled``).

    Here no log is needed: with f = 1 / A, i = 1 / C (A = 1 + e^{−k_f}, C = 1 + e^{−k_i}), f' = C / (A + C) and
    i' = A / (A + C). Both A and C are scaled by e^{−m}, m = max(0, −k_f, −k_i), so that every exponent is <= 0
    and the larger of the scaled A, C is >= 1: no overflow, and when both gates underflow (k_f, k_i << 0)
    f' = e^{k_f} / (e^{k_f} + e^{k_i}) = σ(k_f − k_i) exactly as the δ form gives, from two exps and one
    division (``normalised_scaled``; the δ form: three exps, two log1p and three divisions)."""
    for j in range(k_f.shape[0]):
        fj, ij, sf, si = normalised_scaled(np.float64(k_f[j]), np.float64(k_i[j]))
        f_n[j] = fj
        i_n[j] = ij
        s_f[j] = sf
        s_i[j] = si
        b[j] = ij * np.float64(k_h[j])


@njit(cache=True, inline="always")
def normalised_scaled(kf, ki):
    """minLSTM's normalised gates f' = f / (f + i), i' = i / (f + i) (Feng et al. Sec. 3.2) of scalars k_f, k_i, as
    (f', i') = (C, A) / (A + C) of ``minlstm_gates``: A = e^{−m} (1 + e^{−k_f}), C = e^{−m} (1 + e^{−k_i}),
    m = max(0, −k_f, −k_i). Of the three exponents −m, −k_f − m, −k_i − m the largest is exactly 0, so its exp is
    exactly 1 and two exps are taken, of the other two (chosen by selects, not branches, so that the loop stays
    vectorised): the same numbers, bit for bit, as three exps, in less time.

    Returns (f', i', s_f, s_i) with the slopes s_f = ∂f'/∂k_f = f' i' σ(−k_f) and s_i = ∂i'/∂k_i = f' i' σ(−k_i)
    (i' = σ(δ), δ = softplus(−k_f) − softplus(−k_i), and f' = 1 − i'). As σ(−k_f) = e^{−k_f − m} / A and
    σ(−k_i) = e^{−k_i − m} / C, they are s_f = f' r e^{−k_f − m}, s_i = i' r e^{−k_i − m} with r = 1 / (A + C):
    two products each from the exps and the division above, where the backward would take two more exps and two
    divisions for the σs. A NaN gives NaN."""
    p, q = normalised_exponents(kf, ki)
    return normalised_from_exps(kf, ki, exp_nonpositive(p), exp_nonpositive(q))


@njit(cache=True, inline="always")
def normalised_exponents(kf, ki):
    """The two exponents (<= 0) whose exps ``normalised_scaled`` takes: of −m, −k_f − m, −k_i − m, the two that
    are not the largest (which is exactly 0)."""
    u, v = -kf, -ki
    zero_max = u <= 0.0 and v <= 0.0          # m = 0
    u_max = u >= v                            # else m = −k_f (u_max) or −k_i
    return (u if zero_max else (-u if u_max else u - v)), (v if zero_max else (v - u if u_max else -v))


@njit(cache=True, inline="always")
def normalised_from_exps(kf, ki, eP, eQ):
    """``normalised_scaled`` given the exps eP, eQ of ``normalised_exponents(kf, ki)``."""
    u, v = -kf, -ki
    zero_max = u <= 0.0 and v <= 0.0
    u_max = u >= v
    e0 = 1.0 if zero_max else (eP if u_max else eQ)           # e^{−m}
    e_f = eP if zero_max or not u_max else 1.0                # e^{−k_f − m}
    e_i = eQ if zero_max or u_max else 1.0                    # e^{−k_i − m}
    A = e0 + e_f
    C = e0 + e_i
    r = 1.0 / (A + C)
    f, i = C * r, A * r
    return f, i, f * r * e_f, i * r * e_i


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_log_gates(k_f, k_i, k_h, f_n, i_n, log_a, log_b, h_tilde):
    """Log-space forward gates (App. B.3) over flat (n,) arrays: f_n = f', i_n = i', log_a = log f' =
    −softplus(δ), log_b = log i' + log g(k_h) = −softplus(−δ) + log g(k_h), h_tilde = g(k_h)."""
    for j in range(k_f.shape[0]):
        fj, ij, d, e = normalised(np.float64(k_f[j]), np.float64(k_i[j]))
        f_n[j] = fj
        i_n[j] = ij
        log_a[j], log_b[j], h_tilde[j] = log_coefficients(d, e, np.float64(k_h[j]))


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_gates_backward(d_a, d_b, i_n, s_f, s_i, k_h, dk_f, dk_i, dk_h):
    """Backward of ``minlstm_gates`` over flat (n,) arrays, given the scan's gradients d_a, d_b (a = f',
    b = i' k_h) and the slopes s_f = ∂f'/∂k_f, s_i = ∂i'/∂k_i it stored; as f' + i' = 1, ∂i'/∂k_f = −s_f and
    ∂f'/∂k_i = −s_i, so with u = d_b k_h − d_a:  dk_f = −u s_f,   dk_i = u s_i,   dk_h = d_b i'."""
    for j in range(k_h.shape[0]):
        da, db = np.float64(d_a[j]), np.float64(d_b[j])
        u = db * np.float64(k_h[j]) - da
        dk_h[j] = db * np.float64(i_n[j])
        dk_f[j] = -u * np.float64(s_f[j])
        dk_i[j] = u * np.float64(s_i[j])


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_log_gates_backward(d_a, d_b, f_n, i_n, k_f, k_i, k_h, dk_f, dk_i, dk_h):
    """Backward of ``minlstm_log_gates`` over flat (n,) arrays, given the scan's gradients d_a, d_b
    (a = log f', b = log i' + log g): dδ = d_b f' − d_a i', dk_h = d_b (log g)'(k_h), and dk_f = −dδ σ(−k_f),
    dk_i = dδ σ(−k_i) (δ = softplus(−k_f) − softplus(−k_i))."""
    for j in range(k_f.shape[0]):
        fj, ij = np.float64(f_n[j]), np.float64(i_n[j])
        da, db = np.float64(d_a[j]), np.float64(d_b[j])
        dd = db * fj - da * ij
        dk_h[j] = db * dlog_g(np.float64(k_h[j]))
        dk_f[j] = -dd * sigmoid_neg(np.float64(k_f[j]))
        dk_i[j] = dd * sigmoid_neg(np.float64(k_i[j]))


# --- minGRU (Feng et al. Sec. 3.1, App. B.3) ---------------------------------------------------------------------
@njit(cache=True, inline="always")
def sigmoid(k):
    """σ(k) from e = exp(−|k|) <= 1 (no overflow)."""
    e = exp_nonpositive(-abs(k))
    return (1.0 if k >= 0.0 else e) / (1.0 + e)        # one division, as ``sigmoid_neg``


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def mingru_gates(k_z, k_h, z, a, b):
    """Vanilla forward gates over flat (n,) arrays: z = σ(k_z), a = 1 − z, b = z k_h."""
    for j in range(k_z.shape[0]):
        zj = sigmoid(np.float64(k_z[j]))
        z[j] = zj
        a[j] = 1.0 - zj
        b[j] = zj * np.float64(k_h[j])


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def mingru_log_gates(k_z, k_h, z, log_a, log_b, h_tilde):
    """Log-space forward gates (App. B.3) over flat (n,) arrays: z = σ(k_z), log_a = log(1 − z) =
    −softplus(k_z), log_b = log z + log g(k_h) = −softplus(−k_z) + log g(k_h), h_tilde = g(k_h)."""
    for j in range(k_z.shape[0]):
        kz = np.float64(k_z[j])
        e = exp_nonpositive(-abs(kz))
        z[j] = (1.0 if kz >= 0.0 else e) / (1.0 + e)     # σ(k_z), as ``sigmoid``
        log_a[j], log_b[j], h_tilde[j] = log_coefficients(kz, e, np.float64(k_h[j]))


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def mingru_gates_backward(d_a, d_b, z, k_h, h_tilde, log_space, dk_z, dk_h):
    """Backward of ``mingru_gates`` / ``mingru_log_gates`` over flat (n,) arrays, given the scan's d_a, d_b:
        vanilla (a = 1 − z, b = z h̃):  dk_z = (d_b h̃ − d_a) z (1 − z),   dk_h = d_b z
        log space:  dk_z = d_b (1 − z) − d_a z,   dk_h = d_b (log g)'(k_h)."""
    for j in range(z.shape[0]):
        zj, da, db = np.float64(z[j]), np.float64(d_a[j]), np.float64(d_b[j])
        if not log_space:
            dk_z[j] = (db * np.float64(h_tilde[j]) - da) * zj * (1.0 - zj)
            dk_h[j] = db * zj
        else:
            kh = np.float64(k_h[j])
            dk_z[j] = db * (1.0 - zj) - da * zj
            dk_h[j] = db * dlog_g(kh)


# --- the gradients into the gates' matrix products ---------------------------------------------------------------
@njit(cache=True)
def flush_and_sum_(a, tiny, out):
    """a (R, C) in place: each subnormal entry, |a| < ``tiny`` (the dtype's smallest normal number), set to 0
    (NaN and ±inf kept); out (C,) = a.sum(axis=0) after it, added row by row in a's dtype as NumPy adds them.

    A gate's gradient decays through the recurrence toward early steps, below float32's smallest normal number at
    T = 256 when its gates are near 1/2, and OpenBLAS's gemm slows down many times over on subnormal inputs (on
    x86 each operation on one is a microcode assist; bench/subnormal_gradients.py measures it). Its products with x
    and W_n lose nothing of a normal result: such an entry adds less than the smallest normal number to a sum."""
    for c in range(a.shape[1]):
        out[c] = 0
    for r in range(a.shape[0]):
        for c in range(a.shape[1]):
            v = a[r, c]
            v = v - v if abs(v) < tiny else v        # an exact 0 of a's dtype
            a[r, c] = v
            out[c] += v
