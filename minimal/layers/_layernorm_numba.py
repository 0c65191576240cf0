"""Layer normalisation (``minimal.layers.layernorm``) forward and backward in one compiled pass over each row.

The formulas are the layer's (its module docstring): per row of D features, mu and sigma^2 (biased), xhat, y; and
dx = inv_std (dxhat − mean(dxhat) − xhat mean(dxhat xhat)) with dxhat = dy gamma, dgamma = Σ dy xhat, dbeta = Σ dy.
NumPy takes some ten passes with (N, D) temporaries and a reduction over a short axis for each; at the
selective-copy shape (64 · 32 rows of 32) those passes dominated the layer's time. Sums run in float64
whatever the storage dtype, reassociated (``fastmath`` "reassoc" only: vector partial sums).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["layernorm_forward", "layernorm_backward"]


@njit(cache=True, error_model="numpy", fastmath={"reassoc"})
def layernorm_forward(x, gamma, beta, eps, y, xhat, inv_std):
    """x (N, D) -> y = gamma xhat + beta, xhat, inv_std (N,), written into the given arrays."""
    N, D = x.shape
    for n in range(N):
        s = 0.0
        for i in range(D):
            s += np.float64(x[n, i])
        mu = s / D
        ss = 0.0
        for i in range(D):
            c = np.float64(x[n, i]) - mu
            ss += c * c
        r = 1.0 / math.sqrt(ss / D + eps)
        inv_std[n] = r
        for i in range(D):
            xh = (np.float64(x[n, i]) - mu) * r
            xhat[n, i] = xh
            y[n, i] = np.float64(gamma[i]) * xh + np.float64(beta[i])


@njit(cache=True, error_model="numpy", fastmath={"reassoc"})
def layernorm_backward(dy, xhat, inv_std, gamma, dx, dgamma, dbeta):
    """dy, xhat (N, D), inv_std (N,), gamma (D,) -> dx (N, D), dgamma and dbeta (D,) (float64 accumulators)."""
    N, D = dy.shape
    for i in range(D):
        dgamma[i] = 0.0
        dbeta[i] = 0.0
    for n in range(N):
        a = 0.0
        b = 0.0
        for i in range(D):
            g = np.float64(dy[n, i])
            xh = np.float64(xhat[n, i])
            d = g * np.float64(gamma[i])
            a += d
            b += d * xh
            dgamma[i] += g * xh
            dbeta[i] += g
        a /= D
        b /= D
        r = np.float64(inv_std[n])
        for i in range(D):
            dx[n, i] = r * (np.float64(dy[n, i]) * np.float64(gamma[i]) - a - np.float64(xhat[n, i]) * b)
