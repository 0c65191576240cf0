"""Beyond one step (Tian et al., Sec. 4.3, App. A.3-A.4, B.4, Fig. 3A-B, Fig. 5): a trained L-layer GRIL against
multi-step GD, and GRIL + an MLP on non-linear regression.

Fig. 3A trains ``stack``'s L-layer model: every layer reads the original windows [x_k, y_k, x_{k+1}] with two GRIL
heads (Z accumulating like Σ y x^T, Z̃ like S = Σ x x^T) and applies one step to the previous layer's predictor,
W_l = W_{l-1} - c_l (Z̃ W_{l-1} - Z^T), W_0 = 0, with a learned step c_l; at the construction point (App. A.3) it
is L GD steps of size η = N c_l. Fig. 3B trains ``sine``'s GRIL block + MLP on y = sin(W^T x), in two variants:
"gril" (everything trained) and "gd" (the block frozen at the one-step construction, only the MLP trained).

Metrics (losses are 1/2 mean (ŷ - y)² over tasks and outputs, x ~ U(-a, a)^f; the zero predictor scores f a²/6 =
0.417 on the linear tasks at the paper's a = 1/2). Fig. 3A on one fixed set of 10^4 tasks (App. B.1): the trained
L-layer model; L GD steps with the best fixed η for L steps (``best_eta``, an exact 1-D search on a separate set
of 10^4 tasks: 5.97 for two steps against the one-step η* = 6.06, a small difference, L(6.06) exceeds L(5.97) by
0.05%); L GD steps with the best separate step size per step (``best_step_sizes``: 11.53 and 3.99 for two steps,
9.8% lower loss than one fixed η), the reference that fits a model whose layers learn their own c_l; one GD step
at η*; and the trained one-layer model (this module's L = 1: the GRIL block of Def. 4.2 with a scalar β = c_1).
Fig. 3B: both variants, the linear one-step GD prediction (at η* and at the best η for one step on the sine tasks,
searched as above) and the zero predictor, on a fixed set. Fig. 5: the trained heads in the construction's
coordinates (``stack.gauge_fixed``).

``PAPER``: the paper prints no number for Fig. 3A-B, only curves, so we encode the claims we test: the trained
two-layer model matches two GD steps (ratio 1), beats one GD step and the trained one-layer model; on the sine
tasks GD + MLP beats the linear GD prediction it is fed (η*), and the fully trained GRIL does at least as well as
GD + MLP (ratio <= 1; the reproduce table lists our ratio next to the claimed 1). Flags are booleans. The
one-step rows of Fig. 3A are Table 7's tasks (N = f = n_o = 10, U(-1/2, 1/2)), so their absolute losses are put
beside Table 7's: one GD step 0.207, trained GRIL 0.206, and the zero predictor 0.414 (Table 6's ablated models);
a verdict "matches" needs our number rounded to the paper's printed digits, "close" within 5% (``TOLERANCE``).

What the full run finds (``python -m minimal reproduce gril --full --only multistep``, committed in
``data/gril/multistep_full.json``: 10,000 steps per model, 751 s; evaluation set of 10^4 tasks, x ~ U(-1/2, 1/2)):
    - Fig. 3A: trained two-layer 0.1404, two GD steps at the best fixed η (5.97) 0.1556, two GD steps with the
      best η per step (11.53, 3.99) 0.1403, one GD step 0.2039 (Table 7: 0.207, close), trained one-layer 0.2039
      (Table 7's GRIL: 0.206, close), zero predictor 0.4171 (0.414, close). The two-layer model beats fixed-η GD
      (ratio 0.903) because its layers learn their own steps: it matches GD with free step sizes (ratio 1.001);
      against one GD step it is 0.689. Its heads sit in the construction's coordinates (Fig. 5): layer 1 a Z head
      ≈ e_2 e_1^T with step 14.3, layer 2 a Z̃ head ≈ e_1 e_1^T with step 3.39 and a Z head with step 1.45; the
      prediction polynomial (14.35 + 1.45)/N u - (14.35 · 3.39)/N² v is the free-step GD one, (11.53 + 3.99)/N u
      - (11.53 · 3.99)/N² v, to within 2% (u) and 6% (v) (u = x_q^T X^T Y, v = x_q^T S X^T Y, per output).
    - Fig. 3B: GD + MLP 0.1087 and GRIL + MLP 0.1099, against the linear GD prediction at η* 0.1099, at the best
      η for the sine tasks (5.86) 0.1098, and the zero predictor 0.1975. GD + MLP ends 1.0% below the best
      linear step; the fully trained GRIL + MLP is level with the linear step (1.1% above GD + MLP, so the
      claim "GRIL <= GD + MLP" is close, not matched). The best linear step alone reaches 0.556 of the zero
      predictor.

Differs from the paper:
    - Input scale: the paper's x ~ U(-1/2, 1/2)^f (App. B.1, read through von Oswald et al.'s data code as
      ``gril_regression`` explains; ``Config.x_scale``). The linear Fig. 3A problem is scale-equivariant
      (x -> x/2 quarters every loss and quadruples η*), and an earlier run of this module at U(-1, 1) gave the same
      ratios to three digits (0.903, 1.001, 0.689: ``run(Config(x_scale=1.0))``, in the project's history as
      commit 3ff681f); Fig. 3B is not (sin(W^T x) bends less at a = 1/2).
    - Training: AdamW at lr 1e-2, cosine to 1e-5 after a short warm-up, every parameter alike, steps in the
      thousands (paper: the one-layer settings of App. B.1-B.2, lr 1e-4 / 2e-4, up to 300,000 steps): CPU minutes.
    - The layers pass W_l (f, f) to one another directly; the paper describes the combination across layers only
      as "a multiplicative combination across layers and with the external input" (App. A.3). The prediction is
      read from the last layer only (intermediate layers' outputs W_l^T C q are not used).
    - A learned scalar step c_l per layer and a shared learned query read q (3,) replace the block's β and the
      per-layer readouts; Q, Q̃ (3, 3) and A, Ã (f, f) are the heads' GRIL parameters (no β per head: it would
      only rescale c_l). Layer 1 has no Z̃ head (``stack``).
    - "Calibration" (B.4: "optionally a short calibration phase (1000 optimization steps)", not specified): we
      run none; instead the model starts at a small step, c_l = ``c_init`` = 0.01 (1/60 of the construction's
      η*/N = 0.606), with Q, Q̃, q ~ N(0, 1/3) and A, Ã ~ U(0.9, 1). The first loss is then 0.39, near the
      zero predictor's 0.417. The scale matters, as B.4 warns: starting at the construction's c_init = η*/N = 0.606
      with the same random heads, the first loss was 11.9 and a 3,000-step run ended at 0.210, about one GD step's
      0.204 (c_1 = 0.34); with c_init = 0.01 the same run reached 0.141, two GD steps with free step sizes
      (0.140). Evaluated on 10^4 tasks, eval seed 12345: ``for c in (gril_gd.eta_star(10, 10) / 10, 0.01): p, l =
      train_job(Job(steps=3000, c_init=c))``, then ``l[0]``, ``p["c_1"]`` and ``predict(p, ev.tokens, 10)``'s
      query loss on ``ev = gril_regression.sample(np.random.default_rng(12345), 10_000)``.
    - Fig. 3B: a two-layer GELU MLP (``minimal.layers.mlp``) on the block's query output instead of the weighted
      sigmoid gated unit of [33] / S5 (B.4), and only the one-layer model (the figure also shows multi-layer
      ones). A.4 sketches the MLP acting on the state (ρ(z_t)); B.4 puts it "on top of the linear GRIL layer":
      we follow B.4.
    - The one-layer reference of Fig. 3A is this module's L = 1 (scalar step) rather than ``model``'s block with
      β (f,); same training settings as the L-layer model. Its loss is compared with Table 7's trained GRIL.

Glossary: B tasks, N context pairs, f token size (= input size), n_o target size, L layers, H MLP hidden units,
η step size (η* the optimal one-step size), c_l the learned step of layer l, S = Σ x x^T.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._plotting import pyplot
from ...run import speed
from ...analysis import gril_gd
from ...run.verdicts import Tolerance
from ...tasks import gril_regression
from ...run.train import train
from ...validate import check_config, check_positive_int
from .model import train_setup
# the model (``stack``) and Fig. 3B's model and runs (``sine``), importable from here as before
from .sine import (SINE_VARIANTS, SineJob, run_sine_job, sample_sine, sine_predict,  # noqa: F401
                   sine_predict_backward, train_sine_job)
from .tolerance import loss_tolerances
from .stack import (STRIDE, W_WIN, Cache, construction, gauge_fixed, init_params, loss_and_grads,  # noqa: F401
                    predict, predict_backward)

__all__ = ["best_eta", "best_step_sizes", "Job", "train_job", "run_job", "Config", "PAPER", "TOLERANCE", "METRICS",
           "run", "run_sine", "plot"]

SAVE_METRICS = True   # reproduce --full writes data/gril/<name>_full.json, which notebook gril_d loads

PAPER = {
    "gril2_over_gd2": 1.0,               # Fig. 3A: the trained two-layer GRIL tracks two GD steps
    "gril2_beats_gd1": True,             # Fig. 3A: two steps (layers) do better than one
    "gril2_beats_gril1": True,           # Fig. 3A / Sec. 4.3: stacking layers helps
    "sine_gd_mlp_beats_linear_gd": True,  # Fig. 3B / B.4: the MLP learns a useful map of the fixed GD statistic
    "sine_gril_over_gd_mlp": 1.0,        # Fig. 3B: the fully trained model does at least as well (claimed <= 1)
    # the one-step rows of Fig. 3A are Table 7's tasks: absolute losses (1/2 MSE per output, x ~ U(-1/2, 1/2))
    "loss_gd1": 0.207,                   # Table 7: gradient descent 0.207 ± 0.001
    "loss_gril1": 0.206,                 # Table 7: trained GRIL 0.206 ± 0.001 (ours: the scalar-step L = 1 model)
    "loss_zero": 0.414,                  # Table 6: the ablated models, which predict zero
}
# Table 7's absolute losses: ``tolerance.LOSS_TOLERANCE``, as in ``regression``, ``ablations`` and ``comparison`` (one
# tolerance for the same paper number across the work): "matches" only at the paper's printed digits, "close" within 5%
TOLERANCE = loss_tolerances(PAPER)
TOLERANCE["gril2_over_gd2"] = Tolerance("rel", 0.05, 0.25, printed=False)       # a claim, not a printed 1.0
TOLERANCE["sine_gril_over_gd_mlp"] = Tolerance("at_most", 0.0, 1.05, printed=False)   # claim <= 1: above, close
METRICS = {
    "loss_gril2": "trained two-layer GRIL, 1/2 MSE per output on 10^4 fixed tasks (Fig. 3A; the paper prints no "
                  "number)",
    "loss_gd2": "two GD steps from 0 with the best fixed eta (``best_eta``)",
    "loss_gd2_free_steps": "two GD steps from 0 with the best size per step (``best_step_sizes``)",
    "loss_gd1": "one GD step from 0 at eta* (Table 7's GD row)",
    "loss_gril1": "trained one-layer model (scalar step; Table 7's trained GRIL row)",
    "loss_zero": "the zero predictor, f a^2/6 = 0.417 in expectation at a = 1/2",
    "sine_loss_gd_mlp": "Fig. 3B: the GRIL block frozen at one GD step, MLP trained (the paper prints no number)",
    "sine_loss_gril_mlp": "Fig. 3B: GRIL block and MLP trained",
}


# ------------------------------------------------------------------------------ GD with the best fixed step
def best_eta(tasks, steps):
    """The fixed step η > 0 minimising the query loss of ``steps`` GD steps from W_0 = 0 on ``tasks``.

    From W_0 = 0, W_L is a polynomial of degree L in η (W_1 = (η/N) X^T Y, W_l = W_{l-1} - (η/N)(S W_{l-1} - X^T Y)),
    so the prediction is ŷ(η) = Σ_{k=1..L} a_k η^k per task and output, and the loss 1/2 mean (ŷ(η) - y)² a
    polynomial of degree 2L. We read the a_k off ``gril_gd.gd_predict`` at L + 1 step sizes (exact interpolation),
    and take the best real positive root of the loss's derivative: an exact 1-D search. Returns (η, loss).
    """
    steps = check_positive_int("steps", steps)
    N, f = tasks.X.shape[1] - 1, tasks.X.shape[2]
    y = tasks.Y[:, -1]
    h = gril_gd.eta_star(N, f, np.sqrt(3.0 * np.mean(tasks.X ** 2)))   # η* at the tasks' own scale
    nodes = h * np.arange(steps + 1)                           # 0, η*, 2η*, ...: a well-conditioned Vandermonde
    preds = np.stack([np.zeros_like(y)] + [gril_gd.gd_predict(tasks.X, tasks.Y, e, steps=steps)
                                           for e in nodes[1:]], axis=-1)   # (B, n_o, L + 1)
    a = preds @ np.linalg.inv(np.vander(nodes, increasing=True)).T        # coefficients of η^0 .. η^L
    b = a.reshape(-1, steps + 1).copy()
    b[:, 0] -= y.reshape(-1)                                   # residual polynomial ŷ(η) - y
    loss = np.polynomial.Polynomial([0.5 * np.mean(sum(b[:, j] * b[:, m - j] for j in range(max(0, m - steps),
                                                                                          min(m, steps) + 1)))
                                     for m in range(2 * steps + 1)])
    roots = loss.deriv().roots()
    cands = [r.real for r in roots if abs(r.imag) < 1e-9 * max(1.0, abs(r)) and r.real > 0]
    eta = min(cands, key=loss) if cands else 0.0
    return float(eta), float(gril_regression.query_loss(gril_gd.gd_predict(tasks.X, tasks.Y, eta, steps=steps),
                                                          y)[0]) if eta > 0 else float(loss(0.0))


def best_step_sizes(tasks, steps):
    """``steps`` GD steps from W_0 = 0 with the best separate step size per step (a reference for a model whose
    layers learn their own c_l).

    With H = S/N and g = X^T Y/N, steps of sizes η_1 .. η_L give W_L = p(H) g, p(z) = (1 - Π_l (1 - η_l z)) / z,
    a polynomial of degree L - 1 with p(0) = Σ η_l. We fit its coefficients by least squares on ŷ = Σ_k β_k
    (H^k g)^T x_{N+1} (linear in β), then read the η_l off the roots of 1 - z p(z) (η_l = 1 / root); the fit is a
    sequence of GD steps only when those roots are real, else ``etas`` is None (the loss is then a lower bound).
    Returns (etas sorted decreasing or None, loss of the fitted polynomial).
    """
    steps = check_positive_int("steps", steps)
    N = tasks.X.shape[1] - 1
    X, Y, xq, y = tasks.X[:, :N], tasks.Y[:, :N], tasks.X[:, N], tasks.Y[:, N]
    H = X.transpose(0, 2, 1) @ X / N
    v = X.transpose(0, 2, 1) @ Y / N                           # g (B, f, n_o)
    feats = []
    for _ in range(steps):
        feats.append(np.einsum("bfo,bf->bo", v, xq).reshape(-1))   # (H^k g)^T x_{N+1}
        v = H @ v
    F = np.stack(feats, axis=1)
    beta = np.linalg.lstsq(F, y.reshape(-1), rcond=None)[0]
    loss = 0.5 * float(np.mean((F @ beta - y.reshape(-1)) ** 2))
    roots = np.polynomial.Polynomial(np.concatenate([[1.0], -beta])).roots()   # 1 - z p(z)
    if np.any(np.abs(roots.imag) > 1e-9 * np.abs(roots)):
        return None, loss
    return sorted((1.0 / roots.real).tolist(), reverse=True), loss


# ------------------------------------------------------------------------------ training runs
@dataclass(frozen=True)
class Job:
    """One training run of the L-layer model on linear regression (defaults: ours unless cited)."""
    L: int = 2                  # B.4: two layers, two GD steps
    N: int = 10                 # App. B.1: context length 10
    f: int = 10                 # App. B.1-B.2: feature size 10, n_o = f
    seed: int = 0
    steps: int = 10_000         # ours (paper: the one-layer settings, up to 300,000 steps at lr 1e-4)
    batch: int = 64             # App. B.1-B.2: 64 tasks per step
    lr: float = 1e-2            # ours, as model.Job
    weight_decay: float = 5e-4  # ours: the paper's lr · wd = 5e-6 per step (model.Job)
    warmup_steps: int = 500     # ours
    c_init: float = 0.01        # ours: c_l at the start (module docstring, "calibration")
    x_scale: float = gril_regression.X_SCALE   # App. B.1: x ~ U(-1/2, 1/2)


def train_job(job: Job, progress=False):
    """Train the L-layer model on fresh linear tasks every step (float64); returns (params, losses)."""
    speed.tune()
    setup = train_setup(job)
    params = init_params(setup.init_rng(), job.f, job.L, job.c_init)

    def lg(p, step, batch_rng):
        return loss_and_grads(p, gril_regression.sample(batch_rng, job.batch, job.N, job.f, x_scale=job.x_scale))

    res = train(lg, params, setup=setup, progress=progress, desc=f"GRIL L={job.L} seed={job.seed}")
    return res.params, res.losses


def _loss(y_hat, y):
    return gril_regression.query_loss(y_hat, y)[0]


def run_job(job: Job, n_eval=10_000, eval_seed=12345):
    """Train, then the model's loss on a fixed evaluation set and its ratio to the zero predictor's."""
    params, losses = train_job(job)
    tasks = gril_regression.sample(np.random.default_rng(eval_seed), n_eval, job.N, job.f, x_scale=job.x_scale)
    y = tasks.Y[:, -1]
    loss = _loss(predict(params, tasks.tokens, y.shape[1])[0], y)
    return {"loss": loss, "over_zero": loss / _loss(0 * y, y),
            "train_loss_tail": float(np.mean(losses[-max(1, len(losses) // 20):]))}


# ------------------------------------------------------------------------------ the experiment
@dataclass
class Config:
    N: int = 10                   # App. B.1: 10 context examples
    f: int = 10                   # App. B.1-B.2: f = n_o = 10
    L: int = 2                    # B.4: a two-layer GRIL, two GD steps
    steps: int = 10_000           # ours, per linear model (paper: up to 300,000)
    sine_steps: int = 10_000      # ours, per sine model
    lr: float = 1e-2              # ours (paper: 1e-4 / 2e-4)
    c_init: float = 0.01          # ours: initial step per layer (module docstring)
    hidden: int = 64              # ours: MLP width on the sine tasks
    seed: int = 0
    n_eval: int = 10_000          # App. B.1: 10^4 evaluation tasks
    eval_seed: int = 12345        # the fixed evaluation set
    search_seed: int = 54321      # the separate set for the 1-D search of the best fixed η
    x_scale: float = gril_regression.X_SCALE   # App. B.1: x ~ U(-1/2, 1/2)

    # every field checked by its own name, before any work (rules from the defaults: validate.check_config)
    __post_init__ = check_config

    @classmethod
    def quick(cls):
        """About two minutes on one core: 3,000 steps per linear model, 2,000 per sine model."""
        return cls(steps=3_000, sine_steps=2_000)


def run(config: Config = None, out_dir=None, progress=True):
    """Fig. 3A (trained L-layer and one-layer GRIL vs L and one GD steps) and Fig. 3B (sine targets: GRIL + MLP,
    GD block + MLP, linear GD), on fixed evaluation sets; returns JSON-ready metrics."""
    config = Config() if config is None else config
    t0 = time.perf_counter()
    N, f, L = config.N, config.f, config.L
    out = {}
    # --- Fig. 3A
    a = config.x_scale
    ev = gril_regression.sample(np.random.default_rng(config.eval_seed), config.n_eval, N, f, x_scale=a)
    search = gril_regression.sample(np.random.default_rng(config.search_seed), config.n_eval, N, f, x_scale=a)
    y = ev.Y[:, -1]
    eta1 = gril_gd.eta_star(N, f, a)
    etaL, _ = best_eta(search, L)
    out["eta_star"], out[f"eta_best_{L}_steps"] = eta1, etaL
    out["eta_best_1_step_searched"] = best_eta(search, 1)[0]
    loss_zero = _loss(0 * y, y)
    loss_gd1 = _loss(gril_gd.gd_predict(ev.X, ev.Y, eta1), y)
    loss_gdL = _loss(gril_gd.gd_predict(ev.X, ev.Y, etaL, steps=L), y)
    loss_gdL_eta1 = _loss(gril_gd.gd_predict(ev.X, ev.Y, eta1, steps=L), y)
    etas_free, _ = best_step_sizes(search, L)
    if etas_free is not None:
        W = None
        for e in etas_free:
            W = gril_gd.gd_step(ev.X, ev.Y, e, W)
        out[f"loss_gd{L}_free_steps"] = _loss(np.einsum("bfo,bf->bo", W, ev.X[:, -1]), y)
        out[f"eta_free_steps_{L}"] = etas_free
    y_con = predict(construction(f, N, L, etaL), ev.tokens, f)[0]
    out["construction_vs_gd_max_abs"] = float(np.abs(y_con - gril_gd.gd_predict(ev.X, ev.Y, etaL, steps=L)).max())
    trained = {}
    for layers in sorted({L, 1}, reverse=True):
        job = Job(L=layers, N=N, f=f, seed=config.seed, steps=config.steps, lr=config.lr, c_init=config.c_init,
                  x_scale=a)
        params, losses = train_job(job, progress=progress)
        trained[layers] = params
        out[f"loss_gril{layers}"] = _loss(predict(params, ev.tokens, f)[0], y)
        out[f"train_curve_gril{layers}"] = [float(np.mean(c)) for c in np.array_split(losses, 50)]
    out.update({"loss_zero": loss_zero, "loss_gd1": loss_gd1, f"loss_gd{L}": loss_gdL,
                f"loss_gd{L}_at_eta_star": loss_gdL_eta1})
    gl, g1 = out[f"loss_gril{L}"], out["loss_gril1"]
    out.update({f"gril{L}_over_gd{L}": gl / loss_gdL, f"gril{L}_over_gd1": gl / loss_gd1,
                f"gril{L}_over_gril1": gl / g1, "gril1_over_gd1": g1 / loss_gd1, f"gd{L}_over_gd1": loss_gdL / loss_gd1,
                "gd1_over_zero": loss_gd1 / loss_zero, f"gril{L}_over_zero": gl / loss_zero,
                f"gril{L}_beats_gd1": bool(gl < loss_gd1), f"gril{L}_beats_gril1": bool(gl < g1)})
    if f"loss_gd{L}_free_steps" in out:
        out[f"gril{L}_over_gd{L}_free_steps"] = gl / out[f"loss_gd{L}_free_steps"]
    out["params"] = gauge_fixed(trained[L], L, N, etaL)
    out.update(run_sine(config, progress=progress))
    out["train_seconds"] = time.perf_counter() - t0
    out["config"] = dataclasses.asdict(config)
    return out


def run_sine(config: Config = None, progress=True):
    """Fig. 3B alone (``run``'s second part): the sine tasks at ``config.x_scale``, GRIL + MLP and GD block + MLP
    trained ``config.sine_steps`` steps, beside linear GD at η* and at the best η, and the zero predictor."""
    config = Config() if config is None else config
    N, f, a = config.N, config.f, config.x_scale
    eta1 = gril_gd.eta_star(N, f, a)
    out = {}
    ev_s = sample_sine(np.random.default_rng(config.eval_seed), config.n_eval, N, f, a)
    search_s = sample_sine(np.random.default_rng(config.search_seed), config.n_eval, N, f, a)
    ys = ev_s.Y[:, -1]
    eta_s, _ = best_eta(search_s, 1)
    out["sine_loss_zero"] = _loss(0 * ys, ys)
    out["sine_loss_linear_gd1"] = _loss(gril_gd.gd_predict(ev_s.X, ev_s.Y, eta1), ys)
    out["sine_loss_linear_gd1_best_eta"] = _loss(gril_gd.gd_predict(ev_s.X, ev_s.Y, eta_s), ys)
    out["sine_eta_best_1_step"] = eta_s
    for variant in SINE_VARIANTS:
        job = SineJob(variant=variant, N=N, f=f, hidden=config.hidden, seed=config.seed, steps=config.sine_steps,
                      lr=config.lr, x_scale=a)
        g_p, m_p, losses = train_sine_job(job, progress=progress)
        out[f"sine_loss_{variant}_mlp"] = _loss(sine_predict(g_p, m_p, ev_s.tokens, f)[0], ys)
        out[f"sine_train_curve_{variant}"] = [float(np.mean(c)) for c in np.array_split(losses, 50)]
    gd_mlp, lin, lin_best = (out[k] for k in ("sine_loss_gd_mlp", "sine_loss_linear_gd1",
                                               "sine_loss_linear_gd1_best_eta"))
    out.update({"sine_gril_over_gd_mlp": out["sine_loss_gril_mlp"] / gd_mlp,
                "sine_gd_mlp_over_linear_gd": gd_mlp / lin,
                "sine_gd_mlp_over_linear_gd_best_eta": gd_mlp / lin_best,
                "sine_gril_mlp_over_zero": out["sine_loss_gril_mlp"] / out["sine_loss_zero"],
                "sine_gd_mlp_over_zero": gd_mlp / out["sine_loss_zero"],
                "sine_gd_mlp_beats_linear_gd": bool(gd_mlp < lin)})
    return out


def plot(metrics, out_dir):
    """Fig. 3A (training curves of the one- and L-layer models against GD lines), Fig. 3B (sine task losses),
    Fig. 5 (the trained heads, gauge-fixed, in units of the construction's η/N)."""
    plt = pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    L = metrics["config"]["L"]
    p = metrics["params"]
    heads = [(f"cqQ_{l}_over_eta_N", f"layer {l}: c q[2] Q / (η/N)\n(GD: 1 at [1, 0])") for l in range(1, L + 1)]
    heads += [(f"cQ_tilde_{l}_over_eta_N", f"layer {l}: c Q̃ / (η/N)\n(GD: 1 at [0, 0])") for l in range(2, L + 1)]
    # two rows: the losses (Fig. 3A-B) above, one heatmap per trained head (Fig. 5) below
    n = max(len(heads), 1)
    fig = plt.figure(figsize=(max(11.0, 3.8 * n), 8.0))
    grid = fig.add_gridspec(2, 2 * n)
    a, b = fig.add_subplot(grid[0, :n]), fig.add_subplot(grid[0, n:])
    head_axes = [fig.add_subplot(grid[1, 2 * i:2 * i + 2]) for i in range(len(heads))]
    for layers in sorted({1, L}):
        curve = np.asarray(metrics[f"train_curve_gril{layers}"])
        a.semilogy(np.linspace(0, metrics["config"]["steps"], len(curve)), curve, label=f"GRIL, {layers} layer(s)")
    a.axhline(metrics["loss_gd1"], color="k", ls="--", label="1 GD step (η*)")
    a.axhline(metrics[f"loss_gd{L}"], color="k", ls=":", label=f"{L} GD steps (best fixed η)")
    if f"loss_gd{L}_free_steps" in metrics:
        a.axhline(metrics[f"loss_gd{L}_free_steps"], color="C3", ls="-.", label=f"{L} GD steps (best η per step)")
    a.set(xlabel="step", ylabel="query loss (training batches)", title="Fig. 3A: multi-step regression")
    a.legend(fontsize=7)
    names = ["zero", "linear GD\n(η*)", "linear GD\n(best η)", "GD + MLP", "GRIL + MLP"]
    vals = [metrics[k] for k in ("sine_loss_zero", "sine_loss_linear_gd1", "sine_loss_linear_gd1_best_eta",
                                 "sine_loss_gd_mlp", "sine_loss_gril_mlp")]
    b.bar(names, vals, color=["0.8", "0.6", "0.4", "C1", "C0"])
    b.set(xlabel="model", ylabel="query loss (evaluation set)", title="Fig. 3B: y = sin(W^T x)")
    b.tick_params(axis="x", labelsize=8)
    for ax, (key, title) in zip(head_axes, heads):
        m = np.asarray(p[key])
        v = max(1.0, float(np.abs(m).max()))
        im = ax.imshow(m, cmap="RdBu_r", vmin=-v, vmax=v)
        ax.set(title=f"Fig. 5, {title}", xticks=range(3), yticks=range(3), xlabel="column j", ylabel="row i")
        ax.title.set_fontsize(10)
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    path = out_dir / "multistep.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
