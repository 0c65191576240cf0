"""Causal linear self-attention (Eq. 1) approached by two LRU blocks (``minimal.cells.lru``, variant "out"),
Zucchet et al. (ICML 2024; arXiv 2309.01775), App. A.1.

4. LRU, two layers (App. A.1), ``lsa_to_lru``: the output GLU (W_m z) ⊙ σ(W_x z) of layer 1 forms
   v_i σ(ε k_j); the recurrence of layer 2 (|λ| = 1 in float64) sums (4/ε)(v_i σ(ε k_j) − v_i/2) ≈ v_i k_j;
   the GLU of layer 2 forms q_j σ(ε KV_ij), and a linear readout takes (4/ε)(· − q_j/2) and sums over j.
   Error O(ε^2).

The weights are our own reading of App. A.1 (the roles of the gates follow the paper; the compensating
1/2-offset neurons and the exact readout scales are ours).

Glossary (shapes): D input features, D_k key/query features, D_v value features, N complex states, H block width,
ε the input scale of the sigmoid branch.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..cells import lru
from ..conventions import renamed_keywords
from .common import check_attention, check_eps

__all__ = ["LRUConstruction", "lsa_to_lru", "lru_attention", "LOG_ONE"]

LOG_ONE = -50.0     # ν_log = θ_log = -50: |λ| = exp(-exp(-50)) = 1.0 and arg λ = 2e-22 in float64


class LRUConstruction(NamedTuple):
    """Two LRU blocks (``minimal.cells.lru``, variant "out") and the readout D_read: y = D_read y_2."""
    layer1: dict
    layer2: dict
    D_read: np.ndarray
    eps: float


def _lru_block(N, H, D_out):
    """An LRU block ("out" variant) with every weight zero and |λ| = 1 (ν_log = θ_log = LOG_ONE)."""
    return {"nu_log": np.full(N, LOG_ONE), "theta_log": np.full(N, LOG_ONE), "gamma_log": np.zeros(N),
            "B_re": np.zeros((N, H)), "B_im": np.zeros((N, H)), "C_re": np.zeros((H, N)),
            "C_im": np.zeros((H, N)), "D": np.zeros(H), "W_out_m": np.zeros((D_out, H)),
            "W_out_x": np.zeros((D_out, H))}


def lsa_to_lru(W_V, W_K, W_Q, eps):
    """Two LRU blocks (variant "out": LRU then GLU) and a linear readout that approach causal linear
    self-attention as eps -> 0.

    Layer 1 (width D, no recurrence: B = 0, D = 1 so z = x); its GLU outputs, in this order,
        P_ij = v_i σ(ε k_j)  (D_v D_k),   M_i = v_i σ(0) = v_i / 2  (D_v),   Q_j = q_j / 2  (D_k).
    Layer 2 (width D_v D_k + D_v + D_k, N = D_v D_k states with |λ| = 1, real B and C):
        h_ij,t = h_ij,t-1 + (4/ε)(P_ij − M_i),   z = [h_ij ; 0 ; 2 Q_j] = [KV_ij ; 0 ; q_j]  (C and D)
        GLU: G_ij = q_j σ(ε KV_ij)  (D_v D_k),   G'_j = q_j / 2  (D_k).
    Readout: y_i = (4/ε) Σ_j (G_ij − G'_j) = Σ_j KV_ij q_j (1 + O(ε^2)).

    Returns:
        LRUConstruction with layer1, layer2 (``lru.forward(..., variant="out")`` params) and D_read
        (D_v, D_v D_k + D_k).
    """
    (D_v, D_k, D), (W_V, W_K, W_Q) = check_attention(W_V, W_K, W_Q)
    eps = check_eps(eps)
    n = D_v * D_k
    P, M, Q = slice(0, n), slice(n, n + D_v), slice(n + D_v, n + D_v + D_k)
    H2 = n + D_v + D_k
    layer1 = _lru_block(1, D, H2)
    layer1["D"][:] = 1.0                          # z = Re(C h) + D ⊙ x = x, since B = C = 0
    layer1["W_out_m"][P] = np.repeat(W_V, D_k, axis=0)
    layer1["W_out_x"][P] = eps * np.tile(W_K, (D_v, 1))
    layer1["W_out_m"][M] = W_V
    layer1["W_out_m"][Q] = W_Q
    layer2 = _lru_block(n, H2, n + D_k)
    for i in range(D_v):
        for j in range(D_k):
            ij = i * D_k + j
            layer2["B_re"][ij, ij] = 4.0 / eps
            layer2["B_re"][ij, M.start + i] = -4.0 / eps
            layer2["C_re"][ij, ij] = 1.0
    layer2["D"][Q] = 2.0                          # the query passes through the skip term D ⊙ u
    for i in range(D_v):
        for j in range(D_k):
            layer2["W_out_m"][i * D_k + j, Q.start + j] = 1.0   # gate ij reads q_j
    for j in range(D_k):
        layer2["W_out_m"][n + j, Q.start + j] = 1.0
    layer2["W_out_x"][:n, :n] = eps * np.eye(n)
    D_read = np.zeros((D_v, n + D_k))
    for i in range(D_v):
        D_read[i, i * D_k:(i + 1) * D_k] = 4.0 / eps
        D_read[i, n:] = -4.0 / eps
    return LRUConstruction(layer1, layer2, D_read, eps)


@renamed_keywords(method="the parallel/sequential choice of lru.forward is `mode` (mode='parallel' or 'sequential')")
def lru_attention(construction, x, mode=None):
    """y = D_read LRU_2(LRU_1(x)): (B, T, D) -> (B, T, D_v). ``mode`` is ``lru.forward``'s (None: "parallel")."""
    y1, _ = lru.forward(construction.layer1, x, variant="out", mode=mode)
    y2, _ = lru.forward(construction.layer2, y1, variant="out", mode=mode)
    return y2 @ construction.D_read.T
