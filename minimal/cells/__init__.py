"""Every cell and building block of `minimal`, found by name in ``REGISTRY``.

``REGISTRY`` maps a module's short name (``"lsa"``, ``"gated_rnn"``, ``"linear"``, ...) to the module.
It holds every public module of ``minimal.cells`` (recurrent cells, attention) and ``minimal.layers``
(building blocks). Each must implement the contract in ``minimal.contract``; a module that does
not is an import error, never silently skipped.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..validate import check_choice
from ..contract import REQUIRED

__all__ = ["REGISTRY", "get"]


def _discover():
    registry = {}
    for pkg_name in ("minimal.cells", "minimal.layers"):
        pkg = importlib.import_module(pkg_name)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            if info.name.startswith("_"):
                continue
            mod = importlib.import_module(f"{pkg_name}.{info.name}")
            missing = [f for f in REQUIRED if not callable(getattr(mod, f, None))]
            if missing:
                raise ImportError(f"{mod.__name__} does not implement the cell contract: missing {missing}")
            if info.name in registry:
                raise ImportError(f"two modules are named {info.name!r}")
            registry[info.name] = mod
    return registry


_registry = None


def __getattr__(name):
    # REGISTRY is built on first use, so that a cell module may import from this package while it loads.
    global _registry
    if name == "REGISTRY":
        if _registry is None:
            _registry = _discover()
        return _registry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name):
    """Return the registered module called ``name``; a ValueError lists the known names."""
    registry = __getattr__("REGISTRY")
    return registry[check_choice("name", name, registry)]
