"""Explicit GRIL weights that compute gradient descent in context, after Tian et al., "Learning in the Recurrent
State: Gradient Descent with Linear Recurrent Networks" (arXiv:2410.11687), Sec. 4.1-4.4 and App. A.1-A.6.

The block (Def. 4.2, ``minimal.cells.gril``): windows C_t (f, w) of the tokens with stride s,

    Z_t = A ⊙ Z_{t-1} + C_t Q C_t^T,      o_t = β ⊙ (Z_t C_t q).

The tokens (``minimal.tasks.gril_regression``) interleave x_1, y_1, ..., x_N, y_N, x_{N+1}, targets zero-padded
to size f in their first n_o slots; w = 3 and s = 2 give the windows C_t = [x_t, y_t, x_{t+1}] (Eq. 9), the last
one [x_N, y_N, x_{N+1}] holding the query. ``minimal.analysis.gril_gd`` holds the GD references.

1. One GD step (Prop. 4.1, Eq. 7-10, App. A.2), ``one_step_gd``: Q = e_2 e_1^T, so C_t Q C_t^T = y_t x_t^T and

       Z_t = Σ_{i<=t} y_i x_i^T   (f, f) = -N ∇L(0)^T (rows: outputs, columns: inputs),

   q = e_3 reads the next input, A = 1 (no decay), β = η/N:  o_N = (η/N) Σ_i y_i x_i^T x_{N+1} = W_1^T x_{N+1},
   the GD prediction, in the first n_o entries of o (the padding rows of Z are zero).
2. The scalar warm-up (Sec. 4.1, Eq. 4-6; App. A.1, Eq. 12-14), ``scalar_ssm_forward``: a vector SSM on the
   constructed contexts c_t = [x_t y_t, x_{t+1}] (2f) with z_t = z_{t-1} + Ψ c_t, o_t = β z_t^T Θ c_t,
   Ψ = [I 0], Θ = [0 I]. Then z_t = Σ_i x_i y_i, and o_N is one GD step for β = +η/N (App. A.1 writes β = -η/N,
   which belongs to a state holding the gradient Σ (w_0^T x - y) x = -Σ x y of Eq. 5 instead).
3. Multi-step GD (Sec. 4.3, Prop. A.1, App. A.3), ``multi_step_gd_forward``: layer l has two heads on the same
   original windows (the skip input), Z (Q = e_2 e_1^T: Σ y x^T) and Z̃ (Q̃ = e_1 e_1^T: Σ x x^T = S), and the
   readout applies one step to the previous layer's predictor,

       W_l = W_{l-1} + Δ_l W,   Δ_l W = -(η/N) (Z̃ W_{l-1} - Z^T + 2 N l2 W_{l-1}),   o^(l) = W_l^T x_{N+1},

   since N ∇L(W) = S W - Σ x y^T + 2 N l2 W. With GRIL's Q = e_2 e_1^T the state is Z = Σ y x^T (n_o x f
   block, outputs first), so the readout needs Z^T = Σ x y^T (f x n_o, W's layout); the paper's "(note the
   transpose)" in App. A.3 is this: Q = e_1 e_2^T would store Σ x y^T and make its formula literal. App. A.5's
   "+ W_{l-1}" inside -(η/N)(...) is the case 2 N l2 = 1, i.e. the penalty (1/(2N)) ||W||², not the ||W||²
   written in its loss (whose gradient 2W would need + 2 N W_{l-1}).
4. Cross-entropy (Sec. 4.4, Eq. 11, Prop. 4.3, App. A.6), ``ce_accumulate``: the window [φ_t, r_t, φ_{t+1}]
   with the error r_t = p_t - y_t (K <= d entries, padded), Q = e_2 e_1^T, accumulates Z = Σ r_t φ_t^T (K x d),
   the transpose of App. A.6's Σ φ (p - y)^T, i.e. the summed CE gradient in Sec. 4.4's (K, d) layout. The
   state now holds +∇ (the window carries the residual, not the target), so β = -η: o = -η Z φ_{N+1} is the
   change of the query logits after one step of size η on the summed loss (Prop. 4.3's -η/t is the mean loss).

5. Two attention layers (not in the paper: the baseline of ``experiments.gril.comparison``), ``attention_gd``: the
   comparison's ``lsa_2`` stack (linear embedding, learned positions, x + LSA(x), LSA, linear readout) at width
   d = 2f + T, T = 2N + 1, computes one GD step exactly. The embedding puts the token in slots [0, f) and the
   positions one-hot in [2f, 2f + T); the first layer's query at a y token (odd t) is the previous position,
   its key the position and its value the token moved to slots [f, 2f): each y_i token now also holds x_i. The
   second layer scores s against the query token by (slots [f, 2f) of s) . x_{N+1} = x_i . x_{N+1} at y tokens
   and 0 elsewhere, with values (η/N) y_i: o_N = (η/N) Σ_i y_i x_i^T x_{N+1}, the GD prediction.

Glossary: B tasks, N context pairs, f token size (= input size), n_o target size, d feature size, K logits,
L layers, η (eta) step size, l2 the L2 penalty weight; e_j the j-th unit vector of R^3 (window column j).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..cells import gril
from ..tasks import gril_regression
from ..validate import InputError, check_array, check_positive_int

__all__ = ["GRILConstruction", "MultiStepGD", "CEAccumulation", "one_step_gd", "gril_predict", "scalar_context",
           "scalar_maps", "scalar_ssm_forward", "gd_heads", "multi_step_gd_forward", "ce_gd", "ce_accumulate",
           "n_params", "attention_gd", "attention_gd_spec", "WINDOW", "STRIDE"]

WINDOW, STRIDE = gril_regression.N_WINDOW, gril_regression.STRIDE  # 3, 2: the window [x_t, y_t, x_{t+1}]


class GRILConstruction(NamedTuple):
    """``minimal.cells.gril`` params, the stride to run them with, and how many output entries are read."""
    params: dict   # Q (3, 3), q (3,), beta (1,), A (f, f)
    s: int         # stride 2
    n_out: int     # the prediction is o[:, -1, :n_out]


class MultiStepGD(NamedTuple):
    """``multi_step_gd_forward``'s result."""
    y_hat: np.ndarray    # (B, n_o)  o^(L) = W_L^T x_{N+1}
    W: list              # [W_1, ..., W_L], each (B, f, n_o)
    Z: np.ndarray        # (B, f, f) Σ y x^T, the Z head's state after the last window (equal in every layer)
    Z_tilde: np.ndarray  # (B, f, f) Σ x x^T, the Z̃ head's state


class CEAccumulation(NamedTuple):
    """``ce_accumulate``'s result."""
    Z: np.ndarray       # (B, K, d) Σ_t r_t φ_t^T, the state's K non-padding rows after the last window
    logits: np.ndarray  # (B, K) o = -η Z φ_{N+1}, the readout of the last window


def _eta(eta):
    ok = isinstance(eta, (int, float, np.integer, np.floating)) and not isinstance(eta, bool)
    if not (ok and math.isfinite(eta)):
        raise InputError(f"eta must be a finite number, got {eta!r}")
    return float(eta)


def _unit(j, w=WINDOW):
    e = np.zeros(w)
    e[j] = 1.0
    return e


def _params(f, Q, beta):
    return {"Q": Q, "q": _unit(2), "beta": np.array([beta]), "A": np.ones((f, f))}


# --------------------------------------------------------------------------------- 1. one GD step
def one_step_gd(f, N, eta, n_out=None):
    """Prop. 4.1 / App. A.2: Q = e_2 e_1^T, q = e_3, A = 1 (f, f), β = η/N.

    Args:
        f: token size; N: context pairs (β's 1/N); eta: step size η of Eq. 4; n_out: target size n_o <= f
        (default f).
    Returns:
        GRILConstruction; ``gril_predict`` on ``gril_regression`` tokens gives ``gril_gd.gd_predict(X, Y, eta)``.
    """
    f, N = check_positive_int("f", f), check_positive_int("N", N)
    n_out = f if n_out is None else check_positive_int("n_out", n_out)
    if n_out > f:
        raise InputError(f"n_out must be <= f = {f}, got {n_out}")
    return GRILConstruction(_params(f, np.outer(_unit(1), _unit(0)), _eta(eta) / N), STRIDE, n_out)


def gril_predict(construction, tokens, **kwargs):
    """Run the block on tokens (B, 2N + 1, f) and read the last window's first n_out entries, (B, n_out).

    ``kwargs`` (mode, method, backend, kernel) go to ``gril.forward``.
    """
    o, _ = gril.forward(construction.params, tokens, s=construction.s, **kwargs)
    return o[:, -1, :construction.n_out]


# --------------------------------------------------------------------------------- 2. the scalar warm-up
def _scalar_task(X, Y):
    check_array("X", X, ndim=3, names=("B", "N+1", "f"))
    B, N1, f = X.shape
    check_array("Y", Y, ndim=3, names=("B", "N", "1"))
    if N1 < 2 or Y.shape[0] != B or Y.shape[1] not in (N1 - 1, N1) or Y.shape[2] != 1:
        raise InputError(f"X (B, N+1, f) with N >= 1 and Y (B, N or N+1, 1) are needed, got {X.shape}, {Y.shape}")
    return N1 - 1


def scalar_context(X, Y):
    """App. A.1, Eq. 14: c_t = [x_t y_t, x_{t+1}] (2f) for t = 1 .. N.

    Args:
        X: (B, N + 1, f); Y: (B, N + 1, 1) or (B, N, 1) scalar targets.
    Returns:
        c: (B, N, 2f).
    """
    N = _scalar_task(X, Y)
    return np.concatenate([X[:, :N] * Y[:, :N], X[:, 1:]], axis=-1)


def scalar_maps(f):
    """Ψ = [I_f 0] (selects x_t y_t) and Θ = [0 I_f] (selects x_{t+1}), both (f, 2f) (App. A.1)."""
    f = check_positive_int("f", f)
    I, O = np.eye(f), np.zeros((f, f))
    return np.hstack([I, O]), np.hstack([O, I])


def scalar_ssm_forward(X, Y, eta):
    """App. A.1, Eq. 12-14: z_t = z_{t-1} + Ψ c_t, o_t = β z_t^T Θ c_t, β = η/N (sign: module docstring, 2.).

    Returns:
        z: (B, N, f) the states (z_t = Σ_{i<=t} x_i y_i); o: (B, N) the outputs, o_N = ŷ_{N+1}.
    """
    N = _scalar_task(X, Y)
    c = scalar_context(X, Y)                               # (B, N, 2f)
    Psi, Theta = scalar_maps(X.shape[2])
    z = np.cumsum(c @ Psi.T, axis=1)                       # z_t = I z_{t-1} + Ψ c_t, z_0 = 0
    o = _eta(eta) / N * np.einsum("btf,btf->bt", z, c @ Theta.T)
    return z, o


# --------------------------------------------------------------------------------- 3. multi-step GD
def gd_heads(f):
    """The two heads of one multi-step layer (App. A.3), A = 1, β = 1, q = e_3.

    Returns:
        (params_Z, params_Z_tilde): Q = e_2 e_1^T (accumulates Σ y x^T) and Q̃ = e_1 e_1^T (Σ x x^T).
    """
    f = check_positive_int("f", f)
    return _params(f, np.outer(_unit(1), _unit(0)), 1.0), _params(f, np.outer(_unit(0), _unit(0)), 1.0)


def _host(Z):
    """The cache's states as a NumPy array (the CUDA path keeps them on the device)."""
    return Z.copy_to_host() if hasattr(Z, "copy_to_host") else Z


def _last_state(params, tokens, kwargs):
    _, cache = gril.forward(params, tokens, s=STRIDE, **kwargs)
    return _host(cache.Z)[:, -1]                           # (B, f, f): the state after the query's window


def multi_step_gd_forward(tokens, L, eta, l2=0.0, n_out=None, **kwargs):
    """L stacked layers of Prop. A.1 / App. A.3 (and A.5 for l2 > 0) on GRIL tokens; = L GD steps from W_0 = 0.

    Route: the readout needs the whole state matrices (Z̃ W_{l-1} is a matrix product, not one read-out
    vector), so each layer runs its two heads with ``gril.forward`` on the original tokens and takes the states
    after the last window from the cache (``cache.Z[:, -1]``); the readout algebra then runs outside the block:

        W_l = W_{l-1} - (η/N) (Z̃ W_{l-1} - Z^T[:, :n_o] + 2 N l2 W_{l-1}),     o^(L) = W_L^T x_{N+1}.

    Z = Σ y_pad x^T is (outputs, inputs); its transpose's first n_o columns are Σ x y^T (f, n_o), W's layout.
    The two heads see the same windows in every layer, so their states are the same in every layer; only the
    readout's W_{l-1} differs from layer to layer.

    Args:
        tokens: (B, 2N + 1, f) as from ``gril_regression``; L: layers (GD steps); eta: η; l2: penalty weight of
        L(W) = 1/(2N) Σ ||W^T x - y||² + l2 ||W||²; n_out: target size n_o (default f).
        kwargs: mode, method, backend, kernel for ``gril.forward``.
    Returns:
        MultiStepGD(y_hat (B, n_o), W [W_1 .. W_L], Z, Z_tilde).
    """
    check_array("tokens", tokens, ndim=3, names=("B", "T", "f"))
    B, T, f = tokens.shape
    if T < 3 or T % 2 == 0:
        raise InputError(f"tokens must hold x_1, y_1, ..., x_N, y_N, x_{{N+1}}: odd T = 2N + 1 >= 3, got T={T}")
    N = (T - 1) // 2
    L = check_positive_int("L", L)
    eta = _eta(eta)
    ok = isinstance(l2, (int, float, np.integer, np.floating)) and not isinstance(l2, bool)
    if not (ok and math.isfinite(l2) and l2 >= 0):
        raise InputError(f"l2 must be a finite number >= 0, got {l2!r}")
    n_out = f if n_out is None else check_positive_int("n_out", n_out)
    if n_out > f:
        raise InputError(f"n_out must be <= f = {f}, got {n_out}")
    x_q = tokens[:, -1]                                    # C_N q with q = e_3: the query input
    Wl = np.zeros((B, f, n_out), dtype=tokens.dtype)       # W_0 = 0
    Ws = []
    for _ in range(L):
        heads = gd_heads(f)
        Z = _last_state(heads[0], tokens, kwargs)          # Σ y_pad x^T
        Z_tilde = _last_state(heads[1], tokens, kwargs)    # Σ x x^T
        XtY = Z.transpose(0, 2, 1)[:, :, :n_out]           # Σ x y^T, (B, f, n_o)
        Wl = Wl - eta / N * (Z_tilde @ Wl - XtY + 2.0 * N * l2 * Wl)
        Ws.append(Wl)
    return MultiStepGD(np.einsum("bfo,bf->bo", Wl, x_q), Ws, Z, Z_tilde)


# --------------------------------------------------------------------------------- 4. cross-entropy
def ce_gd(d, eta):
    """Prop. 4.3 / App. A.6 for the summed CE loss: Q = e_2 e_1^T, q = e_3, A = 1 (d, d), β = -η."""
    d = check_positive_int("d", d)
    return GRILConstruction(_params(d, np.outer(_unit(1), _unit(0)), -_eta(eta)), STRIDE, d)


def ce_accumulate(Phi, R, eta=1.0, **kwargs):
    """Run ``ce_gd`` on the tokens φ_1, r_1, ..., φ_N, r_N, φ_{N+1} (windows [φ_t, r_t, φ_{t+1}]).

    Args:
        Phi: (B, N + 1, d) features φ(x_i), the last row the query's; R: (B, N, K) errors r_i = p_i - y_i with
        K <= d (``gril_gd.ce_residual``), zero-padded to d in the tokens; eta: step size η.
        kwargs: mode, method, backend, kernel for ``gril.forward``.
    Returns:
        CEAccumulation(Z (B, K, d) = Σ r φ^T, the transpose of ``gril_gd.ce_gradient``; logits (B, K) =
        -η Z φ_{N+1}: from W = 0 (where r = p(0) - y) the query logits after one step).
    """
    check_array("Phi", Phi, ndim=3, names=("B", "N+1", "d"))
    check_array("R", R, (Phi.shape[0], Phi.shape[1] - 1, None), names=("B", "N", "K"))
    K = R.shape[2]
    tokens = gril_regression.make_tokens(Phi, R)
    o, cache = gril.forward(ce_gd(Phi.shape[2], eta).params, tokens, s=STRIDE, **kwargs)
    return CEAccumulation(_host(cache.Z)[:, -1, :K, :], o[:, -1, :K])


def n_params(construction_or_params):
    """Number of parameter entries of a GRIL block: Q (9) + q (3) + β (1) + A (f²) = f² + 13."""
    params = getattr(construction_or_params, "params", construction_or_params)
    return int(sum(np.size(p) for p in params.values()))


# --------------------------------------------------------------------------------- 5. two attention layers
def attention_gd_spec(f, N):
    """The ``minimal.models`` spec that ``attention_gd`` fills: ``experiments.gril.comparison.spec`` of "lsa_2"
    with ``positional=True`` at d_model = 2f + 2N + 1 (its init scales left out: every weight is set)."""
    from ..models import Layer, Residual

    f, N = check_positive_int("f", f), check_positive_int("N", N)
    d, T = 2 * f + 2 * N + 1, 2 * N + 1
    lsa = Layer("lsa", {"D": d}, {}, {})
    return (Layer("linear", {"D_in": f, "D_out": d}), Layer("positional", {"T_max": T, "D": d}), Residual((lsa,)),
            lsa, Layer("linear", {"D_in": d, "D_out": f}))


def attention_gd(f, N, eta):
    """Weights for ``attention_gd_spec(f, N)`` that compute one GD step from 0 (module docstring, item 5).

    Args:
        f: token size; N: context pairs; eta: step size η (the prediction is (η/N) Σ_i y_i x_i^T x_{N+1}).
    Returns:
        (spec, params): ``models.forward(params, tokens, spec, readout="last")[0][:, 0, :n_o]`` on
        ``gril_regression`` tokens equals ``gril_gd.gd_predict(X, Y, eta)``.
    """
    spec = attention_gd_spec(f, N)
    eta = _eta(eta)
    d, T = 2 * f + 2 * N + 1, 2 * N + 1
    x_slots, c_slots, p_slots = np.arange(f), f + np.arange(f), 2 * f + np.arange(T)
    E = np.zeros((f, d))
    E[np.arange(f), x_slots] = 1.0                      # token -> slots [0, f)
    P = np.zeros((T, d))
    P[np.arange(T), p_slots] = 1.0                      # position t -> slot 2f + t
    # layer 1: at a y token (odd t) attend to position t - 1 only, and copy its token into slots [f, 2f)
    K1, Q1, V1 = np.zeros((d, d)), np.zeros((d, d)), np.zeros((d, d))
    K1[np.arange(T), p_slots] = 1.0                     # k_s = e_s
    odd = np.arange(1, T, 2)
    Q1[odd - 1, p_slots[odd]] = 1.0                     # q_t = e_{t-1} at odd t, 0 at even t
    V1[c_slots, x_slots] = 1.0                          # v_s = token of s, in slots [f, 2f)
    # layer 2: score x_i . x_{N+1} (the copied x at y tokens, 0 at x tokens), value (η/N) y_i
    K2, Q2, V2 = np.zeros((d, d)), np.zeros((d, d)), np.zeros((d, d))
    K2[np.arange(f), c_slots] = 1.0
    Q2[np.arange(f), x_slots] = 1.0
    V2[x_slots, x_slots] = eta / N
    R = np.zeros((d, f))
    R[x_slots, np.arange(f)] = 1.0                      # readout: slots [0, f)
    params = {"0.W": E, "0.b": np.zeros(d), "1.P": P, "2.0.W_V": V1, "2.0.W_K": K1, "2.0.W_Q": Q1,
              "3.W_V": V2, "3.W_K": K2, "3.W_Q": Q2, "4.W": R, "4.b": np.zeros(f)}
    return spec, params
