"""minGRU of Feng et al., "Were RNNs All We Needed?" (2024), Sec. 3.1, App. A (pseudocode), App. B (log space).

    k_z,t = W_z x_t + b_z,   z_t = σ(k_z,t)                     update gate, Linear_z (no h_{t-1})
    k_h,t = W_h x_t + b_h,   h̃_t = k_h,t                        candidate, Linear_h (no h_{t-1}, no tanh)
    h_t   = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t,   h_0 = h0 (zeros if None)

No gate sees h_{t−1}, so the recurrence is the linear scan h_t = a_t ⊙ h_{t−1} + b_t with a_t = 1 − z_t,
b_t = z_t ⊙ h̃_t: "parallel" mode computes every gate at once and runs ``minimal.scan.linear_scan``;
"sequential" mode is the step loop (``step_forward``), as in the paper's two pseudocode listings. In parallel
mode the gates (forward and backward) run in one compiled pass each (``cells/_gates_numba.py``, beside this file: the same formulas,
exp and log vectorised, float64 inside) on every backend but "numpy" (so also with backend=None, "numba"), which
keeps the NumPy formulas below as the reference the pass is tested against. Vanilla, with the default scan on the
CPU (the sequential loop), and in log space on the CPU, the gates and the scan are one pass and their backward one
reverse pass (``cells/_min_scan_numba.py``): the same equations, with no a, b, da, db arrays in memory (vanilla,
the pass adds the biases and keeps each step's ∂h_t/∂k_z,t, which the reverse pass multiplies by the adjoint; on
float32 arrays its gates are float32 arithmetic, ``cells/_min_scan_f32.py``: twice the vector lanes, z within a few
float32 roundings). In log
space that pass first tries the linear form h_t = a_t h_{t−1} + b_t in float64 (``cells/_min_log_linear.py``:
the same h to float64 rounding, with two exps an element where the log form takes seven, and it too keeps
each step's ∂h_t/∂k_z,t, ∂h_t/∂k_h,t for the reverse pass; on float32 arrays its gates and log h are float32
arithmetic, ``cells/_min_log_linear_f32.py``, the state still float64), which it keeps when every b_t is a normal
number of the storage dtype, and runs the log-space recurrence below otherwise.

Log space (App. B.3; Heinsen 2023), for numerical stability of long scans. The candidate is made positive
with g(k) = k + 1/2 (k ≥ 0), σ(k) (k < 0), which is continuous at 0 (g(0) = 1/2), so every state is positive:
    log a_t = log(1 − z_t) = −softplus(k_z,t),    log z_t = −softplus(−k_z,t)
    log b_t = log z_t + log g(k_h,t),             log g(k) = log(k + 1/2) (k ≥ 0), −softplus(−k) (k < 0)
    log h_t = log_scan(log a, log b, log h_0),    h_t = exp(log h_t)
``log_space=True`` with "sequential" mode is the step loop with h̃_t = g(k_h,t). Because log h_0 enters the
scan, an initial state must be positive (h0 > 0); h0 = None means h_0 = 0 (no term in the scan).

Parameter count (Sec. 3.1, "parameter efficiency"): 2 H D weights (+ 2 H biases) against 3 H (D + H) for a
GRU of the same width (``minimal.cells.gru``); with expansion α = H / D the weight ratio is 2 / (3 (1 + α)),
i.e. 33 / 22 / 17 / 13 % at α = 1 / 2 / 3 / 4 (``n_params``).

Glossary (shapes): B batch, T time, D input features, H hidden units.
    x (B, T, D)    W_z, W_h (H, D)    b_z, b_h (H,)    h0 (B, H)    y = h (B, T, H)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import expit

# App. B.3's g, log g and log σ live in _gates (minLSTM uses them too); they stay importable from here.
from ._gates import (MODES, check_dy, check_forward, check_step, dg, dlog_g, g, guarded_backward, input_gates_init,
                     input_gates_n_params, log_g, log_sigmoid, min_rnn_examples)
from ._min_modes import (add_bias, affine, affine_backward, bias_or_zeros, bptt, fused, initial_state,
                         linear_scan_backward, log_scan_backward, parallel_scan, parallel_scan_backward, scan_fused,
                         step_loop)
from ..validate import check_finite_result

__all__ = ["init", "forward", "backward", "step_forward", "examples", "n_params"]

GATES = ("z", "h")


# --- parameters ---------------------------------------------------------------------------------------
def n_params(d_in, d_hidden, bias=True):
    """Number of parameters: 2 H D weights (Linear_z, Linear_h) plus 2 H biases if ``bias``."""
    return input_gates_n_params(GATES, d_in, d_hidden, bias)


def init(rng, d_in, d_hidden, bias=True):
    """Random parameters, U(−1/√D, 1/√D) as for a default linear layer.

    Args:
        rng: ``numpy.random.Generator``; d_in: D; d_hidden: H; bias: include b_z, b_h.
    Returns:
        dict "W_z", "W_h" (H, D) and, with ``bias``, "b_z", "b_h" (H,); float64.
    """
    return input_gates_init(rng, GATES, d_in, d_hidden, bias)


# --- forward ------------------------------------------------------------------------------------------
class Cache(NamedTuple):
    x: np.ndarray            # (B, T, D)
    h0: np.ndarray           # (B, H) or None
    k_z: np.ndarray          # (B, T, H)  Linear_z(x); None where j_z is kept instead
    k_h: np.ndarray          # (B, T, H)  Linear_h(x); as k_z
    z: np.ndarray            # (B, T, H)  σ(k_z)
    h_tilde: np.ndarray      # (B, T, H)  k_h, or g(k_h) in log space; as k_z
    h: np.ndarray            # (B, T, H)
    log_h: np.ndarray        # (B, T, H)  log-space parallel mode only, else None
    mode: str
    log_space: bool
    method: str
    backend: str
    j_z: np.ndarray = None   # (B, T, H)  ∂h_t/∂k_z,t: the one passes only, which keep no k_z, k_h, h̃
    j_h: np.ndarray = None   # (B, T, H)  ∂h_t/∂k_h,t: the log-space one pass in linear form only
    a: np.ndarray = None     # (B, T, H)  a_t = 1 − z_t = σ(−k_z,t) from k_z: as j_h


def _fused_gates(k_z, k_h, log_space):
    """(z, a, b, h̃) of the parallel mode in one compiled pass: a = 1 − z or log(1 − z), b = z k_h or
    log z + log g(k_h), h̃ = k_h or g(k_h); arrays of k_z's shape and dtype."""
    from . import _gates_numba

    z, a, b = np.empty_like(k_z), np.empty_like(k_z), np.empty_like(k_z)
    if not log_space:
        _gates_numba.mingru_gates(k_z.ravel(), k_h.ravel(), z.ravel(), a.ravel(), b.ravel())
        return z, a, b, k_h
    h_tilde = np.empty_like(k_z)
    _gates_numba.mingru_log_gates(k_z.ravel(), k_h.ravel(), z.ravel(), a.ravel(), b.ravel(), h_tilde.ravel())
    return z, a, b, h_tilde


def _one_pass(params, k_z, k_h, h0, out):
    """(h, z, j_z) of the vanilla parallel mode on the CPU with the default scan: the gates and the scan in one pass
    (``_min_scan_numba.mingru_scan_into``; on float32 arrays ``_min_scan_f32``'s) from k_z, k_h without their
    biases, which the pass adds; j_z = ∂h_t/∂k_z,t is what the backward reads in place of k_h and h. None when some
    value is not finite, so that the gates-then-scan path, which names the culprit, runs instead."""
    from . import _min_scan_f32, _min_scan_numba

    z, j_z, h = np.empty_like(k_z), np.empty_like(k_z), (np.empty_like(k_z) if out is None else out)
    b_z, b_h = (bias_or_zeros(params, n, k_z) for n in GATES)
    kernel = (_min_scan_f32.mingru_scan_into_f32 if k_z.dtype == np.float32    # float32 in float32 registers
              else _min_scan_numba.mingru_scan_into)
    ok = kernel(k_z, k_h, b_z, b_h, initial_state(h0, k_z), z, j_z, h)
    return (h, z, j_z) if ok else None


def _scan_fused(params, k_z, k_h, h0, out):
    """(h, z, h̃, log h, (a, j_z, j_h)) of the log-space parallel mode on the CPU, the gates and the scan in one pass,
    from k_z, k_h without their biases: in linear form (``_min_log_linear.mingru_log_linear_into``; on float32
    arrays ``_min_log_linear_f32``'s, the gates in float32 registers; the kernel adds the biases as it reads
    them, and keeps a = 1 − z and the step's derivatives j_z, j_h for the reverse pass and no h̃: None), else,
    with the biases added to k_z, k_h in place, the log-space pass (``_min_scan_numba.mingru_log_scan_into``; no
    a, j_z, j_h: None). None when some value is not finite (k_z, k_h then hold their biases), so that the
    gates-then-scan path, which names the culprit, runs instead."""
    from . import _min_log_linear as l, _min_log_linear_f32, _min_scan_numba as k

    z, log_h = np.empty_like(k_z), np.empty_like(k_z)
    h = np.empty_like(k_z) if out is None else out
    a, j_z, j_h = np.empty_like(k_z), np.empty_like(k_z), np.empty_like(k_z)
    b_z, b_h = (bias_or_zeros(params, n, k_z) for n in GATES)
    linear = (_min_log_linear_f32.mingru_log_linear_into_f32 if k_z.dtype == np.float32    # float32 registers
              else l.mingru_log_linear_into)
    if linear(k_z, k_h, b_z, b_h, initial_state(h0, k_z), h0 is not None, l.tiny(k_z), z, h, log_h, a, j_z, j_h):
        return h, z, None, log_h, (a, j_z, j_h)
    with np.errstate(over="ignore", invalid="ignore"):
        for kn, n in zip((k_z, k_h), GATES):
            add_bias(params, kn, n)
    h_tilde = a      # the linear form's buffers, unused now
    log_h0 = initial_state(h0, k_z, log=True)
    if not k.mingru_log_scan_into(k_z, k_h, log_h0, h0 is not None, z, h_tilde, log_h):
        return None
    return np.exp(log_h, out=out), z, h_tilde, log_h, (None, None, None)


def _fused_backward(cache, dy):
    """dL/dk_z, dL/dk_h of the fused parallel mode: the scan's backward, then the gates' in one pass (with the
    default CPU scan: both in one reverse pass, ``_min_scan_numba`` / ``_min_log_linear``, from the cached j_z (and
    in log space j_h, a); a non-finite value in the log-space pass reruns the two passes, which name it)."""
    from . import _gates_numba, _min_log_linear, _min_scan_numba

    x, h0, k_z, k_h, z, h_tilde, h, log_h, mode, log_space, method, backend, j_z, j_h, a = cache
    if j_z is not None:
        dk_z, dk_h = np.empty_like(z), np.empty_like(z)
        if j_h is not None:
            _min_log_linear.log_linear_backward(a, j_z, j_h, np.ascontiguousarray(dy), dk_z, dk_h)
        else:
            _min_scan_numba.mingru_scan_backward(z, j_z, np.ascontiguousarray(dy), dk_z, dk_h)
        return dk_z, dk_h
    if log_space and scan_fused(log_space, method, backend):
        dk_z, dk_h, dy = np.empty_like(k_z), np.empty_like(k_z), np.ascontiguousarray(dy)
        log_h0 = initial_state(h0, k_z, log=True)
        if _min_scan_numba.mingru_log_scan_backward(k_z, k_h, z, log_h, h, dy, log_h0, h0 is not None, dk_z, dk_h):
            return dk_z, dk_h
    # the scan's coefficients recomputed (one pass) rather than cached: the cache keeps the memory the paper counts
    a, b = _fused_gates(k_z, k_h, True)[1:3] if log_space else (1.0 - z, None)
    d_a, d_b = parallel_scan_backward(a, b, log_h, h, h0, dy, log_space, method, backend)
    dk_z, dk_h = np.empty_like(k_z), np.empty_like(k_z)
    _gates_numba.mingru_gates_backward(d_a.ravel(), d_b.ravel(), z.ravel(), k_h.ravel(), h_tilde.ravel(), log_space,
                                       dk_z.ravel(), dk_h.ravel())
    return dk_z, dk_h


def step_forward(params, x_t, h_prev, log_space=False):
    """One step of the sequential mode: h_t = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t.

    Args:
        x_t: (B, D); h_prev: (B, H) the state h_{t−1}; log_space: use h̃_t = g(k_h) (App. B.3).
    Returns:
        h_t: (B, H).
    """
    check_step(params, GATES, x_t, h_prev, log_space)
    z = expit(affine(params, x_t, "z"))
    k_h = affine(params, x_t, "h")
    h_tilde = g(k_h) if log_space else k_h
    return (1.0 - z) * h_prev + z * h_tilde


def forward(params, x, h0=None, mode=None, log_space=False, method=None, backend=None, out=None):
    """Run minGRU over a sequence.

    Args:
        params: from ``init``.
        x: (B, T, D) input.
        h0: (B, H) initial state or None (zeros); must be > 0 when ``log_space``.
        mode: "parallel" (gates at once + scan) or "sequential" (step loop); None: "parallel".
        log_space: the App. B.3 variant (positive candidate g, scan in log space in parallel mode).
        method: the scan algorithm of the vanilla parallel mode (``minimal.scan.linear_scan``). None is "auto",
            the fastest for the backend, the sequential Numba loop on the CPU (one core gives the Blelloch tree no
            parallelism to use: ``python -m minimal bench scan``); "blelloch" runs the parallel tree of the paper's
            parallel mode, to the same values up to float rounding. A method other than the default where no such
            scan runs (sequential mode, log space) is refused.
        backend: what runs the parallel mode, "numpy", "numba" or "cuda"; None is "numba". Every backend but
            "numpy" runs the gates fused (module docstring) and passes itself on to the scan (``linear_scan``, or
            ``log_scan`` in log space). The sequential mode is NumPy's step loop whatever the backend.
        (The words and their defaults: ``minimal.conventions``.)
        out: None, or a (B, T, H) array of x's dtype that receives h in parallel mode (``linear_scan``'s
            ``out=``; in log space, exp(log h) is written there). A training loop that passes one buffer every
            step reuses its memory; the cache then holds ``out``, so run ``backward`` before writing it again.
    Returns:
        h: (B, T, H) the hidden states h_1 .. h_T; cache for ``backward``.
    """
    H, h0, mode, method, backend = check_forward("mingru.forward", params, GATES, x, h0, mode, log_space,
                                                 method, backend, out)

    one_pass = mode == "parallel" and scan_fused(log_space, method, backend)
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is named below, not warned about
        # (B, T, H) each; the one passes add the biases as they read them
        k_z, k_h = (affine(params, x, n, bias=not one_pass) for n in GATES)
    if one_pass and not log_space:
        fused_out = _one_pass(params, k_z, k_h, h0, out)
        if fused_out is not None:
            h, z, j_z = fused_out
            return h, Cache(x, h0, None, None, z, None, h, None, mode, log_space, method, backend, j_z)
        with np.errstate(over="ignore", invalid="ignore"):
            k_z, k_h = (add_bias(params, k, n) for k, n in zip((k_z, k_h), GATES))
    elif one_pass:
        fused_out = _scan_fused(params, k_z, k_h, h0, out)
        if fused_out is not None:
            h, z, h_tilde, log_h, (a, j_z, j_h) = fused_out
            if j_z is not None:
                k_z = k_h = None
            return h, Cache(x, h0, k_z, k_h, z, h_tilde, h, log_h, mode, log_space, method, backend, j_z, j_h, a)
    # x and the params are finite, so a pre-activation that is not finite has overflowed: named here, not as the
    # scan's b
    check_finite_result("the gate pre-activations x W^T + b", (k_z, k_h), {"x": x, **params})
    if mode == "parallel" and fused(backend):
        z, a, b, h_tilde = _fused_gates(k_z, k_h, log_space)
        h, log_h = parallel_scan(a, b, h0, log_space, method, backend, out)
        return h, Cache(x, h0, k_z, k_h, z, h_tilde, h, log_h, mode, log_space, method, backend)
    z = expit(k_z)
    h_tilde = g(k_h) if log_space else k_h
    if mode == "sequential":
        # The states come from the step loop alone; the whole-sequence gates above are kept for backward.
        h, log_h = step_loop(step_forward, params, x, h0, H, log_space), None
    elif not log_space:
        h, log_h = parallel_scan(1.0 - z, z * h_tilde, h0, False, method, backend, out)
    else:
        log_a = log_sigmoid(-k_z)                       # log(1 − z) = −softplus(k_z)
        log_b = log_sigmoid(k_z) + log_g(k_h)           # log z + log g(k_h)
        h, log_h = parallel_scan(log_a, log_b, h0, True, method, backend, out)
    return h, Cache(x, h0, k_z, k_h, z, h_tilde, h, log_h, mode, log_space, method, backend)


# --- backward -----------------------------------------------------------------------------------------
def backward(params, cache, dy):
    """Gradients of a scalar loss L given dy = dL/dh of shape (B, T, H).

    An overflow raises an OverflowInputError naming dy, x and the params (not the scan's arrays).

    Returns:
        dx: (B, T, D); grads: dict with the keys of params.
    """
    return guarded_backward(_backward, params, cache, dy)


def _backward(params, cache, dy):
    x, h0, k_z, k_h, z, h_tilde, h, log_h, mode, log_space, method, backend = cache[:12]
    check_dy(dy, h, params)
    if mode == "parallel" and fused(backend):
        dk_z, dk_h = _fused_backward(cache, dy)
        return affine_backward(params, x, {"z": dk_z, "h": dk_h})
    # 3. the recurrence, as the mode ran it: h_t = a_t ⊙ h_{t−1} + b_t with a = 1 − z, b = z ⊙ h̃
    if mode == "sequential" or not log_space:
        a = 1.0 - z
        da, db = bptt(a, h, h0, dy) if mode == "sequential" else linear_scan_backward(a, h, dy, h0, method, backend)
        dk_z = (db * h_tilde - da) * z * (1.0 - z)
        dh_tilde = db * z
        dk_h = dh_tilde * dg(k_h) if log_space else dh_tilde
    else:
        log_a = log_sigmoid(-k_z)                       # recomputed: cheaper than caching
        log_b = log_sigmoid(k_z) + log_g(k_h)
        dlog_a, dlog_b = log_scan_backward(log_a, log_b, log_h, h, h0, dy, backend)
        # d(−softplus(k))/dk = −σ(k) = −z and d(−softplus(−k))/dk = 1 − z
        dk_z = dlog_b * (1.0 - z) - dlog_a * z
        dk_h = dlog_b * dlog_g(k_h)
    # 2.-1. candidate and gate pre-activations k_n = x W_n^T + b_n
    return affine_backward(params, x, {"z": dk_z, "h": dk_h})


def examples(rng):
    """Tiny float64 cases: both modes, vanilla and log space, T = 1 and odd T, with and without h0."""
    return min_rnn_examples(init, rng)
