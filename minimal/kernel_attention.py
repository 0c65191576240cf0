"""Attention is an RNN: feature maps and kernel attention in transformer mode and RNN mode.

Katharopoulos et al., "Transformers are RNNs" (ICML 2020), Sec. 3.2: attention with a similarity given by a
kernel k(q, k') = <φ(q), φ(k')> is

    y_t = Σ_{i<=t} k(q_t, k_i) v_i / Σ_{i<=t} k(q_t, k_i)                         (their Eq. 3, causal Eq. 8)
        = S_t φ(q_t) / <u_t, φ(q_t)>,   S_t = Σ_{i<=t} v_i φ(k_i)^T,  u_t = Σ_{i<=t} φ(k_i)   (Eq. 5, 9-11)

The first line is "transformer mode": it builds the T x T weight matrix, O(T^2) time and memory. The second
is "RNN mode": the state (S_t, u_t) is updated by S_t = S_{t-1} + v_t φ(k_t)^T, u_t = u_{t-1} + φ(k_t),
O(T) time, and a state of fixed size (D_v F + F numbers) whatever T. Softmax attention is the kernel exp(<q, k'>) (with q scaled by 1/sqrt(D_k)),
whose φ is infinite-dimensional; run as an RNN its state is the list of all keys and values seen so far
(the essay's starting point), and random features (Rahimi & Recht 2007; the positive, antithetic form of
Choromanski et al. 2021, "Performers", Lemma 1) give a finite φ whose inner products approximate it:

    φ_F(x) = exp(-|x|^2/2) / sqrt(2D) [exp(<ω_i, x>), exp(-<ω_i, x>)]_{i=1..D},   ω_i ~ N(0, I),
    E_ω <φ_F(x), φ_F(x')> = exp(-|x|^2/2 - |x'|^2/2) E exp(<ω, x + x'>) = exp(<x, x'>)   (unbiased).

Other feature maps: elu(x) + 1 (Katharopoulos et al. Eq. 7) and the exact finite map of the degree-2
polynomial kernel (c + <x, x'>)^2 (their Sec. 3.2.1): φ(x) = [c, sqrt(2c) x, vec(x x^T)].

Glossary: B batch, T time, D_k key/query features, D_v value features, F = dim φ(x), D random features
(so F = 2D for φ_F). Q, K: (B, T, D_k); V: (B, T, D_v); outputs (B, T, D_v). A feature map ``phi`` is any
function (..., D_k) -> (..., F).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .cells import softmax_attention as _softmax_cell
from .validate import check_array, check_positive_int

__all__ = ["sample_omega", "random_features", "elu_features", "poly2_features", "KernelState",
           "initial_state", "kernel_attention_step", "kernel_attention_rnn", "kernel_attention_parallel",
           "softmax_attention_parallel", "softmax_attention_rnn"]


# ---------------------------------------------------------------------------------------------- feature maps

def sample_omega(rng, n_features, dim):
    """Draw the D random directions ω_i ~ N(0, I_dim) of φ_F. Returns omega: (D, dim) float64."""
    check_positive_int("n_features", n_features)
    check_positive_int("dim", dim)
    return rng.standard_normal((n_features, dim))


def random_features(x, omega):
    """φ_F(x) = exp(-|x|^2/2)/sqrt(2D) [exp(<ω_i, x>), exp(-<ω_i, x>)]_i, unbiased for exp(<x, x'>).

    Args:
        x: (..., d) float array.
        omega: (D, d) random directions from ``sample_omega``.
    Returns:
        (..., 2D) positive features, first the D "+" then the D "-" features.
    """
    check_array("x", x, min_ndim=1)
    check_array("omega", omega, (None, x.shape[-1]), names=("D", "d"))
    z = x @ omega.T                                       # (..., D)
    half_sq = 0.5 * np.sum(x * x, axis=-1, keepdims=True)
    # the norm factor goes inside the exponent: exp(z) alone overflows long before exp(z - |x|^2/2) does
    # a Python float, not np.sqrt's float64 scalar, so float32 inputs stay float32 (NEP 50)
    return np.concatenate([np.exp(z - half_sq), np.exp(-z - half_sq)], axis=-1) / math.sqrt(2 * omega.shape[0])


def elu_features(x):
    """φ(x) = elu(x) + 1 = x + 1 for x > 0, exp(x) otherwise (Katharopoulos et al. Eq. 7). (..., d) -> (..., d)."""
    check_array("x", x, min_ndim=1)
    # exp of the clipped value only, so large positive x never reaches exp
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def poly2_features(x, c=1.0):
    """Exact map of the degree-2 polynomial kernel: <φ(x), φ(x')> = (c + <x, x'>)^2.

    φ(x) = [c, sqrt(2c) x, vec(x x^T)], so F = 1 + d + d^2 (the d(d-1)/2 repeated products x_i x_j = x_j x_i
    are kept for clarity; merging them with a factor sqrt(2) gives 1 + d + d(d+1)/2).

    Args:
        x: (..., d) float array.
        c: the kernel's offset, a finite real number >= 0.
    Returns:
        (..., 1 + d + d^2).
    """
    check_array("x", x, min_ndim=1)
    real = isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, (bool, np.bool_))
    if not (real and math.isfinite(c) and c >= 0):
        raise ValueError(f"c must be a finite real number >= 0, got {c!r}")
    outer = (x[..., :, None] * x[..., None, :]).reshape(x.shape[:-1] + (-1,))
    return np.concatenate([np.full(x.shape[:-1] + (1,), c, dtype=x.dtype), math.sqrt(2 * c) * x, outer], axis=-1)


# ------------------------------------------------------------------------------------------------ attention

def _check_qkv(Q, K, V):
    check_array("Q", Q, ndim=3, names=("B", "T", "D_k"))
    B, T, Dk = Q.shape
    check_array("K", K, (B, T, Dk), names=("B", "T", "D_k"))
    check_array("V", V, (B, T, None), names=("B", "T", "D_v"))
    if T < 1:
        raise ValueError(f"Q must have at least one time step (axis 1), got shape {Q.shape}")
    if not (Q.dtype == K.dtype == V.dtype):
        raise ValueError(f"K and V must have the dtype of Q ({Q.dtype}), got {K.dtype} and {V.dtype}")
    return B, T, Dk, V.shape[2]


def _apply_phi(phi, x, name):
    if not callable(phi):
        raise ValueError(f"phi must be a callable feature map (..., D_k) -> (..., F), got {type(phi).__name__}")
    f = phi(x)
    if not isinstance(f, np.ndarray) or f.shape[:-1] != x.shape[:-1] or f.ndim != x.ndim:
        raise ValueError(f"phi must map {name} of shape {x.shape} to {x.shape[:-1] + ('F',)}, "
                         f"got {np.shape(f)}")
    return f


def _check_denominator(z):
    # a feature map whose kernel can be <= 0 (e.g. a plain dot product) has no normalised attention
    if not np.all(z > 0):
        raise ValueError("phi must give a positive kernel: the attention denominator <u_t, phi(q_t)> "
                         f"reached {float(np.min(z)):.3g}")


class KernelState(NamedTuple):
    """The RNN state after t tokens: S = Σ_i v_i φ(k_i)^T (B, D_v, F) and u = Σ_i φ(k_i) (B, F)."""
    S: np.ndarray
    u: np.ndarray


def initial_state(batch, d_v, n_features, dtype=np.float64):
    """The empty state S_0 = 0 (B, D_v, F), u_0 = 0 (B, F)."""
    batch, d_v, n_features = (check_positive_int(n, v) for n, v in
                              (("batch", batch), ("d_v", d_v), ("n_features", n_features)))
    return KernelState(np.zeros((batch, d_v, n_features), dtype), np.zeros((batch, n_features), dtype))


def kernel_attention_step(state, q, k, v, phi, normalise=True):
    """One token of RNN mode (Katharopoulos et al. Sec. 3.4, Eq. 16-20).

        S_t = S_{t-1} + v_t φ(k_t)^T,   u_t = u_{t-1} + φ(k_t),   y_t = S_t φ(q_t) / <u_t, φ(q_t)>

    With ``normalise=False`` the readout is y_t = S_t φ(q_t) (no denominator): for φ(x) = x this is linear
    self-attention (Zucchet et al. Eq. 1), S_t the fast-weight matrix.

    Args:
        state: ``KernelState`` with S (B, D_v, F), u (B, F).
        q, k: (B, D_k); v: (B, D_v).
        phi: feature map (..., D_k) -> (..., F).
        normalise: divide by the denominator <u_t, φ(q_t)> (which must then be > 0).
    Returns:
        (new_state, y) with y: (B, D_v).
    """
    S, u = state
    check_array("S", S, ndim=3, names=("B", "D_v", "F"))
    B, Dv, F = S.shape
    check_array("u", u, (B, F), names=("B", "F"))
    check_array("q", q, (B, None), names=("B", "D_k"))
    check_array("k", k, q.shape, names=("B", "D_k"))
    check_array("v", v, (B, Dv), names=("B", "D_v"))
    phi_k = _apply_phi(phi, k, "k")
    if phi_k.shape[-1] != F:
        raise ValueError(f"phi must give F={F} features to match the state S {S.shape}, got {phi_k.shape[-1]}")
    phi_q = _apply_phi(phi, q, "q")
    S = S + v[:, :, None] * phi_k[:, None, :]
    u = u + phi_k
    y = (S @ phi_q[:, :, None])[:, :, 0]
    if normalise:
        z = np.sum(u * phi_q, axis=1)                                         # (B,)
        _check_denominator(z)
        y = y / z[:, None]
    return KernelState(S, u), y


def kernel_attention_rnn(Q, K, V, phi, state=None, normalise=True):
    """Causal kernel attention in RNN mode: a loop over t carrying (S_t, u_t).

    The state carried from token to token is O(1) in T: S_t (B, D_v, F) and u_t (B, F), nothing else. The
    arrays that hold a whole sequence are O(T): the inputs, the output Y (B, T, D_v), the denominators
    (B, T), and φ(Q), φ(K) (B, T, F), computed for all tokens at once since φ acts on each token alone.

    Args:
        Q, K: (B, T, D_k); V: (B, T, D_v); phi: feature map (..., D_k) -> (..., F).
        state: ``KernelState`` to start from, or None for the empty state.
        normalise: divide by <u_t, φ(q_t)>; False gives the plain numerator S_t φ(q_t).
    Returns:
        (Y, state): Y (B, T, D_v) and the ``KernelState`` after the last token.
    """
    B, T, Dk, Dv = _check_qkv(Q, K, V)
    # φ acts on each token alone, so it is applied to all tokens at once (O(T F) memory, like the output);
    # the recurrence still carries only (S_t, u_t) from one token to the next
    phi_Q, phi_K = _apply_phi(phi, Q, "Q"), _apply_phi(phi, K, "K")
    F = phi_K.shape[-1]
    if state is None:
        state = initial_state(B, Dv, F, np.result_type(phi_Q, phi_K, V))
    else:
        check_array("state.S", state.S, (B, Dv, None), names=("B", "D_v", "F"))
        check_array("state.u", state.u, (B, state.S.shape[2]), names=("B", "F"))
        if state.S.shape[2] != F:
            raise ValueError(f"phi must give F={state.S.shape[2]} features to match state.S {state.S.shape}, "
                             f"got {F}")
    # The dtype that the same products would have in transformer mode: a φ that returns float64 for float32
    # Q, K (or a float64 state) gives float64, never a silent cast into a float32 buffer.
    dtype = np.result_type(phi_Q, phi_K, V, state.S, state.u)
    # copies, because the loop updates them in place (the caller's state is never modified)
    S, u = state.S.astype(dtype), state.u.astype(dtype)
    Y = np.empty((B, T, Dv), dtype=dtype)
    z = np.empty((B, T), dtype=dtype)
    for t in range(T):
        S += V[:, t, :, None] * phi_K[:, t, None, :]
        u += phi_K[:, t]
        Y[:, t] = (S @ phi_Q[:, t, :, None])[:, :, 0]
        z[:, t] = np.sum(u * phi_Q[:, t], axis=1)
    if normalise:
        _check_denominator(z)
        Y /= z[:, :, None]
    return Y, KernelState(S, u)


def kernel_attention_parallel(Q, K, V, phi, causal=True, normalise=True):
    """Kernel attention in transformer mode: the T x T weight matrix A_ti = <φ(q_t), φ(k_i)>.

        Y = (M ⊙ A) V / ((M ⊙ A) 1),   M_ti = [i <= t] if causal else 1     (Katharopoulos et al. Eq. 2-4)

    Args:
        Q, K: (B, T, D_k); V: (B, T, D_v); phi: feature map (..., D_k) -> (..., F).
        causal: mask future keys (the form that equals RNN mode token by token).
        normalise: divide by the row sums (M ⊙ A) 1; False gives (M ⊙ A) V.
    Returns:
        Y: (B, T, D_v).
    """
    B, T, Dk, Dv = _check_qkv(Q, K, V)
    A = _apply_phi(phi, Q, "Q") @ np.swapaxes(_apply_phi(phi, K, "K"), 1, 2)   # (B, T, T)
    if causal:
        A *= np.tri(T, dtype=bool)
    if not normalise:
        return A @ V
    z = A.sum(axis=2)                                                          # (B, T)
    _check_denominator(z)
    return (A @ V) / z[:, :, None]


def _check_scale(scale, Dk):
    if scale is None:
        return 1.0 / math.sqrt(Dk)
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    return float(scale)


def softmax_attention_parallel(Q, K, V, scale=None, causal=True):
    """Softmax attention in transformer mode: Y = softmax(scale Q K^T + mask) V (Vaswani et al. 2017, Eq. 1).

    The same computation as ``minimal.cells.softmax_attention`` in parallel mode (whose weight matrix this
    calls), on given Q, K, V and with a free ``scale`` and an optional mask.

    Args:
        Q, K: (B, T, D_k); V: (B, T, D_v); scale: defaults to 1/sqrt(D_k); causal: mask future keys.
    Returns:
        Y: (B, T, D_v).
    """
    B, T, Dk, Dv = _check_qkv(Q, K, V)
    return _softmax_cell.softmax_weights(Q, K, _check_scale(scale, Dk), causal) @ V


def softmax_attention_rnn(Q, K, V, scale=None):
    """Causal softmax attention as an RNN whose state is the list of all keys and values seen so far.

        state_t = state_{t-1} + [(k_t, v_t)],   y_t = Σ_{(k, v) in state_t} exp(scale <q_t, k>) v / Σ exp(scale <q_t, k>)

    The state grows with t (memory O(T), time O(T^2) in all): the infinite-dimensional φ of exp(<q, k>)
    cannot be summed into a fixed-size S_t, so the keys themselves are kept. The state is the cell's
    ``KVState`` and each output its online-softmax readout (``minimal.cells.softmax_attention``, RNN mode).

    Args:
        Q, K: (B, T, D_k); V: (B, T, D_v); scale: defaults to 1/sqrt(D_k).
    Returns:
        Y: (B, T, D_v).
    """
    B, T, Dk, Dv = _check_qkv(Q, K, V)
    scale = _check_scale(scale, Dk)
    Y = np.empty((B, T, Dv), dtype=Q.dtype)
    for t in range(T):
        # the state after token t: every key and value so far (a view of the prefix, not a copy)
        state = _softmax_cell.KVState(K[:, :t + 1], V[:, :t + 1])
        Y[:, t] = _softmax_cell.online_read(Q[:, t], state, scale)[0]
    return Y
