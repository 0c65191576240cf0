"""Explicit weights with which one network computes another: linear self-attention inside recurrent networks
(Zucchet et al., "Gated recurrent neural networks discover attention", ICML 2024; arXiv 2309.01775, Sec. 2 /
Fig. 1 and App. A) and gradient descent in context inside GRIL (Tian et al., arXiv:2410.11687, Sec. 4, App. A).

Zucchet et al.'s target is causal linear self-attention (Eq. 1, ``minimal.cells.lsa``):

    y_t = Σ_{t'<=t} v_t' k_t'^T q_t,    v = W_V x,  k = W_K x,  q = W_Q x.

One module per network, named for what it holds (``lsa_as_<cell>``: attention built from the cell of
``minimal.cells.<cell>``), each with the derivation its weights follow:

    lsa_as_gated_rnn  1. the gated linear RNN of Eq. 2, Fig. 1, exact (``lsa_to_gated_rnn``: d^2 + d neurons) and
                      2. its compact form, Sec. 2.2 (``lsa_to_gated_rnn_compact``: d(d+1)/2 + d neurons)
    lsa_as_lstm       3. one LSTM layer, App. A.2 (``lsa_to_lstm``), error O(ε^2)
    lsa_as_lru        4. two LRU blocks, App. A.1 (``lsa_to_lru``), error O(ε^2)
    lsa_as_gru        5. the GRU, App. A.3: the paper's obstacle (``gru_running_sum``, ``gru_product_write``) and
                      our two-layer construction on the path it leaves out (``lsa_to_gru``), error O(ε^2)
    measure           sizes against attention's (``n_params``, ``count_table``) and ``convergence_rate``
    common            ``append_one`` (x̃ = [x; 1]), the argument checks, ``FORGET_BIAS``
    gd_as_gril        Tian et al.'s GRIL weights for one-step, multi-step, L2 and cross-entropy GD (App. A)

Each name has one address, its module: ``from minimal.constructions import lsa_as_lstm; lsa_as_lstm.lsa_to_lstm``.

Table 3 of the paper lists the layers each architecture needs; built here: the gated RNN (1 layer, items 1-2),
the LSTM for linear self-attention (1 layer, item 3), the LRU for linear self-attention (2 layers, item 4) and,
against the table's "–", the GRU for linear self-attention (2 layers, item 5, ours).
Not built: the LSTM as a gated RNN of Eq. 2 (2 layers, Table 4 right), LRU In-Out (1 layer for both) and LRU
In-Skip (1 layer for attention, 2 for Eq. 2).

Glossary (shapes): B batch, T time, D input features, D_k key/query features, D_v value features.
    W_V (D_v, D), W_K (D_k, D), W_Q (D_k, D)     x (B, T, D)     x̃ = append_one(x) (B, T, D + 1)
"""
