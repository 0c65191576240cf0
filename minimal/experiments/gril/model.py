"""The one-layer in-context learner of Tian et al. (Sec. 5.1-5.2, App. B.1-B.2, App. C) and its ablations.

One GRIL block (``minimal.cells.gril``, Def. 4.2) reads the interleaved tokens of ``minimal.tasks.gril_regression``
and its output on the last window is the prediction of the query target:

    full          windows C_j = [x_j, y_j, x_{j+1}] (w = 3, s = 2);  ŷ = β ⊙ (Z_N C_N q)           the paper's GRIL
    no_window     one token per step (w = 1, s = 1);                  ŷ = β ⊙ (Z_T q s_T)          "sliding window off"
    no_readout    windows as in full;                                 ŷ = β ⊙ (Z_N u)              "multiplicative output off"
    neither       one token per step;                                 ŷ = β ⊙ (Z_T u)

with Z_k = A ⊙ Z_{k-1} + C_k Q C_k^T in every variant and u (f,) a learned vector that does not depend on the
input (the state is read out on its own, not multiplied by the current window: the cell's readout="state", u in the
params instead of q). Every variant is one ``gril.forward`` / ``gril.backward`` (``minimal.cells.gril``) with the
window of ``window_of`` and the readout of ``readout_of``, of which the last window's output is kept; the prediction
ŷ is its first n_o entries (targets sit in the first n_o slots of a token). Learned: Q (w, w), q (w,) or u (f,),
β (f,) and A (f, f), the quantities Fig. 2E-G compares with the construction (input gating Q, recurrence A, output
skip q).

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

import numpy as np

from ...run import speed
from ...analysis import gril_gd
from ...cells import gril
from ...tasks import gril_regression
from ...run.train import TrainSetup, train

__all__ = ["VARIANTS", "window_of", "readout_of", "init_params", "predict", "predict_backward", "loss_and_grads", "Job",
           "eval_tasks", "train_job", "run_job"]

VARIANTS = ("full", "no_window", "no_readout", "neither")
CELL = {"method": "sequential", "backend": "numpy"}   # T' = N windows: a Python loop of 10 steps is fastest here


def window_of(variant):
    """(w, s) of a variant: the paper's window (3, 2) or one token per step (1, 1)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return (gril_regression.N_WINDOW, gril_regression.STRIDE) if variant in ("full", "no_readout") else (1, 1)


def readout_of(variant):
    """The cell's readout of a variant: the paper's "window" (β ⊙ Z_k C_k q) or "state" (β ⊙ Z_k u)."""
    window_of(variant)  # checks the name
    return "state" if variant in ("no_readout", "neither") else "window"


def init_params(rng, f, variant="full", beta_scale=0.1):
    """GRIL's ``init`` (per-feature β) for the variant's window and readout (u ~ N(0, 1/f) (f,) in place of q without
    the multiplicative readout), β scaled by ``beta_scale`` (ours: a smaller first output)."""
    w, _ = window_of(variant)
    p = gril.init(rng, f, w, per_feature_beta=True, readout=readout_of(variant))
    p["beta"] = p["beta"] * beta_scale
    return p


# ------------------------------------------------------------------------------ the predictor
def predict(params, tokens, n_out, variant="full"):
    """ŷ (B, n_out) for the query, and the cache for ``predict_backward``."""
    _, s = window_of(variant)
    o, cache = gril.forward(params, tokens, s=s, readout=readout_of(variant), **CELL)   # (B, T', f)
    return o[:, -1, :n_out], cache


def predict_backward(params, cache, dy_hat):
    """dtokens (B, T, f) and the params' gradients, from dL/dŷ (B, n_out) (the cache knows the variant's readout)."""
    B, n_out = dy_hat.shape
    do = np.zeros((B, cache.Z.shape[1], params["A"].shape[0]), dtype=dy_hat.dtype)   # (B, T', f)
    do[:, -1, :n_out] = dy_hat              # only the query's output enters the loss
    return gril.backward(params, cache, do)


def loss_and_grads(params, tasks, variant="full"):
    """The query loss 1/2 mean (ŷ - y_{N+1})² on ``tasks`` and its gradients."""
    y = tasks.Y[:, -1]
    y_hat, cache = predict(params, tasks.tokens, y.shape[1], variant)
    loss, dy = gril_regression.query_loss(y_hat, y)
    _, grads = predict_backward(params, cache, dy)
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
