"""Causal softmax attention, single- or multi-head, in transformer (parallel) mode and in RNN (sequential) mode.

Vaswani et al. (2017), "Attention is all you need", Sec. 3.2.1 (scaled dot-product attention), with the
causal mask of the decoder:

    q_t = W_Q x_t,  k_t = W_K x_t,  v_t = W_V x_t
    a_{t,s} = q_t . k_s / sqrt(D_k)                                 for s <= t
    o_t = Σ_{s<=t} softmax_s(a_{t,.}) v_s = Σ_{s<=t} exp(a_{t,s}) v_s / Σ_{s<=t} exp(a_{t,s})
    y_t = W_O o_t   (only when the params hold W_O; otherwise y_t = o_t)

RNN mode (``mode="sequential"``, the word every cell uses: ``minimal.conventions``) follows Katharopoulos et al.
(2020), "Transformers are RNNs", Sec. 3.2 (Eq. 2-3) and 3.4: with a similarity sim(q, k) = φ(q)^T φ(k), causal
attention is an RNN whose state is the pair S_t = Σ_{s<=t} φ(k_s) v_s^T (numerator) and z_t = Σ_{s<=t} φ(k_s)
(denominator), both independent of the query. For softmax, sim(q, k) = exp(q . k / sqrt(D_k)) has an infinite-
dimensional feature map, so no finite S_t exists. What the RNN carries from step to step here is therefore,
precisely:

    state after step t = (K_t, V_t) = ((k_1, ..., k_t), (v_1, ..., v_t))      (B, t, D_k), (B, t, D_v)

(the "KV cache"; it grows by one key and one value per step). The output at step t reads the state with the
new query q_t by a second recurrence over s = 1..t that keeps the numerator n, the denominator z and a
running max m so that no exponential overflows (the "online softmax" of Milakov & Gimelshein, 2018):

    m_s = max(m_{s-1}, a_{t,s})
    n_s = exp(m_{s-1} - m_s) n_{s-1} + exp(a_{t,s} - m_s) v_s          (numerator,   D_v)
    z_s = exp(m_{s-1} - m_s) z_{s-1} + exp(a_{t,s} - m_s)              (denominator, scalar)
    o_t = n_t / z_t,    with m_0 = -inf, n_0 = 0, z_0 = 0.

Both n and z are scaled by the same exp(-m_s), which cancels in the ratio, so o_t equals the parallel form.

Multi-head (Vaswani et al. Sec. 3.2.2), ``n_heads = h``: q, k, v are split along their features into h heads of
D_k / h and D_v / h features; each head attends on its own with scale 1/sqrt(D_k / h), and the head outputs are
concatenated (in head order) before W_O. The params are those of one head (W_Q's rows are the heads' rows, head
by head), so ``n_heads`` is a forward keyword, not a parameter; n_heads = 1 is the single-head form above.

Parallel mode computes q, k, v with one matmul by [W_Q; W_K; W_V] and the causal softmax (and, in ``backward``,
its vector-Jacobian product) in one compiled pass a row (``cells._softmax_numba``); ``softmax_weights`` is the NumPy
form it is tested against.

Glossary: B batch, T time, D input features, D_k key/query features, D_v value features, D_out output features.
Weights act on column vectors: W_Q (D_k, D), W_K (D_k, D), W_V (D_v, D), W_O (D_out, D_v).
"""
from __future__ import annotations

from typing import NamedTuple

import math

import numpy as np

from .. import products
from ..conventions import CHOICES, choose
from ..validate import check_array, check_dtype, check_finite_result, check_positive_int, \
    check_grad_dtype, common_dtype
from . import _softmax_numba
from ..contract import Example

__all__ = ["init", "forward", "backward", "step_forward", "examples", "KVState", "MODES"]

MODES = CHOICES["mode"]


class KVState(NamedTuple):
    """The RNN-mode state after t steps: every key and value so far."""
    K: np.ndarray  # (B, t, D_k)
    V: np.ndarray  # (B, t, D_v)


class Cache(NamedTuple):
    x: np.ndarray  # (B, T, D)
    q: np.ndarray  # (B, h, T, D_k / h) each head's queries (a strided view of the projection)
    k: np.ndarray  # (B, h, T, D_k / h)
    v: np.ndarray  # (B, h, T, D_v / h)
    P: np.ndarray  # (B h, T, T) attention weights P_{t,s} of each head (batch-major), zero for s > t
    o: np.ndarray  # (B, T, D_v) attention output before W_O (the heads' outputs, concatenated)
    n_heads: int = 1


def init(rng, D, D_k=None, D_v=None, D_out=None, output_projection=False):
    """W_Q, W_K (D_k, D), W_V (D_v, D), entries N(0, 1/D); W_O (D_out, D_v), N(0, 1/D_v), if
    ``output_projection``. D_k, D_v, D_out default to D."""
    D = check_positive_int("D", D)
    D_k = D if D_k is None else check_positive_int("D_k", D_k)
    D_v = D if D_v is None else check_positive_int("D_v", D_v)
    s = 1.0 / np.sqrt(D)
    params = {"W_Q": s * rng.standard_normal((D_k, D)),
              "W_K": s * rng.standard_normal((D_k, D)),
              "W_V": s * rng.standard_normal((D_v, D))}
    if output_projection:
        D_out = D if D_out is None else check_positive_int("D_out", D_out)
        params["W_O"] = rng.standard_normal((D_out, D_v)) / np.sqrt(D_v)
    elif D_out is not None:
        raise ValueError("D_out must be None unless output_projection=True")
    return params


def _check_params(params):
    keys = set(params)
    if keys not in ({"W_Q", "W_K", "W_V"}, {"W_Q", "W_K", "W_V", "W_O"}):
        raise ValueError(f"params must have keys W_Q, W_K, W_V and optionally W_O, got {sorted(keys)}")
    W_Q = check_array("W_Q", params["W_Q"], ndim=2, names=("D_k", "D"))
    check_array("W_K", params["W_K"], W_Q.shape, names=("D_k", "D"))
    W_V = check_array("W_V", params["W_V"], (None, W_Q.shape[1]), names=("D_v", "D"))
    if "W_O" in params:
        check_array("W_O", params["W_O"], (None, W_V.shape[0]), names=("D_out", "D_v"))
    return common_dtype({k: params[k] for k in ("W_Q", "W_K", "W_V", "W_O") if k in params})


def _project(params, x):
    return x @ params["W_Q"].T, x @ params["W_K"].T, x @ params["W_V"].T


def _stacked(params):
    """[W_Q; W_K; W_V]: (2 D_k + D_v, D), one matrix for the three projections."""
    return np.concatenate([params["W_Q"], params["W_K"], params["W_V"]])


def _project_heads(params, x, h):
    """q, k, v = x W_Q^T, x W_K^T, x W_V^T split into heads, (B, h, T, d) each: strided views of one matmul's
    (B, T, 2 D_k + D_v) output, no copy (``_heads_of``; the heads' products read them in place)."""
    B, T, D = x.shape
    D_k, D_v = params["W_Q"].shape[0], params["W_V"].shape[0]
    qkv = products.times_t(x.reshape(B * T, D), _stacked(params)).reshape(B, T, 2 * D_k + D_v)
    return (_heads_of(qkv[:, :, :D_k], h), _heads_of(qkv[:, :, D_k:2 * D_k], h),
            _heads_of(qkv[:, :, 2 * D_k:], h))


def _check_heads(n_heads, D_k, D_v):
    n_heads = check_positive_int("n_heads", n_heads)
    if D_k % n_heads or D_v % n_heads:
        raise ValueError(f"n_heads must divide D_k = {D_k} and D_v = {D_v}, got n_heads = {n_heads}")
    return n_heads


def _split(a, h):
    """(B, T, h d) -> (B h, T, d): each head a batch entry (batch-major)."""
    B, T, F = a.shape
    return a.reshape(B, T, h, F // h).transpose(0, 2, 1, 3).reshape(B * h, T, F // h)


def _heads_of(a, h):
    """(B, T, h d) -> (B, h, T, d), a view where a's last axis is contiguous (a column block of a C-contiguous
    array included: only that axis is split), so that products written into it land in a."""
    B, T, F = a.shape
    return a.reshape(B, T, h, F // h).transpose(0, 2, 1, 3)


def _merge(a, h):
    """(B h, T, d) -> (B, T, h d), the inverse of ``_split``."""
    Bh, T, d = a.shape
    return a.reshape(Bh // h, h, T, d).transpose(0, 2, 1, 3).reshape(Bh // h, T, h * d)


# Causal products by row blocks of _BLOCK queries: block [r0, r1) reads keys [0, r1) only, so the products skip
# most of the masked upper triangle (3/8 of the work at T = 128), each block still one BLAS call per head.
_BLOCK = 32


def _blocks(T):
    return [(r0, min(r0 + _BLOCK, T)) for r0 in range(0, T, _BLOCK)]


def _causal_scores(q, k):
    """a @ b^T on and below the diagonal: (..., T, d) and (..., T, d) -> (..., T, T), a new C-contiguous array;
    entries above the diagonal that no block reaches are left unset (the fused softmax and its backward read only
    s <= t and zero the rest). k^T is copied once into (..., d, T): the blocks' products read it faster than the
    transposed view of k."""
    T = q.shape[-2]
    S = np.empty(q.shape[:-1] + (T,), dtype=np.result_type(q, k))
    kT = np.ascontiguousarray(np.swapaxes(k, -1, -2))
    for r0, r1 in _blocks(T):
        np.matmul(q[..., r0:r1, :], kT[..., :r1], out=S[..., r0:r1, :r1])
    return S


def _causal_apply(P, v, out):
    """out = P @ v for P (..., T, T) zero above the diagonal, v (..., T, d)."""
    for r0, r1 in _blocks(P.shape[-1]):
        np.matmul(P[..., r0:r1, :r1], v[..., :r1, :], out=out[..., r0:r1, :])
    return out


def _causal_apply_t(P, x, out):
    """out = P^T @ x for P (..., T, T) zero above the diagonal, x (..., T, d): column block [c0, c1) of P^T reads
    rows t >= c0 only."""
    for c0, c1 in _blocks(P.shape[-1]):
        np.matmul(np.swapaxes(P[..., c0:, c0:c1], -1, -2), x[..., c0:, :], out=out[..., c0:c1, :])
    return out


# The two forms below are also the bodies of ``minimal.kernel_attention.softmax_attention_parallel`` / ``_rnn``, which
# validate their arguments and pass their own ``scale``; this cell always uses scale = 1/sqrt(D_k).

def softmax_weights(q, k, scale, causal=True):
    """Transformer mode's weight matrix P = softmax_rows(scale q k^T + mask), the mask -inf for s > t.

    q: (B, T, D_k); k: (B, S, D_k) (S = T when causal); scale: a Python float (keeps float32 float32).
    Returns P: (B, T, S), each row a distribution, P_{t,s} = 0 for s > t when causal.
    """
    a = scale * (q @ k.transpose(0, 2, 1))  # (B, T, S)
    if causal:
        a = np.where(np.tri(a.shape[1], a.shape[2], dtype=bool), a, -np.inf)
    E = np.exp(a - a.max(axis=2, keepdims=True))  # the diagonal is never masked: the max is finite
    return E / E.sum(axis=2, keepdims=True)


def online_read(q_t, state, scale):
    """Online-softmax readout of the state (K, V) by the query q_t.

    q_t: (B, D_k); state: KVState with K (B, t, D_k), V (B, t, D_v); scale: a Python float.
    Returns o_t (B, D_v) and the weights p (B, t).
    """
    K, V = state
    a = scale * np.einsum("bk,bsk->bs", q_t, K)  # (B, t)
    B = q_t.shape[0]
    m = np.full((B, 1), -np.inf, dtype=a.dtype)
    n = np.zeros((B, V.shape[2]), dtype=np.result_type(a, V))
    z = np.zeros((B, 1), dtype=a.dtype)
    for s in range(K.shape[1]):
        m_new = np.maximum(m, a[:, s:s + 1])
        decay = np.exp(m - m_new)  # exp(-inf) = 0 at s = 0: the empty sums vanish
        w = np.exp(a[:, s:s + 1] - m_new)
        n = decay * n + w * V[:, s]
        z = decay * z + w
        m = m_new
    # The weights of the backward, exp(a_s - m_t) / z_t, from the final running max and denominator.
    return n / z, np.exp(a - m) / z


def step_forward(params, state, x_t, n_heads=1):
    """One RNN-mode step: append k_t, v_t to the state, then read it with q_t (each head on its own).

    Args:
        state: KVState after t-1 steps, or None before the first step.
        x_t: (B, D) input at step t; n_heads: as for ``forward``.
    Returns:
        (y_t, state): (B, D_out) output (D_v without W_O) and the KVState after t steps.
    """
    dtype = _check_params(params)
    x_t = check_dtype("x_t", check_array("x_t", x_t, (None, params["W_Q"].shape[1]), names=("B", "D")), dtype)
    q, k, v = _project(params, x_t)
    if state is None:
        state = KVState(k[:, None], v[:, None])
    else:
        check_array("state.K", state.K, (x_t.shape[0], None, k.shape[1]), names=("B", "t", "D_k"))
        check_array("state.V", state.V, (x_t.shape[0], state.K.shape[1], v.shape[1]), names=("B", "t", "D_v"))
        check_dtype("state.K", state.K, dtype)
        check_dtype("state.V", state.V, dtype)
        state = KVState(np.concatenate([state.K, k[:, None]], axis=1),
                        np.concatenate([state.V, v[:, None]], axis=1))
    h = _check_heads(n_heads, k.shape[1], v.shape[1])
    if h == 1:
        o, _ = online_read(q, state, 1.0 / math.sqrt(k.shape[1]))
    else:
        o, _ = online_read(_split(q[:, None], h)[:, 0], KVState(_split(state.K, h), _split(state.V, h)),
                     1.0 / math.sqrt(k.shape[1] // h))
        o = _merge(o[:, None], h)[:, 0]
    y_t = o @ params["W_O"].T if "W_O" in params else o
    given = {"x_t": x_t, **({} if state.K.shape[1] == 1 else {"state.K": state.K, "state.V": state.V}), **params}
    return check_finite_result("the scores q_t . k_s / sqrt(D_k) or the output y_t", y_t, given), state


def forward(params, x, mode=None, n_heads=1):
    """Causal softmax attention (multi-head with ``n_heads`` > 1: module docstring).

    Args:
        params: W_Q (D_k, D), W_K (D_k, D), W_V (D_v, D), optional W_O (D_out, D_v).
        x: (B, T, D) inputs, of the params' dtype (one dtype throughout: nothing is promoted).
        mode: "parallel" (masked T x T score matrix, row-wise stable softmax) or "sequential" (RNN mode, one
            step at a time, state = keys and values so far, online-softmax readout; see the module docstring);
            None: "parallel".
        n_heads: heads h (a positive int dividing D_k and D_v); 1: single-head attention.
    Returns:
        y: (B, T, D_out), or (B, T, D_v) without W_O; and the cache for ``backward`` (same for both modes).
    Raises:
        InputError: a bad argument, or x too large for its dtype (the scores q . k, a product of two
            projections of x, would be inf and the softmax NaN), naming x and the weights with their largest
            values.
    """
    dtype = _check_params(params)
    check_array("x", x, (None, None, params["W_Q"].shape[1]), names=("B", "T", "D"))
    if x.shape[1] < 1:
        raise ValueError(f"x must have at least one time step (axis 1), got shape {x.shape}")
    check_dtype("x", x, dtype)
    mode = choose("mode", mode, "softmax_attention.forward")
    h = _check_heads(n_heads, params["W_Q"].shape[0], params["W_V"].shape[0])
    q, k, v = _project_heads(params, x, h)                    # (B, h, T, d) each
    B, T = x.shape[:2]
    d_v = v.shape[3]
    scale = 1.0 / math.sqrt(k.shape[3])
    o = np.empty((B, T, h, d_v), dtype=np.result_type(q, v))  # the heads' outputs, written in place, merged
    if mode == "parallel":
        P4 = _causal_scores(q, k)                             # (B, h, T, T) scores, then P in place
        P = P4.reshape(B * h, T, T)                           # the same array, heads batch-major (Cache.P)
        _softmax_numba.causal_softmax_(P, scale)              # = softmax_weights(q, k, scale), one pass a row
        _causal_apply(P4, v, o.transpose(0, 2, 1, 3))
    else:
        # The state after step t is the prefix (k[:, :t+1], v[:, :t+1]); step_forward builds it by appending.
        q3, k3, v3 = (a.reshape(B * h, T, a.shape[3]) for a in (q, k, v))
        P = np.zeros((B * h, T, T), dtype=q.dtype)
        for t in range(T):
            o_t, P[:, t, :t + 1] = online_read(q3[:, t], KVState(k3[:, :t + 1], v3[:, :t + 1]), scale)
            o[:, t] = o_t.reshape(B, h, d_v)
    o = o.reshape(B, T, h * d_v)
    y = products.times_t(o, params["W_O"]) if "W_O" in params else o
    check_finite_result("the scores q_t . k_s / sqrt(D_k) or the output y", y, {"x": x, **params})
    return y, Cache(x, q, k, v, P, o, h)


def backward(params, cache, dy):
    """Gradients of ``forward`` (either mode; both leave the same cache).

    Args:
        cache: from ``forward``; dy: (B, T, D_out) dL/dy ((B, T, D_v) without W_O).
    Returns:
        dx (B, T, D) and grads with the keys of params.
    Raises:
        InputError: dy of the wrong shape, or too large for the dtype (a gradient would be inf), naming it.
    """
    x, q, k, v, P, o, h = cache
    B, T, D = x.shape
    d_k, d_v = q.shape[3], v.shape[3]
    grads = {}
    # 3. y = W_O o
    if "W_O" in params:
        check_array("dy", dy, o.shape[:2] + params["W_O"].shape[:1], names=("B", "T", "D_out"))
        check_grad_dtype("dy", dy, params)
        grads["W_O"] = products.sum_outer(dy, o)
        do = products.times(dy, params["W_O"])
    else:
        check_array("dy", dy, o.shape, names=("B", "T", "D_v"))
        check_grad_dtype("dy", dy, params)
        do = dy
    do = _heads_of(do, h)                                     # per head, (B, h, T, d_v)
    P = P.reshape(B, h, T, T)
    # 2. o = P v
    dP = _causal_scores(do, v)                                # dL/dP on and below the diagonal, (B, h, T, T)
    # 1. P = softmax(a) row-wise, a = q k^T / sqrt(d); masked entries have P = 0, so they get no gradient.
    _softmax_numba.causal_softmax_backward_(P.reshape(B * h, T, T), dP.reshape(B * h, T, T),
                                            1.0 / math.sqrt(d_k))            # dP <- dL/d(q k^T)
    # dq, dk, dv written per head in place into their columns of dcat = [dq dk dv] (B, T, h (2 d_k + d_v)), the
    # columns of [W_Q; W_K; W_V]'s rows, for one matmul each below
    dcat = np.empty((B, T, h * (2 * d_k + d_v)), q.dtype)
    _causal_apply(dP, k, _heads_of(dcat[:, :, :h * d_k], h))
    _causal_apply_t(dP, q, _heads_of(dcat[:, :, h * d_k:2 * h * d_k], h))
    _causal_apply_t(P, do, _heads_of(dcat[:, :, 2 * h * d_k:], h))
    dcat = dcat.reshape(B * T, h * (2 * d_k + d_v))
    # 0. [q k v] = x [W_Q; W_K; W_V]^T
    W = _stacked(params)                                      # (2 D_k + D_v, D)
    dW = products.sum_outer(dcat, x.reshape(B * T, D))
    D_k = params["W_Q"].shape[0]
    grads["W_Q"], grads["W_K"], grads["W_V"] = dW[:D_k], dW[D_k:2 * D_k], dW[2 * D_k:]
    dx = products.times(dcat, W).reshape(B, T, D)
    check_finite_result("the gradients", (dx, *grads.values()), {"dy": dy, "x": x, **params})
    return dx, {k_: grads[k_] for k_ in params}


def examples(rng):
    """Tiny float64 cases in both modes: T = 1, odd T, rectangular sizes with W_O, two heads."""
    out = []
    for mode in MODES:
        out.append(Example(f"{mode}-T1", init(rng, 3), rng.standard_normal((2, 1, 3)), {"mode": mode}))
        out.append(Example(f"{mode}-T5", init(rng, 3), rng.standard_normal((2, 5, 3)), {"mode": mode}))
        out.append(Example(f"{mode}-WO-T4", init(rng, 3, D_k=2, D_v=4, D_out=2, output_projection=True),
                           rng.standard_normal((1, 4, 3)), {"mode": mode}))
        out.append(Example(f"{mode}-2heads-WO-T5", init(rng, 3, D_k=4, D_v=6, D_out=2, output_projection=True),
                           rng.standard_normal((2, 5, 3)), {"mode": mode, "n_heads": 2}))
    return out
