"""Character-level language modelling on the committed Shakespeare text (Feng et al., "Were RNNs All We Needed?"
(2024), Sec. 4.3 / Fig. 2, App. C.3: 1,003,854 training and 111,540 test characters, nanoGPT's shakespeare_char).

The text lives in ``data/shakespeare/`` (``train.txt``, ``test.txt``, ``meta.json`` with the vocabulary), written
once by ``python data/shakespeare/prepare.py``. Each character is one token: its index in ``meta["vocab"]``
(sorted, so token order is character order).

Training batches are random windows of T + 1 consecutive characters, as nanoGPT's ``get_batch``:

    start_b ~ U{0, ..., n - T - 1}       b = 1 .. B, drawn from a seeded ``numpy.random.Generator``
    w_b     = ids[start_b : start_b + T + 1]
    x = w[:, :-1],  y = w[:, 1:]         (B, T) inputs and next-character targets

Evaluation is deterministic: ``eval_windows`` cuts the test text into consecutive windows of T + 1 characters
that overlap by one (stride T), so every test character after the first is a target exactly once (the ragged
tail is dropped); with ``n_windows`` it keeps that many, evenly spaced over the text (the fixed subset a
training run evaluates every k steps). Each window starts with an empty context, so early positions in a window
see less history than in a sliding evaluation: this is nanoGPT's ``estimate_loss`` on fixed windows.

Glossary: B batch, T context length (targets per window), V vocabulary size, n characters in a split.
"""
from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

import numpy as np

from ..data import data_path
from ..validate import check_array, check_positive_int

__all__ = ["CharData", "load", "encode", "decode", "sample_batch", "eval_windows", "split_xy", "PREPARE"]

PREPARE = "python data/shakespeare/prepare.py"


class CharData(NamedTuple):
    vocab: str            # the V characters, token i is vocab[i]
    train: np.ndarray     # (n_train,) uint8 token ids
    test: np.ndarray      # (n_test,) uint8 token ids


def _read(name):
    """The bytes of ``data/shakespeare/<name>`` and its path; missing names the command that builds it."""
    path = data_path("shakespeare", name)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: build data/shakespeare/ with `{PREPARE}` "
                                f"from the repository root")
    return path.read_bytes(), path


def _damaged(path, what):
    return ValueError(f"{path} {what}: the file is damaged or edited; rebuild data/shakespeare/ with "
                      f"`{PREPARE}` from the repository root")


def _meta():
    raw, path = _read("meta.json")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _damaged(path, f"is not valid JSON ({e})") from None
    need = {"vocab": str, "vocab_size": int, "n_train": int, "n_test": int, "sha256": dict}
    bad = [k for k, t in need.items() if not isinstance(meta, dict) or not isinstance(meta.get(k), t)]
    if not bad and not all(isinstance(meta["sha256"].get(f), str) for f in ("train.txt", "test.txt")):
        bad = ["sha256 of train.txt / test.txt"]
    if bad:
        raise _damaged(path, f"lacks the entries {bad} (or they have the wrong type)")
    return meta, path


def _split(meta, name, n):
    """The characters of train.txt / test.txt, checked against meta.json's size and sha256."""
    raw, path = _read(name)
    if len(raw) != n:
        raise _damaged(path, f"has {len(raw)} characters, meta.json says {n}")
    if hashlib.sha256(raw).hexdigest() != meta["sha256"][name]:
        raise _damaged(path, "does not match the sha256 that meta.json records for it")
    return raw.decode("ascii")


def encode(text, vocab):
    """Token ids (uint8) of ``text``; a ValueError names the first character outside ``vocab`` (any character,
    never replaced: an em dash is refused as itself, not read as "?")."""
    lut = np.full(256, 255, dtype=np.uint8)
    for i, ch in enumerate(vocab):
        lut[ord(ch)] = i
    code = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    ids = lut[np.minimum(code, 255)]
    bad = np.flatnonzero((ids == 255) | (code > 255))
    if bad.size:
        raise ValueError(f"character {text[bad[0]]!r} at position {bad[0]} is not in the vocabulary")
    return ids


def decode(ids, vocab):
    """The string of token ids ``ids`` (an integer array or sequence, each in [0, len(vocab))); a ValueError
    names the first id outside that range or a non-integer dtype."""
    ids = np.asarray(ids)
    if ids.size == 0:
        return ""
    if ids.dtype.kind not in "iu" or ids.dtype == bool:
        raise ValueError(f"ids must be integer token ids, got dtype {ids.dtype}")
    ids = ids.ravel()
    bad = np.flatnonzero((ids < 0) | (ids >= len(vocab)))
    if bad.size:
        raise ValueError(f"ids[{bad[0]}] = {ids[bad[0]]} is not a token id: ids must lie in [0, {len(vocab)}) "
                         f"(the vocabulary has {len(vocab)} characters)")
    return "".join(vocab[int(i)] for i in ids)


def load():
    """The committed train / test text, encoded with meta.json's vocabulary; each file is checked against the
    size and sha256 that meta.json records (a damaged file names itself and the command that rebuilds it)."""
    meta, path = _meta()
    vocab = meta["vocab"]
    if len(vocab) != meta["vocab_size"] or len(vocab) >= 255:
        raise _damaged(path, f"has a vocab of {len(vocab)} characters, its vocab_size says {meta['vocab_size']}")
    train = encode(_split(meta, "train.txt", meta["n_train"]), vocab)
    test = encode(_split(meta, "test.txt", meta["n_test"]), vocab)
    return CharData(vocab, train, test)


def sample_batch(ids, B, T, rng):
    """B random windows of T + 1 consecutive tokens. ids: (n,); rng: ``numpy.random.Generator``.
    Returns (B, T + 1) int64."""
    check_array("ids", ids, (None,), names=("n",), kind="i")
    B, T = check_positive_int("B", B), check_positive_int("T", T)
    if ids.size < T + 1:
        raise ValueError(f"ids must hold at least T + 1 = {T + 1} tokens, got {ids.size}")
    start = rng.integers(0, ids.size - T, size=B)                  # start + T <= n - 1
    return ids[start[:, None] + np.arange(T + 1)].astype(np.int64)


def eval_windows(ids, T, n_windows=None):
    """Fixed evaluation windows of T + 1 tokens at stride T (module docstring).

    Args:
        ids: (n,) token ids; T: targets per window; n_windows: None (all (n - 1) // T windows) or how many to
            keep, evenly spaced over the text.
    Returns:
        (N, T + 1) int64.
    """
    check_array("ids", ids, (None,), names=("n",), kind="i")
    T = check_positive_int("T", T)
    total = (ids.size - 1) // T
    if total < 1:
        raise ValueError(f"ids must hold at least T + 1 = {T + 1} tokens, got {ids.size}")
    idx = np.arange(total)
    if n_windows is not None:
        n_windows = check_positive_int("n_windows", n_windows)
        if n_windows > total:
            raise ValueError(f"n_windows must be <= {total} (the windows of T = {T} in {ids.size} tokens), "
                             f"got {n_windows}")
        idx = np.linspace(0, total - 1, n_windows).round().astype(np.int64)
    return ids[idx[:, None] * T + np.arange(T + 1)].astype(np.int64)


def split_xy(windows):
    """(B, T + 1) windows -> inputs x (B, T) and next-token targets y (B, T)."""
    check_array("windows", windows, (None, None), names=("B", "T+1"), kind="i")
    return windows[:, :-1], windows[:, 1:]
