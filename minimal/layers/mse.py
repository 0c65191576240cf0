"""Mean squared error over every entry:

    L = (1/N) Σ_i (y_pred_i - target_i)^2,   N = y_pred.size

(no factor 1/2: where a paper's loss has one, halve L). Shapes: y_pred and target any one shape, no
broadcasting; L a 0-d array. No parameters (params = {}); the target gets no gradient.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_finite_result, check_same_shape
from ..contract import Example

__all__ = ["init", "forward", "backward", "examples"]


class Cache(NamedTuple):
    err: np.ndarray  # y_pred - target


def init(rng=None):
    """No parameters."""
    return {}


def forward(params, y_pred, target):
    """Returns (L, cache) with L = mean((y_pred - target)^2) a 0-d array.

    Raises:
        InputError: a bad argument, or y_pred and target too large for their dtype (the squared error would
            be inf; float32 overflows for differences above 1.8e19), naming both with their largest values.
    """
    if params:
        raise ValueError(f"params must be empty for mse, got keys {sorted(params)}")
    check_array("y_pred", y_pred)
    check_array("target", target)
    check_same_shape("target", target, "y_pred", y_pred)
    if y_pred.size == 0:
        raise ValueError(f"y_pred must have at least one entry, got shape {y_pred.shape}")
    err = y_pred - target
    loss = np.asarray(np.mean(err * err))
    check_finite_result("the squared error (y_pred - target)^2", loss, {"y_pred": y_pred, "target": target})
    return loss, Cache(err)


def backward(params, cache, dy):
    """dy: 0-d dL/dloss. Returns (dy_pred, {})."""
    if np.ndim(dy) != 0:
        raise ValueError(f"dy must be a scalar (0-d), got shape {np.shape(dy)}")
    # 1. L = mean(err^2)
    dy_pred = cache.err * (2.0 * float(dy) / cache.err.size)
    return check_finite_result("the gradient dL/dy_pred", dy_pred, {"dy": np.asarray(dy)}), {}


def examples(rng):

    return [Example("BTD-T3", {}, rng.standard_normal((2, 3, 2)), {"target": rng.standard_normal((2, 3, 2))}),
            Example("BTD-T1", {}, rng.standard_normal((1, 1, 3)), {"target": rng.standard_normal((1, 1, 3))}),
            Example("N", {}, rng.standard_normal(5), {"target": rng.standard_normal(5)})]
