"""What every construction shares: the appended constant input x̃ = [x; 1], the checks of the attention
weights and of the linearisation scale ε, and the saturated gate bias.

Glossary (shapes): B batch, T time, D input features, D_k key/query features, D_v value features.
    W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D)     x (B, T, D)     x̃ = append_one(x) (B, T, D + 1)
"""
from __future__ import annotations

import numpy as np

from ..validate import check_array

__all__ = ["FORGET_BIAS", "append_one", "check_attention", "check_eps"]

FORGET_BIAS = 40.0  # σ(40) = 1 - 4e-18 rounds to 1.0 in float64: an LSTM forget gate (a GRU gate) is exactly 1


def append_one(x):
    """x̃ = [x; 1]: (B, T, D) -> (B, T, D + 1), the constant input that stands in for biases."""
    check_array("x", x, ndim=3, names=("B", "T", "D"))
    return np.concatenate([x, np.ones(x.shape[:2] + (1,), dtype=x.dtype)], axis=-1)


def check_attention(W_V, W_K, W_Q):
    """Validate W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D); return (D_v, D_k, D) and float64 copies."""
    check_array("W_V", W_V, ndim=2, names=("D_v", "D"))
    D_v, D = W_V.shape
    check_array("W_K", W_K, (None, D), names=("D_k", "D"))
    D_k = W_K.shape[0]
    check_array("W_Q", W_Q, (D_k, D), names=("D_k", "D"))
    return (D_v, D_k, D), tuple(np.asarray(W, dtype=np.float64) for W in (W_V, W_K, W_Q))


def check_eps(eps):
    """Validate the linearisation scale ε, a number in (0, 1]; return it as a float."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not 0.0 < eps <= 1.0:
        raise ValueError(f"eps (the linearisation scale) must be a number in (0, 1], got {eps!r}")
    return float(eps)
