"""Causal linear self-attention (LSA), Zucchet et al., "Gated recurrent neural networks discover attention",
Sec. 1.1, Eq. 1:

    y_t = ( Σ_{t'<=t} (W_V x_t')(W_K x_t')^T ) (W_Q x_t)

with values v_t = W_V x_t, keys k_t = W_K x_t, queries q_t = W_Q x_t. No softmax, no normalisation and no
output projection: Eq. 1 is a single head whose output is read out directly.

Two forms of the same function (``mode``, as in every cell: ``minimal.conventions``):
    parallel    (default, O(T^2))  A_{t,s} = k_s . q_t for s <= t (0 otherwise),  y_t = Σ_s A_{t,s} v_s
    sequential  (O(T), recurrent)  W_t = W_{t-1} + v_t k_t^T,  W_0 = 0,  y_t = W_t q_t
The recurrent state W_t (D_v x D_k) is the "fast weight" matrix; the gated RNN of Eq. 2 reproduces it
neuron by neuron in the paper's construction (Sec. 2, Fig. 1).

Glossary: B batch, T time, D input features, D_k key/query features, D_v value (= output) features.
Weights act on column vectors as in the paper: W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D). The paper uses
square D x D matrices; rectangular ones are the extension it mentions.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..conventions import CHOICES, choose
from ..validate import check_array, check_dtype, check_finite_result, check_positive_int, \
    check_grad_dtype, common_dtype
from ..contract import Example
from ._qkv import qkv_backward

__all__ = ["init", "forward", "backward", "step_forward", "examples", "MODES"]

MODES = CHOICES["mode"]


class Cache(NamedTuple):
    mode: str
    x: np.ndarray  # (B, T, D)
    q: np.ndarray  # (B, T, D_k)
    k: np.ndarray  # (B, T, D_k)
    v: np.ndarray  # (B, T, D_v)
    A: np.ndarray | None  # (B, T, T) masked scores A_{t,s} = k_s . q_t (parallel form only)
    # (B, T, D_v, D_k) states W_t after each step (recurrent form only). Kept rather than rebuilt backwards
    # as W_{t-1} = W_t - v_t k_t^T, which would pile up rounding error over long sequences.
    W: np.ndarray | None


def init(rng, D, D_k=None, D_v=None):
    """W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D), entries N(0, 1/D). D_k and D_v default to D (the paper)."""
    D = check_positive_int("D", D)
    D_k = D if D_k is None else check_positive_int("D_k", D_k)
    D_v = D if D_v is None else check_positive_int("D_v", D_v)
    s = 1.0 / np.sqrt(D)
    return {"W_V": s * rng.standard_normal((D_v, D)),
            "W_K": s * rng.standard_normal((D_k, D)),
            "W_Q": s * rng.standard_normal((D_k, D))}


def _check_params(params):
    if set(params) != {"W_V", "W_K", "W_Q"}:
        raise ValueError(f"params must have keys W_V, W_K, W_Q, got {sorted(params)}")
    W_V = check_array("W_V", params["W_V"], ndim=2, names=("D_v", "D"))
    W_K = check_array("W_K", params["W_K"], (None, W_V.shape[1]), names=("D_k", "D"))
    check_array("W_Q", params["W_Q"], W_K.shape, names=("D_k", "D"))
    return common_dtype({k: params[k] for k in ("W_V", "W_K", "W_Q")})


def _check(params, x):
    dtype = _check_params(params)
    check_array("x", x, (None, None, params["W_V"].shape[1]), names=("B", "T", "D"))
    if x.shape[1] < 1:
        raise ValueError(f"x must have at least one time step (axis 1), got shape {x.shape}")
    check_dtype("x", x, dtype)


def step_forward(params, W_prev, x_t):
    """One step of the recurrent form.

    Args:
        W_prev: (B, D_v, D_k) state W_{t-1} (zeros at t = 1).
        x_t: (B, D) input at step t.
    Returns:
        (y_t, W_t): (B, D_v) output and (B, D_v, D_k) state, W_t = W_{t-1} + v_t k_t^T, y_t = W_t q_t.
    """
    dtype = _check_params(params)
    D_v, D, D_k = params["W_V"].shape + params["W_K"].shape[:1]
    B = check_dtype("x_t", check_array("x_t", x_t, (None, D), names=("B", "D")), dtype).shape[0]
    check_dtype("W_prev", check_array("W_prev", W_prev, (B, D_v, D_k), names=("B", "D_v", "D_k")), dtype)
    v = x_t @ params["W_V"].T
    k = x_t @ params["W_K"].T
    q = x_t @ params["W_Q"].T
    W_t = W_prev + v[:, :, None] * k[:, None, :]
    y_t = np.einsum("bvk,bk->bv", W_t, q)
    return check_finite_result("the state W_t = W_{t-1} + v_t k_t^T or the output y_t = W_t q_t", (y_t, W_t),
                               {"x_t": x_t, "W_prev": W_prev, **params})


def forward(params, x, mode=None):
    """y_t = Σ_{t'<=t} v_t' k_t'^T q_t (Eq. 1).

    Args:
        params: W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D).
        x: (B, T, D) inputs, of the params' dtype (one dtype throughout: nothing is promoted).
        mode: "parallel" (T x T masked score matrix) or "sequential" (the recurrent form: state W_t, one step
            at a time); None: "parallel".
    Returns:
        y: (B, T, D_v), and the cache for ``backward``.
    Raises:
        InputError: a bad argument, or x too large for its dtype (the scores k . q, each a product of two
            projections of x, or y would be inf), naming x and the weights with their largest values.
    """
    _check(params, x)
    mode = choose("mode", mode, "lsa.forward")
    y, cache = _forward(params, x, mode)
    check_finite_result("the scores k_s . q_t or the output y", y, {"x": x, **params})
    return y, cache


def _forward(params, x, mode):
    q = x @ params["W_Q"].T  # (B, T, D_k)
    k = x @ params["W_K"].T
    v = x @ params["W_V"].T  # (B, T, D_v)
    if mode == "parallel":
        A = np.tril(q @ k.transpose(0, 2, 1))  # causal mask: A_{t,s} = 0 for s > t
        return A @ v, Cache(mode, x, q, k, v, A, None)
    B, T, _ = x.shape
    W = np.empty((B, T, v.shape[2], k.shape[2]), dtype=np.result_type(q, v))
    y = np.empty((B, T, v.shape[2]), dtype=W.dtype)
    W_t = np.zeros((B, v.shape[2], k.shape[2]), dtype=W.dtype)
    for t in range(T):
        W_t = W_t + v[:, t, :, None] * k[:, t, None, :]
        W[:, t] = W_t
        y[:, t] = np.einsum("bvk,bk->bv", W_t, q[:, t])
    return y, Cache(mode, x, q, k, v, None, W)


def backward(params, cache, dy):
    """Gradients of ``forward`` in either mode.

    Args:
        cache: from ``forward``; dy: (B, T, D_v) dL/dy.
    Returns:
        dx (B, T, D) and grads {W_V, W_K, W_Q} of the params' shapes.
    Raises:
        InputError: dy of the wrong shape, or too large for the dtype (a gradient would be inf), naming it.
    """
    x, q, k, v = cache.x, cache.q, cache.k, cache.v
    check_array("dy", dy, v.shape, names=("B", "T", "D_v"))
    check_grad_dtype("dy", dy, params)
    if cache.mode == "parallel":
        # 2. y = A v
        dA = np.tril(dy @ v.transpose(0, 2, 1))  # entries above the diagonal never reached y
        dv = cache.A.transpose(0, 2, 1) @ dy
        # 1. A = tril(q k^T)
        dq = dA @ k
        dk = dA.transpose(0, 2, 1) @ q
    else:
        # BPTT through the state. G is dL/dW_t accumulated from every later output, since W_t enters
        # W_{t+1}, W_{t+2}, ... with coefficient 1.
        dq = np.empty_like(q)
        dk = np.empty_like(k)
        dv = np.empty_like(v)
        G = np.zeros(cache.W.shape[:1] + cache.W.shape[2:], dtype=cache.W.dtype)  # (B, D_v, D_k)
        for t in reversed(range(x.shape[1])):
            # 2. y_t = W_t q_t
            dq[:, t] = np.einsum("bvk,bv->bk", cache.W[:, t], dy[:, t])
            G = G + dy[:, t, :, None] * q[:, t, None, :]
            # 1. W_t = W_{t-1} + v_t k_t^T
            dv[:, t] = np.einsum("bvk,bk->bv", G, k[:, t])
            dk[:, t] = np.einsum("bvk,bv->bk", G, v[:, t])
    # 0. q, k, v = W_Q x, W_K x, W_V x
    return qkv_backward(params, x, dq, dk, dv, dy)


def examples(rng):
    """Tiny float64 cases in both modes: T = 1, odd T, rectangular D_k != D_v."""
    cases = [("T1", 2, 1, 3, None, None), ("T5", 2, 5, 3, None, None), ("rect-T4", 1, 4, 3, 2, 4)]
    return [Example(f"{mode}-{name}", init(rng, D, D_k, D_v), rng.standard_normal((B, T, D)), {"mode": mode})
            for mode in MODES for name, B, T, D, D_k, D_v in cases]
