"""Layer normalisation, Ba et al. (2016), "Layer normalization", Sec. 3 (Eq. 4), over the last axis:

    mu = mean_i x_i,   sigma^2 = mean_i (x_i - mu)^2,   xhat = (x - mu) / sqrt(sigma^2 + eps)
    y  = gamma ⊙ xhat + beta

Shapes: x (..., D); gamma, beta (D,); y (..., D). sigma^2 is the biased (1/D) variance; eps keeps the
division finite for a constant input and is a fixed setting, not a parameter. Forward and backward run in one
compiled pass a row (``_layernorm_numba``: sums in float64; float32 arrays in float32 registers but the mean's
sum); ``_forward_numpy`` / ``_backward_numpy`` are the NumPy formulas they are tested against.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_dtype, check_grad_dtype, check_keys, check_positive_int, common_dtype
from ..contract import Example

__all__ = ["init", "forward", "backward", "examples", "EPS"]

EPS = 1e-5
_F32_TINY, _F32_MAX = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)


class Cache(NamedTuple):
    xhat: np.ndarray     # (..., D) normalised input
    inv_std: np.ndarray  # (..., 1) 1 / sqrt(sigma^2 + eps)


def init(rng, D):
    """gamma = 1, beta = 0 (the identity on already normalised inputs). ``rng`` is unused."""
    D = check_positive_int("D", D)
    return {"gamma": np.ones(D), "beta": np.zeros(D)}


def forward(params, x, eps=EPS):
    """x: (..., D). Returns y (..., D) and the cache."""
    check_keys("params", params, ("gamma", "beta"))
    gamma = check_array("gamma", params["gamma"], ndim=1, names=("D",))
    check_array("beta", params["beta"], gamma.shape, names=("D",))
    check_array("x", x, min_ndim=1)
    check_dtype("x", x, common_dtype(params))
    if x.shape[-1] != gamma.shape[0]:
        raise ValueError(f"x must have shape (..., D={gamma.shape[0]}), got shape {x.shape}")
    if isinstance(eps, bool) or not isinstance(eps, (float, int, np.floating)) or not eps > 0:
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    if x.dtype.kind != "f":
        return _forward_numpy(params, x, eps)
    from . import _layernorm_numba as k

    D = gamma.shape[0]
    x2 = np.ascontiguousarray(x).reshape(-1, D)
    y, xhat = np.empty_like(x2), np.empty_like(x2)
    inv_std = np.empty(x2.shape[0], x.dtype)
    f32 = x.dtype == np.float32 and _F32_TINY <= eps <= _F32_MAX     # eps a normal float32 number
    kernel = k.layernorm_forward_f32 if f32 else k.layernorm_forward
    kernel(x2, gamma, params["beta"], float(eps), y, xhat, inv_std)
    return y.reshape(x.shape), Cache(xhat.reshape(x.shape), inv_std.reshape(x.shape[:-1] + (1,)))


def _forward_numpy(params, x, eps=EPS):
    """``forward``'s formulas in NumPy (no checks): the reference the compiled pass is tested against."""
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    inv_std = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    xhat = xc * inv_std
    return params["gamma"] * xhat + params["beta"], Cache(xhat, inv_std)


def backward(params, cache, dy):
    """dy: (..., D). Returns dx (..., D) and {gamma: (D,), beta: (D,)}."""
    check_keys("params", params, ("gamma", "beta"))
    xhat, inv_std = cache
    check_array("gamma", params["gamma"], xhat.shape[-1:], names=("D",))   # the compiled pass indexes it by D
    check_array("dy", dy, xhat.shape)
    check_grad_dtype("dy", dy, params)
    if xhat.dtype.kind == "f" and dy.dtype == xhat.dtype:
        from . import _layernorm_numba as k

        D = xhat.shape[-1]
        gamma = params["gamma"]
        dx = np.empty(xhat.shape, xhat.dtype)
        dgamma, dbeta = np.empty(D), np.empty(D)                  # float64 sums
        kernel = k.layernorm_backward_f32 if xhat.dtype == np.float32 else k.layernorm_backward
        kernel(np.ascontiguousarray(dy).reshape(-1, D), np.ascontiguousarray(xhat).reshape(-1, D),
                           np.ascontiguousarray(inv_std).reshape(-1), gamma, dx.reshape(-1, D), dgamma, dbeta)
        return dx, {"gamma": dgamma.astype(gamma.dtype), "beta": dbeta.astype(gamma.dtype)}
    return _backward_numpy(params, cache, dy)


def _backward_numpy(params, cache, dy):
    """``backward``'s formulas in NumPy (no checks): the reference the compiled pass is tested against."""
    xhat, inv_std = cache
    D = xhat.shape[-1]
    # 2. y = gamma ⊙ xhat + beta
    grads = {"gamma": (dy * xhat).reshape(-1, D).sum(axis=0), "beta": dy.reshape(-1, D).sum(axis=0)}
    dxhat = dy * params["gamma"]
    # 1. xhat = (x - mu) inv_std: mu and sigma^2 depend on every x_i, which subtracts dxhat's mean and its
    # component along xhat (the Jacobian of a projection onto the unit sphere, scaled by inv_std).
    dx = inv_std * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                    - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, grads


def _random(rng, D):
    return {"gamma": 1.0 + 0.5 * rng.standard_normal(D), "beta": rng.standard_normal(D)}


def examples(rng):

    # eps = 1e-5 next to unit-scale inputs; a larger eps in one case so that it visibly enters the gradient.
    return [Example("BTD-T3", _random(rng, 4), rng.standard_normal((2, 3, 4))),
            Example("BTD-T1", _random(rng, 3), rng.standard_normal((2, 1, 3)), {"eps": 0.1}),
            Example("ND", _random(rng, 5), 2.0 + rng.standard_normal((3, 5)))]
