"""GRU cell, as used by Zucchet et al., "Gated recurrent neural networks discover attention" (2023/2024),
App. A.3 and Fig. 4 (architecture comparison): the gated recurrent unit of Cho et al. (2014), also the
reference GRU of Feng et al., "Were RNNs All We Needed?" (2024), Sec. 2.

    z_t  = σ(W_z x_t + U_z h_{t−1} + b_z)                   update gate
    r_t  = σ(W_r x_t + U_r h_{t−1} + b_r)                   reset gate
    h̃_t = tanh(W_h x_t + U_h (r_t ⊙ h_{t−1}) + b_h)        candidate (reset applied before U_h, as Cho et al.)
    h_t  = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t                 h_0 = h0 (zeros if None)

Convention: z_t weights the candidate, as in Feng et al. Sec. 2 and in minGRU (``minimal.cells.mingru``),
whose recurrence is this one with U_z = U_r = U_h = 0 and no tanh. Cho et al. write
h_t = z_t ⊙ h_{t−1} + (1 − z_t) ⊙ h̃_t, the same family under z ↦ 1 − z (negate W_z, U_z, b_z).
One bias per gate; implementations with a second recurrent bias (cuDNN) have 3 H more parameters.
The output is the hidden sequence h (B, T, H); a readout, where a model has one, is a separate layer.

Backward: backpropagation through time, a loop over ``reversed(range(T))``. The input projections of all
steps are one matrix product before the loop and the weight gradients one after it.

Parameter count: 3 H (D + H) weights + 3 H biases (``n_params``), against 2 H D (+ 2 H) for minGRU
(Feng et al. Sec. 3.1).

Glossary (shapes): B batch, T time, D input features, H hidden units; n ∈ {z, r, h} names a gate.
    x (B, T, D)    W_n (H, D)    U_n (H, H)    b_n (H,)    h0 (B, H)    y = h (B, T, H)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import expit

from ..validate import check_array, check_positive_int
from ._gates import (check_dy, check_gate_params, check_input, check_recurrent_input, check_state,
                     recurrent_examples, split_gates, stack_gates, stacked_projection, uniform_gates,
                     weight_grad)

__all__ = ["init", "forward", "backward", "step_forward", "step_backward", "examples", "n_params", "GATES"]

GATES = ("z", "r", "h")


def n_params(d_in, d_hidden, bias=True):
    """Number of parameters: 3 H (D + H) weights plus 3 H biases if ``bias``."""
    d_in = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    return 3 * H * (d_in + H) + (3 * H if bias else 0)


def init(rng, d_in, d_hidden, bias=True):
    """Random parameters, U(−1/√H, 1/√H) for every weight and bias (the common GRU default).

    Args:
        rng: ``numpy.random.Generator``; d_in: D; d_hidden: H; bias: include the b_n.
    Returns:
        dict W_n (H, D), U_n (H, H) and, with ``bias``, b_n (H,) for n in z, r, h; float64.
    """
    D = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    return uniform_gates(rng, D, H, GATES, 1.0 / np.sqrt(H), bias, recurrent=True)


def _stacked(params):
    """W (3H, D) and b (3H,) in the order of GATES (zeros without biases); U_zr (2H, H); U_h (H, H)."""
    W, b = stacked_projection(params, GATES)
    return W, b, stack_gates(params, "U", ("z", "r")), params["U_h"]


def _split(params, dW, dU_zr, dU_h, db):
    """Named gradients from the stacked ones (the inverse of ``_stacked``)."""
    grads = {**split_gates("U", dU_zr, ("z", "r")), "U_h": dU_h,
             **split_gates("W", dW, GATES), **split_gates("b", db, GATES)}
    return {k: grads[k] for k in params}


# --- one step, on the input projection p_t = W x_t + b ----------------------------------------------------
def _cell(U_zr, U_h, p_t, h_prev):
    """Gates (B, 3H) = [z, r, h̃], r ⊙ h_{t−1}, and h_t."""
    H = h_prev.shape[1]
    gates = np.empty_like(p_t)
    gates[:, :2 * H] = expit(p_t[:, :2 * H] + h_prev @ U_zr.T)
    rh = gates[:, H:2 * H] * h_prev
    gates[:, 2 * H:] = np.tanh(p_t[:, 2 * H:] + rh @ U_h.T)
    z, h_tilde = gates[:, :H], gates[:, 2 * H:]
    return gates, rh, (1.0 - z) * h_prev + z * h_tilde


def _cell_backward(U_zr, U_h, gates, h_prev, dh):
    """dL/d(pre-activations) (B, 3H) and dL/dh_{t−1}, given the total dL/dh_t."""
    z, r, h_tilde = np.split(gates, 3, axis=1)
    # 3. h = (1 − z) ⊙ h_prev + z ⊙ h̃
    dz = dh * (h_tilde - h_prev)
    dh_prev = dh * (1.0 - z)
    # 2. h̃ = tanh(a_h), a_h = p_h + (r ⊙ h_prev) U_h^T
    da_h = dh * z * (1.0 - h_tilde ** 2)
    drh = da_h @ U_h
    dh_prev += drh * r
    # 1. z, r = σ(a_zr), a_zr = p_zr + h_prev U_zr^T
    da_zr = np.concatenate([dz * z * (1.0 - z), drh * h_prev * r * (1.0 - r)], axis=1)
    dh_prev += da_zr @ U_zr
    return np.concatenate([da_zr, da_h], axis=1), dh_prev


class StepCache(NamedTuple):
    x_t: np.ndarray          # (B, D)
    h_prev: np.ndarray       # (B, H)
    gates: np.ndarray        # (B, 3H)  [z, r, h̃]
    rh: np.ndarray           # (B, H)  r ⊙ h_{t−1}


def step_forward(params, x_t, h_prev=None):
    """One GRU step.

    Args:
        x_t: (B, D); h_prev: (B, H) the state at t − 1 (zeros if None).
    Returns:
        (h_t, cache): (B, H) and a StepCache for ``step_backward``.
    """
    D, H, dtype = check_gate_params(params, GATES, recurrent=True)
    check_input("x_t", x_t, D, dtype, ndim=2)
    h_prev = check_state("h_prev", h_prev, x_t.shape[0], H, dtype, zeros_if_none=True)
    W, b, U_zr, U_h = _stacked(params)
    gates, rh, h_t = _cell(U_zr, U_h, x_t @ W.T + b, h_prev)
    return h_t, StepCache(x_t, h_prev, gates, rh)


def step_backward(params, cache, dh_t):
    """Backward of ``step_forward``.

    Args:
        cache: its StepCache; dh_t: (B, H) the total dL/dh_t.
    Returns:
        (dx_t, dh_prev, grads): (B, D), (B, H) and a dict with the keys of params.
    """
    x_t, h_prev, gates, rh = cache
    check_array("dh_t", dh_t, h_prev.shape, names=("B", "H"))
    W, _, U_zr, U_h = _stacked(params)
    da, dh_prev = _cell_backward(U_zr, U_h, gates, h_prev, dh_t)
    H = h_prev.shape[1]
    grads = _split(params, da.T @ x_t, da[:, :2 * H].T @ h_prev, da[:, 2 * H:].T @ rh, da.sum(axis=0))
    return da @ W, dh_prev, grads


# --- the sequence -----------------------------------------------------------------------------------------
class Cache(NamedTuple):
    x: np.ndarray            # (B, T, D)
    h0: np.ndarray           # (B, H)
    gates: np.ndarray        # (B, T, 3H)  [z, r, h̃]
    rh: np.ndarray           # (B, T, H)  r_t ⊙ h_{t−1}
    h: np.ndarray            # (B, T, H)


def forward(params, x, h0=None):
    """Run the GRU over a sequence.

    Args:
        params: from ``init``.
        x: (B, T, D) input.
        h0: (B, H) initial state, or None (zeros).
    Returns:
        h: (B, T, H) the hidden states h_1 .. h_T; cache for ``backward``.
    """
    B, T, H, dtype = check_recurrent_input(params, GATES, x)
    h0 = check_state("h0", h0, B, H, dtype, zeros_if_none=True)
    W, b, U_zr, U_h = _stacked(params)
    p = x @ W.T + b                                     # (B, T, 3H) input projections of every step
    gates = np.empty_like(p)
    rh, h = np.empty((B, T, H), dtype), np.empty((B, T, H), dtype)
    h_prev = h0
    for t in range(T):
        gates[:, t], rh[:, t], h[:, t] = _cell(U_zr, U_h, p[:, t], h_prev)
        h_prev = h[:, t]
    return h, Cache(x, h0, gates, rh, h)


def backward(params, cache, dy):
    """Backpropagation through time, given dy = dL/dh of shape (B, T, H).

    Returns:
        dx: (B, T, D); grads: dict with the keys of params.
    """
    x, h0, gates, rh, h = cache
    check_dy(dy, h, params)
    W, _, U_zr, U_h = _stacked(params)
    B, T, H = h.shape
    da = np.empty_like(gates)                           # (B, T, 3H)
    dh_next = np.zeros_like(h0)
    h_prev = np.concatenate([h0[:, None], h[:, :-1]], axis=1)
    # 2. the recurrence, in reverse time
    for t in reversed(range(T)):
        da[:, t], dh_next = _cell_backward(U_zr, U_h, gates[:, t], h_prev[:, t], dy[:, t] + dh_next)
    # 1. the projections: p = x W^T + b for all steps; h_{t−1} U_zr^T and (r ⊙ h_{t−1}) U_h^T per step
    dW = weight_grad(da, x)
    dU_zr = weight_grad(da[..., :2 * H], h_prev)
    dU_h = weight_grad(da[..., 2 * H:], rh)
    return da @ W, _split(params, dW, dU_zr, dU_h, da.sum(axis=(0, 1)))


def examples(rng):
    """Tiny float64 cases: T = 1, odd T, a given initial state, no biases."""
    return recurrent_examples(init, rng, ("h0",))
