"""Character-level language modelling on Shakespeare: minGRU, minLSTM and a Transformer of the same size (Feng et
al., "Were RNNs All We Needed?" (2024), Sec. 4.3 and Fig. 2; App. C.1-C.3).

The model (App. C.1, ``models`` stack of registered modules):

    e_t = E[x_t]                                     token embedding (V, D)            ``layers.embedding``
    h   = Block_L(... Block_1(e))                    L = 3 pre-LN residual blocks      ``cells.min_block``
          Block: x + Drop(W_out RNN(LN x)), x + Drop(Conv_4(LN x)), x + Drop(MLP(LN x))
    z_t = LN(h_t) W_head + b_head                    logits (V,)                       ``layers.layernorm``,
                                                                                       ``layers.linear``
    L   = mean_t CE(z_t, x_{t+1})                    next-character loss (nats)        ``layers.cross_entropy``

with RNN = minGRU, minLSTM (parallel mode: the scan) or causal single-head softmax attention. All three models share
every part but the mixer, so their parameter counts differ only by the mixer's weights, per block minGRU 2 H D + 2 H,
minLSTM 3 H D + 3 H, attention 3 H D (W_Q, W_K, W_V; no biases). The Transformer gets
no positional embedding: the causal convolution and the causal mask carry the order (a "NoPE" Transformer); this
lets it generate past its training length with the same growing KV cache.

Generation (``generate``): token by token in RNN mode, ``min_block.step_forward``. minGRU / minLSTM carry a fixed
(B, H) state per block and the convolution's last 3 inputs: constant memory. The Transformer's state is its KV
cache, (B, t, H) keys and values per block, growing by one key and one value each step: a Transformer is an RNN
whose state is the KV cache. ``step_logits`` equals the whole-sequence forward's logits (tests).

Training (``run``): ``minimal.train`` with AdamW, global-norm clipping at 1.0 and a cosine schedule sized to the
run; each step draws B random windows of T + 1 characters (``tasks.char_lm``) and dropout masks from the
training Generator, so a checkpointed run resumes bit for bit. Every ``eval_every`` steps the model is
evaluated (dropout off) on a fixed subset of test windows; the end of the run also on every test window.

Differs from the paper (App. C.2 trains D = 384, B = 64, 5,000 steps on a GPU; we have one shared CPU core):
    - width D = 64 instead of 384, context T = 128 (nanoGPT's shakespeare_char: 256), batch 16 instead of 64,
      2,400 steps instead of 5,000: about 0.2 M parameters instead of ~10 M and 5 M training characters seen
      instead of ~80 M, so our losses are higher; only the comparison at equal size and steps carries over;
    - learning rate 3e-3 peak (cosine to 1e-4, 100 warm-up steps) instead of 1e-3: measured better for short
      runs (``Config``); dropout 0.1 instead of 0.2 (a model this small under-fits in 2,400 steps);
    - one attention head (the paper's Transformer has 6), no positional embedding, and the same causal
      convolution as the RNN blocks (the paper's Transformer is nanoGPT's: learned positions, no convolution);
    - the vanilla (not log-space) minGRU / minLSTM: both are exact; log space (App. B.3) is slower on a CPU;
    - the test loss on a fixed subset of 64 test windows every 100 steps, and the final model on all 871
      windows (the paper: every 25 steps); the data is our rebuild of tiny shakespeare (``data/shakespeare``);
    - no Mamba (its number is quoted from the paper).

Glossary: B batch, T context length, D model width, H = 2 D the mixer's width, V = 70 characters, L blocks.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import write_metrics
from .._plotting import pyplot
from ... import _speed, models
from ..._atomic import atomic_write
from ...cells import min_block
from ...data import check_saved_shapes, damaged, data_path, load_groups, load_json, save_groups
from ...layers import cross_entropy, layernorm, linear
from ...models import Layer
from ...optim import cosine_schedule
from ...tasks import char_lm
from ...train import train

__all__ = ["Config", "PAPER", "KINDS", "run", "plot", "table", "summarise", "spec", "init_lm", "lm_forward",
           "lm_loss_and_grads", "evaluate", "step_logits", "generate", "state_nbytes", "save_weights",
           "load_weights", "load_curves", "WEIGHTS", "CURVES"]

# Sec. 4.3 / Fig. 2: best test loss (nats per character) and the step it was reached at (D = 384, 3 layers); the
# keys are those of run()'s flat metrics, so ``reproduce`` puts them side by side.
PAPER = {
    "test_loss_mingru": 1.548, "test_loss_minlstm": 1.555, "test_loss_attention": 1.547, "test_loss_mamba": 1.575,
    "steps_to_best_mingru": 575, "steps_to_best_minlstm": 625,
    "steps_to_best_attention": 2000,          # "requiring 2000 steps (~2.5x) more training steps than minGRU"
    "steps_to_best_mamba": 400,
    "ratio_mingru_to_transformer": 1.548 / 1.547, "ratio_minlstm_to_transformer": 1.555 / 1.547,
}
KINDS = ("mingru", "minlstm", "attention")
LABELS = {"mingru": "minGRU", "minlstm": "minLSTM", "attention": "Transformer", "mamba": "Mamba"}
CLAIM = 0.03   # "comparable": minGRU / minLSTM at most 3 % above the same-size Transformer's test loss

WEIGHTS = data_path("minrnn", "shakespeare_full.npz")
CURVES = data_path("minrnn", "shakespeare_full.json")


@dataclass
class Config:
    D: int = 64                   # ours (App. C.2: embedding dimension 384)
    n_layers: int = 3             # App. C.2: three layers
    T: int = 128                  # ours (nanoGPT shakespeare_char: block size 256; the paper does not say)
    batch: int = 16               # ours (App. C.2: 64)
    steps: int = 2400             # ours (App. C.2: 5,000); ~0.3 s a step per model on one loaded CPU core
    lr: float = 3e-3              # ours, peak of the cosine (App. C.2: 1e-3). Measured at D = 64, T = 64,
                                  # B = 32, 300 steps: test loss 1.99 (minGRU) / 2.05 (Transformer) at 3e-3
                                  # against 2.16 / 2.23 at 1e-3
    final_lr: float = 1e-4        # ours: the cosine's floor at the last step
    warmup: int = 100             # ours
    clip: float = 1.0             # App. C.2: gradients clipped to 1.0
    dropout: float = 0.1          # ours (App. C.2: 0.2): a 0.2 M-parameter model sees ~5 M characters here and
                                  # under-fits rather than over-fits (a choice, not a measured optimum)
    weight_decay: float = 0.0     # the paper gives none for language modelling
    expansion: int = 2            # App. C.2: "an expansion factor of 2"
    kernel: int = 4               # App. C.1: convolution kernel size 4
    eval_every: int = 100         # ours (App. C.2: every 25 steps)
    eval_windows: int = 64        # ours: the fixed test subset (64 x 128 = 8,192 targets) evaluated every
                                  # eval_every steps
    kinds: tuple = KINDS
    sample_chars: int = 300       # characters generated from each trained model
    seed: int = 0
    dtype: str = "float32"        # training precision (project notes: 2x faster than float64)

    def __post_init__(self):
        """Every field checked by its own name before any training (``minimal.validate.check_config``)."""
        from ...validate import check_config
        check_config(self, {**dict.fromkeys(("D", "n_layers", "T", "batch", "steps", "expansion", "kernel",
                                              "eval_every", "eval_windows"), "int>=1"),
                            "lr": "float>0", "clip": ("optional", "float>0"), "dropout": "[0,1)",
                            "sample_chars": "int>=0",
                            "kinds": ("subset of", KINDS), "dtype": ("one of", ("float32", "float64"))})

    @classmethod
    def quick(cls):
        """A couple of minutes for all three models: D = 48, T = 64, 300 steps."""
        return cls(D=48, T=64, batch=16, steps=300, warmup=30, eval_every=50, eval_windows=32,
                   sample_chars=200)


# --- the model ----------------------------------------------------------------------------------------------
def spec(kind, V, D, n_layers, expansion=2, kernel=4, dropout=0.0, rng=None, train=False):
    """The ``models`` stack: embedding, ``n_layers`` min_block blocks, LayerNorm, linear head.

    ``dropout``, ``rng`` (a Generator: new masks each call) and ``train`` go into each block's forward keywords,
    so a training step builds its own spec; init reads only the init keywords."""
    block = Layer("min_block", {"D": D, "kind": kind, "expansion": expansion, "k": kernel},
                  {"kind": kind, "dropout_rate": dropout, "rng": rng, "train": train})
    return ((Layer("embedding", {"V": V, "D": D}),) + (block,) * n_layers
            + (Layer("layernorm", {"D": D}), Layer("linear", {"D_in": D, "D_out": V})))


def init_lm(rng, kind, V, D, n_layers, expansion=2, kernel=4, dtype="float32"):
    """Params "<i>.<name>": 0 embedding, 1..L blocks, L+1 LayerNorm, L+2 head."""
    return models.init(rng, spec(kind, V, D, n_layers, expansion, kernel), dtype=np.dtype(dtype))


def _shape(params):
    """(V, D, L) read from params."""
    V, D = params["0.E"].shape
    return V, D, max(int(k.split(".")[0]) for k in params) - 2


def lm_forward(params, x, kind, dropout=0.0, rng=None, train=False):
    """Logits (B, T, V) of token ids x (B, T), and the stack's cache."""
    V, D, L = _shape(params)
    s = spec(kind, V, D, L, dropout=dropout, rng=rng, train=train)
    return models.forward(params, x, s)


def lm_loss_and_grads(params, windows, kind, dropout=0.0, rng=None):
    """Mean next-character cross-entropy (nats) of (B, T + 1) windows and its gradients (training mode)."""
    x, y = char_lm.split_xy(windows)
    z, cache = lm_forward(params, x, kind, dropout, rng, train=True)
    loss, c = cross_entropy.forward({}, z, y)
    dz, _ = cross_entropy.backward({}, c, np.ones((), z.dtype))
    _, grads = models.backward(params, cache, dz)
    return float(loss), grads


def evaluate(params, windows, kind, batch=64):
    """Mean cross-entropy over every target of ``windows`` (N, T + 1), dropout off, in float64 sums."""
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        x, y = char_lm.split_xy(windows[i:i + batch])
        z, _ = lm_forward(params, x, kind)
        total += float(cross_entropy.forward({}, z, y)[0]) * y.size
        count += y.size
    return total / count


def _sub(params, prefix):
    n = len(prefix)
    return {k[n:]: v for k, v in params.items() if k.startswith(prefix)}


def step_logits(params, states, tokens, kind):
    """One generation step in RNN mode. tokens: (B,) ids; states: a list of L ``min_block.BlockState`` (or None
    before the first step). Returns logits (B, V) and the new states."""
    V, D, L = _shape(params)
    states = [None] * L if states is None else states
    h = params["0.E"][tokens]
    new = []
    for i in range(L):
        h, s = min_block.step_forward(_sub(params, f"{i + 1}."), states[i], h, kind)
        new.append(s)
    u = layernorm.forward(_sub(params, f"{L + 1}."), h)[0]
    return linear.forward(_sub(params, f"{L + 2}."), u)[0], new


def state_nbytes(states):
    """Bytes of the arrays a generation carries from one step to the next (RNN states, conv buffers, KV caches)."""
    def walk(s):
        if isinstance(s, np.ndarray):
            return s.nbytes
        if isinstance(s, (tuple, list)):
            return sum(walk(v) for v in s)
        return 0
    return int(walk(states))


def generate(params, kind, prompt_ids, n, rng, temperature=1.0, return_memory=False):
    """Sample ``n`` >= 0 characters after ``prompt_ids`` (1-d integer ids in [0, V), at least one), one token at
    a time in RNN mode, from softmax(logits / temperature); temperature 0 takes the most likely token (greedy).

    Returns the (n,) sampled ids and, with ``return_memory``, the bytes of the carried state after each of the
    len(prompt) + n - 1 steps. Raises InputError naming ``temperature``, ``prompt_ids`` or ``n`` when bad."""
    from ...validate import InputError, check_positive_int   # here: this function's own checks
    V = _shape(params)[0]
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.integer, np.floating)) \
            or not np.isfinite(temperature) or temperature < 0:
        raise InputError(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}")
    n = check_positive_int("n", n, minimum=0)
    prompt_ids = np.asarray(prompt_ids)
    if prompt_ids.ndim != 1 or prompt_ids.size < 1 or (prompt_ids.dtype.kind not in "iu"):
        raise InputError(f"prompt_ids must be a 1-d integer array of at least one token id, got "
                         f"{prompt_ids.dtype} of shape {prompt_ids.shape}")
    bad = np.flatnonzero((prompt_ids < 0) | (prompt_ids >= V))
    if bad.size:
        raise InputError(f"prompt_ids must lie in [0, V = {V}), got prompt_ids[{bad[0]}] = {prompt_ids[bad[0]]}")
    prompt_ids = prompt_ids.astype(np.int64)
    states, memory, out = None, [], []
    tok = prompt_ids[:1]
    for t in range(prompt_ids.size + n - 1):
        z, states = step_logits(params, states, tok, kind)
        memory.append(state_nbytes(states))
        if t + 1 < prompt_ids.size:
            tok = prompt_ids[t + 1:t + 2]
            continue
        if temperature == 0:
            tok = np.array([int(np.argmax(z[0]))])
        else:
            z = z[0].astype(np.float64) / temperature
            p = np.exp(z - z.max())
            tok = np.array([rng.choice(p.size, p=p / p.sum())])
        out.append(int(tok[0]))
    out = np.array(out, dtype=np.int64)
    return (out, np.array(memory)) if return_memory else out


# --- weights --------------------------------------------------------------------------------------------------
def save_weights(path, params_by_kind):
    """Write {kind: params} atomically as ``<kind>/<name>`` arrays (``minimal.data.save_groups``)."""
    save_groups(path, params_by_kind)


def load_weights(path=WEIGHTS, config=None):
    """{kind: params} from ``save_weights``; a ValueError names the file when a kind's keys or shapes differ
    from a freshly built model's (``config``: the run's Config, default read from the curves JSON beside it)."""
    path = Path(path)
    if config is None:
        config = load_curves(path.with_suffix(".json"))["config"]
        config = Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})
    out = load_groups(path)
    V = None
    for kind, p in out.items():
        if kind not in KINDS:
            raise damaged(path, f"holds an unknown model {kind!r}, expected among {KINDS}")
        V = p["0.E"].shape[0] if "0.E" in p else 0
        ref = init_lm(np.random.default_rng(0), kind, V or 1, config.D, config.n_layers, config.expansion,
                      config.kernel, config.dtype)
        check_saved_shapes(path, f"model {kind!r} with D = {config.D}, {config.n_layers} layers", p, ref)
    return out


def load_curves(path=CURVES):
    """The metrics JSON written beside the weights by ``run(save_weights_path=...)``."""
    return load_json(path)


# --- the run --------------------------------------------------------------------------------------------------
def _train_one(kind, config, data, eval_set, checkpoint_path, progress):
    rng = np.random.default_rng([config.seed, KINDS.index(kind)])
    V = len(data.vocab)
    params = init_lm(rng, kind, V, config.D, config.n_layers, config.expansion, config.kernel, config.dtype)
    curve_path = None if checkpoint_path is None else Path(checkpoint_path).with_suffix(".curve.json")
    curve = {}
    if curve_path is not None and curve_path.exists() and Path(checkpoint_path).exists():
        curve = {int(k): v for k, v in json.loads(curve_path.read_text()).items()}
    t_eval = [0.0]

    def record(step, p):
        t0 = time.perf_counter()
        curve[step] = evaluate(p, eval_set, kind)
        t_eval[0] += time.perf_counter() - t0
        if curve_path is not None:
            with atomic_write(curve_path, "w") as f:
                json.dump(curve, f)

    def loss_and_grads(p, step, g):
        if step % config.eval_every == 0:
            record(step, p)
        return lm_loss_and_grads(p, char_lm.sample_batch(data.train, config.batch, config.T, g), kind,
                                 config.dropout, g)

    schedule = functools.partial(cosine_schedule, total_steps=config.steps, peak_lr=config.lr,
                                 warmup_steps=config.warmup, final_lr=config.final_lr)
    t0, c0 = time.perf_counter(), time.process_time()
    res = train(loss_and_grads, params, config.steps, lr_schedule=schedule, checkpoint_path=checkpoint_path,
                checkpoint_every=config.eval_every, progress=progress, rng=rng, clip=config.clip,
                weight_decay=config.weight_decay, desc=LABELS[kind],
                config={**dataclasses.asdict(config), "kinds": None, "sample_chars": None, "kind": kind})
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    record(config.steps, res.params)
    return res, curve, seconds - t_eval[0], cpu


def run(config: Config = None, out_dir=None, progress=True, save_weights_path=None):
    """Train every model in ``config.kinds`` and compare their test losses with the paper's (module docstring).

    Args:
        config: a ``Config`` (default: the full run); out_dir: folder for metrics.json and the per-model
            checkpoints (a re-run with the same out_dir resumes an interrupted run); progress: tqdm bars;
        save_weights_path: write the trained params there (``save_weights``) and the metrics beside it (.json).
    Returns:
        metrics: per model "curve_steps" / "curve" (test-subset loss), "best_test_loss", "steps_to_best",
        "final_test_loss" (all test windows), "train_loss_tail", "n_params", "train_seconds", "sample";
        "ratio_to_transformer" and "claim_holds" per minimal RNN; "paper"; "config".
    """
    config = Config() if config is None else config
    _speed.tune()
    data = char_lm.load()
    if config.eval_windows > (data.test.size - 1) // config.T:
        from ...validate import InputError
        raise InputError(f"Config.eval_windows must be <= {(data.test.size - 1) // config.T} (the test text's windows "
                         f"of T = {config.T}), got {config.eval_windows}")
    eval_set = char_lm.eval_windows(data.test, config.T, config.eval_windows)
    full_set = char_lm.eval_windows(data.test, config.T)
    out = {"models": {}, "paper": PAPER, "config": dataclasses.asdict(config), "vocab": data.vocab,
           "n_eval_targets": int(eval_set[:, 1:].size), "n_test_targets": int(full_set[:, 1:].size)}
    params_by_kind = {}
    for kind in config.kinds:
        ckpt = None if out_dir is None else Path(out_dir) / f"{kind}_checkpoint.npz"
        if ckpt is not None:
            ckpt.parent.mkdir(parents=True, exist_ok=True)
        res, curve, seconds, cpu = _train_one(kind, config, data, eval_set, ckpt, progress)
        params_by_kind[kind] = res.params
        steps = sorted(curve)
        losses = [curve[s] for s in steps]
        best = int(np.argmin(losses))
        prompt = char_lm.encode("\n", data.vocab)
        ids = generate(res.params, kind, prompt, config.sample_chars,
                       np.random.default_rng([config.seed, 1, KINDS.index(kind)]))
        out["models"][kind] = {
            "curve_steps": steps, "curve": losses, "best_test_loss": losses[best], "steps_to_best": steps[best],
            "final_test_loss": evaluate(res.params, full_set, kind),
            "train_loss_tail": float(np.mean(res.losses[-max(1, len(res.losses) // 20):])),
            "train_curve": [float(np.mean(c)) for c in np.array_split(res.losses, min(50, len(res.losses)))],
            "n_params": models.n_params(res.params), "train_seconds": seconds, "cpu_seconds": cpu,
            # a resumed, finished run trains no step: its time per step was not measured (NaN, not seconds / 1)
            "ms_per_step": 1e3 * seconds / res.steps_trained if res.steps_trained else float("nan"),
            "resumed_from": res.resumed_from, "sample": char_lm.decode(ids, data.vocab)}
    out = summarise(out)
    if save_weights_path is not None:
        save_weights(save_weights_path, params_by_kind)
        with atomic_write(Path(save_weights_path).with_suffix(".json"), "w") as f:
            json.dump(out, f, indent=1)
    write_metrics(out, out_dir)
    return out


def summarise(out):
    """Add the flat metrics that ``PAPER`` names (test_loss_<kind>: the final model on every test window,
    steps_to_best_<kind>, ratio_<kind>_to_transformer) and, per minimal RNN, "ratio_to_transformer" and
    "claim_holds" (at most CLAIM = 3 % above the Transformer's test loss). Returns ``out``, updated."""
    m = out["models"]
    for kind, r in m.items():
        out[f"test_loss_{kind}"] = r["final_test_loss"]
        out[f"best_test_loss_subset_{kind}"] = r["best_test_loss"]
        out[f"steps_to_best_{kind}"] = r["steps_to_best"]
    if "attention" in m:
        ref = m["attention"]["final_test_loss"]
        for kind in ("mingru", "minlstm"):
            if kind in m:
                m[kind]["ratio_to_transformer"] = out[f"ratio_{kind}_to_transformer"] = m[kind]["final_test_loss"] / ref
                m[kind]["claim_holds"] = bool(m[kind]["final_test_loss"] <= (1 + CLAIM) * ref)
    return out


def table(metrics):
    """Rows (model, ours: best subset loss, final test loss, steps to best; paper: loss, steps to best)."""
    rows = []
    for kind in (*KINDS, "mamba"):
        ours = metrics["models"].get(kind)
        rows.append({"model": LABELS[kind],
                     "best_test_loss_subset": None if ours is None else round(ours["best_test_loss"], 3),
                     "test_loss": None if ours is None else round(ours["final_test_loss"], 3),
                     "steps_to_best": None if ours is None else ours["steps_to_best"],
                     "n_params": None if ours is None else ours["n_params"],
                     "paper_test_loss": PAPER[f"test_loss_{kind}"],
                     "paper_steps_to_best": PAPER[f"steps_to_best_{kind}"]})
    return rows


def plot(metrics, out_dir):
    """Fig. 2: test loss against training steps for each model, with the paper's best losses as lines."""
    plt = pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    # the paper's best losses (D = 384) lie within 0.03 of each other: one marker each, side by side past our
    # last step, named in the legend
    end = max((max(m["curve_steps"]) for m in metrics["models"].values() if m["curve_steps"]), default=1)
    markers = dict(zip((*KINDS, "mamba"), "<>^v"))
    x_paper = {k: end * (1.03 + 0.03 * i) for i, k in enumerate((*KINDS, "mamba"))}
    for kind, m in metrics["models"].items():
        line, = ax.plot(m["curve_steps"], m["curve"], label=f"{LABELS[kind]} (ours, D = {metrics['config']['D']})")
        ax.plot([x_paper[kind]], [PAPER[f"test_loss_{kind}"]], markers[kind], color=line.get_color(), ms=7,
                label=f"{LABELS[kind]}, paper (D = 384): {PAPER[f'test_loss_{kind}']:.3f}")
    ax.plot([x_paper["mamba"]], [PAPER["test_loss_mamba"]], markers["mamba"], color="gray", ms=7,
            label=f"Mamba, paper (D = 384): {PAPER['test_loss_mamba']:.3f}")
    ax.set(xlabel="training step", ylabel="test loss (nats / char)", title="Fig. 2: Shakespeare, test loss",
           ylim=(1.3, 3.5))
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "shakespeare.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]
