"""Gated linear RNN of Zucchet et al., "Gated recurrent neural networks discover attention" (2023/2024), Eq. 2.

A linear recurrent layer with multiplicative (linear) gating at its input and its output:

    g_in(x)  = (W_in_m x) ⊙ (W_in_x x)                      input gating, (H,)
    h_t      = λ ⊙ h_{t-1} + g_in(x_t),   h_0 = 0           diagonal recurrence ("diagonal", Eq. 2)
    h_t      = A h_{t-1}   + g_in(x_t)                      dense recurrence ("dense", Fig. 4 baseline)
    g_out(h) = (W_out_m h) ⊙ (W_out_x h)                    output gating, (H_out,)
    y_t      = D g_out(h_t)                                  readout, (D_out,)
    λ        = exp(-exp(ν)) ∈ [0, 1]                        (param ``nu``, one per hidden neuron)

Indexing: the paper writes h_{t+1} = λ ⊙ h_t + g_in(x_t), y_t = D g_out(h_t). We read the output from the
state *after* it has absorbed x_t (y_t = D g_out(h_t) with h_t containing g_in(x_t)), so that a neuron with
λ = 0 holds the current token and the layer can implement causal attention including the current token, as
the construction of Sec. 2 / Fig. 1 needs (queries come from λ = 0 neurons, key-values from λ = 1 neurons).
No biases (as in the paper): a construction that needs one appends a constant 1 to x itself.

λ exactly 0 or 1. The parametrisation exp(-exp(ν)) reaches λ = 1 only at ν = -inf and λ = 0 only at
ν = +inf, which validation rejects. Constructions therefore pass ``lam=`` to ``forward`` / ``step_forward``:
an (H,) array in [0, 1] used instead of exp(-exp(ν)); ``nu`` is then unused and its gradient is zero.

Glossary (shapes): B batch, T time, D_in input features, H recurrent neurons, H_out output-gate neurons,
D_out output features.
    x        (B, T, D_in)         W_in_m, W_in_x    (H, D_in)
    nu       (H,)   ["diagonal"]  A                 (H, H)   ["dense"]
    W_out_m, W_out_x (H_out, H)   D                 (D_out, H_out)
    y        (B, T, D_out)

The diagonal recurrence runs on ``minimal.scan.linear_scan`` (``method`` / ``backend`` are passed through;
None means the defaults of ``minimal.conventions``: method "auto", the fastest for the backend, the sequential
Numba loop on the CPU, faster than the Blelloch tree on one core (``python -m minimal bench scan`` times both),
and backend "numba"; ``method="blelloch"`` runs the tree); the dense one on a plain loop over time. Both, with
their adjoints and the closed form below, are in ``cells/_gated_rnn_recurrence.py`` (beside this file).

``readout="last"`` computes y only at the last step, y_T = D g_out(h_T), for losses that read only the final
token (the in-context regression query, Sec. 4.2): the output gating then runs on one state per sequence
instead of T, and the diagonal state is the closed form of the recurrence,

    h_T = Σ_t λ^{T-t} ⊙ g_in(x_t),     dh_T/dλ = Σ_t (T-t) λ^{T-t-1} ⊙ g_in(x_t),

with no scan. The tests check it equals the last step of ``readout="all"``, gradients included. ``step_forward`` is the
sequential (RNN) mode, one token at a time; the tests show it equals the scan mode.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._gated_rnn_recurrence import dense_adjoint, diagonal_scan_backward, flat, last_state_backward, \
    recurrence_backward, recurrence_forward
from ..scan.checks import check_out
from ..conventions import check_unused, choose
from ..validate import InputError, check_array, check_choice, check_dtype, check_finite_result, check_positive_int, \
    check_grad_dtype, common_dtype
from ..contract import Example

__all__ = ["init", "forward", "backward", "backward_reference", "step_forward", "examples", "lam_from_nu",
           "nu_from_lam", "dlam_dnu", "RECURRENCES", "READOUTS"]

RECURRENCES = ("diagonal", "dense")
READOUTS = ("all", "last")


def lam_from_nu(nu):
    """λ = exp(-exp(ν)), elementwise; in (0, 1) for finite ν (0 once exp(ν) overflows, ν > 709 in float64)."""
    with np.errstate(over="ignore"):  # exp(ν) = inf gives λ = exp(-inf) = 0, the right limit
        return np.exp(-np.exp(nu))


def dlam_dnu(nu):
    """dλ/dν = -exp(ν) λ, evaluated as -exp(ν - exp(ν)): one exponential, so where exp(ν) overflows (λ = 0)
    it is 0 instead of -inf · 0 = NaN."""
    with np.errstate(over="ignore"):
        return -np.exp(nu - np.exp(nu))


def nu_from_lam(lam):
    """Inverse of ``lam_from_nu`` for λ in (0, 1): ν = log(-log λ)."""
    return np.log(-np.log(lam))


def init(rng, d_in, d_hidden, d_out, d_gate=None, recurrence="diagonal", lam_min=0.0, lam_max=0.999):
    """Random parameters.

    Args:
        rng: ``numpy.random.Generator``.
        d_in: input features D_in; d_hidden: recurrent neurons H; d_out: output features D_out;
        d_gate: output-gate neurons H_out (default H).
        recurrence: "diagonal" (param ``nu``) or "dense" (param ``A``).
        lam_min, lam_max: λ drawn from U[lam_min, lam_max] (diagonal) or the spectral radius of A scaled
            to lam_max (dense). Defaults as in the project's training notes (U[0, 0.999]).
    Returns:
        dict with "W_in_m", "W_in_x" (H, D_in), "nu" (H,) or "A" (H, H), "W_out_m", "W_out_x" (H_out, H),
        "D" (D_out, H_out); float64. Gaussian weights with variance 1 / fan-in.
    """
    d_in = check_positive_int("d_in", d_in)
    H = check_positive_int("d_hidden", d_hidden)
    d_out = check_positive_int("d_out", d_out)
    H_out = H if d_gate is None else check_positive_int("d_gate", d_gate)
    check_choice("recurrence", recurrence, RECURRENCES)
    if not 0.0 <= lam_min <= lam_max < 1.0:
        raise ValueError(f"lam_min, lam_max must satisfy 0 <= lam_min <= lam_max < 1, got {lam_min}, {lam_max}")

    def gauss(shape, fan_in):
        return rng.standard_normal(shape) / np.sqrt(fan_in)

    params = {"W_in_m": gauss((H, d_in), d_in), "W_in_x": gauss((H, d_in), d_in)}
    if recurrence == "diagonal":
        # Keep λ strictly inside (0, 1) so that ν is finite.
        lam = np.clip(rng.uniform(lam_min, lam_max, H), 1e-12, None)
        params["nu"] = nu_from_lam(lam)
    else:
        A = gauss((H, H), H)
        radius = np.max(np.abs(np.linalg.eigvals(A)))
        params["A"] = A * (lam_max / radius)
    params["W_out_m"] = gauss((H_out, H), H)
    params["W_out_x"] = gauss((H_out, H), H)
    params["D"] = gauss((d_out, H_out), H_out)
    return params


class Cache(NamedTuple):
    x: np.ndarray        # (B, T, D_in)
    p: np.ndarray        # (B, T, H)  W_in_m x
    q: np.ndarray        # (B, T, H)  W_in_x x
    lam: np.ndarray      # (H,) λ used ("diagonal"), None for "dense"
    lam_given: bool      # λ came from the ``lam`` override, so ν gets no gradient
    h: np.ndarray        # (B, T, H)  states after absorbing x_t
    r: np.ndarray        # (B, T, H_out)  W_out_m h
    s: np.ndarray        # (B, T, H_out)  W_out_x h
    method: str
    backend: str
    readout: str = "all"      # "last": h, r, s hold the last step only, (B, 1, ·)
    h_all: np.ndarray = None  # (B, T, H) every state, kept for a dense recurrence with readout "last"


def _recurrence(params):
    has_nu, has_A = "nu" in params, "A" in params
    if has_nu == has_A:
        raise ValueError("params must contain exactly one of 'nu' (diagonal recurrence) or 'A' (dense "
                         f"recurrence), got keys {sorted(params)}")
    return "diagonal" if has_nu else "dense"


def _check_params(params):
    """Validate every param's shape against W_in_m, and that they share one dtype (the first key's, as for
    every cell: an input of another dtype is refused, not promoted); return (recurrence, D_in, H, H_out,
    D_out, dtype)."""
    recurrence = _recurrence(params)
    want = {"W_in_m", "W_in_x", "W_out_m", "W_out_x", "D", "nu" if recurrence == "diagonal" else "A"}
    if set(params) != want:
        raise ValueError(f"params must have exactly the keys {sorted(want)}, got {sorted(params)}")
    W_in_m = check_array("W_in_m", params["W_in_m"], ndim=2, names=("H", "D_in"))
    H, D_in = W_in_m.shape
    check_array("W_in_x", params["W_in_x"], (H, D_in), names=("H", "D_in"))
    if recurrence == "diagonal":
        check_array("nu", params["nu"], (H,), names=("H",))
    else:
        check_array("A", params["A"], (H, H), names=("H", "H"))
    W_out_m = check_array("W_out_m", params["W_out_m"], (None, H), names=("H_out", "H"))
    H_out = W_out_m.shape[0]
    check_array("W_out_x", params["W_out_x"], (H_out, H), names=("H_out", "H"))
    D = check_array("D", params["D"], (None, H_out), names=("D_out", "H_out"))
    return recurrence, D_in, H, H_out, D.shape[0], common_dtype(params)


def _resolve_lam(params, recurrence, H, lam):
    """λ for a diagonal recurrence: the ``lam`` override if given, else exp(-exp(ν))."""
    if lam is None:
        return (lam_from_nu(params["nu"]), False) if recurrence == "diagonal" else (None, False)
    if recurrence != "diagonal":
        raise ValueError("lam overrides λ of a diagonal recurrence; params have a dense 'A'")
    check_array("lam", lam, (H,), names=("H",))
    if np.any(lam < 0.0) or np.any(lam > 1.0):
        raise ValueError(f"lam must lie in [0, 1], got values in [{lam.min()}, {lam.max()}]")
    return lam, True


def _recurrence_grad(params, d_rec, lam_given):
    """{"A": dA} for a dense recurrence; {"nu": dν}, dν = dλ dλ/dν (0 when λ came from ``lam``), for a diagonal one."""
    if "A" in params:
        return {"A": d_rec}
    return {"nu": np.zeros_like(params["nu"]) if lam_given else d_rec * dlam_dnu(params["nu"])}


def forward(params, x, lam=None, method=None, backend=None, readout="all", out=None):
    """Run the layer over a whole sequence (scan mode).

    Args:
        params: as returned by ``init``, all of one dtype.
        x: (B, T, D_in) float input of the params' dtype (refused otherwise, not promoted).
        lam: optional (H,) array in [0, 1] used as λ instead of exp(-exp(ν)) (diagonal recurrence only;
            lets constructions put λ exactly at 0 or 1); cast to the params' dtype, which keeps 0 and 1.
        method, backend: the scan algorithm and what runs it, passed to ``minimal.scan.linear_scan`` (diagonal
            recurrence only); None: the defaults of ``minimal.conventions``, "auto" (the fastest for the backend,
            module docstring) and "numba"; "blelloch" or "sequential" to choose; a method other than the default
            where no scan runs (dense recurrence, readout "last") is refused.
        readout: "all" (y at every step) or "last" (y_T only; module docstring).
        out: None, or a (B, T, H) array of the params' dtype that receives the states h (``linear_scan``'s
            ``out=``; diagonal recurrence, readout "all", backends "numpy" and "numba"). A training loop that
            passes one buffer every step reuses its memory instead of a fresh array's page faults; the cache
            then holds ``out``, so run ``backward`` before ``out`` is written again.
    Returns:
        y: (B, T, D_out), y_t = D g_out(h_t), or (B, 1, D_out) for readout "last"; cache for ``backward``.
    Raises:
        InputError: a bad argument, or finite inputs too large for the dtype (y or the gated input would be
            inf), naming x and the params with their largest values.
    """
    recurrence, D_in, H, H_out, D_out, dtype = _check_params(params)
    check_array("x", x, (None, None, D_in), names=("B", "T", "D_in"))
    check_dtype("x", x, dtype)
    if x.shape[1] < 1:
        raise ValueError(f"x must have at least one time step, got shape {x.shape}")
    lam, lam_given = _resolve_lam(params, recurrence, H, lam)
    readout = check_choice("readout", readout, READOUTS)
    method, backend = choose("method", method, "gated_rnn.forward"), choose("backend", backend, "gated_rnn.forward")
    if recurrence != "diagonal" or readout != "all":
        check_unused("method", method, "gated_rnn.forward", f"recurrence {recurrence!r} with readout {readout!r} "
                     f"runs no scan; only the diagonal recurrence with readout 'all' does")
    if out is not None:
        if recurrence != "diagonal" or readout != "all":
            raise InputError(f"out receives the scan's states, which only the diagonal recurrence with "
                             f"readout='all' computes; got recurrence {recurrence!r}, readout {readout!r}: pass "
                             f"out=None")
        if backend == "cuda":
            raise InputError("out is not supported with backend='cuda' (the scan returns a new array): pass "
                             "out=None")
        check_out(out, x.shape[:2] + (H,), dtype, {"x": x}, like="the states h (B, T, H)")

    # Every weight product runs on (B T, ·) views: one BLAS call each instead of one per batch row.
    B, T = x.shape[:2]
    xf = flat(x)
    p = (xf @ params["W_in_m"].T).reshape(B, T, H)          # W_in_m x
    q = (xf @ params["W_in_x"].T).reshape(B, T, H)          # W_in_x x
    b = p * q                                               # g_in(x_t)
    # the recurrence (_gated_rnn_recurrence.py): h (B, T, H), or h_T (B, 1, H) for readout "last"
    h, h_all = recurrence_forward(params.get("A"), lam, b, readout, method, backend, out, _inputs(params, x))
    T_out = h.shape[1]
    hf = flat(h)
    r = (hf @ params["W_out_m"].T).reshape(B, T_out, H_out)     # W_out_m h
    s = (hf @ params["W_out_x"].T).reshape(B, T_out, H_out)     # W_out_x h
    y = (flat(r * s) @ params["D"].T).reshape(B, T_out, D_out)
    check_finite_result("the output y", y, _inputs(params, x))
    return y, Cache(x, p, q, lam, lam_given, h, r, s, method, backend, readout, h_all)


def _inputs(params, x, x_name="x"):
    """What the caller gave, for an overflow message: x (or dy) first, then the params."""
    return {x_name: x, **params}


def backward(params, cache, dy):
    """Gradients of a scalar loss L given dy = dL/dy of shape (B, T, D_out).

    Every weight gradient is one (F, B T) x (B T, F') BLAS matmul (np.einsum over (b, t) runs without BLAS
    and took 3/4 of a training step); ``backward_reference`` is the same algebra in einsum form, which the
    tests compare this against.

    Returns:
        dx: (B, T, D_in); grads: dict with the keys of params (dL/dν = 0 when λ came from ``lam``).
    Raises:
        InputError: dy too large for the dtype (a gradient would be inf), naming dy, x and the params.
    """
    x, p, q, lam, lam_given, h, r, s, method, backend = cache[:10]
    check_array("dy", dy, h.shape[:2] + (params["D"].shape[0],), names=("B", "T", "D_out"))
    check_grad_dtype("dy", dy, params)
    B, T_out, H = h.shape
    hf, dyf = flat(h), flat(dy)
    grads = {}
    # 4. readout y = D o, o = r ⊙ s
    grads["D"] = dyf.T @ flat(r * s)
    do = (dyf @ params["D"]).reshape(r.shape)       # (B, T, H_out)
    # 3. output gating r = W_out_m h, s = W_out_x h
    dr, ds = flat(do * s), flat(do * r)             # (B T, H_out)
    grads["W_out_m"] = dr.T @ hf
    grads["W_out_x"] = ds.T @ hf
    dh = (dr @ params["W_out_m"] + ds @ params["W_out_x"]).reshape(B, T_out, H)
    # 2. recurrence: the adjoint is a reverse-time scan (_gated_rnn_recurrence.py), dλ or dA, then dν
    d_rec, db = recurrence_backward(params.get("A"), cache, dh, _backward_inputs(params, x, dy))
    grads.update(_recurrence_grad(params, d_rec, lam_given))
    # 1. input gating b = p ⊙ q, p = W_in_m x, q = W_in_x x
    xf = flat(x)
    dp, dq = flat(db * q), flat(db * p)             # (B T, H)
    grads["W_in_m"] = dp.T @ xf
    grads["W_in_x"] = dq.T @ xf
    dx = dp @ params["W_in_m"] + dq @ params["W_in_x"]
    check_finite_result("the gradients", (dx, *grads.values()), _backward_inputs(params, x, dy))
    return dx.reshape(x.shape), {k: grads[k] for k in params}


def _backward_inputs(params, x, dy):
    return {"dy": dy, "x": x, **params}


def backward_reference(params, cache, dy):
    """``backward`` written with np.einsum over (b, t): the plain form of the same equations, kept as the
    reference the fast path is tested against (slow: einsum does not call BLAS here)."""
    x, p, q, lam, lam_given, h, r, s, method, backend = cache[:10]
    check_array("dy", dy, h.shape[:2] + (params["D"].shape[0],), names=("B", "T", "D_out"))
    check_grad_dtype("dy", dy, params)
    grads = {}
    # 4. readout y = D o, o = r ⊙ s
    grads["D"] = np.einsum("btk,btj->kj", dy, r * s)
    do = dy @ params["D"]                           # (B, T, H_out)
    # 3. output gating r = W_out_m h, s = W_out_x h
    dr, ds = do * s, do * r
    grads["W_out_m"] = np.einsum("btk,bth->kh", dr, h)
    grads["W_out_x"] = np.einsum("btk,bth->kh", ds, h)
    dh = dr @ params["W_out_m"] + ds @ params["W_out_x"]   # (B, T, H)
    # 2. recurrence
    if cache.readout == "last":
        d_rec, db = last_state_backward(params.get("A"), cache, dh)
    elif "nu" in params:
        d_rec, db = diagonal_scan_backward(lam, h, dh, method, backend)
    else:
        g = dense_adjoint(params["A"], dh)
        h_prev = np.concatenate([np.zeros_like(h[:, :1]), h[:, :-1]], axis=1)
        d_rec, db = np.einsum("bti,btj->ij", g, h_prev), g
    grads.update(_recurrence_grad(params, d_rec, lam_given))
    # 1. input gating b = p ⊙ q, p = W_in_m x, q = W_in_x x
    dp, dq = db * q, db * p
    grads["W_in_m"] = np.einsum("bth,btd->hd", dp, x)
    grads["W_in_x"] = np.einsum("bth,btd->hd", dq, x)
    dx = dp @ params["W_in_m"] + dq @ params["W_in_x"]
    return dx, {k: grads[k] for k in params}


def step_forward(params, x_t, h_prev, lam=None):
    """One step of the sequential (RNN) mode.

    Args:
        x_t: (B, D_in) the input at step t; h_prev: (B, H) the state h_{t-1} (zeros at t = 1).
        lam: optional (H,) λ override in [0, 1], as in ``forward``.
    Returns:
        (y_t, h_t): (B, D_out) and (B, H).
    """
    recurrence, D_in, H, H_out, D_out, dtype = _check_params(params)
    check_dtype("x_t", check_array("x_t", x_t, (None, D_in), names=("B", "D_in")), dtype)
    check_dtype("h_prev", check_array("h_prev", h_prev, (x_t.shape[0], H), names=("B", "H")), dtype)
    lam, _ = _resolve_lam(params, recurrence, H, lam)
    g_in = (x_t @ params["W_in_m"].T) * (x_t @ params["W_in_x"].T)
    if recurrence == "diagonal":
        h_t = lam * h_prev + g_in
    else:
        h_t = h_prev @ params["A"].T + g_in
    y_t = ((h_t @ params["W_out_m"].T) * (h_t @ params["W_out_x"].T)) @ params["D"].T
    check_finite_result("the output y_t", y_t, {"x_t": x_t, "h_prev": h_prev, **params})
    return y_t, h_t


def examples(rng):
    """Tiny float64 cases: T = 1, odd T, the dense variant, λ given exactly (0, 1 and in between), readout "last"."""
    out = []
    for name, T, kw, cfg in [
        ("diagonal-T1", 1, {}, {}),
        ("diagonal-T5", 5, {}, {}),
        ("diagonal-T4-sequential", 4, {"method": "sequential", "backend": "numpy"}, {"d_gate": 2}),
        ("diagonal-T7-numpy-blelloch", 7, {"method": "blelloch", "backend": "numpy"}, {}),
        ("dense-T3", 3, {}, {"recurrence": "dense"}),
        ("diagonal-T6-readout-last", 6, {"readout": "last"}, {}),
        ("dense-T4-readout-last", 4, {"readout": "last"}, {"recurrence": "dense"}),
    ]:
        params = init(rng, d_in=3, d_hidden=4, d_out=2, **cfg)
        out.append(Example(name, params, rng.standard_normal((2, T, 3)), kw))
    params = init(rng, d_in=3, d_hidden=4, d_out=2)
    out.append(Example("lam-override-T3", params, rng.standard_normal((2, 3, 3)),
                       {"lam": np.array([0.0, 1.0, 0.5, 1.0])}))
    out.append(Example("lam-override-T4-readout-last", params, rng.standard_normal((2, 4, 3)),
                       {"lam": np.array([0.0, 1.0, 0.5, 1.0]), "readout": "last"}))
    return out
