"""The log-space min cells' recurrence evaluated in linear form where every state is in range (Feng et al., "Were
RNNs All We Needed?", App. B.3; ``minimal.cells.mingru``, ``minimal.cells.minlstm``).

In log space the cells compute log h_t = logaddexp(log a_t + log h_{t−1}, log b_t) with a_t, b_t > 0. That is
h_t = a_t h_{t−1} + b_t, a sum of positive terms: carried in float64, it loses no accuracy to cancellation, and it
needs no exp or log per step. What the log form guards against is a state or coefficient outside the float range.
So these kernels run the recurrence in float64 linear form and check, as they go, that every b_t is at least the
smallest normal number of the storage dtype (``tiny``); then every h_t >= b_t is one too, and h_t <= max(h0, g(k_h))
(a convex combination: a_t + b_t / g(k_h,t) = 1) cannot overflow. When the check fails (or an input is not
finite) they return False and the cell runs the log-space pass (``_min_scan_numba``), the exact App. B.3 form.

The backward is the adjoint of the same recurrence, g_t = dL/dh_t + a_{t+1} g_{t+1}, with
dL/dlog a_t = g_t a_t h_{t−1} and dL/dlog b_t = g_t b_t: the log-space adjoint G_t = g_t h_t
(``minimal.scan.log_scan_backward``) multiplied out, and through the gates dL/dk_n,t = g_t ∂h_t/∂k_n,t. The
forwards, which have the gates and h_{t−1} at hand in float64, write those derivatives (storage dtype), and minGRU
also a_t = σ(−k_z,t) (whose 1 − z would cancel in the storage dtype; minLSTM's a_t = f'_t is cached as it is), so
each reverse pass (``log_linear_backward``, ``minlstm_log_linear_backward``) is the adjoint times them: no exp,
and neither k nor h read. Per element, minGRU's forward takes two exps and one log (for the cached log h) where the
log-space pass takes seven exps and log1ps, and its backward none where that takes up to seven; minLSTM's, three
exps and a log against eleven, and none against thirteen.
The values equal the log pass's to float64 rounding (the log pass rounds log a, log b to the storage dtype first;
these use a, b in float64); in float32, the gradients carry one more rounding (of the cached j, and minGRU's a)
than a reverse pass that recomputes the gates: tests/test_min_log_linear.py. Float32 arrays run the twins of
``_min_log_linear_f32.py``, the same forms with the gates and log h in float32 registers and the state in float64.

Arrays: C-contiguous (B, T, H), time the outer loop and the channel the inner one; h0 (B, H) > 0, read only when
``has_h0``. Each kernel writes log h = log(h) (the cache of the log-space cell) from h in float64.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..scan.numba_linear import all_zero
from ..scan.numba_log import exp_nonpositive
from ._gates_numba import log_normal, normalised_scaled

__all__ = ["tiny", "at_least", "mingru_log_linear_into", "log_linear_backward", "minlstm_log_linear_into",
           "minlstm_log_linear_backward"]


def tiny(k):
    """The smallest normal number of the storage dtype of ``k``: the bound every b_t is checked against."""
    return float(np.finfo(k.dtype).tiny)


_TINY64 = float(np.finfo(np.float64).tiny)


@njit(cache=True, inline="always")
def at_least(lo, tiny):
    """Whether every entry of ``lo`` is >= ``tiny`` (True for no entry: H = 0)."""
    for v in lo:
        if not v >= tiny:
            return False
    return True


@njit(cache=True, inline="always")
def _candidate_slope(kh):
    """(g(k_h), g'(k_h)) from exp(−|k_h|): k + 1/2 and 1 for k >= 0, σ(k) and σ(k) σ(−k) for k < 0."""
    eh = exp_nonpositive(-abs(kh))
    pos = kh >= 0.0
    q = 1.0 / (1.0 + eh)
    g = eh * q
    return (kh + 0.5 if pos else g), (1.0 if pos else g * q)


@njit(cache=True, inline="always")
def _update_gate(kz):
    """(z, 1 − z) = (σ(k_z), σ(−k_z)), each from exp(−|k_z|) without cancellation."""
    e = exp_nonpositive(-abs(kz))
    big = 1.0 / (1.0 + e)
    small = e * big
    pos = kz >= 0.0
    return (big if pos else small), (small if pos else big)    # two selects, no branch


@njit(cache=True, inline="always")
def _step_row(a, b, s, lo, h, log_h):
    """h_t = a_t h_{t−1} + b_t over the channels from the float64 carry ``s``; writes h, log h and the carry, and
    keeps in ``lo`` the smallest b seen."""
    for c in range(a.shape[0]):
        v = a[c] * s[c] + b[c]
        s[c] = v
        h[c] = v
        log_h[c] = log_normal(max(v, _TINY64))     # v >= tiny when the kernel returns True
        lo[c] = min(lo[c], b[c])


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def mingru_log_linear_into(k_z, k_h, b_z, b_h, h0, has_h0, tiny, z, h, log_h, a_out, j_z, j_h):
    """Log-space minGRU from k_z + b_z and k_h + b_h (the biases (H,) added in the storage dtype, as
    ``_min_modes.affine`` adds them): z = σ(k_z), h̃ = g(k_h), h_t = (1 − z_t) h_{t−1} + z_t h̃_t from h0 (0 unless
    ``has_h0``), the state in float64; writes z, h, log h, and for the reverse pass a = 1 − z (as σ(−k_z)) and the
    step's derivatives j_z = ∂h_t/∂k_z,t = z_t (1 − z_t) (h̃_t − h_{t−1}), j_h = ∂h_t/∂k_h,t = z_t g'(k_h,t), each
    from float64 values. Returns whether every input was finite and every b_t = z_t h̃_t >= ``tiny`` (module
    docstring); False leaves the outputs to the log-space pass."""
    B, T, H = k_z.shape
    s, a, b = np.empty(H, np.float64), np.empty(H, np.float64), np.empty(H, np.float64)
    lo = np.full(H, np.inf)
    bad = np.zeros(H, np.float64)
    for i in range(B):
        for c in range(H):
            s[c] = np.float64(h0[i, c]) if has_h0 else 0.0
        for t in range(T):
            for c in range(H):
                kz, kh = np.float64(k_z[i, t, c] + b_z[c]), np.float64(k_h[i, t, c] + b_h[c])
                bad[c] += 0.0 * kz + 0.0 * kh
                zc, ac = _update_gate(kz)
                g, dg = _candidate_slope(kh)
                z[i, t, c] = zc
                a_out[i, t, c] = ac
                j_z[i, t, c] = zc * ac * (g - s[c])      # s: h_{t−1}, the carry before this step
                j_h[i, t, c] = zc * dg
                a[c] = ac
                b[c] = zc * g
            _step_row(a, b, s, lo, h[i, t], log_h[i, t])
    return all_zero(bad) and at_least(lo, tiny)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def log_linear_backward(a, j_1, j_2, dh, dk_1, dk_2):
    """The reverse pass of minGRU's linear form (``mingru_log_linear_into``, j_1 = j_z, j_2 = j_h) given dh = dL/dh
    (B, T, H): the adjoint g_t = dh_t + a_{t+1} g_{t+1} in float64 from the cached a, times the cached step's
    derivatives, dk_1 = g_t j_1, dk_2 = g_t j_2. A dh that is not finite gives gradients that are not, which the
    cell reports (``_gates.guarded_backward``)."""
    B, T, H = a.shape
    gad, a_next = np.empty(H, np.float64), np.empty(H, np.float64)    # g_{t+1}, a_{t+1}
    for i in range(B - 1, -1, -1):     # every loop descending: each array one descending stream, as the vanilla
        for c in range(H):             # reverse pass (``_min_scan_numba.mingru_scan_backward``)
            gad[c] = 0.0
            a_next[c] = 0.0
        for t in range(T - 1, -1, -1):
            for c in range(H - 1, -1, -1):
                gc = np.float64(dh[i, t, c]) + a_next[c] * gad[c]
                dk_1[i, t, c] = gc * np.float64(j_1[i, t, c])
                dk_2[i, t, c] = gc * np.float64(j_2[i, t, c])
                gad[c] = gc
                a_next[c] = np.float64(a[i, t, c])


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_log_linear_into(k_f, k_i, k_h, b_f, b_i, b_h, h0, has_h0, tiny, f_n, i_n, h, log_h, j_f, j_i, j_h):
    """Log-space minLSTM from k_n + b_n (the biases (H,) added as in ``mingru_log_linear_into``): f', i' (the
    normalised gates, with their slopes s_f = ∂f'/∂k_f, s_i = ∂i'/∂k_i: ``_gates_numba.normalised_scaled``),
    h̃ = g(k_h), h_t = f'_t h_{t−1} + i'_t h̃_t from h0, the state in float64; writes f', i', h, log h and the step's
    derivatives j_f = ∂h_t/∂k_f,t = s_f (h_{t−1} − h̃_t), j_i = ∂h_t/∂k_i,t = s_i (h̃_t − h_{t−1}) (i' = 1 − f'),
    j_h = ∂h_t/∂k_h,t = i'_t g'(k_h,t), each from float64 values. Returns as ``mingru_log_linear_into``."""
    B, T, H = k_f.shape
    s, a, b = np.empty(H, np.float64), np.empty(H, np.float64), np.empty(H, np.float64)
    lo = np.full(H, np.inf)
    bad = np.zeros(H, np.float64)
    for i in range(B):
        for c in range(H):
            s[c] = np.float64(h0[i, c]) if has_h0 else 0.0
        for t in range(T):
            for c in range(H):
                kf, ki = np.float64(k_f[i, t, c] + b_f[c]), np.float64(k_i[i, t, c] + b_i[c])
                kh = np.float64(k_h[i, t, c] + b_h[c])
                bad[c] += 0.0 * kf + 0.0 * ki + 0.0 * kh
                fc, ic, sf, si = normalised_scaled(kf, ki)
                g, dg = _candidate_slope(kh)
                d = g - s[c]                             # s: h_{t−1}, the carry before this step
                f_n[i, t, c] = fc
                i_n[i, t, c] = ic
                j_f[i, t, c] = -sf * d
                j_i[i, t, c] = si * d
                j_h[i, t, c] = ic * dg
                a[c] = fc
                b[c] = ic * g
            _step_row(a, b, s, lo, h[i, t], log_h[i, t])
    return all_zero(bad) and at_least(lo, tiny)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def minlstm_log_linear_backward(f_n, j_f, j_i, j_h, dh, dk_f, dk_i, dk_h):
    """The reverse pass of ``minlstm_log_linear_into`` given dh = dL/dh (B, T, H), as ``log_linear_backward`` with
    three gates: the adjoint g_t = dh_t + f'_{t+1} g_{t+1} in float64 from the cached f', times the cached
    derivatives, dk_n = g_t j_n."""
    B, T, H = f_n.shape
    gad, a_next = np.empty(H, np.float64), np.empty(H, np.float64)    # g_{t+1}, f'_{t+1}
    for i in range(B - 1, -1, -1):
        for c in range(H):
            gad[c] = 0.0
            a_next[c] = 0.0
        for t in range(T - 1, -1, -1):
            for c in range(H - 1, -1, -1):
                gc = np.float64(dh[i, t, c]) + a_next[c] * gad[c]
                dk_f[i, t, c] = gc * np.float64(j_f[i, t, c])
                dk_i[i, t, c] = gc * np.float64(j_i[i, t, c])
                dk_h[i, t, c] = gc * np.float64(j_h[i, t, c])
                gad[c] = gc
                a_next[c] = np.float64(f_n[i, t, c])
