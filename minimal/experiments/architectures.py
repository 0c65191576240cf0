"""Architecture comparison of Zucchet et al., "Gated recurrent neural networks discover attention" (ICML 2024;
arXiv 2309.01775), Sec. 5 / Fig. 4 (and the layer-count variant of App. B, Fig. 5): which recurrent networks
can mimic linear self-attention, and which learn in context?

Architectures (``ARCHS``), each a stack of 1 or 2 existing cells, composed here (never re-implemented):

    gated_diagonal   the construction's class: the gated linear RNN of Eq. 2 (``cells.gated_rnn``), diagonal λ
    gated_dense      the same with a dense recurrence matrix A (``recurrence="dense"``)
    lstm, gru        ``cells.lstm`` / ``cells.gru`` (tanh/sigmoid, all gates see h_{t-1}) + linear readout
                     (``layers.linear``)
    lru_out          LRU block with a GLU after the recurrence only (``cells.lru``, variant "out"; Orvieto et al.)
    lru_in_out       + a GLU gate on the input ("in_out", App. A.1)
    lru_in_skip      + input gate, and the output gate's linear branch reads the block input ("in_skip")

A stack of L layers maps d_in -> hidden -> ... -> d_out: every layer but the last outputs ``hidden`` features
(for LSTM/GRU the hidden state itself, then a linear readout after the last layer). The last output map
(gated RNN: D; LRU: W_out_m; LSTM/GRU: the readout) is scaled by ``readout_scale`` at init.

Tasks (``TASKS``), both from ``minimal.tasks``:

    teacher   fit a random LSA teacher, d = 4, T = 32, fresh N(0, 1) inputs each step (Sec. 4.1;
              ``tasks.lsa_teacher``); reported: validation MSE and MSE / var(teacher output) (``rel_loss``)
    icl       in-context linear regression, T = 12 pairs, d_x = d_y = 3 (Sec. 4.2; ``tasks.icl_regression``);
              reported: query loss on a fixed evaluation set, next to one optimal GD step on the same set

Paper's findings (Fig. 4): LSTMs and GRUs are poor at mimicking attention (teacher-student); the LRU gets much
better once its input is gated; on in-context regression, nonlinear RNNs beat the one-step-GD loss (they are
not restricted to the cubic predictor a single layer of linear attention computes). ``PAPER`` encodes these
orderings as 1 (holds); ``run`` returns the same keys as 1/0 from our numbers.

Sweep: one job = (task, arch, hidden, layers, seed) trained with ``minimal.train.train`` and written to disk by
``minimal.sweep.run_sweep`` (dask), so a re-run resumes. Deviations from the paper (App. B): short CPU runs with
higher learning rates (project notes: 1e-2 teacher-student, 3e-3 ICL at batch 64), float32 training (float64
evaluation), λ ~ U[0, 0.999] for the gated RNN, LRU phases in [0, π/10], readout scaled by 0.1; our grid of
hidden sizes is smaller than the paper's.

Glossary: B batch, T time, d_in / d_out token and output features, H = hidden, L = layers.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ._plotting import pyplot
from ..analysis import gd
from .. import models
from ..optim import cosine_schedule
from ..sweep import all_on_disk, finite_or_nan, run_sweep, with_sweep_summary
from ..tasks import icl_regression, lsa_teacher
from ..train import NonFiniteLossError, train
from ..validate import check_array, check_choice, check_positive_int

__all__ = ["ARCHS", "TASKS", "Job", "Config", "PAPER", "model_spec", "init_model", "model_forward", "model_backward",
           "n_params", "task_spec", "run_job", "train_job", "jobs", "finished", "run", "summarise", "plot", "SWEEP_DIR"]

ARCHS = ("gated_diagonal", "gated_dense", "lstm", "gru", "lru_out", "lru_in_out", "lru_in_skip")
TASKS = ("teacher", "icl")
NONLINEAR = ("lstm", "gru", "lru_out", "lru_in_out", "lru_in_skip")
SWEEP_DIR = Path(__file__).resolve().parents[2] / "data" / "zucchet" / "sweeps"

PAPER = {
    "teacher_gated_beats_lstm_gru": 1,     # Fig. 4A: LSTM and GRU are poor at mimicking attention
    "teacher_lru_input_gating_helps": 1,   # Fig. 4A: LRU with input gating (in_out / in_skip) beats lru_out
    "icl_nonlinear_beats_gd": 1,           # Fig. 4B: nonlinear RNNs go below one optimal GD step
}


# ---------------------------------------------------------------- the model: a stack of existing cells

def model_spec(arch, layers, d_in=None, d_out=None, hidden=None, readout_scale=0.1):
    """The ``minimal.models`` spec of an L-layer stack of ``arch``: each layer maps its width -> ``hidden``
    (the last -> ``d_out``; LSTM/GRU output their hidden state and a linear readout follows), the last
    output map scaled by ``readout_scale`` at init. Without the sizes (None) the spec has empty init
    arguments: enough for ``models.forward`` / ``backward``, which read only names and forward kwargs."""
    build = d_in is not None
    spec, width = [], d_in
    for i in range(layers):
        out, last = (d_out if i == layers - 1 else hidden), i == layers - 1
        if arch.startswith("gated_"):
            name, kw, fwd, scale = "gated_rnn", dict(d_in=width, d_hidden=hidden, d_out=out,
                                                     recurrence=arch[6:]), {}, {"D": readout_scale}
        elif arch in ("lstm", "gru"):
            name, kw, fwd, scale = arch, dict(d_in=width, d_hidden=hidden), {}, {}
        else:
            variant = arch[4:]
            name, fwd, scale = "lru", {"variant": variant}, {"W_out_m": readout_scale}
            kw = dict(d_in=width, d_state=hidden, d_out=out, d_model=None if variant == "out" else hidden,
                      variant=variant, r_min=0.0, max_phase=np.pi / 10)
        spec.append(models.Layer(name, kw if build else {}, fwd, scale if (build and last) else {}))
        width = hidden
    if arch in ("lstm", "gru"):
        spec.append(models.Layer("linear", {"D_in": hidden, "D_out": d_out} if build else {}, {},
                                 {"W": readout_scale} if build else {}))
    return tuple(spec)


def init_model(rng, arch, d_in, d_out, hidden, layers=1, readout_scale=0.1, dtype="float64"):
    """Params of an L-layer stack, keys "l<i>/<name>" (and "readout/W", "readout/b" for LSTM/GRU).

    Built by ``minimal.models.init`` from ``model_spec`` (its keys "<i>.<name>" renamed here; the random
    draws and the numbers are those of the stack this module carried before models.py existed, bit for bit).

    Args:
        rng: ``numpy.random.Generator``; arch: one of ``ARCHS``; d_in: token features; d_out: outputs;
        hidden: recurrent neurons per layer (LRU: complex states N); layers: L >= 1;
        readout_scale: factor on the last output map at init; dtype: "float32" or "float64".
    Returns:
        dict name -> array.
    """
    check_choice("arch", arch, ARCHS)
    d_in, d_out = check_positive_int("d_in", d_in), check_positive_int("d_out", d_out)
    hidden, layers = check_positive_int("hidden", hidden), check_positive_int("layers", layers)
    params = models.init(rng, model_spec(arch, layers, d_in, d_out, hidden, readout_scale))
    return {_our_name(k, layers): np.asarray(v, dtype=dtype) for k, v in params.items()}


def _our_name(key, layers):
    """models' "<i>.<name>" -> "l<i>/<name>", the readout after L layers -> "readout/<name>"."""
    i, name = key.split(".", 1)
    return f"readout/{name}" if int(i) == layers else f"l{i}/{name}"


def _models_name(key, layers):
    prefix, name = key.split("/", 1)
    return f"{layers if prefix == 'readout' else int(prefix[1:])}.{name}"


def _layers(params):
    return 1 + max(int(k.split("/")[0][1:]) for k in params if k.startswith("l"))


def _as_models(params):
    L = _layers(params)
    return {_models_name(k, L): v for k, v in params.items()}, L


def model_forward(params, x, arch, readout="all"):
    """y = readout(cell_L(... cell_1(x))): x (B, T, d_in) -> y (B, T, d_out); and the caches for backward.

    ``readout="last"`` returns y at the last step only, (B, 1, d_out), for losses that read only the final
    token (ICL's query): the gated RNN's last layer then runs its own ``readout="last"`` (output gating on h_T
    only, no scan); the other cells run every step and only the final one is passed on (``models.forward``).
    """
    check_choice("arch", arch, ARCHS)
    check_array("x", x, ndim=3, names=("B", "T", "d_in"))
    check_choice("readout", readout, ("all", "last"))
    p, L = _as_models(params)
    return models.forward(p, x, model_spec(arch, L), readout)


def model_backward(params, caches, dy, arch):
    """Gradients of the stack through each cell's own backward, layers in reverse. Returns (dx, grads)."""
    p, L = _as_models(params)
    dx, grads = models.backward(p, caches, dy, model_spec(arch, L))
    return dx, {k: grads[_models_name(k, L)] for k in params}


def n_params(params):
    """Total number of real parameters (complex LRU weights count twice: stored as real and imaginary)."""
    return models.n_params(params)


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
    d: int = 4                         # teacher: features (Sec. 4.1)
    T_teacher: int = 32                # teacher: sequence length (Sec. 4.1)
    teacher_seed: int = 1234           # teacher: the fixed LSA teacher
    T_icl: int = 12                    # icl: context pairs (App. C.1)
    d_x: int = 3                       # icl (App. C.1)
    d_y: int = 3                       # icl (App. C.1)
    n_eval: int = 20480                # fixed evaluation set size (icl: >= 20k tasks; teacher: sequences / 10)
    eval_seed: int = 2024
    dtype: str = "float32"


def task_spec(job):
    """(d_in, d_out, sample(rng, batch, dtype) -> (x, target), loss(y, target) -> (loss, dy), evalset).

    evalset: teacher (x, y*) float64; icl an ``icl_regression.Tasks`` (float64).
    """
    check_choice("task", job.task, TASKS)
    if job.task == "teacher":
        teacher = lsa_teacher.make_teacher(np.random.default_rng(job.teacher_seed), job.d)

        def sample(rng, batch, dtype):
            return lsa_teacher.sample_batch(rng, teacher, batch, job.T_teacher, dtype)

        evalset = sample(np.random.default_rng(job.eval_seed), max(1, job.n_eval // 10), np.float64)
        return job.d + 1, job.d, sample, lsa_teacher.mse, evalset

    def sample(rng, batch, dtype):
        tasks = icl_regression.sample(rng, batch, job.T_icl, job.d_x, job.d_y, dtype=dtype)
        return tasks.tokens, tasks.y_q

    def loss(y, y_q):
        # only the query (last token) is scored
        L, dy_q = icl_regression.query_loss(y[:, -1], y_q)
        dy = np.zeros_like(y)
        dy[:, -1] = dy_q
        return L, dy

    evalset = icl_regression.sample(np.random.default_rng(job.eval_seed), job.n_eval, job.T_icl, job.d_x, job.d_y)
    return icl_regression.token_dim(job.d_x, job.d_y), job.d_y, sample, loss, evalset


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

    Keys: val_loss (fixed evaluation set, float64), rel_loss (teacher: val_loss / var(y*); icl: val_loss /
    loss of one optimal GD step), baseline (teacher: var(y*), the best constant's loss; icl: GD's loss),
    n_params, ms_per_step, train_seconds, diverged (1 if the loss became NaN/inf), curve (40 train-loss means).
    """
    if isinstance(job, dict):
        job = Job(**job)
    d_in, d_out = task_spec(job)[:2]
    params = init_model(np.random.default_rng(job.seed), job.arch, d_in, d_out, job.hidden, job.layers,
                        job.readout_scale, job.dtype)
    return train_job(job, params)


def train_job(job: Job, params):
    """``run_job`` from given initial ``params`` (e.g. an ``init_model`` with one matrix rescaled): train them
    on ``job``'s task with its optimiser settings and evaluate; the same dict as ``run_job``."""
    check_choice("arch", job.arch, ARCHS)
    _, _, sample, loss, evalset = task_spec(job)
    if job.task == "icl":
        x_eval, t_eval = evalset.tokens, evalset.y_q
        baseline = gd.gd_loss_empirical(evalset, gd.eta_star(job.T_icl, job.d_x))
    else:
        x_eval, t_eval = evalset
        baseline = float(np.var(t_eval))
    dtype = np.dtype(job.dtype)
    params = {k: np.asarray(v, dtype) for k, v in params.items()}

    readout = "last" if job.task == "icl" else "all"    # ICL scores the query (last token) only

    def loss_and_grads(p, step, batch_rng):
        x, target = sample(batch_rng, job.batch, dtype)
        y, caches = model_forward(p, x, job.arch, readout)
        L, dy = loss(y, target)
        return L, model_backward(p, caches, dy.astype(dtype), job.arch)[1]

    schedule = functools.partial(cosine_schedule, total_steps=job.steps, peak_lr=job.lr,
                                 warmup_steps=min(job.warmup_steps, job.steps), final_lr=job.final_lr)
    t0 = time.perf_counter()
    diverged = 0
    try:
        result = train(loss_and_grads, params, job.steps, lr_schedule=schedule, progress=False,
                       rng=job.seed + 1, clip=job.clip)
        params, losses = result.params, result.losses
    except NonFiniteLossError:
        diverged, losses = 1, np.array([np.nan])
    seconds = time.perf_counter() - t0
    val = _evaluate(params, job.arch, x_eval, t_eval, loss, readout) if not diverged else float("nan")
    edges = np.linspace(0, len(losses), 41).astype(int)
    curve = [finite_or_nan(losses[a:b].mean()) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    return {"val_loss": finite_or_nan(val), "rel_loss": finite_or_nan(val / baseline), "baseline": float(baseline),
            "n_params": n_params(params), "ms_per_step": 1e3 * seconds / job.steps, "train_seconds": seconds,
            "diverged": diverged, "curve": curve}


# ---------------------------------------------------------------- the sweep

@dataclass
class Config:
    tasks: tuple = TASKS                          # Fig. 4A (teacher-student) and 4B (in-context regression)
    archs: tuple = ARCHS                          # Fig. 4: construction (diag./dense), LSTM, GRU, LRU variants
    hiddens: tuple = (4, 8, 16, 32, 64)           # ours: the paper sweeps the hidden size (x-axis: #params)
    layers: tuple = (1, 2)                        # Fig. 5 / App. B: 1 and 2 layers
    seeds: tuple = (0,)                           # ours, for CPU time (paper: several seeds per point)
    steps_teacher: int = 1500                     # ours (paper: far longer at lr 1e-3); CPU-sized
    steps_icl: int = 10_000                       # ours (ICL leaves the zero predictor slowly; steps are cheap)
    lr_teacher: float = 1e-2                      # ours (project notes: 1e-2 .. 2e-2 teacher-student)
    lr_icl: float = 3e-3                          # ours (project notes: 3e-3 at batch 64)
    batch: int = 64                               # ours
    d: int = 4                                    # Sec. 4.1: teacher-student with d = 4, T = 32
    n_eval: int = 20480                           # project notes: >= 20k evaluation tasks for ICL
    n_workers: int = 2                            # dask LocalCluster workers (these machines: ~1-2 cores)
    scheduler: Optional[str] = None               # "tcp://host:port" to run on a real dask cluster
    processes: bool = True                        # LocalCluster workers as processes (False: threads, tests)
    sweep_dir: Optional[str] = None               # job files; default data/zucchet/sweeps/architectures

    @classmethod
    def quick(cls):
        """A few sizes, 1 layer, 1 seed, short training (ICL needs longer to leave the zero predictor): about 5 minutes on one idle core."""
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


def summarise(records):
    """Group job records into rows (one per task, arch, hidden, layers; means over seeds) and the orderings."""
    groups = {}
    for r in records:
        c, res = r["config"], r["result"]
        groups.setdefault((c["task"], c["arch"], c["hidden"], c["layers"]), []).append(res)
    rows = []
    for (task, arch, hidden, layers), rs in sorted(groups.items()):
        vals = [x["val_loss"] for x in rs]
        rows.append({"task": task, "arch": arch, "hidden": hidden, "layers": layers, "n_params": rs[0]["n_params"],
                     "val_loss": float(np.nanmean(vals)) if not all(map(math.isnan, vals)) else float("nan"),
                     "rel_loss": float(np.nanmean([x["rel_loss"] for x in rs])) if not all(map(math.isnan, vals))
                     else float("nan"),
                     "baseline": rs[0]["baseline"], "seeds": len(rs), "diverged": int(sum(x["diverged"] for x in rs)),
                     "ms_per_step": float(np.mean([x["ms_per_step"] for x in rs]))})

    def best(task, archs):
        v = [row["rel_loss"] for row in rows if row["task"] == task and row["arch"] in archs]
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
    # rel_loss is loss / GD's loss on icl: below 1 means better than one optimal GD step
    out["icl_nonlinear_beats_gd"] = int(best("icl", NONLINEAR) < 1.0)
    return out


def _sweep_dir(config):
    return Path(config.sweep_dir) if config.sweep_dir else SWEEP_DIR / "architectures"


def finished(config: Config = None):
    """True if every run of ``config``'s grid is on disk, so that ``run(config)`` trains nothing."""
    config = Config() if config is None else config
    return all_on_disk(run_job, jobs(config), _sweep_dir(config), name="arch")


def run(config: Config = None, out_dir=None, progress=True):
    """Run (or resume) the sweep through dask and summarise it; also writes ``summary.json`` to out_dir."""
    config = Config() if config is None else config
    sweep_dir = _sweep_dir(config)
    t0 = time.perf_counter()
    records = run_sweep(run_job, jobs(config), sweep_dir, name="arch", scheduler=config.scheduler,
                        n_workers=config.n_workers, processes=config.processes, progress=progress,
                        desc="architectures")
    return with_sweep_summary(summarise(records), records, time.perf_counter() - t0, out_dir)


def plot(result, out_dir):
    """Fig. 4/5: validation loss (relative) vs parameter count, one panel per task; 1 layer solid, 2 dashed."""
    plt = pyplot()

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    titles = {"teacher": "teacher-student (Fig. 4A): MSE / var(y*)", "icl": "in-context regression (Fig. 4B): loss / GD"}
    for ax, task in zip(axes, TASKS):
        for i, arch in enumerate(ARCHS):
            for layers, ls in ((1, "-"), (2, "--")):
                rows = [r for r in result["rows"] if r["task"] == task and r["arch"] == arch and r["layers"] == layers]
                if rows:
                    rows.sort(key=lambda r: r["n_params"])
                    ax.loglog([r["n_params"] for r in rows], [r["rel_loss"] for r in rows], ls, marker="o",
                              color=f"C{i}", label=f"{arch}" if layers == 1 else None)
        if task == "icl":
            ax.axhline(1.0, color="k", lw=0.8, ls=":", label="one optimal GD step")
        ax.set_xlabel("parameters")
        ax.set_title(titles[task])
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / "architectures.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]
