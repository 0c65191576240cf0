"""In-context regression and classification as GRIL reads them (Tian et al., Sec. 4.1-4.2, 4.4, App. B.1-B.2, B.5).

Each sequence is one task. A teacher is drawn per sequence, then N context examples and one query:

    W   ~ N(0, I)           (f, n_o) per task                      App. B.1 (scalar, n_o = 1), B.2 (n_o = f)
    x_i ~ U(-a, a)^f        i = 1 .. N + 1, a = ``x_scale``          a = 1/2 (``X_SCALE``); Fig. 2D rescales it
    y_i = W^T x_i           (n_o,)  no label noise                 Sec. 4.1 (scalar: y = w^T x), Sec. 4.2

The tokens interleave inputs and targets (Sec. 4.2, Prop. 4.1: s_{2j} = x_j, s_{2j+1} = y_j):

    s = x_1, y_1, x_2, y_2, ..., x_N, y_N, x_{N+1}              T = 2N + 1 tokens of size f

A GRIL block with window w = 3 and stride s = 2 (Eq. 9) then sees the N windows C_j = [x_j, y_j, x_{j+1}];
its output on the last window, C_N = [x_N, y_N, x_{N+1}], is the prediction of y_{N+1}, the held-out query
target (Sec. 5: "the final query token contains the test input only"). A target with n_o < f entries is padded
with zeros to the token size f. App. A.1 writes the scalar token as [0, ..., y] (the target in the last slot);
we put y_j in the first n_o slots for every n_o, so that the scalar task is the multivariate one with one output
(our convention: only the construction's Q/readout slot depends on it).

The input scale. App. B.1 builds the data as von Oswald et al. do, whose data code draws
``uniform(-input_range / 2, input_range / 2)`` with ``input_range = 1``: x ~ U(-1/2, 1/2)^f, ``X_SCALE`` = 1/2.
It fixes the paper's absolute losses: the zero predictor 1/2 E y_k² = f a²/6 is 10/24 = 0.417 at f = 10, the
0.414 / 0.426 of Tables 5-6 (U(-1, 1) would give 1.67, four times as much).

Classification (App. B.5): the same W (f, K) and x, logits W^T x; binary (K = 1): label 1[σ(logit) > 0.5], the
target token carries the label in {0, 1}; K-class: label argmax softmax(W^T x), the target token carries the
one-hot label (K <= f slots). ``labels`` holds the integer labels.

Glossary: B tasks, N context examples, f token size (input dimension), n_o target size, K classes,
T = 2N + 1 tokens.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..validate import check_array, check_positive_int

__all__ = ["Tasks", "sample", "sample_classification", "make_tokens", "query_loss", "zero_loss", "N_WINDOW",
           "STRIDE", "X_SCALE"]

N_WINDOW = 3   # w: the window [x_j, y_j, x_{j+1}] of Eq. 9
STRIDE = 2     # s: one window per (x, y) pair
X_SCALE = 0.5  # a: x ~ U(-1/2, 1/2), App. B.1 (von Oswald et al.'s data code, input_range = 1)


class Tasks(NamedTuple):
    """A batch of tasks: the ``tokens`` a network reads and the pieces they were built from."""
    tokens: np.ndarray   # (B, 2N + 1, f)
    X: np.ndarray        # (B, N + 1, f)   inputs, the last one the query
    Y: np.ndarray        # (B, N + 1, n_o) targets (regression) or label vectors (classification); Y[:, -1] held out
    W: np.ndarray        # (B, f, n_o)     teacher per task
    labels: np.ndarray = None  # (B, N + 1) integer labels (classification only)


def _check_scale(x_scale):
    ok = isinstance(x_scale, (int, float, np.integer, np.floating)) and not isinstance(x_scale, bool)
    if not (ok and math.isfinite(x_scale) and x_scale > 0):
        raise ValueError(f"x_scale must be a finite number > 0, got {x_scale!r}")
    return float(x_scale)


def make_tokens(X, Y):
    """Interleave x_1, y_1, ..., x_N, y_N, x_{N+1}; targets with n_o < f entries are zero-padded.

    Args:
        X: (B, N + 1, f); Y: (B, N + 1, n_o) or (B, N, n_o) with n_o <= f (the query target is never read).
    Returns:
        tokens (B, 2N + 1, f) in X's dtype.
    """
    check_array("X", X, ndim=3, names=("B", "N+1", "f"))
    B, N1, f = X.shape
    if N1 < 2:
        raise ValueError(f"X must hold at least one context example and the query, N + 1 >= 2, got {N1}")
    check_array("Y", Y, ndim=3, names=("B", "N", "n_o"))
    if Y.shape[0] != B or Y.shape[1] not in (N1, N1 - 1) or Y.shape[2] > f:
        raise ValueError(f"Y must have shape (B, N + 1, n_o) or (B, N, n_o) with B = {B}, N + 1 = {N1} and "
                         f"n_o <= f = {f}, got {Y.shape}")
    N, n_o = N1 - 1, Y.shape[2]
    tokens = np.zeros((B, 2 * N + 1, f), dtype=X.dtype)
    tokens[:, 0::2] = X
    tokens[:, 1::2, :n_o] = Y[:, :N]
    return tokens


def sample(rng, B, N=10, f=10, n_out=None, x_scale=X_SCALE, dtype=np.float64):
    """B regression tasks of App. B.1 (``n_out=1``) or B.2 (``n_out=f``, the default).

    Args:
        rng: numpy Generator. B: tasks. N: context examples (App. B.1: 10). f: input size (10).
        n_out: target size n_o <= f (default f). x_scale: a, with x ~ U(-a, a) (App. B.1: 1/2).
    Returns:
        ``Tasks`` in ``dtype``; targets y = W^T x.
    """
    B, N, f = (check_positive_int(k, v) for k, v in (("B", B), ("N", N), ("f", f)))
    n_out = f if n_out is None else check_positive_int("n_out", n_out)
    if n_out > f:
        raise ValueError(f"n_out must be <= f = {f} (targets are padded into tokens of size f), got {n_out}")
    a = _check_scale(x_scale)
    W = rng.standard_normal((B, f, n_out))
    X = rng.uniform(-a, a, (B, N + 1, f))
    Y = X @ W
    X, Y, W = (v.astype(dtype) for v in (X, Y, W))
    return Tasks(make_tokens(X, Y), X, Y, W)


def sample_classification(rng, B, N=10, f=10, K=1, x_scale=X_SCALE, dtype=np.float64):
    """B classification tasks of App. B.5: binary (K = 1) or K-class (2 < K <= f).

    Returns:
        ``Tasks`` whose Y is (B, N + 1, K): the label in {0, 1} (K = 1) or the one-hot label, and ``labels``
        (B, N + 1) the integer class.
    """
    B, N, f, K = (check_positive_int(k, v) for k, v in (("B", B), ("N", N), ("f", f), ("K", K)))
    if K == 2 or K > f:
        raise ValueError(f"K must be 1 (binary, one logit) or 3 <= K <= f = {f} (softmax), got {K}")
    a = _check_scale(x_scale)
    W = rng.standard_normal((B, f, K))
    X = rng.uniform(-a, a, (B, N + 1, f))
    logits = X @ W
    if K == 1:
        labels = (logits[..., 0] > 0).astype(np.int64)   # σ(z) > 0.5  <=>  z > 0
        Y = labels[..., None].astype(float)
    else:
        labels = logits.argmax(axis=-1)                   # argmax softmax = argmax of the logits
        Y = np.eye(K)[labels]
    X, Y, W = (v.astype(dtype) for v in (X, Y, W))
    return Tasks(make_tokens(X, Y), X, Y, W, labels)


def query_loss(y_hat, y):
    """1/2 · mean over tasks and output entries of (ŷ - y)², and its gradient dL/dŷ.

    Args:
        y_hat, y: (B, n_o).
    """
    check_array("y_hat", y_hat, ndim=2, names=("B", "n_o"))
    check_array("y", y, y_hat.shape, names=("B", "n_o"))
    err = y_hat - y
    return 0.5 * float(np.mean(err ** 2)), err / err.size


def zero_loss(f, x_scale=X_SCALE):
    """Expected ``query_loss`` of the zero predictor: 1/2 E y_k² = f a² / 6 (Var x = a²/3, W ~ N(0, 1)); 0.417 at f = 10, a = 1/2."""
    return f * _check_scale(x_scale) ** 2 / 6.0
