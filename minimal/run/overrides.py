"""``--set KEY=VALUE``: change fields of experiments' Configs from the command line (nanoGPT's habit).

    python -m minimal reproduce minrnn --only shakespeare --set lr=1e-3 steps=2000

Each KEY is a field of an experiment's ``Config``; its VALUE (text) is parsed by the field's annotation:

    int       "2000", "2_000", "2e3" (a float text only when it is a whole number)
    float     "1e-3", "0.5"
    bool      true / false, 1 / 0, yes / no, on / off (any case)
    str       the text as it stands
    tuple     comma-separated items, brackets optional: "0,1,2", "(0, 1, 2)", "mingru" (one item), "()" (empty);
              each item parsed by the type of the default's items (strings when the default is empty)
    Optional  "None" (or "none", "null") for None, else the inner type

then the Config is rebuilt with ``dataclasses.replace``, which runs its ``__post_init__``
(``minimal.validate.check_config``): the field's own rule (an lr > 0, a subset of the known kinds, each item of a
tuple in range, sizes whose arrays fit in this machine's memory, ...) decides, for every selected experiment before
the first one starts.
With several experiments selected, a key applies to every one whose Config has it; a key that none has is an
error that lists the valid keys and suggests a close one. Every error is an ``InputError`` naming the key, what
was expected and what was received. The fields that the command line sets by their own flags (``scheduler``:
``--scheduler``, ``connect_timeout``: ``--connect-timeout``) are refused here, naming the flag.

Names: every experiment calls its peak learning rate ``lr`` and its number of training steps ``steps``; where one
experiment trains two kinds of model it has one field per kind (``lr_teacher`` / ``lr_icl`` in the Zucchet
sweeps, ``lr_gril`` beside ``lr`` in GRIL's comparison), each set by its own name.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import types
import typing

from ..validate import InputError

__all__ = ["FLAGS", "parse_set", "value_text", "describe", "field_types", "parse_value", "plan", "apply"]

# Config fields that have their own command-line flag (checked before any experiment runs): --set refuses them
FLAGS = {"scheduler": "--scheduler", "connect_timeout": "--connect-timeout"}
_NONE = ("none", "null")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
_EXAMPLE = {bool: "true", int: "2000", float: "1e-3"}
_ITEMS = {bool: "true,false", int: "0,1,2", float: "0.5,1.0"}


def parse_set(items):
    """``["lr=1e-3", "steps=2000"]`` -> ``{"lr": "1e-3", "steps": "2000"}`` (text values, in order); an item
    without ``=``, with an empty key, or a key given twice is an InputError."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--set takes KEY=VALUE items (e.g. --set lr=1e-3 steps=2000), got {item!r}")
        if key in out:
            raise InputError(f"--set names {key!r} twice ({key}={out[key]} and {item}); give each key once")
        out[key] = value.strip()
    return out


def value_text(v):
    """A value as --set takes it: 0.001 -> "0.001", ("mingru", "minlstm") -> "mingru,minlstm", () -> "()"."""
    if isinstance(v, (list, tuple)):
        return ",".join(value_text(x) for x in v) or "()"
    return repr(v) if isinstance(v, float) else str(v)


def describe(overrides):
    """``{"lr": 0.001, "kinds": ["mingru"]}`` -> ``"lr=0.001 kinds=mingru"``: how to type them again."""
    return " ".join(f"{k}={value_text(v)}" for k, v in overrides.items())


def field_types(cls):
    """{field name: annotation} of the dataclass ``cls``, string annotations resolved; where one cannot be
    resolved, the type of the field's default."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:   # a class made where its annotations' names cannot be looked up (a test's local class)
        hints = {}
    out = {}
    for f in dataclasses.fields(cls):
        t = hints.get(f.name, f.type)
        out[f.name] = type(_default(f)) if isinstance(t, str) else t
    return out


def _default(f):
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def _type_name(t):
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def _scalar(t, text):
    """``text`` as a value of the plain type ``t``; raises ValueError when it is not one."""
    if t is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError
    if t is int:
        try:
            return int(text)
        except ValueError:
            x = float(text)   # "2e3" is a whole number written as a float
            if x.is_integer():
                return int(x)
            raise
    if t is float:
        return float(text)
    if t is str:
        return text
    if t in (type(None), object) or t is typing.Any:
        return ast.literal_eval(text)
    return t(text)


def _items(text):
    text = text.strip()
    if text[:1] + text[-1:] in ("()", "[]"):
        text = text[1:-1]
    return [p.strip() for p in text.split(",") if p.strip()]


def parse_value(key, text, annotation, default=None, where=""):
    """The value of field ``key`` (annotation ``annotation``, default ``default``) from its text ``text``.

    Raises InputError: "--set KEY (WHERE): expected TYPE, got 'TEXT'"."""
    where = f" ({where})" if where else ""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    optional = (origin is typing.Union or origin is types.UnionType) and type(None) in args
    if optional:
        if text.lower() in _NONE:
            return None
        inner = [a for a in args if a is not type(None)]
        annotation = inner[0] if len(inner) == 1 else str
        origin = typing.get_origin(annotation)
    if annotation is tuple or origin is tuple or annotation is list or origin is list:
        item_args = typing.get_args(annotation)   # tuple[int, ...] names its items; a bare tuple does not
        item_type = item_args[0] if item_args and item_args[0] is not Ellipsis else None
        if item_type is None and isinstance(default, (tuple, list)) and default:
            item_type = type(default[0])
        item_type = item_type or str
        try:
            return tuple(_scalar(item_type, p) for p in _items(text))
        except (ValueError, SyntaxError, TypeError):
            raise InputError(f"--set {key}{where}: expected a tuple of {_type_name(item_type)} items separated by "
                             f"commas (e.g. {key}={_ITEMS.get(item_type, 'a,b')}), got {text!r}") from None
    try:
        return _scalar(annotation, text)
    except (ValueError, SyntaxError, TypeError):
        want = _type_name(annotation) + (f" (e.g. {key}={_EXAMPLE[annotation]})" if annotation in _EXAMPLE else "")
        raise InputError(f"--set {key}{where}: expected {want}" + (" or None" if optional else "") + f", got {text!r}"
                         ) from None


def _close(key, keys):
    near = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def plan(overrides, configs):
    """Which override goes to which experiment, each value typed and each Config checked, before anything runs.

    Args:
        overrides: {key: text or value}; a text is parsed by the field's annotation (``parse_value``), another
            value is used as it stands (the Config's ``__post_init__`` checks it either way).
        configs: {label: the Config instance the overrides go on top of}, e.g. {"minrnn/shakespeare":
            shakespeare.Config.quick()}.
    Returns:
        {label: {key: typed value}} for every label (empty where the Config has none of the keys).
    Raises:
        InputError: a key that no Config has (listing the valid keys and a close one), a key with its own flag
        (``FLAGS``), a value of the wrong type, or one the Config's own checks refuse (naming the experiment).
    """
    fields = {label: {f.name: f for f in dataclasses.fields(c)} for label, c in configs.items()}
    valid = sorted({k for fs in fields.values() for k in fs} - set(FLAGS))
    for key in overrides:
        if key in FLAGS:
            raise InputError(f"--set {key}: set it with {FLAGS[key]} (checked before any experiment runs)")
        if not any(key in fs for fs in fields.values()):
            where = f"({', '.join(configs)})" if len(configs) <= 3 else f"of the {len(configs)} selected"
            raise InputError(f"--set {key}: no experiment {where} has a Config field {key!r}"
                             f"{_close(key, valid)}; the keys are: {', '.join(valid)}")
    out = {}
    for label, config in configs.items():
        types_ = field_types(type(config))
        typed = {}
        for key, value in overrides.items():
            if key in fields[label]:
                typed[key] = (parse_value(key, value, types_[key], _default(fields[label][key]), label)
                              if isinstance(value, str) else value)
        apply(config, typed, label)   # the Config's own checks, now rather than when it runs
        out[label] = typed
    return out


def apply(config, typed, label=""):
    """``dataclasses.replace(config, **typed)``, its ``__post_init__`` included; an error it raises is an
    InputError that names the experiment ``label`` and the overrides."""
    if not typed:
        return config
    try:
        return dataclasses.replace(config, **typed)
    except (ValueError, TypeError) as e:
        raise InputError(f"--set {describe(typed)}" + (f" for {label}" if label else "") + f": {e}") from None
