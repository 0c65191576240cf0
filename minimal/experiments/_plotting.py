"""Matplotlib for the experiments' ``plot`` functions: inline in a notebook, Agg (files only) elsewhere."""
from __future__ import annotations

_KEEP = ("agg", "module://matplotlib_inline.backend_inline")


def pyplot():
    """Return ``matplotlib.pyplot``, switching to the Agg backend unless already Agg or notebook-inline."""
    import matplotlib

    if matplotlib.get_backend().lower() not in _KEEP:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
