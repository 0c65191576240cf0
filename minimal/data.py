"""Where the committed data and trained results live: ``<repository>/data/<work>/...``.

Notebooks run in ``notebooks/``, the CLI in the repository root, and the package may be imported from either; all
of them find the data through ``data_path``, which is anchored at this package's location, not the working
directory. (An installed, non-editable copy of the package has no ``data/`` beside it: ``data_path(...,
must_exist=True)`` then says so instead of letting a caller retrain silently.)
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["DATA_ROOT", "data_path"]

DATA_ROOT = Path(__file__).resolve().parents[1] / "data"


def data_path(*parts, must_exist=False):
    """``DATA_ROOT / parts...``; with ``must_exist``, a FileNotFoundError naming the path and the command that
    writes it when it is missing."""
    path = DATA_ROOT.joinpath(*parts)
    if must_exist and not path.exists():
        work = parts[0] if parts else "WORK"
        raise FileNotFoundError(f"{path} is missing: it is written by `python -m minimal reproduce {work} --full` "
                                f"run from the repository root (an installed copy of minimal has no data/ folder)")
    return path
