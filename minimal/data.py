"""Where the committed data and trained results live: ``<repository>/data/<work>/...``.

Notebooks run in ``notebooks/``, the CLI in the repository root, and the package may be imported from either; all
of them find the data through ``data_path``, which is anchored at this package's location, not the working
directory. Trained weights of several models share one ``.npz`` (``save_groups`` / ``load_groups``). (An installed, non-editable copy of the package has no ``data/`` beside it: ``data_path(...,
must_exist=True)`` then says so instead of letting a caller retrain silently.)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ._atomic import atomic_write

__all__ = ["DATA_ROOT", "data_path", "save_groups", "load_groups"]

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


def save_groups(path, groups):
    """Write {group: {name: array}} atomically to one ``.npz`` as ``<group>/<name>`` arrays (plain arrays only:
    it loads with ``allow_pickle=False``); a failed write leaves the old file whole."""
    arrays = {f"{g}/{k}": v for g, params in groups.items() for k, v in params.items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        np.savez(f, **arrays)


def load_groups(path):
    """{group: {name: array}} from ``save_groups``; callers check the names they need."""
    with np.load(path, allow_pickle=False) as z:
        out = {}
        for key in z.files:
            group, name = key.split("/", 1)
            out.setdefault(group, {})[name] = z[key]
    return out
