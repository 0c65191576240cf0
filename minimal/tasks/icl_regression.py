"""In-context linear regression (Zucchet et al. 2023/2024, Sec. 4.1 and App. C.1; the task of von Oswald et al. 2023).

Each sequence is one regression task. A teacher W* (d_y, d_x) is drawn per sequence, then T context pairs and
one query:

    W*_jk ~ N(0, σ_w²)                     i.i.d. per sequence
    x_t   ~ U(-√(3σ_x²), √(3σ_x²))^{d_x}  i.i.d., so E x = 0, Var x = σ_x² (App. C.1: σ_x² = 1, x ~ U(-√3, √3))
    y_t   = W* x_t                         t = 1 .. T   (no label noise)

The network reads T + 1 tokens

    z_t     = [x_t, y_t, 1]        t = 1 .. T          (context)
    z_{T+1} = [x_{T+1}, 0, 1]                          (query: its label is hidden)

and its output at the query token is the prediction ŷ of y_{T+1} = W* x_{T+1}. The loss is on the query only:

    L = 1/2 · mean over tasks and output coordinates of (ŷ_j - y_{T+1,j})²

The constant 1 (``bias=True``) stands in for biases: the gated RNN of Eq. 2 has none, and without a constant
its query-time output is a homogeneous quartic in the tokens, which cannot express the cubic one-step-GD
predictor η Σ_t y_t x_tᵀ x_{T+1} (Sec. 4.2). The construction of Fig. 1 appends the same constant.

Our reading of the teacher variance. The paper's targets (one optimal GD step: loss 0.0947, App. C.2) are
reproduced by σ_w² = 1/3 with the loss above: 1/2 · σ_w² σ_x² d_x (d_x - 1/5) / (T + d_x - 1/5) = 0.0946 for
T = 12, d_x = 3 (``minimal.analysis.gd.gd_loss``); with σ_w² = 2/3 the same GD step scores 0.189. We therefore
train *and* evaluate with σ_w² = 1/3 (= 1/d_x); ``sigma_w2`` is a parameter for other readings.

Glossary (shapes): B tasks, T context pairs, d_x inputs, d_y outputs, D_in = d_x + d_y (+ 1 with ``bias``).
    tokens (B, T + 1, D_in)   X (B, T, d_x)   Y (B, T, d_y)   x_q (B, d_x)   y_q (B, d_y)   W (B, d_y, d_x)
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..layers import mse
from ..validate import check_array, check_positive_int

__all__ = ["Tasks", "sample", "make_tokens", "query_loss", "token_dim"]


class Tasks(NamedTuple):
    """A batch of regression tasks: the network's ``tokens`` and the raw pieces they were built from."""
    tokens: np.ndarray   # (B, T + 1, D_in)
    X: np.ndarray        # (B, T, d_x)   context inputs
    Y: np.ndarray        # (B, T, d_y)   context labels  Y_t = W* X_t
    x_q: np.ndarray      # (B, d_x)      query input
    y_q: np.ndarray      # (B, d_y)      query label (the target)
    W: np.ndarray        # (B, d_y, d_x) teacher per task


def _check_positive_float(name, value):
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def token_dim(d_x, d_y, bias=True):
    """D_in = d_x + d_y (+ 1 for the constant)."""
    return d_x + d_y + int(bool(bias))


def make_tokens(X, Y, x_q, bias=True):
    """Tokens [x_t, y_t, 1] for t <= T and the query [x_q, 0, 1].

    Args:
        X: (B, T, d_x); Y: (B, T, d_y); x_q: (B, d_x); one float dtype. bias: append the constant 1.
    Returns:
        tokens (B, T + 1, D_in) in X's dtype.
    """
    check_array("X", X, ndim=3, names=("B", "T", "d_x"))
    B, T, d_x = X.shape
    check_array("Y", Y, (B, T, None), names=("B", "T", "d_y"))
    check_array("x_q", x_q, (B, d_x), names=("B", "d_x"))
    d_y = Y.shape[2]
    tokens = np.zeros((B, T + 1, token_dim(d_x, d_y, bias)), dtype=X.dtype)
    tokens[:, :T, :d_x] = X
    tokens[:, :T, d_x:d_x + d_y] = Y
    tokens[:, T, :d_x] = x_q        # the query's label slot stays 0
    if bias:
        tokens[:, :, -1] = 1.0
    return tokens


def sample(rng, batch, T=12, d_x=3, d_y=3, sigma_w2=1.0 / 3.0, sigma_x2=1.0, bias=True, dtype=np.float64):
    """Draw ``batch`` fresh tasks (module docstring; App. C.1).

    Args:
        rng: ``numpy.random.Generator``. batch: B >= 1. T: context pairs (paper 12). d_x, d_y: paper 3, 3.
        sigma_w2: variance σ_w² of W*'s entries (paper, as we read it: 1/3). sigma_x2: Var x (paper 1).
        bias: append the constant 1 to every token. dtype: float32 (training) or float64.
    Returns:
        ``Tasks`` with tokens (B, T + 1, D_in) and the raw X, Y, x_q, y_q, W, all in ``dtype``.
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    B = check_positive_int("batch", batch)
    T = check_positive_int("T", T)
    d_x = check_positive_int("d_x", d_x)
    d_y = check_positive_int("d_y", d_y)
    sigma_w2 = _check_positive_float("sigma_w2", sigma_w2)
    sigma_x2 = _check_positive_float("sigma_x2", sigma_x2)
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    a = math.sqrt(3.0 * sigma_x2)   # U(-a, a) has variance a²/3
    W = rng.standard_normal((B, d_y, d_x)) * math.sqrt(sigma_w2)
    xs = rng.uniform(-a, a, (B, T + 1, d_x))
    ys = np.matmul(xs, W.transpose(0, 2, 1))                # y_t = W* x_t for the context and the query
    # The tokens are written directly (this runs every training step; make_tokens is the checked public
    # form of the same layout) and X, Y, x_q are views into them.
    tokens = np.empty((B, T + 1, token_dim(d_x, d_y, bias)), dtype=dtype)
    tokens[:, :, :d_x] = xs
    tokens[:, :T, d_x:d_x + d_y] = ys[:, :T]
    tokens[:, T, d_x:d_x + d_y] = 0.0                       # the query's label slot stays 0
    if bias:
        tokens[:, :, -1] = 1.0
    return Tasks(tokens, tokens[:, :T, :d_x], tokens[:, :T, d_x:d_x + d_y], tokens[:, T, :d_x],
                 ys[:, T].astype(dtype), W.astype(dtype))


def query_loss(y_hat, y_q):
    """L = 1/2 mean((ŷ - y_q)²) over tasks and outputs, and dL/dŷ.

    Args:
        y_hat: (B, d_y) predictions at the query token; y_q: (B, d_y) targets.
    Returns:
        (L as a float, dL/dŷ of shape (B, d_y)).
    """
    check_array("y_hat", y_hat, ndim=2, names=("B", "d_y"))
    check_array("y_q", y_q, y_hat.shape, names=("B", "d_y"))
    L, cache = mse.forward({}, y_hat, y_q)
    dy_hat, _ = mse.backward({}, cache, np.asarray(0.5))
    return 0.5 * float(L), dy_hat
