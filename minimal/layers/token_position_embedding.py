"""Token embedding plus a learned positional embedding, GPT-2's / nanoGPT's input layer:

    y[b, t] = E[x[b, t]] + P[t]          t = 0 .. T-1 < T_max

(nanoGPT ``model.py``: ``tok_emb = wte(idx); pos_emb = wpe(pos); x = drop(tok_emb + pos_emb)``): the lookup of
``layers.embedding`` followed by the learned positional embedding of ``layers.positional``, composed here (their
forward and backward, never re-implemented). P has one row per position the model was built for; a sequence
longer than T_max has no positional row and is refused.

Shapes: x (B, T) integer token ids in [0, V); E (V, D); P (T_max, D); y (B, T, D). The input is not
differentiable, so ``backward`` returns dx = None. ``step_forward`` embeds one token at a given position (RNN-mode
generation).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_keys, check_positive_int
from . import embedding, positional
from ..contract import Example

__all__ = ["init", "forward", "backward", "step_forward", "examples", "POSITION_STD"]

POSITION_STD = 0.02   # nanoGPT's init of wpe (and of every weight); E keeps ``embedding``'s N(0, 1)


class Cache(NamedTuple):
    embedding: embedding.Cache     # the token ids and V
    positional: positional.Cache   # T and T_max


def init(rng, V, D, T_max):
    """E (V, D) with entries N(0, 1) (as ``layers.embedding``), P (T_max, D) with entries N(0, 0.02²)."""
    V, D = check_positive_int("V", V), check_positive_int("D", D)
    T_max = check_positive_int("T_max", T_max)
    return embedding.init(rng, V, D) | positional.init(rng, T_max, D, std=POSITION_STD)


def _split(params):
    """({"E": E}, {"P": P}) for the two layers, after checking that E (V, D) and P (T_max, D) share D."""
    check_keys("params", params, ("E", "P"))
    E = check_array("E", params["E"], ndim=2, names=("V", "D"))
    check_array("P", params["P"], (None, E.shape[1]), names=("T_max", "D"))
    return {"E": params["E"]}, {"P": params["P"]}


def forward(params, x):
    """x: (B, T) integer ids, T <= T_max. Returns y (B, T, D) = E[x] + P[:T] and the cache."""
    E, P = _split(params)
    e, cache_e = embedding.forward(E, x)
    y, cache_p = positional.forward(P, e)
    return y, Cache(cache_e, cache_p)


def backward(params, cache, dy):
    """dy: (B, T, D). Returns (None, {E: (V, D), P: (T_max, D)}): each row of E collects the dy of every position
    that used it; row t of P the dy of position t summed over the batch (rows from T on: zero)."""
    E, P = _split(params)
    de, grads_p = positional.backward(P, cache.positional, dy)
    _, grads_e = embedding.backward(E, cache.embedding, de)
    return None, grads_e | grads_p


def step_forward(params, tokens, t):
    """Embed one token per sequence at position t (0-based): tokens (B,) ids. Returns (B, D)."""
    E, P = _split(params)
    check_array("tokens", tokens, (None,), names=("B",), kind="i")
    T_max = P["P"].shape[0]
    if not (isinstance(t, (int, np.integer)) and 0 <= t < T_max):
        raise ValueError(f"t must be a position in [0, T_max={T_max}), got {t!r}: the learned positional "
                         f"embedding has no row past T_max")
    return embedding.forward(E, tokens[:, None])[0][:, 0] + P["P"][t]


def examples(rng):
    """Repeated ids, T = 1, T = T_max, a position row and a vocabulary entry that are never used."""

    return [Example("T5-repeats", init(rng, 4, 3, 6), np.array([[0, 2, 2, 1, 0], [3, 3, 3, 1, 2]])),
            Example("T1", init(rng, 5, 2, 3), np.array([[4], [0], [4]])),
            Example("T3-full", init(rng, 6, 3, 3), np.array([[1, 3, 1]]))]
