"""Table 2 of Zucchet et al., "Gated recurrent neural networks discover attention" (ICML 2024; arXiv 2309.01775),
as the paper ran it: the gated RNN of Sec. 4.2 trained with the paper's parametrisation and optimiser on
in-context linear regression, over 4 seeds, mean ± std.

Each seed is one ``experiments.icl`` run of ``icl.Config.paper(seed)`` (App. C.1 / B.1: λ = exp(-exp(ν)) with
AdamW on ν, lr 1e-3 cosine-annealed to 1e-6, weight decay 1e-4 with λ excluded, 300k steps, H = 80), run through
``minimal.run.sweep`` (one job file per seed under ``data/zucchet/sweeps/icl_seeds``, resumable; a killed job
resumes from its training checkpoint in ``<tmp>/minimal_icl_seeds``).

Reported per seed and as mean ± std over seeds (``summarise``): the coefficients of x_k² y_1 in the first output's
one-token polynomial (Table 2's RNN column, paper 6.81e-2 / 6.82e-2 / 6.82e-2 against η* = 6.76e-2), the norm of
the other coefficients (paper 1.35e-3 ± 1.97e-4), the final training loss (paper 0.0945, Sec. 4.2) and the loss
of the RNN and of one optimal GD step on one fixed evaluation set, and the mean λ of the key-value neurons with
the gain c*(w) a memory of that λ needs (``analysis.gd.eta_star_weighted``): if λ_KV < 1 explains why the paper's
coefficients sit ~0.8% above η*, ours sit above η* by about c*(w) / η* - 1.

Differs from the paper: the initialisation (λ ~ U[0, 0.999], readout scaled by 0.1; the paper does not state
its own), float32 training, and the fixed evaluation set of 32,768 tasks from the training distribution (the
paper reports the final training loss; we report both).

Glossary: H recurrent neurons, T context pairs, d_x, d_y dimensions, η* the optimal GD step size, λ_KV the decay
of the key-value neurons (λ > 0.5).
"""
from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._plotting import pyplot, save_figure
from . import icl
from ...run import io
from ...data import data_path
from ...run.verdicts import Tolerance
from ...run.sweep import Sweep, SweepConfig
from ...run.checkpoint import load_checkpoint

__all__ = ["Config", "PAPER", "jobs", "run_job", "run", "finished", "summarise", "plot", "SWEEP", "SWEEP_DIR",
           "WEIGHTS", "label_slot_zeroed", "label_slot_residuals"]

SWEEP_DIR = data_path("zucchet", "sweeps", "icl_seeds")
WEIGHTS = data_path("zucchet", "icl_seeds_full.npz")   # every seed's final params (run(save_weights_path=...))

PAPER = {
    "coef_x2_y1_mean": 0.06817,        # Table 2, RNN column: 6.81e-2, 6.82e-2, 6.82e-2 (mean of 4 seeds)
    "coef_over_eta_star": 1.0084,      # the same over η* = 0.0676 (Table 2's GD column)
    "residual_norm_mean": 1.35e-3,     # Table 2: norm of ŷ_1's other coefficients (± 1.97e-4)
    "final_train_loss_mean": 0.0945,   # Sec. 4.2: training loss of the RNN after training
    "loss_gd": 0.0947,                 # Sec. 4.2: one optimal GD step
    "seeds": 4,
}


TOLERANCE = {   # minimal.run.report verdicts
    "coef_x2_y1_mean": Tolerance("rel", 0.005, 0.02),
    "coef_over_eta_star": Tolerance("rel", 0.005, 0.02),
    "residual_norm_mean": Tolerance("log10", 0.3, 1.0),
    "final_train_loss_mean": Tolerance("rel", 0.005, 0.02),
    "loss_gd": Tolerance("rel", 0.005, 0.02),
}
METRICS = {
    "coef_x2_y1_mean": "mean over seeds and k of the coefficient of x_k² y_1 in ŷ_1 (Table 2, RNN column)",
    "coef_over_eta_star": "the same over η* (paper: 6.817e-2 / 6.76e-2 = 1.0084)",
    "coef_predicted_over_eta_star": "c*(w) / η* for w_t = (mean λ of the λ > 0.5 neurons)^(T+1-t): a crude one-λ model",
    "final_train_loss_mean": "mean over seeds of the final training loss (Sec. 4.2: 0.0945)",
}
QUICK_MISSES = ("2 seeds of 20k steps at the paper's lr 1e-3: far from one GD step, so none of Table 2's numbers "
                "is expected; the full 4 x 300k-step run is committed under data/zucchet/sweeps/icl_seeds.")


@dataclass
class Config(SweepConfig):
    seeds: tuple = (0, 1, 2, 3)          # Table 2: averaged over 4 seeds
    steps: int = 300_000                 # App. C.1: 300,000 training iterations
    lr: float = 1e-3                     # App. C.1: AdamW's peak lr (cosine-annealed to 1e-6), as icl.Config.paper
    n_workers: int = 1

    @classmethod
    def quick(cls):
        """Two seeds of 20k steps (about 1 CPU minute): the pipeline, not the paper's numbers (at lr 1e-3 the
        network is still far from one GD step after 20k steps)."""
        return cls(seeds=(0, 1), steps=20_000)


def jobs(config: Config):
    """One ``icl.Config.paper(seed, steps)`` with ``config.lr`` (as a dict) per seed; at the paper's lr the dict,
    and so the committed job file's name (its hash), is the paper config's."""
    return [dataclasses.asdict(dataclasses.replace(icl.Config.paper(seed=int(s), steps=int(config.steps)),
                                                   lr=float(config.lr))) for s in config.seeds]


def run_job(cfg: dict):
    """Train and analyse one seed: ``icl.run``'s metrics (λ of every neuron included)."""
    return icl.run(icl.Config(**cfg), out_dir=_checkpoint_dir(), progress=False)


def _mean_std(values):
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan")


def summarise(records):
    """Mean ± std over seeds of Table 2's entries and the losses; the per-seed values under "per_seed"."""
    res = [r["result"] for r in sorted(records, key=lambda r: r["config"]["seed"])]
    out = {"seeds": len(res), "per_seed": {}}
    coefs = np.array([r["coef_x2_y1"] for r in res])               # (seeds, d_x)
    out["coef_x2_y1"] = [float(c) for c in coefs.mean(0)]
    out["coef_x2_y1_std"] = [float(c) for c in coefs.std(0, ddof=1)] if len(res) > 1 else [float("nan")] * 3
    for key in ("coef_x2_y1_mean", "residual_norm", "final_train_loss", "loss_rnn", "loss_gd",
                "gap_rnn_minus_gd", "lam_kv_mean", "coef_predicted_from_lam", "n_slow_neurons"):
        out[f"{key}_mean"], out[f"{key}_std"] = _mean_std([r[key] for r in res])
        out["per_seed"][key] = [float(r[key]) for r in res]
    out["loss_gd"] = out.pop("loss_gd_mean")
    out.pop("loss_gd_std")
    out["eta_star"] = float(res[0]["eta_star"])
    out["coef_over_eta_star"] = out["coef_x2_y1_mean_mean"] / out["eta_star"]
    out["coef_x2_y1_mean"] = out.pop("coef_x2_y1_mean_mean")
    out["coef_predicted_over_eta_star"] = out["coef_predicted_from_lam_mean"] / out["eta_star"]
    out["steps"] = int(records[0]["config"]["steps"]) if records else 0
    out["ms_per_step"] = float(np.nanmean([r["ms_per_step"] for r in res]))
    return out


def label_slot_zeroed(params, d_x=3, d_y=3):
    """A copy of ``params`` whose fast neurons (λ < 0.5) read nothing from the token's label slot (entries d_x ..
    d_x + d_y - 1 of W_in_m and W_in_x). In training the query's label slot is always 0, so these weights get no
    gradient from the query and only weight decay moves them; the one-token input that defines Table 2's
    polynomial puts a label there, and they turn it into extra coefficients."""
    fast = icl.lam_of(params) < 0.5
    out = {k: np.array(v, dtype=np.float64) for k, v in params.items()}
    for k in ("W_in_m", "W_in_x"):
        out[k][fast, d_x:d_x + d_y] = 0.0
    return out


def label_slot_residuals(params_by_seed, rng_seed=3):
    """{"residual_norm": [...], "residual_norm_label_zeroed": [...]} over the seeds of ``params_by_seed``
    ({"seed<k>": params}, in seed order): Table 2's residual norm before and after ``label_slot_zeroed``."""
    out = {"residual_norm": [], "residual_norm_label_zeroed": []}
    for name in sorted(params_by_seed, key=lambda n: int(n[4:])):
        for key, p in (("residual_norm", params_by_seed[name]),
                       ("residual_norm_label_zeroed", label_slot_zeroed(params_by_seed[name]))):
            exps, coef, _ = icl.instantaneous_polynomial(p, np.random.default_rng(rng_seed))
            out[key].append(float(icl.table2(exps, coef)[1]))
    return out


def _with_label_slot(result, config):
    """``result`` with the residual after ``label_slot_zeroed`` for each seed, from the committed weights
    ``WEIGHTS`` when they hold exactly this config's seeds (else unchanged)."""
    if not WEIGHTS.exists():
        return result
    params, _ = io.load_weights(WEIGHTS)
    saved = io.load_meta(WEIGHTS).get("jobs", [])
    if sorted(saved, key=lambda j: j["seed"]) != sorted(jobs(config), key=lambda j: j["seed"]):
        return result
    r = label_slot_residuals(params)
    zeroed = np.asarray(r["residual_norm_label_zeroed"])
    result["per_seed"]["residual_norm_label_zeroed"] = [float(v) for v in zeroed]
    result["residual_norm_label_zeroed_mean"], result["residual_norm_label_zeroed_std"] = _mean_std(zeroed)
    share = 1.0 - zeroed / np.asarray(r["residual_norm"])
    result["label_slot_share_min"] = float(share.min())
    result["label_zeroed_over_paper_min"] = float(zeroed.min() / PAPER["residual_norm_mean"])
    result["label_zeroed_over_paper_max"] = float(zeroed.max() / PAPER["residual_norm_mean"])
    return result


def _checkpoint_dir():
    return Path(tempfile.gettempdir()) / "minimal_icl_seeds"


# job files data/zucchet/sweeps/icl_seeds/icl_seed-<job_key>.json, one per seed
SWEEP = Sweep("icl_seed", run_job, jobs, summarise, SWEEP_DIR, Config, desc="icl seeds")
finished = SWEEP.finished


def run(config: Config = None, out_dir=None, progress=True, save_weights_path=None):
    """Run (or resume) the seeds through dask and summarise them (the summary is returned, not written).

    ``save_weights_path``: write every seed's final params (from its training checkpoint) to one ``.npz``, groups
    "seed<k>", with the sweep's config and each saved seed's ``icl.Config`` ("jobs") in the JSON sidecar beside it
    (``minimal.run.io.save_weights``; the notebook reads them with ``minimal.run.io.load_weights``). Seeds whose checkpoint
    is not on this machine (their records came from the committed sweep) are left out."""
    config = Config() if config is None else config
    result = SWEEP.run(config, out_dir, progress)
    result = _with_label_slot(result, config)
    if save_weights_path is not None:
        groups, saved = {}, []
        for cfg in jobs(config):
            path = icl.checkpoint_path(icl.Config(**cfg), _checkpoint_dir())
            if path.exists():
                ckpt = load_checkpoint(path)
                if ckpt.step == cfg["steps"]:
                    groups[f"seed{cfg['seed']}"] = {k: np.asarray(v, np.float64) for k, v in ckpt.params.items()}
                    saved.append(cfg)
        if groups:
            io.save_weights(save_weights_path, groups, config, {"jobs": saved})
    return result


def plot(result, out_dir):
    """Table 2 per seed: each coefficient of x_k² y_1 relative to η*, with the gain predicted from λ_KV."""
    plt = pyplot()
    eta = result["eta_star"]
    # the one-λ prediction c*(w) sits tens of % away: its own panel, so the trained points keep their scale
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6))
    per = result["per_seed"]
    seeds = np.arange(len(per["coef_x2_y1_mean"]))
    ax.plot(seeds, [100 * (c / eta - 1) for c in per["coef_x2_y1_mean"]], "o", color="C0",
            label="trained RNN (mean over k)")
    ax.axhline(100 * (PAPER["coef_over_eta_star"] - 1), color="C2", ls="--", label="paper (mean of 4 seeds)")
    ax.axhline(0.0, color="k", lw=0.8, label="one GD step (η*)")
    bx.plot(seeds, [100 * (c / eta - 1) for c in per["coef_predicted_from_lam"]], "x", color="C1", ms=9,
            label="c*(w) for the seed's mean λ_KV")
    bx.axhline(0.0, color="k", lw=0.8, label="one GD step (η*)")
    for a, title in ((ax, "Table 2 with the paper's optimiser"), (bx, "a one-λ model of the memory")):
        a.set_xticks(seeds)
        a.set_xlabel("seed")
        a.set_ylabel("coefficient of $x_k^2 y_1$ above η* (%)")
        a.set_title(title)
        a.legend(fontsize=7, loc="best")
    return [save_figure(fig, out_dir, "icl_seeds.png")]
