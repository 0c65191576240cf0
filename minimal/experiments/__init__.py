"""Experiments: each module has a dataclass ``Config`` (paper defaults), ``Config.quick()`` (a CPU-minutes
variant), ``run(config) -> dict`` and ``PAPER`` (the paper's numbers to compare against).

``experiments(work)`` returns ``{name: module}``; ``python -m minimal reproduce WORK`` runs them.
"""
from __future__ import annotations

import importlib

from ..validate import check_choice

# work -> experiment module names (in run order); a module listed here must exist.
_MODULES = {
    "zucchet": ["teacher_student", "icl", "hidden_size", "architectures"],
}


def experiments(work):
    """Return ``{name: module}`` for one work (e.g. ``"zucchet"``)."""
    check_choice("work", work, _MODULES)
    return {name: importlib.import_module(f"minimal.experiments.{name}") for name in _MODULES[work]}
