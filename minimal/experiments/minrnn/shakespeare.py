"""Character-level language modelling on Shakespeare: minGRU, minLSTM and a Transformer (Feng et al., "Were RNNs
All We Needed?" (2024), Sec. 4.2 "Language Modeling" and Fig. 2; App. C.1-C.3).

The models (``shakespeare_model``; ``KINDS`` names them): minGRU and minLSTM in App. C.1's
block (RNN at width 2 D, causal convolution of size 4, MLP), three blocks, in log space ("mingru", "minlstm",
App. B.3, the form the paper trains) or as the vanilla cells ("mingru_vanilla", "minlstm_vanilla": another
function of the same weights); and nanoGPT's Transformer ("attention": learned positions, N_HEADS-head causal
attention, MLP, no convolution). A vanilla model starts from the same initial weights and sees the same batches
as its log-space twin.

Training (``run``): ``minimal.run.train`` with AdamW and global-norm clipping at 1.0; each step draws B random windows
of T + 1 characters (``tasks.char_lm``) and dropout masks from the training Generator, so a checkpointed run
resumes bit for bit. Every ``eval_every`` = 25 steps (App. C.2) the model is evaluated (dropout off) on a fixed
subset of test windows; "best test loss" and "steps to best" are read from those evaluations, as the paper reports
its best. ``Config()`` trains each model until its best test loss stops improving (``minimal.run.stopping.
ReduceOnPlateau``: 3e-3 after 100 warm-up steps; when 500 steps pass without the subset loss falling 0.005 nats
below where it last did, the rate is cut tenfold; the plateau after the second cut stops the run, 12,000 steps
cap it) and scores its best evaluated weights; the other Configs (``patience=None``) run a cosine schedule to the
end. The scored model is also evaluated on every test window ("final_test_loss").

The committed runs (``data/minrnn/``), each with the command that makes it, and the CPU time a training step:
``shakespeare_runs``; what they find: ``shakespeare_summary``.

Differs from the paper (App. C.2 trains D = 384, B = 64, 5,000 steps on a GPU and gives no context length or
parameter count; we have one shared CPU core):
    - width D = 64 instead of 384, context T = 128 (nanoGPT's shakespeare_char: 256), batch 16 instead of 64:
      about 0.2 M parameters; our losses are higher than the paper's, and the comparison made is between models
      of equal size;
    - how long each model trains: ``Config()`` until its best test loss stops improving, by the plateau rule
      above (ours: the paper trains 5,000 steps and reports each model's best, which its models pass and then
      leave as they over-fit, Fig. 2); the learning rate 3e-3 with tenfold cuts at plateaus is a choice of ours
      (App. C.2: AdamW at 1e-3, no schedule given); ``Config.fixed()``, ``small()`` and ``quick()`` run a cosine
      schedule from 3e-3 to 1e-4 over their length (a fixed-length run's best is near its end, where the rate has
      run out, so its steps to best measure the schedule);
    - dropout 0.1 instead of 0.2 (a choice, not a measured optimum);
    - the Transformer has N_HEADS = 4 heads of D / 4 features (8 in Config.small(), 16 at D = 64; nanoGPT's
      shakespeare_char: 6 heads of 64 at D = 384; 32 and 64 are not divisible by 6), no biases in W_Q, W_K, W_V,
      dropout on each sublayer's output but not on the attention weights, and each module's own initialisation
      (nanoGPT: N(0, 0.02) everywhere); its positional embedding is N(0, 0.02) as nanoGPT's;
    - the minimal RNNs' block is App. C.1's (RNN, convolution, MLP), so the Transformer (no convolution, width D)
      has fewer parameters than minGRU / minLSTM (``n_params`` in the metrics);
    - three seeds (``seed_curves``, ``across_seeds``; the paper gives one number per model);
    - the test loss on a fixed subset of 64 test windows (8,192 targets) every 25 steps, and the scored model on
      all 871 windows; the data is our rebuild of tiny shakespeare (``data/shakespeare``);
    - no Mamba (its number is quoted from the paper).

Glossary: B batch, T context length, D model width, H = 2 D the RNN's width, V = 70 characters, L blocks.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional

import numpy as np

from .._plotting import pyplot
from ...run import speed, io
from ... import models
from ...data import data_path, load_json
from ...run.evaluations import Evaluations
from ...run.stopping import ReduceOnPlateau
from ...run.verdicts import Tolerance
from ...tasks import char_lm
from ...run.train import TrainSetup, train
from .shakespeare_figures import plot_curves
# the models (their own module); the training loop below looks ``evaluate`` up here
from .shakespeare_model import (KINDS, N_HEADS, T_MAX, base_kind, evaluate, generate, init_lm, is_log_space,
                                lm_loss_and_grads)
from .shakespeare_summary import summarise

__all__ = ["Config", "PAPER", "run", "finished", "plot", "save_weights", "load_curves", "WEIGHTS", "CURVES",
           "FIXED_WEIGHTS", "FIXED_CURVES", "SMALL_WEIGHTS", "SMALL_CURVES", "VANILLA_WEIGHTS", "VANILLA_CURVES"]

# Sec. 4.2 / Fig. 2: best test loss (nats per character) and the step it was reached at (D = 384, 3 layers); the
# keys are those of run()'s flat metrics, so ``reproduce`` puts them side by side.
PAPER = {
    "test_loss_mingru": 1.548, "test_loss_minlstm": 1.555, "test_loss_attention": 1.547, "test_loss_mamba": 1.575,
    "steps_to_best_mingru": 575, "steps_to_best_minlstm": 625,
    "steps_to_best_attention": 2000,          # "requiring 2000 steps (~2.5x) more training steps than minGRU"
    "steps_to_best_mamba": 400,
    "ratio_mingru_to_transformer": 1.548 / 1.547, "ratio_minlstm_to_transformer": 1.555 / 1.547,
    # the Transformer's steps to best over minGRU's: "requiring 2000 steps (~2.5x) more training steps than
    # minGRU" (Sec. 4.2): 2000 / 575 = 3.48 as many, i.e. (2000 - 575) / 575 = 2.48x more
    "steps_ratio_attention_to_mingru": 2000 / 575,
    # the same sentence read at equal loss, "to achieve comparable performance": the Transformer's steps to its
    # best over the steps minGRU needs to first reach that loss (``summarise``)
    "steps_ratio_attention_to_mingru_at_transformer_best": 2000 / 575,
}
# The paper trains the log-space cells (App. B.3); our vanilla models are set against the same numbers.
PAPER |= {k.replace(m, f"{m}_vanilla"): v for k, v in list(PAPER.items()) for m in ("mingru", "minlstm")
          if f"_{m}" in k and "attention_to" not in k}

# minimal.run.report verdicts: the paper's claim is comparability, so a ratio to the Transformer matches within 3 %
# (CLAIM) and is close within 10 %; the rest keep the report's default (±5 % / ±25 %).
TOLERANCE = {k: Tolerance("rel", 0.03, 0.10) for k in PAPER if k.startswith("ratio_")}

_SEED_INDEX = {"mingru": 0, "minlstm": 1, "attention": 2}   # a vanilla model starts from its log-space twin's init
# The models' names in tables and figures
LABELS = {"mingru": "minGRU", "minlstm": "minLSTM", "attention": "Transformer", "mamba": "Mamba",
          "mingru_vanilla": "minGRU (vanilla)", "minlstm_vanilla": "minLSTM (vanilla)"}

WEIGHTS = data_path("minrnn", "shakespeare_full.npz")          # Config(), seed 0: trained until the best stops
CURVES = data_path("minrnn", "shakespeare_full.json")           # improving (seeds 1, 2: shakespeare_full_seed<s>.json)
FIXED_WEIGHTS = data_path("minrnn", "shakespeare_fixed.npz")    # Config.fixed(), seed 0: 2,400 steps
FIXED_CURVES = data_path("minrnn", "shakespeare_fixed.json")    # (seeds 1, 2: shakespeare_fixed_seed<s>.json)
SMALL_WEIGHTS = data_path("minrnn", "shakespeare_small.npz")     # Config.small()
SMALL_CURVES = data_path("minrnn", "shakespeare_small.json")
# The first committed run, vanilla cells only (every 100 steps); its "attention" curve is the earlier Transformer
# (one head, no positional embedding, the RNN block's convolution), kept for reference; its weights are not.
VANILLA_WEIGHTS = data_path("minrnn", "shakespeare_vanilla.npz")
VANILLA_CURVES = data_path("minrnn", "shakespeare_vanilla.json")


@dataclass
class Config:
    """The full run (``Config()``): every model trained until its best test loss stops improving (App. C.2's
    models are "evaluated every 25 steps" and their best is reported). With ``patience`` set, the learning rate is
    ``minimal.run.stopping.ReduceOnPlateau``'s: ``lr`` after the warm-up until ``patience`` steps pass without the
    test-subset loss falling ``min_gain`` (small falls add up), then ``factor`` times lower, ``reductions`` times;
    the run stops at the plateau after the last reduction, or at ``steps`` (the cap). With ``patience=None`` (the
    classmethods) a cosine schedule runs from ``lr`` to ``final_lr`` over ``steps``. ``fixed()`` is the
    fixed-length run at this size (2,400 steps)."""
    D: int = 64                   # ours (App. C.2: embedding dimension 384)
    n_layers: int = 3             # App. C.2: three layers
    T: int = T_MAX                # ours (nanoGPT shakespeare_char: block size 256; the paper does not say)
    batch: int = 16               # ours (App. C.2: 64)
    steps: int = 12_000           # the cap (App. C.2: 5,000 steps); CPU time a step: ``shakespeare_runs.STEP_CPU``
    lr: float = 3e-3              # ours, the first rate after warm-up (App. C.2: 1e-3, no schedule): a choice for
                                  # a small model on a CPU budget, not a measured optimum
    final_lr: float = 1e-4        # the cosine's floor at ``steps`` (runs with patience=None)
    warmup: int = 100             # ours
    clip: float = 1.0             # App. C.2: gradients clipped to 1.0
    dropout: float = 0.1          # ours (App. C.2: 0.2): a 0.2 M-parameter model under-fits rather than over-fits
                                  # (a choice, not a measured optimum)
    weight_decay: float = 0.0     # the paper gives none for language modelling
    expansion: int = 2            # App. C.2: "an expansion factor of 2"
    kernel: int = 4               # App. C.1: convolution kernel size 4
    eval_every: int = 25          # as the paper (App. C.2: "evaluated every 25 steps")
    eval_windows: int = 64        # ours: the fixed test subset (64 x 128 = 8,192 targets) evaluated every
                                  # eval_every steps
    patience: Optional[int] = 500  # stop once the best test-subset loss has not fallen min_gain for this many
                                   # steps (None: train all ``steps``)
    min_gain: float = 0.005       # nats per character that count as an improvement (ours)
    factor: float = 0.1           # the learning rate's cut at each plateau (ours)
    reductions: int = 2           # cuts before the run stops at a plateau: 3e-3, 3e-4, 3e-5 (ours)
    kinds: tuple = ("mingru", "minlstm", "attention", "mingru_vanilla")   # KINDS (also "minlstm_vanilla")
    sample_chars: int = 300       # characters generated from each trained model (the Transformer: at most
                                  # T - 1, the positions its learned embedding has)
    seed: int = 0
    dtype: str = "float32"        # training precision (faster than float64 on a CPU)

    def __post_init__(self):
        """Every field checked by its own name before any training (``minimal.validate.check_config``)."""
        from ...validate import check_config
        check_config(self, {**dict.fromkeys(("D", "n_layers", "T", "batch", "steps", "expansion", "kernel",
                                              "eval_every", "eval_windows"), "int>=1"),
                            "lr": "float>0", "clip": ("optional", "float>0"), "dropout": "[0,1)",
                            "sample_chars": "int>=0", "patience": ("optional", "int>=1"), "min_gain": "float>=0",
                            "factor": "(0,1]", "reductions": "int>=0",
                            "kinds": ("subset of", KINDS), "dtype": ("one of", ("float32", "float64"))})
        if self.factor == 1:
            from ...validate import InputError
            raise InputError("Config.factor must be in (0, 1) (the learning rate's cut at a plateau), got 1")
        # the sizes: one layer's hidden states of a training batch, (batch, T, expansion D), must fit in memory
        from ...validate import check_fits
        check_fits(f"Config.D={self.D}, T={self.T}, batch={self.batch}, expansion={self.expansion} (one layer's "
                   f"{self.dtype} hidden states, batch x T x expansion D)",
                   np.dtype(self.dtype).itemsize * self.batch * self.T * self.expansion * self.D,
                   "choose a smaller D, T or batch")

    @classmethod
    def from_saved(cls, saved):
        """The Config of a saved run's ``config`` dict (lists back to tuples); a run saved before the stopping rule
        existed has no "patience" key and ran its whole cosine schedule (patience None)."""
        saved = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}
        return cls(**{"patience": None, **saved})

    @classmethod
    def fixed(cls, **kw):
        """The fixed-length run (committed as ``FIXED_CURVES``): a cosine schedule from 3e-3 to 1e-4 over 2,400
        steps, no stopping rule; ``kw`` replaces fields."""
        return cls(**{"steps": 2400, "patience": None, **kw})

    @classmethod
    def small(cls):
        """The committed three-way comparison (``SMALL_CURVES``): log-space minGRU and minLSTM, vanilla minGRU and
        the Transformer at D = 32, T = 64, 400 steps (cosine to 1e-4), evaluated every 25 steps."""
        return cls(D=32, T=64, batch=16, steps=400, warmup=40, patience=None, eval_every=25,
                   eval_windows=64, kinds=("mingru", "attention", "minlstm", "mingru_vanilla"), sample_chars=63)

    @classmethod
    def quick(cls):
        """A few minutes: minGRU in log space and vanilla, and the Transformer, at D = 48, T = 64, 300 steps."""
        return cls(D=48, T=64, batch=16, steps=300, warmup=30, patience=None, eval_every=50,
                   eval_windows=32, kinds=("mingru", "mingru_vanilla", "attention"), sample_chars=200)


# --- weights --------------------------------------------------------------------------------------------------
def save_weights(path, params_by_kind, config, meta=None):
    """Write {kind: params} and the run's ``config`` (with ``meta``, e.g. the metrics) as ``<name>.npz`` + its JSON
    sidecar ``<name>.json`` (``minimal.run.io.save_weights``, groups ``<kind>/<name>``), each atomically."""
    io.save_weights(path, params_by_kind, config, meta)


def load_curves(path=CURVES):
    """The metrics JSON written beside the weights by ``run(save_weights_path=...)``."""
    return load_json(path)


# --- the run --------------------------------------------------------------------------------------------------
class _Converged(Exception):
    """Raised from inside ``train`` once the best test loss stopped improving (``Config.patience``)."""


class _Trained(NamedTuple):
    params: dict            # the scored params: the best evaluated ones with config.patience, else the last
    losses: np.ndarray      # (steps_run,) the training loss of every step, a resumed run's earlier ones included
    curve: dict             # {step: test-subset loss}
    seconds: float          # wall seconds of this process's training, evaluations left out
    cpu: float              # CPU seconds of the same
    steps_run: int
    stopped: bool           # the stopping rule ended the run (not the cap)
    resumed_from: Optional[int]
    trained: int            # steps trained by this process
    cuts: list              # the steps where the learning rate was cut


def _train_one(kind, config, data, eval_set, checkpoint_path, progress):
    """Train one model (``_Trained``). With ``config.patience`` the scored params are the best evaluated ones (kept
    beside the checkpoint, so a resumed run keeps them); without, the last."""
    rng = np.random.default_rng([config.seed, _SEED_INDEX[base_kind(kind)]])
    V = len(data.vocab)
    params = init_lm(rng, kind, V, config.D, config.n_layers, config.expansion, config.kernel, config.dtype,
                     T_max=config.T)
    log = Evaluations(checkpoint_path, meta={"kind": kind})
    curve = log.curve
    sched = None
    if config.patience is not None:
        sched = ReduceOnPlateau.replay(curve, lr=config.lr, patience=config.patience, min_gain=config.min_gain,
                                       factor=config.factor, reductions=config.reductions, warmup=config.warmup)
    t_eval = [0.0]
    seen = []

    def record(step, p):
        t0 = time.perf_counter()
        loss = evaluate(p, eval_set, kind)
        t_eval[0] += time.perf_counter() - t0
        log.record(step, loss, p, best=sched is not None and sched.update(step, loss))

    def loss_and_grads(p, step, g):
        if step % config.eval_every == 0:
            record(step, p)
            if sched is not None and sched.done:
                raise _Converged
        loss, grads = lm_loss_and_grads(p, char_lm.sample_batch(data.train, config.batch, config.T, g), kind,
                                        config.dropout, g)
        seen.append(loss)
        return loss, grads

    setup = TrainSetup(lr=config.lr, steps=config.steps, warmup=config.warmup, final_lr=config.final_lr,
                       weight_decay=config.weight_decay, clip=config.clip, seed=config.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        # the plateau rule's rate with config.patience, else the setup's cosine; the batches continue the stream
        # that drew the model (one per kind, as the committed runs were drawn)
        res = train(loss_and_grads, params, setup=setup, lr_schedule=sched.lr if sched is not None else None,
                    rng=rng, checkpoint_path=checkpoint_path, checkpoint_every=config.eval_every, progress=progress,
                    desc=LABELS[kind],
                    config={**dataclasses.asdict(config), "kinds": None, "sample_chars": None, "kind": kind})
        record(config.steps, res.params)
        out, losses, stopped, resumed = res.params, res.losses, False, res.resumed_from
        trained = res.steps_trained
    except _Converged:
        # train raised out, so there is no TrainResult: the losses are the checkpoint's (a resumed run) and those
        # this process saw
        out, losses, stopped, resumed, trained = None, log.losses(seen), True, log.resumed_from, len(seen)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    if sched is not None:
        out = log.best_params
    # (a cut at the cap's evaluation would have trained no step)
    cuts = [] if sched is None else [s for s in sched.starts if s < config.steps]
    return _Trained(out, losses, curve, seconds - t_eval[0], cpu, max(curve), stopped, resumed, trained, cuts)


def finished(config):
    """True when ``config`` is the Config of the committed seed-0 run (``CURVES``, beside ``WEIGHTS``): ``run``
    then loads it instead of training, as a sweep loads a grid that is on disk (``reproduce --quick`` reports it)."""
    if not (Path(CURVES).is_file() and Path(WEIGHTS).is_file()):
        return False
    try:
        saved = load_curves(CURVES)
        return Config.from_saved(saved["config"]) == config and set(saved.get("models", ())) == set(config.kinds)
    except (ValueError, KeyError, TypeError):
        return False


def run(config: Config = None, out_dir=None, progress=True, save_weights_path=None):
    """Train every model in ``config.kinds`` and compare their test losses with the paper's (module docstring).

    A ``config`` whose run is committed (``finished``: ``Config()``, seed 0) is loaded from ``CURVES``, not trained,
    unless ``save_weights_path`` asks for new weights (``reproduce --full``); delete the file to retrain.

    Args:
        config: a ``Config`` (default: the full run); out_dir: folder for the per-model
            checkpoints (a re-run with the same out_dir resumes an interrupted run); progress: tqdm bars;
        save_weights_path: write the trained params there (``save_weights``) and the metrics beside it (.json).
    Returns:
        metrics: per model "curve_steps" / "curve" (test-subset loss), "best_test_loss", "steps_to_best",
        "final_test_loss" (all test windows), "train_loss_tail", "n_params", "train_seconds", "sample",
        "log_space", "eval_every"; "ratio_to_transformer" and "claim_holds" per minimal RNN; the flat metrics of
        ``summarise``; "paper"; "config".
    """
    config = Config() if config is None else config
    if save_weights_path is None and finished(config):
        # summarise again: metrics added since the run was saved are computed from its curves
        out = summarise({k: v for k, v in load_curves(CURVES).items() if k != "weights"})
        out["loaded_from"] = str(CURVES)
        return out
    speed.tune()
    data = char_lm.load()
    if config.eval_windows > (data.test.size - 1) // config.T:
        from ...validate import InputError
        raise InputError(f"Config.eval_windows must be <= {(data.test.size - 1) // config.T} (the test text's windows "
                         f"of T = {config.T}), got {config.eval_windows}")
    eval_set = char_lm.eval_windows(data.test, config.T, config.eval_windows)
    full_set = char_lm.eval_windows(data.test, config.T)
    out = {"models": {}, "paper": PAPER, "config": dataclasses.asdict(config), "n_heads": N_HEADS, "vocab": data.vocab,
           "n_eval_targets": int(eval_set[:, 1:].size), "n_test_targets": int(full_set[:, 1:].size)}
    params_by_kind = {}
    for kind in config.kinds:
        ckpt = None if out_dir is None else Path(out_dir) / f"{kind}_checkpoint.npz"
        if ckpt is not None:
            ckpt.parent.mkdir(parents=True, exist_ok=True)
        r = _train_one(kind, config, data, eval_set, ckpt, progress)
        params, train_losses, curve = r.params, r.losses, r.curve
        params_by_kind[kind] = params
        steps = sorted(curve)
        losses = [curve[s] for s in steps]
        best = int(np.argmin(losses))
        prompt = char_lm.encode("\n", data.vocab)
        n_chars = config.sample_chars if base_kind(kind) != "attention" else min(config.sample_chars,
                                                                                  config.T - prompt.size)
        ids = generate(params, kind, prompt, n_chars,
                       np.random.default_rng([config.seed, 1, _SEED_INDEX[base_kind(kind)]]))
        out["models"][kind] = {
            "log_space": is_log_space(kind), "eval_every": config.eval_every, "curve_steps": steps, "curve": losses, "best_test_loss": losses[best], "steps_to_best": steps[best],
            "final_test_loss": evaluate(params, full_set, kind),
            "train_loss_tail": float(np.mean(train_losses[-max(1, len(train_losses) // 20):]))
            if len(train_losses) else None,
            "train_curve": [float(np.mean(c)) for c in np.array_split(train_losses, min(50, len(train_losses)))]
            if len(train_losses) else [],
            "n_params": models.n_params(params), "train_seconds": r.seconds, "cpu_seconds": r.cpu,
            # a resumed, finished run trains no step: its time per step was not measured (NaN, not seconds / 1)
            "ms_per_step": 1e3 * r.seconds / r.trained if r.trained else float("nan"),
            "steps_run": r.steps_run, "stopped_early": r.stopped, "lr_cut_steps": r.cuts,
            "resumed_from": r.resumed_from, "sample": char_lm.decode(ids, data.vocab)}
    out = summarise(out)
    if save_weights_path is not None:
        save_weights(save_weights_path, params_by_kind, config, out)   # the metrics are the sidecar's metadata
    return out


def plot(metrics, out_dir):
    """Fig. 2: test loss against training steps for each model; the paper's best losses as dotted lines in the
    model's colour, one legend entry for all of them."""
    plt = pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    plot_curves(ax, metrics, PAPER, LABELS)
    fig.tight_layout()
    path = out_dir / "shakespeare.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]


