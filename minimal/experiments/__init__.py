"""Experiments: each module has a dataclass ``Config`` (paper defaults), ``Config.quick()`` (a CPU-minutes
variant), ``run(config) -> dict`` and ``PAPER`` (the paper's numbers to compare against).

``experiments(work)`` returns ``{name: module}``; ``python -m minimal reproduce WORK`` runs them.

Layout: the Zucchet modules sit at the top of this package (their sweeps' job files are named by a hash of the
job function's import path, so moving them would orphan the committed runs in ``data/zucchet/sweeps``); every
later work has its own sub-package, ``experiments/gril/`` and ``experiments/minrnn/``.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path

from ..validate import check_choice

# work -> experiment module names (in run order); a module listed here must exist.
_MODULES = {
    "zucchet": ["teacher_student", "icl", "icl_seeds", "hidden_size", "architectures"],
    "gril": ["regression", "ablations", "multistep", "comparison", "classification"],
    "minrnn": ["param_counts", "runtime", "shakespeare", "selective_copy"],
}


def experiments(work):
    """Return ``{name: module}`` for one work (e.g. ``"zucchet"``)."""
    check_choice("work", work, _MODULES)
    prefix = "minimal.experiments." if work == "zucchet" else f"minimal.experiments.{work}."
    return {name: importlib.import_module(prefix + name) for name in _MODULES[work]}


def write_metrics(metrics, out_dir):
    """Write a run's metrics dict to ``out_dir/metrics.json`` (NumPy numbers as floats); nothing if out_dir is None."""
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "metrics.json").write_text(json.dumps(metrics, indent=2, default=float))
