"""Gated linear unit, Dauphin et al. (2017), "Language modeling with gated convolutional networks", Eq. 1
(position-wise, i.e. a width-1 convolution):

    y = (x W_1 + b_1) ⊙ σ(x W_2 + b_2)

Shapes: x (..., D_in); W_1, W_2 (D_in, D_out); b_1, b_2 (D_out,); y (..., D_out). σ is the logistic sigmoid.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_dtype, check_grad_dtype, check_keys, check_positive_int, common_dtype
from ..contract import Example

__all__ = ["init", "forward", "backward", "examples", "sigmoid"]


class Cache(NamedTuple):
    x: np.ndarray  # (..., D_in)
    a: np.ndarray  # (..., D_out) linear path x W_1 + b_1
    g: np.ndarray  # (..., D_out) gate σ(x W_2 + b_2)


def sigmoid(u):
    """σ(u) = 1 / (1 + exp(-u)) without overflow for large |u| (exp only of non-positive numbers)."""
    e = np.exp(-np.abs(u))
    return np.where(u >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def init(rng, D_in, D_out):
    """W_1, W_2 (D_in, D_out) with entries U(-1/sqrt(D_in), 1/sqrt(D_in)); b_1 = b_2 = 0."""
    D_in = check_positive_int("D_in", D_in)
    D_out = check_positive_int("D_out", D_out)
    s = 1.0 / np.sqrt(D_in)
    return {"W_1": rng.uniform(-s, s, (D_in, D_out)), "b_1": np.zeros(D_out),
            "W_2": rng.uniform(-s, s, (D_in, D_out)), "b_2": np.zeros(D_out)}


PARAM_NAMES = ("W_1", "b_1", "W_2", "b_2")


def _check(params, x):
    check_keys("params", params, PARAM_NAMES)
    W_1 = check_array("W_1", params["W_1"], ndim=2, names=("D_in", "D_out"))
    check_array("W_2", params["W_2"], W_1.shape, names=("D_in", "D_out"))
    check_array("b_1", params["b_1"], W_1.shape[1:], names=("D_out",))
    check_array("b_2", params["b_2"], W_1.shape[1:], names=("D_out",))
    check_array("x", x, min_ndim=1)
    check_dtype("x", x, common_dtype(params))
    if x.shape[-1] != W_1.shape[0]:
        raise ValueError(f"x must have shape (..., D_in={W_1.shape[0]}), got shape {x.shape}")


def forward(params, x):
    """y = (x W_1 + b_1) ⊙ σ(x W_2 + b_2). x: (..., D_in). Returns y (..., D_out) and the cache."""
    _check(params, x)
    a = x @ params["W_1"] + params["b_1"]
    g = sigmoid(x @ params["W_2"] + params["b_2"])
    return a * g, Cache(x, a, g)


def backward(params, cache, dy):
    """dy: (..., D_out). Returns dx (..., D_in) and grads for W_1, b_1, W_2, b_2."""
    check_keys("params", params, PARAM_NAMES)
    x, a, g = cache
    check_array("dy", dy, a.shape)
    check_grad_dtype("dy", dy, params)
    # 2. y = a ⊙ g
    da = dy * g
    du = dy * a * g * (1.0 - g)  # σ'(u) = σ(u)(1 - σ(u)), u = x W_2 + b_2
    # 1. a = x W_1 + b_1, u = x W_2 + b_2
    x2 = x.reshape(-1, x.shape[-1])
    da2, du2 = da.reshape(-1, da.shape[-1]), du.reshape(-1, du.shape[-1])
    grads = {"W_1": x2.T @ da2, "b_1": da2.sum(axis=0), "W_2": x2.T @ du2, "b_2": du2.sum(axis=0)}
    return da @ params["W_1"].T + du @ params["W_2"].T, grads


def _with_random_biases(rng, params):
    return params | {"b_1": rng.standard_normal(params["b_1"].shape),
                     "b_2": rng.standard_normal(params["b_2"].shape)}


def examples(rng):

    return [Example("BTD-T3", _with_random_biases(rng, init(rng, 3, 2)), rng.standard_normal((2, 3, 3))),
            Example("BTD-T1", _with_random_biases(rng, init(rng, 2, 4)), rng.standard_normal((2, 1, 2))),
            Example("ND", _with_random_biases(rng, init(rng, 4, 3)), rng.standard_normal((3, 4)))]
