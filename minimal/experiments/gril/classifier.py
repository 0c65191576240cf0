"""The in-context classifier of Tian et al. (Sec. 4.4, App. A.6, B.5): a learned feature map φ, then one GRIL block,
and its reference, one cross-entropy GD step; ``classification`` trains and compares them.

The model ("GRIL"). A learned feature map φ(x) = x + MLP(x), the MLP Linear -> GELU -> Linear of
``minimal.layers.mlp`` (f -> H -> f) with a skip connection, is applied to the x tokens only; the label tokens
pass through unchanged (as the task builds them: y in {0, 1}, or one-hot), since φ is a feature map of inputs
(App. B.5: "an MLP to map the raw input x to a nonlinear feature representation φ(x)") and the construction needs
the labels themselves in the window. The skip is ours: the plain MLP from its fan-in initialisation shrinks the
features about 6x (std 0.049 against x's 0.288 at U(-1/2, 1/2): ``python -c "import numpy as np; from
minimal.layers import mlp; r = np.random.default_rng(0); x = r.uniform(-0.5, 0.5, (10000, 10)); print(mlp.forward(
mlp.init(r, 10, 32), x)[0].std(), x.std())"``) and the model's logits are cubic in them, so it starts with
near-constant logits; with the skip it starts as the identity-φ model. Then
one GRIL block (``minimal.cells.gril``, w = 3, s = 2, per-feature β) reads the windows [φ(x_t), y_t, φ(x_{t+1})]
and the first K entries of its last output are the query logits z; the loss is the mean query cross-entropy
(binary: BCE on the one logit, -[y log σ(z) + (1 - y) log(1 - σ(z))]; K-class: softmax CE). The same model
without φ (identity feature map, "nophi") is trained beside it. ``forward`` / ``backward`` compose
``mlp.backward`` and ``gril.backward`` by hand.

The reference ("GD"): one step on the summed CE of the N context pairs from W = 0 (``gril_gd.ce_step``),
W_1 = -η Σ_i φ_i (p_i(0) - y_i)^T with p_i(0) = σ(0) = 1/2 (binary) or 1/K (softmax), query logits
z_GD = W_1^T φ_{N+1}. No closed form for the best η exists (the CE is not quadratic), so η is found by a golden
section search in log η on a separate tuning set of 10^4 tasks (z_GD is linear in η, so the loss is convex in η
and unimodal in log η). The comparisons (loss ratio, prediction difference, sensitivity cosine, rescaling) use
GD on the raw x (φ = identity), the paper's "single-step GD"; GD on the trained model's learned φ is reported
beside it (``*_loss_gd_phi``), with its own tuned η.

What the construction computes (Prop. 4.3 with labels, not residuals, in the window). With Q = e_2 e_1^T,
q = e_3, A = 1 and β = η on the raw task tokens, U_t = y_t x_t^T and the query logits are

    z_GRIL = η Σ_i y_i x_i^T x_{N+1}                      (the state holds Σ y x^T; K rows read)

while one CE step from W = 0 gives

    z_GD   = η Σ_i (y_i - p(0)) x_i^T x_{N+1} = z_GRIL - η p(0) Σ_i x_i^T x_{N+1}.

    softmax: p(0) = 1/K in every entry, so the difference adds the same number, -(η/K) Σ_i x_i^T x_{N+1}, to
             every logit of a task: softmax(z_GRIL) = softmax(z_GD) exactly. The construction IS one CE step.
    binary:  σ is not shift-invariant, so the construction is one CE step only after the label is centred:
             z_GD = z_GRIL - (η/2) Σ_i x_i^T x_{N+1}. The -1/2 term needs the window to carry y_i - 1/2 (= -r_i(0),
             Prop. 4.3's residual at W = 0; ``gd_as_gril.ce_accumulate`` with β = -η and r_i = 1/2 - y_i),
             or a constant slot in the tokens. On raw {0, 1} tokens no GRIL weights can produce it: every term of
             o[0] = β_0 Σ_b Z[0, b] (C q)[b] carries a factor C_k[0, j] from slot 0 of the window (x_t[0], y_t or
             x_{t+1}[0]), while Σ_i x_i^T x_{N+1} has terms like x_i[1] x_{N+1}[1] with none. A learned φ with a
             bias can supply (approximately) a constant slot: φ(x)[0] ≈ c and Q[0, 0] = -1/(2c) add -(1/2) φ_i^T
             to row 0 of U, at the price of x[0] and a bias-like c² term; the identity-φ model cannot.
    Both are asserted in the tests; ``run`` reports the max deviations and the raw-token construction's loss.

Glossary: B tasks, N context pairs, f token size (= input size), K logits (1 binary, 3 softmax), H φ's hidden
width, T = 2N + 1 tokens, T' = N windows, η (eta) the GD step size.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...analysis import gril_gd
from ...cells import gril
from ...layers import cross_entropy, mlp
from ...tasks import gril_regression
from . import model as M

__all__ = ["GRIL_KEYS", "PHI_KEYS", "init_params", "forward", "backward", "probabilities", "query_ce",
           "loss_and_grads", "phi_features", "gd_logits", "tune_eta", "construction_logits"]

GRIL_KEYS = ("Q", "q", "beta", "A")
PHI_KEYS = ("W_1", "b_1", "W_2", "b_2")


# ------------------------------------------------------------------------------------------ the model
def init_params(rng, f, phi=True, hidden=32):
    """GRIL's params as in ``model.init_params`` (w = 3, per-feature β scaled by 0.1), plus φ's MLP (f -> hidden
    -> f, ``mlp.init``) when ``phi``. One flat dict: {Q, q, beta, A} and, with φ, {W_1, b_1, W_2, b_2}."""
    p = M.init_params(rng, f, "full")
    if phi:
        p.update(mlp.init(rng, f, hidden, f))
    return p


def _parts(params):
    g = {k: params[k] for k in GRIL_KEYS}
    return g, ({k: params[k] for k in PHI_KEYS} if "W_1" in params else None)


class Cache(NamedTuple):
    phi: object    # mlp's cache, None for the identity feature map
    gril: object   # gril's cache


def forward(params, tokens, K):
    """Query logits z (B, K) of φ -> GRIL, and the cache.

    Args:
        params: {Q, q, beta, A} and, for a learned φ, {W_1, b_1, W_2, b_2} (no φ keys: identity feature map).
        tokens: (B, 2N + 1, f), x tokens at even positions (φ applies to them), label tokens at odd ones
            (passed through unchanged).
        K: logits read from the first K entries of the last window's output.
    """
    gp, pp = _parts(params)
    t = tokens.copy()
    cache_phi = None
    if pp is not None:
        h, cache_phi = mlp.forward(pp, tokens[:, 0::2])   # (B, N + 1, f)
        t[:, 0::2] += h                                    # φ(x) = x + MLP(x)
    o, cache_gril = gril.forward(gp, t, s=gril_regression.STRIDE, **M.CELL)
    return o[:, -1, :K], Cache(cache_phi, cache_gril)


def backward(params, cache, dz):
    """dL/dtokens (B, 2N + 1, f) and the params' gradients from dL/dz (B, K)."""
    gp, pp = _parts(params)
    B, K = dz.shape
    T_out, f = cache.gril.Z.shape[1], gp["A"].shape[0]
    # 2. z = o[:, -1, :K], o = GRIL(tokens with φ(x) in place of x): only the query's output enters the loss
    do = np.zeros((B, T_out, f), dtype=dz.dtype)
    do[:, -1, :K] = dz
    dt, grads = gril.backward(gp, cache.gril, do)
    # 1. φ on the x tokens; the label tokens' gradient is GRIL's as it is
    if pp is not None:
        dx = dt[:, 0::2]
        dh, g_phi = mlp.backward(pp, cache.phi, dx)
        dt[:, 0::2] = dx + dh                          # φ(x) = x + MLP(x): the skip and the MLP
        grads.update(g_phi)
    return dt, grads


def probabilities(z):
    """σ(z) (B, 1) for one logit, softmax(z) (B, K) otherwise."""
    if z.shape[-1] == 1:
        return 0.5 * (1.0 + np.tanh(0.5 * z))   # σ without overflow
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def query_ce(z, labels):
    """Mean query cross-entropy and dL/dz.

    Args:
        z: (B, K) logits; labels: (B,) integers, in {0, 1} for K = 1, in [0, K) otherwise.
    Returns:
        (loss float, dz (B, K)). K = 1: mean log(1 + e^z) - y z (BCE); K >= 3: ``layers.cross_entropy``.
    """
    if z.shape[1] == 1:
        y = labels.astype(z.dtype)[:, None]
        return float(np.mean(np.logaddexp(0.0, z) - y * z)), (probabilities(z) - y) / len(z)
    L, cache = cross_entropy.forward({}, z, labels)
    return float(L), cross_entropy.backward({}, cache, np.array(1.0))[0]


def loss_and_grads(params, tasks):
    """Query CE of the model on ``tasks`` (``sample_classification``) and its gradients."""
    K = tasks.Y.shape[2]
    z, cache = forward(params, tasks.tokens, K)
    loss, dz = query_ce(z, tasks.labels[:, -1])
    return loss, backward(params, cache, dz)[1]


# ------------------------------------------------------------------------------------------ GD and the construction
def phi_features(params, X):
    """φ(X) (B, N + 1, f) with the model's φ; X itself when it has none."""
    _, pp = _parts(params)
    return X if pp is None else X + mlp.forward(pp, X)[0]


def gd_logits(Phi, Ylab, eta):
    """Query logits after one CE step from W = 0 on the context: (W_1^T φ_{N+1} (B, K), W_1 (B, d, K)).

    Args:
        Phi: (B, N + 1, d) features, the last row the query's; Ylab: (B, N + 1, K) or (B, N, K) labels.
    """
    N = Phi.shape[1] - 1
    W1 = gril_gd.ce_step(Phi[:, :N], Ylab[:, :N], eta)
    return np.einsum("bdk,bd->bk", W1, Phi[:, N]), W1


def tune_eta(Phi, Ylab, labels, lo=1e-3, hi=1e3, iters=60):
    """The η minimising the query CE of ``gd_logits``: golden section search in log η on [lo, hi].

    z_GD(η) = η z_GD(1), so the loss is convex in η and unimodal in log η. Returns (η, loss).
    """
    z1 = gd_logits(Phi, Ylab, 1.0)[0]

    def loss(log_eta):
        return query_ce(math.exp(log_eta) * z1, labels)[0]

    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = math.log(lo), math.log(hi)
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = loss(c), loss(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = loss(d)
    x = 0.5 * (a + b)
    return math.exp(x), loss(x)


def construction_logits(tokens, K, eta):
    """The GRIL block with Q = e_2 e_1^T, q = e_3, A = 1, β = η on ``tokens``: η Σ_i y_i x_i^T x_{N+1} (B, K)."""
    f = tokens.shape[2]
    Q = np.zeros((3, 3))
    Q[1, 0] = 1.0
    params = {"Q": Q, "q": np.array([0.0, 0.0, 1.0]), "beta": np.array([eta]), "A": np.ones((f, f))}
    o, _ = gril.forward(params, tokens, s=gril_regression.STRIDE, **M.CELL)
    return o[:, -1, :K]
