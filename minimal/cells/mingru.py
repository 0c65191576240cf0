"""minGRU of Feng et al., "Were RNNs All We Needed?" (2024), Sec. 3.1, App. A (pseudocode), App. B (log space).

    k_z,t = W_z x_t + b_z,   z_t = σ(k_z,t)                     update gate, Linear_z (no h_{t-1})
    k_h,t = W_h x_t + b_h,   h̃_t = k_h,t                        candidate, Linear_h (no h_{t-1}, no tanh)
    h_t   = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t,   h_0 = h0 (zeros if None)

No gate sees h_{t−1}, so the recurrence is the linear scan h_t = a_t ⊙ h_{t−1} + b_t with a_t = 1 − z_t,
b_t = z_t ⊙ h̃_t: "parallel" mode computes every gate at once and runs ``minimal.scan.linear_scan``;
"sequential" mode is the step loop (``step_forward``), as in the paper's two pseudocode listings.

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

import math
from typing import NamedTuple

import numpy as np
from scipy.special import expit

from .. import scan
from ..validate import check_array, check_choice, check_positive_int
from ._contract import Example

__all__ = ["init", "forward", "backward", "step_forward", "examples", "n_params", "g", "log_g",
           "dg", "dlog_g", "log_sigmoid", "MODES"]

MODES = ("sequential", "parallel")
GATES = ("z", "h")


# --- App. B.3: the positive candidate g and its log -----------------------------------------------------
# Written branch-free (no np.where): with random signs a select costs more than the arithmetic here.
def log_sigmoid(k):
    """log σ(k) = −softplus(−k) = min(k, 0) − log(1 + exp(−|k|)), accurate for every finite k."""
    return np.minimum(k, 0.0) - np.log1p(np.exp(-np.abs(k)))


def g(k):
    """g(k) = k + 1/2 for k ≥ 0, σ(k) for k < 0 (Feng et al. App. B.3); positive, continuous, increasing.
    Evaluated as σ(min(k, 0)) + max(k, 0)."""
    return expit(np.minimum(k, 0.0)) + np.maximum(k, 0.0)


def log_g(k):
    """log g(k) = log(k + 1/2) for k ≥ 0, log σ(k) for k < 0, without forming g (stays finite for k ≪ 0).
    Evaluated as log(max(k, 0) + 1/2) + log σ(min(k, 0)) − log(1/2): each branch cancels the other's term."""
    return np.log(np.maximum(k, 0.0) + 0.5) + (log_sigmoid(np.minimum(k, 0.0)) + math.log(2.0))


def dg(k):
    """g'(k): 1 for k ≥ 0, σ(k)(1 − σ(k)) for k < 0."""
    s = expit(np.minimum(k, 0.0))
    return 1.0 - (k < 0).astype(k.dtype) * (1.0 - s * (1.0 - s))


def dlog_g(k):
    """(log g)'(k): 1 / (k + 1/2) for k ≥ 0, 1 − σ(k) for k < 0."""
    neg = (k < 0).astype(k.dtype)
    return (1.0 - neg) / (np.maximum(k, 0.0) + 0.5) + neg * expit(-np.minimum(k, 0.0))


def _weight_grad(dk, x):
    """Σ_{b,t} dk_{bt}^T x_{bt}: (..., H) and (..., D) to (H, D), as one matrix product."""
    return dk.reshape(-1, dk.shape[-1]).T @ x.reshape(-1, x.shape[-1])


# --- parameters ---------------------------------------------------------------------------------------
def n_params(d_in, d_hidden, bias=True):
    """Number of parameters: 2 H D weights (Linear_z, Linear_h) plus 2 H biases if ``bias``."""
    d_in = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    return 2 * H * d_in + (2 * H if bias else 0)


def init(rng, d_in, d_hidden, bias=True):
    """Random parameters, U(−1/√D, 1/√D) as for a default linear layer.

    Args:
        rng: ``numpy.random.Generator``; d_in: D; d_hidden: H; bias: include b_z, b_h.
    Returns:
        dict "W_z", "W_h" (H, D) and, with ``bias``, "b_z", "b_h" (H,); float64.
    """
    return _init_gates(rng, d_in, d_hidden, bias, GATES)


def _init_gates(rng, d_in, d_hidden, bias, gates):
    """W_n (H, D) and b_n (H,) for each gate name n, U(−1/√D, 1/√D). Shared with minLSTM."""
    D = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    s = 1.0 / np.sqrt(D)
    params = {}
    for n in gates:
        params[f"W_{n}"] = rng.uniform(-s, s, (H, D))
        if bias:
            params[f"b_{n}"] = rng.uniform(-s, s, H)
    return params


def _check_params(params, gates=GATES):
    """Validate keys and shapes of input-only gates W_n (H, D), b_n (H,); return (D, H, bias, dtype).
    Shared with minLSTM, whose gates have the same form."""
    weights = {f"W_{n}" for n in gates}
    biases = {f"b_{n}" for n in gates}
    if set(params) not in (weights, weights | biases):
        raise ValueError(f"params must have the keys {sorted(weights)} and optionally {sorted(biases)}, "
                         f"got {sorted(params)}")
    first = f"W_{gates[0]}"
    W = check_array(first, params[first], ndim=2, names=("H", "D"))
    H, D = W.shape
    for name, p in params.items():
        want = (H, D) if name.startswith("W") else (H,)
        check_array(name, p, want, names=("H", "D")[:len(want)])
        if p.dtype != W.dtype:
            raise ValueError(f"{name} must have the dtype of {first} ({W.dtype}), got {p.dtype}")
    return D, H, f"b_{gates[0]}" in params, W.dtype


def _affine(params, x, n):
    """Linear_n(x) = x W_n^T + b_n over the last axis."""
    k = x @ params[f"W_{n}"].T
    return k + params[f"b_{n}"] if f"b_{n}" in params else k


def _check_state(name, h0, B, H, dtype, log_space):
    if h0 is None:
        return None
    check_array(name, h0, (B, H), names=("B", "H"))
    if h0.dtype != dtype:
        raise ValueError(f"{name} must have the params' dtype {dtype}, got {h0.dtype}")
    if log_space and not np.all(h0 > 0):
        raise ValueError(f"{name} must be positive (> 0) in log space, since log {name} enters the scan; "
                         f"got minimum {h0.min()}")
    return h0


def _check_flags(mode, log_space):
    check_choice("mode", mode, MODES)
    if not isinstance(log_space, (bool, np.bool_)):
        raise ValueError(f"log_space must be a bool, got {log_space!r}")


def _check_input(name, x, D, dtype, ndim):
    names = ("B", "T", "D") if ndim == 3 else ("B", "D")
    check_array(name, x, (None,) * (ndim - 1) + (D,), names=names)
    if ndim == 3 and x.shape[1] < 1:
        raise ValueError(f"{name} must have at least one time step, got shape {x.shape}")
    if x.dtype != dtype:
        raise ValueError(f"{name} must have the params' dtype {dtype}, got {x.dtype}")


def _scan_kwargs(method, backend):
    # backend=None leaves the choice to minimal.scan; the log scan has no method.
    kw = {} if backend is None else {"backend": backend}
    return kw if method is None else dict(kw, method=method)


# --- forward ------------------------------------------------------------------------------------------
class Cache(NamedTuple):
    x: np.ndarray            # (B, T, D)
    h0: np.ndarray           # (B, H) or None
    k_z: np.ndarray          # (B, T, H)  Linear_z(x)
    k_h: np.ndarray          # (B, T, H)  Linear_h(x)
    z: np.ndarray            # (B, T, H)  σ(k_z)
    h_tilde: np.ndarray      # (B, T, H)  k_h, or g(k_h) in log space
    h: np.ndarray            # (B, T, H)
    log_h: np.ndarray        # (B, T, H)  log-space parallel mode only, else None
    mode: str
    log_space: bool
    method: str
    backend: str


def step_forward(params, x_t, h_prev, log_space=False):
    """One step of the sequential mode: h_t = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t.

    Args:
        x_t: (B, D); h_prev: (B, H) the state h_{t−1}; log_space: use h̃_t = g(k_h) (App. B.3).
    Returns:
        h_t: (B, H).
    """
    D, H, _, dtype = _check_params(params)
    _check_input("x_t", x_t, D, dtype, ndim=2)
    _check_flags("sequential", log_space)
    # No sign check: the step itself is defined for any h_prev; only the log scan needs h0 > 0.
    _check_state("h_prev", h_prev, x_t.shape[0], H, dtype, log_space=False)
    z = expit(_affine(params, x_t, "z"))
    k_h = _affine(params, x_t, "h")
    h_tilde = g(k_h) if log_space else k_h
    return (1.0 - z) * h_prev + z * h_tilde


def forward(params, x, h0=None, mode="parallel", log_space=False, method="blelloch", backend=None):
    """Run minGRU over a sequence.

    Args:
        params: from ``init``.
        x: (B, T, D) input.
        h0: (B, H) initial state or None (zeros); must be > 0 when ``log_space``.
        mode: "parallel" (gates at once + scan) or "sequential" (step loop).
        log_space: the App. B.3 variant (positive candidate g, scan in log space in parallel mode).
        method, backend: passed to ``minimal.scan.linear_scan`` in vanilla parallel mode; ``backend`` also to
            ``minimal.scan.log_scan`` in log-space parallel mode. None backend: the scan module's default.
    Returns:
        h: (B, T, H) the hidden states h_1 .. h_T; cache for ``backward``.
    """
    D, H, _, dtype = _check_params(params)
    _check_input("x", x, D, dtype, ndim=3)
    _check_flags(mode, log_space)
    B, T, _ = x.shape
    h0 = _check_state("h0", h0, B, H, dtype, log_space)

    k_z = _affine(params, x, "z")                       # (B, T, H)
    k_h = _affine(params, x, "h")                       # (B, T, H)
    z = expit(k_z)
    h_tilde = g(k_h) if log_space else k_h
    log_h = None
    if mode == "sequential":
        # The states come from the step loop alone; the whole-sequence gates above are kept for backward.
        h = np.empty_like(k_h)
        prev = np.zeros((B, H), dtype) if h0 is None else h0
        for t in range(T):
            prev = step_forward(params, x[:, t], prev, log_space)
            h[:, t] = prev
    elif not log_space:
        h = scan.linear_scan(1.0 - z, z * h_tilde, h0, **_scan_kwargs(method, backend))
    else:
        log_a = log_sigmoid(-k_z)                       # log(1 − z) = −softplus(k_z)
        log_b = log_sigmoid(k_z) + log_g(k_h)           # log z + log g(k_h)
        log_h = scan.log_scan(log_a, log_b, None if h0 is None else np.log(h0), **_scan_kwargs(None, backend))
        h = np.exp(log_h)
    return h, Cache(x, h0, k_z, k_h, z, h_tilde, h, log_h, mode, log_space, method, backend)


# --- backward -----------------------------------------------------------------------------------------
def _bptt(z, h_tilde, h, h0, dh):
    """Sequential-mode adjoint, one step at a time in reverse; returns (dz, dh_tilde)."""
    B, T, H = h.shape
    dz, dh_tilde = np.empty_like(h), np.empty_like(h)
    carry = np.zeros((B, H), h.dtype)                   # dL/dh_t through h_{t+1}
    for t in reversed(range(T)):
        h_prev = h[:, t - 1] if t > 0 else (np.zeros_like(carry) if h0 is None else h0)
        d = dh[:, t] + carry
        dz[:, t] = d * (h_tilde[:, t] - h_prev)
        dh_tilde[:, t] = d * z[:, t]
        carry = d * (1.0 - z[:, t])
    return dz, dh_tilde


def backward(params, cache, dy):
    """Gradients of a scalar loss L given dy = dL/dh of shape (B, T, H).

    Returns:
        dx: (B, T, D); grads: dict with the keys of params.
    """
    x, h0, k_z, k_h, z, h_tilde, h, log_h, mode, log_space, method, backend = cache
    check_array("dy", dy, h.shape, names=("B", "T", "H"))
    # 3. the recurrence, as the mode ran it
    if mode == "sequential":
        dz, dh_tilde = _bptt(z, h_tilde, h, h0, dy)
        dk_z = dz * z * (1.0 - z)
        dk_h = dh_tilde * dg(k_h) if log_space else dh_tilde
    elif not log_space:
        da, db, _ = scan.linear_scan_backward(1.0 - z, h, dy, h0, **_scan_kwargs(method, backend))
        # a = 1 − z, b = z ⊙ h̃
        dk_z = (db * h_tilde - da) * z * (1.0 - z)
        dk_h = db * z
    else:
        log_a = log_sigmoid(-k_z)                       # recomputed: cheaper than caching
        log_b = log_sigmoid(k_z) + log_g(k_h)
        log_h0 = None if h0 is None else np.log(h0)
        dlog_a, dlog_b, _ = scan.log_scan_backward(log_a, log_b, log_h, dy * h, log_h0,
                                                   **_scan_kwargs(None, backend))
        # d(−softplus(k))/dk = −σ(k) = −z and d(−softplus(−k))/dk = 1 − z
        dk_z = dlog_b * (1.0 - z) - dlog_a * z
        dk_h = dlog_b * dlog_g(k_h)
    # 2.-1. candidate and gate pre-activations k_n = x W_n^T + b_n
    grads, dx = {}, np.zeros_like(x)
    for n, dk in (("z", dk_z), ("h", dk_h)):
        grads[f"W_{n}"] = _weight_grad(dk, x)
        if f"b_{n}" in params:
            grads[f"b_{n}"] = dk.sum(axis=(0, 1))
        dx += dk @ params[f"W_{n}"]
    return dx, {k: grads[k] for k in params}


def examples(rng):
    """Tiny float64 cases: both modes, vanilla and log space, T = 1 and odd T, with and without h0."""
    out = []
    B, D, H = 2, 3, 4
    for name, T, kw, h0, bias in [
        ("parallel-T1", 1, {"mode": "parallel"}, False, True),
        ("parallel-T5-h0", 5, {"mode": "parallel"}, True, True),
        ("sequential-T3-h0", 3, {"mode": "sequential"}, True, False),
        ("log-parallel-T1", 1, {"mode": "parallel", "log_space": True}, False, True),
        ("log-parallel-T5-h0", 5, {"mode": "parallel", "log_space": True}, True, True),
        ("log-sequential-T3-h0", 3, {"mode": "sequential", "log_space": True}, True, True),
    ]:
        params = init(rng, D, H, bias=bias)
        kwargs = dict(kw)
        if h0:
            # positive, as log space requires; also a valid vanilla initial state
            kwargs["h0"] = rng.uniform(0.1, 1.0, (B, H))
        out.append(Example(name, params, rng.standard_normal((B, T, D)), kwargs))
    return out
