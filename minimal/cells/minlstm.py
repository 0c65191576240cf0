"""minLSTM of Feng et al., "Were RNNs All We Needed?" (2024), Sec. 3.2, App. A (pseudocode), App. B (log space).

    f_t  = σ(k_f,t),   k_f,t = W_f x_t + b_f                    forget gate, Linear_f (no h_{t-1})
    i_t  = σ(k_i,t),   k_i,t = W_i x_t + b_i                    input gate, Linear_i (no h_{t-1})
    h̃_t = k_h,t,      k_h,t = W_h x_t + b_h                    candidate, Linear_h (no tanh)
    f'_t = f_t / (f_t + i_t),   i'_t = i_t / (f_t + i_t)        normalised gates: the scale of h_t does not
    h_t  = f'_t ⊙ h_{t−1} + i'_t ⊙ h̃_t,   h_0 = h0               grow with t (no cell state, no output gate)

We form the normalised gates from δ_t = log(i_t / f_t) = softplus(−k_f,t) − softplus(−k_i,t), which is finite
for every k: f'_t = σ(−δ_t), i'_t = σ(δ_t), log f'_t = −softplus(δ_t), log i'_t = −softplus(−δ_t).
"parallel" mode is the linear scan with a_t = f'_t, b_t = i'_t ⊙ h̃_t (``minimal.scan.linear_scan``);
"sequential" mode the step loop (``step_forward``). In parallel mode the gates (forward and backward) run in one
compiled pass each (``cells/_gates_numba.py``, beside this file: the same formulas, every exp and log vectorised, float64 inside;
the vanilla forward needs no log and takes f' = C / (A + C), i' = A / (A + C) with A = 1 + e^{−k_f},
C = 1 + e^{−k_i} both scaled by the largest of 1, e^{−k_f}, e^{−k_i}: as exact when both gates underflow, and
keeps the slopes ∂f'/∂k_f = f' i' σ(−k_f), ∂i'/∂k_i = f' i' σ(−k_i) from the same exps, in place of k_f, k_i,
so that its backward takes no exp),
on every backend but "numpy", which keeps the NumPy formulas below as the reference the pass is tested against
(the NumPy path is slower: its exp and log1p are scalar calls; ``python -m minimal bench train`` times the
training steps, ``bench/results/train_cpu_2026-11-26.txt``). On the CPU with the default scan (vanilla) and in log
space, gates and scan are one pass and their backward one reverse pass (``cells/_min_scan_numba.py``; vanilla, the
pass adds the biases and keeps each step's ∂h_t/∂k_f,t and ∂h_t/∂k_i,t, which the reverse pass multiplies by the
adjoint; on float32 arrays its gates are float32 arithmetic, ``cells/_min_scan_f32.py``: twice the vector lanes,
f' and i' within a few float32 roundings times 1 + |k_f| + |k_i|); in log space that pass first tries the linear
form h_t = a_t h_{t−1} + b_t in float64 (``cells/_min_log_linear.py``, the same h to float64 rounding with fewer exps
and no log per step; on float32 arrays its gates are float32 arithmetic, ``cells/_min_log_linear_f32.py``), kept
when every b_t is a normal number of the storage dtype.

Log space (App. B.3): the candidate is made positive with g (``minimal.cells.mingru.g``) and
    log a_t = −softplus(δ_t),   log b_t = −softplus(−δ_t) + log g(k_h,t),
    log h_t = log_scan(log a, log b, log h_0),   h_t = exp(log h_t).
Sequential log-space mode is the step loop with h̃_t = g(k_h,t). An initial state must be positive (h0 > 0),
since log h0 enters the scan; h0 = None means h_0 = 0.

Parameter count (Sec. 3.2): 3 H D weights (+ 3 H biases) against 4 H (D + H) for an LSTM of the same width
(``minimal.cells.lstm``); with expansion α = H / D the weight ratio is 3 / (4 (1 + α)), i.e.
38 / 25 / 19 / 15 % at α = 1 / 2 / 3 / 4 (``n_params``).

Glossary (shapes): B batch, T time, D input features, H hidden units.
    x (B, T, D)    W_f, W_i, W_h (H, D)    b_f, b_i, b_h (H,)    h0 (B, H)    y = h (B, T, H)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import expit

# Same paper as minGRU: the same input-only gates, checks and scans; g is App. B.3's positive candidate.
from ._gates import (MODES, check_dy, check_forward, check_step, dg, dlog_g, g, guarded_backward, input_gates_init,
                     input_gates_n_params, log_g, log_sigmoid, min_rnn_examples)
from ._min_modes import (add_bias, affine, affine_backward, bias_or_zeros, bptt, fused, initial_state,
                         linear_scan_backward, log_scan_backward, parallel_scan, parallel_scan_backward, scan_fused,
                         step_loop)
from ..validate import check_finite_result

__all__ = ["init", "forward", "backward", "step_forward", "examples", "n_params", "normalised_gates"]

GATES = ("f", "i", "h")


def n_params(d_in, d_hidden, bias=True):
    """Number of parameters: 3 H D weights (Linear_f, Linear_i, Linear_h) plus 3 H biases if ``bias``."""
    return input_gates_n_params(GATES, d_in, d_hidden, bias)


def init(rng, d_in, d_hidden, bias=True):
    """Random parameters, U(−1/√D, 1/√D) as for a default linear layer.

    Args:
        rng: ``numpy.random.Generator``; d_in: D; d_hidden: H; bias: include b_f, b_i, b_h.
    Returns:
        dict "W_f", "W_i", "W_h" (H, D) and, with ``bias``, "b_f", "b_i", "b_h" (H,); float64.
    """
    return input_gates_init(rng, GATES, d_in, d_hidden, bias)


def normalised_gates(k_f, k_i):
    """(f', i', δ) from the gate pre-activations, with δ = log(i / f), f' = σ(−δ), i' = σ(δ); f' + i' = 1."""
    delta = log_sigmoid(k_i) - log_sigmoid(k_f)         # softplus(−k_f) − softplus(−k_i)
    return expit(-delta), expit(delta), delta


class Cache(NamedTuple):
    x: np.ndarray            # (B, T, D)
    h0: np.ndarray           # (B, H) or None
    k_f: np.ndarray          # (B, T, H)  Linear_f(x); None where s_f or j_f is kept instead
    k_i: np.ndarray          # (B, T, H)  Linear_i(x); None where s_i or j_i is kept instead
    k_h: np.ndarray          # (B, T, H)  Linear_h(x); None where j_f is kept
    f_n: np.ndarray          # (B, T, H)  f'
    i_n: np.ndarray          # (B, T, H)  i'
    h_tilde: np.ndarray      # (B, T, H)  k_h, or g(k_h) in log space; None where j_f is kept
    h: np.ndarray            # (B, T, H)
    log_h: np.ndarray        # (B, T, H)  log-space parallel mode only, else None
    mode: str
    log_space: bool
    method: str
    backend: str
    s_f: np.ndarray = None   # (B, T, H)  ∂f'/∂k_f: the vanilla gates-then-scan path only (Blelloch), else None
    s_i: np.ndarray = None   # (B, T, H)  ∂i'/∂k_i: as s_f
    j_f: np.ndarray = None   # (B, T, H)  ∂h_t/∂k_f,t: the one passes only, which keep no k_f, k_i, k_h, h̃
    j_i: np.ndarray = None   # (B, T, H)  ∂h_t/∂k_i,t: as j_f
    j_h: np.ndarray = None   # (B, T, H)  ∂h_t/∂k_h,t: the log-space one pass in linear form only


def step_forward(params, x_t, h_prev, log_space=False):
    """One step of the sequential mode, h_t = f'_t ⊙ h_{t−1} + i'_t ⊙ h̃_t: x_t (B, D) and the state
    h_prev = h_{t−1} (B, H) give h_t (B, H); ``log_space`` uses h̃_t = g(k_h) (App. B.3)."""
    check_step(params, GATES, x_t, h_prev, log_space)
    f_n, i_n, _ = normalised_gates(affine(params, x_t, "f"), affine(params, x_t, "i"))
    k_h = affine(params, x_t, "h")
    return f_n * h_prev + i_n * (g(k_h) if log_space else k_h)


def forward(params, x, h0=None, mode=None, log_space=False, method=None, backend=None, out=None):
    """Run minLSTM over a sequence; the arguments are ``mingru.forward``'s, with the same meaning.

    Args:
        params: from ``init``; x: (B, T, D) input; h0: (B, H) initial state or None (zeros), > 0 in log space;
        mode: "parallel" (gates at once + scan) or "sequential" (step loop), None: "parallel"; log_space: the
            App. B.3 variant; method, backend: the scan algorithm and what runs it (see ``mingru.forward``);
        out: None, or a (B, T, H) array that receives h in parallel mode (run ``backward`` before writing it again).
    Returns:
        h: (B, T, H) the hidden states h_1 .. h_T; cache for ``backward``.
    """
    H, h0, mode, method, backend = check_forward("minlstm.forward", params, GATES, x, h0, mode, log_space,
                                                 method, backend, out)

    one_pass = mode == "parallel" and scan_fused(log_space, method, backend)
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is named below, not warned about
        # (B, T, H) each; the one passes add the biases as they read them
        k_f, k_i, k_h = (affine(params, x, n, bias=not one_pass) for n in GATES)
    if one_pass and not log_space:
        fused_out = _one_pass(params, k_f, k_i, k_h, h0, out)
        if fused_out is not None:
            h, f_n, i_n, j_f, j_i = fused_out
            return h, Cache(x, h0, None, None, None, f_n, i_n, None, h, None, mode, log_space, method, backend,
                            j_f=j_f, j_i=j_i)
        with np.errstate(over="ignore", invalid="ignore"):
            k_f, k_i, k_h = (add_bias(params, k, n) for k, n in zip((k_f, k_i, k_h), GATES))
    elif one_pass:
        fused_out = _scan_fused(params, k_f, k_i, k_h, h0, out)
        if fused_out is not None:
            h, f_n, i_n, h_tilde, log_h, (j_f, j_i, j_h) = fused_out
            if j_f is not None:
                k_f = k_i = k_h = None
            return h, Cache(x, h0, k_f, k_i, k_h, f_n, i_n, h_tilde, h, log_h, mode, log_space, method, backend,
                            j_f=j_f, j_i=j_i, j_h=j_h)
    # as in minGRU: a pre-activation that is not finite is an overflow, named here rather than as the scan's b
    check_finite_result("the gate pre-activations x W^T + b", (k_f, k_i, k_h), {"x": x, **params})
    if mode == "parallel" and fused(backend):
        f_n, i_n, a, b, h_tilde, slopes = _fused_gates(k_f, k_i, k_h, log_space)
        h, log_h = parallel_scan(a, b, h0, log_space, method, backend, out)
        return h, _cache(x, h0, k_f, k_i, k_h, f_n, i_n, h_tilde, h, log_h, mode, log_space, method, backend,
                         slopes)
    f_n, i_n, delta = normalised_gates(k_f, k_i)
    h_tilde = g(k_h) if log_space else k_h
    if mode == "sequential":
        # The states come from the step loop alone; the whole-sequence gates above are kept for backward.
        h, log_h = step_loop(step_forward, params, x, h0, H, log_space), None
    elif not log_space:
        h, log_h = parallel_scan(f_n, i_n * h_tilde, h0, False, method, backend, out)
    else:
        log_a = log_sigmoid(-delta)                     # log f' = −softplus(δ)
        log_b = log_sigmoid(delta) + log_g(k_h)         # log i' + log g(k_h)
        h, log_h = parallel_scan(log_a, log_b, h0, True, method, backend, out)
    return h, Cache(x, h0, k_f, k_i, k_h, f_n, i_n, h_tilde, h, log_h, mode, log_space, method, backend)


def _cache(x, h0, k_f, k_i, k_h, f_n, i_n, h_tilde, h, log_h, mode, log_space, method, backend, slopes):
    """The fused parallel mode's cache: with the vanilla gates' slopes (s_f, s_i) in place of k_f, k_i, which
    their backward no longer reads (the same memory: two (B, T, H) arrays for two)."""
    if slopes is None:
        return Cache(x, h0, k_f, k_i, k_h, f_n, i_n, h_tilde, h, log_h, mode, log_space, method, backend)
    return Cache(x, h0, None, None, k_h, f_n, i_n, h_tilde, h, log_h, mode, log_space, method, backend, *slopes)


def _fused_gates(k_f, k_i, k_h, log_space):
    """(f', i', a, b, h̃, slopes) of the parallel mode in one compiled pass: a = f' (vanilla) or log f',
    b = i' k_h or log i' + log g(k_h), h̃ = k_h or g(k_h); slopes = (∂f'/∂k_f, ∂i'/∂k_i) for the vanilla
    backward (``_gates_numba.normalised_scaled``), None in log space; arrays of k_f's shape and dtype."""
    from . import _gates_numba

    f_n, i_n, b = np.empty_like(k_f), np.empty_like(k_f), np.empty_like(k_f)
    flat = (k_f.ravel(), k_i.ravel(), k_h.ravel(), f_n.ravel(), i_n.ravel())
    if not log_space:
        s_f, s_i = np.empty_like(k_f), np.empty_like(k_f)
        _gates_numba.minlstm_gates(*flat, b.ravel(), s_f.ravel(), s_i.ravel())
        return f_n, i_n, f_n, b, k_h, (s_f, s_i)
    a, h_tilde = np.empty_like(k_f), np.empty_like(k_f)
    _gates_numba.minlstm_log_gates(*flat, a.ravel(), b.ravel(), h_tilde.ravel())
    return f_n, i_n, a, b, h_tilde, None


def _one_pass(params, k_f, k_i, k_h, h0, out):
    """(h, f', i', j_f, j_i) of the vanilla parallel mode on the CPU with the default scan: the gates and the scan in
    one pass (``_min_scan_numba.minlstm_scan_into``; on float32 arrays ``_min_scan_f32``'s) from k_f, k_i, k_h
    without their biases, which the pass adds; j_f = ∂h_t/∂k_f,t and j_i = ∂h_t/∂k_i,t are what the backward reads
    in place of k_h, h and the slopes. None when some value is not finite, so that the gates-then-scan path, which
    names the culprit, runs instead."""
    from . import _min_scan_f32, _min_scan_numba

    f_n, i_n, j_f, j_i = (np.empty_like(k_f) for _ in range(4))
    h = np.empty_like(k_f) if out is None else out
    biases = (bias_or_zeros(params, n, k_f) for n in GATES)
    kernel = (_min_scan_f32.minlstm_scan_into_f32 if k_f.dtype == np.float32    # float32 in float32 registers
              else _min_scan_numba.minlstm_scan_into)
    ok = kernel(k_f, k_i, k_h, *biases, initial_state(h0, k_f), f_n, i_n, j_f, j_i, h)
    return (h, f_n, i_n, j_f, j_i) if ok else None


def _scan_fused(params, k_f, k_i, k_h, h0, out):
    """(h, f', i', h̃, log h, (j_f, j_i, j_h)) of the log-space parallel mode on the CPU, the gates and the scan in one
    pass, from k_f, k_i, k_h without their biases: in linear form (``_min_log_linear.minlstm_log_linear_into``;
    on float32 arrays ``_min_log_linear_f32``'s, the gates in float32 registers; the kernel adds the biases as it
    reads them and keeps the step's derivatives j_f, j_i, j_h for the reverse pass and no h̃: None), else, with
    the biases added to k_f, k_i, k_h in place, the log-space pass (``_min_scan_numba.minlstm_log_scan_into``; no
    j: None). None when some value is not finite (the k then hold their biases), so that the gates-then-scan
    path, which names the culprit, runs instead."""
    from . import _min_log_linear as l, _min_log_linear_f32, _min_scan_numba as k

    f_n, i_n, log_h = np.empty_like(k_f), np.empty_like(k_f), np.empty_like(k_f)
    h = np.empty_like(k_f) if out is None else out
    j_f, j_i, j_h = np.empty_like(k_f), np.empty_like(k_f), np.empty_like(k_f)
    biases = (bias_or_zeros(params, n, k_f) for n in GATES)
    linear = (_min_log_linear_f32.minlstm_log_linear_into_f32 if k_f.dtype == np.float32   # float32 registers
              else l.minlstm_log_linear_into)
    if linear(k_f, k_i, k_h, *biases, initial_state(h0, k_f), h0 is not None, l.tiny(k_f), f_n, i_n, h, log_h, j_f,
              j_i, j_h):
        return h, f_n, i_n, None, log_h, (j_f, j_i, j_h)
    with np.errstate(over="ignore", invalid="ignore"):
        for kn, n in zip((k_f, k_i, k_h), GATES):
            add_bias(params, kn, n)
    h_tilde = j_f      # the linear form's buffers, unused now
    log_h0 = initial_state(h0, k_f, log=True)
    if not k.minlstm_log_scan_into(k_f, k_i, k_h, log_h0, h0 is not None, f_n, i_n, h_tilde, log_h):
        return None
    return np.exp(log_h, out=out), f_n, i_n, h_tilde, log_h, (None, None, None)


def _fused_backward(cache, dy):
    """dL/dk_f, dL/dk_i, dL/dk_h of the fused parallel mode: the scan's backward, then the gates' in one pass (with
    the default CPU scan: both in one reverse pass, ``_min_scan_numba`` / ``_min_log_linear``, from the cached j_f,
    j_i (and in log space j_h); a non-finite value in the log-space pass reruns the two passes, which name it)."""
    from . import _gates_numba, _min_log_linear, _min_scan_numba

    x, h0, k_f, k_i, k_h, f_n, i_n, h_tilde, h, log_h, mode, log_space, method, backend, s_f, s_i, j_f, j_i, j_h = cache
    if j_f is not None:
        dk_f, dk_i, dk_h = np.empty_like(f_n), np.empty_like(f_n), np.empty_like(f_n)
        if j_h is not None:
            _min_log_linear.minlstm_log_linear_backward(f_n, j_f, j_i, j_h, np.ascontiguousarray(dy), dk_f, dk_i, dk_h)
        else:
            _min_scan_numba.minlstm_scan_backward(f_n, i_n, j_f, j_i, np.ascontiguousarray(dy), dk_f, dk_i, dk_h)
        return dk_f, dk_i, dk_h
    if log_space and scan_fused(log_space, method, backend):
        dk_f, dk_i, dk_h = np.empty_like(k_h), np.empty_like(k_h), np.empty_like(k_h)
        dy = np.ascontiguousarray(dy)
        log_h0 = initial_state(h0, k_f, log=True)
        if _min_scan_numba.minlstm_log_scan_backward(k_f, k_i, k_h, f_n, i_n, log_h, h, dy, log_h0, h0 is not None,
                                                     dk_f, dk_i, dk_h):
            return dk_f, dk_i, dk_h
    # log a, log b recomputed (one pass) rather than cached: the cache keeps the memory the paper counts
    a, b = _fused_gates(k_f, k_i, k_h, True)[2:4] if log_space else (f_n, None)
    d_a, d_b = parallel_scan_backward(a, b, log_h, h, h0, dy, log_space, method, backend)
    dk_f, dk_i, dk_h = np.empty_like(k_h), np.empty_like(k_h), np.empty_like(k_h)
    if log_space:
        _gates_numba.minlstm_log_gates_backward(d_a.ravel(), d_b.ravel(), f_n.ravel(), i_n.ravel(), k_f.ravel(),
                                                k_i.ravel(), k_h.ravel(), dk_f.ravel(), dk_i.ravel(), dk_h.ravel())
    else:
        _gates_numba.minlstm_gates_backward(d_a.ravel(), d_b.ravel(), i_n.ravel(), s_f.ravel(), s_i.ravel(),
                                            k_h.ravel(), dk_f.ravel(), dk_i.ravel(), dk_h.ravel())
    return dk_f, dk_i, dk_h


def backward(params, cache, dy):
    """dy = dL/dh (B, T, H) -> (dx (B, T, D), grads with the keys of params); an overflow is reported as by
    ``mingru.backward`` (naming dy, x and the params)."""
    return guarded_backward(_backward, params, cache, dy)


def _backward(params, cache, dy):
    x, h0, k_f, k_i, k_h, f_n, i_n, h_tilde, h, log_h, mode, log_space, method, backend, *_ = cache
    check_dy(dy, h, params)
    if mode == "parallel" and fused(backend):
        dk_f, dk_i, dk_h = _fused_backward(cache, dy)
        return affine_backward(params, x, {"f": dk_f, "i": dk_i, "h": dk_h})
    # 4. the recurrence, as the mode ran it; the result is dL/dδ and dL/dk_h
    if mode == "sequential" or not log_space:
        da, db = (bptt(f_n, h, h0, dy) if mode == "sequential"
                  else linear_scan_backward(f_n, h, dy, h0, method, backend))
        df_n, di_n, dh_tilde = da, db * h_tilde, db * i_n     # a = f', b = i' ⊙ h̃
        # f' = σ(−δ), i' = σ(δ): both have |derivative| f' i'
        ddelta = (di_n - df_n) * f_n * i_n
        dk_h = dh_tilde * dg(k_h) if log_space else dh_tilde
    else:
        delta = log_sigmoid(k_i) - log_sigmoid(k_f)     # recomputed: cheaper than caching
        log_a = log_sigmoid(-delta)
        log_b = log_sigmoid(delta) + log_g(k_h)
        dlog_a, dlog_b = log_scan_backward(log_a, log_b, log_h, h, h0, dy, backend)
        # d(−softplus(δ))/dδ = −σ(δ) = −i' and d(−softplus(−δ))/dδ = σ(−δ) = f'
        ddelta = dlog_b * f_n - dlog_a * i_n
        dk_h = dlog_b * dlog_g(k_h)
    # 3. δ = softplus(−k_f) − softplus(−k_i); d softplus(−k)/dk = −σ(−k) = −(1 − σ(k)); σ recomputed (cheap)
    dk_f = -ddelta * expit(-k_f)
    dk_i = ddelta * expit(-k_i)
    # 2.-1. gate and candidate pre-activations k_n = x W_n^T + b_n
    return affine_backward(params, x, {"f": dk_f, "i": dk_i, "h": dk_h})


def examples(rng):
    """Tiny float64 cases: both modes, vanilla and log space, T = 1 and odd T, with and without h0."""
    return min_rnn_examples(init, rng)
