"""The models of the GRIL comparison (``comparison``; Tian et al., Sec. 5.1, App. B.3): each name of ``MODELS`` as
a ``minimal.models`` stack (``spec``; "_L" is the number of layers, "gril_1" is ``model``'s block, not a stack), its
prediction at the query token and the query loss with its gradients; what each is, and which of the paper's it
stands in for:

    lsa_1, lsa_2     linear self-attention (``cells.lsa``, Zucchet Eq. 1): linear f -> d_model, + a learned
                     positional embedding P[t] (``layers.positional``), then LSA (two layers: x + LSA(x), then
                     LSA), linear d_model -> f                                         paper: "Linear SA", 1 / 2 layers
    softmax_2        the same with softmax attention (``cells.softmax_attention``, one head, D_k = D_v =
                     d_model, output projection W_O)                                  paper: the two-layer transformer
    gated_rnn_L      linear f -> d_model, L pre-LN residual blocks x + RNN(LN(x)) with the gated diagonal
                     linear RNN of Zucchet Eq. 2 (``cells.gated_rnn``, H neurons), linear d_model -> f (the
                     input / output projections every stack has, as App. B.3's S5)     stands in for S5
    lru_L            the same blocks with the LRU and input gating (``cells.lru``, variant in_out, H/2 complex
                     states)                                                           stands in for Griffin
    mingru_L         the same blocks with minGRU (``cells.mingru``, H states) and a linear map H -> d_model
                                                                                       stands in for Mamba
    gril_1           the trained one-layer GRIL, ``model.run_job(model.Job(variant="full"))``

Positions. The tokens x_1, y_1, x_2, ... carry no mark of which are inputs and which targets. Without the positional
embedding (``Job(positional=False)``: attention on the raw tokens) one attention layer's output at the query is a
sum over the context, blind to its order, so it cannot pair x_i with y_i; a second causal layer sees order only
through its mask. With it, each token carries its position, from which x / y type and pairing can be read.

Both attention cells are causal in every mode (``lsa``: the score matrix is tril-masked, or the recurrent form;
``softmax_attention``: -inf above the diagonal, or the RNN form), so no option needs setting; the query token sees
the whole context and nothing after it.

Why these stand-ins. S5 is a diagonal linear state-space layer (complex, ZOH-discretised) with input and output
projections; the gated RNN here is a diagonal linear recurrence with input / output maps, the same model class up
to complex vs real eigenvalues and its multiplicative gates. Griffin's recurrent block is the RG-LRU, a diagonal
LRU whose input and decay are gated by the input; the LRU with a GLU on its input (Zucchet App. A.1, the variant
that learned attention best in their Fig. 4) is the closest cell we have. Mamba's S6 makes the recurrence
input-selective (Δ, B, C depend on x_t); minGRU's update gate z_t = σ(W_z x_t) is an input-dependent decay of a
diagonal recurrence, the same selectivity in its smallest form (Feng et al. relate it to Mamba in the same way).

``spec`` reads a ``comparison.Job``'s model, f, N, d_model, hidden, readout_scale, value_scale, positional and
positional_std.
"""
from __future__ import annotations

import numpy as np

from ... import models
from ...models import Layer, Residual
from ...tasks import gril_regression
from ...validate import check_choice

__all__ = ["MODELS", "family_of", "depth_of", "spec", "predict", "loss_and_grads"]

MODELS = ("lsa_1", "lsa_2", "softmax_2", "gated_rnn_1", "gated_rnn_2", "lru_1", "lru_2", "mingru_1", "mingru_2",
          "gril_1")


def family_of(model):
    """A name of ``MODELS`` without its depth: "gated_rnn_1" -> "gated_rnn"."""
    return model.rsplit("_", 1)[0]


def depth_of(model):
    """A name of ``MODELS``'s number of layers: "gated_rnn_1" -> 1."""
    return int(model.rsplit("_", 1)[1])


def spec(job):
    """The ``minimal.models`` spec of ``job.model`` (not for "gril_1", which is ``model``'s block)."""
    check_choice("model", job.model, MODELS)
    family, L = family_of(job.model), depth_of(job.model)
    f, d, H, s = job.f, job.d_model, job.hidden, job.readout_scale
    value = getattr(job, "value_scale", None)
    v_lsa, v_softmax = (s * s, s) if value is None else (value, value)   # LSA's W_V and softmax's W_O at init
    if family in ("lsa", "softmax") and job.positional:
        # a linear input map f -> d and a learned positional embedding P[t] (App. B.3's Transformer), L attention
        # layers of width d (residual but the last), a linear output map d -> f. Without positions attention cannot
        # tell x_i from y_i, nor which y follows which x.
        if family == "lsa":
            att = Layer("lsa", {"D": d}, {}, {"W_V": v_lsa})
        else:
            att = Layer("softmax_attention", {"D": d, "D_k": d, "D_v": d, "output_projection": True}, {},
                        {"W_O": v_softmax})
        T = 2 * job.N + 1
        std = getattr(job, "positional_std", None)
        pos = Layer("positional", {"T_max": T, "D": d} | ({} if std is None else {"std": std}))
        return ((Layer("linear", {"D_in": f, "D_out": d}), pos)
                + tuple(Residual((att,)) for _ in range(L - 1)) + (att,)
                + (Layer("linear", {"D_in": d, "D_out": f}, {}, {"W": s}),))
    if family == "lsa":
        # W_V scaled by s²: attention is cubic in the tokens (|y| ~ 6 here), and at s a second layer starts
        # at a loss of ~1e6 (measured; ~16 at s², the zero predictor 1.67)
        lsa = Layer("lsa", {"D": f}, {}, {"W_V": v_lsa})
        return tuple(Residual((lsa,)) for _ in range(L - 1)) + (lsa,)
    if family == "softmax":
        attn = Layer("softmax_attention", {"D": f, "D_k": d, "D_v": d, "output_projection": True}, {},
                     {"W_O": v_softmax})
        return tuple(Residual((attn,)) for _ in range(L - 1)) + (attn,)
    if family == "gated_rnn":
        cell = (Layer("gated_rnn", {"d_in": d, "d_hidden": H, "d_out": d}),)
    elif family == "lru":
        # H / 2 complex states: H real numbers, as the other cells' H neurons
        cell = (Layer("lru", {"d_in": d, "d_state": max(1, H // 2), "d_out": d, "d_model": d, "variant": "in_out",
                              "r_min": 0.0, "max_phase": np.pi / 10}, {"variant": "in_out"}),)
    elif family == "mingru":
        # minGRU's output is its state: a linear map takes the H states back to the block's width
        cell = (Layer("mingru", {"d_in": d, "d_hidden": H}), Layer("linear", {"D_in": H, "D_out": d}))
    else:
        raise ValueError(f"{job.model!r} is model.py's GRIL block, not a models stack")
    blocks = tuple(Residual((Layer("layernorm", {"D": d}),) + cell) for _ in range(L))
    return (Layer("linear", {"D_in": f, "D_out": d}),) + blocks + (Layer("linear", {"D_in": d, "D_out": f}, {},
                                                                          {"W": s}),)


def predict(params, tokens, n_out, spec_):
    """ŷ (B, n_out): the stack's output at the last token, first n_out entries; and the cache."""
    y, cache = models.forward(params, tokens, spec_, readout="last")   # (B, 1, f)
    return y[:, 0, :n_out], cache


def loss_and_grads(params, tasks, spec_):
    """The query loss 1/2 mean (ŷ - y_{N+1})² on ``tasks`` and its gradients (only ŷ's entries are scored)."""
    y = tasks.Y[:, -1]
    out, cache = models.forward(params, tasks.tokens, spec_, readout="last")   # (B, 1, f)
    loss, dy_hat = gril_regression.query_loss(out[:, 0, :y.shape[1]], y)
    dy = np.zeros_like(out)
    dy[:, 0, :y.shape[1]] = dy_hat
    return loss, models.backward(params, cache, dy)[1]
