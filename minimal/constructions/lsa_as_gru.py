"""The GRU and linear self-attention (Eq. 1), Zucchet et al. (ICML 2024; arXiv 2309.01775), App. A.3: the
paper's "–" in Table 3, and a two-layer construction on the path the paper leaves out (ours).

5. GRU (App. A.3). The paper finds no construction ("–" in Table 3): a GRU layer holds a perfect memory (z = 1,
   r = λ = 1: with U_h = I the update is h_t = tanh(W_h x_t + h_{t-1}), a running sum once tanh is linearised;
   ``gru_running_sum``), but the product of two input-dependent factors, z_t ⊙ h̃_t, comes with the weight 1 − z_t
   on the previous state, which then varies with the input (``gru_product_write``, a unit with U = 0). That
   argument holds for a memory on the (1 − z_t) path. It leaves out the candidate's own path to h_{t-1}: with r = 1
   and U_h = I, h_t = (1 − z_t) h_{t-1} + z_t tanh(W_h x_t + h_{t-1}) ≈ h_{t-1} + z_t ⊙ (W_h x_t), a product written
   into a memory with dh_t/dh_{t-1} = 1 − z_t h̃_t² = 1 − O(ε²). On that path, ``lsa_to_gru`` (ours, not in the
   paper) builds two GRU layers that approach linear self-attention like ε² (``gru_attention``): layer 1 holds
   key-value accumulators A_ij (z = σ(ε k_j), candidate ε v_i), offset accumulators A'_ij (z = 1/2) and query units;
   layer 2 accumulates q_j gated by the key-values, with offset accumulators and one-step delays, and the readout
   takes (4/ε²)(C − C' − D + D'), the current term. See ``notebooks/zucchet_c_lstm_lru_gru.ipynb``.


Glossary (shapes): D input features, D_k key/query features, D_v value features, H GRU units, ε the input scale.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..cells import gru
from ..validate import check_array
from .common import FORGET_BIAS, check_attention, check_eps

__all__ = ["gru_running_sum", "gru_product_write", "gru_key_values", "GRUConstruction", "lsa_to_gru",
           "gru_attention"]


def _gru_params(D, W_h, U_h, b_z, b_r):
    params = {f"{m}_{g}": np.zeros((D, D)) for m in "WU" for g in gru.GATES}
    params |= {f"b_{g}": np.zeros(D) for g in gru.GATES}
    params["W_h"], params["U_h"], params["b_z"][:], params["b_r"][:] = W_h, U_h, b_z, b_r
    return params


def gru_running_sum(x, eps=1e-3):
    """A GRU layer as the λ = 1 memory of Eq. 2 (App. A.3: z = 1, r = λ = 1): an estimate of Σ_{t'<=t} x_t'.

    One unit per input feature with z = r = σ(40) (= 1 in float64), U_h = I and candidate input W_h = ε I:
    h_t = tanh(ε x_t + h_{t-1}), so h_t / ε = Σ_{t'<=t} x_t' up to the tanh's O(ε² (Σ x)²) relative error.

    Args:
        x: (B, T, D) inputs; eps in (0, 1] the candidate's input scale.
    Returns:
        (B, T, D) the estimates h_t / ε.
    """
    check_array("x", x, ndim=3, names=("B", "T", "D"))
    eps = check_eps(eps)
    D = x.shape[2]
    h, _ = gru.forward(_gru_params(D, eps * np.eye(D), np.eye(D), 40.0, 40.0), np.asarray(x, np.float64))
    return h / eps


def gru_product_write(x_t, w_m, w_x, h_prev):
    """App. A.3's obstacle: a product written by a GRU unit whose memory is the (1 − z_t) path.

    One unit (D inputs, H = 1) with update gate z_t = σ(w_m · x_t), a candidate tanh(w_x · x_t) (no reset path,
    U = 0, no biases): h_t = (1 − z_t) h_{t-1} + z_t tanh(w_x · x_t). The write z_t h̃_t is a product of the
    two branches, as (W_m x) ⊙ (W_x x) needs, but the previous state is kept with weight 1 − z_t, which depends
    on the input, where Eq. 2 has a constant λ. dh_t/dh_{t-1} = 1 − z_t is 1 (a perfect memory) only where
    z_t = 0, that is where nothing is written. (A unit with U_h = I keeps its memory through the candidate
    instead: ``gru_key_values``.)

    Args:
        x_t: (B, D) one step of inputs; w_m, w_x: (D,) the two branches; h_prev: (B, 1) previous state.
    Returns:
        (h_t (B, 1), dh_t/dh_{t-1} (B, 1)), the derivative from the GRU's own ``step_backward``.
    """
    check_array("x_t", x_t, ndim=2, names=("B", "D"))
    D = x_t.shape[1]
    check_array("w_m", w_m, (D,), names=("D",))
    check_array("w_x", w_x, (D,), names=("D",))
    check_array("h_prev", h_prev, (x_t.shape[0], 1), names=("B", "H=1"))
    params = {f"W_{g}": np.zeros((1, D)) for g in gru.GATES} | {f"U_{g}": np.zeros((1, 1)) for g in gru.GATES}
    params |= {f"b_{g}": np.zeros(1) for g in gru.GATES}
    params["W_z"], params["W_h"] = np.asarray(w_m, np.float64)[None], np.asarray(w_x, np.float64)[None]
    h_t, cache = gru.step_forward(params, np.asarray(x_t, np.float64), np.asarray(h_prev, np.float64))
    _, dh_prev, _ = gru.step_backward(params, cache, np.ones_like(h_t))
    return h_t, dh_prev


def _gru_zeros(D, H):
    """GRU params with every weight and bias 0 except b_r = FORGET_BIAS: r = 1, the whole previous state reaches
    the candidate."""
    params = {f"{m}_{g}": np.zeros((H, D) if m == "W" else (H, H)) for m in "WU" for g in gru.GATES}
    params |= {f"b_{g}": np.zeros(H) for g in gru.GATES}
    params["b_r"][:] = FORGET_BIAS
    return params


def gru_key_values(W_V, W_K, eps):
    """One GRU layer whose memory runs through the candidate (U_h = I, r = 1) and accumulates the key-values.

    Units A_ij (rows i d + j) with z = σ(ε k_j) and candidate input ε v_i, and offset units A'_ij (rows d² + ...)
    with z = σ(0) = 1/2 and the same candidate: h_A − h_A' ≈ (ε²/4) Σ_{t'<=t} v_i k_j, so
    4 (h_A − h_A') / ε² → the key-value sums as ε → 0 (relative error O(ε²)).

    Args:
        W_V (D_v, D), W_K (D_k, D); eps in (0, 1].
    Returns:
        ``minimal.cells.gru`` params with 2 D_v D_k units.
    """
    check_array("W_V", W_V, ndim=2, names=("D_v", "D"))
    check_array("W_K", W_K, (None, W_V.shape[1]), names=("D_k", "D"))
    (d_v, D), d_k = W_V.shape, W_K.shape[0]
    W_V, W_K = np.asarray(W_V, dtype=np.float64), np.asarray(W_K, dtype=np.float64)
    eps = check_eps(eps)
    n = d_v * d_k
    params = _gru_zeros(D, 2 * n)
    params["W_z"][:n] = eps * np.tile(W_K, (d_v, 1))                          # z = σ(ε k_j) on A_ij, 1/2 on A'_ij
    params["W_h"][:] = eps * np.tile(np.repeat(W_V, d_k, axis=0), (2, 1))     # candidate input ε v_i
    params["U_h"][:] = np.eye(2 * n)
    return params


class GRUConstruction(NamedTuple):
    layer1: dict          # ``minimal.cells.gru`` params, 2 D_v D_k + D_k units
    layer2: dict          # 4 D_v D_k units
    R: np.ndarray         # (D_v, 4 D_v D_k) readout
    eps: float


def lsa_to_gru(W_V, W_K, W_Q, eps=1e-3):
    """Two GRU layers and a readout that approach causal linear self-attention as ε -> 0 (ours; item 5 of the
    module docstring; relative error O(ε²)).

    Layer 1: ``gru_key_values`` (A_ij, A'_ij) and D_k query units (z = 1, U_h = 0, candidate input ε q_j, so they
    hold tanh(ε q_j)). Layer 2: accumulators C_ij with z = σ(4 (A_ij − A'_ij) / ε) = σ(ε KV̂_ij) and candidate input
    ε q_j (read from layer 1), offset accumulators C'_ij (z = 1/2), and one-step delays D_ij, D'_ij of both (z = 1,
    candidate tanh(C_{t-1})). Readout y_i = (4/ε²) Σ_j (C_ij − C'_ij − D_ij + D'_ij): the accumulators differ by
    (ε²/4) Σ_{s<=t} KV_ij,s q_j,s and the delays by the same sum up to t − 1, leaving KV_ij,t q_j,t.

    Args:
        W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D); eps in (0, 1].
    Returns:
        ``GRUConstruction``; ``gru_attention(construction, x)`` runs it.
    """
    (d_v, d_k, D), (W_V, W_K, W_Q) = check_attention(W_V, W_K, W_Q)
    eps = check_eps(eps)
    n = d_v * d_k
    kv = gru_key_values(W_V, W_K, eps)
    layer1 = _gru_zeros(D, 2 * n + d_k)
    layer1["W_z"][:2 * n], layer1["W_h"][:2 * n] = kv["W_z"], kv["W_h"]
    layer1["U_h"][:2 * n, :2 * n] = kv["U_h"]
    q1 = slice(2 * n, 2 * n + d_k)
    layer1["b_z"][q1], layer1["W_h"][q1] = FORGET_BIAS, eps * W_Q                # query units: z = 1, U_h = 0
    layer2 = _gru_zeros(2 * n + d_k, 4 * n)
    acc, acc_off, dly, dly_off = (slice(m * n, (m + 1) * n) for m in range(4))
    ij = np.arange(n)
    j_of = np.tile(np.arange(d_k), d_v)                                          # j of unit (i, j) = i d_k + j
    layer2["W_z"][acc.start + ij, ij] = 4 / eps                                  # ε KV̂ = 4 (A − A') / ε
    layer2["W_z"][acc.start + ij, n + ij] = -4 / eps
    for block in (acc, acc_off):
        layer2["W_h"][block.start + ij, 2 * n + j_of] = 1.0                      # ε q_j, held by layer 1
        layer2["U_h"][block, block] = np.eye(n)                                  # the accumulator's memory
    layer2["U_h"][dly, acc], layer2["U_h"][dly_off, acc_off] = np.eye(n), np.eye(n)   # D_t = tanh(C_{t-1})
    layer2["b_z"][dly], layer2["b_z"][dly_off] = FORGET_BIAS, FORGET_BIAS
    R = np.zeros((d_v, 4 * n))
    for block, sign in ((acc, 1), (acc_off, -1), (dly, -1), (dly_off, 1)):
        R[ij // d_k, block.start + ij] = sign * 4 / eps ** 2
    return GRUConstruction(layer1, layer2, R, eps)


def gru_attention(construction, x):
    """y = R h_2, h_2 = gru(layer2, gru(layer1, x)): (B, T, D) -> (B, T, D_v)."""
    h1, _ = gru.forward(construction.layer1, x)
    h2, _ = gru.forward(construction.layer2, h1)
    return h2 @ construction.R.T

