"""Where the committed data and trained results live: ``<repository>/data/<work>/...``.

Notebooks run in ``notebooks/``, the CLI in the repository root, and the package may be imported from either; all
of them find the data through ``data_path``, which is anchored at this package's location, not the working
directory. Weights are written and read by ``minimal.run.io`` (one ``.npz`` with its config as JSON beside it); this
module names the files and builds the errors that say which one is missing or damaged and how to rewrite it. A
wheel carries the same files as package data, ``minimal/_data`` (setup.py maps ``data/`` there), and ``DATA_ROOT``
is that folder when it exists: the lessons run from a plain ``pip install``. Where neither is there, ``data_path(...,
must_exist=True)`` says so instead of letting a caller retrain silently.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["DATA_ROOT", "data_path", "regenerate_command", "missing", "damaged", "load_json", "check_saved_shapes"]

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


_EXTRA = "python -m minimal.reproduce.extra"
COMMANDS = {   # committed files that `reproduce <work> --full` does not write: the command that does
    # `reproduce gril --full` writes these too; --only reruns just the one experiment
    "gril/multistep_full": "python -m minimal reproduce gril --full --only multistep",
    "gril/classification_full": "python -m minimal reproduce gril --full --only classification",
    # minimal.reproduce.extra.FILES (a test keeps the two alike)
    **{name: f"{_EXTRA} {name}" for name in ["minrnn/shakespeare_small", "minrnn/shakespeare_vanilla",
                                             "minrnn/shakespeare_fixed", "minrnn/shakespeare_step_cpu",
                                             *(f"minrnn/shakespeare_{n}_seed{s}" for n in ("full", "fixed")
                                               for s in (1, 2)),
                                             "zucchet/teacher_student_paper_optimiser_full"]},
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


def missing(path):
    """The FileNotFoundError for a file that is not there: names it and the command that writes it."""
    return FileNotFoundError(f"{path} is missing: write it with {regenerate_command(path)}")


def damaged(path, what):
    """The ValueError for a file that exists but cannot be used: names it, says what is wrong and how to rewrite
    it."""
    return ValueError(f"{path} {what}: delete it and rewrite it with {regenerate_command(path)}")


def load_json(path):
    """The JSON at ``path``; missing or unreadable names the file and the command that rewrites it."""
    path = Path(path)
    if not path.is_file():
        raise missing(path)
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
