"""One layer of Feng et al.'s language model, "Were RNNs All We Needed?" (2024), App. C.1-C.2: a recurrent
sublayer, a causal temporal convolution (kernel size 4) and a two-layer MLP, each pre-LayerNorm and residual.

App. C.1 says: "In all models, residual connections are added between layers and layer norms are applied before
each layer", and for language modelling "a layer of the model consists of an RNN (minLSTM and minGRU), a
convolutional layer applied temporally with a kernel size of 4, and a two-layer MLP". We read "each layer" as each
of the three sublayers (the selective-copying paragraph of C.1 also calls its parts "a minGRU layer" and "a linear
layer"), in the order the text lists them:

    x <- x + Dropout(W_out RNN(LN_rnn(x)) + b_out)          RNN: minGRU / minLSTM (parallel mode), GRU, LSTM,
                                                            or causal softmax attention
    x <- x + Dropout(CausalConv_k(LN_conv(x)))              depthwise, k = 4 (``layers.causal_conv``)
    x <- x + Dropout(MLP(LN_mlp(x)))                        Linear -> GELU -> Linear (``layers.mlp``)

Readings where the paper is silent (each one a choice of ours):
- the RNN's width is expansion · D, "an expansion factor of 2" (App. C.2, "following Mamba"), projected back to D
  by a Linear W_out (as Mamba's out_proj); the MLP's hidden width is 4 D (nanoGPT, the paper's framework, Sec. 4);
- dropout (ratio 0.2 in App. C.2) acts on each sublayer's output before it is added, as nanoGPT's residual
  dropout; it is off in step mode (generation);
- the convolution has its own LayerNorm and residual (the literal reading of "layer norms before each layer").
  Mamba and xLSTM put their convolution before the recurrence, inside the mixer; the paper lists it after the
  RNN and so do we. ``k=None`` in ``init`` leaves the convolution out (with kind "attention": a pre-LN
  Transformer block, as nanoGPT's);
- kind "attention" is causal softmax attention (``cells.softmax_attention``, D_k = D_v = expansion · D, W_out its
  output projection), single-head or, with the forward keyword ``n_heads``, multi-head (nanoGPT's block:
  ``init(..., kind="attention", expansion=1, k=None)`` and ``n_heads`` heads).

Params, namespaced by sublayer: "rnn_ln.gamma", "rnn_ln.beta", "rnn.<the cell's params>" (e.g. "rnn.W_z"),
"rnn_out.W", "rnn_out.b", "conv_ln.*", "conv.W", "conv.b", "mlp_ln.*", "mlp.W_1", "mlp.b_1", "mlp.W_2", "mlp.b_2".
The forward needs ``kind`` (as ``residual`` needs ``inner``); the params must be that kind's.

It lives in ``cells`` although it is a block: it composes cells and layers, and the package's imports point
from cells to layers, never back.

Step mode (``step_forward``): every kind has one. minGRU / minLSTM / GRU / LSTM carry their hidden state (LSTM:
h and c); attention carries its KV cache (``softmax_attention.KVState``, growing by one key and value a step);
the convolution carries its last k-1 inputs. A test shows T steps equal the whole-sequence forward.

Glossary: B batch, T time, D model width, H = expansion · D the recurrent width, k the kernel size.
    x, y (B, T, D)
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..layers import causal_conv, dropout, layernorm, linear, mlp
from ..validate import (check_array, check_choice, check_dtype, check_finite_result, check_grad_dtype,
                        check_positive_int, common_dtype, values_checked)
from . import gru, lstm, mingru, minlstm, softmax_attention
from ..contract import Example

__all__ = ["init", "forward", "backward", "step_forward", "examples", "KINDS", "BlockState"]

KINDS = ("mingru", "minlstm", "gru", "lstm", "attention")
_CELLS = {"mingru": mingru, "minlstm": minlstm, "gru": gru, "lstm": lstm, "attention": softmax_attention}
EXPANSION = 2       # App. C.2: minGRU / minLSTM "utilize an expansion factor of 2"
MLP_EXPANSION = 4   # nanoGPT's MLP width (the paper does not give one)


def _weights_of(kind):
    """The weight names (biases aside) that identify each kind's params."""
    if kind == "attention":
        return {"W_Q", "W_K", "W_V"}
    gates = {"mingru": "zh", "minlstm": "fih", "gru": "zrh", "lstm": "fioc"}[kind]
    recurrent = kind in ("gru", "lstm")
    return {f"W_{g}" for g in gates} | ({f"U_{g}" for g in gates} if recurrent else set())


def _sub(params, prefix):
    n = len(prefix)
    return {k[n:]: v for k, v in params.items() if k.startswith(prefix)}


def _by_part(params):
    """{part: ``_sub(params, part + ".")``} for every part ("rnn_ln", "rnn", ...) at once, in one pass."""
    out = {}
    for k, v in params.items():
        part, _, rest = k.partition(".")
        out.setdefault(part, {})[rest] = v
    return out


def _sublayers(params):
    """The sublayers present, in order: rnn, conv (if "conv.W" is in params), mlp."""
    return ("rnn", "conv", "mlp") if "conv.W" in params else ("rnn", "mlp")


def _check(params, kind):
    check_choice("kind", kind, KINDS)
    rnn = {k for k in _sub(params, "rnn.") if not k.startswith("b_")}
    if rnn != _weights_of(kind):
        raise ValueError(f"params hold rnn weights {sorted(rnn)}, but kind {kind!r} has {sorted(_weights_of(kind))}")
    return common_dtype(params)      # one dtype for every sublayer: float64 mlp.* among float32 is refused


def init(rng, D, kind="mingru", expansion=EXPANSION, k=causal_conv.KERNEL_SIZE, mlp_expansion=MLP_EXPANSION):
    """Params of one block.

    Args:
        rng: ``numpy.random.Generator``; D: model width; kind: one of KINDS; expansion: H = expansion · D;
        k: the convolution's kernel size (None: no convolution sublayer); mlp_expansion: the MLP's hidden width
        is mlp_expansion · D.
    Returns:
        dict of float64 arrays, names as in the module docstring. Each part keeps its own module's init.
    """
    D = check_positive_int("D", D)
    check_choice("kind", kind, KINDS)
    H = check_positive_int("expansion", expansion) * D
    cell = _CELLS[kind]
    rnn = cell.init(rng, D, D_k=H, D_v=H) if kind == "attention" else cell.init(rng, D, H)
    parts = {"rnn_ln": layernorm.init(rng, D), "rnn": rnn, "rnn_out": linear.init(rng, H, D)}
    if k is not None:
        parts |= {"conv_ln": layernorm.init(rng, D), "conv": causal_conv.init(rng, D, k)}
    parts |= {"mlp_ln": layernorm.init(rng, D),
              "mlp": mlp.init(rng, D, check_positive_int("mlp_expansion", mlp_expansion) * D)}
    return {f"{name}.{key}": v for name, p in parts.items() for key, v in p.items()}


class SublayerCache(NamedTuple):
    ln: Any         # layernorm cache
    inner: tuple    # the sublayer's own caches (rnn: the cell's and rnn_out's)
    drop: Any       # dropout cache


class Cache(NamedTuple):
    kind: str
    sublayers: tuple   # names, in forward order
    caches: list       # one SublayerCache per sublayer


def _rnn_forward(parts, u, kind, log_space, n_heads):
    cell = _CELLS[kind]
    p = parts.get("rnn", {})
    if kind in ("mingru", "minlstm"):
        h, c = cell.forward(p, u, mode="parallel", log_space=log_space)
    elif kind == "attention":
        h, c = cell.forward(p, u, mode="parallel", n_heads=n_heads)
    else:
        h, c = cell.forward(p, u)
    y, c_out = linear.forward(parts.get("rnn_out", {}), h)
    return y, (c, c_out)


def _check_kind_options(kind, log_space, n_heads):
    if log_space and kind not in ("mingru", "minlstm"):
        raise ValueError(f"log_space applies to kinds mingru and minlstm only, got kind {kind!r}")
    if n_heads != 1 and kind != "attention":
        raise ValueError(f"n_heads applies to kind attention only, got n_heads = {n_heads!r} with kind {kind!r}")


def forward(params, x, kind, dropout_rate=0.0, rng=None, train=True, log_space=False, n_heads=1):
    """Run the block.

    Args:
        params: from ``init``; x: (B, T, D); kind: the recurrent sublayer (KINDS), as at init;
        dropout_rate: in [0, 1), on each sublayer's output; rng: the dropout masks' source (int seed: the same
            masks every call; ``numpy.random.Generator``: advanced, new masks each call; None: fresh entropy);
        train: False turns dropout off; log_space: minGRU / minLSTM in App. B.3's log space;
        n_heads: attention's heads (kind "attention" only; must divide expansion · D).
    Returns:
        y: (B, T, D); the cache for ``backward``.
    """
    dtype = _check(params, kind)
    D = params["rnn_ln.gamma"].shape[0]
    check_array("x", x, (None, None, D), names=("B", "T", "D"))
    check_dtype("x", x, dtype)
    dropout.check_rate(dropout_rate)
    _check_kind_options(kind, log_space, n_heads)
    # One generator for the whole block: the sublayers' masks are successive draws from it.
    gen = np.random.default_rng(rng) if train and dropout_rate > 0 else None
    sublayers, caches, parts = _sublayers(params), [], _by_part(params)
    h = x
    for name in sublayers:
        u, c_ln = layernorm.forward(parts.get(f"{name}_ln", {}), h)
        if values_checked():    # in a stack no sublayer scans its input; a gate saturated by an inf in u would hide it
            check_finite_result(f"the {name} sublayer's LayerNorm output", u,
                                {"x": x, **{f"{name}_ln.{k}": v for k, v in parts.get(f"{name}_ln", {}).items()}})
        if name == "rnn":
            f, c_inner = _rnn_forward(parts, u, kind, log_space, n_heads)
        else:
            f, c = (causal_conv if name == "conv" else mlp).forward(parts.get(name, {}), u)
            c_inner = (c,)
        f, c_drop = dropout.forward({}, f, dropout_rate, gen, train)
        h = h + f
        caches.append(SublayerCache(c_ln, c_inner, c_drop))
    return h, Cache(kind, sublayers, caches)


def backward(params, cache, dy):
    """dy: (B, T, D). Returns dx (B, T, D) and grads with exactly params' keys."""
    kind, sublayers, caches = cache
    check_array("dy", dy, caches[0].ln.xhat.shape, names=("B", "T", "D"))
    check_grad_dtype("dy", dy, params)
    grads, parts = {}, _by_part(params)
    for name, c in zip(reversed(sublayers), reversed(caches)):
        # 3. h <- h + Dropout(f): the residual passes dy on unchanged; the branch gets the masked dy.
        df, _ = dropout.backward({}, c.drop, dy)
        # 2. f = sublayer(u)
        if name == "rnn":
            c_cell, c_out = c.inner
            dh, g = linear.backward(parts.get("rnn_out", {}), c_out, df)
            grads |= {f"rnn_out.{k}": v for k, v in g.items()}
            du, g = _CELLS[kind].backward(parts.get("rnn", {}), c_cell, dh)
        else:
            du, g = (causal_conv if name == "conv" else mlp).backward(parts.get(name, {}), c.inner[0], df)
        grads |= {f"{name}.{k}": v for k, v in g.items()}
        # 1. u = LN(h)
        dh_in, g = layernorm.backward(parts.get(f"{name}_ln", {}), c.ln, du)
        grads |= {f"{name}_ln.{k}": v for k, v in g.items()}
        dy = dy + dh_in
    return dy, {k: grads[k] for k in params}


# --- step mode ------------------------------------------------------------------------------------------
class BlockState(NamedTuple):
    """What the block carries from step t to step t+1."""
    rnn: Any     # (B, H) hidden state; LSTM: (h, c); attention: softmax_attention.KVState
    conv: Any    # (B, k-1, D) the convolution's last inputs, or None without a convolution


def _rnn_step(params, state, u_t, kind, log_space, n_heads):
    cell, p = _CELLS[kind], _sub(params, "rnn.")
    if kind == "attention":
        h_t, state = cell.step_forward(p, state, u_t, n_heads=n_heads)
    elif kind in ("mingru", "minlstm"):
        h_prev = np.zeros((u_t.shape[0], p["W_h"].shape[0]), u_t.dtype) if state is None else state
        h_t = state = cell.step_forward(p, u_t, h_prev, log_space=log_space)
    elif kind == "gru":
        h_t, _ = cell.step_forward(p, u_t, state)
        state = h_t
    else:
        h_prev, c_prev = (None, None) if state is None else state
        h_t, c_t, _ = cell.step_forward(p, u_t, h_prev, c_prev)
        state = (h_t, c_t)
    return linear.forward(_sub(params, "rnn_out."), h_t)[0], state


def step_forward(params, state, x_t, kind, log_space=False, n_heads=1):
    """One step of the block in evaluation mode (no dropout), for generation.

    Args:
        state: a BlockState from the previous step, or None before the first (zero states, empty KV cache).
        x_t: (B, D); kind, log_space, n_heads: as for ``forward``.
    Returns:
        (y_t, state): (B, D) and the BlockState after this step.
    """
    dtype = _check(params, kind)
    D = params["rnn_ln.gamma"].shape[0]
    check_array("x_t", x_t, (None, D), names=("B", "D"))
    check_dtype("x_t", x_t, dtype)
    _check_kind_options(kind, log_space, n_heads)
    state = BlockState(None, None) if state is None else state
    h = x_t
    u = layernorm.forward(_sub(params, "rnn_ln."), h)[0]
    f, rnn_state = _rnn_step(params, state.rnn, u, kind, log_space, n_heads)
    h = h + f
    conv_state = None
    if "conv.W" in params:
        u = layernorm.forward(_sub(params, "conv_ln."), h)[0]
        f, conv_state = causal_conv.step_forward(_sub(params, "conv."), state.conv, u)
        h = h + f
    u = layernorm.forward(_sub(params, "mlp_ln."), h)[0]
    h = h + mlp.forward(_sub(params, "mlp."), u)[0]
    return h, BlockState(rnn_state, conv_state)


def _randomised(rng, params):
    """Random LayerNorm gains and non-zero biases, so that every parameter's gradient is exercised."""
    out = dict(params)
    for k, v in params.items():
        if k.endswith(".gamma"):
            out[k] = 1.0 + 0.3 * rng.standard_normal(v.shape)
        elif k.endswith((".beta", ".b", ".b_1", ".b_2")):
            out[k] = 0.3 * rng.standard_normal(v.shape)
    return out


def examples(rng):
    """Every kind, T = 1 and odd T, with dropout (seeded) and without, k = 4 and no convolution, log space, two
    attention heads."""
    D, B = 3, 2
    cases = [("mingru-T5-dropout", "mingru", 5, {"k": 4}, {"dropout_rate": 0.3, "rng": 7}),
             ("mingru-T1", "mingru", 1, {"k": 4}, {}),
             ("mingru-log-T3", "mingru", 3, {"k": 2}, {"log_space": True}),
             ("minlstm-T5", "minlstm", 5, {"k": 4}, {"dropout_rate": 0.2, "rng": 1}),
             ("minlstm-T1-noconv", "minlstm", 1, {"k": None}, {}),
             ("gru-T3", "gru", 3, {"k": 4, "expansion": 1}, {}),
             ("lstm-T5", "lstm", 5, {"k": 3, "expansion": 1}, {"dropout_rate": 0.5, "rng": 2}),
             ("attention-T5-noconv", "attention", 5, {"k": None, "expansion": 1}, {"dropout_rate": 0.2, "rng": 3}),
             ("attention-T1", "attention", 1, {"k": 4}, {}),
             ("attention-2heads-T4-noconv", "attention", 4, {"k": None, "expansion": 2}, {"n_heads": 2})]
    out = []
    for name, kind, T, init_kw, kw in cases:
        params = _randomised(rng, init(rng, D, kind, mlp_expansion=2, **init_kw))
        out.append(Example(name, params, rng.standard_normal((B, T, D)), {"kind": kind} | kw))
    return out
