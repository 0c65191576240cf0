"""Two-layer perceptron Linear -> GELU -> Linear, the position-wise feed-forward block of a transformer
(Vaswani et al. 2017, Sec. 3.3, there with ReLU; GELU as in GPT-2 and most later models):

    h = GELU(x W_1 + b_1),   y = h W_2 + b_2

GELU is the tanh approximation of Hendrycks & Gimpel (2016), Sec. 2:

    GELU(u) = u/2 (1 + tanh(c (u + 0.044715 u^3))),   c = sqrt(2/π)

chosen over ReLU because it is smooth, so a finite-difference check never straddles a kink. ``forward`` and
``backward`` evaluate it and dL/du = dL/dh · GELU'(u) in one compiled pass each (``_gelu_numba``: the same function
written with σ(2y) = (1 + tanh y) / 2; float32 arrays in float32 arithmetic, others in float64), the forward's adding
b_1 to x W_1 as it reads it and the backward's summing dL/db_1 = Σ dL/du as it writes it; ``gelu`` and
``gelu_grad`` below are the NumPy reference they are tested against (NumPy's float32 tanh is a scalar call per
element: the two took ~1/5 of a Shakespeare training step).
Shapes: x (..., D_in); W_1 (D_in, H), b_1 (H,); W_2 (H, D_out), b_2 (D_out,); y (..., D_out).
"""
from __future__ import annotations

from typing import NamedTuple

import math

import numpy as np

from ..validate import check_array, check_dtype, check_grad_dtype, check_keys, check_positive_int, common_dtype
from .. import products
from . import linear
from ..contract import Example

__all__ = ["init", "forward", "backward", "examples", "gelu", "gelu_grad"]

PARAM_NAMES = ("W_1", "b_1", "W_2", "b_2")
_C = math.sqrt(2.0 / math.pi)  # a Python float: keeps float32 inputs float32
_A = 0.044715


class Cache(NamedTuple):
    first: linear.Cache   # input of x W_1 + b_1
    u: np.ndarray         # (..., H) x W_1, the pre-activation without b_1
    second: linear.Cache  # input of h W_2 + b_2


def gelu(u):
    return 0.5 * u * (1.0 + np.tanh(_C * (u + _A * u * u * u)))


def gelu_grad(u):
    """d GELU / du of the tanh approximation."""
    th = np.tanh(_C * (u + _A * u * u * u))
    # products, not powers: NumPy's pow is far slower on float32 arrays
    return 0.5 * (1.0 + th) + 0.5 * u * (1.0 - th * th) * _C * (1.0 + 3.0 * _A * u * u)


def _rows(a):
    """a (..., C) as (rows, C) (a 0-d array as one row of one), no copy when C-contiguous."""
    a = np.ascontiguousarray(a)
    C = a.shape[-1] if a.ndim else 1
    return a.reshape(math.prod(a.shape[:-1]) if a.ndim else 1, C)


def _gelu_fused(u, b=None):
    """``gelu(u + b)`` (b (H,), None: 0) in one compiled pass (module docstring): float32 in float32 arithmetic,
    else float64. For u and b of one dtype, u + b is rounded to it first, as ``linear.forward`` adds its bias."""
    from ._gelu_numba import gelu_into, gelu_into_f32

    u2 = _rows(u)
    b = np.zeros(u2.shape[1], u2.dtype) if b is None else np.ascontiguousarray(b)
    out = np.empty_like(u2)
    f32 = u2.dtype == np.float32 and b.dtype == np.float32
    (gelu_into_f32 if f32 else gelu_into)(u2, b, out)
    return out.reshape(np.shape(u))


def _gelu_backward_sums(u, dh, b=None):
    """(du, db): du = ``dh * gelu_grad(u + b)`` and db = Σ du over the leading indices (float64 sums, rounded to
    du's dtype), in one compiled pass."""
    from ._gelu_numba import gelu_backward_into, gelu_backward_into_f32

    u2, dh2 = _rows(u), _rows(dh)
    b = np.zeros(u2.shape[1], u2.dtype) if b is None else np.ascontiguousarray(b)
    du, db = np.empty(u2.shape, np.result_type(u2, dh2, b)), np.empty(u2.shape[1])
    f32 = u2.dtype == np.float32 and dh2.dtype == np.float32 and b.dtype == np.float32
    (gelu_backward_into_f32 if f32 else gelu_backward_into)(u2, b, dh2, du, db)
    return du.reshape(np.shape(u)), db.astype(du.dtype)


def _gelu_backward_fused(u, dh):
    """``dh * gelu_grad(u)`` in one compiled pass."""
    return _gelu_backward_sums(u, dh)[0]


def init(rng, D_in, H, D_out=None):
    """Linear fan-in initialisation for both layers; D_out defaults to D_in (a residual block's shape)."""
    D_out = D_in if D_out is None else check_positive_int("D_out", D_out)
    H = check_positive_int("H", H)
    first, second = linear.init(rng, D_in, H), linear.init(rng, H, D_out)
    return {"W_1": first["W"], "b_1": first["b"], "W_2": second["W"], "b_2": second["b"]}


def forward(params, x):
    """x: (..., D_in). Returns y (..., D_out) and the cache."""
    check_keys("params", params, PARAM_NAMES)
    W_1 = check_array("W_1", params["W_1"], ndim=2, names=("D_in", "H"))
    check_array("W_2", params["W_2"], (W_1.shape[1], None), names=("H", "D_out"))
    check_array("b_1", params["b_1"], W_1.shape[1:], names=("H",))
    check_array("b_2", params["b_2"], params["W_2"].shape[1:], names=("D_out",))
    check_array("x", x, min_ndim=1)
    check_dtype("x", x, common_dtype(params))
    if x.shape[-1] != W_1.shape[0]:
        raise ValueError(f"x must have shape (..., D_in={W_1.shape[0]}), got shape {x.shape}")
    u = products.times(x, W_1)      # without b_1: the GELU pass adds it as it reads u (one pass fewer)
    y, second = linear.forward({"W": params["W_2"], "b": params["b_2"]}, _gelu_fused(u, params["b_1"]))
    return y, Cache(linear.Cache(x), u, second)


def backward(params, cache, dy):
    """dy: (..., D_out). Returns dx (..., D_in) and grads for W_1, b_1, W_2, b_2."""
    check_keys("params", params, PARAM_NAMES)
    check_array("dy", dy, cache.second.x.shape[:-1] + params["b_2"].shape)
    check_grad_dtype("dy", dy, params)
    # 3. y = h W_2 + b_2
    dh, g2 = linear.backward({"W": params["W_2"], "b": params["b_2"]}, cache.second, dy)
    # 2. h = GELU(u + b_1), and 1. u + b_1 = x W_1 + b_1: db_1 = Σ du, summed in the GELU's pass (which indexes
    # b_1 and dh by u's last axis: checked first)
    check_array("b_1", params["b_1"], cache.u.shape[-1:], names=("H",))
    check_array("W_2", params["W_2"], (cache.u.shape[-1], None), names=("H", "D_out"))
    du, db_1 = _gelu_backward_sums(cache.u, dh, params["b_1"])
    x = cache.first.x
    dx = products.times_t(du, params["W_1"])
    return dx, {"W_1": products.sum_outer(x, du), "b_1": db_1, "W_2": g2["W"], "b_2": g2["b"]}


def _with_random_biases(rng, params):
    return params | {"b_1": rng.standard_normal(params["b_1"].shape),
                     "b_2": rng.standard_normal(params["b_2"].shape)}


def examples(rng):

    return [Example("BTD-T3", _with_random_biases(rng, init(rng, 3, 4)), rng.standard_normal((2, 3, 3))),
            Example("BTD-T1", _with_random_biases(rng, init(rng, 2, 5, 3)), rng.standard_normal((2, 1, 2))),
            Example("ND", _with_random_biases(rng, init(rng, 3, 4, 2)), rng.standard_normal((3, 3)))]
