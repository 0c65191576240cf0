"""The one results writer and the one weights format.

Results. Every results or metrics JSON the package writes goes through ``write_json(path, obj)``: written
atomically (``minimal.run._atomic``: a reader or a crash sees the old file or the new one, never half of one), indented
by one space, keys in the order given (``sort_keys=True`` for files whose order must not depend on the writer),
NumPy scalars and arrays as plain numbers and lists, a newline at the end.

Weights. Trained parameters are two files side by side:

    <name>.npz    the arrays, nothing else (loads with ``allow_pickle=False``)
    <name>.json   {...metadata..., "config": {...}, "weights": {"format": "minimal-weights-1",
                   "layout": "flat" | "groups", "sha256": "<64 hex digits>",
                   "arrays": {"<key>": "float32[70,64]", ...}}}

``params`` is either flat, {name: array}, or one level of groups, {group: {name: array}} (one model per
group: the kinds of a language-model run, the targets of a GRIL run, the seeds of a sweep), stored as
``<group>/<name>``; ``"layout"`` records which, so ``load_weights`` gives back the structure that was saved. The
``"arrays"`` list (dtype and shape of each key) lets the loader tell a damaged or mismatched pair from a good one
without knowing the model; a loader that does know it (``shakespeare_runs.load_weights``, ``regression.load_weights``)
checks the shapes the config implies on top. The sidecar also holds whatever metadata the run passes
(metrics, timings): for a run that writes its metrics beside its weights it *is* the metrics file.

One pair. ``"sha256"`` is the SHA-256 of the ``.npz``'s bytes: the two files carry a shared digest, so one run's
``.npz`` beside another run's sidecar (a copy of one file of a pair, a write that stopped between the two files) is
refused on load (``MispairedWeightsError``, naming both files and the command that rewrites them), even when both
runs saved the same model (same names, dtypes and shapes). A sidecar without ``"sha256"`` is one written before the
digest existed (the committed ``data/`` pairs, which git keeps together): it is accepted as it is, checked against
its array list only; ``save_weights`` always writes the digest, so rewriting a pair adds it.

Concurrent writers. The ``.npz`` is serialised in memory first (its digest goes into the sidecar), then both files
are written, each atomically, the arrays first, under an exclusive ``fcntl.flock`` on their folder; ``load_weights``
reads the pair under a shared lock on it. Two processes saving the same path therefore leave one writer's whole
pair, and a reader sees one whole pair, never one writer's arrays with the other's config. No lock file is made
(the folder itself is locked). Where no lock can be had (no ``fcntl``; a file system without ``flock`` on a
folder) the digest still catches a torn pair: the reader reads the pair again once, after a short pause, and
refuses it if it is still torn.

Not finite. Weights holding NaN or inf are refused by ``save_weights`` (``NonFiniteWeightsError``, naming each
such array and how many of its values): they come from a run that diverged, which ``minimal.run.train`` already stops
with its own message, and would only move the failure to whoever loads them. A file that holds them anyway
(written by other code) loads with a ``NonFiniteWeightsWarning`` naming the arrays.

``load_weights(path) -> (params, config)`` names the file and what is wrong on any damage: a missing ``.npz`` or
sidecar, a sidecar that is not JSON or lacks its config or array list, an ``.npz`` that is empty, truncated or not
an archive, an array that is missing, unexpected, or of another dtype or shape than the sidecar lists, and an
``.npz`` whose digest is not the sidecar's. Every message ends with the command that rewrites the file
(``minimal.data.regenerate_command``).

Training checkpoints (``minimal.run.train``) are a different thing and keep their own single-file format: a resume
needs the params, the optimizer moments, the step, the RNG state and the loss history to change together, and two
files cannot be replaced in one atomic step. They are written with the same ``atomic_write``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
import warnings
import zipfile
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path

try:
    import fcntl
except ImportError:     # not POSIX: no lock, the digest still refuses a torn pair
    fcntl = None

import numpy as np

from ._atomic import atomic_write
from ..data import damaged, missing, regenerate_command

__all__ = ["write_json", "save_weights", "load_weights", "load_meta", "update_meta", "sidecar_path", "FORMAT",
           "MispairedWeightsError", "NonFiniteWeightsError", "NonFiniteWeightsWarning"]

FORMAT = "minimal-weights-1"
_LAYOUTS = ("flat", "groups")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_RETRY_S = 0.05         # the pause before a reader reads a torn pair again (module docstring)


class MispairedWeightsError(ValueError):
    """A weights ``.npz`` and its sidecar were not written together: the sidecar's digest is not the ``.npz``'s."""


class NonFiniteWeightsError(ValueError):
    """``save_weights`` was given arrays holding NaN or inf; the message names them. Nothing was written."""


class NonFiniteWeightsWarning(RuntimeWarning):
    """``load_weights`` read arrays holding NaN or inf (a file not written by ``save_weights``)."""


# --- results -----------------------------------------------------------------------------------------------------
def _plain(o):
    """``json.dumps``'s ``default``: NumPy scalars and arrays as Python numbers and lists."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable (write numbers, strings, lists and dicts)")


def _dumps(obj, sort_keys=False):
    return json.dumps(obj, indent=1, sort_keys=sort_keys, default=_plain) + "\n"


def write_json(path, obj, sort_keys=False):
    """Write ``obj`` as JSON to ``path`` atomically (module docstring), creating its folder. The text is built
    before the file is opened, so an object that cannot be serialised leaves the old file as it was."""
    text = _dumps(obj, sort_keys)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w") as f:
        f.write(text)


# --- weights -----------------------------------------------------------------------------------------------------
@contextmanager
def _folder_lock(path, exclusive):
    """Hold ``fcntl.flock`` on the folder of ``path`` (exclusive for a writer, shared for a reader) for the block;
    where none can be had (no ``fcntl``, a file system that refuses it) the block runs unlocked (module
    docstring). Closing the descriptor releases the lock, also when the process dies. Never nested: a process
    holding it does not ask for it again."""
    fd = None
    if fcntl is not None:
        try:
            fd = os.open(Path(path).parent, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError:
            if fd is not None:
                os.close(fd)
            fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _nonfinite(arrays):
    """"NaN in a/b (1 of 2 values), ...; inf in ..." for the float and complex arrays holding NaN or inf, or ""."""
    found = {"NaN": [], "inf": []}
    for key, a in arrays.items():
        if a.dtype.kind in "fc" and a.size:
            for what, test in (("NaN", np.isnan), ("inf", np.isinf)):
                n = int(np.count_nonzero(test(a)))
                if n:
                    found[what].append(f"{key} ({n} of {a.size} values)")
    return "; ".join(f"{what} in {', '.join(keys)}" for what, keys in found.items() if keys)


def sidecar_path(path):
    """``<name>.json`` beside the weights ``<name>.npz``."""
    return Path(path).with_suffix(".json")


def _check_npz_name(path):
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"path must name the weights' .npz file (its config goes beside it as .json), got {path}")
    return path


def _describe(a):
    """``float32[70,64]``: the dtype and shape the sidecar lists for an array."""
    return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"


def _flatten(params):
    """({key: array}, layout) from flat {name: array} or {group: {name: array}}; refuses (ValueError naming the
    entry) what would not load back with ``allow_pickle=False`` or would not split back into the same groups."""
    if not isinstance(params, dict) or not params:
        raise ValueError(f"params must be a non-empty dict of arrays or of dicts of arrays, got {params!r:.80}")
    nested = [isinstance(v, dict) for v in params.values()]
    if any(nested) and not all(nested):
        raise ValueError("params must be all arrays (flat) or all dicts of arrays (groups), not a mix")
    layout = "groups" if all(nested) else "flat"
    items = []
    for g, v in params.items():
        if layout == "flat":
            items.append((g, g, v))
            continue
        if not isinstance(g, str) or not g or "/" in g:
            raise ValueError(f"group {g!r}: a group name must be a non-empty string without '/' (it is the prefix "
                             f"'<group>/' of each array's name in the file)")
        if not v:
            raise ValueError(f"group {g!r} is empty: a group needs at least one array")
        items += [(f"{g}/{k}" if isinstance(k, str) else k, f"group {g!r}: array name {k!r}", a)
                  for k, a in v.items()]
    arrays = {}
    for key, what, a in items:
        if not isinstance(key, str) or not key or key.endswith("/"):
            raise ValueError(f"{what} must be a non-empty string")
        if a is None:
            raise ValueError(f"{key} is None: weights are arrays only (drop the entry)")
        a = np.asarray(a)
        if a.dtype.kind in "OV":
            raise ValueError(f"{key} has dtype {a.dtype} (object or structured): it would need pickle to load "
                             f"back; pass a numeric or string array")
        arrays[key] = a
    return arrays, layout


def save_weights(path, params, config, meta=None):
    """Write ``params`` to ``path`` (``.npz``) and ``config`` with ``meta`` to the JSON sidecar beside it.

    Args:
        path: ``<name>.npz``; the sidecar is ``<name>.json``.
        params: {name: array} or {group: {name: array}} (module docstring).
        config: the run's config, a dataclass or a JSON-serialisable dict (tuples come back as lists).
        meta: optional dict of further JSON-serialisable entries (metrics, timings); its keys "config" and
            "weights" are replaced by the config and the array list.
    Everything is checked and serialised before anything is written; both files are written under a lock on
    their folder, each replaced atomically (module docstring). Arrays holding NaN or inf raise a
    ``NonFiniteWeightsError`` naming them, and nothing is written.
    """
    path = _check_npz_name(path)
    arrays, layout = _flatten(params)
    bad = _nonfinite(arrays)
    if bad:
        raise NonFiniteWeightsError(
            f"{path} not written: the weights hold {bad}. Weights that are not finite come from a run that "
            f"diverged; train it again (e.g. with a lower learning rate, or from its last finite checkpoint) "
            f"instead of saving them")
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dataclass instance or a dict, got {type(config).__name__}")
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"meta must be a dict or None, got {type(meta).__name__}")
    buf = BytesIO()
    np.savez(buf, **arrays)
    blob = buf.getvalue()
    side = {**(meta or {}), "config": config,
            "weights": {"format": FORMAT, "layout": layout, "sha256": hashlib.sha256(blob).hexdigest(),
                        "arrays": {k: _describe(a) for k, a in arrays.items()}}}
    text = _dumps(side)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _folder_lock(path, exclusive=True):
        with atomic_write(path) as f:
            f.write(blob)
        with atomic_write(sidecar_path(path), "w") as f:
            f.write(text)


def load_meta(path):
    """The whole sidecar of the weights ``path`` (metadata, "config", "weights"), checked: a missing, non-JSON or
    incomplete sidecar raises naming it (FileNotFoundError / ValueError). The sidecar alone: that it belongs with
    the ``.npz`` beside it is checked by ``load_weights``."""
    return _load_meta(_check_npz_name(path))


def _load_meta(path):
    side = sidecar_path(path)
    if not side.is_file():
        raise FileNotFoundError(f"{side} is missing: the weights {path.name} need it beside them (it holds their "
                                f"config and array list); write both with {regenerate_command(path)}")
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise damaged(side, f"is not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise damaged(side, f"holds a JSON {type(meta).__name__}, not the object of a weights sidecar")
    w = meta.get("weights")
    if not isinstance(w, dict) or w.get("format") != FORMAT:
        found = w.get("format") if isinstance(w, dict) else None
        raise damaged(side, f"is not a weights sidecar: no \"weights\" entry of format {FORMAT!r} (found "
                            f"{found!r})")
    if w.get("layout") not in _LAYOUTS or not isinstance(w.get("arrays"), dict):
        raise damaged(side, f"has a \"weights\" entry without a layout in {_LAYOUTS} or an \"arrays\" object")
    if not isinstance(meta.get("config"), dict):
        raise damaged(side, "has no \"config\" object")
    digest = w.get("sha256")
    if digest is not None and not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
        raise damaged(side, f"has a \"sha256\" entry that is not 64 hex digits (got {digest!r:.80}), so it cannot "
                            f"be matched with its .npz")
    return meta


def _read_pair(path):
    """(sidecar, .npz bytes) of the weights ``path``, one read after the other (``load_weights`` holds the shared
    lock); a missing file raises naming it."""
    meta = _load_meta(path)
    try:
        return meta, path.read_bytes()
    except FileNotFoundError:
        raise missing(path) from None


def _parse_npz(path, blob):
    """Every array of the ``.npz`` bytes ``blob`` read from ``path``, read eagerly with ``allow_pickle=False``;
    empty, truncated, not an archive or pickled: an error naming the file and the command that rewrites it."""
    try:
        z = np.load(BytesIO(blob), allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise damaged(path, "holds one .npy array, not an .npz archive of named arrays")
        with z:
            return {k: z[k] for k in z.files}
    except (OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
        why = "is empty" if not blob else f"is not a readable .npz archive ({type(e).__name__}: {e})"
        raise damaged(path, why) from None
    except ValueError as e:
        if str(e).startswith(str(path)):
            raise
        raise damaged(path, f"is not a readable .npz archive ({e})") from None


def load_weights(path):
    """(params, config) from ``save_weights``: params in the layout saved (flat or groups), config a dict.

    Raises FileNotFoundError for a missing ``.npz`` or sidecar and ValueError for a damaged one, or for arrays
    missing, unexpected or of another dtype or shape than the sidecar lists, and MispairedWeightsError (a
    ValueError) for an ``.npz`` that is not the one its sidecar was written with; each names the file and what is
    wrong (module docstring). Arrays holding NaN or inf load with a NonFiniteWeightsWarning naming them."""
    path = _check_npz_name(path)
    if not path.is_file():
        raise missing(path)
    for attempt in range(2):            # a torn pair is read again once: a writer may be between its two files
        with _folder_lock(path, exclusive=False):
            meta, blob = _read_pair(path)
        want, got = meta["weights"].get("sha256"), hashlib.sha256(blob).hexdigest()
        if want is None or want == got:
            break
        if attempt == 0:
            time.sleep(_RETRY_S)
    listed = meta["weights"]["arrays"]
    arrays = _parse_npz(path, blob)
    absent, extra = sorted(set(listed) - set(arrays)), sorted(set(arrays) - set(listed))
    wrong = [f"{k} {_describe(arrays[k])} (the sidecar lists {listed[k]})" for k in listed
             if k in arrays and _describe(arrays[k]) != listed[k]]
    if absent or extra or wrong:
        parts = ([f"missing {absent}"] if absent else []) + ([f"unexpected {extra}"] if extra else []) + (
            [f"wrong dtype or shape: {', '.join(wrong)}"] if wrong else [])
        raise damaged(path, f"does not hold the arrays its sidecar {sidecar_path(path).name} lists: "
                            f"{'; '.join(parts)}")
    if want is not None and want != got:
        raise MispairedWeightsError(
            f"{path} and its sidecar {sidecar_path(path)} are not one pair: the sidecar was written with an .npz of "
            f"sha256 {want[:12]}..., this .npz has sha256 {got[:12]}... (one run's arrays beside another run's "
            f"config, or one file of the pair copied or rewritten without the other): delete both and rewrite them "
            f"with {regenerate_command(path)}")
    bad = _nonfinite(arrays)
    if bad:
        warnings.warn(f"{path} holds {bad}: weights that are not finite (from a diverged run; save_weights refuses "
                      f"them); rewrite the file with {regenerate_command(path)}", NonFiniteWeightsWarning,
                      stacklevel=2)
    if meta["weights"]["layout"] == "flat":
        return arrays, meta["config"]
    params = {}
    for key, a in arrays.items():
        group, sep, name = key.partition("/")
        if not sep or not group or not name:
            raise damaged(path, f"holds the array {key!r} outside any group, but its sidecar says the layout is "
                                f"groups")
        params.setdefault(group, {})[name] = a
    return params, meta["config"]


def update_meta(path, meta):
    """Add ``meta``'s entries to the sidecar of the weights ``path``, keeping its config and array list (for a
    caller that learns the metrics after the weights were written, as ``reproduce`` does). The read and the
    write happen under the pair's lock, so a concurrent ``save_weights`` is not undone."""
    path = _check_npz_name(path)
    with _folder_lock(path, exclusive=True):
        side = _load_meta(path)
        weights = side.pop("weights")
        write_json(sidecar_path(path), {**side, **{k: v for k, v in meta.items() if k != "weights"},
                                        "weights": weights})
