"""The words for a cell's run-time choices, their values and their defaults: the one place each default is decided.

    word     values                               default      what it picks
    mode     "parallel", "sequential"             "parallel"   the paper's two forms of a cell: every step at once
                                                               (a scan, a masked T x T product) or one step at a
                                                               time (the recurrent form, ``step_forward``)
    method   "auto", "sequential", "blelloch"     "auto"       the scan algorithm (``minimal.scan``); "auto" is the
                                                               fastest for the backend (``minimal.scan`` says which)
    backend  "numpy", "numba", "cuda"             "numba"      what runs it: NumPy (the reference), compiled CPU
                                                               loops, or the GPU kernels of ``cuda_kernels``
    kernel   "auto", "fused", "unfused"           "auto"       GRIL only (``cells.gril``): one fused pass over the
                                                               windows, or updates + scan + readout; "auto" fuses
                                                               wherever a fused kernel exists for the shape

Every function that takes one of these words takes it as ``word=None``, and None means the default above
(``choose``). A word that a call does not use (``method`` in sequential mode, where no scan runs) accepts None or
its default and refuses any other value (``check_unused``), so that a choice is never silently ignored.
docs/conventions.md is this table for readers; tests/test_conventions.py checks every registered cell against it.
"""
from __future__ import annotations

import functools

from .validate import InputError

__all__ = ["CHOICES", "DEFAULTS", "choose", "check_unused", "renamed_keywords"]

CHOICES = {"mode": ("parallel", "sequential"),
           "method": ("auto", "sequential", "blelloch"),
           "backend": ("numpy", "numba", "cuda"),
           "kernel": ("auto", "fused", "unfused")}
DEFAULTS = {"mode": "parallel", "method": "auto", "backend": "numba", "kernel": "auto"}

# Values some cells used before the words were settled: refused with the new spelling in the message.
_OLD_VALUES = {"mode": {"recurrent": "sequential", "rnn": "sequential"}}


def choose(word, value, where):
    """``value`` of the word (a key of CHOICES), or its default for None.

    Args:
        word: "mode", "method", "backend" or "kernel"; value: the caller's argument; where: the function that
            was called (e.g. "lsa.forward"), for the message.
    Raises:
        InputError that starts with ``word`` and lists its values (and gives the new spelling of an old value).
    """
    if value is None:
        return DEFAULTS[word]
    choices = CHOICES[word]
    if isinstance(value, str) and value in choices:
        return value
    new = _OLD_VALUES.get(word, {}).get(value) if isinstance(value, str) else None
    hint = f"; {value!r} is now spelled {new!r}" if new else ""
    raise InputError(f"{word} must be one of {list(choices)}, got {value!r} ({where}; None means "
                     f"{DEFAULTS[word]!r}){hint}")


def check_unused(word, value, where, why):
    """Refuse a value other than None or the default for a word this call does not use (``why`` says why)."""
    if value is not None and value != DEFAULTS[word]:
        raise InputError(f"{word}={value!r} has no effect in this call of {where} ({why}): pass {word}=None")


def renamed_keywords(**messages):
    """Decorator: a keyword argument named in ``messages`` (old name -> what to pass instead) raises an
    InputError with that message instead of reaching the function; the signature is the function's own."""
    def wrap(fn):
        where = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            for old in messages.keys() & kwargs.keys():
                raise InputError(f"{where}: {messages[old]}")
            return fn(*args, **kwargs)
        return checked
    return wrap
