"""Softmax cross-entropy, averaged over every position:

    L = (1/N) Σ_n [ logsumexp(z_n) - z_n[y_n] ],   logsumexp(z) = m + log Σ_j exp(z_j - m),  m = max_j z_j

(subtracting the row max m keeps every exponential <= 1). Its gradient is dL/dz_n = (softmax(z_n) - e_{y_n}) / N.
Shapes: logits z (B, T, V) or (N, V); targets y of logits' shape without the last axis, integers in [0, V);
L a 0-d array. No parameters (params = {}).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_array
from ..contract import Example

__all__ = ["init", "forward", "backward", "examples"]


class Cache(NamedTuple):
    P: np.ndarray        # (..., V) softmax(logits)
    targets: np.ndarray  # (...,)


def init(rng=None):
    """No parameters."""
    return {}


def forward(params, logits, targets):
    """Mean cross-entropy of ``logits`` (B, T, V) or (N, V) against integer ``targets`` (B, T) or (N,).
    Returns (L, cache) with L a 0-d array."""
    if params:
        raise ValueError(f"params must be empty for cross_entropy, got keys {sorted(params)}")
    check_array("logits", logits, min_ndim=2)
    if logits.ndim > 3:
        raise ValueError(f"logits must have shape (B, T, V) or (N, V), got shape {logits.shape}")
    V = logits.shape[-1]
    check_array("targets", targets, kind="i")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have shape {logits.shape[:-1]} (logits' without V), got {targets.shape}")
    if targets.size == 0:
        raise ValueError(f"targets must hold at least one position, got shape {targets.shape}")
    if targets.min() < 0 or targets.max() >= V:
        raise ValueError(f"targets must lie in [0, V={V}), got values in [{targets.min()}, {targets.max()}]")
    z = logits - logits.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=-1, keepdims=True))
    log_p = z - lse  # (..., V) log-softmax
    picked = np.take_along_axis(log_p, targets[..., None], axis=-1)
    return np.asarray(-picked.mean()), Cache(np.exp(log_p), targets)


def backward(params, cache, dy):
    """dy: 0-d dL/dloss. Returns (dlogits, {})."""
    if np.ndim(dy) != 0:
        raise ValueError(f"dy must be a scalar (0-d), got shape {np.shape(dy)}")
    # 1. L = mean_n (logsumexp(z_n) - z_n[y_n])
    dlogits = cache.P.copy()
    np.put_along_axis(dlogits, cache.targets[..., None],
                      np.take_along_axis(dlogits, cache.targets[..., None], axis=-1) - 1.0, axis=-1)
    return dlogits * (float(dy) / cache.targets.size), {}


def examples(rng):

    return [Example("BTV-T3", {}, rng.standard_normal((2, 3, 5)), {"targets": rng.integers(0, 5, (2, 3))}),
            Example("BTV-T1", {}, 3.0 * rng.standard_normal((2, 1, 4)), {"targets": np.array([[3], [0]])}),
            Example("NV", {}, rng.standard_normal((4, 3)), {"targets": np.array([0, 2, 2, 1])})]
