"""The one-layer in-context learner of Tian et al. (Sec. 5.1-5.2, App. B.1-B.2, App. C) and its ablations.

One GRIL block (``minimal.cells.gril``, Def. 4.2) reads the interleaved tokens of ``minimal.tasks.gril_regression``
and its output on the last window is the prediction of the query target:

    full          windows C_j = [x_j, y_j, x_{j+1}] (w = 3, s = 2);  ŷ = β ⊙ (Z_N C_N q)           the paper's GRIL
    no_window     one token per step (w = 1, s = 1);                  ŷ = β ⊙ (Z_T q s_T)          "sliding window off"
    no_readout    windows as in full;                                 ŷ = β ⊙ (Z_N u)              "multiplicative output off"
    neither       one token per step;                                 ŷ = β ⊙ (Z_T u)

with Z_k = A ⊙ Z_{k-1} + C_k Q C_k^T in every variant and u (f,) a learned vector that does not depend on the
input (the state is read out on its own, not multiplied by the current window). The prediction ŷ is the first n_o
entries of that output (targets sit in the first n_o slots of a token). Learned: Q (w, w), q (w,) or u (f,), β (f,)
and A (f, f), the quantities Fig. 2E-G compares with the construction (input gating Q, recurrence A, output skip q).

Why the ablations should fail. With y = W^T x and W ~ N(0, I), the query target is odd in W, while without the
window the state never holds a product y_i x_i^T (only x x^T and y y^T, even in W), and without the multiplicative
readout the output is a fixed linear map of a state that does not contain x_{N+1}; either way the best predictor
is uncorrelated with the target and the loss sits at the zero predictor's, 1/2 E y² = f a² / 6 per entry, about
twice one optimal GD step (Tables 5-6: 0.426 / 0.414 against 0.209 / 0.206; f a²/6 = 0.417 at a = 1/2).

Glossary: B tasks, N context examples, f token size, n_o target size, T = 2N + 1 tokens, T' windows.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...run import speed
from ...analysis import gril_gd
from ...cells import gril
from ...tasks import gril_regression
from ...run.train import TrainSetup, train

__all__ = ["VARIANTS", "window_of", "init_params", "predict", "predict_backward", "loss_and_grads",
           "state_readout_forward", "state_readout_backward", "head_forward", "head_backward", "Job", "eval_tasks", "train_job", "run_job"]

VARIANTS = ("full", "no_window", "no_readout", "neither")
CELL = {"method": "sequential", "backend": "numpy"}   # T' = N windows: a Python loop of 10 steps is fastest here


def window_of(variant):
    """(w, s) of a variant: the paper's window (3, 2) or one token per step (1, 1)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return (gril_regression.N_WINDOW, gril_regression.STRIDE) if variant in ("full", "no_readout") else (1, 1)


def init_params(rng, f, variant="full", beta_scale=0.1):
    """GRIL's ``init`` (per-feature β) for the variant's window, β scaled by ``beta_scale`` (ours: a smaller
    first output); variants without the multiplicative readout get u ~ N(0, 1/f) (f,) in place of q."""
    w, _ = window_of(variant)
    p = gril.init(rng, f, w, per_feature_beta=True)
    p["beta"] = p["beta"] * beta_scale
    if variant in ("no_readout", "neither"):
        del p["q"]
        p["u"] = rng.standard_normal(f) / np.sqrt(f)
    return p


# ------------------------------------------------------------- the state read out on its own (ablation)
class StateCache(NamedTuple):
    T: int
    w: int
    s: int
    C: np.ndarray   # (B, T', f, w)
    Z: np.ndarray   # (B, T', f, f) states after each window


def head_forward(Q, A, C):
    """One head's states Z_k = A ⊙ Z_{k-1} + C_k Q C_k^T, Z_{-1} = 0, after every window.

    Args:
        Q: (w, w); A: (f, f); C: (B, T', f, w) windows (``gril.window``).
    Returns:
        Z: (B, T', f, f); Z[:, -1] is the state the readout uses.
    """
    U = C @ Q @ C.transpose(0, 1, 3, 2)          # (B, T', f, f)
    Z = np.empty_like(U)
    Z_k = np.zeros_like(U[:, 0])
    for k in range(U.shape[1]):
        Z_k = A * Z_k + U[:, k]
        Z[:, k] = Z_k
    return Z


def head_backward(Q, A, C, Z, G):
    """Adjoint of ``head_forward`` when only the last state enters the loss.

    Args:
        Q, A, C, Z: as in and from ``head_forward``; G: (B, f, f) dL/dZ[:, -1].
    Returns:
        dQ (w, w), dA (f, f), dC (B, T', f, w).
    """
    # 2. Z_k = A ⊙ Z_{k-1} + U_k, backwards in time: G is dL/dZ_k, then A ⊙ G for Z_{k-1}
    dU = np.empty_like(Z)
    dA = np.zeros_like(A)
    for k in reversed(range(Z.shape[1])):
        dU[:, k] = G
        if k > 0:
            dA += (G * Z[:, k - 1]).sum(axis=0)
            G = A * G
    # 1. U = C Q C^T
    dU_C = dU @ C                                            # (B, T', f, w), used twice
    dQ = (C.transpose(0, 1, 3, 2) @ dU_C).sum(axis=(0, 1))
    dC = dU_C @ Q.T + dU.transpose(0, 1, 3, 2) @ C @ Q
    return dQ, dA, dC



def state_readout_forward(params, x, w, s):
    """o = β ⊙ (Z_{T'} u) on the last state, Z_k = A ⊙ Z_{k-1} + C_k Q C_k^T (no readout window).

    Args:
        params: Q (w, w), u (f,), beta (f,), A (f, f). x: (B, T, f). w, s: window width and stride.
    Returns:
        o: (B, f) and the cache.
    """
    C = gril.window(x, w, s)
    Z = head_forward(params["Q"], params["A"], C)
    o = params["beta"] * (Z[:, -1] @ params["u"])
    return o, StateCache(x.shape[1], w, s, C, Z)


def state_readout_backward(params, cache, do):
    """Gradients of ``state_readout_forward``: dx (B, T, f) and {Q, u, beta, A}."""
    u, beta = params["u"], params["beta"]
    Z_last = cache.Z[:, -1]
    # 2. o = β ⊙ (Z_last u)
    dbeta = (do * (Z_last @ u)).sum(axis=0)
    dm = beta * do                                   # (B, f)
    du = np.einsum("bij,bi->j", Z_last, dm)
    # 1. the head, from dL/dZ_last
    dQ, dA, dC = head_backward(params["Q"], params["A"], cache.C, cache.Z, dm[:, :, None] * u[None, None, :])
    dx = gril.window_backward(dC, cache.T, cache.w, cache.s)
    return dx, {"Q": dQ, "u": du, "beta": dbeta, "A": dA}


# ------------------------------------------------------------------------------ the predictor
def predict(params, tokens, n_out, variant="full"):
    """ŷ (B, n_out) for the query, and the cache for ``predict_backward``."""
    w, s = window_of(variant)
    if variant in ("no_readout", "neither"):
        o, cache = state_readout_forward(params, tokens, w, s)
    else:
        o_all, cache = gril.forward(params, tokens, s=s, **CELL)
        o = o_all[:, -1]
    return o[:, :n_out], cache


def predict_backward(params, cache, dy_hat, variant="full"):
    """dtokens (B, T, f) and the params' gradients, from dL/dŷ (B, n_out)."""
    B, n_out = dy_hat.shape
    f = params["A"].shape[0]
    do = np.zeros((B, f), dtype=dy_hat.dtype)
    do[:, :n_out] = dy_hat
    if variant in ("no_readout", "neither"):
        return state_readout_backward(params, cache, do)
    T_out = cache.Z.shape[1]
    do_all = np.zeros((B, T_out, f), dtype=dy_hat.dtype)
    do_all[:, -1] = do                      # only the query's output enters the loss
    return gril.backward(params, cache, do_all)


def loss_and_grads(params, tasks, variant="full"):
    """The query loss 1/2 mean (ŷ - y_{N+1})² on ``tasks`` and its gradients."""
    y = tasks.Y[:, -1]
    y_hat, cache = predict(params, tasks.tokens, y.shape[1], variant)
    loss, dy = gril_regression.query_loss(y_hat, y)
    _, grads = predict_backward(params, cache, dy, variant)
    return loss, grads


# ------------------------------------------------------------------------------ one training run
@dataclass(frozen=True)
class Job:
    """One training run: the task, the variant, and the optimiser (defaults: ours, see each experiment's Config)."""
    variant: str = "full"
    N: int = 10                 # App. B.1: context length 10
    f: int = 10                 # App. B.1: feature size 10
    n_out: int = 10             # App. B.2: n_o = f (multivariate); 1 for the scalar task of App. B.1
    seed: int = 0
    steps: int = 20_000         # ours (paper: up to 300,000 at lr 1e-4, App. B.1)
    batch: int = 64             # App. B.1-B.2: 64 tasks per step
    lr: float = 1e-2            # ours (paper 1e-4 / 2e-4): minutes, not hours, on one core
    weight_decay: float = 5e-4  # ours: lr * wd = 5e-6 per step, the paper's 1e-4 * 0.05 (App. B.1)
    warmup_steps: int = 500     # ours (the paper warms up linearly, length not given)
    n_eval: int = 10_000        # App. B.1: 10^4 evaluation tasks
    eval_seed: int = 12345      # the evaluation set, shared by every model and by GD
    x_scale: float = gril_regression.X_SCALE   # App. B.1: x ~ U(-1/2, 1/2)


def eval_tasks(job, x_scale=None):
    """The job's fixed evaluation set (float64), optionally with inputs drawn at another scale."""
    return gril_regression.sample(np.random.default_rng(job.eval_seed), job.n_eval, job.N, job.f, n_out=job.n_out,
                                  x_scale=job.x_scale if x_scale is None else x_scale)


def train_setup(job, clip=None) -> TrainSetup:
    """GRIL's training set-up, for every GRIL Job (this module's, ``classification``, ``multistep``, ``sine``,
    ``comparison``): a warm-up of ``warmup_steps`` but at most a tenth of the steps, cosine from ``lr`` to
    ``lr · 1e-3``, constant weight decay, the job's seed."""
    return TrainSetup(lr=job.lr, steps=job.steps, warmup=min(job.warmup_steps, job.steps // 10),
                      final_lr=job.lr * 1e-3, weight_decay=job.weight_decay, clip=clip, seed=job.seed)


def train_job(job: Job, progress=False, checkpoint_path=None):
    """Train one model; returns (params, losses). Tasks are fresh every step, float64 throughout."""
    speed.tune()
    setup = train_setup(job)
    params = init_params(setup.init_rng(), job.f, job.variant)

    def lg(p, step, batch_rng):
        tasks = gril_regression.sample(batch_rng, job.batch, job.N, job.f, n_out=job.n_out, x_scale=job.x_scale)
        return loss_and_grads(p, tasks, job.variant)

    res = train(lg, params, setup=setup, progress=progress, checkpoint_path=checkpoint_path, checkpoint_every=2000,
                config=dataclasses.asdict(job),
                desc=f"GRIL {job.variant} n_o={job.n_out} seed={job.seed}")
    return res.params, res.losses


def run_job(job: Job):
    """Train, then evaluate on the job's fixed set: the model's loss, one optimal GD step's, the zero
    predictor's, and their ratios (a JSON-ready dict, for ``minimal.run.sweep``)."""
    params, losses = train_job(job)
    tasks = eval_tasks(job)
    y = tasks.Y[:, -1]
    y_hat, _ = predict(params, tasks.tokens, y.shape[1], job.variant)
    eta = gril_gd.eta_star(job.N, job.f, job.x_scale)
    loss = gril_regression.query_loss(y_hat, y)[0]
    loss_gd = gril_regression.query_loss(gril_gd.gd_predict(tasks.X, tasks.Y, eta), y)[0]
    loss_zero = gril_regression.query_loss(np.zeros_like(y), y)[0]
    tail = losses[-max(1, len(losses) // 20):]
    return {"loss": loss, "loss_gd": loss_gd, "loss_zero": loss_zero, "over_gd": loss / loss_gd,
            "over_zero": loss / loss_zero, "train_loss_tail": float(np.mean(tail))}
