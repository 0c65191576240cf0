"""Token embedding plus a learned positional embedding, GPT-2's / nanoGPT's input layer:

    y[b, t] = E[x[b, t]] + P[t]          t = 0 .. T-1 < T_max

(nanoGPT ``model.py``: ``tok_emb = wte(idx); pos_emb = wpe(pos); x = drop(tok_emb + pos_emb)``). P has one row per
position the model was built for; a sequence longer than T_max has no positional row and is refused.

Shapes: x (B, T) integer token ids in [0, V); E (V, D); P (T_max, D); y (B, T, D). The input is not
differentiable, so ``backward`` returns dx = None. ``step_forward`` embeds one token at a given position (RNN-mode
generation).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_grad_dtype, check_keys, check_positive_int

__all__ = ["init", "forward", "backward", "step_forward", "examples", "POSITION_STD"]

POSITION_STD = 0.02   # nanoGPT's init of wpe (and of every weight); E keeps ``embedding``'s N(0, 1)


class Cache(NamedTuple):
    x: np.ndarray  # (B, T) token ids
    V: int         # vocabulary size, for the shape of dE
    T_max: int     # rows of P, for the shape of dP


def init(rng, V, D, T_max):
    """E (V, D) with entries N(0, 1) (as ``layers.embedding``), P (T_max, D) with entries N(0, 0.02²)."""
    V = check_positive_int("V", V)
    D = check_positive_int("D", D)
    T_max = check_positive_int("T_max", T_max)
    return {"E": rng.standard_normal((V, D)), "P": POSITION_STD * rng.standard_normal((T_max, D))}


def _check_params(params):
    check_keys("params", params, ("E", "P"))
    E = check_array("E", params["E"], ndim=2, names=("V", "D"))
    check_array("P", params["P"], (None, E.shape[1]), names=("T_max", "D"))
    return E.shape[0], params["P"].shape[0]


def _check_ids(x, V):
    if x.size and (x.min() < 0 or x.max() >= V):
        raise ValueError(f"x must hold token ids in [0, V={V}), got values in [{x.min()}, {x.max()}]")


def forward(params, x):
    """x: (B, T) integer ids, T <= T_max. Returns y (B, T, D) = E[x] + P[:T] and the cache."""
    V, T_max = _check_params(params)
    check_array("x", x, (None, None), names=("B", "T"), kind="i")
    _check_ids(x, V)
    if x.shape[1] > T_max:
        raise ValueError(f"x has T = {x.shape[1]} positions, but the positional embedding P has T_max = {T_max} "
                         f"rows: feed at most {T_max} tokens (a learned position exists only up to T_max)")
    return params["E"][x] + params["P"][:x.shape[1]], Cache(x, V, T_max)


def backward(params, cache, dy):
    """dy: (B, T, D). Returns (None, {E: (V, D), P: (T_max, D)}): each row of E collects the dy of every position
    that used it; row t of P the dy of position t summed over the batch (rows from T on: zero)."""
    _check_params(params)
    check_array("dy", dy, cache.x.shape + params["E"].shape[1:], names=("B", "T", "D"))
    check_grad_dtype("dy", dy, params)
    dE = np.zeros((cache.V, dy.shape[-1]), dtype=dy.dtype)
    # unbuffered: repeated ids accumulate (the additions of np.add.at(dE, cache.x, dy), in its order, compiled)
    from ._embedding_numba import scatter_add_rows
    scatter_add_rows(dE, np.ascontiguousarray(cache.x).reshape(-1), np.ascontiguousarray(dy).reshape(-1, dE.shape[1]))
    dP = np.zeros((cache.T_max, dy.shape[-1]), dtype=dy.dtype)
    dP[:dy.shape[1]] = dy.sum(axis=0)
    return None, {"E": dE, "P": dP}


def step_forward(params, tokens, t):
    """Embed one token per sequence at position t (0-based): tokens (B,) ids. Returns (B, D)."""
    V, T_max = _check_params(params)
    check_array("tokens", tokens, (None,), names=("B",), kind="i")
    _check_ids(tokens, V)
    if not (isinstance(t, (int, np.integer)) and 0 <= t < T_max):
        raise ValueError(f"t must be a position in [0, T_max={T_max}), got {t!r}: the learned positional "
                         f"embedding has no row past T_max")
    return params["E"][tokens] + params["P"][t]


def examples(rng):
    """Repeated ids, T = 1, T = T_max, a position row and a vocabulary entry that are never used."""
    from ..cells import Example  # not at the top: the registry imports this module while it is built

    return [Example("T5-repeats", init(rng, 4, 3, 6), np.array([[0, 2, 2, 1, 0], [3, 3, 3, 1, 2]])),
            Example("T1", init(rng, 5, 2, 3), np.array([[4], [0], [4]])),
            Example("T3-full", init(rng, 6, 3, 3), np.array([[1, 3, 1]]))]
