"""The Shakespeare Transformer's block, part by part, ours against torch eager: where the bench-train row's gap to
torch's sdpa step lies. At the row's shapes (``experiments.minrnn.shakespeare.Config``: batch 16, T 128, D 64,
4 heads of 16, an MLP of 4 D, float32, one thread), forward + backward of

    attention   q, k, v = x W^T (one product), causal softmax attention, its output projection W_O
                (``cells.softmax_attention`` with n_heads 4; torch: ``F.linear`` and ``F.scaled_dot_product_attention``)
    MLP         Linear -> GELU (tanh form) -> Linear (``layers.mlp``; torch: ``addmm``, ``F.gelu``, ``addmm``)
    LayerNorm   (``layers.layernorm``; torch: ``F.layer_norm``)

each checked equal in float64 first (outputs and every gradient), then timed interleaved, min and median of CPU
time over the rounds; beside each part, its matrix products alone with NumPy's sgemm and with ``torch.mm``
(``bench.profile.sgemm_seconds``, ``bench.torch_models.matmul_seconds``). A step runs each part once per block
(three blocks) and two LayerNorms per block.

Usage: python bench/transformer_parts.py [--rounds 20]   (needs torch: pip install -e ".[anchors]")
Fair setting as for ``python -m minimal bench train``: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1,
jemalloc preloaded with its decay off, pinned, a quiet machine.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from minimal.bench import torch_models
from minimal.bench.profile import sgemm_seconds
from minimal.cells import softmax_attention
from minimal.layers import layernorm, mlp
from minimal.run import speed

B, T, D, HEADS = 16, 128, 64, 4
N = B * T


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


def runners(dtype):
    """{part: (ours, theirs)}: closures running forward + backward, each returning (y, dx, grads)."""
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


def max_rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def check_equal():
    """{part: the largest relative difference of output, dx and grads between ours and torch's, in float64}."""
    torch.set_default_dtype(torch.float64)
    try:
        errors = {}
        for part, (ours, theirs) in runners(np.float64).items():
            (y, dx, g), (ty, tdx, tg) = ours(), theirs()
            errors[part] = max([max_rel(y, ty), max_rel(dx, tdx)] + [max_rel(g[k], tg[k]) for k in g])
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
    return []


def main(rounds):
    speed.tune()
    torch_models._one_thread()
    errors = check_equal()
    timed = runners(np.float32)
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
    for part in timed:
        o, t = times[part, "ours"], times[part, "torch"]
        shapes = products(part)
        mine = 1e3 * sgemm_seconds(shapes, 5) if shapes else 0.0
        their = 1e3 * torch_models.matmul_seconds(shapes, 5) if shapes else 0.0
        print(f"{part:<11}{1e3 * min(o):9.2f}{1e3 * np.median(o):8.2f}{1e3 * min(t):10.2f}{1e3 * np.median(t):8.2f}"
              f"{min(o) / min(t):7.2f}{mine:17.2f}{their:10.2f}{errors[part]:9.1e}")
    print(f"CPU ms of forward + backward at B {B}, T {T}, D {D}, {HEADS} heads, float32, one thread; min (median) of "
          f"{rounds} interleaved rounds; products: the part's matrix products alone at each library's rate")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    main(parser.parse_args().rounds)
