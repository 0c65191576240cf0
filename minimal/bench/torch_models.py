"""PyTorch twins of the models ``minimal.bench.train`` times, for ``python -m minimal bench train`` only.

Importing this module imports torch: ``bench_train`` imports it only when torch is installed (torch is never a
dependency of ``minimal``). Each twin reads the project's own params dict (same names, same layouts) and follows
the same equations, written as a PyTorch user would: ``F.linear``, ``F.layer_norm``, a depthwise ``F.conv1d``,
``F.gelu(approximate="tanh")``, ``F.cross_entropy``, ``torch.optim.AdamW`` and ``clip_grad_norm_``. minLSTM's
normalised gates are f / (f + i) in vanilla mode (the paper's App. A) and, in log space, App. B.3's
diff = softplus(-k_f) - softplus(-k_i).

Versions (``versions(model)``), eager first, then one compiled: vanilla "loop" (a Python loop under autograd) and
"scan Function" (a ``torch.autograd.Function`` with a hand-written reverse-time scan); log space "Heinsen"
(``torch.logcumsumexp`` over (B, T, H)) and "Heinsen (B,H,T)" (over a (B, H, T) copy); attention "sdpa". Then
"compile: associative scan" (vanilla: h_t = a_t h_{t-1} + b_t as ``torch._higher_order_ops.associative_scan``,
combine (a1, b1), (a2, b2) -> (a1 a2, a2 b1 + b2), ``combine_mode="generic"``, the only mode CPUs have; where this
torch has no associative_scan, or it fails to compile with its backward on the CPU (``associative_scan_compiles``
tries a small one once), "compile: loop", the Python loop compiled), "compile: Heinsen" and "compile: sdpa". A
compiled version compiles the whole loss function (forward and loss; AOTAutograd traces its backward) with
``torch.compile(..., dynamic=False)`` and the default inductor backend, and the cell alone likewise for
``cell_step``; dropout is the same ``F.dropout`` call inside it. Clipping and the AdamW step stay eager in every
version. Compiled functions are cached per (model name, version, dtype, loss or cell) in ``_COMPILED``, so the
float64 check and the timed float32 steps compile each once (up to minutes of CPU each, vanilla Shakespeare at T 128
the longest; less where inductor's on-disk cache already holds the graph): warm up before timing.
One thread: ``torch.set_num_threads(1)`` and inductor's ``cpp.threads = 1``.
"""
from __future__ import annotations

import time
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

try:
    from torch._higher_order_ops.associative_scan import associative_scan
except ImportError:   # a torch without it: "compile: loop" instead
    associative_scan = None

__all__ = ["versions", "check_equal", "step", "cell_step", "associative_scan_compiles", "matmul_seconds"]

LN_EPS = 1e-5   # minimal.layers.layernorm.EPS


# --- the recurrence h_t = a_t h_{t-1} + b_t (h_0 = 0), (B, T, H) ----------------------------------------------
def scan_loop(a, b):
    """Autograd through a Python loop over t."""
    prev, hs = b[:, 0], [b[:, 0]]
    for t in range(1, a.shape[1]):
        prev = a[:, t] * prev + b[:, t]
        hs.append(prev)
    return torch.stack(hs, 1)


class ScanFunction(torch.autograd.Function):
    """Forward loop and a hand-written reverse-time adjoint g_t = dh_t + a_{t+1} g_{t+1}, both time-major."""

    @staticmethod
    def forward(ctx, a, b):
        at, bt = a.transpose(0, 1).contiguous(), b.transpose(0, 1).contiguous()    # (T, B, H)
        h = torch.empty_like(bt)
        h[0] = bt[0]
        for t in range(1, at.shape[0]):
            torch.addcmul(bt[t], at[t], h[t - 1], out=h[t])
        ctx.save_for_backward(at, h)
        return h.transpose(0, 1)

    @staticmethod
    def backward(ctx, dh):
        at, h = ctx.saved_tensors
        dht = dh.transpose(0, 1).contiguous()
        g = torch.empty_like(dht)
        T = at.shape[0]
        g[T - 1] = dht[T - 1]
        for t in range(T - 2, -1, -1):
            torch.addcmul(dht[t], at[t + 1], g[t + 1], out=g[t])
        da = torch.zeros_like(g)
        da[1:] = g[1:] * h[:-1]
        return da.transpose(0, 1), g.transpose(0, 1)


def _combine(x, y):
    (a1, b1), (a2, b2) = x, y
    return a1 * a2, a2 * b1 + b2


def scan_associative(a, b):
    """The scan of the pairs (a_t, b_t) under ``_combine``; its b is h (h_0 = b_0: a_0 never matters)."""
    return associative_scan(_combine, (a, b), 1, combine_mode="generic")[1]


@lru_cache(maxsize=None)
def associative_scan_compiles():
    """Whether this torch has ``associative_scan`` and it compiles, with its backward, on the CPU and computes the
    loop's h and gradients (tried once, on a small float64 problem)."""
    if associative_scan is None:
        return False
    _one_thread()
    try:
        a, b = (torch.rand(2, 5, 3, dtype=torch.float64, requires_grad=True) for _ in range(2))
        h, h_loop = torch.compile(scan_associative, dynamic=False)(a, b), scan_loop(a, b)
        got = (h, *torch.autograd.grad(h.square().sum(), (a, b)))
        want = (h_loop, *torch.autograd.grad(h_loop.square().sum(), (a, b)))
        return all(torch.allclose(x, y, rtol=1e-12, atol=1e-12) for x, y in zip(got, want))
    except Exception:  # noqa: BLE001 - absent (ImportError), unsupported (NotImplementedError), compile errors
        return False


def heinsen(log_a, log_b, time_last=False):
    """log h_t = a*_t + logcumsumexp_{s<=t}(log b_s - a*_s), a*_t = Σ_{s<=t} log a_s (Heinsen 2023; Feng et al.
    App. B.3). ``time_last``: run both cumulative ops on a (B, H, T) copy, the layout torch's logcumsumexp is
    fast in."""
    if time_last:
        log_a, log_b = log_a.transpose(1, 2).contiguous(), log_b.transpose(1, 2).contiguous()
    dim = 2 if time_last else 1
    a_star = torch.cumsum(log_a, dim)
    log_h = a_star + torch.logcumsumexp(log_b - a_star, dim)
    return log_h.transpose(1, 2) if time_last else log_h


def _log_g(k):
    return torch.where(k >= 0, torch.log(F.relu(k) + 0.5), -F.softplus(-k))


def cell(P, x, kind, log_space, version):
    """minGRU / minLSTM (Feng et al. Sec. 3, App. B.3) in parallel mode: x (B, T, D) -> h (B, T, H)."""
    k = {n: F.linear(x, P[f"W_{n}"], P.get(f"b_{n}")) for n in ("zh" if kind == "mingru" else "fih")}
    if not log_space:
        if kind == "mingru":
            z = torch.sigmoid(k["z"])
            a, b = 1.0 - z, z * k["h"]
        else:
            f, i = torch.sigmoid(k["f"]), torch.sigmoid(k["i"])
            s = f + i
            a, b = f / s, (i / s) * k["h"]
        return SCANS[version](a, b)
    if kind == "mingru":
        log_a, log_b = -F.softplus(k["z"]), -F.softplus(-k["z"]) + _log_g(k["h"])
    else:
        diff = F.softplus(-k["f"]) - F.softplus(-k["i"])
        log_a, log_b = -F.softplus(diff), -F.softplus(-diff) + _log_g(k["h"])
    return torch.exp(heinsen(log_a, log_b, time_last=version == "Heinsen (B,H,T)"))


SCANS = {"loop": scan_loop, "scan Function": ScanFunction.apply, "compile: loop": scan_loop,
         "compile: associative scan": scan_associative}


def versions(model):
    """The torch versions of a model's recurrence (module docstring): the eager ones, then the compiled one."""
    if model.kind == "attention":
        return ["sdpa", "compile: sdpa"]
    if model.log_space:
        return ["Heinsen", "Heinsen (B,H,T)", "compile: Heinsen"]
    return ["loop", "scan Function",
            "compile: associative scan" if associative_scan_compiles() else "compile: loop"]


# --- the stacks ------------------------------------------------------------------------------------------------
def _sub(P, prefix):
    return {k[len(prefix):]: v for k, v in P.items() if k.startswith(prefix)}


def _ln(P, x):
    return F.layer_norm(x, x.shape[-1:], P["gamma"], P["beta"], LN_EPS)


def _lin(P, x):
    return torch.addmm(P["b"], x.reshape(-1, x.shape[-1]), P["W"]).reshape(*x.shape[:-1], -1)


def _block(P, x, model, version, dropout):
    """``cells.min_block``: x + Drop(W_out mixer(LN x)), x + Drop(Conv(LN x)), x + Drop(MLP(LN x))."""
    u = _ln(_sub(P, "rnn_ln."), x)
    R = _sub(P, "rnn.")
    if model.kind == "attention":
        B, T, _ = u.shape
        n = model.meta.get("n_heads", 1)                 # heads: (B, T, h d) -> (B, h, T, d)
        q, k, v = (F.linear(u, R[f"W_{c}"]).reshape(B, T, n, -1).transpose(1, 2) for c in "QKV")
        h = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)
    else:
        h = cell(R, u, model.kind, model.log_space, version)
    x = x + F.dropout(_lin(_sub(P, "rnn_out."), h), dropout)
    if "conv.W" in P:
        u = _ln(_sub(P, "conv_ln."), x)
        W = P["conv.W"]                                  # (k, C): y_t = b + Σ_j W[j] x_{t-j}
        weight = W.flip(0).t().unsqueeze(1)              # (C, 1, k) for a cross-correlation
        y = F.conv1d(F.pad(u.transpose(1, 2), (W.shape[0] - 1, 0)), weight, P["conv.b"], groups=W.shape[1])
        x = x + F.dropout(y.transpose(1, 2), dropout)
    u = _ln(_sub(P, "mlp_ln."), x)
    M = _sub(P, "mlp.")
    y = _lin({"W": M["W_2"], "b": M["b_2"]}, F.gelu(_lin({"W": M["W_1"], "b": M["b_1"]}, u), approximate="tanh"))
    return x + F.dropout(y, dropout)


def loss(P, batch, model, version, dropout):
    """The model's training loss (selective copy: cross-entropy at the last M positions; Shakespeare: at all)."""
    inputs, targets = batch
    L = model.meta["depth"]
    x = F.embedding(inputs, P["0.E"])
    if "0.P" in P:                                       # learned positions (the Transformer)
        x = x + P["0.P"][:inputs.shape[1]]
    for i in range(1, L + 1):
        if model.family == "selective_copy":
            u = _ln(_sub(P, f"{i}.0."), x)
            x = x + _lin(_sub(P, f"{i}.2."), cell(_sub(P, f"{i}.1."), u, model.kind, model.log_space, version))
        else:
            x = _block(_sub(P, f"{i}."), x, model, version, dropout)
    z = _lin(_sub(P, f"{L + 2}."), _ln(_sub(P, f"{L + 1}."), x))
    if model.family == "selective_copy":
        z = z[:, -targets.shape[1]:]
    return F.cross_entropy(z.reshape(-1, z.shape[-1]), targets.reshape(-1))


# --- compiled versions --------------------------------------------------------------------------------------------
_COMPILED = {}   # (model name, version, dtype, "loss" or "cell") -> the torch.compile'd function


def _one_thread():
    import torch._inductor.config as inductor_config

    torch.set_num_threads(1)
    inductor_config.cpp.threads = 1


def _compiled(model, version, dtype, part):
    """The compiled loss (P, inputs, targets, dropout) -> loss, or cell (P, x) -> h, of a "compile: " version."""
    key = (model.name, version, str(dtype), part)
    if key not in _COMPILED:
        _one_thread()
        # Every entry is a closure of the same code object, and dynamo's recompile limit counts per code object.
        limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
        setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 256))
        spec = model._replace(params=None, batch=None, loss_and_grads=None)   # what the trace reads: no arrays

        def loss_fn(P, inputs, targets, dropout):
            return loss(P, (inputs, targets), spec, version, dropout)

        def cell_fn(P, x):
            return cell(P, x, spec.kind, spec.log_space, version)

        _COMPILED[key] = torch.compile(loss_fn if part == "loss" else cell_fn, dynamic=False)
    return _COMPILED[key]


def _loss_fn(model, version, dtype):
    """(P, batch, dropout) -> loss: ``loss`` itself, or its compiled version (cached)."""
    if not version.startswith("compile: "):
        return lambda P, batch, dropout: loss(P, batch, model, version, dropout)
    f = _compiled(model, version, dtype, "loss")
    return lambda P, batch, dropout: f(P, *batch, dropout)


def _cell_fn(model, version, dtype):
    if not version.startswith("compile: "):
        return lambda P, x: cell(P, x, model.kind, model.log_space, version)
    return _compiled(model, version, dtype, "cell")


def _tensors(params):
    return {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}


def _batch(model):
    return tuple(torch.from_numpy(np.ascontiguousarray(b)) for b in model.batch)


# --- the float64 check and the timed steps -----------------------------------------------------------------------
def check_equal(model64, compiled=True):
    """Loss and gradients of the float64 model, ours against each torch version, dropout off. Returns
    {"max_rel": the largest relative difference (loss, or a gradient's max-abs difference / its max-abs),
    "versions": {version: its max_rel}}, or inf with "why" when the twin cannot run the model (the project's model
    changed: params the twin does not know; or a version fails to compile). Compiled versions compile here, in
    float64 (cached: ``_COMPILED``); ``compiled=False`` checks the eager versions only."""
    _one_thread()
    ours_loss, ours = model64.loss_and_grads(model64.params, model64.batch, 0.0, None)
    rel = {}
    for version in versions(model64):
        if not compiled and version.startswith("compile: "):
            continue
        P = _tensors(model64.params)
        try:
            out = _loss_fn(model64, version, torch.float64)(P, _batch(model64), 0.0)
        except Exception as e:  # noqa: BLE001 - the project's model has params or shapes this twin lacks
            why = (str(e).strip().splitlines() or [""])[0]
            return {"max_rel": float("inf"), "why": f"{version}: {type(e).__name__}: {why}"}
        out.backward()
        rel[version] = abs(out.item() - ours_loss) / abs(ours_loss)
        for k, g in ours.items():
            if P[k].grad is None:
                return {"max_rel": float("inf"), "why": f"the torch twin does not use the param {k!r}"}
            scale = max(float(np.abs(g).max()), 1e-300)
            rel[version] = max(rel[version], float(np.abs(P[k].grad.numpy() - g).max()) / scale)
    return {"max_rel": max(rel.values()), "versions": rel}


def step(model, version, clip=1.0, lr=1e-3):
    """A closure running one torch training step (as ``bench_train.project_step``); returns {part: CPU s}. A
    compiled version compiles on its first call (the benchmark's warm-up), unless cached; AdamW stays eager."""
    _one_thread()
    P = _tensors(model.params)
    params = list(P.values())
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    batch = _batch(model)
    loss_fn = _loss_fn(model, version, params[0].dtype)

    def run():
        t0 = time.process_time()
        opt.zero_grad(set_to_none=True)
        loss_fn(P, batch, model.dropout).backward()
        t1 = time.process_time()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        t2 = time.process_time()
        return {"step": t2 - t0, "forward+backward": t1 - t0, "update": t2 - t1}

    return run


def cell_step(model, version, p, x, dy):
    """The cell's forward and backward alone, as ``bench_train._cell_step`` times ours."""
    _one_thread()
    P = _tensors(p)
    xt = torch.tensor(x, requires_grad=True)
    dyt = torch.from_numpy(dy)
    cell_fn = _cell_fn(model, version, xt.dtype)

    def run():
        t0 = time.process_time()
        for t in (*P.values(), xt):
            t.grad = None
        cell_fn(P, xt).backward(dyt)
        return {"cell": time.process_time() - t0}

    return run


def matmul_seconds(shapes, repeats=5):
    """Seconds of ``torch.mm(a, b, out=c)`` (float32, one thread: the BLAS this torch build links, e.g. MKL) summed
    over ``shapes`` [(M, K, N, count)], each its count times, best of ``repeats`` (``profile.product_seconds``): the
    rate a torch step's matrix products can reach, beside ``profile.sgemm_seconds``'s NumPy rate."""
    from .profile import product_seconds

    _one_thread()
    gen = torch.Generator().manual_seed(0)

    def prepare(M, K, N):
        a, b, c = torch.randn(M, K, generator=gen), torch.randn(K, N, generator=gen), torch.empty(M, N)
        return lambda: torch.mm(a, b, out=c)

    return product_seconds(shapes, repeats, prepare)
