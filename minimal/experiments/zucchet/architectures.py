"""Architecture comparison of Zucchet et al., "Gated recurrent neural networks discover attention" (ICML 2024;
arXiv 2309.01775), Sec. 3.3 and 4.3 / Fig. 4 (and App. B.1, Fig. 5): which recurrent networks
can mimic linear self-attention, and which learn in context?

Architectures (``ARCHS``): the gated RNN of Eq. 2 with a diagonal or a dense recurrence, LSTM, GRU and three LRU
variants, each a stack of 1 or 2 existing cells (Sec. 3.3), built in ``experiments.zucchet.stacks`` (its
``model_spec``, ``init_model``, ``model_forward``, ``model_backward`` are importable from here too).

Tasks (``TASKS``), both from ``minimal.tasks``:

    teacher   fit a random LSA teacher, d = 6 (Sec. 3.3: "Figure 4 for d = 6"), T = 32, fresh N(0, 1) inputs
              each step (Sec. 3.1; ``tasks.lsa_teacher``); reported: validation MSE / var(teacher output)
    icl       in-context linear regression, T = 12 pairs, d_x = d_y = 3 (Sec. 4.1; ``tasks.icl_regression``),
              trained on W* ~ N(0, 1/3); reported on a fixed training-distribution set and on validation tasks
              with W* ~ N(0, 2/3) (App. C.1, Sec. 4.3: "double the variance"), each next to one optimal GD step
              on the same tasks

Paper's findings (Fig. 4, Sec. 3.3 and 4.3): LSTMs and GRUs are poor at mimicking attention (teacher-student);
the LRU gets much better once its input is gated; on in-context regression, nonlinear RNNs beat the one-step-GD
loss. ``PAPER`` encodes these orderings as 1 (holds); ``run`` returns the same keys as 1/0 from our numbers
(teacher: validation; icl: the W* ~ N(0, 2/3) validation tasks, as Fig. 4B).

Sweep: one job = (task, arch, hidden, layers, seed) trained with ``minimal.run.train.train`` and written to disk by
``minimal.run.sweep.run_sweep`` (dask), so a re-run resumes.

Differs from the paper (App. B.1, C.1: AdamW at lr 1e-3 -> 1e-6, weight decay 1e-4, ~781k teacher / 300k ICL
steps; sizes and seeds of the comparison not stated):
  1. Budget: 1,500 teacher and 5,000 ICL steps per run at lr 1e-2 / 3e-3 (measured here), warm-up 100 steps,
     cosine to 1e-5, global-norm clipping at 1: the whole grid runs on a CPU instead of GPUs. Losses are
     therefore far above the paper's; the comparison is of orderings between architectures at equal budget.
  2. Grid: hidden 4, 8, 16, 32, one seed per point (the paper's sizes and seeds are not stated; H = 64 would add
     ~40% to the grid's CPU time).
  3. Initialisation (not stated): λ ~ U[0, 0.999] for the gated RNN, LRU |λ| on [0, 1) and phases in [0, π/10],
     the last output map scaled by 0.1; float32 training, float64 evaluation.
  4. Training loss in Fig. 5: for teacher-student the mean training-batch loss over the last 1/40 of the steps,
     for ICL the loss on a fixed set of training-distribution tasks.

Glossary: B batch, T time, d_in / d_out token and output features, H = hidden, L = layers.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .._plotting import pyplot, save_figure
from ...analysis import gd
from ...data import data_path
from ...run.job_files import finite_or_nan
from ...run.sweep import Sweep, SweepConfig
from ...tasks import icl_regression, lsa_teacher
from ...run.train import NonFiniteLossError, TrainSetup, train
from ...validate import check_choice
from .stacks import ARCHS, init_model, model_backward, model_forward, model_spec, n_params

__all__ = ["TASKS", "Job", "Config", "PAPER", "task_spec", "run_job", "train_job", "jobs", "finished", "run",
           "summarise", "plot", "SWEEP", "SWEEP_DIR", "FAMILIES", "COLOURS"]

TASKS = ("teacher", "icl")
SIGMA_W2_OOD = 2.0 / 3.0   # icl validation W*_ij ~ N(0, 2/3), twice the training variance (App. C.1, Sec. 4.3)
NONLINEAR = ("lstm", "gru", "lru_out", "lru_in_out", "lru_in_skip")
SWEEP_DIR = data_path("zucchet", "sweeps")

PAPER = {
    "teacher_gated_beats_lstm_gru": True,  # Fig. 4A: LSTM and GRU are poor at mimicking attention
    "teacher_lru_input_gating_helps": True,  # Fig. 4A: LRU with input gating (in_out / in_skip) beats lru_out
    "icl_nonlinear_beats_gd": True,        # Fig. 4B: nonlinear RNNs go below one optimal GD step
}


METRICS = {
    "teacher_best_rel_loss_<arch>": "lowest validation MSE / var(y*) over the grid's sizes and layer counts",
    "icl_best_rel_loss_<arch>": "lowest loss / one GD step's on validation tasks with W* ~ N(0, 2/3)",
}
QUICK_MISSES = ("two sizes, one layer, 300 teacher / 1500 ICL steps: the orderings of Fig. 4 need the full grid "
                "(committed under data/zucchet/sweeps/architectures, loaded when present).")


# ---------------------------------------------------------------- the two tasks

@dataclass(frozen=True)
class Job:
    """One training run of the sweep (also the JSON record's "config")."""
    task: str = "teacher"
    arch: str = "gated_diagonal"
    hidden: int = 16
    layers: int = 1
    seed: int = 0
    steps: int = 2000
    batch: int = 64
    lr: float = 1e-2
    warmup_steps: int = 100
    final_lr: float = 1e-5
    readout_scale: float = 0.1
    clip: float = 1.0                  # ours: global-norm clipping keeps the nonlinear cells from diverging
    d: int = 6                         # teacher: features (Sec. 3.3: "Figure 4 for d = 6")
    T_teacher: int = 32                # teacher: sequence length (App. B.1)
    teacher_seed: int = 1234           # teacher: the fixed LSA teacher
    T_icl: int = 12                    # icl: context pairs (App. C.1)
    d_x: int = 3                       # icl (App. C.1)
    d_y: int = 3                       # icl (App. C.1)
    n_eval: int = 20480                # fixed evaluation set size (icl: >= 20k tasks; teacher: sequences / 10)
    eval_seed: int = 2024
    dtype: str = "float32"


def task_spec(job):
    """(d_in, d_out, sample(rng, batch, dtype) -> (x, target), loss(y, target) -> (loss, dy), evalsets).

    evalsets: name -> (x, target, reference loss), float64. "val": a fixed set from the training distribution
    (teacher: the reference is var(y*), the best constant's loss; icl: one optimal GD step, η* of App. C.2, on
    the same tasks). icl also has "ood": W* ~ N(0, ``SIGMA_W2_OOD``) = N(0, 2/3), the validation distribution
    of App. C.1 / Fig. 4B / Fig. 5 (twice the training variance), with GD's loss on it.
    """
    check_choice("task", job.task, TASKS)
    if job.task == "teacher":
        teacher = lsa_teacher.make_teacher(np.random.default_rng(job.teacher_seed), job.d)

        def sample(rng, batch, dtype):
            return lsa_teacher.sample_batch(rng, teacher, batch, job.T_teacher, dtype)

        x, y = sample(np.random.default_rng(job.eval_seed), max(1, job.n_eval // 10), np.float64)
        return job.d + 1, job.d, sample, lsa_teacher.mse, {"val": (x, y, float(np.var(y)))}

    def sample(rng, batch, dtype):
        tasks = icl_regression.sample(rng, batch, job.T_icl, job.d_x, job.d_y, dtype=dtype)
        return tasks.tokens, tasks.y_q

    def loss(y, y_q):
        # only the query (last token) is scored
        L, dy_q = icl_regression.query_loss(y[:, -1], y_q)
        dy = np.zeros_like(y)
        dy[:, -1] = dy_q
        return L, dy

    evalsets = {}
    eta = gd.eta_star(job.T_icl, job.d_x)         # depends on the x distribution only (App. C.2)
    for name, seed, sigma_w2 in (("val", job.eval_seed, 1.0 / 3.0), ("ood", job.eval_seed + 1, SIGMA_W2_OOD)):
        tasks = icl_regression.sample(np.random.default_rng(seed), job.n_eval, job.T_icl, job.d_x, job.d_y,
                                      sigma_w2=sigma_w2)
        evalsets[name] = (tasks.tokens, tasks.y_q, gd.gd_loss_empirical(tasks, eta))
    return icl_regression.token_dim(job.d_x, job.d_y), job.d_y, sample, loss, evalsets


def _evaluate(params, arch, x, target, loss, readout="all", chunk=4096):
    """Loss of params (cast to float64) on a fixed set, in chunks (mean of per-entry losses over chunks)."""
    p64 = {k: np.asarray(v, np.float64) for k, v in params.items()}
    total, n = 0.0, 0
    for a in range(0, len(x), chunk):
        y, _ = model_forward(p64, x[a:a + chunk], arch, readout)
        total += loss(y, target[a:a + chunk])[0] * len(y)
        n += len(y)
    return total / n


def run_job(job: Job):
    """Train one (task, arch, hidden, layers, seed) and evaluate it; a JSON-serialisable dict.

    Keys: val_loss (a fixed set from the training distribution, float64), rel_loss (teacher: val_loss / var(y*);
    icl: val_loss / loss of one optimal GD step on the same tasks), baseline (teacher: var(y*), the best
    constant's loss; icl: GD's loss); icl only: ood_loss, ood_rel_loss, ood_baseline, the same on the
    validation distribution W* ~ N(0, 2/3) (Fig. 4B, Fig. 5); n_params, ms_per_step, train_seconds, diverged
    (1 if the loss became NaN/inf), curve (40 means of the training-batch loss; its last point is the final
    training loss of Fig. 5).
    """
    if isinstance(job, dict):
        job = Job(**job)
    d_in, d_out = task_spec(job)[:2]
    params = init_model(train_setup(job).init_rng(), job.arch, d_in, d_out, job.hidden, job.layers,
                        job.readout_scale, job.dtype)
    return train_job(job, params)


def train_setup(job: Job) -> TrainSetup:
    """The job's training set-up: warm-up (at most the whole run), cosine to ``final_lr``, clipping, no decay."""
    return TrainSetup(lr=job.lr, steps=job.steps, warmup=min(job.warmup_steps, job.steps), final_lr=job.final_lr,
                      clip=job.clip, seed=job.seed)


def train_job(job: Job, params):
    """``run_job`` from given initial ``params`` (e.g. an ``init_model`` with one matrix rescaled): train them
    on ``job``'s task with its optimiser settings and evaluate; the same dict as ``run_job``."""
    check_choice("arch", job.arch, ARCHS)
    _, _, sample, loss, evalsets = task_spec(job)
    dtype = np.dtype(job.dtype)
    params = {k: np.asarray(v, dtype) for k, v in params.items()}

    readout = "last" if job.task == "icl" else "all"    # ICL scores the query (last token) only

    def loss_and_grads(p, step, batch_rng):
        x, target = sample(batch_rng, job.batch, dtype)
        y, caches = model_forward(p, x, job.arch, readout)
        L, dy = loss(y, target)
        return L, model_backward(p, caches, dy.astype(dtype), job.arch)[1]

    t0 = time.perf_counter()
    diverged = 0
    try:
        result = train(loss_and_grads, params, setup=train_setup(job), progress=False)
        params, losses = result.params, result.losses
    except NonFiniteLossError:
        diverged, losses = 1, np.array([np.nan])
    seconds = time.perf_counter() - t0
    out = {}
    for name, (x_eval, t_eval, baseline) in evalsets.items():
        prefix = "" if name == "val" else f"{name}_"
        value = _evaluate(params, job.arch, x_eval, t_eval, loss, readout) if not diverged else float("nan")
        out[f"{name}_loss"] = finite_or_nan(value)
        out[f"{prefix}rel_loss"] = finite_or_nan(value / baseline)
        out[f"{prefix}baseline"] = float(baseline)
    edges = np.linspace(0, len(losses), 41).astype(int)
    curve = [finite_or_nan(losses[a:b].mean()) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    return {**out, "n_params": n_params(params), "ms_per_step": 1e3 * seconds / job.steps,
            "train_seconds": seconds, "diverged": diverged, "curve": curve}


# ---------------------------------------------------------------- the sweep

@dataclass
class Config(SweepConfig):
    tasks: tuple = TASKS                          # Fig. 4A (teacher-student) and 4B (in-context regression)
    archs: tuple = ARCHS                          # Fig. 4: construction (diag./dense), LSTM, GRU, LRU variants
    hiddens: tuple = (4, 8, 16, 32)               # ours: the paper sweeps the hidden size (x-axis: #params)
    layers: tuple = (1, 2)                        # Fig. 5 / App. B: 1 and 2 layers
    seeds: tuple = (0,)                           # ours, for CPU time (paper: several seeds per point)
    steps_teacher: int = 1500                     # ours (paper: far longer at lr 1e-3); CPU-sized
    steps_icl: int = 5_000                        # ours (ICL leaves the zero predictor slowly)
    lr_teacher: float = 1e-2                      # ours (1e-2 .. 2e-2 measured best here)
    lr_icl: float = 3e-3                          # ours (3e-3 at batch 64, measured here)
    batch: int = 64                               # ours
    d: int = 6                                    # Sec. 3.3: "Figure 4 for d = 6"; T = 32 (App. B.1)
    n_eval: int = 20480                           # >= 20k evaluation tasks: sampling noise below the gaps
    n_workers: int = 2                            # dask LocalCluster workers (these machines: ~1-2 cores)

    @classmethod
    def quick(cls):
        """A few sizes, 1 layer, 1 seed, short training (ICL needs longer to leave the zero predictor)."""
        return cls(hiddens=(8, 32), layers=(1,), seeds=(0,), steps_teacher=300, steps_icl=1500, n_workers=1)


def jobs(config: Config):
    """Every Job of the grid tasks x archs x hiddens x layers x seeds."""
    out = []
    for task in config.tasks:
        check_choice("tasks", task, TASKS)
        steps, lr = ((config.steps_teacher, config.lr_teacher) if task == "teacher"
                     else (config.steps_icl, config.lr_icl))
        for arch in config.archs:
            check_choice("archs", arch, ARCHS)
            for hidden in config.hiddens:
                for layers in config.layers:
                    for seed in config.seeds:
                        out.append(Job(task=task, arch=arch, hidden=int(hidden), layers=int(layers),
                                       seed=int(seed), steps=int(steps), batch=config.batch, lr=float(lr),
                                       warmup_steps=min(100, steps // 10), d=config.d, n_eval=config.n_eval))
    return out


def _nanmean(values):
    values = [v for v in values if not math.isnan(v)]
    return float(np.mean(values)) if values else float("nan")


def summarise(records):
    """Group job records into rows (one per task, arch, hidden, layers; means over seeds) and the orderings."""
    groups = {}
    for r in records:
        c, res = r["config"], r["result"]
        groups.setdefault((c["task"], c["arch"], c["hidden"], c["layers"]), []).append(res)
    rows = []
    for (task, arch, hidden, layers), rs in sorted(groups.items()):
        def mean(key):
            return _nanmean([x.get(key, float("nan")) for x in rs])

        rows.append({"task": task, "arch": arch, "hidden": hidden, "layers": layers, "n_params": rs[0]["n_params"],
                     "val_loss": mean("val_loss"), "rel_loss": mean("rel_loss"),
                     **({"ood_rel_loss": mean("ood_rel_loss")} if task == "icl" else {}),
                     "train_rel_loss": _nanmean([x["curve"][-1] / x["baseline"] if x.get("curve") else float("nan")
                                                 for x in rs]),
                     "fig4_rel_loss": mean("ood_rel_loss" if task == "icl" else "rel_loss"),
                     "baseline": rs[0]["baseline"], "seeds": len(rs),
                     "diverged": int(sum(x["diverged"] for x in rs)), "ms_per_step": mean("ms_per_step")})

    def best(task, archs):
        v = [row["fig4_rel_loss"] for row in rows if row["task"] == task and row["arch"] in archs]
        v = [x for x in v if not math.isnan(x)]
        return min(v) if v else float("nan")

    out = {"rows": rows}
    for task in TASKS:
        for arch in ARCHS:
            out[f"{task}_best_rel_loss_{arch}"] = best(task, (arch,))
    out["teacher_gated_beats_lstm_gru"] = int(best("teacher", ("gated_diagonal",))
                                              < best("teacher", ("lstm", "gru")))
    out["teacher_lru_input_gating_helps"] = int(best("teacher", ("lru_in_out", "lru_in_skip"))
                                                < best("teacher", ("lru_out",)))
    # Fig. 4B: loss / GD's loss on the validation tasks (W* ~ N(0, 2/3)): below 1 beats one optimal GD step
    out["icl_nonlinear_beats_gd"] = int(best("icl", NONLINEAR) < 1.0)
    return out


# job files data/zucchet/sweeps/architectures/arch-<job_key>.json; run(config) resumes, finished(config) checks
SWEEP = Sweep("arch", run_job, jobs, summarise, SWEEP_DIR / "architectures", Config, desc="architectures")
finished, run = SWEEP.finished, SWEEP.run


# the families of Fig. 4, one panel each (at most 2 architectures x 2 layer counts per panel)
FAMILIES = (("gated RNN (Eq. 2)", ("gated_diagonal", "gated_dense")), ("LSTM / GRU", ("lstm", "gru")),
            ("LRU, output gating only", ("lru_out",)), ("LRU with input gating", ("lru_in_out", "lru_in_skip")))
COLOURS = {arch: f"C{i}" for i, arch in enumerate(ARCHS)}   # one colour per architecture, in every panel


def plot(result, out_dir):
    """Fig. 4 (architectures.png): validation loss (relative) vs parameter count, a row per task and a panel per
    family of architectures (``FAMILIES``); Fig. 5 (architectures_train_val.png): the same with training and
    validation in rows of their own. One colour per architecture in every panel, 1 layer solid, 2 layers dashed;
    one legend, outside the panels."""
    plt = pyplot()
    from matplotlib.lines import Line2D

    def curves(ax, task, key, archs):
        for arch in archs:
            for layers, ls in ((1, "-"), (2, "--")):
                rows = [r for r in result["rows"] if r["task"] == task and r["arch"] == arch and r["layers"] == layers]
                if rows:
                    rows.sort(key=lambda r: r["n_params"])
                    ax.loglog([r["n_params"] for r in rows], [r.get(key, float("nan")) for r in rows], ls,
                              marker="o", ms=4, color=COLOURS[arch], label=f"{arch}, {layers} layer"
                              + ("s" if layers == 2 else ""))
        if task == "icl":
            ax.axhline(1.0, color="k", lw=0.8, ls=":")

    def legend(fig):
        handles = [Line2D([], [], color=COLOURS[a], marker="o", ms=4) for a in ARCHS]
        handles += [Line2D([], [], color="k", ls="-"), Line2D([], [], color="k", ls="--"),
                    Line2D([], [], color="k", lw=0.8, ls=":")]
        fig.legend(handles, [*ARCHS, "1 layer", "2 layers", "one optimal GD step (ICL)"], loc="outside right upper",
                   fontsize=8)

    def grid(panels, file_name, height):
        """``panels``: one row per (task, metric key, y label, row name)."""
        fig, axes = plt.subplots(len(panels), len(FAMILIES), figsize=(15, height), sharex=True, squeeze=False,
                                 layout="constrained")
        for r, (task, key, ylabel, row_name) in enumerate(panels):
            for c, (family, archs) in enumerate(FAMILIES):
                ax = axes[r, c]
                if c:
                    ax.sharey(axes[r, 0])
                curves(ax, task, key, archs)
                ax.set_title(family if r == 0 else "", fontsize=10)
                ax.set_xlabel("parameters", fontsize=9)
                ax.set_ylabel(f"{row_name}\n{ylabel}" if c == 0 else "(same axis as left)", fontsize=9)
        legend(fig)
        return save_figure(fig, out_dir, file_name, layout=False)

    fig4 = grid([("teacher", "fig4_rel_loss", "validation MSE / var(y*)", "teacher-student (Fig. 4A), d = 6"),
                 ("icl", "fig4_rel_loss", "validation loss / one GD step's", "ICL (Fig. 4B), W* ~ N(0, 2/3)")],
                "architectures.png", 6.5)
    fig5 = grid([("teacher", "train_rel_loss", "training loss / var(y*)", "teacher-student, training"),
                 ("teacher", "rel_loss", "validation MSE / var(y*)", "teacher-student, validation"),
                 ("icl", "rel_loss", "loss / one GD step's", "ICL, training tasks W* ~ N(0, 1/3)"),
                 ("icl", "ood_rel_loss", "loss / one GD step's", "ICL, validation W* ~ N(0, 2/3)")],
                "architectures_train_val.png", 12)
    return [fig4, fig5]
