"""The models of the Shakespeare experiment (``shakespeare``; Feng et al., "Were RNNs All We Needed?" (2024),
Sec. 4.2 and Fig. 2, App. C.1): their ``models`` stacks, the loss, the test loss, and generation in RNN mode.

    minGRU / minLSTM (App. C.1)                               Transformer (nanoGPT's GPT block, the paper's Sec. 4.2)
    e_t = E[x_t]                  ``layers.embedding``         e_t = E[x_t] + P[t]       ``layers.token_position_embedding``
    L = 3 pre-LN residual blocks  ``cells.min_block``          L = 3 pre-LN residual blocks ``cells.min_block``
      x + Drop(W_out RNN(LN x))     RNN at width H = 2 D          x + Drop(W_out Attn(LN x))  N_HEADS causal heads, width D
      x + Drop(Conv_4(LN x))        causal, kernel 4              (no convolution)
      x + Drop(MLP(LN x))           4 D hidden, GELU              x + Drop(MLP(LN x))
    z_t = LN(h_t) W_head + b_head, L = mean_t CE(z_t, x_{t+1})  (both)

"mingru" / "minlstm" run the cells in log space (App. B.3, the form the paper trains: candidate g(k) > 0, a scan
of log-coefficients); "mingru_vanilla" / "minlstm_vanilla" run the same parameters as the vanilla cells
(h̃ = Linear_h(x), a linear scan). The two forms compute different functions (``tests/test_char_lm.py``), so a model
is evaluated in the form it was trained in.

Generation (``generate``): token by token in RNN mode, ``min_block.step_forward``. minGRU / minLSTM carry a fixed
(B, H) state per block and the convolution's last 3 inputs: constant memory. The Transformer's state is its KV
cache, (B, t, D) keys and values per block, growing by one key and one value each step; its learned positions
end at T_max, so it generates at most T_max - 1 characters after a one-character prompt. ``step_logits`` equals
the whole-sequence forward's logits (tests).

Params are "<i>.<name>": 0 the embedding (+ "0.P", the Transformer's positions), 1..L the blocks, L + 1 the
final LayerNorm, L + 2 the head.

Glossary: B batch, T context length, D model width, H = 2 D the RNN's width, V characters, L blocks.
"""
from __future__ import annotations

import numpy as np

from ... import models
from ...cells import min_block
from ...layers import cross_entropy, layernorm, linear, token_position_embedding
from ...models import Layer
from ...tasks import char_lm

__all__ = ["KINDS", "N_HEADS", "T_MAX", "base_kind", "is_log_space", "spec", "init_lm", "lm_forward",
           "lm_loss_and_grads", "evaluate", "step_logits", "generate", "state_nbytes"]

# The models, by name: minGRU / minLSTM in log space (App. B.3, the form the paper trains), the same cells in
# vanilla form (h̃ = Linear_h(x), a linear scan), and nanoGPT's Transformer.
KINDS = ("mingru", "minlstm", "attention", "mingru_vanilla", "minlstm_vanilla")
N_HEADS = 4    # the Transformer's heads (nanoGPT's shakespeare_char: 6 heads of 64 at D = 384; ours: D / 4 each)
T_MAX = 128    # the Transformer's positions when none are given: the experiment's context length (Config.T)

def base_kind(kind):
    """The block's mixer of a model name: "mingru_vanilla" -> "mingru"."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind.removesuffix("_vanilla")


def is_log_space(kind):
    """True for minGRU / minLSTM in log space (the names without "_vanilla"), False otherwise."""
    return base_kind(kind) in ("mingru", "minlstm") and not kind.endswith("_vanilla")


def spec(kind, V, D, n_layers, expansion=2, kernel=4, dropout=0.0, rng=None, train=False, T_max=None):
    """The ``models`` stack of model ``kind`` (KINDS): input layer, ``n_layers`` blocks, LayerNorm, linear head.

    minGRU / minLSTM (log space, or vanilla for the "_vanilla" names): token embedding and App. C.1's block
    (RNN at width expansion · D, causal convolution of size ``kernel``, MLP). The Transformer (nanoGPT's block):
    token + learned positional embedding for ``T_max`` positions, and a block of N_HEADS-head causal attention
    at width D and the MLP, no convolution. ``dropout``, ``rng`` (a Generator: new masks each call) and ``train``
    go into each block's forward keywords, so a training step builds its own spec; init reads only the init
    keywords."""
    mixer = base_kind(kind)
    fwd = {"kind": mixer, "dropout_rate": dropout, "rng": rng, "train": train}
    if mixer == "attention":
        if T_max is None:
            raise ValueError("T_max (the positions of the learned positional embedding) is required for the "
                             "Transformer")
        first = Layer("token_position_embedding", {"V": V, "D": D, "T_max": T_max})
        block = Layer("min_block", {"D": D, "kind": mixer, "expansion": 1, "k": None}, fwd | {"n_heads": N_HEADS})
    else:
        first = Layer("embedding", {"V": V, "D": D})
        block = Layer("min_block", {"D": D, "kind": mixer, "expansion": expansion, "k": kernel},
                      fwd | {"log_space": is_log_space(kind)})
    return (first,) + (block,) * n_layers + (Layer("layernorm", {"D": D}), Layer("linear", {"D_in": D, "D_out": V}))


def init_lm(rng, kind, V, D, n_layers, expansion=2, kernel=4, dtype="float32", T_max=None):
    """Params "<i>.<name>": 0 embedding (+ "0.P" positions for the Transformer, ``T_max`` rows, default
    ``T_MAX``), 1..L blocks, L+1 LayerNorm, L+2 head."""
    T_max = T_MAX if T_max is None else T_max
    return models.init(rng, spec(kind, V, D, n_layers, expansion, kernel, T_max=T_max), dtype=np.dtype(dtype))


def _shape(params):
    """(V, D, L, T_max) read from params (T_max None without a positional embedding)."""
    V, D = params["0.E"].shape
    T_max = params["0.P"].shape[0] if "0.P" in params else None
    return V, D, max(int(k.split(".")[0]) for k in params) - 2, T_max


def lm_forward(params, x, kind, dropout=0.0, rng=None, train=False):
    """Logits (B, T, V) of token ids x (B, T), and the stack's cache."""
    V, D, L, T_max = _shape(params)
    s = spec(kind, V, D, L, dropout=dropout, rng=rng, train=train, T_max=T_max)
    return models.forward(params, x, s)


def lm_loss_and_grads(params, windows, kind, dropout=0.0, rng=None):
    """Mean next-character cross-entropy (nats) of (B, T + 1) windows and its gradients (training mode)."""
    x, y = char_lm.split_xy(windows)
    z, cache = lm_forward(params, x, kind, dropout, rng, train=True)
    loss, c = cross_entropy.forward({}, z, y)
    dz, _ = cross_entropy.backward({}, c, np.ones((), z.dtype))
    _, grads = models.backward(params, cache, dz)
    return float(loss), grads


def evaluate(params, windows, kind, batch=64):
    """Mean cross-entropy over every target of ``windows`` (N, T + 1), dropout off, in float64 sums."""
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        x, y = char_lm.split_xy(windows[i:i + batch])
        z, _ = lm_forward(params, x, kind)
        total += float(cross_entropy.forward({}, z, y)[0]) * y.size
        count += y.size
    return total / count


def _sub(params, prefix):
    n = len(prefix)
    return {k[n:]: v for k, v in params.items() if k.startswith(prefix)}


def step_logits(params, states, tokens, kind):
    """One generation step in RNN mode. tokens: (B,) ids; states: a list of L ``min_block.BlockState`` (or None
    before the first step). Returns logits (B, V) and the new states.

    The Transformer adds the learned position of this step, t = the length of its KV cache; past its T_max
    positions it raises a ValueError (``token_position_embedding.step_forward``). Every kind refuses, naming
    ``tokens``, ids that are not a 1-d integer array in [0, V) (a -1 would otherwise index the last row)."""
    from ...validate import InputError, check_array   # here: this function's own checks
    V, D, L, T_max = _shape(params)
    mixer = base_kind(kind)
    check_array("tokens", tokens, (None,), names=("B",), kind="i")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= V):
        raise InputError(f"tokens must hold ids in [0, V = {V}), got values in [{tokens.min()}, {tokens.max()}]")
    states = [None] * L if states is None else states
    if mixer == "attention":
        t = 0 if states[0] is None else states[0].rnn.K.shape[1]
        h = token_position_embedding.step_forward(_sub(params, "0."), tokens, t)
        kw = {"n_heads": N_HEADS}
    else:
        h = params["0.E"][tokens]
        kw = {"log_space": is_log_space(kind)}
    new = []
    for i in range(L):
        h, s = min_block.step_forward(_sub(params, f"{i + 1}."), states[i], h, mixer, **kw)
        new.append(s)
    u = layernorm.forward(_sub(params, f"{L + 1}."), h)[0]
    return linear.forward(_sub(params, f"{L + 2}."), u)[0], new


def state_nbytes(states):
    """Bytes of the arrays a generation carries from one step to the next (RNN states, conv buffers, KV caches)."""
    def walk(s):
        if isinstance(s, np.ndarray):
            return s.nbytes
        if isinstance(s, (tuple, list)):
            return sum(walk(v) for v in s)
        return 0
    return int(walk(states))


def generate(params, kind, prompt_ids, n, rng, temperature=1.0, return_memory=False):
    """Sample ``n`` >= 0 characters after ``prompt_ids`` (1-d integer ids in [0, V), at least one), one token at
    a time in RNN mode, from softmax(logits / temperature); temperature 0 takes the most likely token (greedy).

    ``rng`` is a ``numpy.random.Generator`` or a seed (int >= 0), as ``minimal.run.train.train`` takes it (None
    only at temperature 0, which draws nothing).

    Returns the (n,) sampled ids and, with ``return_memory``, the bytes of the carried state after each of the
    len(prompt) + n - 1 steps. Raises InputError naming ``temperature``, ``prompt_ids``, ``n`` or ``rng`` when
    bad."""
    from ...validate import InputError, check_positive_int   # here: this function's own checks
    from ...run.train import make_rng
    V = _shape(params)[0]
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.integer, np.floating)) \
            or not np.isfinite(temperature) or temperature < 0:
        raise InputError(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}")
    n = check_positive_int("n", n, minimum=0)
    prompt_ids = np.asarray(prompt_ids)
    if prompt_ids.ndim != 1 or prompt_ids.size < 1 or (prompt_ids.dtype.kind not in "iu"):
        raise InputError(f"prompt_ids must be a 1-d integer array of at least one token id, got "
                         f"{prompt_ids.dtype} of shape {prompt_ids.shape}")
    bad = np.flatnonzero((prompt_ids < 0) | (prompt_ids >= V))
    if bad.size:
        raise InputError(f"prompt_ids must lie in [0, V = {V}), got prompt_ids[{bad[0]}] = {prompt_ids[bad[0]]}")
    prompt_ids = prompt_ids.astype(np.int64)
    if not (rng is None and temperature == 0):
        rng = make_rng(rng)
    states, memory, out = None, [], []
    tok = prompt_ids[:1]
    for t in range(prompt_ids.size + n - 1):
        z, states = step_logits(params, states, tok, kind)
        memory.append(state_nbytes(states))
        if t + 1 < prompt_ids.size:
            tok = prompt_ids[t + 1:t + 2]
            continue
        if temperature == 0:
            tok = np.array([int(np.argmax(z[0]))])
        else:
            z = z[0].astype(np.float64) / temperature
            p = np.exp(z - z.max())
            tok = np.array([rng.choice(p.size, p=p / p.sum())])
        out.append(int(tok[0]))
    out = np.array(out, dtype=np.int64)
    return (out, np.array(memory)) if return_memory else out
