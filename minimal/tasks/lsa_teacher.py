"""Teacher-student task of Zucchet et al., "Gated recurrent neural networks discover attention" (ICML 2024;
arXiv 2309.01775), Sec. 3.1 and App. B.1: a student learns to reproduce a fixed linear self-attention (LSA)
teacher on fresh random sequences.

    teacher    W_V, W_K, W_Q  (d, d), entries N(0, 1/d), drawn once per task
    inputs     x_t ~ N(0, I_d), t = 1..T, i.i.d.; a fresh batch every training step
    targets    y*_t = Σ_{t'<=t} (W_V x_t')(W_K x_t')^T (W_Q x_t)            (Eq. 1, ``minimal.cells.lsa``)
    student    sees x̃_t = [x_t; 1]: the gated RNN has no biases, and the query neurons need the constant
               (App. A.1, Fig. 1)

Loss: the mean squared error over every (b, t, i) entry, L = mean (y - y*)^2. We report it also relative to
the variance of the teacher's outputs (``relative_loss``), which makes runs with different teachers or
input scales comparable (the paper's Table 1 reports the plain loss).

Assumptions (the paper does not print them in the main text): teacher entries N(0, 1/d), the default of
``minimal.cells.lsa.init``, and standard normal inputs.

Glossary: B batch, T time, d input = value = key features.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..cells import lsa
from ..validate import check_array, check_positive_int

__all__ = ["Teacher", "make_teacher", "sample_inputs", "targets", "append_one", "sample_batch", "mse",
           "relative_loss"]


class Teacher(NamedTuple):
    """The LSA teacher's weights, each (d, d)."""
    W_V: np.ndarray
    W_K: np.ndarray
    W_Q: np.ndarray

    def params(self):
        """The weights as ``minimal.cells.lsa`` params."""
        return {"W_V": self.W_V, "W_K": self.W_K, "W_Q": self.W_Q}


def make_teacher(rng, d=4):
    """A random LSA teacher with d features (entries N(0, 1/d), as ``minimal.cells.lsa.init``)."""
    p = lsa.init(rng, check_positive_int("d", d))
    return Teacher(p["W_V"], p["W_K"], p["W_Q"])


def sample_inputs(rng, batch, T, d, dtype=np.float64):
    """x: (batch, T, d), entries N(0, 1)."""
    batch = check_positive_int("batch", batch)
    T = check_positive_int("T", T)
    d = check_positive_int("d", d)
    return rng.standard_normal((batch, T, d)).astype(dtype, copy=False)


def targets(teacher, x):
    """The teacher's outputs y*: (B, T, d) for x: (B, T, d) (causal LSA, Eq. 1, parallel form)."""
    if not isinstance(teacher, Teacher):
        raise ValueError(f"teacher must be a Teacher (from make_teacher), got {type(teacher).__name__}")
    params = {k: v.astype(x.dtype, copy=False) for k, v in teacher.params().items()}
    return lsa.forward(params, x)[0]


def append_one(x):
    """x̃ = [x; 1]: (B, T, d) -> (B, T, d + 1), the student's input (the constant stands in for biases)."""
    check_array("x", x, ndim=3, names=("B", "T", "d"))
    return np.concatenate([x, np.ones(x.shape[:2] + (1,), dtype=x.dtype)], axis=-1)


def sample_batch(rng, teacher, batch, T, dtype=np.float64):
    """A fresh batch: the student's input x̃ (B, T, d + 1) and the teacher's targets y* (B, T, d)."""
    x = sample_inputs(rng, batch, T, teacher.W_V.shape[1], dtype)
    return append_one(x), targets(teacher, x)


def mse(y, y_star):
    """Mean squared error over all entries, and its gradient dL/dy (same shape as y)."""
    check_array("y", y, ndim=3, names=("B", "T", "d"))
    check_array("y_star", y_star, y.shape, names=("B", "T", "d"))
    diff = y - y_star
    return float(np.mean(diff * diff)), diff * (2.0 / diff.size)


def relative_loss(y, y_star):
    """mean (y - y*)^2 / var(y*): 1 for the best constant predictor, 0 for a perfect student."""
    loss, _ = mse(y, y_star)
    return loss / float(np.var(y_star))
