"""The committed runs of the Shakespeare experiment (``shakespeare``: its ``Config`` and ``run``), and reading
them back: the seeds' curves (``seed_curves``), the trained weights (``load_weights``), the CPU time a step.

Committed runs (``data/minrnn/``), each with the call that makes it (``python -m minimal.reproduce.extra`` writes
each file but ``shakespeare_full.*``, which ``python -m minimal reproduce minrnn --full`` writes):
    - ``shakespeare_full.{npz,json}``: ``Config()`` (D = 64, T = 128, batch 16, until the best stops improving),
      seed 0, log-space minGRU and minLSTM, vanilla minGRU and the Transformer: ``run(Config(),
      save_weights_path=WEIGHTS)``; ``shakespeare_full_seed<s>.json``: ``run_seed(s)``, curves only
      (``seed_curves``, ``across_seeds``). We ran each model in its own process (``Config(kinds=(kind,),
      seed=s)``) and merged the outputs: every model draws from its own Generator, so the result is the same.
      Most runs were made under a cap of 8,000 steps, which none of them reached; seed 1's Transformer reached it
      in its last phase and was resumed from its checkpoint under the cap of 12,000 (a resumed run is bit for
      bit the uninterrupted one), so its "ms_per_step" covers the resumed steps only;
    - ``shakespeare_fixed.{npz,json}`` and ``shakespeare_fixed_seed<s>.json``: ``Config.fixed()``, the same four
      models and size trained for exactly 2,400 steps of a cosine schedule (3e-3 to 1e-4), seeds 0-2:
      ``run(Config.fixed(), save_weights_path=FIXED_WEIGHTS)`` and ``run_seed(s, "fixed")``;
    - ``shakespeare_small.{npz,json}``: ``run(Config.small(), save_weights_path=SMALL_WEIGHTS)``: the same four
      models at D = 32, T = 64, 400 steps, evaluated every 25 steps (the quick one the notebook's exercises use);
    - ``shakespeare_vanilla.{npz,json}``: vanilla minGRU and minLSTM at ``Config.fixed()``'s size and schedule,
      evaluated every 100 steps, ``run(Config.fixed(kinds=("mingru_vanilla", "minlstm_vanilla"),
      eval_every=100))`` (evaluation draws no random numbers, so its minGRU trains as the fixed run's). Its
      "earlier_transformer" is the first Transformer of that run (one head, no positions, the convolution).
    - ``shakespeare_step_cpu.json``: CPU seconds per training step (``step_cpu_table``: ``time.process_time`` of
      forward + backward + AdamW, so other load on the machine is not counted) at Config()'s size and at the
      paper's (D = 384, batch 64, T = 256, 3 layers).

Time. CPU seconds per training step, at Config()'s size and at the paper's, are in
``data/minrnn/shakespeare_step_cpu.json`` (taken on a loaded machine: process time leaves out the other
processes' work, not their contention): at Config() 0.06-0.09 CPU-s a step, at the paper's size 5,000 steps are
12-20 CPU-hours per model, out of reach of this project's CPUs.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ...data import check_saved_shapes, damaged, data_path
from ...run import io, speed
from ...tasks import char_lm
from .shakespeare import WEIGHTS, Config, load_curves, run
from .shakespeare_model import KINDS, init_lm, lm_loss_and_grads

__all__ = ["STEP_CPU", "PAPER_SIZE", "step_cpu_seconds", "step_cpu_table", "seed_curves", "run_seed", "load_weights"]

# --- CPU time per training step ---------------------------------------------------------------------------------
STEP_CPU = data_path("minrnn", "shakespeare_step_cpu.json")


PAPER_SIZE = {"D": 384, "batch": 64, "T": 256, "n_layers": 3}   # App. C.2; T: nanoGPT shakespeare_char's block


def step_cpu_seconds(kind, D, batch, T, n_layers=3, steps=2, seed=0):
    """CPU seconds (``time.process_time``: this process only, so other load on the machine does not count) of one
    training step, forward + backward + AdamW, at one size: the mean of ``steps`` timed steps after one untimed."""
    from ...optim import adamw_init, adamw_step

    speed.tune()
    data = char_lm.load()
    rng = np.random.default_rng(seed)
    params = init_lm(rng, kind, len(data.vocab), D, n_layers, T_max=T)
    state = adamw_init(params)
    times = []
    for i in range(steps + 1):
        c0 = time.process_time()
        _, grads = lm_loss_and_grads(params, char_lm.sample_batch(data.train, batch, T, rng), kind, 0.1, rng)
        params, state = adamw_step(params, grads, state, 1e-3)
        if i:
            times.append(time.process_time() - c0)
    return float(np.mean(times))


def step_cpu_table(kinds=("mingru", "minlstm", "attention", "mingru_vanilla"), steps=2):
    """``step_cpu_seconds`` at ``Config()``'s size and at the paper's (``PAPER_SIZE``) for each kind, with the
    machine's load: the content of ``STEP_CPU`` (written by ``python -m minimal.reproduce.extra
    minrnn/shakespeare_step_cpu``)."""
    import os
    import platform

    c = Config()
    out = {"config": {"D": c.D, "batch": c.batch, "T": c.T, "n_layers": c.n_layers}, "paper_size": PAPER_SIZE,
           "steps_timed": steps, "machine": platform.processor() or platform.machine(),
           "load_average": os.getloadavg()[0], "config_size": {}, "paper": {}}
    for kind in kinds:
        out["config_size"][kind] = step_cpu_seconds(kind, c.D, c.batch, c.T, c.n_layers, steps)
        out["paper"][kind] = step_cpu_seconds(kind, PAPER_SIZE["D"], PAPER_SIZE["batch"], PAPER_SIZE["T"],
                                              PAPER_SIZE["n_layers"], steps)
    out["paper_cpu_hours_5000_steps"] = {k: 5000 * v / 3600 for k, v in out["paper"].items()}
    return out


def load_weights(path=WEIGHTS, config=None):
    """{kind: params} from ``save_weights`` (``minimal.run.io.load_weights``); a ValueError names the file when a
    kind's keys or shapes differ from a freshly built model's (``config``: the run's Config, default the one in
    the sidecar)."""
    path = Path(path)
    out, saved = io.load_weights(path)
    if config is None:
        config = Config.from_saved(saved)
    V = None
    for kind, p in out.items():
        if kind not in KINDS:
            raise damaged(path, f"holds an unknown model {kind!r}, expected among {KINDS}")
        V = p["0.E"].shape[0] if "0.E" in p else 0
        ref = init_lm(np.random.default_rng(0), kind, V or 1, config.D, config.n_layers, config.expansion,
                      config.kernel, config.dtype, T_max=config.T)
        check_saved_shapes(path, f"model {kind!r} with D = {config.D}, T = {config.T}, {config.n_layers} layers",
                           p, ref)
    return out


def seed_curves(seeds=(0, 1, 2), name="full"):
    """The committed runs of ``Config()`` (``name="full"``) or ``Config.fixed()`` (``"fixed"``), one metrics dict per
    seed that is on disk: seed 0 is ``shakespeare_<name>.json`` (beside the weights), seed s > 0
    ``data/minrnn/shakespeare_<name>_seed<s>.json`` (curves only)."""
    if name not in ("full", "fixed"):
        raise ValueError(f"name must be 'full' or 'fixed', got {name!r}")
    paths = {s: data_path("minrnn", f"shakespeare_{name}.json" if s == 0 else f"shakespeare_{name}_seed{s}.json")
             for s in seeds}
    return {s: load_curves(p) for s, p in paths.items() if Path(p).exists()}


def run_seed(seed, name="full", progress=False):
    """Train ``Config(seed=seed)`` (``name="full"``) or ``Config.fixed(seed=seed)`` (``"fixed"``), every model, and
    return its metrics, committed (curves only) as ``data/minrnn/shakespeare_<name>_seed<seed>.json`` by ``python -m
    minimal.reproduce.extra minrnn/shakespeare_<name>_seed<seed>`` (``seed_curves`` reads them; seed 0 is written
    with its weights by ``run(config, save_weights_path=...)``)."""
    if name not in ("full", "fixed"):
        raise ValueError(f"name must be 'full' or 'fixed', got {name!r}")
    config = Config(seed=seed) if name == "full" else Config.fixed(seed=seed)
    return run(config, progress=progress)
