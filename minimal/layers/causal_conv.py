"""Causal depthwise temporal convolution: each channel is filtered along time by its own kernel of k taps,
looking only at the present and the past.

    y[b, t, c] = Σ_{j=0}^{k-1} W[j, c] x[b, t-j, c] + b[c],      x[b, s, c] = 0 for s < 0

Feng et al., "Were RNNs All We Needed?" (2024), App. C.1 (language modelling): "a convolutional layer applied
temporally with a kernel size of 4", following Mamba (Gu & Dao 2023) and xLSTM (Beck et al. 2024), whose
convolution is this depthwise, causally padded one (PyTorch ``Conv1d(C, C, k, groups=C, padding=k-1)`` with the
last k-1 outputs cut). Tap j multiplies the input j steps back, so W[0] weights x_t itself (PyTorch's kernel is
W flipped along its first axis).

Step mode (generation): the past a step needs is the last k-1 inputs, kept in a buffer (B, k-1, C), oldest
first and zeros at the start; ``step_forward`` reads it with x_t and shifts it by one.

Forward and backward run in one compiled pass each (``_causal_conv_numba``: y and dx equal the NumPy form below bit
for bit, dW and db are summed in float64); ``_forward_numpy`` / ``_backward_numpy`` are the NumPy formulas they are
tested against.

Shapes: x (B, T, C); W (k, C); b (C,); y (B, T, C). Glossary: B batch, T time, C channels, k kernel size.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import InputError, check_array, check_dtype, check_grad_dtype, check_positive_int
from . import linear
from ..contract import Example

__all__ = ["init", "forward", "backward", "step_forward", "init_buffer", "examples", "KERNEL_SIZE"]

KERNEL_SIZE = 4  # App. C.1


class Cache(NamedTuple):
    x: np.ndarray  # (B, T, C)


def init(rng, C, k=KERNEL_SIZE):
    """W (k, C) with entries U(-1/sqrt(k), 1/sqrt(k)) (PyTorch's depthwise Conv1d: fan-in k); b = 0, as
    ``linear`` (PyTorch draws b like W)."""
    C = check_positive_int("C", C)
    k = check_positive_int("k", k)
    return linear.init(rng, k, C)       # a (fan-in k) x C weight and a zero bias: the same draws


def _check_params(params):
    return linear.check_params(params, names=("k", "C"))


def forward(params, x):
    """x: (B, T, C). Returns y (B, T, C) and the cache."""
    k, C = _check_params(params)
    check_array("x", x, (None, None, C), names=("B", "T", "C"))
    check_dtype("x", x, params["W"].dtype)
    from ._causal_conv_numba import causal_conv_forward

    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    causal_conv_forward(x, params["W"], params["b"], y)
    return y, Cache(x)


def _forward_numpy(params, x):
    """``forward``'s formula in NumPy (no checks): the reference the compiled pass is tested against."""
    W, T = params["W"], x.shape[1]
    y = np.broadcast_to(params["b"], x.shape).copy()
    for j in range(min(W.shape[0], T)):      # taps that reach before t = 0 read zeros: skip those products
        y[:, j:] += W[j] * x[:, :T - j]      # y_t += W[j] x_{t-j}
    return y, Cache(x)


def backward(params, cache, dy):
    """dy: (B, T, C). Returns dx (B, T, C) and {W: (k, C), b: (C,)}."""
    _, C = _check_params(params)
    x = cache.x
    if x.shape[-1] != C:
        raise InputError(f"params are for C = {C} channels, but the cache holds x of shape {x.shape}")
    check_array("dy", dy, x.shape, names=("B", "T", "C"))
    check_grad_dtype("dy", dy, params)
    from ._causal_conv_numba import causal_conv_backward

    W = params["W"]
    dx = np.empty_like(x)
    dW, db = np.empty(W.shape), np.empty(W.shape[1])          # float64 sums
    causal_conv_backward(x, W, np.ascontiguousarray(dy), dx, dW, db)
    return dx, {"W": dW.astype(W.dtype), "b": db.astype(W.dtype)}


def _backward_numpy(params, cache, dy):
    """``backward``'s formulas in NumPy (no checks): the reference the compiled pass is tested against."""
    x = cache.x
    W, T = params["W"], x.shape[1]
    dW = np.zeros_like(W)
    dx = np.zeros_like(x)
    # 1. y_t = b + Σ_j W[j] x_{t-j}: tap j pairs dy_t with x_{t-j}
    for j in range(min(W.shape[0], T)):
        dW[j] = np.einsum("btc,btc->c", dy[:, j:], x[:, :T - j])
        dx[:, :T - j] += W[j] * dy[:, j:]
    return dx, {"W": dW, "b": dy.sum(axis=(0, 1))}


def init_buffer(params, B):
    """The step-mode buffer before the first step: zeros (B, k-1, C), the zero history of the sequence form."""
    k, C = _check_params(params)
    return np.zeros((check_positive_int("B", B), k - 1, C), dtype=params["W"].dtype)


def step_forward(params, buffer, x_t):
    """One step: y_t = W[0] x_t + Σ_{j>=1} W[j] x_{t-j} + b, the past read from ``buffer``.

    Args:
        buffer: (B, k-1, C) the inputs x_{t-k+1} .. x_{t-1}, oldest first (``init_buffer``), or None (zeros).
        x_t: (B, C).
    Returns:
        (y_t, buffer): (B, C) and the buffer for step t+1 (x_{t-k+2} .. x_t).
    """
    k, C = _check_params(params)
    check_array("x_t", x_t, (None, C), names=("B", "C"))
    check_dtype("x_t", x_t, params["W"].dtype)
    if buffer is None:
        buffer = init_buffer(params, x_t.shape[0])
    check_array("buffer", buffer, (x_t.shape[0], k - 1, C), names=("B", "k-1", "C"))
    window = np.concatenate([buffer, x_t[:, None]], axis=1)   # (B, k, C): x_{t-k+1} .. x_t
    y_t = np.einsum("bjc,jc->bc", window, params["W"][::-1]) + params["b"]
    return y_t, window[:, 1:]


def examples(rng):
    """T = 1, odd T longer than k, T shorter than k, and k = 1 (a per-channel scale)."""

    def params(C, k):
        return init(rng, C, k) | {"b": rng.standard_normal(C)}

    return [Example("k4-T1", params(3, 4), rng.standard_normal((2, 1, 3))),
            Example("k4-T7", params(3, 4), rng.standard_normal((2, 7, 3))),
            Example("k4-T3", params(2, 4), rng.standard_normal((1, 3, 2))),
            Example("k1-T5", params(2, 1), rng.standard_normal((2, 5, 2)))]
