"""The causal depthwise convolution (``minimal.layers.causal_conv``) forward and backward in one compiled pass each.

The formulas are the layer's (its module docstring): y_t = b + Σ_j W[j] x_{t−j}; dx_s = Σ_j W[j] dy_{s+j},
dW[j] = Σ_{b,t} dy_t x_{t−j}, db = Σ_{b,t} dy_t, with x_s = 0 for s < 0 and dy_s = 0 for s >= T. NumPy takes
two passes with a temporary per tap (k = 4: nine passes forward, and a reduction over (B, T) per tap backward);
here each array is read once. y and dx add the same products in the same order and the same dtype as the NumPy
form (tap 0 first, no fused multiply-add), so they equal it bit for bit; dW and db are sums over B · T terms,
run in float64 whatever the storage dtype (as LayerNorm's dgamma and dbeta, ``_layernorm_numba``).

Arrays: C-contiguous x, dy, y, dx (B, T, C); W (k, C); b (C,); dW64 (k, C) and db64 (C,) float64 accumulators.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["causal_conv_forward", "causal_conv_backward"]


@njit(cache=True, error_model="numpy")
def causal_conv_forward(x, W, b, y):
    """y[n, t] = b + W[0] x[n, t] + W[1] x[n, t−1] + ... (taps before t = 0 skipped), in that order."""
    B, T, C = x.shape
    k = W.shape[0]
    for n in range(B):
        for t in range(T):
            for c in range(C):
                y[n, t, c] = b[c]
            for j in range(min(k, t + 1)):
                for c in range(C):
                    y[n, t, c] += W[j, c] * x[n, t - j, c]


@njit(cache=True, error_model="numpy")
def causal_conv_backward(x, W, dy, dx, dW64, db64):
    """dx[n, s] = 0 + W[0] dy[n, s] + W[1] dy[n, s+1] + ... (taps past T − 1 skipped), in that order; dW64 and
    db64 (zeroed here) receive the float64 sums of dy_t x_{t−j} and of dy_t over every (n, t)."""
    B, T, C = x.shape
    k = W.shape[0]
    dW64[:] = 0.0
    db64[:] = 0.0
    for n in range(B):
        for s in range(T):
            for c in range(C):
                dx[n, s, c] = 0.0
            for j in range(min(k, T - s)):
                for c in range(C):
                    dx[n, s, c] += W[j, c] * dy[n, s + j, c]
            for c in range(C):
                db64[c] += np.float64(dy[n, s, c])
            for j in range(min(k, s + 1)):
                for c in range(C):
                    dW64[j, c] += np.float64(dy[n, s, c]) * np.float64(x[n, s - j, c])
