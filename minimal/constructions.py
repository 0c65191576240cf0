"""Explicit weights with which recurrent networks compute causal linear self-attention, after Zucchet et al.,
"Gated recurrent neural networks discover attention" (ICML 2024; arXiv 2309.01775), Sec. 2 / Fig. 1 and
App. A.

The target is causal linear self-attention (Eq. 1, ``minimal.cells.lsa``):

    y_t = Σ_{t'<=t} v_t' k_t'^T q_t,    v = W_V x,  k = W_K x,  q = W_Q x.

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

3. LSTM, one layer (App. A.2; cf. Table 4, left), ``lsa_to_lstm``: forget gate f = σ(40) (= 1 in float64)
   keeps the cell c as a perfect memory, the input gate times the candidate writes key times value, the
   output gate reads the query. σ and tanh are made linear by a small input scale ε,
       σ(ε a) = 1/2 + ε a / 4 + O(ε^3),    tanh(ε a) = ε a + O(ε^3),
   and the constant 1/2 of every σ is removed by extra neurons whose gate is σ(0) = 1/2 exactly (the
   readout subtracts them). The readout multiplies by 16 / ε^3. Error to attention O(ε^2).

4. LRU, two layers (App. A.1), ``lsa_to_lru``: the output GLU (W_m z) ⊙ σ(W_x z) of layer 1 forms
   v_i σ(ε k_j); the recurrence of layer 2 (|λ| = 1 in float64) sums (4/ε)(v_i σ(ε k_j) − v_i/2) ≈ v_i k_j;
   the GLU of layer 2 forms q_j σ(ε KV_ij), and a linear readout takes (4/ε)(· − q_j/2) and sums over j.
   Error O(ε^2).

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

Table 3 of the paper lists the layers each architecture needs; built here: the gated RNN (1 layer, items 1-2),
the LSTM for linear self-attention (1 layer, item 3), the LRU for linear self-attention (2 layers, item 4) and,
against the table's "–", the GRU for linear self-attention (2 layers, item 5, ours).
Not built: the LSTM as a gated RNN of Eq. 2 (2 layers, Table 4 right), LRU In-Out (1 layer for both) and LRU
In-Skip (1 layer for attention, 2 for Eq. 2).

The LSTM and LRU weights are our own reading of App. A (the roles of the gates follow the paper; the
compensating 1/2-offset neurons and the exact readout scales are ours).

Glossary (shapes): B batch, T time, D input features, D_k key/query features, D_v value features.
    W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D)     x (B, T, D)     x̃ = append_one(x) (B, T, D + 1)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .cells import gated_rnn, gru, lru, lstm
from .validate import check_array

__all__ = ["append_one", "lsa_to_gated_rnn", "lsa_to_gated_rnn_compact", "gated_rnn_attention",
           "count_table", "n_params", "lsa_to_lstm", "lstm_attention", "lsa_to_lru", "lru_attention",
           "gru_running_sum", "gru_product_write", "gru_key_values", "lsa_to_gru", "gru_attention",
           "GRUConstruction", "convergence_rate", "GatedRNNConstruction", "LSTMConstruction",
           "LRUConstruction", "FORGET_BIAS", "LOG_ONE"]

FORGET_BIAS = 40.0  # σ(40) = 1 - 4e-18 rounds to 1.0 in float64: the LSTM forget gate is exactly 1
LOG_ONE = -50.0     # ν_log = θ_log = -50: |λ| = exp(-exp(-50)) = 1.0 and arg λ = 2e-22 in float64


class GatedRNNConstruction(NamedTuple):
    """Params in ``minimal.cells.gated_rnn``'s format and the λ to pass as ``lam=`` (exactly 0 or 1).

    ``params["nu"]`` is a finite placeholder: λ = exp(-exp(ν)) reaches 0 and 1 only at ν = ±inf.
    n_kv key-value neurons (λ = 1) come first, then n_q query neurons (λ = 0).
    """
    params: dict
    lam: np.ndarray
    n_kv: int
    n_q: int


class LSTMConstruction(NamedTuple):
    """One LSTM layer (``minimal.cells.lstm`` params) and the readout D_read (D_v, H): y = D_read h."""
    params: dict
    D_read: np.ndarray
    eps: float


class LRUConstruction(NamedTuple):
    """Two LRU blocks (``minimal.cells.lru``, variant "out") and the readout D_read: y = D_read y_2."""
    layer1: dict
    layer2: dict
    D_read: np.ndarray
    eps: float


# --- inputs -----------------------------------------------------------------------------------------------
def append_one(x):
    """x̃ = [x; 1]: (B, T, D) -> (B, T, D + 1), the constant input that stands in for biases."""
    check_array("x", x, ndim=3, names=("B", "T", "D"))
    return np.concatenate([x, np.ones(x.shape[:2] + (1,), dtype=x.dtype)], axis=-1)


def _check_attention(W_V, W_K, W_Q):
    """Validate W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D); return (D_v, D_k, D) and float64 copies."""
    check_array("W_V", W_V, ndim=2, names=("D_v", "D"))
    D_v, D = W_V.shape
    check_array("W_K", W_K, (None, D), names=("D_k", "D"))
    D_k = W_K.shape[0]
    check_array("W_Q", W_Q, (D_k, D), names=("D_k", "D"))
    return (D_v, D_k, D), tuple(np.asarray(W, dtype=np.float64) for W in (W_V, W_K, W_Q))


def _check_eps(eps):
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not 0.0 < eps <= 1.0:
        raise ValueError(f"eps (the linearisation scale) must be a number in (0, 1], got {eps!r}")
    return float(eps)


# --- 1. the gated RNN, Fig. 1 -----------------------------------------------------------------------------
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
    (D_v, D_k, D), (W_V, W_K, W_Q) = _check_attention(W_V, W_K, W_Q)
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
    (D_v, D_k, D), (W_V, W_K, W_Q) = _check_attention(W_V, W_K, W_Q)
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


def n_params(construction):
    """Total number of parameter entries (dense matrices) of a construction, readouts included."""
    if isinstance(construction, GatedRNNConstruction):
        arrays = list(construction.params.values())
    elif isinstance(construction, LSTMConstruction):
        arrays = list(construction.params.values()) + [construction.D_read]
    elif isinstance(construction, LRUConstruction):
        arrays = (list(construction.layer1.values()) + list(construction.layer2.values())
                  + [construction.D_read])
    elif isinstance(construction, GRUConstruction):
        arrays = list(construction.layer1.values()) + list(construction.layer2.values()) + [construction.R]
    else:
        raise ValueError(f"construction must be a GatedRNNConstruction, LSTMConstruction, LRUConstruction or "
                         f"GRUConstruction, got {type(construction).__name__}")
    return int(sum(a.size for a in arrays))


def count_table(ds, seed=0):
    """Neurons and parameters of the constructions against attention's 3 d^2, for each d in ``ds``.

    The gated RNN's parameter count is dense (O(d^4): the output gates W_out_m, W_out_x are d^2 x H); the
    "nonzero" columns count the entries the construction actually uses.

    Returns:
        list of dicts with keys d, attention_params, full_neurons, full_gates, full_params, full_nonzero,
        compact_neurons, compact_gates, compact_params, compact_nonzero.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for d in ds:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise ValueError(f"ds must hold integers >= 1, got {d!r}")
        d = int(d)
        W_V, W_K, W_Q = rng.standard_normal((3, d, d))
        row = {"d": d, "attention_params": 3 * d * d}
        for name, c in (("full", lsa_to_gated_rnn(W_V, W_K, W_Q)),
                        ("compact", lsa_to_gated_rnn_compact(W_V, W_K, W_Q))):
            row[f"{name}_neurons"] = c.n_kv + c.n_q
            row[f"{name}_gates"] = c.params["W_out_m"].shape[0]
            row[f"{name}_params"] = n_params(c)
            row[f"{name}_nonzero"] = int(sum(np.count_nonzero(p) for k, p in c.params.items() if k != "nu"))
        rows.append(row)
    return rows


# --- 3. LSTM, one layer -----------------------------------------------------------------------------------
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
    (D_v, D_k, D), (W_V, W_K, W_Q) = _check_attention(W_V, W_K, W_Q)
    eps = _check_eps(eps)
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


# --- 4. LRU, two layers -----------------------------------------------------------------------------------
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
    (D_v, D_k, D), (W_V, W_K, W_Q) = _check_attention(W_V, W_K, W_Q)
    eps = _check_eps(eps)
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


def lru_attention(construction, x, method="parallel"):
    """y = D_read LRU_2(LRU_1(x)): (B, T, D) -> (B, T, D_v). ``method`` is the complex scan's."""
    y1, _ = lru.forward(construction.layer1, x, variant="out", method=method)
    y2, _ = lru.forward(construction.layer2, y1, variant="out", method=method)
    return y2 @ construction.D_read.T


# --- 5. GRU: a perfect memory, but no multiplicative write --------------------------------------------------
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
    eps = _check_eps(eps)
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
    eps = _check_eps(eps)
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
    (d_v, d_k, D), (W_V, W_K, W_Q) = _check_attention(W_V, W_K, W_Q)
    eps = _check_eps(eps)
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


# --- measuring the linearisation ----------------------------------------------------------------------------
def convergence_rate(scales, errors):
    """Least-squares slope p of log(error) against log(scale): error ≈ C scale^p.

    Args:
        scales, errors: 1-d arrays of the same length (>= 2), all entries > 0.
    Returns:
        (p, C) as floats.
    """
    check_array("scales", scales, ndim=1)
    check_array("errors", errors, scales.shape, names=("n",))
    if scales.shape[0] < 2 or np.any(scales <= 0) or np.any(errors <= 0):
        raise ValueError("scales and errors must hold at least 2 entries, all > 0, "
                         f"got scales {scales} and errors {errors}")
    p, logC = np.polyfit(np.log(scales), np.log(errors), 1)
    return float(p), float(np.exp(logC))
