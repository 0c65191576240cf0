"""Experiments: each module has a dataclass ``Config`` (paper defaults), ``Config.quick()`` (a CPU-minutes
variant), ``run(config) -> dict`` and ``PAPER`` (the paper's numbers to compare against).

``experiments(work)`` returns ``{name: module}``; ``python -m minimal reproduce WORK`` runs them.

Layout: one sub-package per work, ``experiments/zucchet/``, ``experiments/gril/``, ``experiments/minrnn/``; shared
here: ``notes`` (the results pages' texts) and ``_plotting``. A sweep's job files are named by a hash of the job
function's import path (``minimal.run.job_files.job_key``): a job function that moves takes its committed files with it
(their ``function`` field and name rewritten, as when the Zucchet modules moved here from the package's top).
"""
from __future__ import annotations

import importlib

from ..validate import check_choice

# work -> experiment module names (in run order); a module listed here must exist.
MODULES = {
    "zucchet": ["teacher_student", "icl", "icl_seeds", "hidden_size", "architectures"],
    "gril": ["regression", "ablations", "multistep", "comparison", "classification"],
    "minrnn": ["param_counts", "runtime", "peak_memory", "shakespeare", "selective_copy"],
}


def experiments(work):
    """Return ``{name: module}`` for one work (e.g. ``"zucchet"``)."""
    check_choice("work", work, MODULES)
    return {name: importlib.import_module(f"minimal.experiments.{work}.{name}") for name in MODULES[work]}

