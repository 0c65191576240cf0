"""Matplotlib for the experiments' ``plot`` functions: inline in a notebook, Agg (files only) elsewhere; the end
every ``plot`` shares, ``save_figure``; and ``legend_beside``, a panel's legend outside its data."""
from __future__ import annotations

from pathlib import Path

_KEEP = ("agg", "module://matplotlib_inline.backend_inline")


def pyplot():
    """Return ``matplotlib.pyplot``, switching to the Agg backend unless already Agg or notebook-inline."""
    import matplotlib

    if matplotlib.get_backend().lower() not in _KEEP:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, out_dir, file_name, dpi=120, layout=True, **savefig_kw):
    """Lay out ``fig`` (``tight_layout``, unless ``layout`` is False: the figure has its own), write it to
    ``out_dir/file_name`` (folder created) with ``savefig_kw``, close it; returns the path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if layout:
        fig.tight_layout()
    path = out_dir / file_name
    fig.savefig(path, dpi=dpi, **savefig_kw)
    pyplot().close(fig)
    return path


def legend_beside(ax, fontsize=8, **kw):
    """``ax``'s legend to the right of the panel, outside its data area, so that it covers no line or bar
    (``save_figure``'s ``tight_layout`` makes room for it)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=fontsize, **kw)
