"""Affine layer y = x W + b on the last axis.

Shapes: x (..., D_in), W (D_in, D_out), b (D_out,), y (..., D_out). Row-vector convention (x W), as in
NumPy code; the papers' W x with W (D_out, D_in) is the same map with W transposed.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import products
from ..validate import check_array, check_dtype, check_grad_dtype, check_keys, check_positive_int, common_dtype
from ..contract import Example

__all__ = ["init", "forward", "backward", "examples", "check_params"]


class Cache(NamedTuple):
    x: np.ndarray  # (..., D_in)


def init(rng, D_in, D_out):
    """W (D_in, D_out) with entries U(-1/sqrt(D_in), 1/sqrt(D_in)) (the usual fan-in scale); b = 0."""
    D_in = check_positive_int("D_in", D_in)
    D_out = check_positive_int("D_out", D_out)
    s = 1.0 / np.sqrt(D_in)
    return {"W": rng.uniform(-s, s, (D_in, D_out)), "b": np.zeros(D_out)}


def check_params(params, names=("D_in", "D_out")):
    """W (D_in, D_out) and b (D_out,) of one dtype, named ``names`` in errors (``causal_conv``: ("k", "C"));
    returns W's shape."""
    check_keys("params", params, ("W", "b"))
    W = check_array("W", params["W"], ndim=2, names=names)
    check_array("b", params["b"], W.shape[1:], names=names[1:])
    common_dtype(params)
    return W.shape



def forward(params, x):
    """y = x W + b. x: (..., D_in). Returns y (..., D_out) and the cache."""
    D_in, _ = check_params(params)
    check_array("x", x, min_ndim=1)
    check_dtype("x", x, params["W"].dtype)
    if x.shape[-1] != D_in:
        raise ValueError(f"x must have shape (..., D_in={D_in}), got shape {x.shape}")
    y = products.times(x, params["W"])
    y += params["b"]            # in place: no second output array
    return y, Cache(x)


def backward(params, cache, dy):
    """dy: (..., D_out). Returns dx (..., D_in) and {W: (D_in, D_out), b: (D_out,)}."""
    check_params(params)
    x = cache.x
    check_array("dy", dy, x.shape[:-1] + params["b"].shape)
    check_grad_dtype("dy", dy, params)
    # 1. y = x W + b: every leading index is one more sample of the same map.
    dx = products.times_t(dy, params["W"])
    db = dy.reshape(-1, dy.shape[-1]).sum(axis=0)
    return dx, {"W": products.sum_outer(x, dy), "b": db}


def examples(rng):
    """A (B, T, D) sequence input, a T = 1 input with an odd T elsewhere, and a plain (N, D) matrix."""

    return [Example("BTD-T3", init(rng, 3, 2) | {"b": rng.standard_normal(2)}, rng.standard_normal((2, 3, 3))),
            Example("BTD-T1", init(rng, 4, 3) | {"b": rng.standard_normal(3)}, rng.standard_normal((2, 1, 4))),
            Example("ND", init(rng, 2, 5) | {"b": rng.standard_normal(5)}, rng.standard_normal((3, 2)))]
