"""Explicit gradient-descent references for GRIL's in-context tasks (Tian et al., "Learning in the Recurrent
State", arXiv:2410.11687, Sec. 4.1-4.4, App. A.2, A.3, A.5, A.6, C.3). Plain NumPy, no recurrent network:
the constructions of ``minimal.constructions.gd_as_gril`` are tested against these functions.

Regression (Eq. 4, Eq. 15; with the L2 term of App. A.5). A task holds N context pairs and a query,
X (B, N + 1, f), Y (B, N + 1, n_o) (``minimal.tasks.gril_regression``); only x_1 .. x_N, y_1 .. y_N enter the loss

    L(W) = 1/(2N) Σ_{i<=N} ||W^T x_i - y_i||² + l2 ||W||²_F                       W (f, n_o)
    ∇L(W) = (1/N) Σ_i x_i (x_i^T W - y_i^T) + 2 l2 W = (1/N)(S W - X^T Y) + 2 l2 W,   S = Σ_i x_i x_i^T.

One GD step is W_1 = W_0 - η ∇L(W_0); from W_0 = 0 the query prediction is

    ŷ_{N+1} = W_1^T x_{N+1} = (η/N) Σ_i y_i x_i^T x_{N+1}.                                   (Eq. 6, Eq. 8)

The step size is normalised by N (Eq. 4's 1/(2N)), unlike ``minimal.analysis.gd`` whose loss is the plain sum
1/2 Σ_i: a step η here equals a step η_sum = η / N there.

Optimal one-step size. With x ~ U(-a, a)^f (σ_x² = a²/3, kurtosis κ = 9/5) and W ~ N(0, I) (App. B.1-B.2),
``minimal.analysis.gd`` (Eq. 2-5 there) gives, for the sum normalisation and T = N context pairs,
η*_sum = 1 / (σ_x² (N + f - 2 + κ)); so here

    η* = N η*_sum = N / (σ_x² (N + f - 2 + κ)),
    L(η*) = (f σ_x² / 2) (f - 2 + κ) / (N + f - 2 + κ)                      (1/2 mean over tasks and outputs)

and the ratio to the zero predictor's f σ_x²/2 = f a²/6 is (f - 2 + κ) / (N + f - 2 + κ) (= 0.495 for
N = f = 10; the paper's Table 7 has 0.207 for GD against 0.414-0.426 for models that learn nothing).

Cross-entropy (Sec. 4.4, Eq. 11; App. A.6). Features Φ (B, N, d), labels Y (B, N, K), W (d, K), logits
z_i = W^T φ_i; p_i = softmax(z_i) against a one-hot y_i (K >= 2), or p_i = σ(z_i) against y_i in {0, 1} (K = 1).
The summed loss L_CE = Σ_i ℓ(z_i, y_i) has the gradient Σ_i φ_i (p_i - y_i)^T (d, K), App. A.6's layout; Sec. 4.4
writes W as (K, d) and the gradient as its transpose Σ_i (p_i - y_i) φ_i^T, which is the layout a GRIL state holds.

Newton-Raphson (App. C.3, Table 7): W_1 = W_0 - η (H + δ I)^{-1} ∇L(W_0) with H = S / N the Hessian of Eq. 4
(per output column); η = 1, δ = 0 and N >= f noiseless pairs give the exact teacher in one step.

Glossary: B tasks, N context pairs, f input size, n_o target size, d feature size, K classes or logits,
η (eta) step size, l2 the penalty weight, δ (damping).
"""
from __future__ import annotations

import math

import numpy as np

from ..validate import InputError, check_array, check_positive_int
from ..tasks.gril_regression import X_SCALE as _X_SCALE   # a = 1/2, App. B.1
from . import gd as _gd

__all__ = ["loss", "gradient", "gd_step", "gd_predict", "eta_star", "gd_loss", "ce_loss", "ce_gradient",
           "ce_residual", "ce_step", "newton_step", "newton_predict", "KURTOSIS_UNIFORM"]

KURTOSIS_UNIFORM = _gd.KURTOSIS_UNIFORM


def _number(name, value, positive=False, nonnegative=False):
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value)) or (positive and value <= 0) or (nonnegative and value < 0):
        need = " > 0" if positive else " >= 0" if nonnegative else ""
        raise InputError(f"{name} must be a finite number{need}, got {value!r}")
    return float(value)


def _context(X, Y, W=None):
    """Check a task batch; returns (X_ctx (B, N, f), Y_ctx (B, N, n_o), x_q (B, f), N)."""
    check_array("X", X, ndim=3, names=("B", "N+1", "f"))
    B, N1, f = X.shape
    if N1 < 2:
        raise InputError(f"X must hold at least one context pair and the query, N + 1 >= 2, got {N1}")
    N = N1 - 1
    check_array("Y", Y, ndim=3, names=("B", "N", "n_o"))
    if Y.shape[0] != B or Y.shape[1] not in (N, N1):
        raise InputError(f"Y must have shape (B={B}, N={N} or N+1={N1}, n_o), got {Y.shape}")
    if W is not None:
        check_array("W0", W, (B, f, Y.shape[2]), names=("B", "f", "n_o"))
    return X[:, :N], Y[:, :N], X[:, N], N


def _init(W0, B, f, n_o, dtype):
    return np.zeros((B, f, n_o), dtype=dtype) if W0 is None else W0


def loss(X, Y, W, l2=0.0):
    """L(W) = 1/(2N) Σ_{i<=N} ||W^T x_i - y_i||² + l2 ||W||², one value per task.

    Args:
        X: (B, N + 1, f) inputs (the query row is ignored); Y: (B, N + 1, n_o) or (B, N, n_o); W: (B, f, n_o).
    Returns:
        (B,) losses.
    """
    Xc, Yc, _, N = _context(X, Y, W)
    l2 = _number("l2", l2, nonnegative=True)
    err = Xc @ W - Yc                                                  # (B, N, n_o)
    return 0.5 / N * np.sum(err ** 2, axis=(1, 2)) + l2 * np.sum(W ** 2, axis=(1, 2))


def gradient(X, Y, W, l2=0.0):
    """∇L(W) = (1/N) Σ_i x_i (x_i^T W - y_i^T) + 2 l2 W (App. A.2 Eq. 15-16; App. A.5). Returns (B, f, n_o)."""
    Xc, Yc, _, N = _context(X, Y, W)
    l2 = _number("l2", l2, nonnegative=True)
    return Xc.transpose(0, 2, 1) @ (Xc @ W - Yc) / N + 2.0 * l2 * W


def gd_step(X, Y, eta, W0=None, l2=0.0):
    """One GD step W_1 = W_0 - η ∇L(W_0) over the N context pairs.

    Args:
        X: (B, N + 1, f); Y: (B, N + 1, n_o) or (B, N, n_o); eta: step size η; W0: (B, f, n_o) or None for 0;
        l2: penalty weight of App. A.5 (0 for Eq. 15).
    Returns:
        W_1: (B, f, n_o).
    """
    eta = _number("eta", eta)
    _context(X, Y, W0)
    W0 = _init(W0, X.shape[0], X.shape[2], Y.shape[2], np.result_type(X, Y))
    return W0 - eta * gradient(X, Y, W0, l2)


def gd_predict(X, Y, eta, steps=1, W0=None, l2=0.0):
    """ŷ_{N+1} = W_steps^T x_{N+1} after ``steps`` GD steps of size η from W0 (default 0).

    Returns:
        ŷ: (B, n_o).
    """
    steps = check_positive_int("steps", steps)
    _, _, x_q, _ = _context(X, Y, W0)
    W = W0
    for _ in range(steps):
        W = gd_step(X, Y, eta, W, l2)
    return np.einsum("bfo,bf->bo", W, x_q)


def eta_star(N, f, x_scale=_X_SCALE):
    """The optimal one-step size in the 1/N normalisation, η* = N / (σ_x² (N + f - 2 + κ)), σ_x² = a²/3.

    ``minimal.analysis.gd.eta_star`` (sum normalisation) times N; κ = 9/5 for x ~ U(-a, a); a = 1/2 by default
    (App. B.1, ``minimal.tasks.gril_regression.X_SCALE``).
    """
    N, f = check_positive_int("N", N), check_positive_int("f", f)
    a = _number("x_scale", x_scale, positive=True)
    return N * _gd.eta_star(T=N, d_x=f, sigma_x2=a * a / 3.0)


def gd_loss(N, f, x_scale=_X_SCALE, eta=None):
    """Expected query loss 1/2 mean (ŷ - y)² of one GD step from 0 (module docstring); at η* by default.

    At η*: (f a² / 6) (f - 2 + κ) / (N + f - 2 + κ), the zero predictor's f a²/6 times the ratio
    (f - 2 + κ) / (N + f - 2 + κ). ``eta`` (1/N normalisation) gives the parabola at any step size.
    """
    N, f = check_positive_int("N", N), check_positive_int("f", f)
    a = _number("x_scale", x_scale, positive=True)
    eta = eta_star(N, f, a) if eta is None else _number("eta", eta)
    return _gd.gd_loss(eta / N, T=N, d_x=f, sigma_w2=1.0, sigma_x2=a * a / 3.0)


# ------------------------------------------------------------------------------------ cross-entropy
def _ce_check(Phi, Ylab, W):
    check_array("Ylab", Ylab, ndim=3, names=("B", "N", "K"))
    B, N, K = Ylab.shape
    check_array("Phi", Phi, ndim=3, names=("B", "N", "d"))
    if Phi.shape[0] != B or Phi.shape[1] not in (N, N + 1):
        raise InputError(f"Phi must have shape (B={B}, N={N} or N+1={N + 1}, d), got {Phi.shape}")
    check_array("W", W, (B, Phi.shape[2], K), names=("B", "d", "K"))
    if K == 2:
        raise InputError("Ylab must have K = 1 (binary, one sigmoid logit) or K >= 3 (softmax) columns, got 2")
    return Phi[:, :N]


def _probabilities(logits):
    if logits.shape[-1] == 1:                      # binary: σ(z)
        return 0.5 * (1.0 + np.tanh(0.5 * logits))  # = 1/(1 + e^{-z}), without overflow
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ce_residual(Phi, Ylab, W):
    """r_i = p_i - y_i (B, N, K): the error vector of Prop. 4.3, p_i = softmax(W^T φ_i) or σ(W^T φ_i) (K = 1).

    Args:
        Phi: (B, N, d) or (B, N + 1, d) features (a query row is ignored); Ylab: (B, N, K) one-hot labels
        (K >= 3) or labels in {0, 1} (K = 1); W: (B, d, K).
    """
    Phi = _ce_check(Phi, Ylab, W)
    return _probabilities(Phi @ W) - Ylab


def ce_loss(Phi, Ylab, W):
    """Summed cross-entropy Σ_i ℓ(W^T φ_i, y_i) per task (Sec. 4.4; App. A.6, softmax and binary). Returns (B,)."""
    Phi = _ce_check(Phi, Ylab, W)
    z = Phi @ W                                                        # (B, N, K)
    if z.shape[-1] == 1:  # -[y log σ(z) + (1 - y) log(1 - σ(z))] = log(1 + e^z) - y z
        return np.sum(np.logaddexp(0.0, z) - Ylab * z, axis=(1, 2))
    m = z.max(axis=-1, keepdims=True)
    log_p = z - (m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True)))
    return -np.sum(Ylab * log_p, axis=(1, 2))


def ce_gradient(Phi, Ylab, W):
    """∇_W L_CE = Σ_i φ_i (p_i - y_i)^T (Eq. 11 transposed to App. A.6's W (d, K)). Returns (B, d, K)."""
    R = ce_residual(Phi, Ylab, W)
    return Phi[:, :R.shape[1]].transpose(0, 2, 1) @ R


def ce_step(Phi, Ylab, eta, W0=None):
    """One GD step on the summed cross-entropy, W_1 = W_0 - η ∇_W L_CE(W_0) (W0 default 0). Returns (B, d, K)."""
    eta = _number("eta", eta)
    check_array("Phi", Phi, ndim=3, names=("B", "N", "d"))
    check_array("Ylab", Ylab, ndim=3, names=("B", "N", "K"))
    W0 = _init(W0, Phi.shape[0], Phi.shape[2], Ylab.shape[2], np.result_type(Phi, Ylab))
    return W0 - eta * ce_gradient(Phi, Ylab, W0)


# ------------------------------------------------------------------------------------ Newton-Raphson
def newton_step(X, Y, W0=None, damping=0.0, eta=1.0):
    """One (damped) Newton-Raphson step on Eq. 4: W_1 = W_0 - η (H + δ I)^{-1} ∇L(W_0), H = (1/N) Σ_i x_i x_i^T.

    The Hessian of Eq. 4 is H ⊗ I over the n_o output columns, so one (f, f) solve serves them all
    (``np.linalg.solve``; no explicit inverse). δ = 0 needs H invertible, i.e. N >= f inputs in general position.

    Args:
        X: (B, N + 1, f); Y: (B, N + 1, n_o) or (B, N, n_o); W0: (B, f, n_o) or None (0);
        damping: δ >= 0; eta: step size η (1 is the full Newton step).
    Returns:
        W_1: (B, f, n_o).
    """
    Xc, _, _, N = _context(X, Y, W0)
    damping = _number("damping", damping, nonnegative=True)
    eta = _number("eta", eta)
    W0 = _init(W0, X.shape[0], X.shape[2], Y.shape[2], np.result_type(X, Y))
    H = Xc.transpose(0, 2, 1) @ Xc / N + damping * np.eye(X.shape[2])
    return W0 - eta * np.linalg.solve(H, gradient(X, Y, W0))


def newton_predict(X, Y, W0=None, damping=0.0, eta=1.0):
    """ŷ_{N+1} = W_1^T x_{N+1} after one ``newton_step``. Returns (B, n_o)."""
    W1 = newton_step(X, Y, W0, damping, eta)
    return np.einsum("bfo,bf->bo", W1, X[:, -1])
