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

import contextlib
import contextvars
import os
from collections.abc import Mapping

import numpy as np

__all__ = ["InputError", "check_array", "checked_values", "values_checked", "check_finite_values", "check_same_shape",
           "check_dtype", "common_dtype", "check_positive_int", "check_choice", "check_keys", "check_grad_dtype", "check_config", "overflow_error", "check_finite_result",
           "OverflowInputError", "memory_bytes", "nbytes_text", "check_fits", "check_out_dir"]


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


# Inside a stack (``minimal.models``) every layer's input is the previous layer's output, or the caller's input
# that the stack checked once on entry: the layers' own scans for NaN and inf would read each activation again.
_VALUES_CHECKED = contextvars.ContextVar("minimal_values_checked", default=False)


def values_checked():
    """Whether ``check_array`` skips its scan for NaN and inf here (inside ``checked_values``)."""
    return _VALUES_CHECKED.get()


@contextlib.contextmanager
def checked_values():
    """Within this block ``check_array`` checks shapes and dtypes but does not scan arrays for NaN and inf: the
    caller has scanned what enters it (``check_finite_values``) and scans what its steps compute: ``minimal.models
    .forward`` / ``backward`` run their layers in it, scanning each layer's output and the gradients at the end,
    and a composite layer scans what it passes to a saturating gate (``cells.min_block``: each LayerNorm output)."""
    token = _VALUES_CHECKED.set(True)
    try:
        yield
    finally:
        _VALUES_CHECKED.reset(token)


def check_finite_values(values):
    """Raise an ``InputError`` naming the first float array of the dict ``values`` (name -> array) that holds NaN
    or inf; other entries (integer ids, non-arrays) are left to the code that reads them."""
    for name, v in values.items():
        if isinstance(v, np.ndarray) and v.dtype.kind in "fc" and not np.isfinite(v).all():
            raise InputError(f"{name} contains NaN or inf")


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
        finite: reject NaN and inf (not scanned inside ``checked_values``, where the caller did).
        min_ndim: at least this many dimensions.
    Raises:
        InputError: naming ``name``, the expected shape or dtype, and what was received.
    """
    if not isinstance(x, np.ndarray):
        raise InputError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if shape is not None:
        ndim = len(shape)

    def expected():      # formatted only for an error: a check that passes builds no string
        return _fmt_shape(shape, names) if shape is not None else (f"{ndim}-d array" if ndim is not None else "array")

    if ndim is not None and x.ndim != ndim:
        raise InputError(f"{name} must have shape {expected()}, got shape {x.shape}")
    if min_ndim is not None and x.ndim < min_ndim:
        raise InputError(f"{name} must have at least {min_ndim} dimensions, got shape {x.shape}")
    if shape is not None:
        for want, got in zip(shape, x.shape):
            if want is not None and want != got:
                raise InputError(f"{name} must have shape {expected()}, got shape {x.shape}")
    if kind is not None:
        k = x.dtype.kind
        ok = (k == "f" and "f" in kind) or (k == "c" and "c" in kind) or (k in "iu" and "i" in kind)
        if not ok:
            want = {"f": "floating", "c": "complex", "i": "integer"}
            words = " or ".join(want[c] for c in kind)
            article = "an" if words[0] in "aeiou" else "a"
            raise InputError(f"{name} must have {article} {words} dtype, "
                             f"got {x.dtype}")
        if k == "f":
            check_float_dtype(name, x.dtype)   # float16 & co.: refused by name, not by Numba's NotImplementedError
    if finite and x.dtype.kind in "fc" and not _VALUES_CHECKED.get() and not np.isfinite(x).all():
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


FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_float_dtype(name, dtype):
    """The one float rule of every compiled path (Numba kernels, the fused AdamW, the scans): float32 or float64.
    Another float dtype (float16, longdouble) is refused here, naming ``name``, instead of failing inside Numba
    with ``NotImplementedError: float16``. Non-float dtypes pass (ids, complex: their own checks say)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype not in FLOAT_DTYPES:
        raise InputError(f"{name} must be float32 or float64 (the dtypes the compiled kernels compute in), "
                         f"got {dtype}")
    return dtype


def common_dtype(arrays):
    """The dtype shared by every array of the dict ``arrays`` (name -> array); the first entry sets it. A float
    dtype must be float32 or float64 (``check_float_dtype``)."""
    first, ref = next(iter(arrays.items()))
    for name, a in arrays.items():
        if a.dtype != ref.dtype:
            raise InputError(f"{name} must have the dtype of {first} ({ref.dtype}), got {a.dtype}")
    return check_float_dtype(first, ref.dtype)


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
        if a is not None and not np.isfinite(a).all():
            raise overflow_error(what, inputs, advice)
    return result


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_real(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and np.isfinite(v)


_INT64 = 2 ** 63   # NumPy sizes and indices are int64: a larger integer fails inside NumPy (TypeError, OverflowError)


def _int_want(value, minimum, text):
    if not (_is_int(value) and (minimum is None or value >= minimum)):
        return text
    if not -_INT64 <= value < _INT64:
        return f"{text} and below 2**63 (NumPy's sizes and indices are int64)"
    return None


def _check_field(value, rule):
    """One Config field (or one item of a tuple field) against ``rule`` (see ``check_config``); returns the
    error text (what the value must be) or None."""
    if rule == "bool":
        return None if isinstance(value, (bool, np.bool_)) else "True or False"
    if rule == "str":
        return None if isinstance(value, str) else "a string"
    if rule == "sequence":
        return None if isinstance(value, (tuple, list)) else "a tuple"
    if rule == "int":
        return _int_want(value, None, "an integer")
    if rule == "int>=1":
        return _int_want(value, 1, "an integer >= 1")
    if rule == "int>=0":
        return _int_want(value, 0, "an integer >= 0")
    if rule == "float>0" and not (_is_real(value) and value > 0):
        return "a finite number > 0"
    if rule == "float>=0" and not (_is_real(value) and value >= 0):
        return "a finite number >= 0"
    if rule == "[0,1)" and not (_is_real(value) and 0 <= value < 1):
        return "a number in [0, 1)"
    if rule == "(0,1]" and not (_is_real(value) and 0 < value <= 1):
        return "a number in (0, 1]"
    if rule == "float" and not _is_real(value):
        return "a finite number"
    if isinstance(rule, tuple) and rule[0] == "one of" and value not in rule[1]:
        return f"one of {list(rule[1])}"
    if isinstance(rule, tuple) and rule[0] == "subset of":
        if not isinstance(value, (tuple, list)) or not value or any(v not in rule[1] for v in value) \
                or len(set(value)) != len(value):
            return f"a non-empty tuple of distinct values from {list(rule[1])}"
    if isinstance(rule, tuple) and rule[0] in ("items", "grid"):
        grid = rule[0] == "grid"
        what = ("a non-empty tuple of distinct items, each " if grid else "a tuple whose items are each ")
        if not isinstance(value, (tuple, list)):
            return what + (_check_field(None, rule[1]) or "of its kind")
        for item in value:
            want = _check_field(item, rule[1])
            if want is not None:
                return f"{what}{want} ({item!r} is not)"
        if grid and not value:
            return what + (_check_field(None, rule[1]) or "of its kind")
        if grid:
            twice = next((v for i, v in enumerate(value) if v in value[:i]), None)
            if twice is not None:
                return f"{what}{_check_field(None, rule[1])} ({twice!r} is given twice)"
    return None


def _default_rule(name, value):
    """The rule a field gets from its default (``check_config``); a tuple of numbers or of bools gets the rule of
    its items (``("items", rule)``), from its smallest item as a scalar's from its value (a seed: >= 0)."""
    if isinstance(value, bool):
        return "bool"
    if _is_int(value):   # sizes and counts; a warmup may be 0, as may a field whose default is 0 (seeds)
        return "int>=1" if value >= 1 and not name.startswith("warmup") else "int>=0" if value >= 0 else "int"
    if isinstance(value, (float, np.floating)):   # a learning rate must be > 0; decays, tolerances may be 0
        is_lr = name.startswith("lr") or (name.endswith("_lr") and name != "final_lr")
        return ("float>0" if is_lr else "float>=0") if value > 0 else "float>=0" if value == 0 else "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (tuple, list)):
        if value and all(isinstance(v, (bool, np.bool_)) for v in value):
            return ("items", "bool")
        if value and all(_is_int(v) for v in value):
            lo = min(value)
            return ("items", "int>=0" if lo >= 0 and ("seed" in name or lo == 0) else "int>=1" if lo >= 1
                    else "int")
        if value and all(_is_real(v) for v in value):
            return ("items", _default_rule(name, float(min(value))))
        if value and all(isinstance(v, str) for v in value):
            return ("items", "str")
        return "sequence"
    return None


def check_config(config, rules=None):
    """Check every field of the dataclass ``config`` up front, before any work, naming the field.

    Each field gets ``rules[name]`` if given, else a rule from its default: a bool stays a bool; an int whose
    default is >= 1 a count (an integer >= 1; ``warmup*``: >= 0), one whose default is 0 an integer >= 0; a
    float a finite number, >= 0 when the default is, > 0 for a learning rate (``lr*``, ``*_lr`` but
    ``final_lr``); a str a str; a tuple a tuple or list, whose items (of a default of numbers, bools or strs)
    each get the rule of the default's items (a tuple of counts: each an integer >= 1; of seeds: >= 0); a field
    whose default is None also takes None. Every integer must be below 2**63 (NumPy's int64).
    Rules: "int>=1", "int>=0", "int", "float>0", "float>=0", "float", "[0,1)", "(0,1]", "bool", "str",
    "sequence", ("one of", options), ("subset of", options) (a non-empty tuple of distinct options),
    ("items", rule) (a tuple, each item meeting ``rule``), ("grid", rule) (a non-empty tuple of distinct items,
    each meeting ``rule``: a sweep's axis), ("optional", rule) (None or the rule), or None (not checked).
    Raises InputError naming ``<Config>.<field>``, what it must be and the value received.
    Experiments use it as ``__post_init__`` (``dataclasses.replace`` runs it too).
    """
    import dataclasses

    rules = rules or {}
    unknown = sorted(set(rules) - {f.name for f in dataclasses.fields(config)})
    if unknown:
        raise TypeError(f"check_config rules name no field of {type(config).__name__}: {unknown}")
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        if value is None and default is None:
            continue
        rule = rules[f.name] if f.name in rules else _default_rule(f.name, default)
        if isinstance(rule, tuple) and rule[0] == "optional":
            if value is None:
                continue
            rule = rule[1]
        if rule is None:
            continue
        want = _check_field(value, rule)
        if want is not None:
            raise InputError(f"{type(config).__name__}.{f.name} must be {want}, got {value!r}")
    return config


def memory_bytes():
    """This machine's physical memory in bytes, or None where the system does not say (then nothing is refused
    for its size)."""
    try:
        n = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    return n if n > 0 else None


def nbytes_text(n):
    """``7.28e12`` -> ``"6.6 TiB"``: a size in bytes as people read it."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.3g} {unit}"
        n /= 1024


def check_fits(what, nbytes, advice):
    """Refuse, before any work, a configuration whose arrays cannot fit: ``nbytes`` (a lower bound of what it
    allocates at once, computed from its sizes) above this machine's physical memory (``memory_bytes``) is an
    InputError "WHAT: at least N of memory, more than this machine's M; ADVICE". ``what`` names the fields, their
    values and the arrays (e.g. "Config.d_x=1000000 with alphas up to 4 makes the four cells' float64
    parameters")."""
    mem = memory_bytes()
    if mem is not None and nbytes > mem:
        raise InputError(f"{what}: at least {nbytes_text(nbytes)} of memory, more than this machine's "
                         f"{nbytes_text(mem)}; {advice}")


def check_out_dir(out, name):
    """The output folder ``out`` (given as ``name`` on the command line) exists as a folder, or is made one; a
    file there, or a path that cannot be made a folder, is an InputError (one line, exit 2), not a traceback."""
    from pathlib import Path

    if Path(out).exists() and not Path(out).is_dir():
        raise InputError(f"{name} must be a folder, but {out!r} is a file; give a folder path (it is created if "
                         f"missing)")
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{name} {out!r} cannot be made a folder ({e.strerror or e}); give another path") from None
