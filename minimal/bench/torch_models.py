"""PyTorch twins of the models ``minimal.bench.train`` times, for ``python -m minimal bench train`` only.

Importing this module imports torch: ``bench_train`` imports it only when torch is installed (torch is never a
dependency of ``minimal``). Each twin reads the project's own params dict (same names, same layouts) and follows
the same equations, written as a PyTorch user would: ``F.linear``, ``F.layer_norm``, a depthwise ``F.conv1d``,
``F.gelu(approximate="tanh")``, ``F.cross_entropy``, ``torch.optim.AdamW`` and ``clip_grad_norm_``. minLSTM's
normalised gates are f / (f + i) in vanilla mode (the paper's App. A) and, in log space, App. B.3's
diff = softplus(-k_f) - softplus(-k_i). The recurrence comes in the versions of ``bench_train``'s docstring.
"""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["versions", "check_equal", "step", "cell_step"]

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
        return scan_loop(a, b) if version == "loop" else ScanFunction.apply(a, b)
    if kind == "mingru":
        log_a, log_b = -F.softplus(k["z"]), -F.softplus(-k["z"]) + _log_g(k["h"])
    else:
        diff = F.softplus(-k["f"]) - F.softplus(-k["i"])
        log_a, log_b = -F.softplus(diff), -F.softplus(-diff) + _log_g(k["h"])
    return torch.exp(heinsen(log_a, log_b, time_last=version == "Heinsen (B,H,T)"))


def versions(model):
    """The torch versions of a model's recurrence (``bench_train``'s docstring)."""
    if model.kind == "attention":
        return ["sdpa"]
    return ["Heinsen", "Heinsen (B,H,T)"] if model.log_space else ["loop", "scan Function"]


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


def _tensors(params):
    return {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}


def _batch(model):
    return tuple(torch.from_numpy(np.ascontiguousarray(b)) for b in model.batch)


# --- the float64 check and the timed steps -----------------------------------------------------------------------
def check_equal(model64):
    """Loss and gradients of the float64 model, ours against each torch version, dropout off. Returns
    {"max_rel": the largest relative difference (loss, or a gradient's max-abs difference / its max-abs)}, inf
    with "why" when the twin cannot run the model (the project's model changed: params the twin does not know)."""
    torch.set_num_threads(1)
    ours_loss, ours = model64.loss_and_grads(model64.params, model64.batch, 0.0, None)
    worst = 0.0
    for version in versions(model64):
        P = _tensors(model64.params)
        try:
            out = loss(P, _batch(model64), model64, version, 0.0)
        except Exception as e:  # noqa: BLE001 - the project's model has params or shapes this twin lacks
            return {"max_rel": float("inf"), "why": f"{type(e).__name__}: {e}"}
        out.backward()
        worst = max(worst, abs(out.item() - ours_loss) / abs(ours_loss))
        for k, g in ours.items():
            if P[k].grad is None:
                return {"max_rel": float("inf"), "why": f"the torch twin does not use the param {k!r}"}
            scale = max(float(np.abs(g).max()), 1e-300)
            worst = max(worst, float(np.abs(P[k].grad.numpy() - g).max()) / scale)
    return {"max_rel": worst}


def step(model, version, clip=1.0, lr=1e-3):
    """A closure running one torch training step (as ``bench_train.project_step``); returns {part: CPU s}."""
    torch.set_num_threads(1)
    P = _tensors(model.params)
    params = list(P.values())
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    batch = _batch(model)

    def run():
        t0 = time.process_time()
        opt.zero_grad(set_to_none=True)
        loss(P, batch, model, version, model.dropout).backward()
        t1 = time.process_time()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        t2 = time.process_time()
        return {"step": t2 - t0, "forward+backward": t1 - t0, "update": t2 - t1}

    return run


def cell_step(model, version, p, x, dy):
    """The cell's forward and backward alone, as ``bench_train._cell_step`` times ours."""
    torch.set_num_threads(1)
    P = _tensors(p)
    xt = torch.tensor(x, requires_grad=True)
    dyt = torch.from_numpy(dy)

    def run():
        t0 = time.process_time()
        for t in (*P.values(), xt):
            t.grad = None
        cell(P, xt, model.kind, model.log_space, version).backward(dyt)
        return {"cell": time.process_time() - t0}

    return run
