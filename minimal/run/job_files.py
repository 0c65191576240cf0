"""The job files of a sweep: one JSON file per finished job, named by a stable hash of the job.

A job is ``fn(config) -> dict``; it is named by a stable hash of (fn's import path, config), its job key, so the
same job always maps to the same file ``<out_dir>/<name>-<job_key>.json``, holding

    {"function": "pkg.module.fn", "config": {...}, "result": {...}, "seconds": wall time of the job}

A field added to a job's dataclass later would change every existing job's key (its files would be left behind
unseen). Declared with ``keyed_when_set`` (default None: the behaviour before the field existed), it is left out of
the config, and so of the key and the job file, while it is None: old files keep their names, and a job that sets
it gets a key of its own.

Here: the keys and paths (``job_key``, ``job_path``, ``checkpoint_path``), the plain JSON values a config and a
result become (``config_dict``, ``plain``, ``keyed_when_set``, ``finite_or_nan``), and the records' reading and writing
(``read_record``, ``write_record``, ``load_records``, ``all_on_disk``). A file that cannot be read as a record
(empty, truncated, garbage, a git merge conflict), or whose record was computed for another job (its function and
config do not hash to the file's job key), is not the job's record: ``read_record`` says why (``refusal`` words
it). ``minimal.run.sweep`` runs the jobs and writes these files.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import numpy as np

from .io import write_json
from ..validate import InputError

__all__ = ["config_dict", "keyed_when_set", "job_key", "job_path", "checkpoint_path", "all_on_disk", "load_records", "finite_or_nan"]


def plain(value):
    """JSON-ready copy: NumPy scalars/arrays to Python numbers/lists, tuples to lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise ValueError(f"config and results must hold plain values (numbers, strings, lists, dicts), "
                     f"got {type(value).__name__}: {value!r}")


UNSET_OMITTED = "job_key_unset_omitted"    # the dataclass field metadata flag that ``keyed_when_set`` sets


def keyed_when_set():
    """A dataclass field (default None) that ``config_dict`` leaves out while it is None: a field added to a job's
    config after its job files were written, None meaning the behaviour from before it existed. Those files keep
    their job keys; a job that sets the field is keyed (and recorded) with it.

    Example::

        @dataclass(frozen=True)
        class Job:
            lr: float = 3e-3
            value_scale: Optional[float] = keyed_when_set()   # None: as before the field existed
    """
    return dataclasses.field(default=None, metadata={UNSET_OMITTED: True})


def config_dict(config):
    """A config (dataclass or dict) as a dict of plain JSON values; a dataclass's ``keyed_when_set`` fields are left
    out while they are None."""
    if not ((dataclasses.is_dataclass(config) and not isinstance(config, type)) or isinstance(config, dict)):
        raise ValueError(f"config must be a dataclass instance or a dict, got {type(config).__name__}")
    out = plain(config)
    if isinstance(config, dict):
        return out
    for f in dataclasses.fields(config):
        if f.metadata.get(UNSET_OMITTED) and getattr(config, f.name) is None:
            del out[f.name]
    return out


def fn_name(fn):
    """fn's import path ``"<module>.<qualname>"``, the name its job key hashes (ValueError if not callable)."""
    if not callable(fn):
        raise ValueError(f"fn must be a callable config -> dict, got {type(fn).__name__}")
    return f"{fn.__module__}.{fn.__qualname__}"


def _key(function, config):
    """The job key of a function's import path (a string) and a plain config dict."""
    text = json.dumps({"function": function, "config": config}, sort_keys=True, separators=(",", ":"),
                      allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def job_key(fn, config):
    """Stable 16-hex-digit hash of fn's import path and the config's values (key order does not matter)."""
    return _key(fn_name(fn), config_dict(config))


def job_path(out_dir, fn, config, name=None):
    """``<out_dir>/<name>-<job_key>.json``; ``name`` defaults to fn's name."""
    key = job_key(fn, config)
    return Path(out_dir) / f"{name or fn.__name__}-{key}.json"


OTHER_JOB = "computed for another job"     # how ``read_record`` begins the why of a record that is not the job's


def _record_key(record):
    """The job key of the function and config a record says it was computed for (None if they do not hash)."""
    try:
        return _key(record["function"], config_dict(record["config"]))
    except (TypeError, ValueError):
        return None


def _short(value, n=120):
    text = json.dumps(value, sort_keys=True, allow_nan=True)
    return text if len(text) <= n else text[:n - 3] + "..."


def read_record(path, key=None):
    """``(record, None)`` for a readable job file, ``(None, why)`` for a missing or unreadable one; with ``key``
    (the job key the file is for) also ``(None, why)`` for a record computed for another job: one whose function
    and config do not hash to ``key`` (a job file copied over another's), ``why`` starting with ``OTHER_JOB``."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as e:
        return None, f"{type(e).__name__}: {e}"
    try:
        record = json.loads(text)
    except ValueError as e:  # json.JSONDecodeError: empty, truncated, garbage, merge-conflict markers
        return None, f"not valid JSON ({e})"
    if not (isinstance(record, dict) and {"function", "config", "result", "seconds"} <= set(record)):
        return None, "not a job record (no function, config, result and seconds)"
    if key is not None and _record_key(record) != key:
        return None, (f"{OTHER_JOB}: it holds {record['function']} with config {_short(record['config'])}, "
                      f"job key {_record_key(record)}, not {key}")
    return record, None


def _key_of(path):
    """The job key in a job file's name ``<name>-<job_key>.json`` (None for a name of another form)."""
    tail = Path(path).stem.rsplit("-", 1)[-1]
    return tail if len(tail) == 16 and all(c in "0123456789abcdef" for c in tail) else None


def refusal(path, why, then):
    """The message for a job file that is not the job's record: unreadable, or computed for another job."""
    if why.startswith(OTHER_JOB):
        return f"sweep job file {path} was {why}; {then}"
    return f"sweep job file {path} is unreadable ({why}); {then}"


def all_on_disk(fn, configs, out_dir, name=None):
    """True if every config's job file exists under ``out_dir`` and reads as a record: ``run_sweep`` would
    compute nothing."""
    return all(read_record(job_path(out_dir, fn, c, name), job_key(fn, c))[0] is not None for c in configs)


def write_record(path, record):
    """Write a job record to ``path`` atomically (``minimal.run.io.write_json``)."""
    write_json(path, record, sort_keys=True)   # keys sorted: a record's text depends on its content alone


def checkpoint_path(checkpoint_dir, fn, config, name=None):
    """``<checkpoint_dir>/<name>-<job_key>.npz``: where a job of a sweep with ``checkpoint_dir`` keeps its
    checkpoint (and whatever it writes beside it, ``<name>-<job_key>.*``) until its job file is written."""
    return Path(checkpoint_dir) / (job_path(checkpoint_dir, fn, config, name).stem + ".npz")


def load_records(out_dir, name=None):
    """Every job record (dict) under ``out_dir`` (optionally only files named ``<name>-*.json``), sorted by file.

    Raises:
        ValueError: a file that is not a readable record, or (a file named ``<name>-<job_key>.json``) whose record
            was computed for another job, naming it (a re-run of the sweep recomputes it).
    """
    pattern = f"{name}-*.json" if name else "*.json"
    records = []
    for p in sorted(Path(out_dir).glob(pattern)):
        record, why = read_record(p, _key_of(p))
        if record is None:
            raise InputError(refusal(p, why, "re-run the sweep to recompute it, or delete the file"))
        records.append(record)
    return records


def finite_or_nan(x):
    """float(x), with inf mapped to nan (JSON has neither; ``json`` writes NaN, which it reads back)."""
    x = float(x)
    return x if math.isfinite(x) else float("nan")
