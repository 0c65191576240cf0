"""Learned absolute positional embedding: y[b, t] = x[b, t] + P[t] (GPT-2's ``wpe``; Tian et al.'s attention
baselines, App. B.3).

Shapes: x (B, T, D) with T <= T_max; P (T_max, D); y (B, T, D). A sequence shorter than T_max uses the first T
rows of P. Without it an attention layer is permutation-equivariant: it cannot tell which token came first, so on
interleaved tokens x_1, y_1, x_2, ... it cannot pair an input with its target.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_dtype, check_grad_dtype, check_keys, check_positive_int
from ..contract import Example

__all__ = ["init", "forward", "backward", "examples"]


class Cache(NamedTuple):
    T: int          # the sequence length used
    T_max: int      # rows of P


def init(rng, T_max, D, std=0.02):
    """P (T_max, D) with entries N(0, std²) (GPT-2's 0.02)."""
    T_max = check_positive_int("T_max", T_max)
    D = check_positive_int("D", D)
    return {"P": std * rng.standard_normal((T_max, D))}


def _check_params(params):
    check_keys("params", params, ("P",))
    return check_array("P", params["P"], ndim=2, names=("T_max", "D")).shape


def forward(params, x):
    """y = x + P[:T]. x: (B, T, D) with T <= T_max. Returns y and the cache."""
    T_max, D = _check_params(params)
    check_array("x", x, (None, None, D), names=("B", "T", "D"))
    check_dtype("x", x, params["P"].dtype)
    T = x.shape[1]
    if T > T_max:
        raise ValueError(f"x must have at most T_max = {T_max} steps (the rows of P), got T = {T}")
    return x + params["P"][:T], Cache(T, T_max)


def backward(params, cache, dy):
    """dy: (B, T, D). Returns dx = dy and {P: (T_max, D)}, dP[t] = Σ_b dy[b, t] for t < T, 0 after."""
    T_max, D = _check_params(params)
    check_array("dy", dy, (None, cache.T, D), names=("B", "T", "D"))
    check_grad_dtype("dy", dy, params)
    dP = np.zeros((T_max, D), dtype=dy.dtype)
    dP[:cache.T] = dy.sum(axis=0)
    return dy, {"P": dP}


def examples(rng):
    """T = T_max, a shorter sequence (rows of P left unused), and T = 1."""

    return [Example("T4-full", init(rng, 4, 3, std=1.0), rng.standard_normal((2, 4, 3))),
            Example("T3-of-5", init(rng, 5, 2, std=1.0), rng.standard_normal((3, 3, 2))),
            Example("T1", init(rng, 2, 3, std=1.0), rng.standard_normal((2, 1, 3)))]
