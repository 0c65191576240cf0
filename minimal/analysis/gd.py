"""One step of gradient descent on an in-context regression task, and its optimal step size η* (Zucchet et al.,
App. C.2; von Oswald et al. 2023 for the GD view of linear self-attention).

Setting (``minimal.tasks.icl_regression``): context X (T, d_x), Y = X W*ᵀ (T, d_y), query x_q, W*_jk ~ N(0, σ_w²),
x entries i.i.d. with mean 0, variance σ_x², kurtosis κ = E x⁴ / σ_x⁴ (κ = 9/5 for the uniform law of App. C.1).

One GD step from W_0 = 0 on the in-context loss 1/2 Σ_t ||y_t - W x_t||² gives W_1 = η Σ_t y_t x_tᵀ and

    ŷ = W_1 x_q = η Σ_t y_t x_tᵀ x_q = η W* S x_q,      S = Σ_t x_t x_tᵀ.                                (1)

Derivation of η*. The error is W*(I - ηS) x_q. W*, S and x_q are independent, E W*ᵀW* = d_y σ_w² I and
E x_q x_qᵀ = σ_x² I, so with the loss 1/2 · mean over the d_y outputs of the squared error,

    L(η) = (σ_w² σ_x² / 2) E tr (I - ηS)²  = (σ_w² σ_x² / 2) (d_x - 2η E tr S + η² E tr S²).             (2)

E tr S = T d_x σ_x². For E tr S² = Σ_{s,t} E (x_sᵀ x_t)²: the T(T-1) pairs s ≠ t give E (x_sᵀx_t)² = d_x σ_x⁴,
the T diagonal terms give E ||x||⁴ = d_x(d_x - 1) σ_x⁴ + d_x κ σ_x⁴, so

    E tr S² = T d_x σ_x⁴ (T + d_x - 2 + κ).                                                                (3)

(2) is a parabola in η; its minimum is at

    η* = E tr S / E tr S² = 1 / (σ_x² (T + d_x - 2 + κ))   = 1 / (σ_x² (T + d_x - 1/5))  for κ = 9/5,      (4)

which is App. C.2's formula: η* = 1 / 14.8 = 0.0676 for T = 12, d_x = 3, σ_x² = 1. At η*,

    L(η*) = (σ_w² σ_x² d_x / 2) (d_x - 2 + κ) / (T + d_x - 2 + κ)  = 0.0946 for σ_w² = 1/3,               (5)

against the paper's 0.0947 for one optimal GD step (Sec. 4.2); the zero predictor scores σ_w² σ_x² d_x / 2 = 0.5.
A Gaussian x (κ = 3) gives the familiar η* = 1 / (σ_x² (T + d_x + 1)).

A leaky memory. A gated RNN whose key-value neurons have λ < 1 weights context pair t by w_t = λ^{T+1-t} at the
query (step T + 1): ŷ = c Σ_t w_t y_t x_tᵀ x_q = c W* S_w x_q, S_w = Σ_t w_t x_t x_tᵀ. The same steps as (2)-(3)
with E tr S_w = d_x σ_x² Σ_t w_t and E tr S_w² = d_x σ_x⁴ ((Σ_t w_t)² + (d_x - 2 + κ) Σ_t w_t²) give the best gain

    c*(w) = Σ_t w_t / (σ_x² ((Σ_t w_t)² + (d_x - 2 + κ) Σ_t w_t²)),                                        (6)

which is η* for w = 1 and exceeds it when w decays: the one-token polynomial of such a network (the token's own
weight is λ⁰ = 1) shows c*(w), not η* (``eta_star_weighted``).

Eq. (1) as a gated RNN (``gd_gated_rnn``; the construction of Sec. 2 / Fig. 1 specialised to this task, with the
tokens [x, y, 1] of ``minimal.tasks.icl_regression``):

    key-value neurons  h_jk = Σ_t y_tj x_tk          (input gate (y_j)(x_k), λ = 1)        d_x d_y neurons
    query neurons      h_k  = x_{q,k}                (input gate (x_k)(1),   λ = 0)        d_x neurons
    output gating      o_jk = h_jk · h_k,   readout ŷ_j = η Σ_k o_jk                       d_x d_y gate neurons

The query token's label slot is 0, so it adds nothing to the key-values; d_x (d_y + 1) = 12 recurrent neurons for
d_x = d_y = 3, against the d² + d = 42 of the general construction for tokens of size d = 6.

Glossary: T context pairs (the paper's n), d_x, d_y dimensions, η (eta) step size, κ (kurtosis), S the context's
second-moment matrix.
"""
from __future__ import annotations

import math

import numpy as np

from ..tasks import icl_regression
from ..validate import check_array, check_positive_int

__all__ = ["KURTOSIS_UNIFORM", "eta_star", "eta_star_weighted", "gd_loss", "gd_predict", "gd_loss_empirical", "eta_star_monte_carlo",
           "gd_gated_rnn"]

KURTOSIS_UNIFORM = 9.0 / 5.0   # E x⁴ / σ⁴ for x ~ U(-a, a): (a⁴/5) / (a²/3)²


def _positive(name, value):
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _moments(T, d_x, sigma_x2, kurtosis):
    """(E tr S, E tr S²) of Eq. (3)."""
    T = check_positive_int("T", T)
    d_x = check_positive_int("d_x", d_x)
    sigma_x2 = _positive("sigma_x2", sigma_x2)
    kurtosis = _positive("kurtosis", kurtosis)
    if kurtosis < 1.0:  # E x⁴ >= (E x²)² for every law
        raise ValueError(f"kurtosis must be >= 1, got {kurtosis}")
    return T * d_x * sigma_x2, T * d_x * sigma_x2 ** 2 * (T + d_x - 2.0 + kurtosis)


def eta_star(T=12, d_x=3, sigma_x2=1.0, kurtosis=KURTOSIS_UNIFORM):
    """η* = 1 / (σ_x² (T + d_x - 2 + κ)), Eq. (4); = 1 / (σ_x² (T + d_x - 1/5)) for uniform x (App. C.2)."""
    tr_S, tr_S2 = _moments(T, d_x, sigma_x2, kurtosis)
    return tr_S / tr_S2


def eta_star_weighted(w, d_x=3, sigma_x2=1.0, kurtosis=KURTOSIS_UNIFORM):
    """c*(w) of Eq. (6): the best gain c of ŷ = c Σ_t w_t y_t x_tᵀ x_q for context weights w (T,) >= 0.

    w = ones(T) gives ``eta_star(T, d_x, sigma_x2, kurtosis)``; w_t = λ^{T+1-t} is a key-value memory with
    decay λ read at the query."""
    w = check_array("w", np.asarray(w, dtype=np.float64), ndim=1, names=("T",))
    if w.size == 0 or np.any(w < 0) or not np.any(w > 0):
        raise ValueError(f"w must be a non-empty array of weights >= 0, not all 0, got {w!r}")
    d_x = check_positive_int("d_x", d_x)
    sigma_x2 = _positive("sigma_x2", sigma_x2)
    kurtosis = _positive("kurtosis", kurtosis)
    s1, s2 = float(w.sum()), float(np.sum(w * w))
    return s1 / (sigma_x2 * (s1 * s1 + (d_x - 2.0 + kurtosis) * s2))


def gd_loss(eta, T=12, d_x=3, sigma_w2=1.0 / 3.0, sigma_x2=1.0, kurtosis=KURTOSIS_UNIFORM):
    """Expected query loss of one GD step of size η, Eq. (2)-(3) (1/2 · mean over outputs of squared error)."""
    if isinstance(eta, bool) or not isinstance(eta, (int, float, np.integer, np.floating)) or not math.isfinite(eta):
        raise ValueError(f"eta must be a finite number, got {eta!r}")
    sigma_w2 = _positive("sigma_w2", sigma_w2)
    tr_S, tr_S2 = _moments(T, d_x, sigma_x2, kurtosis)
    return 0.5 * sigma_w2 * sigma_x2 * (d_x - 2.0 * eta * tr_S + eta ** 2 * tr_S2)


def gd_predict(X, Y, x_q, eta):
    """ŷ = η Σ_t y_t x_tᵀ x_q, Eq. (1).

    Args:
        X: (B, T, d_x); Y: (B, T, d_y); x_q: (B, d_x); eta: the step size.
    Returns:
        ŷ: (B, d_y).
    """
    check_array("X", X, ndim=3, names=("B", "T", "d_x"))
    B, T, d_x = X.shape
    check_array("Y", Y, (B, T, None), names=("B", "T", "d_y"))
    check_array("x_q", x_q, (B, d_x), names=("B", "d_x"))
    if isinstance(eta, bool) or not isinstance(eta, (int, float, np.integer, np.floating)) or not math.isfinite(eta):
        raise ValueError(f"eta must be a finite number, got {eta!r}")
    a = np.einsum("btk,bk->bt", X, x_q)            # x_tᵀ x_q, (B, T)
    return eta * np.einsum("btj,bt->bj", Y, a)


def gd_loss_empirical(tasks, eta):
    """Query loss of one GD step of size η on a fixed set of ``icl_regression.Tasks`` (1/2 mean squared error)."""
    if not isinstance(tasks, icl_regression.Tasks):
        raise ValueError(f"tasks must be an icl_regression.Tasks, got {type(tasks).__name__}")
    return icl_regression.query_loss(gd_predict(tasks.X, tasks.Y, tasks.x_q, eta), tasks.y_q)[0]


def eta_star_monte_carlo(rng, n_tasks=100_000, T=12, d_x=3, d_y=3, sigma_w2=1.0 / 3.0, sigma_x2=1.0, chunks=20):
    """Monte Carlo η* and L(η*) from sampled tasks, without Eq. (3).

    For each task let e = y_q and g = W* S x_q (= Σ_t y_t x_tᵀ x_q); then L(η) = 1/2 E ||e - η g||² / d_y is a
    parabola with minimum at η̂ = E<e, g> / E||g||². The tasks are split into ``chunks`` equal parts to give a
    standard error of η̂.

    Returns:
        (eta_hat, eta_stderr, loss_at_eta_hat) as floats.
    """
    n_tasks = check_positive_int("n_tasks", n_tasks)
    chunks = check_positive_int("chunks", chunks, minimum=2)
    if n_tasks < chunks:
        raise ValueError(f"n_tasks must be >= chunks = {chunks}, got {n_tasks}")
    tasks = icl_regression.sample(rng, n_tasks, T, d_x, d_y, sigma_w2, sigma_x2)
    e = tasks.y_q
    g = gd_predict(tasks.X, tasks.Y, tasks.x_q, 1.0)
    eg, gg = np.sum(e * g, axis=1), np.sum(g * g, axis=1)
    eta_hat = float(eg.mean() / gg.mean())
    m = n_tasks // chunks
    per_chunk = eg[:m * chunks].reshape(chunks, m).mean(1) / gg[:m * chunks].reshape(chunks, m).mean(1)
    stderr = float(per_chunk.std(ddof=1) / math.sqrt(chunks))
    loss = float(0.5 * np.mean(np.sum((e - eta_hat * g) ** 2, axis=1)) / d_y)
    return eta_hat, stderr, loss


def gd_gated_rnn(eta, d_x=3, d_y=3):
    """Weights of ``minimal.cells.gated_rnn`` that compute one GD step, Eq. (1) (module docstring).

    Args:
        eta: step size η. d_x, d_y: task dimensions; tokens are [x, y, 1] of size d_x + d_y + 1.
    Returns:
        (params, lam): gated-RNN params (H = d_x (d_y + 1), H_out = d_x d_y, D_out = d_y; ``nu`` unused) and the
        (H,) λ to pass as ``forward(params, tokens, lam=lam)``: 1 for key-value neurons, 0 for query neurons.
        The output at the query token equals ``gd_predict``.
    """
    if isinstance(eta, bool) or not isinstance(eta, (int, float, np.integer, np.floating)) or not math.isfinite(eta):
        raise ValueError(f"eta must be a finite number, got {eta!r}")
    d_x = check_positive_int("d_x", d_x)
    d_y = check_positive_int("d_y", d_y)
    D_in, n_kv = d_x + d_y + 1, d_x * d_y
    H = n_kv + d_x
    W_in_m, W_in_x = np.zeros((H, D_in)), np.zeros((H, D_in))
    W_out_m, W_out_x = np.zeros((n_kv, H)), np.zeros((n_kv, H))
    D = np.zeros((d_y, n_kv))
    for j in range(d_y):
        for k in range(d_x):
            n = j * d_x + k                      # key-value neuron (j, k), also gate neuron (j, k)
            W_in_m[n, d_x + j] = 1.0             # y_j
            W_in_x[n, k] = 1.0                   # x_k
            W_out_m[n, n] = 1.0                  # h_jk
            W_out_x[n, n_kv + k] = 1.0           # h_k, the query's x_k
            D[j, n] = eta
    for k in range(d_x):
        W_in_m[n_kv + k, k] = 1.0                # x_k
        W_in_x[n_kv + k, D_in - 1] = 1.0         # the constant 1
    lam = np.concatenate([np.ones(n_kv), np.zeros(d_x)])
    params = {"W_in_m": W_in_m, "W_in_x": W_in_x, "nu": np.zeros(H), "W_out_m": W_out_m, "W_out_x": W_out_x,
              "D": D}
    return params, lam
