"""Measuring the constructions: their sizes against attention's (``n_params``, ``count_table``; Sec. 2.2) and the
rate at which a linearised one approaches attention (``convergence_rate``: error ≈ C ε^p).
"""
from __future__ import annotations

import numpy as np

from ..validate import check_array
from .lsa_as_gated_rnn import GatedRNNConstruction, lsa_to_gated_rnn, lsa_to_gated_rnn_compact
from .lsa_as_gru import GRUConstruction
from .lsa_as_lru import LRUConstruction
from .lsa_as_lstm import LSTMConstruction

__all__ = ["n_params", "count_table", "convergence_rate"]


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
