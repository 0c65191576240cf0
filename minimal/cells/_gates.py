"""Pieces shared by the gated recurrent cells: LSTM and GRU (``lstm``, ``gru``; Zucchet et al. App. A.2-A.3)
and minGRU and minLSTM (``mingru``, ``minlstm``; Feng et al., "Were RNNs All We Needed?" (2024)).

- the positive candidate g of Feng et al. App. B.3, log g, log σ, and their derivatives;
- parameters made of one block per gate n: W_n (H, D), U_n (H, H) where the gate sees h_{t−1}, b_n (H,):
  their initialisation, their checks, and the stacking of all gates into one matrix product;
- the checks of an input sequence x (B, T, D), a step input x_t (B, D), a state h0 (B, H) and a min cell's
  arguments (``check_forward``, ``check_out``).

The min cells' two modes (Linear_n(x) and its backward, the step loop, the calls to ``minimal.scan``) are in
``_min_modes``.

Not registered as a cell (the leading underscore); each cell module keeps its own equations.
Glossary (shapes): B batch, T time, D input features, H hidden units, G gates.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from .. import products
from ..scan import checks as scan_checks
from ..conventions import CHOICES, check_unused, choose
from ..validate import (InputError, OverflowInputError, check_array, check_finite_result,
                        check_grad_dtype, check_positive_int, overflow_error)
from ..contract import Example

MODES = CHOICES["mode"]


# --- Feng et al. App. B.3: the positive candidate g and its log ---------------------------------------
# Written branch-free (no np.where): with random signs a select costs more than the arithmetic here.
def log_sigmoid(k):
    """log σ(k) = −softplus(−k) = min(k, 0) − log1p(u), u = exp(−|k|) ∈ (0, 1], accurate for every k.

    log1p(u) is evaluated as log(w) · u / (w − 1) with w = 1 + u rounded (Goldberg 1991, "What every computer
    scientist should know about floating-point arithmetic", Thm. 4: a few ulps), and as u where w rounds to 1.
    NumPy's float32 ``log1p`` is a scalar loop, several times slower than its vectorised ``log`` and ``exp``;
    this form made a log-space training step of the selective-copying model faster on one core (timed once)."""
    if np.ndim(k) == 0:
        return np.minimum(k, 0) - np.log1p(np.exp(-np.abs(k)))
    u = np.exp(-np.abs(k))
    w = u + 1
    d = w - 1
    tiny = d == 0                     # u below half an ulp of 1: log1p(u) = u to working precision
    d[tiny] = 1
    out = np.log(w)
    out[tiny] = 1
    out *= u
    out /= d
    return np.minimum(k, 0) - out


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


# --- parameters: one block per gate ----------------------------------------------------------------------
def uniform_gates(rng, D, H, gates, scale, bias, recurrent):
    """W_n (H, D), U_n (H, H) if ``recurrent``, b_n (H,) if ``bias``, for each gate n in order, all drawn
    from U(−scale, scale) in that order (so a seed gives the same parameters as before)."""
    params = {}
    for n in gates:
        params[f"W_{n}"] = rng.uniform(-scale, scale, (H, D))
        if recurrent:
            params[f"U_{n}"] = rng.uniform(-scale, scale, (H, H))
        if bias:
            params[f"b_{n}"] = rng.uniform(-scale, scale, H)
    return params


def input_gates_init(rng, gates, d_in, d_hidden, bias):
    """A min cell's params: W_n (H, D) and, with ``bias``, b_n (H,) for each gate n, U(−1/√D, 1/√D) as for a
    default linear layer (no recurrent U_n: the gates read the input only); float64."""
    D = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    return uniform_gates(rng, D, H, gates, 1.0 / np.sqrt(D), bias, recurrent=False)


def input_gates_n_params(gates, d_in, d_hidden, bias):
    """len(gates) H D weights plus len(gates) H biases if ``bias``."""
    D = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    return len(gates) * H * (D + (1 if bias else 0))


def check_gate_params(params, gates, recurrent):
    """Validate the keys, shapes and dtypes of W_n (H, D), U_n (H, H) if ``recurrent``, and optional b_n (H,);
    every array must have the dtype of the first gate's W. Returns (D, H, dtype)."""
    weights = {f"{m}_{n}" for m in ("WU" if recurrent else "W") for n in gates}
    biases = {f"b_{n}" for n in gates}
    if set(params) not in (weights, weights | biases):
        raise ValueError(f"params must have the keys {sorted(weights)} and optionally {sorted(biases)}, "
                         f"got {sorted(params)}")
    first = f"W_{gates[0]}"
    W = check_array(first, params[first], ndim=2, names=("H", "D"))
    H, D = W.shape
    shapes = {"W": ((H, D), ("H", "D")), "U": ((H, H), ("H", "H")), "b": ((H,), ("H",))}
    for name, p in params.items():
        check_array(name, p, shapes[name[0]][0], names=shapes[name[0]][1])
        if p.dtype != W.dtype:
            raise ValueError(f"{name} must have the dtype of {first} ({W.dtype}), got {p.dtype}")
    return D, H, W.dtype


def stack_gates(params, prefix, gates):
    """The blocks prefix_n of all gates one under the other: (G H, ...) in the order of ``gates``."""
    return np.concatenate([params[f"{prefix}_{n}"] for n in gates])


def stacked_projection(params, gates):
    """W (G H, D) and b (G H,) of the input projections p_t = W x_t + b of all gates (b = 0 without biases)."""
    W = stack_gates(params, "W", gates)
    if f"b_{gates[0]}" in params:
        return W, stack_gates(params, "b", gates)
    return W, np.zeros(W.shape[0], W.dtype)


def split_gates(prefix, d, gates):
    """The inverse of ``stack_gates`` for a gradient: the rows of d (G H, ...) as {prefix_n: (H, ...)}."""
    H = d.shape[0] // len(gates)
    return {f"{prefix}_{n}": d[j * H:(j + 1) * H] for j, n in enumerate(gates)}


def weight_grad(da, v):
    """Σ_{b,t} da_{bt}^T v_{bt}: (..., A) and (..., K) to (A, K)."""
    return products.sum_outer(da, v)


# --- inputs and states -----------------------------------------------------------------------------------
def check_input(name, x, D, dtype, ndim):
    """x (B, T, D) with T ≥ 1 if ``ndim`` is 3, x_t (B, D) if 2; of the params' dtype."""
    names = ("B", "T", "D") if ndim == 3 else ("B", "D")
    check_array(name, x, (None,) * (ndim - 1) + (D,), names=names)
    if ndim == 3 and x.shape[1] < 1:
        raise ValueError(f"{name} must have at least one time step, got shape {x.shape}")
    if x.dtype != dtype:
        raise InputError(f"{name} must have the params' dtype {dtype}, got {x.dtype}")
    return x


def check_recurrent_input(params, gates, x):
    """A GRU / LSTM forward's params (W_n, U_n, b_n for each of ``gates``) and x (B, T, D) of their dtype,
    checked by name; returns (B, T, H, dtype)."""
    D, H, dtype = check_gate_params(params, gates, recurrent=True)
    check_input("x", x, D, dtype, ndim=3)
    return x.shape[0], x.shape[1], H, dtype


def check_dy(dy, h, params):
    """A backward's dy = dL/dh: the shape (B, T, H) of the states h and the params' dtype."""
    check_array("dy", dy, h.shape, names=("B", "T", "H"))
    check_grad_dtype("dy", dy, params)


def check_state(name, s, B, H, dtype, *, zeros_if_none=False, log_space=False):
    """A state (B, H) of the params' dtype, returned as given; None stays None, or becomes zeros (B, H) with
    ``zeros_if_none``. With ``log_space`` it must be positive, since log s enters the log scan."""
    if s is None:
        return np.zeros((B, H), dtype) if zeros_if_none else None
    check_array(name, s, (B, H), names=("B", "H"))
    if s.dtype != dtype:
        raise InputError(f"{name} must have the params' dtype {dtype}, got {s.dtype}")
    if log_space and not np.all(s > 0):
        raise ValueError(f"{name} must be positive (> 0) in log space, since log {name} enters the scan; "
                         f"got minimum {s.min()}")
    return s


def check_log_space(log_space):
    """log_space a bool (Feng et al.'s vanilla form, or App. B.3's log space)."""
    if not isinstance(log_space, (bool, np.bool_)):
        raise ValueError(f"log_space must be a bool, got {log_space!r}")


def check_forward(where, params, gates, x, h0, mode, log_space, method, backend, out):
    """A min cell's ``forward`` arguments, each checked by its name before any work: params with input-only
    ``gates``, x (B, T, D), mode / method / backend (None: the defaults of ``minimal.conventions``), log_space,
    h0 (B, H) or None (> 0 in log space), out. ``method`` picks the vanilla parallel scan; where none runs
    (sequential mode, log space) a method other than the default is refused, not silently ignored.
    Returns (H, h0, mode, method, backend), the three words resolved."""
    D, H, dtype = check_gate_params(params, gates, recurrent=False)
    check_input("x", x, D, dtype, ndim=3)
    mode, method, backend = (choose(w, v, where) for w, v in (("mode", mode), ("method", method),
                                                                ("backend", backend)))
    check_log_space(log_space)
    if mode == "sequential" or log_space:
        check_unused("method", method, where, f"mode={mode!r}, log_space={log_space} runs no linear scan")
    h0 = check_state("h0", h0, x.shape[0], H, dtype, log_space=log_space)
    check_out(out, x, H, mode, backend)
    return H, h0, mode, method, backend


def check_step(params, gates, x_t, h_prev, log_space):
    """A min cell's ``step_forward`` arguments: x_t (B, D), h_prev (B, H) of the params' dtype. No sign check on
    h_prev: the step itself is defined for any h_{t−1}; only the log scan needs h0 > 0."""
    D, H, dtype = check_gate_params(params, gates, recurrent=False)
    check_input("x_t", x_t, D, dtype, ndim=2)
    check_log_space(log_space)
    check_state("h_prev", h_prev, x_t.shape[0], H, dtype)


def guarded_backward(body, params, cache, dy):
    """``body(params, cache, dy)`` -> (dx, grads), with an overflow (inside a scan, or in the gradients it
    feeds) reported with the caller's dy, x and params instead of the scan's internal arrays."""
    inputs = {"dy": dy, "x": cache.x, **params}
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            dx, grads = body(params, cache, dy)
    except OverflowInputError:
        raise overflow_error("the gradients", inputs) from None
    check_finite_result("the gradients", (dx, *grads.values()), inputs)
    return dx, grads


def check_out(out, x, H, mode, backend):
    """``out`` (None passes) receives the parallel mode's states h: (B, T, H) with x's dtype, on the host.
    Checked before any work, in the cell's own words: the sequential mode builds h step by step, and the CUDA
    scans return new arrays."""
    if out is None:
        return
    if mode != "parallel":
        raise InputError(f"out receives the scan's states in mode='parallel'; mode={mode!r} builds h step by "
                         f"step: pass out=None")
    if backend == "cuda":
        raise InputError("out is not supported with backend='cuda' (the scan returns a new array): pass out=None")
    scan_checks.check_out(out, (x.shape[0], x.shape[1], H), x.dtype, {"x": x}, like="the states h (B, T, H)")


def recurrent_examples(init, rng, states):
    """The GRU and LSTM gradient-check cases: T = 1, odd T with the initial ``states`` (names, e.g. ("h0", "c0"))
    given, T = 3 without biases; float64, B = 2, D = 2, H = 3."""
    out = []
    B, D, H = 2, 2, 3
    for name, T, given, bias in [("T1", 1, False, True), ("-".join(("T5",) + tuple(states)), 5, True, True),
                                 ("T3-no-bias", 3, False, False)]:
        params = init(rng, D, H, bias=bias)
        kwargs = {s: rng.standard_normal((B, H)) for s in states} if given else {}
        out.append(Example(name, params, rng.standard_normal((B, T, D)), kwargs))
    return out


def min_rnn_examples(init, rng):
    """The minGRU and minLSTM gradient-check cases (the cells share modes and arguments): both modes, vanilla
    and log space, T = 1 and odd T, with and without h0, one without biases; float64, B = 2, D = 3, H = 4."""
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
