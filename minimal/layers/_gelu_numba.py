"""GELU (tanh approximation, ``minimal.layers.mlp``) and its backward in one compiled pass each, elementwise.

With y = c (u + a u^3), 1/2 (1 + tanh y) = σ(2y), so

    GELU(u) = u s,   GELU'(u) = s + 2 u s (1 − s) c (1 + 3 a u^2),   s = σ(2y) = 1 / (1 + e^{−2y}),

using 1 − tanh² y = 4 s (1 − s). s comes from e = exp(−2|y|) <= 1 (σ(2|y|) = 1 / (1 + e), σ(−2|y|) = e / (1 + e)),
with no cancellation anywhere, and that exp is the vectorisable one of ``minimal.scan.numba_log``: NumPy's tanh on
float32 arrays is a scalar call per element, and the backward's formula another five passes with temporaries.
Computed in float64 registers whatever the storage dtype.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..scan.numba_log import exp_nonpositive

__all__ = ["gelu_into", "gelu_backward_into"]

_C = math.sqrt(2.0 / math.pi)
_A = 0.044715


@njit(cache=True, inline="always")
def _s(u):
    """σ(2y), y = c (u + a u^3)."""
    y = _C * (u + _A * u * u * u)
    e = exp_nonpositive(-2.0 * abs(y))
    return (1.0 if y >= 0.0 else e) / (1.0 + e)     # one division of a selected numerator


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def gelu_into(u, out):
    """out = GELU(u) over flat (n,) arrays."""
    for j in range(u.shape[0]):
        v = np.float64(u[j])
        out[j] = v * _s(v)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def gelu_backward_into(u, dh, du):
    """du = dh · GELU'(u) over flat (n,) arrays."""
    for j in range(u.shape[0]):
        v = np.float64(u[j])
        s = _s(v)
        du[j] = np.float64(dh[j]) * (s + 2.0 * v * s * (1.0 - s) * _C * (1.0 + 3.0 * _A * v * v))
