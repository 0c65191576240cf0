"""Reverse-engineering a gated RNN trained on a linear self-attention teacher; Zucchet et al., "Gated
recurrent neural networks discover attention" (ICML 2024; arXiv 2309.01775), Sec. 3.1, Table 1, Fig. 2,
App. B.2.

The construction (Sec. 2, Fig. 1) has two kinds of recurrent neurons: key-value neurons with λ = 1 that
accumulate Σ_{t'<=t} v_t' k_t'^T, and query neurons with λ = 0 that hold q_t = W_Q x_t. A student has
identified the teacher when its neurons of each kind carry the same information:

    KV score = 1 − R^2 of the linear regression (with intercept) of the teacher's key-values
               M_t = Σ_{t'<=t} (W_V x_t')(W_K x_t')^T  (d^2 targets) on the states h_t of the λ ≈ 1 neurons
    Q score  = 1 − R^2 of the regression of the teacher's queries q_t = W_Q x_t (d targets) on the states of
               the λ ≈ 0 neurons
R^2 is averaged uniformly over the targets; every (b, t) of the given sequences is one sample. As in the
paper (Sec. 3.1: "linearly reconstruct the key-values from those 10 neurons ... the queries from the 4 query
neurons"), the regressors are the neurons that *survive pruning* (``kv_q_scores(..., neurons=pruned.hidden)``);
without ``neurons`` every λ ≈ 1 / λ ≈ 0 neuron of the network is used, dead ones included.

Pruning (App. B.2): a recurrent neuron is removable when its input gate is 0 (a zero row of W_in_m or of
W_in_x) or no remaining output gate reads it (zero columns of W_out_m and W_out_x); an output gate
(pre-readout neuron) when one of its rows of W_out_m, W_out_x is 0 or its readout column of D is. "Zero"
means below ``tol`` times the largest magnitude in that matrix. The two rules feed each other, so they are
applied until nothing changes.

Functional pruning (``prune_by_function``): "~0 weights" depends on a threshold per matrix, while a neuron's
effect on the output is a product of 4-5 weights. So we also remove neurons by what they do: every neuron
whose removal leaves the network as accurate as it already is (relative loss at most twice the trained
network's, i.e. the removed part is no larger than the fit's own error). That reads the paper's claim -- the
network needs only d(d+1)/2 key-value and d query neurons -- at the accuracy the network has reached.

Merged output gating (Fig. 2C): gate k computes the rank-1 bilinear form (a_k · h)(b_k · h), a_k = W_out_m[k],
b_k = W_out_x[k]; the readout sums them into one symmetric kernel per output,

    y_i = h^T K_i h,    K_i = Σ_k D[i, k] (a_k b_k^T + b_k a_k^T) / 2,

which no longer depends on how the products were split over gates. In the construction K_i only couples
key-value neurons with query neurons (its KV x KV and Q x Q blocks are 0).

Glossary: B batch, T time, d teacher features, H recurrent neurons, H_out output gates, D_out outputs.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..cells import gated_rnn
from ..tasks import lsa_teacher
from ..validate import check_array

__all__ = ["neuron_kinds", "one_minus_r2", "teacher_key_values", "teacher_queries", "Scores", "kv_q_scores",
           "Pruned", "prune", "prune_by_function", "Dimensions",
           "needed_dimensions", "pruned_relative_loss", "merged_kernel", "kernel_block_norms"]


def neuron_kinds(lam, lam_tol=0.05):
    """(H,) array of "kv" (λ >= 1 − lam_tol), "q" (λ <= lam_tol) or "other"."""
    check_array("lam", lam, ndim=1, names=("H",))
    if not 0.0 <= lam_tol < 0.5:
        raise ValueError(f"lam_tol must lie in [0, 0.5), got {lam_tol}")
    kinds = np.full(lam.shape, "other", dtype=object)
    kinds[lam >= 1.0 - lam_tol] = "kv"
    kinds[lam <= lam_tol] = "q"
    return kinds.astype(str)


def one_minus_r2(X, Y):
    """1 − R^2 of the least-squares fit Y ≈ X W + c, averaged over Y's columns.

    Args:
        X: (N, F) regressors (F may be 0: then the prediction is the mean and the score is 1).
        Y: (N, K) targets, none constant.
    Returns:
        float in [0, 1].
    """
    check_array("X", X, ndim=2, names=("N", "F"))
    check_array("Y", Y, (X.shape[0], None), names=("N", "K"))
    Yc = Y - Y.mean(axis=0)
    ss_tot = np.sum(Yc * Yc, axis=0)
    if np.any(ss_tot == 0):
        raise ValueError("Y has a constant column; its R^2 is undefined")
    if X.shape[1] == 0:
        return 1.0
    Xc = X - X.mean(axis=0)
    # Scale the regressors so that lstsq's rank cut-off treats neurons of very different sizes alike.
    scale = np.linalg.norm(Xc, axis=0)
    Xs = Xc[:, scale > 0] / scale[scale > 0]
    W = np.linalg.lstsq(Xs, Yc, rcond=None)[0]
    res = Yc - Xs @ W
    return float(np.mean(np.sum(res * res, axis=0) / ss_tot))


def teacher_key_values(teacher, x):
    """M_t = Σ_{t'<=t} v_t' k_t'^T, flattened: (B, T, d_v d_k) for x (B, T, d)."""
    check_array("x", x, (None, None, teacher.W_V.shape[1]), names=("B", "T", "d"))
    kv = np.einsum("btv,btk->btvk", x @ teacher.W_V.T, x @ teacher.W_K.T)
    return np.cumsum(kv, axis=1).reshape(x.shape[0], x.shape[1], -1)


def teacher_queries(teacher, x):
    """q_t = W_Q x_t: (B, T, d_k)."""
    check_array("x", x, (None, None, teacher.W_Q.shape[1]), names=("B", "T", "d"))
    return x @ teacher.W_Q.T


class Scores(NamedTuple):
    kv: float    # KV score, 1 − R^2 (0: the λ ≈ 1 neurons carry the teacher's key-values exactly)
    q: float     # Q score, 1 − R^2
    n_kv: int    # number of neurons used as regressors for each
    n_q: int


def kv_q_scores(params, teacher, x, lam=None, lam_tol=0.05, neurons=None):
    """KV and Q scores (module docstring) of a gated RNN student on the teacher's input sequences.

    Args:
        params: gated RNN params (``minimal.cells.gated_rnn``, diagonal) for inputs [x; 1].
        teacher: ``minimal.tasks.lsa_teacher.Teacher``.
        x: (B, T, d) teacher inputs (without the appended 1).
        lam: (H,) λ to use (default exp(−exp(ν))); lam_tol: as in ``neuron_kinds``.
        neurons: indices of the recurrent neurons that may serve as regressors (the paper's: those kept by
            ``prune``, ``Pruned.hidden``); None: all of them.
    Returns:
        ``Scores``.
    """
    check_array("x", x, (None, None, teacher.W_V.shape[1]), names=("B", "T", "d"))
    lam = gated_rnn.lam_from_nu(params["nu"]) if lam is None else lam
    _, cache = gated_rnn.forward(params, lsa_teacher.append_one(x), lam=lam)
    kinds = neuron_kinds(lam, lam_tol)
    if neurons is not None:
        neurons = np.asarray(neurons)
        if neurons.ndim != 1 or neurons.dtype.kind not in "iu" or np.any((neurons < 0) | (neurons >= lam.size)):
            raise ValueError(f"neurons must be a 1-d array of indices in [0, {lam.size}), got {neurons!r}")
        keep = np.zeros(lam.size, bool)
        keep[neurons] = True
        kinds = np.where(keep, kinds, "pruned")
    h = cache.h.reshape(-1, cache.h.shape[-1])
    kv_target = teacher_key_values(teacher, x).reshape(h.shape[0], -1)
    q_target = teacher_queries(teacher, x).reshape(h.shape[0], -1)
    return Scores(kv=one_minus_r2(h[:, kinds == "kv"], kv_target),
                  q=one_minus_r2(h[:, kinds == "q"], q_target),
                  n_kv=int(np.sum(kinds == "kv")), n_q=int(np.sum(kinds == "q")))


class Pruned(NamedTuple):
    params: dict          # the sub-network's params (same keys as the original)
    lam: np.ndarray       # (H_kept,) λ of the kept recurrent neurons
    hidden: np.ndarray    # (H_kept,) indices of the kept recurrent neurons
    gates: np.ndarray     # (H_out_kept,) indices of the kept output gates


def _nonzero_rows(W, tol):
    return np.max(np.abs(W), axis=1) > tol * max(float(np.max(np.abs(W))), 1e-300)


def prune(params, lam=None, tol=1e-3):
    """Remove the neurons whose input or output weights are all ~0 (module docstring).

    Args:
        params: gated RNN params with a diagonal recurrence ("nu").
        lam: (H,) λ (default exp(−exp(ν))), carried along for the kept neurons.
        tol: relative threshold in (0, 1).
    Returns:
        ``Pruned``; the removed counts are H − len(hidden) and H_out − len(gates).
    """
    if "nu" not in params:
        raise ValueError("params must be a diagonal gated RNN (key 'nu')")
    if not 0.0 < tol < 1.0:
        raise ValueError(f"tol must lie in (0, 1), got {tol}")
    lam = gated_rnn.lam_from_nu(params["nu"]) if lam is None else lam
    check_array("lam", lam, params["nu"].shape, names=("H",))
    W_out_m, W_out_x = params["W_out_m"], params["W_out_x"]
    hidden = _nonzero_rows(params["W_in_m"], tol) & _nonzero_rows(params["W_in_x"], tol)
    gates = (_nonzero_rows(W_out_m, tol) & _nonzero_rows(W_out_x, tol)
             & _nonzero_rows(params["D"].T, tol))
    read_m = np.abs(W_out_m) > tol * np.max(np.abs(W_out_m))   # (H_out, H): gate k reads neuron i
    read_x = np.abs(W_out_x) > tol * np.max(np.abs(W_out_x))
    while True:
        new_hidden = hidden & np.any((read_m | read_x)[gates], axis=0)
        # A gate whose factor only reads removed neurons outputs 0.
        new_gates = gates & np.any(read_m[:, new_hidden], axis=1) & np.any(read_x[:, new_hidden], axis=1)
        if np.array_equal(new_hidden, hidden) and np.array_equal(new_gates, gates):
            break
        hidden, gates = new_hidden, new_gates
    return _subnetwork(params, lam, np.flatnonzero(hidden), np.flatnonzero(gates))


def _subnetwork(params, lam, h_idx, g_idx):
    sub = {"W_in_m": params["W_in_m"][h_idx], "W_in_x": params["W_in_x"][h_idx], "nu": params["nu"][h_idx],
           "W_out_m": params["W_out_m"][np.ix_(g_idx, h_idx)],
           "W_out_x": params["W_out_x"][np.ix_(g_idx, h_idx)], "D": params["D"][:, g_idx]}
    return Pruned(sub, lam[h_idx], h_idx, g_idx)


def prune_by_function(params, x_tilde, y_star, lam=None, budget=2.0, floor=1e-20):
    """Remove every neuron the network's output does not need at the accuracy the network has reached.

    Criterion: with L0 the relative loss of the whole network on (x_tilde, y_star), the pruned network must
    keep L <= budget * max(L0, floor). With budget = 2 the removed neurons together change the output by
    about as much as the error the network already makes (errors add in mean square), so nothing that is
    distinguishable from the fit's own error is removed. ``floor`` is float64 rounding (a network that is
    exact, L0 = 0, may lose only neurons whose removal leaves it exact to rounding).

    Order: every neuron (recurrent neurons and output gates alike) is ablated alone (a recurrent neuron by
    zeroing its input gate, so h_i = 0; a gate by zeroing its readout column), then they are removed in
    order of increasing single-ablation loss, each kept out only if the criterion still holds; passes repeat
    until none is removed. Greedy, so the count is an upper bound on the smallest sub-network.

    Args:
        params: gated RNN params with a diagonal recurrence ("nu").
        x_tilde: (B, T, D_in) inputs; y_star: (B, T, D_out) targets.
        lam: (H,) λ (default exp(−exp(ν))); budget: >= 1; floor: > 0.
    Returns:
        ``Pruned``.
    """
    if "nu" not in params:
        raise ValueError("params must be a diagonal gated RNN (key 'nu')")
    if not budget >= 1.0:
        raise ValueError(f"budget must be >= 1 (the pruned loss may not be below the network's), got {budget}")
    if not floor > 0.0:
        raise ValueError(f"floor must be > 0, got {floor}")
    lam = gated_rnn.lam_from_nu(params["nu"]) if lam is None else lam
    check_array("lam", lam, params["nu"].shape, names=("H",))
    check_array("x_tilde", x_tilde, (None, None, params["W_in_m"].shape[1]), names=("B", "T", "D_in"))
    check_array("y_star", y_star, x_tilde.shape[:2] + (params["D"].shape[0],), names=("B", "T", "D_out"))
    H, H_out = params["W_in_m"].shape[0], params["D"].shape[1]
    # The states of a diagonal recurrence do not depend on one another, so removing neuron i only sets
    # h_i = 0: r = W_out_m h and s = W_out_x h lose the rank-1 terms W_out_m[:, i] h_i, W_out_x[:, i] h_i.
    # One forward pass then serves every trial removal.
    _, cache = gated_rnn.forward(params, x_tilde, lam=lam)
    h = cache.h.reshape(-1, H)
    y_flat = y_star.reshape(-1, y_star.shape[-1])
    var = float(np.var(y_star))
    A, Bm, D = params["W_out_m"], params["W_out_x"], params["D"]

    def without(r, s, i):
        """(r, s) after removing recurrent neuron i (i < H); a gate (i >= H) leaves them as they are."""
        if i >= H:
            return r, s
        return r - np.outer(h[:, i], A[:, i]), s - np.outer(h[:, i], Bm[:, i])

    def loss(r, s, gate_mask):
        err = (r * s) @ (D * gate_mask).T - y_flat
        return float(np.mean(err * err)) / var

    keep = np.ones(H + H_out, dtype=bool)       # recurrent neurons, then gates
    r, s = cache.r.reshape(-1, H_out), cache.s.reshape(-1, H_out)
    allowed = budget * max(loss(r, s, keep[H:]), floor)
    while True:
        alive = np.flatnonzero(keep)
        alone = []
        for i in alive:
            mask = keep[H:].copy()
            if i >= H:
                mask[i - H] = False
            alone.append(loss(*without(r, s, i), mask))
        removed = 0
        for i in alive[np.argsort(alone, kind="stable")]:
            keep[i] = False
            r_try, s_try = without(r, s, i)
            if loss(r_try, s_try, keep[H:]) <= allowed:
                r, s, removed = r_try, s_try, removed + 1
            else:
                keep[i] = True
        if removed == 0:
            break
    return _subnetwork(params, lam, np.flatnonzero(keep[:H]), np.flatnonzero(keep[H:]))


class Dimensions(NamedTuple):
    needed: int           # fewest principal directions of this kind's states that meet the budget
    losses: np.ndarray    # (n + 1,) relative loss with the states projected on their top r directions


def needed_dimensions(params, x_tilde, y_star, kind, lam=None, lam_tol=0.05, budget=2.0, floor=1e-20):
    """How many dimensions of the key-value (``kind="kv"``) or query (``"q"``) neurons' states the output
    needs: the states h_S of that kind (S, n neurons) are replaced by their projection on the top r right
    singular vectors of h_S over all (b, t) (uncentred: the layer has no biases), r = 0..n, and ``needed``
    is the smallest r with relative loss <= budget * max(L0, floor), L0 the network's own (the criterion of
    ``prune_by_function``). Neurons of one kind may spread r dimensions over more than r neurons, which
    pruning cannot undo; this count does not depend on how they are spread.

    Args:
        params: diagonal gated RNN params; x_tilde (B, T, D_in), y_star (B, T, D_out).
        kind: "kv" or "q"; lam: (H,) λ (default exp(−exp(ν))); lam_tol: as in ``neuron_kinds``.
    Returns:
        ``Dimensions``.
    """
    if kind not in ("kv", "q"):
        raise ValueError(f"kind must be 'kv' or 'q', got {kind!r}")
    if not budget >= 1.0:
        raise ValueError(f"budget must be >= 1 (the pruned loss may not be below the network's), got {budget}")
    lam = gated_rnn.lam_from_nu(params["nu"]) if lam is None else lam
    check_array("y_star", y_star, x_tilde.shape[:2] + (params["D"].shape[0],), names=("B", "T", "D_out"))
    _, cache = gated_rnn.forward(params, x_tilde, lam=lam)
    h = cache.h.reshape(-1, cache.h.shape[-1])
    y_flat, var = y_star.reshape(-1, y_star.shape[-1]), float(np.var(y_star))
    idx = np.flatnonzero(neuron_kinds(lam, lam_tol) == kind)

    def loss(states):
        err = ((states @ params["W_out_m"].T) * (states @ params["W_out_x"].T)) @ params["D"].T - y_flat
        return float(np.mean(err * err)) / var

    V = np.linalg.svd(h[:, idx], full_matrices=False)[2].T if idx.size else np.zeros((0, 0))
    losses = []
    for r in range(idx.size + 1):
        projected = h.copy()
        projected[:, idx] = h[:, idx] @ V[:, :r] @ V[:, :r].T
        losses.append(loss(projected))
    allowed = budget * max(loss(h), floor)
    needed = next(r for r, value in enumerate(losses) if value <= allowed or r == idx.size)
    return Dimensions(int(needed), np.array(losses))


def pruned_relative_loss(pruned, x_tilde, y_star):
    """mean (y − y*)^2 / var(y*) of the pruned network on inputs x̃ (B, T, d + 1), targets y* (B, T, d)."""
    y = gated_rnn.forward(pruned.params, x_tilde, lam=pruned.lam)[0]
    return lsa_teacher.relative_loss(y, y_star)


def merged_kernel(params):
    """K: (D_out, H, H), K_i = Σ_k D[i, k] (a_k b_k^T + b_k a_k^T) / 2, so that y_i = h^T K_i h."""
    for name in ("W_out_m", "W_out_x", "D"):
        check_array(name, params[name], ndim=2)
    A, Bm, D = params["W_out_m"], params["W_out_x"], params["D"]
    K = np.einsum("ik,ka,kb->iab", D, A, Bm)
    return 0.5 * (K + K.transpose(0, 2, 1))


def kernel_block_norms(K, kinds):
    """Frobenius norms of K's blocks over all outputs: {"kv-kv", "kv-q", "q-q", "other"} (sum of squares
    of the blocks equals ‖K‖^2). ``kinds``: (H,) from ``neuron_kinds``."""
    check_array("K", K, ndim=3, names=("D_out", "H", "H"))
    kv, q = np.asarray(kinds) == "kv", np.asarray(kinds) == "q"

    def block(r, c):
        return float(np.sum(K[:, r][:, :, c] ** 2))

    kvq = block(kv, q) + block(q, kv)
    parts = {"kv-kv": block(kv, kv), "kv-q": kvq, "q-q": block(q, q)}
    parts["other"] = max(float(np.sum(K ** 2)) - sum(parts.values()), 0.0)
    return {k: float(np.sqrt(v)) for k, v in parts.items()}
