"""The GRIL block's unfused NumPy path, on the windows C (``minimal.cells.gril``: backend="numpy", kernel="unfused",
and the sequential mode). Private: call it through ``gril.forward`` / ``gril.backward`` / ``gril.step_forward`` /
``gril.step_backward``, which check the arguments, gather the windows from x (``gril.window``), scatter dC back onto
x (``gril.window_backward``) and keep the cache. By default ``gril`` runs the fused Numba kernels of
``_gril_numba.py`` instead; this is the reference they are tested against.

Tian et al., Def. 4.2, with the conventions of ``minimal.cells.gril``:

    U_k = C_k Q C_k^T,   Z_k = A ⊙ Z_{k-1} + U_k (Z_{-1} = 0),   o_k = β ⊙ (Z_k r_k),
    r_k = C_k q (readout "window", the paper's)  or  r_k = u for every k (readout "state": the params hold u, not q)

    parallel    ``states``: every U_k at once, Z through ``minimal.scan.linear_scan`` as a (B, T', f*f) recurrence
                with a_k = A for every k; then the readout. ``states_backward`` is the scan's reverse-time adjoint.
    sequential  ``step`` once per window with the state Z; the backward chains ``step_backward`` in reverse.

Glossary: B batch, T' windows, f features, w window width.
Params: Q (w, w), q (w,) or u (f,), beta (1,) or (f,), A (f, f).
"""
from __future__ import annotations

import numpy as np

from ..scan import linear_scan, linear_scan_backward
from ..validate import InputError, OverflowInputError, check_finite_result, overflow_error

__all__ = ["guard", "step", "step_backward", "states", "states_backward", "parallel_forward", "sequential_forward",
           "parallel_backward", "sequential_backward"]


def guard(what, run, internal, inputs):
    """``run()``; if a scan or ``window_backward`` refuses an internal array (``internal``) as non-finite, or
    its own arithmetic overflowed, the overflow came from the caller's ``inputs``: name those instead."""
    try:
        return run()
    except InputError as e:
        check_finite_result(what, internal, inputs)
        if isinstance(e, OverflowInputError):
            raise overflow_error(what, inputs) from None
        raise


def step(params, Z_prev, C_t):
    """One window, unchecked (``gril.step_forward``): (o_t (B, f), Z_t (B, f, f)) from Z_prev (B, f, f), C_t (B, f, w)."""
    U_t = C_t @ params["Q"] @ C_t.transpose(0, 2, 1)  # (B, f, f)
    Z_t = params["A"] * Z_prev + U_t
    o_t = params["beta"] * np.einsum("bij,bj->bi", Z_t, _readout_vector(params, C_t))
    return o_t, Z_t


def step_backward(params, Z_prev, C_t, do_t, dZ_t):
    """Vector-Jacobian product of ``step``, unchecked (``gril.step_backward``): (dZ_prev, dC_t, grads)."""
    Q, beta, A = params["Q"], params["beta"], params["A"]
    # Z_t and the readout vector are cheap to recompute and are not stored.
    U_t = C_t @ Q @ C_t.transpose(0, 2, 1)
    Z_t = A * Z_prev + U_t
    r_t = _readout_vector(params, C_t)  # (B, f)
    m_t = np.einsum("bij,bj->bi", Z_t, r_t)
    # 3. o_t = β ⊙ (Z_t r_t), r_t = C_t q (or u)
    dbeta = (do_t * m_t).sum(axis=0)
    dbeta = dbeta.sum(keepdims=True) if beta.shape == (1,) else dbeta
    dm = beta * do_t
    G = dZ_t + dm[:, :, None] * r_t[:, None, :]  # total dL/dZ_t
    dr = np.einsum("bij,bi->bj", Z_t, dm)
    if "q" in params:
        dread, dC_t = {"q": np.einsum("bfw,bf->w", C_t, dr)}, dr[:, :, None] * params["q"][None, None, :]
    else:
        dread, dC_t = {"u": dr.sum(axis=0)}, 0.0
    # 2. Z_t = A ⊙ Z_prev + U_t
    dA = (G * Z_prev).sum(axis=0)
    dZ_prev = A * G
    # 1. U_t = C_t Q C_t^T
    dQ = (C_t.transpose(0, 2, 1) @ G @ C_t).sum(axis=0)
    dC_t = dC_t + G @ C_t @ Q.T + G.transpose(0, 2, 1) @ C_t @ Q
    return dZ_prev, dC_t, {"Q": dQ, **dread, "beta": dbeta, "A": dA}


def _readout_vector(params, C):
    """r of the readout o = β ⊙ (Z r): C q (readout "window") or u at every window (readout "state"); (..., f)."""
    return C @ params["q"] if "q" in params else np.broadcast_to(params["u"], C.shape[:-1])


def _a(A, shape):
    """A (f, f) written out at every window as the scan's (B, T', f*f) coefficients (it takes no broadcasting)."""
    a = np.empty(shape, dtype=A.dtype)
    a[...] = A.reshape(1, 1, -1)
    return a


def states(Q, A, C, scan_kwargs, inputs):
    """The states after every window, Z (B, T', f, f), from the windows C (B, T', f, w) (``gril.states``).

    scan_kwargs: method and backend of ``linear_scan``; inputs: what the caller gave, named if the scan overflows.
    """
    B, T_out, f, _ = C.shape
    b = (C @ Q @ C.transpose(0, 1, 3, 2)).reshape(B, T_out, f * f)  # U (B, T', f, f), flattened for the scan
    return guard("the window updates U = C Q C^T", lambda: linear_scan(_a(A, b.shape), b, **scan_kwargs), b,
                 inputs).reshape(B, T_out, f, f)


def states_backward(Q, A, C, Z, dZ, scan_kwargs, inputs, dC=0.0):
    """Adjoint of ``states`` (``gril.states_backward``): (dQ, dA, dC) from dZ (B, T', f, f) dL/dZ; ``dC`` (the
    windows' gradient through another path, the readout) is added to in place of zeros."""
    B, T_out, f, _ = C.shape
    # 2. Z = scan(a = A at every step, b = U): the adjoint is a reverse-time scan.
    da, dU, _ = guard("the gradient dL/dZ",
                      lambda: linear_scan_backward(_a(A, (B, T_out, f * f)), Z.reshape(B, T_out, f * f),
                                                   dZ.reshape(B, T_out, f * f), **scan_kwargs), dZ, inputs)
    dA = da.sum(axis=(0, 1)).reshape(f, f)
    dU = dU.reshape(B, T_out, f, f)
    # 1. U = C Q C^T
    dQ = (C.transpose(0, 1, 3, 2) @ dU @ C).sum(axis=(0, 1))
    dC = dC + dU @ C @ Q.T + dU.transpose(0, 1, 3, 2) @ C @ Q
    return dQ, dA, dC


def parallel_forward(params, C, scan_kwargs, inputs):
    """Every window at once.

    Args:
        C: (B, T', f, w) the windows; scan_kwargs: method and backend of ``linear_scan``; inputs: what the caller
        gave (x and the params), named if the scan overflows.
    Returns:
        o (B, T', f) and the states Z (B, T', f, f).
    """
    Z = states(params["Q"], params["A"], C, scan_kwargs, inputs)
    o = params["beta"] * np.einsum("btij,btj->bti", Z, _readout_vector(params, C))
    return o, Z


def sequential_forward(params, C):
    """``step`` once per window: o (B, T', f) and Z (B, T', f, f) from C (B, T', f, w)."""
    B, T_out, f, _ = C.shape
    Z = np.empty((B, T_out, f, f), dtype=np.result_type(C, params["A"], params["Q"]))
    o = np.empty((B, T_out, f), dtype=Z.dtype)
    Z_t = np.zeros((B, f, f), dtype=Z.dtype)
    for k in range(T_out):
        o[:, k], Z_t = step(params, Z_t, C[:, k])
        Z[:, k] = Z_t
    return o, Z


def parallel_backward(params, C, Z, do, scan_kwargs, inputs):
    """Gradients of ``parallel_forward``: dC (B, T', f, w) and {Q, q, beta, A}, given do (B, T', f) dL/do and
    what the caller gave (``inputs``: do, x, the params), named if the reverse scan overflows."""
    beta = params["beta"]
    # 3. o = β ⊙ (Z r), r = C q (or u)
    r = _readout_vector(params, C)  # (B, T', f), recomputed: cheaper to redo than to store
    m = np.einsum("btij,btj->bti", Z, r)
    dbeta = (do * m).sum(axis=(0, 1))
    dbeta = dbeta.sum(keepdims=True) if beta.shape == (1,) else dbeta
    dm = beta * do
    dZ = dm[..., :, None] * r[..., None, :]  # (B, T', f, f)
    dr = np.einsum("btij,bti->btj", Z, dm)
    if "q" in params:
        dread, dC = {"q": np.einsum("btfw,btf->w", C, dr)}, dr[..., :, None] * params["q"]
    else:
        dread, dC = {"u": dr.sum(axis=(0, 1))}, 0.0
    # 2.-1. Z = scan(A, U = C Q C^T)
    dQ, dA, dC = states_backward(params["Q"], params["A"], C, Z, dZ, scan_kwargs, inputs, dC)
    return dC, {"Q": dQ, **dread, "beta": dbeta, "A": dA}


def sequential_backward(params, C, Z, do):
    """Gradients of ``sequential_forward``, ``step_backward`` in reverse over the windows: dC and {Q, q, beta, A}."""
    B, T_out, f, _ = C.shape
    grads = {name: np.zeros_like(p) for name, p in params.items()}
    dC = np.empty_like(C)
    dZ = np.zeros((B, f, f), dtype=Z.dtype)
    for k in reversed(range(T_out)):
        Z_prev = Z[:, k - 1] if k > 0 else np.zeros_like(dZ)
        dZ, dC[:, k], g = step_backward(params, Z_prev, C[:, k], do[:, k], dZ)
        for name in grads:
            grads[name] += g[name]
    return dC, grads
