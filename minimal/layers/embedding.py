"""Token embedding: a lookup y[b, t] = E[x[b, t]].

Shapes: x (B, T) integer token ids in [0, V); E (V, D); y (B, T, D). The input is not differentiable, so
``backward`` returns dx = None.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_keys, check_positive_int, check_grad_dtype
from ..contract import Example

__all__ = ["init", "forward", "backward", "examples"]


class Cache(NamedTuple):
    x: np.ndarray  # (B, T) token ids
    V: int         # vocabulary size, for the shape of dE


def init(rng, V, D):
    """E (V, D) with entries N(0, 1)."""
    V = check_positive_int("V", V)
    D = check_positive_int("D", D)
    return {"E": rng.standard_normal((V, D))}


def forward(params, x):
    """x: (B, T) integer ids. Returns y (B, T, D) and the cache."""
    check_keys("params", params, ("E",))
    E = check_array("E", params["E"], ndim=2, names=("V", "D"))
    check_array("x", x, (None, None), names=("B", "T"), kind="i")
    V = E.shape[0]
    if x.size and (x.min() < 0 or x.max() >= V):
        raise ValueError(f"x must hold token ids in [0, V={V}), got values in [{x.min()}, {x.max()}]")
    return E[x], Cache(x, V)


def backward(params, cache, dy):
    """dy: (B, T, D). Returns (None, {E: (V, D)}): each row of E collects the dy of every position that
    used it."""
    check_keys("params", params, ("E",))
    check_array("dy", dy, cache.x.shape + params["E"].shape[1:], names=("B", "T", "D"))
    check_grad_dtype("dy", dy, params)
    dE = np.zeros((cache.V, dy.shape[-1]), dtype=dy.dtype)
    # unbuffered: repeated ids accumulate (the additions of np.add.at(dE, cache.x, dy), in its order, compiled)
    from ._embedding_numba import scatter_add_rows
    scatter_add_rows(dE, np.ascontiguousarray(cache.x).reshape(-1), np.ascontiguousarray(dy).reshape(-1, dE.shape[1]))
    return None, {"E": dE}


def examples(rng):
    """Repeated ids (the accumulation), T = 1, odd T, and a vocabulary entry that is never used."""

    return [Example("T5-repeats", init(rng, 4, 3), np.array([[0, 2, 2, 1, 0], [3, 3, 3, 1, 2]])),
            Example("T1", init(rng, 5, 2), np.array([[4], [0], [4]])),
            Example("T2-unused", init(rng, 6, 3), np.array([[1, 3]]))]
