"""A model as a stack of registered cells and layers, with the cell contract of every block (DESIGN.md).

Every work's models are written the same way: a ``spec``, a plain tuple that says which registered module
(``minimal.cells.REGISTRY``: cells and ``minimal.layers``) each layer is and how to build and call it, and three
functions that walk it:

    spec   = (Layer("linear", {"D_in": 10, "D_out": 32}),
              Residual((Layer("layernorm", {"D": 32}), Layer("mingru", {"d_in": 32, "d_hidden": 32}))),
              Layer("linear", {"D_in": 32, "D_out": 10}, scale={"W": 0.1}))
    params = init(rng, spec)                      # {"0.W", "0.b", "1.0.gamma", ..., "1.1.W_z", ..., "2.W", "2.b"}
    y, caches = forward(params, x, spec)          # x (B, T, D) -> y (B, T, D_out)
    dx, grads = backward(params, caches, dy)      # grads has exactly params' keys

Two kinds of entry:

    Layer(name, init, forward, scale)   one registered module: ``get(name).init(rng, **init)``, then each param
                                        in ``scale`` multiplied by its factor (e.g. a readout scaled by 0.1 at
                                        init); called as ``get(name).forward(p, x, **forward)``
    Residual(layers)                    y = x + stack(layers)(x): a block of He et al. (2016); the sub-stack
                                        must keep x's shape. With a layernorm first it is the pre-LN block of
                                        Feng et al. App. C.1 (x + minGRU(LN(x)), then x + MLP(LN(x))) and of a
                                        pre-LN Transformer (x + Attn(LN(x)), x + MLP(LN(x))).

Params are one flat dict, namespaced by position: "<i>.<name>" for layer i, "<i>.<j>.<name>" inside a residual
block i. ``minimal.optim``'s weight-decay mask reads the last component, so λ-like params stay undecayed.
``forward`` / ``backward`` read only each Layer's ``name`` and ``forward`` kwargs, so a spec built with empty
``init`` dicts serves them as well (``architectures`` does this).

``readout="last"`` computes the output at the last step only, (B, 1, D_out), for losses that read only the final
token (in-context regression's query). Layers after the last one that mixes time steps act on each position on
its own (``POSITIONWISE``), so they run on the last step alone: that last time-mixing layer runs with its own
``readout="last"`` when its forward has one (``cells.gated_rnn``: output gating on h_T only), otherwise it runs
on every step and only its final step is passed on; ``backward`` then pads the gradient with zeros for the
earlier steps. The tests check this equals the last step of ``readout="all"``, gradients included.

Checks: ``forward`` scans the input x and every param for NaN and inf once, naming the first it finds
(``params['1.rnn.W_z'] contains NaN or inf``), and ``backward`` scans dy and the params; the layers then run inside
``validate.checked_values``, where they check shapes and dtypes but do not scan their inputs (a scan per layer
input, forward and backward, read each activation once more). Instead the stack scans each layer's output once,
which is the next layer's input, and ``backward`` scans dx and the gradients once at the end (the backward is linear
in dy: an overflow inside it reaches them); an overflow is reported with the layer whose output it reached, the
stack's input (or dy) and its largest param. Layers that check their own results still do.

Glossary: B batch, T time, D features; L layers.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, NamedTuple

import numpy as np

from .cells import get
from .contract import Example
from .validate import check_array, check_choice, check_finite_values, checked_values, overflow_error

__all__ = ["Layer", "Residual", "StackCache", "init", "forward", "backward", "n_params", "examples",
           "POSITIONWISE", "READOUTS"]

READOUTS = ("all", "last")
# Registered modules that act on each position (time step) on their own: with readout "last" they may run
# on the last step only.
POSITIONWISE = frozenset({"linear", "mlp", "glu", "layernorm", "embedding"})


class Layer(NamedTuple):
    """One registered module of a stack."""
    name: str                  # a key of ``minimal.cells.REGISTRY``
    init: dict = {}            # keyword arguments of the module's ``init`` (after rng)
    forward: dict = {}         # keyword arguments of the module's ``forward`` (e.g. {"variant": "in_out"})
    scale: dict = {}           # param name -> factor applied once after init (e.g. {"D": 0.1})


class Residual(NamedTuple):
    """y = x + stack(layers)(x)."""
    layers: tuple


class StackCache(NamedTuple):
    spec: tuple                # the spec it was run with (so that ``backward`` needs no spec argument)
    caches: list               # one per entry: the module's cache, or a StackCache for a Residual
    T_cut: Any = None          # readout "last" on a layer that ran every step: the T of that layer, else None
    cut: int = -1              # index of the layer whose output was cut to its last step (-1: none)


def _check_spec(spec):
    if not isinstance(spec, (tuple, list)) or not spec:
        raise ValueError(f"spec must be a non-empty tuple of Layer / Residual entries, got {spec!r}")
    for e in spec:
        if isinstance(e, Residual):
            _check_spec(e.layers)
        elif isinstance(e, Layer):
            get(e.name)   # a ValueError lists the registered names
        else:
            raise ValueError(f"spec entries must be Layer or Residual, got {e!r}")
    return spec


def _sub(params, prefix):
    n = len(prefix)
    return {k[n:]: v for k, v in params.items() if k.startswith(prefix)}


def _by_layer(params):
    """{"<i>": ``_sub(params, "<i>.")``} for every layer index i at once: one pass over params, not one a layer."""
    out = {}
    for k, v in params.items():
        i, _, rest = k.partition(".")
        out.setdefault(i, {})[rest] = v
    return out


def init(rng, spec, dtype=None):
    """Params of every layer, in spec order, namespaced "<i>.<name>" ("<i>.<j>.<name>" inside a Residual).

    Args:
        rng: ``numpy.random.Generator`` (drawn from layer by layer, in order); spec: Layer / Residual entries;
        dtype: None (the modules' float64) or a dtype to cast every array to.
    Returns:
        dict name -> array.
    """
    _check_spec(spec)
    params = {}
    for i, e in enumerate(spec):
        if isinstance(e, Residual):
            p = init(rng, e.layers)
        else:
            p = get(e.name).init(rng, **e.init)
            for k, factor in e.scale.items():
                if k not in p:
                    raise ValueError(f"scale names {k!r}, but layer {i} ({e.name}) has params {sorted(p)}")
                p[k] = p[k] * factor
        params.update({f"{i}.{k}": v for k, v in p.items()})
    if dtype is not None:
        params = {k: np.asarray(v, dtype=dtype) for k, v in params.items()}
    return params


def _mixes_time(e):
    if isinstance(e, Residual):
        return any(_mixes_time(s) for s in e.layers)
    return e.name not in POSITIONWISE


@functools.lru_cache(maxsize=None)
def _forward_takes_readout(name):
    return "readout" in inspect.signature(get(name).forward).parameters


def _has_readout(e):
    return isinstance(e, Layer) and _forward_takes_readout(e.name)


def forward(params, x, spec, readout="all"):
    """y = layer_L(... layer_1(x)), each a registered module's forward (Residual: x + sub-stack(x)).

    Args:
        params: from ``init(rng, spec)``; x: the first layer's input, (B, T, D) for sequence models;
        spec: Layer / Residual entries; readout: "all" or "last" (module docstring).
    Returns:
        y: (B, T, D_out), or (B, 1, D_out) for readout "last"; and a ``StackCache`` for ``backward``.
    Raises:
        InputError: x or a param holds NaN or inf (named; module docstring), a layer's output overflowed, or a
            layer's own check fails.
    """
    _check_spec(spec)
    check_choice("readout", readout, READOUTS)
    check_finite_values({"x": x, **{f"params[{k!r}]": v for k, v in params.items()}})
    with checked_values():
        return _forward(params, x, spec, readout, lambda: _culprits("x", x, params), "")


def _culprits(name, a, params):
    """What an overflow error names: the stack's input or dy, and its largest float param."""
    out = {name: a}
    floats = {k: v for k, v in params.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size}
    if floats:
        k = max(floats, key=lambda k: float(np.max(np.abs(floats[k]))))
        out[f"params[{k!r}] (the largest)"] = floats[k]
    return out


def _nonfinite(arrays):
    return any(isinstance(a, np.ndarray) and a.dtype.kind in "fc" and not np.isfinite(a).all() for a in arrays)


def _forward(params, x, spec, readout, culprits, where):
    cut = -1
    if readout == "last":
        check_array("x", x, min_ndim=3)
        mixers = [i for i, e in enumerate(spec) if _mixes_time(e)]
        cut = mixers[-1] if mixers else -1
    T_cut = None
    if readout == "last" and cut == -1:      # no layer mixes time: only the last step's input matters
        T_cut, x = x.shape[1], x[:, -1:]
    caches, h, layers = [], x, _by_layer(params)
    for i, e in enumerate(spec):
        p = layers.get(str(i), {})
        if isinstance(e, Residual):
            fx, c = _forward(p, h, e.layers, "all", culprits, f" in residual block {i}{where}")
            if fx.shape != h.shape:
                raise ValueError(f"Residual block {i} must keep its input's shape {h.shape}, gives {fx.shape}")
            h = h + fx
        else:
            kw = dict(e.forward)
            if i == cut and _has_readout(e):
                kw["readout"] = "last"
            h, c = get(e.name).forward(p, h, **kw)
        if _nonfinite((h,)):      # each layer's output once: the next layer's input, which it does not scan
            raise overflow_error(f"the output of layer {i} ({getattr(e, 'name', 'residual')}){where}", culprits())
        caches.append(c)
        if i == cut and not _has_readout(e):
            T_cut = h.shape[1]
            h = h[:, -1:]
    return h, StackCache(tuple(spec), caches, T_cut, cut)


def _pad(dy, T):
    """dL/dy for all T steps when only the last one was read: zeros before it."""
    return np.concatenate([np.zeros(dy.shape[:1] + (T - 1,) + dy.shape[2:], dy.dtype), dy], axis=1)


def backward(params, caches, dy, spec=None):
    """Gradients through each layer's own backward, last layer first.

    Args:
        params: as for ``forward``; caches: its ``StackCache``; dy: dL/dy of y's shape;
        spec: ignored if None (the cache holds the spec ``forward`` ran with); if given, it must be that spec.
    Returns:
        dx of x's shape and grads with exactly params' keys (in params' order).
    Raises:
        InputError: dy or a param holds NaN or inf, the gradients overflowed, or a layer's own check fails.
    """
    if spec is not None and tuple(spec) != caches.spec:
        raise ValueError("spec differs from the one forward ran with")
    check_finite_values({"dy": dy, **{f"params[{k!r}]": v for k, v in params.items()}})
    with checked_values():
        dx, grads = _backward(params, caches, dy)
    # linear in dy: an overflow inside reaches dx or a gradient as inf or NaN, scanned here once
    if _nonfinite((dx, *grads.values())):
        raise overflow_error("the gradients", _culprits("dy", dy, params))
    return dx, grads


def _backward(params, caches, dy):
    spec = caches.spec
    grads, layers = {}, _by_layer(params)
    for i in reversed(range(len(spec))):
        e, c = spec[i], caches.caches[i]
        p = layers.get(str(i), {})
        if i == caches.cut and caches.T_cut is not None:
            dy = _pad(dy, caches.T_cut)
        if isinstance(e, Residual):
            dfx, g = _backward(p, c, dy)
            dy = dy + dfx
        else:
            dy, g = get(e.name).backward(p, c, dy)
        grads.update({f"{i}.{k}": v for k, v in g.items()})
    if caches.cut == -1 and caches.T_cut is not None:
        dy = _pad(dy, caches.T_cut)
    return dy, {k: grads[k] for k in params}


def n_params(params):
    """Total number of real parameters (complex weights are stored as real and imaginary parts)."""
    return int(sum(np.size(v) for v in params.values()))


def examples(rng):
    """Tiny float64 stacks (``Example.kwargs`` holds the spec and the readout), odd T and T = 1 included:
    a Zucchet-style gated RNN + LSTM + readout, an LRU pair, a pre-LN minGRU/MLP stack (Feng et al. App.
    C.1), a pre-LN softmax-attention Transformer block, and readout "last" through each kind of cut."""
    D = 4
    gated = (Layer("gated_rnn", {"d_in": 3, "d_hidden": 5, "d_out": 4}),
             Layer("lstm", {"d_in": 4, "d_hidden": 3}),
             Layer("linear", {"D_in": 3, "D_out": 2}, scale={"W": 0.5}))
    lrus = (Layer("lru", {"d_in": 3, "d_state": 4, "d_out": 3, "d_model": 4, "variant": "in_out", "r_min": 0.5},
                  {"variant": "in_out"}),
            Layer("lru", {"d_in": 3, "d_state": 3, "d_out": 2, "d_model": 3, "variant": "in_skip", "r_min": 0.5},
                  {"variant": "in_skip"}))
    minrnn = (Layer("linear", {"D_in": 3, "D_out": D}),
              Residual((Layer("layernorm", {"D": D}), Layer("mingru", {"d_in": D, "d_hidden": D}))),
              Residual((Layer("layernorm", {"D": D}), Layer("mlp", {"D_in": D, "H": 6}))),
              Layer("layernorm", {"D": D}),
              Layer("linear", {"D_in": D, "D_out": 3}))
    transformer = (Residual((Layer("layernorm", {"D": D}),
                             Layer("softmax_attention", {"D": D, "output_projection": True}))),
                   Residual((Layer("layernorm", {"D": D}), Layer("mlp", {"D_in": D, "H": 5}))))
    gated_last = (Layer("linear", {"D_in": 3, "D_out": 4}),
                  Layer("gated_rnn", {"d_in": 4, "d_hidden": 5, "d_out": 3}))
    lsa_last = (Residual((Layer("lsa", {"D": 3}),)), Layer("lsa", {"D": 3}), Layer("linear", {"D_in": 3, "D_out": 2}))

    def ex(name, spec, B, T, d_in, readout="all"):
        p = init(rng, spec)
        # the modules start most biases (and LayerNorm's beta) at zero: random values exercise their gradients
        p = {k: (rng.standard_normal(v.shape) if k.rsplit(".", 1)[-1] in ("b", "b_1", "b_2", "beta") else v)
             for k, v in p.items()}
        return Example(name, p, rng.standard_normal((B, T, d_in)), {"spec": spec, "readout": readout})

    return [ex("gated-lstm-readout-T5", gated, 2, 5, 3),
            ex("gated-lstm-readout-T1", gated, 2, 1, 3),
            ex("gated-lstm-readout-last-T4", gated, 2, 4, 3, "last"),
            ex("lru-in_out-in_skip-T3", lrus, 2, 3, 3),
            ex("preLN-mingru-mlp-T5", minrnn, 2, 5, 3),
            ex("preLN-mingru-mlp-last-T5", minrnn, 1, 5, 3, "last"),
            ex("preLN-transformer-T4", transformer, 2, 4, D),
            ex("linear-gated-last-T6", gated_last, 2, 6, 3, "last"),
            ex("lsa-residual-lsa-last-T5", lsa_last, 2, 5, 3, "last")]
