"""Training-step time and memory vs sequence length: GRU / LSTM against minGRU / minLSTM (Feng et al., "Were
RNNs All We Needed?", Sec. 4.1 and Fig. 1), on one CPU core.

One training step = forward over a (B, T, D) batch + the MSE loss against a random target + the backward pass
(Sec. 4.1: "a forward pass through the models, computing a loss, and computing gradients via a backward pass"),
batch B = 64 as in Fig. 1. Models, each one layer of the library's cell:

    gru, lstm             ``minimal.cells.gru`` / ``lstm``: a Python loop over t (forward) and BPTT over
                          ``reversed(range(T))`` (backward), two or three small (B, H) x (H, H) matmuls per step
    mingru, minlstm       ``minimal.cells.mingru`` / ``minlstm``, parallel mode: every gate in one (B T, D) x (D, H)
                          matmul, then the Numba Blelloch scan (``minimal.scan``), forward and adjoint
    mingru_log, minlstm_log   the same in log space (App. B.3), Numba log scan

All models are timed side by side in one process (for each T, ``repeats`` rounds of one step per model, the
best of the rounds kept), with one BLAS thread and glibc's malloc thresholds set (``minimal.run.speed.tune``).
Speedup = time(gru) / time(mingru) and time(lstm) / time(minlstm) per T (Fig. 1, middle).
``python -m minimal reproduce minrnn --full --only runtime`` rewrites the lesson's ``data/minrnn/runtime_full.json``
(made 2026-12-03: log-space time 0.96-1.12 of vanilla over T), timing the cells as they are then.

Memory: the bytes of the arrays each forward keeps for its backward (the distinct arrays of its cache; minGRU's
vanilla h̃ is k_h itself and counts once). This is exact and deterministic, but it is not what the paper measured:
PyTorch's memory footprint (Fig. 1, right) is the peak of the autograd graph, which keeps the intermediates of
every operation, the scan's included. The paper: "The minimal variants (minGRU and minLSTM) use ~88% more memory
compared to their traditional counterpart" (Sec. 4.1), i.e. a ratio of ~1.88. Our caches, per (B, T) position in
units of floats: GRU D + 5H (x, gates z r h̃, r ⊙ h, h), minGRU D + 4H (x, k_z, k_h, z, h), minGRU log D + 6H
(x, z, h, log h, and for its reverse pass 1 − z and ∂h_t/∂k_z,t, ∂h_t/∂k_h,t); LSTM D + 7H (x, gates f i o c̃, c,
tanh c, h), minLSTM D + 6H (x, k_h, f', i', h and the slopes ∂f'/∂k_f, ∂i'/∂k_i; k_f, k_i on the NumPy
reference), minLSTM log D + 7H (x, f', i', h, log h, and for its reverse pass ∂h_t/∂k_f,t, ∂h_t/∂k_i,t,
∂h_t/∂k_h,t). A hand-written backward keeps only what it needs, so the minimal cells here hold 5/6 and 7/8 of the
traditional cells' caches at D = H (vanilla), 7/6 and 8/8 in log space.

Differs from the paper:
- Hardware: one core of a shared 2-core CPU (``minimal.run.speed``: one BLAS thread) instead of a T4 GPU. On the GPU
  the parallel scan runs T steps in O(log T) depth across thousands of threads while the GRU's loop launches
  kernels T times; its time is flat in T (2.7-3.4 ms for T = 512-4096, Sec. 4.1) and the speedup grows with T
  to 1324x. On one core there is no parallel hardware for the scan to use: minGRU's time is the elementwise
  work over B T H values (gates, exp/log in log space, the scan and its adjoint), which grows linearly in T just
  like the GRU's loop. What the CPU ratio then measures is one large matmul + vectorised passes against T small
  (64 x H) matmuls and a dozen NumPy calls per step (Python and call overhead dominate those at H = 32), so it is
  a constant-ish factor of a few, not a growing one. The log-space variants run their recurrence in linear form
  while every state is a normal number (``minimal.cells._min_log_linear``: two or three exps and a log per element
  forward, none backward), and in the committed run take about as long as the vanilla ones.
- Sizes: the paper states only the batch (64) for Fig. 1; we use D = H = 32 (α = 1) so that the largest caches
  (T = 4096: 64 x 4096 x 32 float32 = 32 MiB per array) and a full run stay within a few CPU minutes; a larger H
  makes minGRU's elementwise work grow in proportion while the GRU's per-step overhead does not, lowering the
  ratio.
- float32 (our training precision), a single layer with no embedding or readout, one step timed (best of
  ``repeats``) instead of the mean of 100 runs, no Mamba.
- Memory is the cache of the hand-written backward, not a framework's peak (above).

Glossary: B batch, T sequence length, D input features, H hidden units.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...run import speed
from ...validate import check_config, check_fits
from ...cells import gru, lstm, mingru, minlstm

__all__ = ["Config", "PAPER", "SAVE_METRICS", "MODELS", "run", "plot", "train_step", "cache_nbytes", "make_model"]

PAPER = {  # Sec. 4.1 / Fig. 1 (T4 GPU, batch 64): speedup per training step; memory of minimal vs traditional
    "speedup_mingru_T512": 175, "speedup_minlstm_T512": 235,
    "speedup_mingru_T4096": 1324, "speedup_minlstm_T4096": 1361,
    "mem_ratio_mingru_gru": 1.88, "mem_ratio_minlstm_lstm": 1.88,   # "~88% more memory"
}

SAVE_METRICS = True   # data/minrnn/runtime_full.json: the lesson reads it

# name -> (cell module, forward keywords)
MODELS = {
    "gru": (gru, {}),
    "lstm": (lstm, {}),
    "mingru": (mingru, {"mode": "parallel"}),
    "minlstm": (minlstm, {"mode": "parallel"}),
    "mingru_log": (mingru, {"mode": "parallel", "log_space": True}),
    "minlstm_log": (minlstm, {"mode": "parallel", "log_space": True}),
}
# minimal model -> the traditional model it is compared with
BASELINE = {"mingru": "gru", "minlstm": "lstm", "mingru_log": "gru", "minlstm_log": "lstm"}


@dataclass
class Config:
    T_values: tuple = (64, 128, 256, 512, 1024, 2048, 4096)   # Fig. 1's range of sequence lengths
    batch: int = 64                    # Sec. 4.1 / Fig. 1: batch size 64
    d_in: int = 32                     # ours (paper: not stated for Fig. 1); small for one CPU core
    d_hidden: int = 32                 # ours, α = 1
    repeats: int = 5                   # ours: best of 5 interleaved rounds per (model, T) (paper: mean of 100)
    models: tuple = tuple(MODELS)
    method: str = "blelloch"           # minGRU/minLSTM vanilla scan (Numba); the log scan has one algorithm
    dtype: str = "float32"             # ours: training precision
    seed: int = 0
    blas_threads: int = 1              # one thread: timings that do not depend on idle cores

    def __post_init__(self):
        # every field checked by its own name, before any work (rules from the defaults: validate.check_config),
        # then the sizes: the hidden states of the longest sequence, (batch, T, d_hidden), must fit in memory
        check_config(self, {"T_values": ("grid", "int>=1"), "models": ("subset of", tuple(MODELS)),
                            "dtype": ("one of", ("float32", "float64"))})
        T = max(self.T_values)
        check_fits(f"Config.batch={self.batch}, d_hidden={self.d_hidden}, T_values up to {T} (the {self.dtype} "
                   f"hidden states, batch x T x d_hidden)",
                   np.dtype(self.dtype).itemsize * self.batch * T * max(self.d_hidden, self.d_in),
                   "choose a smaller batch, d_hidden, d_in or T")

    @classmethod
    def quick(cls):
        """T up to 512, two rounds: a few seconds."""
        return cls(T_values=(64, 128, 256, 512), repeats=2)


def make_model(name, rng, config):
    """(params in config.dtype, forward keywords) for one of MODELS."""
    mod, kw = MODELS[name]
    params = {k: v.astype(config.dtype) for k, v in mod.init(rng, config.d_in, config.d_hidden).items()}
    if mod in (mingru, minlstm) and not kw.get("log_space"):
        kw = {**kw, "method": config.method}
    return params, kw


def train_step(mod, params, x, y, **kw):
    """Forward, MSE loss L = mean((h − y)²), backward. Returns (loss, cache, grads)."""
    h, cache = mod.forward(params, x, **kw)
    r = h - y
    loss = float(np.mean(r * r))
    _, grads = mod.backward(params, cache, (2.0 / r.size) * r)
    return loss, cache, grads


def cache_nbytes(cache):
    """Bytes of the distinct NumPy arrays in a cache (an array held twice, e.g. minGRU's h̃ = k_h, counts once)."""
    seen = {}
    for v in cache:
        if isinstance(v, np.ndarray):
            seen[id(v)] = v.nbytes
    return int(sum(seen.values()))


def run(config: Config = None, out_dir=None, progress=True):
    """Time one training step per model and T, and measure each cache.

    Returns metrics: "T" (list), "times_ms" / "cache_bytes" ({model: list over T}), "speedup" ({minimal model:
    list over T}), and scalars ``speedup_<model>_T<T>`` (every minimal model and T), ``ms_<model>_T<T>`` (the
    largest T), ``mem_ratio_<model>_<baseline>`` (cache ratio at the largest T), plus the settings used.
    """
    config = config or Config()
    unknown = sorted(set(config.models) - set(MODELS))
    if unknown:
        raise ValueError(f"models must be among {sorted(MODELS)}, got {unknown}")
    tuned = speed.tune(config.blas_threads)
    rng = np.random.default_rng(config.seed)
    models = {name: make_model(name, rng, config) for name in config.models}
    B, D, H = config.batch, config.d_in, config.d_hidden

    # warm-up: Numba's scans load (or compile) on their first call; BLAS and NumPy allocate their buffers
    xw = rng.standard_normal((B, 8, D)).astype(config.dtype)
    yw = rng.standard_normal((B, 8, H)).astype(config.dtype)
    for name, (params, kw) in models.items():
        train_step(MODELS[name][0], params, xw, yw, **kw)

    times = {name: [] for name in models}
    nbytes = {name: [] for name in models}
    for T in config.T_values:
        x = rng.standard_normal((B, T, D)).astype(config.dtype)
        y = rng.standard_normal((B, T, H)).astype(config.dtype)
        best = {name: np.inf for name in models}
        for _ in range(config.repeats):
            for name, (params, kw) in models.items():   # interleaved: every model sees the same machine load
                t0 = time.perf_counter()
                train_step(MODELS[name][0], params, x, y, **kw)
                best[name] = min(best[name], time.perf_counter() - t0)
        # the cache sizes are deterministic: one more (untimed) forward per model
        for name, (params, kw) in models.items():
            _, cache = MODELS[name][0].forward(params, x, **kw)
            nbytes[name].append(cache_nbytes(cache))
            del cache
        for name in models:
            times[name].append(1e3 * best[name])
        if progress:
            print(f"T={T:5d} " + "  ".join(f"{n} {times[n][-1]:8.2f} ms" for n in models), flush=True)

    Ts = list(config.T_values)
    metrics = {"T": Ts, "times_ms": times, "cache_bytes": nbytes, "speedup": {},
               "config": {"batch": B, "d_in": D, "d_hidden": H, "repeats": config.repeats, "dtype": config.dtype,
                          "method": config.method, "blas_threads": config.blas_threads, "tuned": tuned}}
    for name, base in BASELINE.items():
        if name in models and base in models:
            sp = [tb / tm for tb, tm in zip(times[base], times[name])]
            metrics["speedup"][name] = sp
            for T, s in zip(Ts, sp):
                metrics[f"speedup_{name}_T{T}"] = s
            metrics[f"mem_ratio_{name}_{base}"] = nbytes[name][-1] / nbytes[base][-1]
    for name in models:
        metrics[f"ms_{name}_T{Ts[-1]}"] = times[name][-1]
    return metrics


# one look per model in every panel: a colour each (GRU family blue-ish, LSTM family red-ish), the log-space forms
# dashed with larger open markers, so that lines that coincide (minLSTM's and minGRU log's memory) both stay visible
STYLE = {"gru": dict(color="C0", marker="s", ls="-", lw=2.2), "lstm": dict(color="C3", marker="D", ls="-", lw=2.2),
         "mingru": dict(color="C9", marker="o", ls="-"), "minlstm": dict(color="C1", marker="^", ls="-"),
         "mingru_log": dict(color="C2", marker="o", ls="--", mfc="none", ms=9),
         "minlstm_log": dict(color="C6", marker="^", ls="--", mfc="none", ms=9)}
PAPER_MARK = {"mingru": "*", "minlstm": "P"}   # the paper's speed-ups, in the colour of their minimal cell


def plot(metrics, out_dir):
    """Fig. 1's three panels, ours: time vs T, speed-up vs T (log-log, the paper's T4-GPU numbers marked in the
    colour of their cell), cache MiB vs T. One colour per model in every panel (``STYLE``), one legend beside the
    panels. Returns [png path]."""
    from .._plotting import pyplot, save_figure

    plt = pyplot()
    Ts = metrics["T"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")

    def style(name):
        return {"ms": 5, **STYLE.get(name, {})}

    for name, t in metrics["times_ms"].items():
        axes[0].plot(Ts, t, label=name, **style(name))
    for name, sp in metrics["speedup"].items():
        axes[1].plot(Ts, sp, label=name, **style(name))
    for name in ("mingru", "minlstm"):
        points = [(T, PAPER[f"speedup_{name}_T{T}"]) for T in (512, 4096) if T <= max(Ts)]
        if points:
            axes[1].plot(*zip(*points), PAPER_MARK[name], ls="none", ms=11, color=STYLE[name]["color"],
                         mec="k", label=f"paper: {name} / {BASELINE[name]} (T4 GPU)")
    for name, b in metrics["cache_bytes"].items():
        axes[2].plot(Ts, np.asarray(b) / 2 ** 20, label=name, **style(name))
    titles = ("time per training step", "speed-up: GRU / minGRU, LSTM / minLSTM", "memory kept for the backward")
    ylabels = ("ms per step (one CPU core)", "time of GRU or LSTM / time of the minimal cell", "MiB")
    for ax, title, ylabel in zip(axes, titles, ylabels):
        ax.set_ylabel(ylabel)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.set_title(title, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    extra = [(h, l) for h, l in zip(*axes[1].get_legend_handles_labels()) if l.startswith("paper")]
    fig.legend(handles + [h for h, _ in extra], labels + [l for _, l in extra], loc="outside right upper",
               fontsize=8, title="speed-ups in the colour\nof the minimal cell", title_fontsize=8)
    return [save_figure(fig, out_dir, "runtime.png", layout=False)]
