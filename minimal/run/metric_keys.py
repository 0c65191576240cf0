"""A metric's key on a results page (``minimal.run.report``): whether it measures time, its name for a reader, its
definition (the experiment's ``METRICS``, else the generic ones that hold for a key of every experiment), and
``lookup``: a key looked up in a table of keys and fnmatch patterns (TOLERANCE, NOTES, BETTER, METRICS, LESSON).
"""
from __future__ import annotations

import fnmatch
import re

__all__ = ["is_timing", "lookup", "reader_name", "definition", "GENERIC_METRICS"]

_TIMING_WORDS = ("seconds", "ms_per_step", "_ms", "wall", "time_", "tokens_per_s", "steps_per_s")


def is_timing(key):
    """True for metrics that measure time, not science."""
    return any(w in key for w in _TIMING_WORDS)


def lookup(table, key):
    """``table[key]``, else the first pattern of ``table`` (fnmatch, e.g. "test_loss_*"; a placeholder such as
    "<cell>" stands for any text, as "*" does) that ``key`` matches."""
    if key in table:
        return table[key]
    return next((v for k, v in table.items() if fnmatch.fnmatchcase(key, re.sub(r"<[^<>]+>", "*", k))), None)


def reader_name(key):
    """A metric key as words: "scalar_no_window_over_full" -> "scalar no window / full", "gru_params_alpha2" ->
    "gru params at α = 2", "ms_gru_T512" -> "ms gru at T = 512"."""
    words = key.replace("_over_", " / ").replace("_", " ")
    words = re.sub(r"\balpha(\d+)\b", r"at α = \1", re.sub(r"\bT(\d+)\b", r"at T = \1", words))
    return re.sub(r"\bpct\b", "%", re.sub(r"\bstd\b", "spread (std)", words))


# Definitions that hold for a key of every experiment (``measurements.md``), after the experiment's own METRICS;
# "{base}" is the key without the pattern's suffix.
GENERIC_METRICS = {
    "*_std": "standard deviation over seeds of `{base}`",
    "*_seeds": "seeds behind `{base}`",
    "*_mean": "mean over seeds of `{base}`",
    "*_n_params": "trainable parameters of `{base}`",
    "*_diverged": "runs of `{base}` whose loss diverged (left out of its mean)",
    "steps": "training steps of the run", "steps_trained": "training steps of the run",
    "ms_per_step": "wall time per training step (ms)", "train_seconds": "wall time of the training (s)",
    "sweep_seconds": "wall time of the sweep in this run (s): loading only, when every job is on disk",
    "job_seconds_total": "sum of the sweep's job times (s)", "n_jobs": "jobs in the sweep",
    "n_eval": "evaluation tasks (a fixed set, shared by every model of the experiment)",
    "eta_star": "η*, the optimal size of one GD step from 0 (in closed form)",
    "functional_*": "the same after functional pruning (a neuron removed when that leaves the loss unchanged)",
    "construction_vs_gd_max_abs": "largest |difference| of the construction's and GD's predictions (exact: ~0)",
    "*_seconds": "wall time (s)",
    "*_over_*": "the ratio of the two quantities its name gives, `{a}` / `{b}`",
}


def definition(defs, key):
    """``key``'s definition: the experiment's ``METRICS`` (``defs``), else ``GENERIC_METRICS``; None if neither."""
    d = lookup(defs, key)
    if d:
        return d
    for pattern, text in GENERIC_METRICS.items():
        if fnmatch.fnmatchcase(key, pattern):
            a, _, b = key.partition("_over_")
            base = key.rsplit("_", 2 if pattern in ("*_n_params",) else 1)[0]
            return text.format(base=base, a=a, b=b)
    return None
