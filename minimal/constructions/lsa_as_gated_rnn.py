"""Causal linear self-attention (Eq. 1) computed exactly by the gated linear RNN of Eq. 2 (``minimal.cells.gated_rnn``),
Zucchet et al. (ICML 2024; arXiv 2309.01775), Sec. 2 / Fig. 1.

1. Gated linear RNN (Eq. 2, ``minimal.cells.gated_rnn``), Fig. 1, exact:
   ``lsa_to_gated_rnn``. The input x̃ = [x; 1] carries a constant 1 (``append_one``), since the layer has no
   biases and the query neurons need a *linear* input gate (W_Q x̃) ⊙ (e_1 · x̃) = q.
     key-value neurons (i, j), D_v D_k of them, λ = 1:   h_ij,t = h_ij,t-1 + v_i k_j  = (Σ_t' v k^T)_ij
     query neurons j, D_k of them, λ = 0:                h_j,t = q_j,t
     output gates (i, j), D_v D_k of them:               g_ij = h_ij · h_j        (W_out_m, W_out_x select)
     readout D (D_v, D_v D_k):                           y_i = Σ_j g_ij
   Hidden neurons d^2 + d and output gates d^2 for D_v = D_k = d.

2. Compact version, ``lsa_to_gated_rnn_compact`` (Sec. 2.2): when W_K = W_V the key-value matrix
   Σ v v^T is symmetric and d(d+1)/2 neurons (i <= j) hold it. For any W_K and an invertible W_V the same
   holds after moving W_K into the query, since v k^T q = v v^T (W_V^{-T} W_K^T W_Q x):
   W_Q' = W_V^{-T} W_K^T W_Q. Hidden neurons d(d+1)/2 + d; output gates stay d^2 (each stored S_ij, i < j,
   meets q'_j for y_i and q'_i for y_j).

Glossary (shapes): D input features, D_k key/query features, D_v value features, d = D_v = D_k; H hidden neurons,
H_out output gates. W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D); x (B, T, D); x̃ = append_one(x) (B, T, D + 1).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..cells import gated_rnn
from .common import append_one, check_attention

__all__ = ["GatedRNNConstruction", "lsa_to_gated_rnn", "lsa_to_gated_rnn_compact", "gated_rnn_attention"]


class GatedRNNConstruction(NamedTuple):
    """Params in ``minimal.cells.gated_rnn``'s format and the λ to pass as ``lam=`` (exactly 0 or 1).

    ``params["nu"]`` is a finite placeholder: λ = exp(-exp(ν)) reaches 0 and 1 only at ν = ±inf.
    n_kv key-value neurons (λ = 1) come first, then n_q query neurons (λ = 0).
    """
    params: dict
    lam: np.ndarray
    n_kv: int
    n_q: int


def _gated_rnn_params(W_kv_left, W_kv_right, W_query, pairs, D_v):
    """Shared builder: key-value neurons n store Σ (W_kv_left[a_n] x)(W_kv_right[b_n] x) with λ = 1, query
    neurons j hold (W_query[j] x) with λ = 0; ``pairs`` lists the output gates (n, j, i): stored neuron n
    times query j, summed into output i.
    """
    n_kv, D = W_kv_left.shape[0], W_kv_left.shape[1]
    n_q = W_query.shape[0]
    H, H_out = n_kv + n_q, len(pairs)
    W_in_m = np.zeros((H, D + 1))
    W_in_x = np.zeros((H, D + 1))
    W_in_m[:n_kv, :D], W_in_x[:n_kv, :D] = W_kv_left, W_kv_right
    W_in_m[n_kv:, :D] = W_query
    W_in_x[n_kv:, D] = 1.0                       # the appended constant: g_in = q ⊙ 1 = q
    W_out_m = np.zeros((H_out, H))
    W_out_x = np.zeros((H_out, H))
    D_read = np.zeros((D_v, H_out))
    for g, (n, j, i) in enumerate(pairs):
        W_out_m[g, n] = 1.0
        W_out_x[g, n_kv + j] = 1.0
        D_read[i, g] = 1.0
    params = {"W_in_m": W_in_m, "W_in_x": W_in_x, "nu": np.zeros(H), "W_out_m": W_out_m,
              "W_out_x": W_out_x, "D": D_read}
    lam = np.concatenate([np.ones(n_kv), np.zeros(n_q)])
    return GatedRNNConstruction(params, lam, n_kv, n_q)


def lsa_to_gated_rnn(W_V, W_K, W_Q):
    """The Fig. 1 construction: a gated RNN (Eq. 2) whose output is causal linear self-attention (Eq. 1).

    Args:
        W_V: (D_v, D); W_K: (D_k, D); W_Q: (D_k, D) attention weights.
    Returns:
        GatedRNNConstruction with params for ``gated_rnn.forward`` on D_in = D + 1 inputs (use
        ``append_one``), H = D_v D_k + D_k hidden neurons, H_out = D_v D_k output gates, D_out = D_v, and
        ``lam`` (H,) = [1]*D_v D_k + [0]*D_k. Neuron (i, j) is at index i D_k + j.
    """
    (D_v, D_k, D), (W_V, W_K, W_Q) = check_attention(W_V, W_K, W_Q)
    left = np.repeat(W_V, D_k, axis=0)           # row i D_k + j is W_V[i]
    right = np.tile(W_K, (D_v, 1))               # row i D_k + j is W_K[j]
    pairs = [(i * D_k + j, j, i) for i in range(D_v) for j in range(D_k)]
    return _gated_rnn_params(left, right, W_Q, pairs, D_v)


def lsa_to_gated_rnn_compact(W_V, W_K, W_Q, cond_max=1e8):
    """The compact construction with d(d+1)/2 key-value neurons (Sec. 2.2).

    Stores the symmetric S_t = Σ_{t'<=t} v_t' v_t'^T (entries i <= j) and uses the query
    q' = W_Q' x with W_Q' = W_V^{-T} W_K^T W_Q, so that S_t q'_t = Σ v k^T q. When W_K equals W_V,
    W_Q' = W_Q and W_V need not be invertible.

    Args:
        W_V: (d, D) and, unless W_K == W_V, square (d = D) and invertible (condition number <= cond_max);
        W_K: (d, D); W_Q: (d, D).
    Returns:
        GatedRNNConstruction: H = d(d+1)/2 + d hidden neurons, H_out = d^2 output gates, D_out = d.
    """
    (D_v, D_k, D), (W_V, W_K, W_Q) = check_attention(W_V, W_K, W_Q)
    if D_k != D_v:
        raise ValueError(f"W_K must have shape (D_v={D_v}, D) for the compact construction (keys and values "
                         f"share one space), got shape {W_K.shape}")
    if np.array_equal(W_K, W_V):
        W_Qp = W_Q
    else:
        if D_v != D or np.linalg.cond(W_V) > cond_max:
            raise ValueError(f"W_V must be square and invertible (condition number <= {cond_max:g}) when "
                             f"W_K != W_V, got shape {W_V.shape}"
                             + (f", condition number {np.linalg.cond(W_V):.3g}" if D_v == D else ""))
        W_Qp = np.linalg.solve(W_V.T, W_K.T @ W_Q)  # W_V^{-T} W_K^T W_Q
    d = D_v
    upper = [(i, j) for i in range(d) for j in range(i, d)]
    index = {ij: n for n, ij in enumerate(upper)}
    left = W_V[[i for i, _ in upper]]
    right = W_V[[j for _, j in upper]]
    # y_i = Σ_j S_ij q'_j and S_ij = S_ji is stored once, at (min, max).
    pairs = [(index[min(i, j), max(i, j)], j, i) for i in range(d) for j in range(d)]
    return _gated_rnn_params(left, right, W_Qp, pairs, d)


def gated_rnn_attention(construction, x, **kwargs):
    """Run a GatedRNNConstruction on x (B, T, D): gated_rnn.forward on append_one(x) with λ = lam.

    ``kwargs`` (method, backend) go to ``gated_rnn.forward``. Returns y (B, T, D_v).
    """
    y, _ = gated_rnn.forward(construction.params, append_one(x), lam=construction.lam, **kwargs)
    return y

