"""The Shakespeare Transformer's block, part by part, ours against torch eager: where the bench-train row's gap to
torch's sdpa step lies. At the row's shapes (``experiments.minrnn.shakespeare.Config``: batch 16, T 128, D 64,
4 heads of 16, an MLP of 4 D, float32, one thread), forward + backward of

    attention   q, k, v = x W^T (one product), causal softmax attention, its output projection W_O
                (``cells.softmax_attention`` with n_heads 4; torch: ``F.linear`` and ``F.scaled_dot_product_attention``)
    MLP         Linear -> GELU (tanh form) -> Linear (``layers.mlp``; torch: ``addmm``, ``F.gelu``, ``addmm``)
    LayerNorm   (``layers.layernorm``; torch: ``F.layer_norm``)

and the parts of the step outside the blocks' sublayers, as the torch twin of ``bench train`` writes them
(``bench.torch_models.loss`` and ``step``):

    dropout     a sublayer's output through dropout (rate 0.1, Config's) added to the residual stream, h = x +
                Drop(f) (``cells.min_block``'s lines; torch: ``x + F.dropout(f, 0.1)``)
    embedding   token and learned position embedding (``layers.token_position_embedding``; torch:
                ``F.embedding(ids, E) + P[:T]``)
    head        the final LayerNorm, the output Linear and the mean cross-entropy (``layers.layernorm``,
                ``linear``, ``cross_entropy``; torch: ``F.layer_norm``, ``addmm``, ``F.cross_entropy``)
    update      clipping at global norm 1.0 and one AdamW step over all the model's parameters
                (``optim.clip_by_global_norm``, ``adamw_step``; torch: ``clip_grad_norm_``, ``torch.optim.AdamW``)

each checked equal in float64 first (outputs and every gradient; the update's new parameters, where torch's clipping
divides by the norm + 1e-6 and ours by the norm, a difference of ~1e-11; dropout's masks are each library's own
random draws, so its check is of the identity at rate 0), then timed interleaved, min and median
of CPU time over the rounds; beside each part, its matrix products alone with NumPy's sgemm and with ``torch.mm``
(``bench.profile.sgemm_seconds``, ``bench.torch_models.matmul_seconds``). A step runs attention and the MLP once
per block (three blocks), LayerNorm twice per block, dropout twice per block, the others once: the last table
adds the parts up that many times and sets the sum beside the whole step of each side, timed in the same rounds
(``bench.train.project_step`` and ``bench.torch_models.step`` with "sdpa"); what the parts do not cover is the
Python and NumPy between them (the stack's plumbing, its checks, the backward's bookkeeping).

Usage: python bench/transformer_parts.py [--rounds 20]   (needs torch: pip install -e ".[anchors]")
Fair setting as for ``python -m minimal bench train``: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1,
jemalloc preloaded with its decay off, pinned, a quiet machine.
"""
import argparse
import functools
import time

import numpy as np
import torch
import torch.nn.functional as F

from minimal.bench import torch_models
from minimal.bench import train as bench_train
from minimal.bench.profile import sgemm_seconds
from minimal.cells import softmax_attention
from minimal.layers import cross_entropy, dropout, layernorm, linear, mlp, token_position_embedding
from minimal.optim import adamw_init, adamw_step, clip_by_global_norm
from minimal.run import speed

B, T, D, HEADS = 16, 128, 64, 4
N = B * T
RATE = 0.1              # Config().dropout
PER_STEP = {"attention": 3, "MLP": 3, "LayerNorm": 6, "dropout": 6, "embedding": 1, "head": 1, "update": 1}


def _ours(dtype):
    rng = np.random.default_rng(0)
    att = {k: (rng.standard_normal((D, D)) / np.sqrt(D)).astype(dtype) for k in ("W_Q", "W_K", "W_V", "W_O")}
    ff = {k: v.astype(dtype) for k, v in mlp.init(rng, D, 4 * D).items()}
    ln = {"gamma": (1 + 0.1 * rng.standard_normal(D)).astype(dtype),
          "beta": (0.1 * rng.standard_normal(D)).astype(dtype)}
    x = rng.standard_normal((B, T, D)).astype(dtype)
    dy = rng.standard_normal((B, T, D)).astype(dtype)
    return {"attention": (softmax_attention, att, {"n_heads": HEADS}), "MLP": (mlp, ff, {}),
            "LayerNorm": (layernorm, ln, {})}, x, dy


def _torch_forward(part, P, x):
    if part == "attention":
        q, k, v = (F.linear(x, P[f"W_{c}"]).reshape(B, T, HEADS, -1).transpose(1, 2) for c in "QKV")
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
        return F.linear(o, P["W_O"])
    if part == "MLP":
        u = torch.addmm(P["b_1"], x.reshape(N, D), P["W_1"])
        return torch.addmm(P["b_2"], F.gelu(u, approximate="tanh"), P["W_2"]).reshape(B, T, D)
    return F.layer_norm(x, (D,), P["gamma"], P["beta"], layernorm.EPS)


@functools.lru_cache(maxsize=None)
def _model():
    """The bench-train row's model (its params, batch and vocabulary), from ``bench.train``; built once."""
    return bench_train._shakespeare("attention", False)


def _sublayers(dtype):
    """{part: (ours, theirs)} of the blocks' sublayers: closures running forward + backward, each returning
    (y, dx, grads)."""
    parts, x, dy = _ours(dtype)
    out = {}
    for part, (module, params, kw) in parts.items():
        def ours(module=module, params=params, kw=kw):
            y, cache = module.forward(params, x, **kw)
            dx, grads = module.backward(params, cache, dy)
            return y, dx, grads

        P = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
        tx, tdy = torch.tensor(x, requires_grad=True), torch.tensor(dy)

        def theirs(part=part, P=P, tx=tx, tdy=tdy):
            for t in (tx, *P.values()):
                t.grad = None
            y = _torch_forward(part, P, tx)
            y.backward(tdy)
            return y.detach().numpy(), tx.grad.numpy(), {k: v.grad.numpy() for k, v in P.items()}

        out[part] = (ours, theirs)
    return out


def _dropout(dtype, rate):
    """h = x + Drop(f) and its backward: (h, (dx, df), {})."""
    rng = np.random.default_rng(3)
    x, f, dy = (rng.standard_normal((B, T, D)).astype(dtype) for _ in range(3))
    gen = np.random.default_rng(4)

    def ours():
        g, c = dropout.forward({}, f, rate, gen, True)
        h = x + g
        df, _ = dropout.backward({}, c, dy)
        return h, (dy, df), {}

    tx, tf, tdy = torch.tensor(x, requires_grad=True), torch.tensor(f, requires_grad=True), torch.tensor(dy)

    def theirs():
        tx.grad = tf.grad = None
        h = tx + F.dropout(tf, rate)
        h.backward(tdy)
        return h.detach().numpy(), (tx.grad.numpy(), tf.grad.numpy()), {}

    return ours, theirs


def _embedding(dtype, model):
    params = {"E": model.params["0.E"].astype(dtype), "P": model.params["0.P"].astype(dtype)}
    ids = model.batch[0]
    dy = np.random.default_rng(5).standard_normal((B, T, D)).astype(dtype)

    def ours():
        y, c = token_position_embedding.forward(params, ids)
        _, grads = token_position_embedding.backward(params, c, dy)
        return y, None, grads

    P = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    tids, tdy = torch.from_numpy(ids), torch.tensor(dy)

    def theirs():
        for t in P.values():
            t.grad = None
        y = F.embedding(tids, P["E"]) + P["P"][:T]
        y.backward(tdy)
        return y.detach().numpy(), None, {k: v.grad.numpy() for k, v in P.items()}

    return ours, theirs


def _head(dtype, model):
    L = model.meta["depth"]
    ln = {k: model.params[f"{L + 1}.{k}"].astype(dtype) for k in ("gamma", "beta")}
    lin = {k: model.params[f"{L + 2}.{k}"].astype(dtype) for k in ("W", "b")}
    x = np.random.default_rng(6).standard_normal((B, T, D)).astype(dtype)
    targets = model.batch[1]

    def ours():
        u, c_ln = layernorm.forward(ln, x)
        z, c_lin = linear.forward(lin, u)
        loss, c_ce = cross_entropy.forward({}, z, targets)
        dz, _ = cross_entropy.backward({}, c_ce, np.ones((), z.dtype))
        du, g_lin = linear.backward(lin, c_lin, dz)
        dx, g_ln = layernorm.backward(ln, c_ln, du)
        return loss, dx, {**g_ln, **g_lin}

    P = {k: torch.tensor(v, requires_grad=True) for k, v in {**ln, **lin}.items()}
    tx, tt = torch.tensor(x, requires_grad=True), torch.from_numpy(targets)

    def theirs():
        for t in (tx, *P.values()):
            t.grad = None
        u = F.layer_norm(tx, (D,), P["gamma"], P["beta"], layernorm.EPS)
        z = torch.addmm(P["b"], u.reshape(N, D), P["W"])
        loss = F.cross_entropy(z, tt.reshape(-1))
        loss.backward()
        return loss.detach().numpy(), tx.grad.numpy(), {k: v.grad.numpy() for k, v in P.items()}

    return ours, theirs


def _update(dtype, model):
    """Clip and one AdamW step (lr 1e-3, weight decay 0, as ``bench train``'s steps) from the same params and
    gradients; each call steps on from the last (the timing), and the first call's new params are the check."""
    rng = np.random.default_rng(7)
    params = {k: v.astype(dtype) for k, v in model.params.items()}
    grads = {k: rng.standard_normal(v.shape).astype(dtype) for k, v in params.items()}
    state = {"p": params, "opt": adamw_init(params)}

    def ours():
        g, _ = clip_by_global_norm(grads, 1.0)
        state["p"], state["opt"] = adamw_step(state["p"], g, state["opt"], 1e-3)
        return None, None, state["p"]

    P = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    for k, t in P.items():
        t.grad = torch.tensor(grads[k])
    opt = torch.optim.AdamW(list(P.values()), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    def theirs():
        for k, t in P.items():      # clip_grad_norm_ scales in place: the same gradients each call, as ours
            t.grad.copy_(torch.from_numpy(grads[k]))
        torch.nn.utils.clip_grad_norm_(list(P.values()), 1.0)
        opt.step()
        return None, None, {k: v.detach().numpy() for k, v in P.items()}

    return ours, theirs


def runners(dtype, rate=RATE):
    """{part: (ours, theirs)}: closures running forward + backward (the update: one step), each returning
    (y, dx, grads) (None where a part has none)."""
    model = _model()
    out = _sublayers(dtype)
    out["dropout"] = _dropout(dtype, rate)
    out["embedding"] = _embedding(dtype, model)
    out["head"] = _head(dtype, model)
    out["update"] = _update(dtype, model)
    return out


def max_rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _arrays(value):
    """The arrays of a runner's (y, dx, grads), flattened in a fixed order (None and empty parts skipped)."""
    y, dx, grads = value
    out = [] if y is None else [np.asarray(y)]
    out += [] if dx is None else list(dx) if isinstance(dx, tuple) else [dx]
    return out + [grads[k] for k in sorted(grads)]


def check_equal():
    """{part: the largest relative difference of output, dx and grads between ours and torch's, in float64}
    (dropout at rate 0: each library draws its own masks)."""
    torch.set_default_dtype(torch.float64)
    try:
        errors = {}
        for part, (ours, theirs) in runners(np.float64, rate=0.0).items():
            mine, their = _arrays(ours()), _arrays(theirs())
            assert len(mine) == len(their), part
            errors[part] = max(max_rel(a, b) for a, b in zip(mine, their))
        return errors
    finally:
        torch.set_default_dtype(torch.float32)


def products(part):
    """The part's matrix products as (M, K, N, count), forward and backward (dX and dW)."""
    if part == "attention":
        rows = [(N, D, 3 * D, 1), (N, 3 * D, D, 1), (3 * D, N, D, 1), (N, D, D, 1), (N, D, D, 1), (D, N, D, 1)]
        d = D // HEADS          # per head: scores and P V forward; dP, dV, dQ, dK backward (dense counts)
        return rows + [(T, d, T, 2 * B * HEADS), (T, T, d, 4 * B * HEADS)]
    if part == "MLP":
        return [(N, D, 4 * D, 1), (N, 4 * D, D, 1), (4 * D, N, D, 1), (N, 4 * D, D, 1), (N, D, 4 * D, 1),
                (D, N, 4 * D, 1)]
    if part == "head":          # z = u W (N, D) @ (D, V); dz W^T; dW = u^T dz; V the vocabulary
        V = _model().meta["V"]
        return [(N, D, V, 1), (N, V, D, 1), (D, N, V, 1)]
    return []


def _steps():
    """(ours, theirs): one whole training step of the bench-train row each (``project_step``, torch's "sdpa")."""
    model = _model()
    ours, theirs = bench_train.project_step(model), torch_models.step(model, "sdpa")
    return (lambda: ours()["step"]), (lambda: theirs()["step"])


def main(rounds):
    speed.tune()
    torch_models._one_thread()
    errors = check_equal()
    timed = runners(np.float32)
    timed["step"] = _steps()
    for ours, theirs in timed.values():    # warm-up (numba and torch first calls)
        ours(), theirs()
    times = {(part, side): [] for part in timed for side in ("ours", "torch")}
    for _ in range(rounds):
        for part, (ours, theirs) in timed.items():
            for side, fn in (("ours", ours), ("torch", theirs)):
                t0 = time.process_time()
                fn()
                times[part, side].append(time.process_time() - t0)
    print(f"{'part':<11}{'ours ms':>9}{'median':>8}{'torch ms':>10}{'median':>8}{'ratio':>7}"
          f"{'products: numpy':>17}{'torch.mm':>10}{'f64 err':>9}")
    best = {}
    for part in timed:
        o, t = times[part, "ours"], times[part, "torch"]
        best[part] = (1e3 * min(o), 1e3 * min(t))
        if part == "step":
            continue
        shapes = products(part)
        mine = 1e3 * sgemm_seconds(shapes, 5) if shapes else 0.0
        their = 1e3 * torch_models.matmul_seconds(shapes, 5) if shapes else 0.0
        print(f"{part:<11}{1e3 * min(o):9.2f}{1e3 * np.median(o):8.2f}{1e3 * min(t):10.2f}{1e3 * np.median(t):8.2f}"
              f"{min(o) / min(t):7.2f}{mine:17.2f}{their:10.2f}{errors[part]:9.1e}")
    print(f"CPU ms of forward + backward (update: one step) at B {B}, T {T}, D {D}, {HEADS} heads, float32, one "
          f"thread; min (median) of {rounds} interleaved rounds; products: the part's matrix products alone at each "
          f"library's rate; f64 err of dropout: at rate 0 (the identity)")
    print()
    print(f"{'a step':<22}{'times':>6}{'ours ms':>9}{'torch ms':>10}{'gap ms':>8}")
    total = [0.0, 0.0]
    for part, n in PER_STEP.items():
        o, t = (n * v for v in best[part])
        total = [total[0] + o, total[1] + t]
        print(f"{part:<22}{n:>6}{o:9.2f}{t:10.2f}{o - t:8.2f}")
    print(f"{'the parts, summed':<22}{'':>6}{total[0]:9.2f}{total[1]:10.2f}{total[0] - total[1]:8.2f}")
    (o, t) = best["step"]
    print(f"{'the whole step':<22}{'':>6}{o:9.2f}{t:10.2f}{o - t:8.2f}")
    print(f"{'step - parts':<22}{'':>6}{o - total[0]:9.2f}{t - total[1]:10.2f}{(o - total[0]) - (t - total[1]):8.2f}")
    print("the parts' minima times how often a step runs each, against the whole step's minimum (same rounds); "
          "step - parts: what the parts do not cover")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    main(parser.parse_args().rounds)
