"""Where the committed data and trained results live: ``<repository>/data/<work>/...``.

Notebooks run in ``notebooks/``, the CLI in the repository root, and the package may be imported from either; all
of them find the data through ``data_path``, which is anchored at this package's location, not the working
directory. Trained weights of several models share one ``.npz`` (``save_groups`` / ``load_groups``). A wheel carries
the same files as package data, ``minimal/_data`` (setup.py maps ``data/`` there), and ``DATA_ROOT`` is that folder
when it exists: the lessons run from a plain ``pip install``. Where neither is there, ``data_path(...,
must_exist=True)`` says so instead of letting a caller retrain silently.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from ._atomic import atomic_write

__all__ = ["DATA_ROOT", "data_path", "save_groups", "load_groups", "regenerate_command", "read_npz", "load_json",
           "check_saved_shapes"]

_PACKAGED = Path(__file__).resolve().parent / "_data"          # in a wheel: data/ as package data
DATA_ROOT = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[1] / "data"


def data_path(*parts, must_exist=False):
    """``DATA_ROOT / parts...``; with ``must_exist``, a FileNotFoundError naming the path and the command that
    writes it when it is missing."""
    path = DATA_ROOT.joinpath(*parts)
    if must_exist and not path.exists():
        work = parts[0] if parts else "WORK"
        raise FileNotFoundError(f"{path} is missing: it is written by `python -m minimal reproduce {work} --full` "
                                f"run from the repository root (an installed copy of minimal has no data/ folder)")
    return path


_S = "from minimal.experiments.minrnn import shakespeare as S; "
COMMANDS = {   # committed files that `reproduce <work> --full` does not write: the command that does
    # `reproduce gril --full` writes these too; --only reruns just the one experiment
    "gril/multistep_full": "python -m minimal reproduce gril --full --only multistep",
    "gril/classification_full": "python -m minimal reproduce gril --full --only classification",
    "minrnn/shakespeare_small": f'python -c "{_S}S.run(S.Config.small(), save_weights_path=S.SMALL_WEIGHTS)"',
    "minrnn/shakespeare_vanilla": (f'python -c "{_S}S.run(S.Config(kinds=(\'mingru_vanilla\', \'minlstm_vanilla\'), '
                                   f'eval_every=100), save_weights_path=S.VANILLA_WEIGHTS)"'),
}


def regenerate_command(path):
    """The command that rewrites a committed file: ``data/<work>/...`` -> ``python -m minimal reproduce <work>
    --full`` (``data/shakespeare/`` -> its ``prepare.py``); a path outside ``data/`` gets the generic advice."""
    try:
        parts = Path(path).resolve().relative_to(DATA_ROOT.resolve()).parts
    except ValueError:
        parts = ()
    if len(parts) < 2:
        return ("the command that wrote it (for a committed file data/<work>/...: "
                "`python -m minimal reproduce <work> --full` from the repository root)")
    if parts[0] == "shakespeare":
        return "`python data/shakespeare/prepare.py` from the repository root"
    stem = f"{parts[0]}/{Path(parts[-1]).stem}"
    if stem in COMMANDS:
        return f"`{COMMANDS[stem]}` from the repository root"
    return f"`python -m minimal reproduce {parts[0]} --full` from the repository root"


def _missing(path):
    return FileNotFoundError(f"{path} is missing: write it with {regenerate_command(path)}")


def damaged(path, what):
    """The ValueError for a file that exists but cannot be used: names it, says what is wrong and how to rewrite
    it."""
    return ValueError(f"{path} {what}: delete it and rewrite it with {regenerate_command(path)}")


def read_npz(path):
    """Every array of the ``.npz`` at ``path`` as a dict, read eagerly (``allow_pickle=False``). A missing file
    raises FileNotFoundError, a truncated or corrupt file, an ``.npy`` or a pickled array a ValueError; each names
    the file and the command that rewrites it (``regenerate_command``)."""
    path = Path(path)
    if not path.is_file():
        raise _missing(path)
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise damaged(path, "holds one .npy array, not an .npz archive of named arrays")
        with z:
            return {k: z[k] for k in z.files}
    except (OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
        why = "is empty" if path.stat().st_size == 0 else f"is not a readable .npz archive ({type(e).__name__}: {e})"
        raise damaged(path, why) from None
    except ValueError as e:
        if str(e).startswith(str(path)):
            raise
        raise damaged(path, f"is not a readable .npz archive ({e})") from None


def load_json(path):
    """The JSON at ``path``; missing or unreadable names the file and the command that rewrites it."""
    path = Path(path)
    if not path.is_file():
        raise _missing(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise damaged(path, f"is not valid JSON ({e})") from None


def check_saved_shapes(path, what, got, ref):
    """Require the saved arrays ``got`` (name -> array) to have exactly the names and shapes of ``ref`` (name ->
    array of a freshly built model); the ValueError names the file, ``what`` (e.g. "model 'mingru'"), each
    missing, unexpected or mis-shaped array with both shapes, and the command that rewrites the file."""
    missing, extra = sorted(set(ref) - set(got)), sorted(set(got) - set(ref))
    shapes = [f"{k} {tuple(got[k].shape)} (expected {tuple(ref[k].shape)})" for k in ref
              if k in got and got[k].shape != ref[k].shape]
    if missing or extra or shapes:
        parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else []) + (
            [f"wrong shapes: {', '.join(shapes)}"] if shapes else [])
        raise damaged(path, f"does not hold the params of {what}: {'; '.join(parts)}")
    return got


def save_groups(path, groups):
    """Write {group: {name: array}} atomically to one ``.npz`` as ``<group>/<name>`` arrays; a failed write leaves
    the old file whole. Refused before anything is written (ValueError naming the group and name): what would not
    load back with ``allow_pickle=False`` (None, object arrays) and group names that are empty or hold "/" (group
    "seed/1" with name "w" and group "seed" with name "1/w" would both be stored as "seed/1/w")."""
    arrays = {}
    for g, params in groups.items():
        if not isinstance(g, str) or not g or "/" in g:
            raise ValueError(f"group {g!r}: a group name must be a non-empty string without '/' (it is the prefix "
                             f"'<group>/' of each array's name in the file)")
        for k, v in params.items():
            if not isinstance(k, str) or not k:
                raise ValueError(f"group {g!r}: array name {k!r} must be a non-empty string")
            if v is None:
                raise ValueError(f"{g}/{k} is None: save_groups writes arrays only (drop the entry)")
            a = np.asarray(v)
            if a.dtype.kind in "OV":
                raise ValueError(f"{g}/{k} has dtype {a.dtype} (object or structured): it would need pickle to load "
                                 f"back; pass a numeric or string array")
            arrays[f"{g}/{k}"] = a
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        np.savez(f, **arrays)


def load_groups(path):
    """{group: {name: array}} from ``save_groups``; callers check the names they need. A file that is missing,
    unreadable or holds an array outside any group raises naming the file (``read_npz``)."""
    out = {}
    for key, a in read_npz(path).items():
        group, sep, name = key.partition("/")
        if not sep or not group or not name:
            raise damaged(path, f"holds the array {key!r} outside any group: it was not written by save_groups")
        out.setdefault(group, {})[name] = a
    return out
