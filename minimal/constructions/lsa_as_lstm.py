"""Causal linear self-attention (Eq. 1) approached by one LSTM layer (``minimal.cells.lstm``), Zucchet et al.
(ICML 2024; arXiv 2309.01775), App. A.2; cf. Table 4, left.

3. LSTM, one layer (App. A.2; cf. Table 4, left), ``lsa_to_lstm``: forget gate f = σ(40) (= 1 in float64)
   keeps the cell c as a perfect memory, the input gate times the candidate writes key times value, the
   output gate reads the query. σ and tanh are made linear by a small input scale ε,
       σ(ε a) = 1/2 + ε a / 4 + O(ε^3),    tanh(ε a) = ε a + O(ε^3),
   and the constant 1/2 of every σ is removed by extra neurons whose gate is σ(0) = 1/2 exactly (the
   readout subtracts them). The readout multiplies by 16 / ε^3. Error to attention O(ε^2).

The weights are our own reading of App. A.2 (the roles of the gates follow the paper; the compensating
1/2-offset neurons and the exact readout scale are ours).

Glossary (shapes): D input features, D_k key/query features, D_v value features, H LSTM units, ε the input scale.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..cells import lstm
from .common import FORGET_BIAS, check_attention, check_eps

__all__ = ["LSTMConstruction", "lsa_to_lstm", "lstm_attention"]


class LSTMConstruction(NamedTuple):
    """One LSTM layer (``minimal.cells.lstm`` params) and the readout D_read (D_v, H): y = D_read h."""
    params: dict
    D_read: np.ndarray
    eps: float


def lsa_to_lstm(W_V, W_K, W_Q, eps):
    """One LSTM layer and a linear readout that approach causal linear self-attention as eps -> 0.

    Neurons (all with forget gate f = σ(FORGET_BIAS) = 1 and U = 0, so c_t = c_{t-1} + i_t c̃_t):
        A_ij   i = σ(ε k_j), c̃ = tanh(ε v_i), o = σ(ε q_j)      D_v D_k neurons
        A'_ij  as A_ij with o = σ(0) = 1/2                       D_v D_k
        C_ij   i = σ(0) = 1/2, c̃ = tanh(ε v_i), o = σ(ε q_j)   D_v D_k
        C'_i   i = 1/2, c̃ = tanh(ε v_i), o = 1/2                D_v
    With s_j = σ(ε q_j) − 1/2, a readout y_i = (16/ε^3) Σ_j (h_A − h_A' − h_C + h_C') equals
    (16/ε^3) Σ_j s_j (tanh c_A,ij − tanh c_C,i), and c_A,ij − c_C,i = Σ_t' tanh(ε v_i)(σ(ε k_j) − 1/2):
    every σ offset cancels exactly, the rest is (ε^2/4) Σ v_i k_j (1 + O(ε^2)).

    Args:
        W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D); eps in (0, 1].
    Returns:
        LSTMConstruction: params for ``lstm.forward`` (D inputs, H = 3 D_v D_k + D_v, with biases) and
        D_read (D_v, H).
    """
    (D_v, D_k, D), (W_V, W_K, W_Q) = check_attention(W_V, W_K, W_Q)
    eps = check_eps(eps)
    n = D_v * D_k
    H = 3 * n + D_v
    A, Ap, C, Cp = slice(0, n), slice(n, 2 * n), slice(2 * n, 3 * n), slice(3 * n, H)
    V_rep = np.repeat(W_V, D_k, axis=0)          # row i D_k + j is W_V[i]
    K_rep = np.tile(W_K, (D_v, 1))               # row i D_k + j is W_K[j]
    Q_rep = np.tile(W_Q, (D_v, 1))
    params = {f"{m}_{g}": np.zeros((H, D) if m == "W" else (H, H)) for m in "WU" for g in lstm.GATES}
    params |= {f"b_{g}": np.zeros(H) for g in lstm.GATES}
    params["b_f"][:] = FORGET_BIAS
    params["W_i"][A] = params["W_i"][Ap] = eps * K_rep
    params["W_c"][A] = params["W_c"][Ap] = params["W_c"][C] = eps * V_rep
    params["W_c"][Cp] = eps * W_V
    params["W_o"][A] = params["W_o"][C] = eps * Q_rep
    D_read = np.zeros((D_v, H))
    scale = 16.0 / eps ** 3
    for i in range(D_v):
        ij = np.arange(i * D_k, (i + 1) * D_k)    # the neurons (i, j) for every j
        D_read[i, A.start + ij] = scale
        D_read[i, Ap.start + ij] = -scale
        D_read[i, C.start + ij] = -scale
        D_read[i, Cp.start + i] = scale * D_k     # C'_i appears once for each of the D_k queries
    return LSTMConstruction(params, D_read, eps)


def lstm_attention(construction, x):
    """y = D_read h for h = lstm.forward(params, x): (B, T, D) -> (B, T, D_v)."""
    h, _ = lstm.forward(construction.params, x)
    return h @ construction.D_read.T
