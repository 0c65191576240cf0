"""LRU block: the Linear Recurrent Unit of Orvieto et al., "Resurrecting recurrent neural networks for long
sequences" (2023, Sec. 3, Eq. 3-7), with the gating variants of Zucchet et al., "Gated recurrent neural
networks discover attention" (2023/2024, App. A.1 and the architecture comparison of Fig. 4).

The LRU (Orvieto et al., Sec. 3): a complex diagonal linear recurrence with an exponential parametrisation,

    λ   = exp(-exp(ν_log) + i exp(θ_log))   ∈ C^N, |λ| = exp(-exp(ν_log)) < 1     (Sec. 3.3, Eq. 6)
    γ   = exp(γ_log)                          normalisation of the input, ∈ R^N  (Sec. 3.4)
    h_t = λ ⊙ h_{t-1} + γ ⊙ (B u_t),  h_0 = 0                                    B = B_re + i B_im ∈ C^{N×H}
    z_t = Re(C h_t) + D ⊙ u_t                                                     C = C_re + i C_im ∈ C^{H×N}

The block around it, in Zucchet et al.'s variants (``variant``, App. A.1, Eq. 7-8):

    glu(a, c) = (W_m a) ⊙ σ(W_x c)            multiplicative gate, σ the logistic sigmoid (Dauphin et al. GLU)
    "out"     u = x;                         y = (W_out_m z) ⊙ σ(W_out_x z)      the standard LRU block
    "in_out"  u = (W_in_m x) ⊙ σ(W_in_x x);  y = (W_out_m z) ⊙ σ(W_out_x z)      + nonlinear input gating
    "in_skip" u = (W_in_m x) ⊙ σ(W_in_x x);  y = (W_out_m z) ⊙ σ(W_out_x x)      + the output gate's sigmoid
                                                                                  branch reads the block input x

Naming: Zucchet et al. write the GLU as σ(W_m ỹ) ⊙ (W_x ỹ) (App. A.1, Eq. 8): *their* m branch is the sigmoid
branch. We keep Dauphin et al.'s order (linear branch first) and name the linear branch W_m, so the paper's
W_m is our W_x. In "in_skip" the paper's m branch "takes x_{t+1} as input instead of ỹ_{t+1}" (App. A.1): the
sigmoid branch σ(W_out_x x) reads the current input and the linear branch W_out_m z reads the LRU output, so the
gate multiplies a query of the current token (the sigmoid, linearised around 1/2 as in App. A.1) with what the
recurrence stored. Our reading of the block (the paper gives no code): the GLU has no biases and no GELU in
front of it, so the multiplicative path is exact (a construction that needs a bias appends a constant 1 to x);
the input gating is the same GLU applied before the recurrence. Normalisation, residual connections and
dropout of a full deep-LRU stack belong to the model that stacks blocks, not here.

Complex arithmetic: parameters are real (real and imaginary parts stored separately); the state h is a
NumPy complex array. The complex recurrence runs in ``complex_scan``, in the two forms of ``mode``
(``minimal.conventions``): "sequential" is ``minimal.scan.linear_scan``'s reference loop (its NumPy backend, the
one that takes complex arrays), "parallel" (the default) Hillis-Steele doubling, log2(T) vectorised steps with the
powers λ^d of the time-invariant λ, kept here: the committed LRU runs were trained with it, and the scan's
Blelloch tree adds the same terms in another order (so it rounds differently). It has no ``method`` or ``backend``:
those name ``minimal.scan``'s algorithms and compiled kernels, which are real-valued. For a real loss L and a complex
variable w = a + i b we write ḡ_w = dL/da + i dL/db; a holomorphic map v = f(w) pulls back as
ḡ_w = conj(f'(w)) ḡ_v, and the gradients of the real parameters are the real / imaginary parts.

Glossary (shapes): B batch, T time, D_in input features, H LRU model width (= D_in for "out"),
N complex state size, D_out output features.
    x         (B, T, D_in)      W_in_m, W_in_x  (H, D_in)   ["in_out", "in_skip"]
    nu_log, theta_log, gamma_log (N,)    B_re, B_im (N, H)    C_re, C_im (H, N)    D (H,)
    W_out_m   (D_out, H)        W_out_x (D_out, H) or (D_out, D_in) ["in_skip"]
    y         (B, T, D_out)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..conventions import CHOICES, choose, renamed_keywords
from ..scan import linear_scan
from ..validate import check_array, check_choice, check_dtype, check_positive_int, common_dtype, check_grad_dtype
from ..contract import Example

__all__ = ["init", "forward", "backward", "step_forward", "examples", "complex_scan", "lambda_of",
           "VARIANTS", "MODES"]

VARIANTS = ("out", "in_out", "in_skip")
MODES = CHOICES["mode"]
# ``method`` names minimal.scan's algorithms, which the LRU does not use: a caller passing it means ``mode``.
_RENAMED = {"method": "`method` now names the scan algorithm of minimal.scan, which the LRU does not use; the "
                      "parallel/sequential choice is `mode` (mode='parallel' or 'sequential')"}


def _sigmoid(v):
    return 0.5 * (1.0 + np.tanh(0.5 * v))  # overflow-free form of 1 / (1 + exp(-v))


def lambda_of(params):
    """λ = exp(-exp(ν_log) + i exp(θ_log)), (N,) complex (0 where exp(ν_log) overflows)."""
    with np.errstate(over="ignore"):
        return np.exp(-np.exp(params["nu_log"]) + 1j * np.exp(params["theta_log"]))


@renamed_keywords(**_RENAMED)
def complex_scan(lam, b, mode=None):
    """h_t = λ ⊙ h_{t-1} + b_t with h_0 = 0 and a time-invariant λ.

    Args:
        lam: (N,) complex; b: (B, T, N) complex of lam's dtype; mode: "sequential" (``minimal.scan``'s reference
            loop, with a_t = λ at every step) or "parallel" (Hillis-Steele, below); None: "parallel".
    Returns:
        h: (B, T, N) complex.
    """
    if choose("mode", mode, "lru.complex_scan") == "sequential":
        return linear_scan(np.broadcast_to(lam, b.shape), b, method="sequential", backend="numpy")
    # Hillis-Steele: after the step with offset d, h_t sums λ^{t-s} b_s over the last 2d steps.
    h = b.copy()
    d, lam_d = 1, lam
    while d < b.shape[1]:
        h[:, d:] = h[:, d:] + lam_d * h[:, :-d]   # the right side is evaluated before the write
        d, lam_d = 2 * d, lam_d * lam_d
    return h


def init(rng, d_in, d_state, d_out, d_model=None, variant="out", r_min=0.9, r_max=0.999,
         max_phase=2 * np.pi):
    """Random parameters with the LRU initialisation of Orvieto et al. (Sec. 3.2-3.4, Lemma 3.2).

    Args:
        rng: ``numpy.random.Generator``.
        d_in: input features D_in; d_state: complex state size N; d_out: output features D_out;
        d_model: LRU width H for "in_out" / "in_skip" (default D_in); "out" requires H = D_in.
        variant: "out", "in_out" or "in_skip".
        r_min, r_max: |λ| uniform on the ring r_min <= |λ| <= r_max (area-uniform, Lemma 3.2);
        max_phase: arg λ uniform in [0, max_phase].
    Returns:
        dict of float64 arrays; γ_log = log sqrt(1 - |λ|^2) (Sec. 3.4), B and C Glorot-like Gaussian
        (B with variance 1/(2H) per part, C with variance 1/N per part), D standard normal.
    """
    d_in = check_positive_int("d_in", d_in)
    N = check_positive_int("d_state", d_state)
    d_out = check_positive_int("d_out", d_out)
    check_choice("variant", variant, VARIANTS)
    H = d_in if d_model is None else check_positive_int("d_model", d_model)
    if variant == "out" and H != d_in:
        raise ValueError(f"d_model must equal d_in ({d_in}) for variant 'out' (no input gating), got {H}")
    if not 0.0 <= r_min < r_max < 1.0:
        raise ValueError(f"r_min, r_max must satisfy 0 <= r_min < r_max < 1, got {r_min}, {r_max}")
    if not 0.0 < max_phase <= 2 * np.pi:
        raise ValueError(f"max_phase must lie in (0, 2π], got {max_phase}")

    def gauss(shape, var):
        return rng.standard_normal(shape) * np.sqrt(var)

    params = {}
    if variant != "out":
        params["W_in_m"] = gauss((H, d_in), 1.0 / d_in)
        params["W_in_x"] = gauss((H, d_in), 1.0 / d_in)
    u1, u2 = rng.uniform(size=N), rng.uniform(size=N)
    params["nu_log"] = np.log(-0.5 * np.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2))
    params["theta_log"] = np.log(max_phase * np.clip(u2, 1e-12, None))
    params["gamma_log"] = np.log(np.sqrt(1.0 - np.abs(lambda_of(params)) ** 2))
    params["B_re"] = gauss((N, H), 1.0 / (2 * H))
    params["B_im"] = gauss((N, H), 1.0 / (2 * H))
    params["C_re"] = gauss((H, N), 1.0 / N)
    params["C_im"] = gauss((H, N), 1.0 / N)
    params["D"] = rng.standard_normal(H)
    params["W_out_m"] = gauss((d_out, H), 1.0 / H)
    x_width = d_in if variant == "in_skip" else H
    params["W_out_x"] = gauss((d_out, x_width), 1.0 / x_width)
    return params


def _check_params(params, variant):
    """Validate keys, shapes and the one shared dtype for ``variant``; return (D_in, H, N, D_out, dtype)."""
    check_choice("variant", variant, VARIANTS)
    want = {"nu_log", "theta_log", "gamma_log", "B_re", "B_im", "C_re", "C_im", "D", "W_out_m", "W_out_x"}
    if variant != "out":
        want |= {"W_in_m", "W_in_x"}
    if set(params) != want:
        raise ValueError(f"params must have exactly the keys {sorted(want)} for variant {variant!r}, "
                         f"got {sorted(params)}")
    nu_log = check_array("nu_log", params["nu_log"], ndim=1, names=("N",))
    N = nu_log.shape[0]
    check_array("theta_log", params["theta_log"], (N,), names=("N",))
    check_array("gamma_log", params["gamma_log"], (N,), names=("N",))
    H = check_array("B_re", params["B_re"], (N, None), names=("N", "H")).shape[1]
    check_array("B_im", params["B_im"], (N, H), names=("N", "H"))
    check_array("C_re", params["C_re"], (H, N), names=("H", "N"))
    check_array("C_im", params["C_im"], (H, N), names=("H", "N"))
    check_array("D", params["D"], (H,), names=("H",))
    if variant == "out":
        D_in = H
    else:
        D_in = check_array("W_in_m", params["W_in_m"], (H, None), names=("H", "D_in")).shape[1]
        check_array("W_in_x", params["W_in_x"], (H, D_in), names=("H", "D_in"))
    D_out = check_array("W_out_m", params["W_out_m"], (None, H), names=("D_out", "H")).shape[0]
    x_width, x_name = (D_in, "D_in") if variant == "in_skip" else (H, "H")
    check_array("W_out_x", params["W_out_x"], (D_out, x_width), names=("D_out", x_name))
    return D_in, H, N, D_out, common_dtype({"nu_log": nu_log, **params})


def _outer_sum(a, c):
    """sum over (b, t) of a[b, t, :] c[b, t, :]^T: (B, T, P), (B, T, Q) -> (P, Q), as one BLAS matmul."""
    return a.reshape(-1, a.shape[-1]).T @ c.reshape(-1, c.shape[-1])


def _B_norm(params):
    """γ ⊙ B, (N, H) complex (Orvieto et al. fold γ into B)."""
    return np.exp(params["gamma_log"])[:, None] * (params["B_re"] + 1j * params["B_im"])


def _C(params):
    return params["C_re"] + 1j * params["C_im"]


class Cache(NamedTuple):
    x: np.ndarray         # (B, T, D_in)
    p_in: np.ndarray      # (B, T, H)  W_in_m x       (None for "out")
    s_in: np.ndarray      # (B, T, H)  σ(W_in_x x)    (None for "out")
    u: np.ndarray         # (B, T, H)  LRU input
    h: np.ndarray         # (B, T, N)  complex states
    z: np.ndarray         # (B, T, H)  LRU output
    a_out: np.ndarray     # (B, T, D_out)  W_out_m z
    s_out: np.ndarray     # (B, T, D_out)  σ(W_out_x z), σ(W_out_x x) for "in_skip"
    variant: str
    mode: str


@renamed_keywords(**_RENAMED)
def forward(params, x, variant="out", mode=None):
    """Run the block over a whole sequence.

    Args:
        params: as returned by ``init`` for the same ``variant``.
        x: (B, T, D_in) float input, of the params' dtype (one dtype throughout: nothing is promoted).
        variant: "out", "in_out" or "in_skip" (see the module docstring).
        mode: "parallel" (Hillis-Steele) or "sequential" (the scan's loop over t) for the complex recurrence; None:
            "parallel".
    Returns:
        y: (B, T, D_out); cache for ``backward``.
    """
    D_in, H, N, D_out, dtype = _check_params(params, variant)
    mode = choose("mode", mode, "lru.forward")
    check_array("x", x, (None, None, D_in), names=("B", "T", "D_in"))
    if x.shape[1] < 1:
        raise ValueError(f"x must have at least one time step, got shape {x.shape}")
    check_dtype("x", x, dtype)
    if variant == "out":
        p_in = s_in = None
        u = x
    else:
        p_in = x @ params["W_in_m"].T                       # (B, T, H)
        s_in = _sigmoid(x @ params["W_in_x"].T)
        u = p_in * s_in
    h = complex_scan(lambda_of(params), u @ _B_norm(params).T, mode)   # (B, T, N) complex
    z = (h @ _C(params).T).real + params["D"] * u           # (B, T, H)
    a_out = z @ params["W_out_m"].T
    s_out = _sigmoid((x if variant == "in_skip" else z) @ params["W_out_x"].T)
    return a_out * s_out, Cache(x, p_in, s_in, u, h, z, a_out, s_out, variant, mode)


def backward(params, cache, dy):
    """Gradients of a scalar loss L given dy = dL/dy of shape (B, T, D_out).

    Returns:
        dx: (B, T, D_in); grads: dict with the keys of params.
    """
    x, p_in, s_in, u, h, z, a_out, s_out, variant, mode = cache
    check_array("dy", dy, a_out.shape, names=("B", "T", "D_out"))
    check_grad_dtype("dy", dy, params)
    grads = {}
    dx = np.zeros_like(x)
    # 4. output gate y = a ⊙ σ(c), a = W_out_m z, c = W_out_x z (W_out_x x for "in_skip")
    da = dy * s_out
    dc = dy * a_out * s_out * (1.0 - s_out)
    c_in = x if variant == "in_skip" else z
    grads["W_out_m"] = _outer_sum(da, z)
    grads["W_out_x"] = _outer_sum(dc, c_in)
    dz = da @ params["W_out_m"]
    if variant == "in_skip":
        dx += dc @ params["W_out_x"]
    else:
        dz += dc @ params["W_out_x"]
    # 3. LRU output z = Re(C h) + D ⊙ u:  ḡ_h = C^H dz,  ḡ_C = dz conj(h)^T
    grads["D"] = np.einsum("bth,bth->h", dz, u)
    du = dz * params["D"]
    gC = _outer_sum(dz, h.conj())
    grads["C_re"], grads["C_im"] = gC.real, gC.imag
    gh = dz @ _C(params).conj()                              # (B, T, N) complex
    # 2. recurrence h_t = λ h_{t-1} + b_t: the adjoint g_t = ḡ_{h_t} + conj(λ) g_{t+1} is a reverse scan
    lam = lambda_of(params)
    g = complex_scan(lam.conj(), gh[:, ::-1], mode)[:, ::-1]
    h_prev = np.concatenate([np.zeros_like(h[:, :1]), h[:, :-1]], axis=1)
    g_lam = np.einsum("btn,btn->n", g, h_prev.conj())
    # λ = exp(w), w = -exp(ν_log) + i exp(θ_log): ḡ_w = conj(λ) ḡ_λ, then the real and imaginary parts
    g_w = lam.conj() * g_lam
    # d|λ|/dν_log = -exp(ν_log) |λ| = -exp(ν_log - exp(ν_log)): one exponential, 0 (not inf · 0) for large ν_log
    phase = np.exp(-1j * np.exp(params["theta_log"]))          # conj(λ) / |λ|
    with np.errstate(over="ignore"):
        grads["nu_log"] = (phase * g_lam).real * -np.exp(params["nu_log"] - np.exp(params["nu_log"]))
    grads["theta_log"] = g_w.imag * np.exp(params["theta_log"])
    # 1b. b_t = (γ ⊙ B) u_t with u real: ḡ_{γB} = g u^T, dL/du = Re((γB)^H g)
    B_norm = _B_norm(params)
    g_Bn = _outer_sum(g, u)
    du += (g @ B_norm.conj()).real
    gamma = np.exp(params["gamma_log"])
    grads["B_re"], grads["B_im"] = (gamma[:, None] * g_Bn).real, (gamma[:, None] * g_Bn).imag
    B = params["B_re"] + 1j * params["B_im"]
    grads["gamma_log"] = gamma * np.einsum("nh,nh->n", B.conj(), g_Bn).real
    # 1a. input gate u = p ⊙ σ(c), p = W_in_m x, c = W_in_x x
    if variant == "out":
        dx += du
    else:
        dp = du * s_in
        dc_in = du * p_in * s_in * (1.0 - s_in)
        grads["W_in_m"] = _outer_sum(dp, x)
        grads["W_in_x"] = _outer_sum(dc_in, x)
        dx += dp @ params["W_in_m"] + dc_in @ params["W_in_x"]
    return dx, {k: grads[k] for k in params}


def step_forward(params, x_t, h_prev, variant="out"):
    """One step of the sequential (RNN) mode.

    Args:
        x_t: (B, D_in) the input at step t, of the params' dtype; h_prev: (B, N) complex state h_{t-1} (zeros
            at t = 1), complex of the params' precision (complex128 for float64 params).
    Returns:
        (y_t, h_t): (B, D_out) real and (B, N) complex.
    """
    D_in, H, N, D_out, dtype = _check_params(params, variant)
    check_dtype("x_t", check_array("x_t", x_t, (None, D_in), names=("B", "D_in")), dtype)
    check_array("h_prev", h_prev, (x_t.shape[0], N), names=("B", "N"), kind="c")
    # the complex dtype of the same precision as the params (complex128 for float64)
    check_dtype("h_prev", h_prev, np.result_type(dtype, np.complex64), ref="the params' complex")
    if variant == "out":
        u = x_t
    else:
        u = (x_t @ params["W_in_m"].T) * _sigmoid(x_t @ params["W_in_x"].T)
    h_t = lambda_of(params) * h_prev + u @ _B_norm(params).T
    z = (h_t @ _C(params).T).real + params["D"] * u
    c_in = x_t if variant == "in_skip" else z
    return (z @ params["W_out_m"].T) * _sigmoid(c_in @ params["W_out_x"].T), h_t


def examples(rng):
    """Tiny float64 cases: each variant, T = 1 and odd T, both modes."""
    out = []
    for name, T, variant, mode, cfg in [
        ("out-T1", 1, "out", "parallel", {"d_in": 2}),
        ("out-T5", 5, "out", "parallel", {"d_in": 2}),
        ("in_out-T3-sequential", 3, "in_out", "sequential", {"d_in": 3, "d_model": 2}),
        ("in_out-T6", 6, "in_out", "parallel", {"d_in": 3, "d_model": 2}),
        ("in_skip-T1", 1, "in_skip", "parallel", {"d_in": 3, "d_model": 2}),
        ("in_skip-T5", 5, "in_skip", "parallel", {"d_in": 3, "d_model": 2}),
    ]:
        # A wide ring and full phase range so that the rotation part of λ is exercised.
        params = init(rng, d_state=3, d_out=2, variant=variant, r_min=0.4, r_max=0.95, **cfg)
        out.append(Example(name, params, rng.standard_normal((2, T, cfg["d_in"])),
                           {"variant": variant, "mode": mode}))
    return out
