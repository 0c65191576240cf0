"""The model of the selective-copying experiment (``selective_copy``; Feng et al., Table 1, App. C.1-C.3): its
``minimal.models`` stack, the loss at the marker positions, and the accuracy on the fixed evaluation sequences.
Each function but ``spec`` takes a ``selective_copy.Job``.

The claim (Sec. 4.1). minGRU's and minLSTM's gates see only their input, z_t = σ(Linear(x_t)), never h_{t−1}.
In the first layer the input x_t^{(1)} is the embedding of token t alone, so each gate is a fixed function of the
current token: "the gates of a model consisting of a single layer of minLSTM or minGRU are time-independent due
to being conditioned on time-independent inputs x^{(1)}_{1:n}". Unrolled, a one-layer minGRU's state is then a sum
over past tokens of per-token vectors, each weighted by a product of per-token factors (1 − z(x_r)) over the tokens
after it:

    h_t = Σ_{s ≤ t} [ Π_{s < r ≤ t} (1 − z(x_r)) ] ⊙ z(x_s) ⊙ h̃(x_s)

Nothing in it can depend on how many data tokens came before token s, which is what writing the i-th data
token into an i-th "slot", and reading slot i back at the i-th marker, would need. The second layer's input is
h^{(1)}_t, which does depend on the past (layer 1 can count data tokens, e.g. a channel with z(noise) = 0 decays by
(1 − ζ) at each data token), so "beginning from the second layer onwards, minLSTM and minGRU's gates will also
be time-dependent". Table 1: one layer 37.0 ± 2.3 (minGRU) / 37.6 ± 2.0 (minLSTM) % accuracy; two layers 96.8 ±
3.2 / 85.7 ± 5.8; three 99.5 ± 0.2 / 96.0 ± 2.8 (Table 2 quotes the three-layer numbers). A GRU or LSTM, whose
gates do see h_{t−1}, is time-dependent in one layer; we train one layer of each as the reference.

Model (App. C.1: "Each layer in the model consisted of (1) either a minLSTM or minGRU layer and (2) a linear
layer", residual, LayerNorm before each layer), a ``minimal.models`` stack:

    embedding (V = 16, D)  ->  L x [ x <- x + Linear_{H -> D}( RNN_{D -> H}( LN(x) ) ) ]  ->  LN  ->  Linear_{D -> V}

with H = 6 D ("minLSTM and minGRU have an expansion factor of 6", App. C.2; the linear layer projects the
expanded state back to the residual width), RNN = minGRU / minLSTM (parallel mode, Numba scan) or GRU / LSTM
(sequential). minGRU / minLSTM run in log space by default (``Job.log_space``; App. B.3, the form the paper
trains: candidate g(k) > 0, a scan of log-coefficients); ``log_space=False`` runs the vanilla cells, which compute
another function of the same weights (h̃ = Linear_h(x) may be negative). The argument above holds for both:
the gates are the same σ(Linear(x_t)). The loss is the cross-entropy of the logits at the M marker positions against the data tokens;
the metric is the token accuracy there (argmax = data token), on a fixed evaluation set of ``n_eval``
sequences shared by every run.

Glossary: B batch, T sequence length, M data tokens (= output positions), V vocabulary, D model width,
H = expansion · D recurrent width, L depth (layers).
"""
from __future__ import annotations

import numpy as np

from ... import models
from ...layers import cross_entropy
from ...models import Layer, Residual
from ...tasks import selective_copy as task

__all__ = ["KINDS", "spec", "init_params", "loss_and_grads", "predict", "eval_batch", "evaluate"]

KINDS = ("mingru", "minlstm", "gru", "lstm")


def spec(kind, depth, D, H, vocab, log_space=False):
    """The ``minimal.models`` stack: embedding, ``depth`` residual pre-LN [RNN -> Linear] layers, LN, head.

    ``log_space`` (minGRU / minLSTM only) runs the cells in App. B.3's log space (candidate g(k) > 0)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if log_space and kind not in ("mingru", "minlstm"):
        raise ValueError(f"log_space applies to kinds mingru and minlstm only, got kind {kind!r}")
    fwd = {"log_space": True} if log_space else {}
    blocks = tuple(Residual((Layer("layernorm", {"D": D}), Layer(kind, {"d_in": D, "d_hidden": H}, fwd),
                             Layer("linear", {"D_in": H, "D_out": D}))) for _ in range(depth))
    return (Layer("embedding", {"V": vocab, "D": D}),) + blocks + (
        Layer("layernorm", {"D": D}), Layer("linear", {"D_in": D, "D_out": vocab}))


def _spec(job):
    return spec(job.kind, job.depth, job.D, job.expansion * job.D, job.vocab,
                job.log_space and job.kind in ("mingru", "minlstm"))


def init_params(rng, job):
    """Every layer's own init, cast to ``job.dtype``."""
    return models.init(rng, _spec(job), dtype=job.dtype)


def loss_and_grads(params, job, inputs, targets):
    """Cross-entropy at the M output positions (the last M) and its gradients.

    Args:
        params: from ``init_params``; job: a ``Job``; inputs: (B, T) ids; targets: (B, M) data tokens.
    Returns:
        (loss: float, grads: dict with params' keys).
    """
    logits, cache = models.forward(params, inputs, _spec(job))       # (B, T, V)
    M = targets.shape[1]
    loss, c_ce = cross_entropy.forward({}, logits[:, -M:], targets)
    dl, _ = cross_entropy.backward({}, c_ce, np.asarray(1.0, logits.dtype))
    dlogits = np.zeros_like(logits)
    dlogits[:, -M:] = dl                                               # no loss before the markers
    _, grads = models.backward(params, cache, dlogits)
    return float(loss), grads


def predict(params, job, inputs, chunk=512):
    """Logits at the M output positions, (B, M, V), in chunks of ``chunk`` sequences."""
    out = [models.forward(params, inputs[i:i + chunk], _spec(job))[0][:, -job.n_data:]
           for i in range(0, inputs.shape[0], chunk)]
    return np.concatenate(out)


def eval_batch(job):
    """The job's fixed evaluation sequences."""
    return task.sample(np.random.default_rng(job.eval_seed), job.n_eval, job.T, job.n_data, job.vocab)


def evaluate(params, job, batch=None):
    """Accuracy (%) on the data tokens, per output position (%), and the mean cross-entropy."""
    batch = eval_batch(job) if batch is None else batch
    logits = predict(params, job, batch.inputs)
    hit = logits.argmax(-1) == batch.targets                                   # (B, M)
    loss = float(cross_entropy.forward({}, logits.astype(np.float64), batch.targets)[0])
    return {"accuracy": 100.0 * float(hit.mean()), "accuracy_by_position": (100.0 * hit.mean(0)).tolist(),
            "eval_loss": loss}
