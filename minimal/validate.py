"""Input checks shared by every module: a bad argument raises an ``InputError`` (a ValueError) naming it.

Nothing in `minimal` silently broadcasts, truncates or casts an input. Each public function calls
`check_array` on its inputs, which states the argument's name, the expected shape (with the names of the
dimensions, e.g. ``(B, T, D)``) and what was received.

``InputError`` subclasses ``ValueError``, so ``except ValueError`` and ``pytest.raises(ValueError)`` still
catch it. It marks an error as the caller's, not the library's: the command line (``minimal.__main__``)
reports an ``InputError`` as one line and lets every other exception, a plain ValueError from a bug
included, show its traceback. Raise it directly for bad input that these helpers do not cover.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["InputError", "check_array", "check_same_shape", "check_dtype", "common_dtype", "check_positive_int",
           "check_choice", "check_keys", "check_grad_dtype", "overflow_error", "check_finite_result", "OverflowInputError"]


class InputError(ValueError):
    """A caller's argument is bad (wrong shape, dtype, range or choice); the message names the argument."""


class OverflowInputError(InputError):
    """Finite inputs too large for their dtype: a computation from them overflowed (``overflow_error``). A
    caller that passed internal arrays to that computation catches it to name its own inputs instead."""


def _fmt_shape(spec, names):
    parts = []
    for i, s in enumerate(spec):
        if names is not None and i < len(names):
            parts.append(names[i] if s is None else f"{names[i]}={s}")
        else:
            parts.append("*" if s is None else str(s))
    return "(" + ", ".join(parts) + ")"


def check_array(name, x, shape=None, *, ndim=None, names=None, kind="f", finite=True, min_ndim=None):
    """Check one array argument and return it as an ndarray (never copied or cast).

    Args:
        name: the argument's name, used in the error message.
        x: the value to check; must already be a NumPy array.
        shape: expected shape; a tuple of ints or None (any size), e.g. ``(B, None, D)``.
        ndim: expected number of dimensions (implied by ``shape`` when given).
        names: names of the dimensions for the message, e.g. ``("B", "T", "D")``.
        kind: allowed dtype kinds: "f" float, "c" complex, "i" integer (signed or unsigned), or a
            combination such as "fc"; None skips the dtype check.
        finite: reject NaN and inf.
        min_ndim: at least this many dimensions.
    Raises:
        InputError: naming ``name``, the expected shape or dtype, and what was received.
    """
    if not isinstance(x, np.ndarray):
        raise InputError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if shape is not None:
        ndim = len(shape)
    expected = _fmt_shape(shape, names) if shape is not None else (
        f"{ndim}-d array" if ndim is not None else "array")
    if ndim is not None and x.ndim != ndim:
        raise InputError(f"{name} must have shape {expected}, got shape {x.shape}")
    if min_ndim is not None and x.ndim < min_ndim:
        raise InputError(f"{name} must have at least {min_ndim} dimensions, got shape {x.shape}")
    if shape is not None:
        for want, got in zip(shape, x.shape):
            if want is not None and want != got:
                raise InputError(f"{name} must have shape {expected}, got shape {x.shape}")
    if kind is not None:
        k = x.dtype.kind
        ok = (k == "f" and "f" in kind) or (k == "c" and "c" in kind) or (k in "iu" and "i" in kind)
        if not ok:
            want = {"f": "floating", "c": "complex", "i": "integer"}
            words = " or ".join(want[c] for c in kind)
            article = "an" if words[0] in "aeiou" else "a"
            raise InputError(f"{name} must have {article} {words} dtype, "
                             f"got {x.dtype}")
    if finite and x.dtype.kind in "fc" and not np.all(np.isfinite(x)):
        raise InputError(f"{name} contains NaN or inf")
    return x


def check_same_shape(name, x, ref_name, ref):
    """Require ``x.shape == ref.shape`` (no broadcasting)."""
    if x.shape != ref.shape:
        raise InputError(f"{name} must have the same shape as {ref_name} {ref.shape}, got {x.shape}")
    return x


def check_dtype(name, x, dtype, ref="the params'"):
    """Require ``x.dtype == dtype``: a float32 input to float64 params (or the reverse) is refused, not promoted."""
    if x.dtype != dtype:
        raise InputError(f"{name} must have {ref} dtype {np.dtype(dtype)}, got {x.dtype}")
    return x


def common_dtype(arrays):
    """The dtype shared by every array of the dict ``arrays`` (name -> array); the first entry sets it."""
    first, ref = next(iter(arrays.items()))
    for name, a in arrays.items():
        if a.dtype != ref.dtype:
            raise InputError(f"{name} must have the dtype of {first} ({ref.dtype}), got {a.dtype}")
    return ref.dtype


def check_grad_dtype(name, grad, params):
    """Require an upstream gradient ``grad`` (``dy``) of the params' dtype: a backward never mixes float32 and
    float64 (nor returns grads in another dtype than the params')."""
    return check_dtype(name, grad, common_dtype(params))


def check_positive_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_choice(name, value, choices):
    if value not in choices:
        raise InputError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_keys(name, params, required, optional=()):
    """Require ``params`` to be a dict with every key of ``required``, any of ``optional`` and no other; one
    InputError lists the missing and the unexpected keys."""
    if not isinstance(params, Mapping):
        raise InputError(f"{name} must be a dict of name -> array, got {type(params).__name__}")
    required, optional = set(required), set(optional)
    missing, extra = sorted(required - set(params)), sorted(set(params) - required - optional)
    if missing or extra:
        allowed = f"{sorted(required)}" + (f" and optionally {sorted(optional)}" if optional else "")
        raise InputError(f"{name} must have the keys {allowed}: missing {missing}, unexpected {extra}")
    return params


def overflow_error(what, inputs, advice="scale them down, or use float64"):
    """The InputError for a NaN or inf that arose from finite ``inputs`` (dict: the caller's names -> arrays):
    names each input with its dtype and largest magnitude, then ``what`` overflowed."""
    parts, dtype = [], None
    for name, a in inputs.items():
        a = np.asarray(a)
        dtype = dtype or (a.dtype if a.dtype.kind == "f" else None)
        big = float(np.max(np.abs(a))) if a.size else 0.0
        parts.append(f"{name} has {a.dtype} values up to {big:.3g}")
    limit = f" ({dtype} holds at most {np.finfo(dtype).max:.3g})" if dtype is not None else ""
    return OverflowInputError(f"{', '.join(parts)}: {what} overflowed to inf or NaN{limit}; {advice}")


def check_finite_result(what, result, inputs, advice="scale them down, or use float64"):
    """Return ``result`` (an array, or a dict / tuple of arrays) if it is finite; otherwise raise
    ``overflow_error(what, inputs, advice)``. For results computed from finite inputs: a NaN or inf there means
    the inputs were too large for their dtype, and the error names them instead of an internal array."""
    arrays = result.values() if isinstance(result, dict) else result if isinstance(result, tuple) else (result,)
    for a in arrays:
        if a is not None and not np.all(np.isfinite(a)):
            raise overflow_error(what, inputs, advice)
    return result
