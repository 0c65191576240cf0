"""The trainable L-layer GRIL that contains multi-step GD (Tian et al., Sec. 4.3, App. A.3, B.4, Fig. 3A, Fig. 5);
``multistep`` trains it.

Every layer l = 1 .. L reads the same original windows C_k = [x_k, y_k, x_{k+1}] (w = 3, s = 2; the skip input of
Sec. 4.3) with two GRIL heads (Def. 4.2, ``minimal.cells.gril``), each with its own learned window mixing and
elementwise decay,

    Z_k^(l) = A_l ⊙ Z_{k-1}^(l) + C_k Q_l C_k^T,      Z̃_k^(l) = Ã_l ⊙ Z̃_{k-1}^(l) + C_k Q̃_l C_k^T,   (f, f)

and the readout of App. A.3 applies one step to the previous layer's predictor with a learned step c_l,

    W_0 = 0,    W_l = W_{l-1} - c_l (Z̃^(l) W_{l-1} - Z^(l)T),    ŷ = (W_L^T C_N q)[:n_o]           (f, f)

where Z, Z̃ are the states after the last window, C_N = [x_N, y_N, x_{N+1}] and q (3,) is a learned query read.
At Q_l = e_2 e_1^T (Z = Σ y x^T), Q̃_l = e_1 e_1^T (Z̃ = Σ x x^T = S), A = Ã = 1, c_l = η/N and q = e_3 this is
``gd_as_gril.multi_step_gd_forward``: W_l = W_{l-1} - (η/N)(S W_{l-1} - Σ x y^T) = W_{l-1} - η ∇L(W_{l-1}),
L GD steps (``construction``; tested against ``gril_gd.gd_predict(..., steps=L)``). Z^(l)T is the transpose
convention of ``gd_as_gril`` (GRIL's Q = e_2 e_1^T stores Σ y x^T; W is (inputs, outputs)). Layer 1's
Z̃ head multiplies W_0 = 0, so it is left out (it would only ever receive zero gradient).

The backward mirrors the forward in reverse: dW_L = r ⊗ dŷ, r = C_N q; then per layer, from L down to 1,

    dc_l = -<Z̃ W_{l-1} - Z^T, dW_l>,   dZ = c_l dW_l^T,   dZ̃ = -c_l dW_l W_{l-1}^T,   dW_{l-1} = dW_l - c_l Z̃^T dW_l,

and each head turns the gradient of its last state into dQ, dA and dC with ``gril.states_backward`` (the reverse-time
scan of the cell's unfused path, with dL/dZ zero before the last window; ``gril.backward`` takes output gradients,
not the state's). The heads' states come from ``gril.states``, the windows' gradients go back to the tokens through
``gril.window_backward``.

Trained heads are read in the construction's coordinates by ``gauge_fixed`` (Fig. 5): products of Q_l, Q̃_l, c_l
and q that the model's rescalings leave unchanged, in units of η/N.

Glossary: B tasks, N context pairs, f token size (= input size), n_o target size, L layers, T' = N windows,
η step size, c_l the learned step of layer l, S = Σ x x^T.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...cells import gril
from ...tasks import gril_regression
from ...validate import check_array, check_positive_int
from .model import CELL

__all__ = ["W_WIN", "STRIDE", "init_params", "construction", "Cache", "predict", "predict_backward",
           "loss_and_grads", "gauge_fixed"]

W_WIN, STRIDE = gril_regression.N_WINDOW, gril_regression.STRIDE   # 3, 2: windows [x_k, y_k, x_{k+1}]


def _names(l):
    """Parameter names of layer l (1-based): the Z head (Q_l, A_l), the Z̃ head (Q_tilde_l, A_tilde_l; l >= 2), c_l."""
    return [f"Q_{l}", f"A_{l}", f"c_{l}"] + ([f"Q_tilde_{l}", f"A_tilde_{l}"] if l > 1 else [])


def _layers(params):
    L = sum(1 for k in params if k.startswith("c_"))
    if L < 1 or set(params) != {"q"} | {n for l in range(1, L + 1) for n in _names(l)}:
        raise ValueError(f"params must hold q and, for l = 1 .. L, {_names(1)} (l = 1) and {_names(2)} "
                         f"(l >= 2), got {sorted(params)}")
    return L


def init_params(rng, f, L, c_init=0.01):
    """Random parameters of the L-layer model (the scale: ``multistep``'s docstring, "calibration").

    Returns:
        {q (3,), and per layer l: Q_l (3, 3), A_l (f, f), c_l (1,), and for l >= 2 Q_tilde_l (3, 3),
        A_tilde_l (f, f)}; Q, Q̃, q ~ N(0, 1/3), A, Ã ~ U(0.9, 1), c_l = c_init.
    """
    f, L = check_positive_int("f", f), check_positive_int("L", L)
    p = {"q": rng.standard_normal(W_WIN) / np.sqrt(W_WIN)}
    for l in range(1, L + 1):
        p[f"Q_{l}"] = rng.standard_normal((W_WIN, W_WIN)) / np.sqrt(W_WIN)
        p[f"A_{l}"] = rng.uniform(0.9, 1.0, (f, f))
        p[f"c_{l}"] = np.array([float(c_init)])
        if l > 1:
            p[f"Q_tilde_{l}"] = rng.standard_normal((W_WIN, W_WIN)) / np.sqrt(W_WIN)
            p[f"A_tilde_{l}"] = rng.uniform(0.9, 1.0, (f, f))
    return p


def construction(f, N, L, eta):
    """The App. A.3 point: Q_l = e_2 e_1^T, Q̃_l = e_1 e_1^T, A = Ã = 1, c_l = η/N, q = e_3 (= L GD steps of η)."""
    e = np.eye(W_WIN)
    p = {"q": e[2].copy()}
    for l in range(1, check_positive_int("L", L) + 1):
        p.update({f"Q_{l}": np.outer(e[1], e[0]), f"A_{l}": np.ones((f, f)), f"c_{l}": np.array([eta / N])})
        if l > 1:
            p.update({f"Q_tilde_{l}": np.outer(e[0], e[0]), f"A_tilde_{l}": np.ones((f, f))})
    return p


class Cache(NamedTuple):
    T: int
    n_out: int
    C: np.ndarray    # (B, T', f, 3) the original windows, read by every layer
    Z: dict          # head name ("Q_l" or "Q_tilde_l") -> (B, T', f, f) states
    W: list          # [W_0 = 0, W_1, ..., W_L], each (B, f, f)
    r: np.ndarray    # (B, f) the query read C_N q


def predict(params, tokens, n_out):
    """ŷ = (W_L^T C_N q)[:, :n_out] of the L-layer model, and the cache.

    Args:
        params: from ``init_params`` / ``construction``. tokens: (B, 2N + 1, f) (``gril_regression``).
    Returns:
        ŷ (B, n_out), Cache.
    """
    L = _layers(params)
    check_array("tokens", tokens, ndim=3, names=("B", "T", "f"))
    C = gril.window(tokens, W_WIN, STRIDE)                     # (B, N, f, 3)
    B, _, f, _ = C.shape
    Z = {}
    W = [np.zeros((B, f, f), dtype=np.result_type(tokens, params["q"]))]
    for l in range(1, L + 1):
        Z[f"Q_{l}"] = gril.states(params[f"Q_{l}"], params[f"A_{l}"], C, **CELL)
        step = -Z[f"Q_{l}"][:, -1].transpose(0, 2, 1)          # -Z^T (B, f, f)
        if l > 1:
            Z[f"Q_tilde_{l}"] = gril.states(params[f"Q_tilde_{l}"], params[f"A_tilde_{l}"], C, **CELL)
            step = step + Z[f"Q_tilde_{l}"][:, -1] @ W[-1]      # Z̃ W_{l-1} - Z^T
        W.append(W[-1] - params[f"c_{l}"][0] * step)
    r = C[:, -1] @ params["q"]                                  # (B, f) = C_N q
    y_hat = np.einsum("bij,bi->bj", W[-1], r)[:, :n_out]
    return y_hat, Cache(tokens.shape[1], n_out, C, Z, W, r)


def _last(G, C):
    """dL/dZ (B, T', f, f) of a head whose last state alone enters the loss, with gradient G (B, f, f)."""
    dZ = np.zeros(C.shape[:2] + G.shape[1:], dtype=G.dtype)
    dZ[:, -1] = G
    return dZ


def predict_backward(params, cache, dy_hat):
    """dtokens (B, T, f) and the gradients of every parameter, from dL/dŷ (B, n_out)."""
    L = _layers(params)
    C, Z, W, r = cache.C, cache.Z, cache.W, cache.r
    B, _, f, _ = C.shape
    check_array("dy_hat", dy_hat, (B, cache.n_out), names=("B", "n_out"))
    g = np.zeros((B, f), dtype=dy_hat.dtype)
    g[:, :cache.n_out] = dy_hat
    grads = {}
    dC = np.zeros_like(C)
    # 3. ŷ = W_L^T r, r = C_N q
    dW = r[:, :, None] * g[:, None, :]                          # (B, f, f)
    dr = np.einsum("bij,bj->bi", W[-1], g)
    grads["q"] = np.einsum("bfw,bf->w", C[:, -1], dr)
    dC[:, -1] += dr[:, :, None] * params["q"]
    # 2. W_l = W_{l-1} - c_l (Z̃ W_{l-1} - Z^T), from the last layer down
    for l in range(L, 0, -1):
        c = params[f"c_{l}"][0]
        Z_l = Z[f"Q_{l}"][:, -1]
        step = -Z_l.transpose(0, 2, 1)
        G = c * dW.transpose(0, 2, 1)                           # dL/dZ
        dQ, dA, dC_h = gril.states_backward(params[f"Q_{l}"], params[f"A_{l}"], C, Z[f"Q_{l}"], _last(G, C), **CELL)
        grads[f"Q_{l}"], grads[f"A_{l}"] = dQ, dA
        dC += dC_h
        dW_prev = dW
        if l > 1:
            Zt = Z[f"Q_tilde_{l}"][:, -1]
            step = step + Zt @ W[l - 1]
            G_t = -c * dW @ W[l - 1].transpose(0, 2, 1)         # dL/dZ̃
            dQ, dA, dC_h = gril.states_backward(params[f"Q_tilde_{l}"], params[f"A_tilde_{l}"], C, Z[f"Q_tilde_{l}"],
                                                _last(G_t, C), **CELL)
            grads[f"Q_tilde_{l}"], grads[f"A_tilde_{l}"] = dQ, dA
            dC += dC_h
            dW_prev = dW - c * Zt.transpose(0, 2, 1) @ dW
        grads[f"c_{l}"] = np.array([-np.sum(step * dW)])
        dW = dW_prev                                            # dL/dW_{l-1}; W_0 = 0 is a constant
    # 1. C = window(tokens)
    return gril.window_backward(dC, cache.T, W_WIN, STRIDE), grads


def loss_and_grads(params, tasks):
    """The query loss 1/2 mean (ŷ - y_{N+1})² on ``tasks`` (``gril_regression.Tasks``) and its gradients."""
    y = tasks.Y[:, -1]
    y_hat, cache = predict(params, tasks.tokens, y.shape[1])
    loss, dy = gril_regression.query_loss(y_hat, y)
    return loss, predict_backward(params, cache, dy)[1]


def gauge_fixed(params, L, N, eta):
    """Gauge-free views of the trained heads (Fig. 5): c_l q[2] Q_l and c_l Q̃_l over η/N (the construction's
    values are e_2 e_1^T and e_1 e_1^T), the layers' effective step sizes, and the decays' means.
    (Q_l, Q̃_l, c_l) -> (k Q_l, k Q̃_l, c_l / k), and q -> k q with every Z head divided by k, leave the model
    unchanged; these products do not move under either."""
    eta_N = eta / N
    out = {"q": np.asarray(params["q"]).tolist()}
    for l in range(1, L + 1):
        c = float(params[f"c_{l}"][0])
        out[f"c_{l}"] = c
        out[f"cqQ_{l}_over_eta_N"] = (c * params["q"][2] * params[f"Q_{l}"] / eta_N).tolist()
        # the layer's step sizes in the construction's coordinates (GD: both η): the Z head adds
        # N c_l q[2] Q_l[1, 0] · (X^T Y / N) to W, the Z̃ head subtracts N c_l Q̃_l[0, 0] · (S W_{l-1} / N)
        out[f"eta_Z_{l}"] = float(N * c * params["q"][2] * params[f"Q_{l}"][1, 0])
        out[f"A_{l}_mean"] = float(np.mean(params[f"A_{l}"]))
        if l > 1:
            out[f"cQ_tilde_{l}_over_eta_N"] = (c * params[f"Q_tilde_{l}"] / eta_N).tolist()
            out[f"eta_Z_tilde_{l}"] = float(N * c * params[f"Q_tilde_{l}"][0, 0])
            out[f"A_tilde_{l}_mean"] = float(np.mean(params[f"A_tilde_{l}"]))
    return out
