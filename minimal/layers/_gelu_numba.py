"""GELU (tanh approximation, ``minimal.layers.mlp``) and its backward in one compiled pass each, elementwise.

With y = c (u + a u^3), 1/2 (1 + tanh y) = σ(2y), so

    GELU(u) = u s,   GELU'(u) = s + 2 u s (1 − s) c (1 + 3 a u^2),   s = σ(2y) = 1 / (1 + e^{−2y}),

using 1 − tanh² y = 4 s (1 − s). s comes from e = exp(−2|y|) <= 1 (σ(2|y|) = 1 / (1 + e), σ(−2|y|) = e / (1 + e)),
with no cancellation anywhere, and that exp is the vectorisable one of ``minimal.scan.numba_log``: NumPy's tanh on
float32 arrays is a scalar call per element, and the backward's formula another five passes with temporaries.
``gelu_into`` / ``gelu_backward_into`` compute in float64 registers whatever the storage dtype; the ``_f32`` pair
computes float32 arrays in float32 registers with ``exp_nonpositive_f32`` (twice the vector lanes, a shorter
series). Their error is float32's: a few ulp of GELU(u), times |2y| + O(1) in the tail where s ~ e^{2y} inherits
the rounding of 2y; in the backward, a few ulp of the larger of its two terms, s and 2 u s (1 − s) c (1 + 3 a u^2),
which cancel where GELU'(u) ~ 0 (u ~ −0.75; tests/test_gates_numba.py bounds both).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..scan.numba_log import exp_nonpositive, exp_nonpositive_f32

__all__ = ["gelu_into", "gelu_backward_into", "gelu_into_f32", "gelu_backward_into_f32"]

_C = math.sqrt(2.0 / math.pi)
_A = 0.044715


@njit(cache=True, inline="always")
def _s(u):
    """σ(2y), y = c (u + a u^3)."""
    y = _C * (u + _A * u * u * u)
    e = exp_nonpositive(-2.0 * abs(y))
    return (1.0 if y >= 0.0 else e) / (1.0 + e)     # one division of a selected numerator


@njit(cache=True, inline="always")
def _add_row(acc, row):
    """acc (C,) float64 += row (C,), a loop of its own after the row is written (inside the row's loop, the sum kept
    the pass from vectorising: 2.2x its time at (2048, 256) float32)."""
    for c in range(row.shape[0]):
        acc[c] += np.float64(row[c])


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def gelu_into(u, b, out):
    """out = GELU(u + b) over (R, C) arrays u, out and b (C,) (the sum rounded to the storage dtype first)."""
    R, C = u.shape
    for r in range(R):
        for c in range(C):
            v = np.float64(u[r, c] + b[c])
            out[r, c] = v * _s(v)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def gelu_backward_into(u, b, dh, du, db):
    """du = dh · GELU'(u + b) over (R, C) arrays, and db (C,) = Σ_r du (float64 sums of the stored du)."""
    R, C = u.shape
    acc = np.zeros(C)
    for r in range(R):
        ur, dhr, dur = u[r], dh[r], du[r]
        for c in range(C):
            v = np.float64(ur[c] + b[c])
            s = _s(v)
            dur[c] = np.float64(dhr[c]) * (s + 2.0 * v * s * (1.0 - s) * _C * (1.0 + 3.0 * _A * v * v))
        _add_row(acc, dur)
    db[:] = acc


_F32 = np.float32
_C_F32, _A_F32 = _F32(_C), _F32(_A)
_ZERO_F32, _ONE_F32, _TWO_F32, _THREE_F32 = _F32(0.0), _F32(1.0), _F32(2.0), _F32(3.0)
_U2_CAP_F32 = _F32(1e36)


@njit(cache=True, inline="always")
def _s_f32(u):
    """``_s`` in float32 arithmetic."""
    y = _C_F32 * (u + _A_F32 * u * u * u)
    e = exp_nonpositive_f32(-_TWO_F32 * abs(y))
    return (_ONE_F32 if y >= _ZERO_F32 else e) / (_ONE_F32 + e)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def gelu_into_f32(u, b, out):
    """``gelu_into`` for float32 arrays, in float32 arithmetic (module docstring)."""
    R, C = u.shape
    for r in range(R):
        for c in range(C):
            v = u[r, c] + b[c]
            out[r, c] = v * _s_f32(v)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def gelu_backward_into_f32(u, b, dh, du, db):
    """``gelu_backward_into`` for float32 arrays, in float32 arithmetic (module docstring); db still float64 sums."""
    R, C = u.shape
    acc = np.zeros(C)
    for r in range(R):
        ur, dhr, dur = u[r], dh[r], du[r]
        for c in range(C):
            v = ur[c] + b[c]
            s = _s_f32(v)
            # s (1 − s) first and u^2 capped: where u^2 would overflow float32 (|u| > 5e19), s (1 − s) is exactly 0
            # and the term must be 0, not inf · 0
            w = _TWO_F32 * s * (_ONE_F32 - s)
            dur[c] = dhr[c] * (s + w * v * _C_F32 * (_ONE_F32 + _THREE_F32 * _A_F32 * min(v * v, _U2_CAP_F32)))
        _add_row(acc, dur)
    db[:] = acc
