"""Peak memory of one training step: GRU / LSTM against minGRU / minLSTM (Feng et al., "Were RNNs All We Needed?",
Sec. 4.1 and Fig. 1, right), measured the way a framework reports it.

The paper's memory footprint is the peak of a PyTorch training step, which keeps every intermediate of the
autograd graph, and finds "~88% more memory" for the minimal cells (a ratio of ~1.88, Sec. 4.1). ``runtime`` counts
something else: the bytes our hand-written backward keeps in its cache (``runtime.cache_nbytes``). Here we measure
the peak: the most memory the process holds at any moment of one step (forward, MSE loss, backward, the same
``runtime.train_step`` that is timed there), above what it held before the step (the inputs, targets and
parameters), on the same models, batch and sizes as ``runtime.Config``.

How: each model runs in a fresh Python process (``python -m minimal.experiments.minrnn.peak_memory``) with glibc's
malloc set to serve every allocation of 64 KiB or more by its own ``mmap`` and to return freed memory at once
(``minimal.run.speed.tune_malloc``), so that the resident set follows the arrays alive at each moment, NumPy's and
the Numba kernels' alike. Before each step the kernel's high-water mark is reset (``/proc/self/clear_refs``, Linux
>= 4.0); the peak is ``VmHWM`` after the step minus ``VmRSS`` before it (the kernel updates these counters in batches,
so a value can be off by some hundred KiB: tests/test_peak_memory.py finds a 64 MiB array within 1 MiB). One warm-up step at a
short T first loads the Numba kernels, so compilation is not counted.

Differs from the paper:
- Hardware and framework: one CPU process and our hand-written backward instead of PyTorch autograd on a T4 GPU;
  a hand-written backward keeps only the arrays its cache names (``runtime``), where autograd keeps the
  intermediates of every operation of the graph for the backward; how much that adds was not measured here.
- Sizes as in ``runtime`` (batch 64, D = H = 32, float32, T = 64 ... 4096; the paper states only the batch).
- Linux only (``/proc``); elsewhere ``run`` raises a clear error.

Glossary: B batch, T sequence length, D input features, H hidden units.
"""
from __future__ import annotations

import gc
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...validate import check_config
from . import runtime

__all__ = ["Config", "PAPER", "SAVE_METRICS", "run", "plot", "peak_step_bytes"]

PAPER = {  # Sec. 4.1 / Fig. 1 (T4 GPU, PyTorch, batch 64): "~88% more memory" than the traditional cell
    "peak_ratio_mingru_gru": 1.88, "peak_ratio_minlstm_lstm": 1.88,
    "peak_ratio_mingru_log_gru": 1.88, "peak_ratio_minlstm_log_lstm": 1.88,
}
SAVE_METRICS = True   # data/minrnn/peak_memory_full.json: the lesson reads it

_PROC = Path("/proc/self")


@dataclass
class Config:
    T_values: tuple = (64, 128, 256, 512, 1024, 2048, 4096)   # Fig. 1's range, as runtime.Config
    batch: int = 64                    # Sec. 4.1 / Fig. 1
    d_in: int = 32                     # as runtime.Config
    d_hidden: int = 32
    models: tuple = tuple(runtime.MODELS)
    method: str = "blelloch"
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self):
        check_config(self, {"T_values": ("grid", "int>=1"), "models": ("subset of", tuple(runtime.MODELS)),
                            "dtype": ("one of", ("float32", "float64"))})

    @classmethod
    def quick(cls):
        """T up to 512: a few seconds a model."""
        return cls(T_values=(64, 128, 256, 512))


def _status_kib(key):
    for line in (_PROC / "status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {key}")


def peak_step_bytes(step):
    """Bytes of the process's resident set at the peak of ``step()`` above its size before the call (Linux: the
    high-water mark reset through ``/proc/self/clear_refs``). Allocations should go to ``mmap`` (module
    docstring), or memory freed before the call and reused by it is not seen."""
    gc.collect()
    (_PROC / "clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    step()
    return 1024 * (_status_kib("VmHWM") - before)


def _measure(name, config):
    """{T: peak bytes} of one model's training step, in this process (``_main`` runs it in a fresh one)."""
    from ...run import speed

    speed.set_blas_threads(1)
    if not speed.tune_malloc(mmap_threshold=64 << 10, trim_threshold=0):
        raise RuntimeError("peak_memory needs glibc's mallopt (Linux)")
    rng = np.random.default_rng(config.seed)
    params, kw = runtime.make_model(name, rng, config)
    mod = runtime.MODELS[name][0]
    B, D, H = config.batch, config.d_in, config.d_hidden

    def batch(T):
        return (rng.standard_normal((B, T, D)).astype(config.dtype),
                rng.standard_normal((B, T, H)).astype(config.dtype))

    runtime.train_step(mod, params, *batch(8), **kw)   # loads the Numba kernels
    out = {}
    for T in config.T_values:
        x, y = batch(T)
        out[T] = peak_step_bytes(lambda: runtime.train_step(mod, params, x, y, **kw))
        del x, y
    return out


def _main(argv):
    """``python -m minimal.experiments.minrnn.peak_memory NAME CONFIG_JSON``: prints {T: bytes} as JSON."""
    name, fields = argv[0], json.loads(argv[1])
    config = Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
    print(json.dumps(_measure(name, config)))


def run(config: Config = None, out_dir=None, progress=True):
    """Peak bytes of one training step per model and T, each model in a fresh process.

    Returns metrics: "T", "peak_bytes" ({model: list over T}), "cache_bytes" ({model: list over T}, runtime's
    definition, for the side-by-side), ``peak_ratio_<cell>_<baseline>`` and ``cache_ratio_<cell>_<baseline>`` at
    the largest T and ``peak_mib_<model>_T<T>`` at the largest T, plus the settings used.
    """
    config = config or Config()
    if not (_PROC / "clear_refs").exists():
        raise RuntimeError("peak_memory measures through /proc/self (Linux); this system has none")
    fields = json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in vars(config).items()})
    peak, cache = {}, {}
    rng = np.random.default_rng(config.seed)
    for name in config.models:
        done = subprocess.run([sys.executable, "-m", __name__, name, fields], capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            raise RuntimeError(f"measuring {name} failed:\n{done.stderr[-2000:]}")
        by_T = json.loads(done.stdout.strip().splitlines()[-1])
        peak[name] = [int(by_T[str(T)]) for T in config.T_values]
        params, kw = runtime.make_model(name, rng, config)
        cache[name] = []
        for T in config.T_values:
            x = np.zeros((config.batch, T, config.d_in), config.dtype)
            cache[name].append(runtime.cache_nbytes(runtime.MODELS[name][0].forward(params, x, **kw)[1]))
        if progress:
            print(f"{name}: peak " + ", ".join(f"T={T} {b / 2 ** 20:.1f} MiB" for T, b in zip(config.T_values,
                                                                                          peak[name])), flush=True)
    Ts = list(config.T_values)
    metrics = {"T": Ts, "peak_bytes": peak, "cache_bytes": cache,
               "config": {"batch": config.batch, "d_in": config.d_in, "d_hidden": config.d_hidden,
                          "dtype": config.dtype, "method": config.method}}
    for name, base in runtime.BASELINE.items():
        if name in peak and base in peak:
            metrics[f"peak_ratio_{name}_{base}"] = peak[name][-1] / peak[base][-1]
            metrics[f"cache_ratio_{name}_{base}"] = cache[name][-1] / cache[base][-1]
    for name in peak:
        metrics[f"peak_mib_{name}_T{Ts[-1]}"] = peak[name][-1] / 2 ** 20
    return metrics


def plot(metrics, out_dir):
    """Peak MiB of a step and cache MiB vs T, one colour per model (``runtime.STYLE``). Returns [png path]."""
    from .._plotting import pyplot, save_figure

    plt = pyplot()
    Ts = metrics["T"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for ax, key, title in ((axes[0], "peak_bytes", "peak memory of one training step"),
                           (axes[1], "cache_bytes", "memory kept for the backward (runtime)")):
        for name, b in metrics[key].items():
            ax.plot(Ts, np.asarray(b) / 2 ** 20, label=name, **{"ms": 5, **runtime.STYLE.get(name, {})})
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel("MiB")
        ax.set_title(title, fontsize=10)
    axes[0].legend(fontsize=8)
    return [save_figure(fig, out_dir, "peak_memory.png", layout=False)]


if __name__ == "__main__":
    _main(sys.argv[1:])
