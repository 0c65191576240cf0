"""Inverted dropout (Srivastava et al. 2014, JMLR 15, Sec. 2; the "inverted" scaling at training time as in
every current framework):

    m_i ~ Bernoulli(1 - rate) independently,   y = x ⊙ m / (1 - rate)       (train)
    y = x                                                                    (evaluation, or rate = 0)

so E[y] = x and nothing needs rescaling at test time. Feng et al. (2024), App. C.2, use a dropout ratio of 0.2
for the Shakespeare language model (0.1 for selective copying and RL).

The mask comes from ``rng``: an int seed (the same mask on every call: what a gradient check needs) or a
``numpy.random.Generator`` (advanced by the call: a new mask each training step); None draws fresh entropy.
The cache holds the scaled mask m / (1 - rate); backward multiplies dy by it. On a PCG64 generator (what
``default_rng`` makes) the draw, the mask and the product run in one compiled pass (``_dropout_numba``) that draws
the same numbers as ``Generator.random``; ``numpy_pass`` is its reference and runs for any other generator.
Shapes: x any float array; y and the mask of x's shape. No parameters (params = {}).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array
from ..contract import Example

__all__ = ["init", "forward", "backward", "check_rate", "numpy_pass", "examples"]


class Cache(NamedTuple):
    mask: np.ndarray  # x's shape: m / (1 - rate), or None where the layer was the identity


def init(rng=None):
    """No parameters."""
    return {}


def check_rate(rate):
    """rate in [0, 1) as a Python float; anything else is a ValueError naming it."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)) \
            or not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must be a number in [0, 1), got {rate!r}")
    return float(rate)


def forward(params, x, rate, rng=None, train=True):
    """y = x ⊙ m / (1 - rate) with m ~ Bernoulli(1 - rate) when ``train`` and rate > 0, else y = x.

    Args:
        params: {}; x: float array; rate: drop probability in [0, 1);
        rng: int seed, ``numpy.random.Generator`` or None; train: False gives the identity.
    Returns:
        y (x's shape) and the cache.
    """
    if params:
        raise ValueError(f"params must be empty for dropout, got keys {sorted(params)}")
    check_array("x", x)
    rate = check_rate(rate)
    if not isinstance(train, (bool, np.bool_)):
        raise ValueError(f"train must be a bool, got {train!r}")
    if not train or rate == 0.0:
        return x, Cache(None)
    gen = np.random.default_rng(rng)
    if type(gen.bit_generator) is np.random.PCG64:     # x is float32 or float64 (check_array)
        from ._dropout_numba import dropout_pcg64

        y, mask = dropout_pcg64(x, rate, gen)   # numpy_pass in one compiled pass, the same draws bit for bit
    else:
        y, mask = numpy_pass(x, rate, gen)
    return y, Cache(mask)


def numpy_pass(x, rate, gen):
    """(y, mask) of the training forward in NumPy, for x (any shape), rate in (0, 1) and a Generator ``gen``
    (advanced by x.size draws): the reference of the compiled pass (``_dropout_numba``), which PCG64 generators run."""
    keep = gen.random(x.shape) >= rate                                # P(keep) = 1 - rate
    mask = keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - rate))   # x's dtype: float32 stays float32
    return x * mask, mask


def backward(params, cache, dy):
    """dy: x's shape. Returns (dy ⊙ m / (1 - rate), {})."""
    check_array("dy", dy)
    if cache.mask is None:
        return dy, {}
    if dy.shape != cache.mask.shape:
        raise ValueError(f"dy must have shape {cache.mask.shape}, got {dy.shape}")
    # 1. y = x ⊙ mask
    return dy * cache.mask, {}


def examples(rng):
    """Seeded masks (so that every forward of a gradient check draws the same), T = 1 and odd T, and the
    evaluation-mode identity."""

    return [Example("rate0.5-T5", {}, rng.standard_normal((2, 5, 3)), {"rate": 0.5, "rng": 1}),
            Example("rate0.2-T1", {}, rng.standard_normal((3, 1, 4)), {"rate": 0.2, "rng": 2}),
            Example("eval-T3", {}, rng.standard_normal((2, 3, 2)), {"rate": 0.5, "rng": 3, "train": False})]
