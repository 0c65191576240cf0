"""JAX twins of the models ``minimal.bench.train`` times, for ``python -m minimal bench train`` only.

Importing this module imports jax (and optax); the library never imports it, only the benchmark, where jax is
installed. Each twin reads the project's own params dict (same names, same layouts as ``torch_models``) and follows
the same equations, written as a JAX user would: ``jnp`` matmuls, a layer norm and a causal depthwise convolution
in ``jnp``, ``jax.nn.gelu(approximate=True)`` (tanh GELU), causal attention as jnp einsums,
``optax.softmax_cross_entropy_with_integer_labels``, and ``optax`` clipping and AdamW, the whole training step
(forward, loss, gradients, clip, update) under one ``jax.jit``.

The recurrence h_t = a_t h_{t-1} + b_t (h_0 = 0) of minGRU / minLSTM (Feng et al. 2024, Sec. 3, App. B.3):
    vanilla     minGRU a = 1 - z, b = z k_h;  minLSTM a = f / (f + i), b = i / (f + i) k_h
                "lax.scan" (a loop over t) and "associative_scan" ((a1, b1) . (a2, b2) = (a1 a2, a2 b1 + b2))
    log space   minGRU log a = -softplus(k_z), log b = -softplus(-k_z) + log g(k_h); minLSTM with
                δ = softplus(-k_f) - softplus(-k_i): log a = -softplus(δ), log b = -softplus(-δ) + log g(k_h)
                "lax.scan": the same loop on a = exp(log a), b = exp(log b);
                "Heinsen": log h_t = a*_t + cumlogsumexp_{s<=t}(log b_s - a*_s), a*_t = Σ_{s<=t} log a_s
and the Transformer's causal softmax attention ("jnp attention": what ``jax.nn.dot_product_attention`` runs on
the CPU, written out in jnp so that float64 stays float64: ``attention``).

Threads: XLA_FLAGS is set to "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" (one thread,
as every side of the benchmark runs) unless the user has set XLA_FLAGS, which is then left as it is; XLA reads it
when the process runs its first JAX computation, so import this module before that.

Memory: the fair setting preloads jemalloc for every side (LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2)
with MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1. Under glibc's malloc, XLA's per-step scratch buffer (57-73 MB
for the selective-copy steps) is above the mmap threshold (capped at 32 MiB), so it is mapped afresh each step and
the kernel zero-fills its pages (14,000-18,000 minor page faults a step): JAX then looks slower than it is, which
times the allocator, not the framework. jemalloc 5.3 with its default decay
hands such pages back too (JAX keeps its faults, and our NumPy step gets ~10,000 a step that it has not under
glibc); with decay off, both sides run at under 100 faults a step (measured 2026-11-29).
"""
from __future__ import annotations

import itertools
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import jax  # noqa: E402 - after XLA_FLAGS
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

__all__ = ["NAME", "versions", "check_equal", "step", "cell_step", "matmul_seconds"]

NAME = "jax"
LN_EPS = 1e-5   # minimal.layers.layernorm.EPS


# --- the recurrence h_t = a_t h_{t-1} + b_t (h_0 = 0), (B, T, H) ----------------------------------------------
def scan_loop(a, b):
    """``lax.scan`` over t, time-major."""
    def f(h, ab):
        h = ab[0] * h + ab[1]
        return h, h
    _, h = jax.lax.scan(f, jnp.zeros_like(b[:, 0]), (jnp.swapaxes(a, 0, 1), jnp.swapaxes(b, 0, 1)))
    return jnp.swapaxes(h, 0, 1)


def scan_associative(a, b):
    """``lax.associative_scan`` of the affine maps h -> a h + b along t."""
    def combine(e1, e2):
        return e1[0] * e2[0], e2[0] * e1[1] + e2[1]
    return jax.lax.associative_scan(combine, (a, b), axis=1)[1]


def heinsen(log_a, log_b):
    """log h_t = a*_t + cumlogsumexp_{s<=t}(log b_s - a*_s), a*_t = Σ_{s<=t} log a_s (Heinsen 2023)."""
    a_star = jnp.cumsum(log_a, axis=1)
    return a_star + jax.lax.cumlogsumexp(log_b - a_star, axis=1)


def _log_g(k):
    return jnp.where(k >= 0, jnp.log(jax.nn.relu(k) + 0.5), -jax.nn.softplus(-k))


def cell(P, x, kind, log_space, version):
    """minGRU / minLSTM (Feng et al. Sec. 3, App. B.3) in parallel mode: x (B, T, D) -> h (B, T, H)."""
    k = {n: x @ P[f"W_{n}"].T + P.get(f"b_{n}", 0.0) for n in ("zh" if kind == "mingru" else "fih")}
    if not log_space:
        if kind == "mingru":
            z = jax.nn.sigmoid(k["z"])
            a, b = 1.0 - z, z * k["h"]
        else:
            f, i = jax.nn.sigmoid(k["f"]), jax.nn.sigmoid(k["i"])
            s = f + i
            a, b = f / s, (i / s) * k["h"]
        return scan_loop(a, b) if version == "lax.scan" else scan_associative(a, b)
    if kind == "mingru":
        log_a, log_b = -jax.nn.softplus(k["z"]), -jax.nn.softplus(-k["z"]) + _log_g(k["h"])
    else:
        diff = jax.nn.softplus(-k["f"]) - jax.nn.softplus(-k["i"])
        log_a, log_b = -jax.nn.softplus(diff), -jax.nn.softplus(-diff) + _log_g(k["h"])
    if version == "lax.scan":
        return scan_loop(jnp.exp(log_a), jnp.exp(log_b))
    return jnp.exp(heinsen(log_a, log_b))


def attention(q, k, v):
    """Causal softmax attention, (B, T, heads, d) each, scale 1/sqrt(d): ``jax.nn.dot_product_attention``'s
    einsum-mask-softmax-einsum, with the softmax in the inputs' dtype (that function's is always float32, which
    the float64 check cannot pass: 3e-8)."""
    a = jnp.einsum("btnd,bsnd->bnts", q, k) / np.sqrt(q.shape[-1])
    T = q.shape[1]
    a = jnp.where(jnp.tril(jnp.ones((T, T), bool)), a, -jnp.inf)
    return jnp.einsum("bnts,bsnd->btnd", jax.nn.softmax(a, axis=-1), v)


def versions(model):
    """The JAX versions of a model's recurrence (module docstring)."""
    if model.kind == "attention":
        return ["jnp attention"]
    return ["lax.scan", "Heinsen"] if model.log_space else ["lax.scan", "associative_scan"]


# --- the stacks ------------------------------------------------------------------------------------------------
def _sub(P, prefix):
    return {k[len(prefix):]: v for k, v in P.items() if k.startswith(prefix)}


def _ln(P, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + LN_EPS) * P["gamma"] + P["beta"]


def _lin(P, x):
    return x @ P["W"] + P["b"]


def _dropout(x, rate, key):
    """Inverted dropout: keep with probability 1 - rate, scale the kept by 1 / (1 - rate)."""
    if key is None or rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def _block(P, x, model, version, dropout, keys):
    """``cells.min_block``: x + Drop(W_out mixer(LN x)), x + Drop(Conv(LN x)), x + Drop(MLP(LN x))."""
    u = _ln(_sub(P, "rnn_ln."), x)
    R = _sub(P, "rnn.")
    if model.kind == "attention":
        B, T, _ = u.shape
        n = model.meta.get("n_heads", 1)                 # heads: (B, T, h d) -> (B, T, h, d)
        q, k, v = (jnp.reshape(u @ R[f"W_{c}"].T, (B, T, n, -1)) for c in "QKV")
        h = attention(q, k, v).reshape(B, T, -1)
    else:
        h = cell(R, u, model.kind, model.log_space, version)
    x = x + _dropout(_lin(_sub(P, "rnn_out."), h), dropout, next(keys))
    if "conv.W" in P:
        u = _ln(_sub(P, "conv_ln."), x)
        W = P["conv.W"]                                  # (k, C): y_t = b + Σ_j W[j] x_{t-j}
        K, T = W.shape[0], u.shape[1]
        up = jnp.pad(u, ((0, 0), (K - 1, 0), (0, 0)))
        y = P["conv.b"] + sum(W[j] * up[:, K - 1 - j:K - 1 - j + T] for j in range(K))
        x = x + _dropout(y, dropout, next(keys))
    M = _sub(P, "mlp.")
    y = _lin({"W": M["W_2"], "b": M["b_2"]},
             jax.nn.gelu(_lin({"W": M["W_1"], "b": M["b_1"]}, _ln(_sub(P, "mlp_ln."), x)), approximate=True))
    return x + _dropout(y, dropout, next(keys))


def loss(P, batch, model, version, dropout=0.0, key=None):
    """The model's training loss (selective copy: cross-entropy at the last M positions; Shakespeare: at all);
    ``key``: the dropout masks' PRNG key (None: no dropout)."""
    inputs, targets = batch
    L = model.meta["depth"]
    keys = iter(jax.random.split(key, 3 * L)) if key is not None else itertools.repeat(None)
    x = P["0.E"][inputs]
    if "0.P" in P:                                       # learned positions (the Transformer)
        x = x + P["0.P"][:inputs.shape[1]]
    for i in range(1, L + 1):
        if model.family == "selective_copy":
            u = _ln(_sub(P, f"{i}.0."), x)
            x = x + _lin(_sub(P, f"{i}.2."), cell(_sub(P, f"{i}.1."), u, model.kind, model.log_space, version))
        else:
            x = _block(_sub(P, f"{i}."), x, model, version, dropout, keys)
    z = _lin(_sub(P, f"{L + 2}."), _ln(_sub(P, f"{L + 1}."), x))
    if model.family == "selective_copy":
        z = z[:, -targets.shape[1]:]
    return optax.softmax_cross_entropy_with_integer_labels(z, targets).mean()


def _arrays(params):
    return {k: jnp.asarray(v) for k, v in params.items()}


def _batch(model):
    return tuple(jnp.asarray(np.ascontiguousarray(b)) for b in model.batch)


# --- the float64 check and the timed steps -----------------------------------------------------------------------
def check_equal(model64):
    """Loss and gradients of the float64 model (``jax_enable_x64``, restored afterwards), ours against each JAX
    version, dropout off. Returns {"max_rel": the largest relative difference (loss, or a gradient's max-abs
    difference / its max-abs)}, inf with "why" when the twin cannot run the model or leaves a param unused
    (its gradient identically zero where ours is not)."""
    x64 = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        ours_loss, ours = model64.loss_and_grads(model64.params, model64.batch, 0.0, None)
        worst = 0.0
        for version in versions(model64):
            grad_fn = jax.jit(jax.value_and_grad(lambda P, batch: loss(P, batch, model64, version)))
            try:
                value, grads = grad_fn(_arrays(model64.params), _batch(model64))
            except Exception as e:  # noqa: BLE001 - the project's model has params or shapes this twin lacks
                return {"max_rel": float("inf"), "why": f"{type(e).__name__}: {e}"}
            worst = max(worst, abs(float(value) - ours_loss) / abs(ours_loss))
            for k, g in ours.items():
                gj = np.asarray(grads[k])
                if not gj.any() and g.any():
                    return {"max_rel": float("inf"), "why": f"the jax twin does not use the param {k!r}"}
                scale = max(float(np.abs(g).max()), 1e-300)
                worst = max(worst, float(np.abs(gj - g).max()) / scale)
        return {"max_rel": worst}
    finally:
        jax.config.update("jax_enable_x64", x64)


def step(model, version, clip=1.0, lr=1e-3):
    """A closure running one JAX training step (as ``bench_train.project_step``), all of it under one jit:
    forward, loss, gradients, clipping at ``clip``, AdamW; params, optimiser state and the dropout key carried
    from call to call (``.state``, donated to each call). Returns {"step": CPU s}: the parts cannot be timed
    apart inside one compiled step."""
    opt = optax.chain(optax.clip_by_global_norm(clip),
                      optax.adamw(lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0))
    P = _arrays(model.params)
    state = {"params": P, "opt": opt.init(P), "key": jax.random.PRNGKey(2)}
    batch = _batch(model)

    def train_step(P, opt_state, key, batch):
        key, sub = jax.random.split(key)
        grads = jax.grad(loss)(P, batch, model, version, model.dropout, sub)
        updates, opt_state = opt.update(grads, opt_state, P)
        return optax.apply_updates(P, updates), opt_state, key

    train_step = jax.jit(train_step, donate_argnums=(0, 1, 2))

    def run():
        t0 = time.process_time()
        out = train_step(state["params"], state["opt"], state["key"], batch)
        jax.block_until_ready(out)
        state["params"], state["opt"], state["key"] = out
        return {"step": time.process_time() - t0}

    run.state = state   # the params, optimiser state and key it carries (for tests)
    return run


def cell_step(model, version, p, x, dy):
    """The cell's forward and backward alone (the vjp of its output with cotangent ``dy``, jitted), as
    ``bench_train._cell_step`` times ours."""
    P, xj, dyj = _arrays(p), jnp.asarray(x), jnp.asarray(dy)

    @jax.jit
    def forward_backward(P, x, dy):
        h, vjp = jax.vjp(lambda P, x: cell(P, x, model.kind, model.log_space, version), P, x)
        return h, vjp(dy)

    def run():
        t0 = time.process_time()
        jax.block_until_ready(forward_backward(P, xj, dyj))
        return {"cell": time.process_time() - t0}

    return run


def matmul_seconds(shapes, repeats=5):
    """Seconds of a jitted ``jnp.matmul(a, b)`` (float32, one thread: XLA's CPU dot) summed over ``shapes``
    [(M, K, N, count)], each its count times, best of ``repeats`` (``profile.product_seconds``; each call waited
    for): the rate a JAX step's matrix products can reach, beside ``profile.sgemm_seconds``'s NumPy rate."""
    from .profile import product_seconds

    product = jax.jit(jnp.matmul)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)

    def prepare(M, K, N):
        a = jax.random.normal(keys[0], (M, K), jnp.float32)
        b = jax.random.normal(keys[1], (K, N), jnp.float32)
        return lambda: jax.block_until_ready(product(a, b))

    return product_seconds(shapes, repeats, prepare)
