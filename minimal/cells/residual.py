"""Residual connection (He et al. 2016, Eq. 1) around any registered module:

    y = x + f(x)

where f is the module named by ``inner`` (e.g. "mlp", "lsa", "softmax_attention"). The params are exactly
f's params; extra keyword arguments go to f's ``forward`` (e.g. ``mode="sequential"``).
Shapes: x (..., D) as f expects it; f(x) must have x's shape.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ..contract import Example
from ..validate import check_array

__all__ = ["init", "forward", "backward", "examples"]


class Cache(NamedTuple):
    inner: str   # the registered name of f
    cache: Any   # f's cache


def _module(inner):
    from . import REGISTRY  # here, not at the top: the registry imports this module while it is built

    allowed = sorted(set(REGISTRY) - {"residual"})
    if not isinstance(inner, str) or inner not in allowed:
        raise ValueError(f"inner must be one of {allowed}, got {inner!r}")
    return REGISTRY[inner]


def init(rng, inner, **config):
    """The params of ``inner``: ``get(inner).init(rng, **config)``."""
    return _module(inner).init(rng, **config)


def forward(params, x, inner, **kw):
    """y = x + f(x). x: the input f takes; returns y of x's shape and the cache."""
    f = _module(inner)
    check_array("x", x)
    fx, cache = f.forward(params, x, **kw)
    if fx.shape != x.shape:
        raise ValueError(f"inner must map x to an output of x's shape {x.shape}: {inner!r} gives {fx.shape}")
    return x + fx, Cache(inner, cache)


def backward(params, cache, dy):
    """dy: x's shape. Returns dx = dy + df/dx^T dy and f's grads."""
    # 1. y = x + f(x): the identity path passes dy through unchanged.
    dfx, grads = _module(cache.inner).backward(params, cache.cache, dy)
    return dy + dfx, grads


def examples(rng):
    from . import lsa
    from ..layers import mlp

    return [Example("mlp-T3", mlp.init(rng, 3, 4) | {"b_2": rng.standard_normal(3)},
                    rng.standard_normal((2, 3, 3)), {"inner": "mlp"}),
            Example("layernorm-T1", {"gamma": rng.standard_normal(3), "beta": rng.standard_normal(3)},
                    rng.standard_normal((2, 1, 3)), {"inner": "layernorm"}),
            Example("lsa-sequential-T5", lsa.init(rng, 3), rng.standard_normal((1, 5, 3)),
                    {"inner": "lsa", "mode": "sequential"})]
