"""Layer normalisation (``minimal.layers.layernorm``) forward and backward in one compiled pass over each row.

The formulas are the layer's (its module docstring): per row of D features, mu and sigma^2 (biased), xhat, y; and
dx = inv_std (dxhat − mean(dxhat) − xhat mean(dxhat xhat)) with dxhat = dy gamma, dgamma = Σ dy xhat, dbeta = Σ dy.
NumPy takes some ten passes with (N, D) temporaries and a reduction over a short axis for each; at the
selective-copy shape (64 · 32 rows of 32) those passes dominated the layer's time. ``layernorm_forward`` and
``layernorm_backward`` sum in float64 whatever the storage dtype, reassociated (``fastmath`` "reassoc" only: vector
partial sums).

On float32 arrays the ``_f32`` pair runs instead: the mean is still summed in float64, then rounded once to float32
(an error of half an ulp of |mu|, the resolution at which x itself is stored), and
the centred values, their variance, xhat and y in float32 registers (twice the vector lanes, no conversions); the
backward's two row sums in float32 registers, dgamma and dbeta in float64 across the rows. Their error is
float32's: a few ulp of each output, plus, where |mu| is large against sigma, |mu| 2^-24 / sigma in xhat
(tests/test_layers.py bounds both against the float64 formulas). At (16, 128, 64) float32, one thread, three runs, the
forward took 34.0-34.8 µs against 70.0-72.1, the backward 39.2, 34.8 and 54.1 against 53.0, 50.4 and 52.3 (the third
run slow throughout); the first step of every bench train row 0.95-0.97 of its time before (python
bench/layernorm_pass.py, bench/results/train_cpu_2026-12-03_layernorm_f32.txt).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["layernorm_forward", "layernorm_backward", "layernorm_forward_f32", "layernorm_backward_f32"]


@njit(cache=True, inline="always")
def _row(x, gamma, beta, eps, y, xhat, inv_std, n):
    """Row n of ``layernorm_forward``, in float64 registers."""
    D = x.shape[1]
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
def layernorm_forward(x, gamma, beta, eps, y, xhat, inv_std):
    """x (N, D) -> y = gamma xhat + beta, xhat, inv_std (N,), written into the given arrays."""
    for n in range(x.shape[0]):
        _row(x, gamma, beta, eps, y, xhat, inv_std, n)


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


_F32 = np.float32
_ZERO_F32, _ONE_F32, _INF_F32 = _F32(0.0), _F32(1.0), _F32(np.inf)


@njit(cache=True, error_model="numpy", fastmath={"reassoc"})
def layernorm_forward_f32(x, gamma, beta, eps, y, xhat, inv_std):
    """``layernorm_forward`` of float32 arrays: the mean summed in float64, the rest in float32 registers (module
    docstring); a row whose float32 sum of squares overflows (|x − mu| above ~1.8e19 / sqrt(D)) runs in float64
    registers instead. ``eps`` must be a normal float32 number (``layernorm.forward`` sends others to the float64
    pair)."""
    N, D = x.shape
    inv_d, e = _F32(1.0 / D), _F32(eps)
    for n in range(N):
        s = 0.0
        for i in range(D):
            s += np.float64(x[n, i])
        mu = _F32(s / D)
        ss = _ZERO_F32
        for i in range(D):
            c = x[n, i] - mu
            ss += c * c
        if not ss < _INF_F32:
            _row(x, gamma, beta, eps, y, xhat, inv_std, n)
            continue
        r = _ONE_F32 / np.sqrt(ss * inv_d + e)
        inv_std[n] = r
        for i in range(D):
            xh = (x[n, i] - mu) * r
            xhat[n, i] = xh
            y[n, i] = gamma[i] * xh + beta[i]


@njit(cache=True, error_model="numpy", fastmath={"reassoc"})
def layernorm_backward_f32(dy, xhat, inv_std, gamma, dx, dgamma, dbeta):
    """``layernorm_backward`` of float32 arrays: each row's two sums in float32 registers, dgamma and dbeta (float64
    arrays) summed in float64 across the rows."""
    N, D = dy.shape
    inv_d = _F32(1.0 / D)
    for i in range(D):
        dgamma[i] = 0.0
        dbeta[i] = 0.0
    for n in range(N):
        a = _ZERO_F32
        b = _ZERO_F32
        for i in range(D):
            g = dy[n, i]
            xh = xhat[n, i]
            d = g * gamma[i]
            a += d
            b += d * xh
            dgamma[i] += np.float64(g) * np.float64(xh)
            dbeta[i] += np.float64(g)
        a *= inv_d
        b *= inv_d
        r = inv_std[n]
        for i in range(D):
            dx[n, i] = r * (dy[n, i] * gamma[i] - a - xhat[n, i] * b)
