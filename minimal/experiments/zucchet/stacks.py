"""The networks of the architecture comparison of Zucchet et al., "Gated recurrent neural networks discover
attention" (ICML 2024; arXiv 2309.01775), Sec. 3.3 / Fig. 4: each a stack of 1 or 2 existing cells, composed
through ``minimal.models`` (never re-implemented). The experiment that trains and compares them is
``experiments.zucchet.architectures``.

    gated_diagonal   the construction's class: the gated linear RNN of Eq. 2 (``cells.gated_rnn``), diagonal λ
    gated_dense      the same with a dense recurrence matrix A (``recurrence="dense"``)
    lstm, gru        ``cells.lstm`` / ``cells.gru`` (App. A.2-A.3; tanh/sigmoid, all gates see h_{t-1})
    lru_out          LRU block with a GLU after the recurrence only (``cells.lru``, variant "out"; App. A.1)
    lru_in_out       + a GLU gate on the input ("in_out", App. A.1)
    lru_in_skip      + input gate, and the output GLU's sigmoid branch reads the block input ("in_skip", App. A.1)

The gated RNNs map d_in -> hidden neurons -> the next layer (the last one's readout D -> d_out). LSTM, GRU and
LRU stacks follow Sec. 3.3: "a linear embedding layer projects the input to a latent representation, we then
repeat the recurrent layer once or twice, and finally apply a linear readout", every LRU dimension (model width,
state size, block output) equal to ``hidden``. The last output map (gated RNN: D; the others: the readout) is
scaled by ``readout_scale`` at init. Params are keyed "l<i>/<name>" (recurrent layer i), "embed/..." and
"readout/..." (LSTM, GRU, LRU).

Glossary: B batch, T time, d_in / d_out token and output features, H = hidden, L = layers.
"""
from __future__ import annotations

import numpy as np

from ... import models
from ...validate import check_array, check_choice, check_positive_int

__all__ = ["ARCHS", "model_spec", "init_model", "model_forward", "model_backward", "n_params"]

ARCHS = ("gated_diagonal", "gated_dense", "lstm", "gru", "lru_out", "lru_in_out", "lru_in_skip")


def model_spec(arch, layers, d_in=None, d_out=None, hidden=None, readout_scale=0.1):
    """The ``minimal.models`` spec of an L-layer stack of ``arch`` (Sec. 3.3).

    gated_*: L gated RNN layers (Eq. 2), each d -> ``hidden`` neurons -> the next width, the last one's readout
    D -> ``d_out``; no embedding (the construction's class reads the tokens directly).
    lstm, gru, lru_*: "a linear embedding layer projects the input to a latent representation, we then repeat
    the recurrent layer once or twice, and finally apply a linear readout" (Sec. 3.3), every width equal to
    ``hidden`` (for the LRU: model width H, state size N and block output, "all those dimensions to the same
    value"); embedding d_in -> hidden, L cells hidden -> hidden, readout hidden -> d_out.
    The last output map (D or the readout) is scaled by ``readout_scale`` at init. Without the sizes (None) the
    spec has empty init arguments: enough for ``models.forward`` / ``backward``, which read only names and
    forward kwargs."""
    build = d_in is not None
    spec = []
    if arch.startswith("gated_"):
        width = d_in
        for i in range(layers):
            last = i == layers - 1
            kw = dict(d_in=width, d_hidden=hidden, d_out=d_out if last else hidden, recurrence=arch[6:])
            spec.append(models.Layer("gated_rnn", kw if build else {}, {},
                                     {"D": readout_scale} if (build and last) else {}))
            width = hidden
        return tuple(spec)
    spec.append(models.Layer("linear", {"D_in": d_in, "D_out": hidden} if build else {}, {}, {}))
    for i in range(layers):
        if arch in ("lstm", "gru"):
            name, kw, fwd = arch, dict(d_in=hidden, d_hidden=hidden), {}
        else:
            variant = arch[4:]
            name, fwd = "lru", {"variant": variant}
            kw = dict(d_in=hidden, d_state=hidden, d_out=hidden, d_model=hidden, variant=variant, r_min=0.0,
                      max_phase=np.pi / 10)
        spec.append(models.Layer(name, kw if build else {}, fwd, {}))
    spec.append(models.Layer("linear", {"D_in": hidden, "D_out": d_out} if build else {}, {},
                             {"W": readout_scale} if build else {}))
    return tuple(spec)


def init_model(rng, arch, d_in, d_out, hidden, layers=1, readout_scale=0.1, dtype="float64"):
    """Params of an L-layer stack, keys "l<i>/<name>" for the recurrent layers i = 0 .. L-1, and for LSTM, GRU
    and LRU "embed/W", "embed/b" (the linear embedding) and "readout/W", "readout/b" (the linear readout).

    Built by ``minimal.models.init`` from ``model_spec`` (its keys "<j>.<name>" renamed here).

    Args:
        rng: ``numpy.random.Generator``; arch: one of ``ARCHS``; d_in: token features; d_out: outputs;
        hidden: recurrent neurons per layer (LRU: complex states N = model width H); layers: L >= 1;
        readout_scale: factor on the last output map at init; dtype: "float32" or "float64".
    Returns:
        dict name -> array.
    """
    check_choice("arch", arch, ARCHS)
    d_in, d_out = check_positive_int("d_in", d_in), check_positive_int("d_out", d_out)
    hidden, layers = check_positive_int("hidden", hidden), check_positive_int("layers", layers)
    params = models.init(rng, model_spec(arch, layers, d_in, d_out, hidden, readout_scale))
    names = _layer_names(arch, layers)
    out = {}
    for key, v in params.items():
        j, name = key.split(".", 1)
        out[f"{names[int(j)]}/{name}"] = np.asarray(v, dtype=dtype)
    return out


def _layer_names(arch, layers):
    """Our prefix of each ``model_spec`` entry, in order."""
    cells = [f"l{i}" for i in range(layers)]
    return cells if arch.startswith("gated_") else ["embed", *cells, "readout"]


def _layers(params):
    return 1 + max(int(k.split("/")[0][1:]) for k in params if k.startswith("l"))


def _as_models(params, arch):
    L = _layers(params)
    index = {name: j for j, name in enumerate(_layer_names(arch, L))}
    return {f"{index[k.split('/', 1)[0]]}.{k.split('/', 1)[1]}": v for k, v in params.items()}, L


def model_forward(params, x, arch, readout="all"):
    """y = readout(cell_L(... cell_1(x))): x (B, T, d_in) -> y (B, T, d_out); and the caches for backward.

    ``readout="last"`` returns y at the last step only, (B, 1, d_out), for losses that read only the final
    token (ICL's query): the gated RNN's last layer then runs its own ``readout="last"`` (output gating on h_T
    only, no scan); the other cells run every step and only the final one is passed on (``models.forward``).
    """
    check_choice("arch", arch, ARCHS)
    check_array("x", x, ndim=3, names=("B", "T", "d_in"))
    check_choice("readout", readout, ("all", "last"))
    p, L = _as_models(params, arch)
    return models.forward(p, x, model_spec(arch, L), readout)


def model_backward(params, caches, dy, arch):
    """Gradients of the stack through each cell's own backward, layers in reverse. Returns (dx, grads)."""
    p, L = _as_models(params, arch)
    dx, grads = models.backward(p, caches, dy, model_spec(arch, L))
    index = {name: j for j, name in enumerate(_layer_names(arch, L))}
    return dx, {k: grads[f"{index[k.split('/', 1)[0]]}.{k.split('/', 1)[1]}"] for k in params}


def n_params(params):
    """Total number of real parameters (complex LRU weights count twice: stored as real and imaginary)."""
    return models.n_params(params)
