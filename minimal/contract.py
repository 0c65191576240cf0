"""The cell contract (DESIGN.md) and the small record each cell uses to describe its examples.

Every cell or building block is a module with
    init(rng, **config) -> params                      # dict of named float arrays
    forward(params, x, **kw) -> (y, cache)            # x is (B, T, D) for sequence cells
    backward(params, cache, dy) -> (dx, grads)        # grads has exactly the keys of params
    examples(rng) -> list[Example]                    # tiny float64 cases for generic tools
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

REQUIRED = ("init", "forward", "backward", "examples")


class Example(NamedTuple):
    """One small, float64 instance of a cell: ``forward(params, x, **kwargs)`` must run on it."""
    name: str
    params: dict
    x: Any
    kwargs: dict = {}

    def n_params(self):
        return int(sum(np.size(p) for p in self.params.values()))
