"""LSTM cell, as used by Zucchet et al., "Gated recurrent neural networks discover attention" (2023/2024),
App. A.2 and Fig. 4 (architecture comparison): the standard LSTM with a forget gate (Hochreiter &
Schmidhuber 1997; Gers et al. 2000), also the reference LSTM of Feng et al., "Were RNNs All We Needed?"
(2024), Sec. 2.

    f_t  = σ(W_f x_t + U_f h_{t−1} + b_f)            forget gate
    i_t  = σ(W_i x_t + U_i h_{t−1} + b_i)            input gate
    o_t  = σ(W_o x_t + U_o h_{t−1} + b_o)            output gate
    c̃_t = tanh(W_c x_t + U_c h_{t−1} + b_c)         candidate cell state
    c_t  = f_t ⊙ c_{t−1} + i_t ⊙ c̃_t                 cell state (the linear, gated memory)
    h_t  = o_t ⊙ tanh(c_t)                            hidden state = the cell's output
    h_0 = h0, c_0 = c0 (zeros if None)

The output is the hidden sequence h (B, T, H); a readout, where a model has one, is a separate layer.
In the vocabulary of Zucchet et al., c_t is an elementwise linear recurrence whose input is gated (i_t ⊙ c̃_t)
and whose read-out is gated (o_t ⊙ tanh c_t), but all gates also see h_{t−1} and the candidate and read-out
pass through tanh, which the gated linear RNN of their Eq. 2 (``minimal.cells.gated_rnn``) does not have.

Backward: backpropagation through time, a loop over ``reversed(range(T))`` (CS231n style). The input
projections W x + b of all steps are one matrix product before the loop, and the weight gradients one
product after it; only the recurrent product h_{t−1} U^T runs per step.

Parameter count: 4 H (D + H) weights + 4 H biases (``n_params``), against 3 H D (+ 3 H) for minLSTM
(Feng et al. Sec. 3.2).

Glossary (shapes): B batch, T time, D input features, H hidden units; n ∈ {f, i, o, c} names a gate.
    x (B, T, D)    W_n (H, D)    U_n (H, H)    b_n (H,)    h0, c0 (B, H)    y = h (B, T, H)
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

GATES = ("f", "i", "o", "c")


def n_params(d_in, d_hidden, bias=True):
    """Number of parameters: 4 H (D + H) weights plus 4 H biases if ``bias``."""
    d_in = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    return 4 * H * (d_in + H) + (4 * H if bias else 0)


def init(rng, d_in, d_hidden, bias=True, forget_bias=1.0):
    """Random parameters, U(−1/√H, 1/√H) for every weight and bias (the common LSTM default).

    Args:
        rng: ``numpy.random.Generator``; d_in: D; d_hidden: H; bias: include the b_n.
        forget_bias: added to b_f so that the cell starts by remembering (Gers et al. 2000); ignored
            without biases.
    Returns:
        dict W_n (H, D), U_n (H, H) and, with ``bias``, b_n (H,) for n in f, i, o, c; float64.
    """
    D = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    params = uniform_gates(rng, D, H, GATES, 1.0 / np.sqrt(H), bias, recurrent=True)
    if bias:
        params["b_f"] += forget_bias
    return params


def _stacked(params):
    """The gates side by side: W (4H, D), U (4H, H), b (4H,) in the order of GATES (zeros without biases)."""
    W, b = stacked_projection(params, GATES)
    return W, stack_gates(params, "U", GATES), b


def _split(params, dW, dU, db):
    """Named gradients from the stacked ones (the inverse of ``_stacked``)."""
    grads = {**split_gates("W", dW, GATES), **split_gates("U", dU, GATES), **split_gates("b", db, GATES)}
    return {k: grads[k] for k in params}


# --- one step, on the input projection p_t = W x_t + b ----------------------------------------------------
def _cell(U, p_t, h_prev, c_prev):
    """Gates (B, 4H) = [f, i, o, c̃], the new c and tanh(c), and h."""
    H = h_prev.shape[1]
    a = p_t + h_prev @ U.T                              # (B, 4H) pre-activations
    gates = np.empty_like(a)
    gates[:, :3 * H] = expit(a[:, :3 * H])
    gates[:, 3 * H:] = np.tanh(a[:, 3 * H:])
    f, i, o, c_tilde = np.split(gates, 4, axis=1)
    c = f * c_prev + i * c_tilde
    tanh_c = np.tanh(c)
    return gates, c, tanh_c, o * tanh_c


def _cell_backward(U, gates, tanh_c, c_prev, dh, dc):
    """dL/d(pre-activations) (B, 4H), dL/dh_{t−1} and dL/dc_{t−1}, given dL/dh_t and dL/dc_t (from t+1)."""
    f, i, o, c_tilde = np.split(gates, 4, axis=1)
    # 3. h = o ⊙ tanh(c)
    do = dh * tanh_c
    dc = dc + dh * o * (1.0 - tanh_c ** 2)
    # 2. c = f ⊙ c_prev + i ⊙ c̃
    df, di, dc_tilde = dc * c_prev, dc * c_tilde, dc * i
    dc_prev = dc * f
    # 1. σ and tanh of the pre-activations a = p + h_prev U^T
    da = np.concatenate([df * f * (1.0 - f), di * i * (1.0 - i), do * o * (1.0 - o),
                         dc_tilde * (1.0 - c_tilde ** 2)], axis=1)
    return da, da @ U, dc_prev


class StepCache(NamedTuple):
    x_t: np.ndarray          # (B, D)
    h_prev: np.ndarray       # (B, H)
    c_prev: np.ndarray       # (B, H)
    gates: np.ndarray        # (B, 4H)  [f, i, o, c̃]
    tanh_c: np.ndarray       # (B, H)


def step_forward(params, x_t, h_prev=None, c_prev=None):
    """One LSTM step.

    Args:
        x_t: (B, D); h_prev, c_prev: (B, H) the states at t − 1 (zeros if None).
    Returns:
        (h_t, c_t, cache): (B, H), (B, H) and a StepCache for ``step_backward``.
    """
    D, H, dtype = check_gate_params(params, GATES, recurrent=True)
    check_input("x_t", x_t, D, dtype, ndim=2)
    h_prev = check_state("h_prev", h_prev, x_t.shape[0], H, dtype, zeros_if_none=True)
    c_prev = check_state("c_prev", c_prev, x_t.shape[0], H, dtype, zeros_if_none=True)
    W, U, b = _stacked(params)
    gates, c_t, tanh_c, h_t = _cell(U, x_t @ W.T + b, h_prev, c_prev)
    return h_t, c_t, StepCache(x_t, h_prev, c_prev, gates, tanh_c)


def step_backward(params, cache, dh_t, dc_t=None):
    """Backward of ``step_forward``.

    Args:
        cache: its StepCache; dh_t: (B, H) dL/dh_t; dc_t: (B, H) dL/dc_t from later steps (zeros if None).
    Returns:
        (dx_t, dh_prev, dc_prev, grads): (B, D), (B, H), (B, H) and a dict with the keys of params.
    """
    x_t, h_prev, c_prev, gates, tanh_c = cache
    check_array("dh_t", dh_t, h_prev.shape, names=("B", "H"))
    dc_t = np.zeros_like(dh_t) if dc_t is None else check_array("dc_t", dc_t, h_prev.shape, names=("B", "H"))
    W, U, _ = _stacked(params)
    da, dh_prev, dc_prev = _cell_backward(U, gates, tanh_c, c_prev, dh_t, dc_t)
    grads = _split(params, da.T @ x_t, da.T @ h_prev, da.sum(axis=0))
    return da @ W, dh_prev, dc_prev, grads


# --- the sequence -----------------------------------------------------------------------------------------
class Cache(NamedTuple):
    x: np.ndarray            # (B, T, D)
    h0: np.ndarray           # (B, H)
    c0: np.ndarray           # (B, H)
    gates: np.ndarray        # (B, T, 4H)  [f, i, o, c̃]
    c: np.ndarray            # (B, T, H)
    tanh_c: np.ndarray       # (B, T, H)
    h: np.ndarray            # (B, T, H)


def forward(params, x, h0=None, c0=None):
    """Run the LSTM over a sequence.

    Args:
        params: from ``init``.
        x: (B, T, D) input.
        h0, c0: (B, H) initial hidden and cell states, or None (zeros).
    Returns:
        h: (B, T, H) the hidden states h_1 .. h_T; cache for ``backward``.
    """
    B, T, H, dtype = check_recurrent_input(params, GATES, x)
    h0 = check_state("h0", h0, B, H, dtype, zeros_if_none=True)
    c0 = check_state("c0", c0, B, H, dtype, zeros_if_none=True)
    W, U, b = _stacked(params)
    p = x @ W.T + b                                     # (B, T, 4H) input projections of every step
    gates = np.empty_like(p)
    c, tanh_c, h = (np.empty((B, T, H), dtype) for _ in range(3))
    h_prev, c_prev = h0, c0
    for t in range(T):
        gates[:, t], c[:, t], tanh_c[:, t], h[:, t] = _cell(U, p[:, t], h_prev, c_prev)
        h_prev, c_prev = h[:, t], c[:, t]
    return h, Cache(x, h0, c0, gates, c, tanh_c, h)


def backward(params, cache, dy):
    """Backpropagation through time, through h and the cell state c, given dy = dL/dh (B, T, H); returns dx
    (B, T, D) and grads with the keys of params."""
    x, h0, c0, gates, c, tanh_c, h = cache
    check_dy(dy, h, params)
    W, U, _ = _stacked(params)
    T = x.shape[1]
    da = np.empty_like(gates)                           # (B, T, 4H)
    dh_next, dc_next = np.zeros_like(h0), np.zeros_like(c0)
    # 2. the recurrence, in reverse time
    for t in reversed(range(T)):
        c_prev = c[:, t - 1] if t > 0 else c0
        da[:, t], dh_next, dc_next = _cell_backward(U, gates[:, t], tanh_c[:, t], c_prev,
                                                    dy[:, t] + dh_next, dc_next)
    # 1. the projections: p = x W^T + b for all steps, h_{t−1} U^T per step
    h_prev = np.concatenate([h0[:, None], h[:, :-1]], axis=1)
    dW = weight_grad(da, x)
    dU = weight_grad(da, h_prev)
    return da @ W, _split(params, dW, dU, da.sum(axis=(0, 1)))


def examples(rng):
    """Tiny float64 cases: T = 1, odd T, given initial states, no biases."""
    return recurrent_examples(init, rng, ("h0", "c0"))
