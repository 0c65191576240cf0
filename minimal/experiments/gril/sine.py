"""GRIL + an MLP on non-linear regression (Tian et al., App. A.4, B.4, Fig. 3B); ``multistep.run_sine`` runs it.

Targets y = sin(W^T x) elementwise ("a sine transformation of the targets", B.4) on the data of App. B.2. One GRIL
block (``model``'s "full" variant: Q, q, β (f,), A) followed by a two-layer MLP (``minimal.layers.mlp``: Linear ->
GELU -> Linear, H hidden units) on its query output:

    ŷ = MLP(o_N)[:n_o],    o_N = β ⊙ (Z_N C_N q)
    "gril"   everything trained;
    "gd"     the block fixed at the one-step construction (Q = e_2 e_1^T, q = e_3, A = 1, β = η*/N), so o_N is the
             linear one-step GD prediction, and only the MLP is trained (B.4: "only the auxiliary non-linear mapping").

The backward composes ``mlp.backward`` and ``model.predict_backward`` in reverse order.

Glossary: B tasks, N context pairs, f token size (= input size), n_o target size, H MLP hidden units, η* the
optimal one-step size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...run import speed
from ...analysis import gril_gd
from ...layers import mlp
from ...tasks import gril_regression
from ...run.train import train
from ...validate import check_choice
from . import model as M
from .stack import W_WIN

__all__ = ["SINE_VARIANTS", "GRIL_KEYS", "MLP_KEYS", "sample_sine", "sine_predict", "sine_predict_backward",
           "SineJob", "fixed_gd_block", "train_sine_job", "run_sine_job"]

SINE_VARIANTS = ("gril", "gd")


def sample_sine(rng, B, N=10, f=10, x_scale=gril_regression.X_SCALE, dtype=np.float64):
    """B tasks of App. B.2 with the targets passed through a sine, y = sin(W^T x) elementwise (App. B.4)."""
    t = gril_regression.sample(rng, B, N, f, x_scale=x_scale, dtype=dtype)
    Y = np.sin(t.Y)
    return gril_regression.Tasks(gril_regression.make_tokens(t.X, Y), t.X, Y, t.W)


GRIL_KEYS = ("Q", "q", "beta", "A")
MLP_KEYS = ("W_1", "b_1", "W_2", "b_2")


def sine_predict(gril_params, mlp_params, tokens, n_out):
    """ŷ = MLP(o_N)[:, :n_out], o_N the GRIL block's output on the last window (``model.predict``)."""
    o, cache_g = M.predict(gril_params, tokens, tokens.shape[2], "full")
    h, cache_m = mlp.forward(mlp_params, o)
    return h[:, :n_out], (cache_g, cache_m, h.shape)


def sine_predict_backward(gril_params, mlp_params, cache, dy_hat):
    """dtokens, GRIL grads {Q, q, beta, A}, MLP grads {W_1, b_1, W_2, b_2}, from dL/dŷ (B, n_out)."""
    cache_g, cache_m, h_shape = cache
    dh = np.zeros(h_shape, dtype=dy_hat.dtype)
    dh[:, :dy_hat.shape[1]] = dy_hat
    do, g_mlp = mlp.backward(mlp_params, cache_m, dh)           # 2. ŷ = MLP(o)
    dtokens, g_gril = M.predict_backward(gril_params, cache_g, do)  # 1. o = GRIL(tokens)
    return dtokens, g_gril, g_mlp


@dataclass(frozen=True)
class SineJob:
    """One training run on the sine tasks (Fig. 3B): variant "gril" (all trained) or "gd" (MLP only)."""
    variant: str = "gril"
    N: int = 10                 # App. B.2 data
    f: int = 10
    hidden: int = 64            # ours: MLP width (the paper's gated unit has no hidden layer; B.4)
    seed: int = 0
    steps: int = 10_000         # ours
    batch: int = 64             # App. B.1-B.2
    lr: float = 1e-2            # ours
    weight_decay: float = 5e-4  # ours
    warmup_steps: int = 500     # ours
    x_scale: float = gril_regression.X_SCALE   # App. B.1-B.2, B.4: x ~ U(-1/2, 1/2), as ``multistep.Job``


def fixed_gd_block(f, N, x_scale):
    """The block at the one-step construction with η* (Prop. 4.1), β (f,) as ``model`` uses it."""
    eta = gril_gd.eta_star(N, f, x_scale)
    Q = np.zeros((W_WIN, W_WIN))
    Q[1, 0] = 1.0
    return {"Q": Q, "q": np.eye(W_WIN)[2], "beta": np.full(f, eta / N), "A": np.ones((f, f))}


def train_sine_job(job: SineJob, progress=False):
    """Train on fresh sine tasks every step; returns (gril_params, mlp_params, losses)."""
    check_choice("variant", job.variant, SINE_VARIANTS)
    speed.tune()
    setup = M.train_setup(job)
    rng = setup.init_rng()
    gril_p = (M.init_params(rng, job.f, "full") if job.variant == "gril"
              else fixed_gd_block(job.f, job.N, job.x_scale))
    params = dict(mlp.init(rng, job.f, job.hidden))
    if job.variant == "gril":
        params.update(gril_p)

    def lg(p, step, batch_rng):
        tasks = sample_sine(batch_rng, job.batch, job.N, job.f, job.x_scale)
        g_p = {k: p[k] for k in GRIL_KEYS} if job.variant == "gril" else gril_p
        m_p = {k: p[k] for k in MLP_KEYS}
        y = tasks.Y[:, -1]
        y_hat, cache = sine_predict(g_p, m_p, tasks.tokens, y.shape[1])
        loss, dy = gril_regression.query_loss(y_hat, y)
        _, g_gril, g_mlp = sine_predict_backward(g_p, m_p, cache, dy)
        return loss, (g_mlp | g_gril) if job.variant == "gril" else g_mlp

    res = train(lg, params, setup=setup, progress=progress, desc=f"sine {job.variant} seed={job.seed}")
    p = res.params
    g_p = {k: p[k] for k in GRIL_KEYS} if job.variant == "gril" else gril_p
    return g_p, {k: p[k] for k in MLP_KEYS}, res.losses


def run_sine_job(job: SineJob, n_eval=10_000, eval_seed=12345):
    """Train on the sine tasks, then the loss on a fixed evaluation set and its ratio to the zero predictor's."""
    g_p, m_p, losses = train_sine_job(job)
    tasks = sample_sine(np.random.default_rng(eval_seed), n_eval, job.N, job.f, job.x_scale)
    y = tasks.Y[:, -1]
    loss = gril_regression.query_loss(sine_predict(g_p, m_p, tasks.tokens, y.shape[1])[0], y)[0]
    return {"loss": loss, "over_zero": loss / gril_regression.query_loss(0 * y, y)[0],
            "train_loss_tail": float(np.mean(losses[-max(1, len(losses) // 20):]))}
