"""The GRIL block: windowed cross-product update, diagonal (elementwise) accumulation, multiplicative readout.
Tian et al., "Learning in the Recurrent State: Gradient Descent with Linear Recurrent Networks"
(arXiv:2410.11687, Def. 4.2, Eq. 9-10):

    C_k = [x_{ks}, x_{ks+1}, ..., x_{ks+w-1}]      (f, w)   window k: w consecutive tokens, stride s
    U_k = C_k Q C_k^T                               (f, f)   cross products of the tokens in the window
    Z_k = A ⊙ Z_{k-1} + U_k,   Z_{-1} = 0            (f, f)   elementwise decay A, one scalar state per entry
    o_k = β ⊙ (Z_k C_k q)                           (f,)     multiplicative readout of the window

Window k ends at input step t_k = k s + w - 1: its newest token is column w - 1 of C_k, its oldest column 0.
Windows start only when full (no zero padding), so there are T' = (T - w) / s + 1 of them and output k
belongs to input step t_k. We require the last window to end at the last token, (T - w) % s == 0; otherwise
the trailing tokens would be dropped silently, and a ValueError says so instead. Checked against the paper:
Def. 4.2 fixes C_t (f, w), Eq. 10 the cross-product and the readout β Z_t C_t q, but not the edges; Prop. 4.1
and Eq. 9 use w = 3, stride 2 on the interleaved tokens s_{2j} = x_j, s_{2j+1} = y_j, so that
C_j = [x_j, y_j, x_{j+1}] with the oldest token in column 0 and the query x_{j+1} in the last column (q = e_3
selects it). Full windows are our convention for the edges; for the interleaved sequences of length 2N + 1
(``minimal.tasks.gril_regression``) they give exactly the paper's N windows.

With Q = e_2 e_1^T (U_j = y_j x_j^T, Eq. 7 and 10), q = e_3, A = 1 and β = η/N, the last output is
(η/N) Σ_j y_j x_j^T x_{N+1}: one step of gradient descent from W = 0 applied to the query (Prop. 4.1;
``minimal.constructions.gd_as_gril``). With w = 1 the block is linear attention's single-token outer product (Sec. 4.5).

Two modes of one function (``mode``; the words and their defaults: ``minimal.conventions``):
    parallel    (default) every window at once: the updates U_k, the recurrence of Z over windows, the readout.
    sequential  one ``step_forward`` per window with the state Z (the recurrent form used at inference), NumPy.
The parallel mode runs one of two kernels (``kernel``), on the ``backend``:
    "unfused"   build every C_k and U_k in NumPy, run Z through ``minimal.scan.linear_scan`` as a (B, T', f*f)
                recurrence with a_k = A for every k (``method``: the scan algorithm; ``backend`` "numpy" or
                "numba" runs the scan), then read out: ``cells/_gril_unfused.py`` (beside this file), on the
                windows this file gathers; the sequential mode's step loop is there too.
    "fused"     one pass over the windows. backend="numba": the CPU kernels of ``cells/_gril_numba.py`` (beside this file), one
                pass per batch element, U_k formed from x on the fly and Z in an (f, f) buffer; the states
                (B, T', f, f) are stored for the backward (a fused reverse pass), and x is kept in the cache
                instead of C. Inference without the stored states: ``_gril_numba.gril_forward(...,
                return_Z=False)``. There is no fused NumPy kernel: backend="numpy" is the unfused reference.
    "auto"      (the default) "fused" on backend "numba", "unfused" on "numpy", and on "cuda" fused for f <= 32;
                "unfused" for readout "state" (below).
backend="cuda" runs the whole block on the GPU with ``cuda_kernels.window`` (called from ``cells/_gril_cuda.py``):
the forward is the fused kernel (one thread per entry of Z, f <= 32, T split into segments across blocks, that
module's v3) or the unfused one (updates, that module's own Blelloch scan over windows, readout; so ``method``
stays at its default); the backward is that module's default (the fused v2 for f <= 32, else the elementwise
kernels). x and Z go to the device once and stay there (in the cache) from the forward to the backward; o, dx and
the gradients come back as NumPy arrays. The params must then have x's dtype (the kernels do not cast).

Two readouts (``readout``): "window" (the default) is the paper's o_k = β ⊙ (Z_k C_k q); "state" reads the state
on its own, o_k = β ⊙ (Z_k u) with a learned u (f,) in the params instead of q, the "multiplicative output off"
ablation of Tables 5-6 (App. C; ``experiments/gril/model.py``). It runs in sequential mode and on the unfused
kernel only. ``states`` / ``states_backward`` give the states Z_k themselves and their adjoint (the unfused path's
scan, no readout), for models that read Z in their own way (the L-layer GD stack, ``experiments/gril/stack.py``).

Glossary: B batch, T input steps, f features per token, w window width, s stride, T' number of windows.
Params: Q (w, w), q (w,) (or u (f,)), beta (1,) for a scalar β or (f,) for one β per output feature, A (f, f).
The block has no input projection of its own: tokens come from ``minimal.layers`` (Embedding, Linear).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _gril_checks, _gril_cuda, _gril_unfused
from ..conventions import CHOICES, check_unused, choose
from ..scan.reference import sequential_scan
from ..validate import InputError, check_array, check_dtype, check_grad_dtype, check_finite_result, \
    check_positive_int
from ..contract import Example

__all__ = ["init", "forward", "backward", "step_forward", "step_backward", "states", "states_backward", "examples",
           "window", "window_backward", "n_windows", "gril_forward_reference", "MODES"]

MODES = CHOICES["mode"]


class Cache(NamedTuple):
    mode: str
    T: int  # input length, to scatter dC back onto x
    s: int
    C: np.ndarray  # (B, T', f, w) windows; None on the CUDA path, whose kernels index x directly
    Z: np.ndarray  # (B, T', f, f) states after each window; a device array on the CUDA path
    scan_kwargs: dict  # method / backend passed to the scan (parallel mode)
    x_device: object = None  # the CUDA path's device copy of x (B, T, f), reused by the backward
    x: np.ndarray = None  # the fused Numba path's x (B, T, f) (C is None there: its kernels index x directly)
    readout: str = "window"


# ----------------------------------------------------------------------------------------- windows
def n_windows(T, w, s):
    """T' = (T - w) / s + 1, the number of full windows; ValueError unless they tile x exactly.

    Raises:
        ValueError: naming ``w`` when w > T, ``s`` when s < 1, ``T`` when (T - w) % s != 0.
    """
    # The one definition: cuda_kernels.window imports it, and _gril_numba runs only after it has checked T, w, s.
    w = check_positive_int("w", w)
    s = check_positive_int("s", s)
    if w > T:
        raise ValueError(f"w must be <= T (a window cannot be wider than the sequence), got w={w}, T={T}")
    if (T - w) % s != 0:
        raise ValueError(f"T must satisfy (T - w) % s == 0 so that the last window ends at the last token, "
                         f"got T={T}, w={w}, s={s}; pad or trim the sequence explicitly")
    return (T - w) // s + 1


def window(x, w, s):
    """The windows C_k of Def. 4.2.

    Args:
        x: (B, T, f) tokens.
        w: window width (tokens per window), 1 <= w <= T.
        s: stride between consecutive windows, >= 1, with (T - w) % s == 0.
    Returns:
        C: (B, T', f, w), C[b, k, :, j] = x[b, k s + j, :] (column w - 1 is the newest token).
    """
    check_array("x", x, ndim=3, names=("B", "T", "f"))
    idx = s * np.arange(n_windows(x.shape[1], w, s))[:, None] + np.arange(w)[None, :]  # (T', w): k s + j
    return x[:, idx, :].transpose(0, 1, 3, 2)  # gather (B, T', w, f), then features first


def window_backward(dC, T, w, s):
    """Adjoint of ``window``: scatter-add each window's gradient back onto its tokens.

    Args:
        dC: (B, T', f, w) dL/dC, T' = (T - w) / s + 1.
        T, w, s: the input length, window width and stride of the forward.
    Returns:
        dx: (B, T, f). A token in several windows (s < w) receives the sum of their gradients.
    """
    T = check_positive_int("T", T)
    T_out = n_windows(T, w, s)
    check_array("dC", dC, (None, T_out, None, w), names=("B", "T'", "f", "w"))
    B, _, f, _ = dC.shape
    dx = np.zeros((B, T, f), dtype=dC.dtype)
    steps = s * np.arange(T_out)
    for j in range(w):
        # within one column j the steps k s + j are distinct, so a fancy-index += does not lose updates;
        # the overlap between windows is summed across the loop over j.
        dx[:, steps + j] += dC[:, :, :, j]
    return dx


# ------------------------------------------------------------------------------------ the block
def init(rng, f, w, per_feature_beta=False, readout="window"):
    """Random GRIL parameters.

    Args:
        f: features per token; w: window width.
        per_feature_beta: one β per output feature (beta (f,)) instead of a scalar (beta (1,)).
        readout: "window" (q) or "state" (u instead of q; module docstring).
    Returns:
        Q (w, w) and q (w,) with entries N(0, 1/w) (or u (f,), N(0, 1/f)); beta ones; A (f, f) uniform in
        [0.9, 1), a slow decay near the A = 1 of the gradient-descent construction.
    """
    f, w, readout = check_positive_int("f", f), check_positive_int("w", w), _gril_checks.check_readout(readout)
    p = {"Q": rng.standard_normal((w, w)) / np.sqrt(w),
         "q": rng.standard_normal(w) / np.sqrt(w),
         "beta": np.ones(f if per_feature_beta else 1),
         "A": rng.uniform(0.9, 1.0, (f, f))}
    if readout == "state":  # q drawn all the same: Q and A are the window readout's draws from the same rng
        p["u"] = rng.standard_normal(f) / np.sqrt(f)
        del p["q"]
    return p


def step_forward(params, Z_prev, C_t):
    """One window of the recurrent form: Z_t = A ⊙ Z_{t-1} + C_t Q C_t^T, o_t = β ⊙ (Z_t C_t q) (β ⊙ (Z_t u) for
    params with u, readout "state").

    Args:
        Z_prev: (B, f, f) state before the window (zeros before the first).
        C_t: (B, f, w) the window (see ``window``).
    Returns:
        (o_t, Z_t): (B, f) output and (B, f, f) state.
    """
    _gril_checks.check_step(params, Z_prev, C_t)
    o_t, Z_t = _gril_unfused.step(params, Z_prev, C_t)
    return check_finite_result("the output o_t", (o_t, Z_t), {"C_t": C_t, "Z_prev": Z_prev, **params})


def step_backward(params, Z_prev, C_t, do_t, dZ_t):
    """Vector-Jacobian product of ``step_forward`` (one step of backpropagation through time).

    Args:
        Z_prev: (B, f, f), C_t: (B, f, w) as given to ``step_forward``.
        do_t: (B, f) dL/do_t.
        dZ_t: (B, f, f) dL/dZ_t through the later steps (zeros after the last window).
    Returns:
        (dZ_prev, dC_t, grads): (B, f, f), (B, f, w), and this step's share of {Q, q (or u), beta, A}.
    """
    _gril_checks.check_step(params, Z_prev, C_t, do_t, dZ_t)
    dZ_prev, dC_t, grads = _gril_unfused.step_backward(params, Z_prev, C_t, do_t, dZ_t)
    check_finite_result("the gradients", (dZ_prev, dC_t, *grads.values()),
                        {"do_t": do_t, "dZ_t": dZ_t, "C_t": C_t, "Z_prev": Z_prev, **params})
    return dZ_prev, dC_t, grads


def _check_forward(params, x, s, readout="window"):
    f, w = _gril_checks.check_params(params, readout)
    check_array("x", x, (None, None, f), names=("B", "T", "f"))
    check_dtype("x", x, params["A"].dtype)  # one dtype, as in every cell: a float32 x is not promoted to float64
    n_windows(x.shape[1], w, s)
    return f, w


def forward(params, x, s=1, mode=None, method=None, backend=None, kernel=None, readout="window"):
    """The GRIL block of Def. 4.2 over a whole sequence.

    Args:
        params: Q (w, w), q (w,) (u (f,) for readout "state"), beta (1,) or (f,), A (f, f).
        x: (B, T, f) tokens, with w <= T and (T - w) % s == 0.
        s: stride between windows (>= 1).
        mode: "parallel" (every window at once) or "sequential" (``step_forward`` once per window); None:
            "parallel".
        method: the scan algorithm of the unfused kernel (``minimal.scan.linear_scan``); None: "auto".
        backend: what runs the parallel mode, "numpy", "numba" or "cuda"; None: "numba".
        kernel: the parallel mode's kernel, "fused", "unfused" or "auto" (None: "fused" where one exists for
            the backend and shape; module docstring).
        A method or kernel other than the default where it has no effect (a method with the fused or the CUDA
        kernels, either in sequential mode) is refused; the sequential mode runs in NumPy whatever the backend.
        readout: "window", o_k = β ⊙ (Z_k C_k q), or "state", o_k = β ⊙ (Z_k u) (module docstring).
    Returns:
        o: (B, T', f), o[:, k] the output at input step t_k = k s + w - 1; and the cache for ``backward``.
    Raises:
        InputError: a bad argument, or x (with the params) too large for the dtype (o would be inf), naming
            x and the params with their largest values. x must have the params' dtype.
    """
    f, w = _check_forward(params, x, s, _gril_checks.check_readout(readout))
    mode, method, backend, kernel = _choose(mode, method, backend, kernel, f, readout)
    o, cache = _forward(params, x, s, mode, method, backend, kernel, w)
    check_finite_result("the output o", o, {"x": x, **params})
    return o, cache._replace(readout=readout)


def _choose(mode, method, backend, kernel, f, readout):
    """The four words resolved (None: ``minimal.conventions``' defaults), "auto" kernel made concrete, and a
    value that would have no effect refused (``forward``'s docstring)."""
    where = "gril.forward"
    mode, method, backend, kernel = (choose(word, v, where) for word, v in
                                     (("mode", mode), ("method", method), ("backend", backend), ("kernel", kernel)))
    if mode == "sequential":
        check_unused("kernel", kernel, where, "mode='sequential' is the step loop")
        check_unused("method", method, where, "mode='sequential' runs no scan")
        return mode, method, backend, kernel
    if kernel == "auto":
        kernel = "unfused" if backend == "numpy" or readout == "state" or (backend == "cuda" and f * f > 1024) \
            else "fused"
    if readout == "state" and (kernel == "fused" or backend == "cuda"):
        raise InputError(f"readout='state' runs in sequential mode or on the unfused kernel of backends 'numpy' and "
                         f"'numba' ({where}; the fused and CUDA kernels read out the window): pass kernel=None and "
                         f"backend='numpy' or 'numba'")
    if backend == "numpy" and kernel == "fused":
        raise InputError(f"kernel='fused' has no NumPy version in {where} (backend='numpy' is the unfused "
                         f"reference): pass kernel=None or 'unfused', or backend='numba'")
    if kernel == "fused" or backend == "cuda":
        check_unused("method", method, where, f"kernel={kernel!r}, backend={backend!r} runs no linear_scan; "
                     f"the scan runs with kernel='unfused' on backends 'numpy' and 'numba'")
    return mode, method, backend, kernel


def _forward(params, x, s, mode, method, backend, kernel, w):
    kwargs = {"method": method, "backend": backend}
    if mode == "parallel" and backend == "cuda":
        o, Z, x_d = _gril_cuda.gril_forward(params, x, s, w, fused=kernel == "fused")  # x, Z stay on the device
        return o, Cache(mode, x.shape[1], s, None, Z, kwargs, x_d)
    if mode == "parallel" and kernel == "fused":  # the fused Numba kernels; the cache keeps x and Z for the backward
        from . import _gril_numba

        o, Z = _gril_numba.gril_forward(x, params["Q"], params["q"], params["beta"], params["A"], w, s, return_Z=True)
        return o, Cache(mode, x.shape[1], s, None, Z, kwargs, x=x)
    C = window(x, w, s)  # (B, T', f, w); the unfused NumPy path (_gril_unfused.py) works on the windows
    if mode == "parallel":
        o, Z = _gril_unfused.parallel_forward(params, C, kwargs, {"x": x, **params})
    else:
        o, Z = _gril_unfused.sequential_forward(params, C)
    return o, Cache(mode, x.shape[1], s, C, Z, kwargs)


def backward(params, cache, do):
    """Gradients of ``forward`` in either mode.

    Args:
        cache: from ``forward``; do: (B, T', f) dL/do.
    Returns:
        dx (B, T, f) and grads {Q, q (u for readout "state"), beta, A} of the params' shapes. A cache from the
        CUDA path (backend "cuda") runs ``cuda_kernels.window.gril_backward`` on the x and Z it kept on the device;
        one from the fused Numba path (backend "numba") runs ``_gril_numba.gril_backward`` (beside this file).
    Raises:
        InputError: do of the wrong shape, or too large for the dtype (a gradient would be inf), naming do.
    """
    _gril_checks.check_params(params, cache.readout)
    check_grad_dtype("do", do, params)
    dx, grads = _backward(params, cache, do)
    check_finite_result("the gradients", (dx, *grads.values()), _backward_inputs(params, cache, do))
    return dx, grads


def _backward_inputs(params, cache, do):
    """What the caller gave, for an overflow message: do, x (when the cache holds it on the host), the params."""
    x = cache.x if cache.x is not None else cache.C
    return {"do": do, **({} if x is None else {"x": x}), **params}


def _backward(params, cache, do):
    if cache.x_device is not None:
        return _gril_cuda.gril_backward(params, cache.x_device, cache.s, cache.Z, do)
    if cache.x is not None:  # the fused Numba kernels
        from . import _gril_numba

        check_array("do", do, cache.Z.shape[:3], names=("B", "T'", "f"))
        return _gril_numba.gril_backward(cache.x, params["Q"], params["q"], params["beta"], params["A"],
                                         params["Q"].shape[0], cache.s, cache.Z, do)
    B, T_out, f, w = cache.C.shape
    check_array("do", do, (B, T_out, f), names=("B", "T'", "f"))
    inputs = _backward_inputs(params, cache, do)
    if cache.mode == "sequential":
        dC, grads = _gril_unfused.sequential_backward(params, cache.C, cache.Z, do)
    else:
        dC, grads = _gril_unfused.parallel_backward(params, cache.C, cache.Z, do, cache.scan_kwargs, inputs)
    # 1. C = window(x)
    dx = _gril_unfused.guard("the gradient dL/dC", lambda: window_backward(dC, cache.T, w, cache.s), dC, inputs)
    return dx, grads


def states(Q, A, C, method=None, backend=None):
    """The states without a readout, Z_k = A ⊙ Z_{k-1} + C_k Q C_k^T, Z_{-1} = 0 (Def. 4.2; the update is Eq. 10),
    on the unfused path's scan (``_gril_unfused.states``), for a model that reads Z its own way (module docstring).

    Args:
        Q: (w, w); A: (f, f); C: (B, T', f, w) the windows (``window``), of one dtype.
        method, backend: the scan's (``minimal.scan.linear_scan``; None: "auto" and "numba").
    Returns:
        Z: (B, T', f, f), Z[:, k] the state after window k.
    """
    inputs = _gril_checks.check_states(Q, A, C)
    Z = _gril_unfused.states(Q, A, C, {"method": method, "backend": backend}, inputs)
    return check_finite_result("the states Z", Z, inputs)


def states_backward(Q, A, C, Z, dZ, method=None, backend=None):
    """Vector-Jacobian product of ``states``: the reverse-time scan of the adjoint, then U = C Q C^T.

    Args:
        Q, A, C: as given to ``states``; Z: (B, T', f, f) its output; dZ: (B, T', f, f) dL/dZ, zeros for the
            states the loss does not read (a model that reads only the last state sets dZ[:, :-1] = 0).
        method, backend: as in ``states``.
    Returns:
        (dQ (w, w), dA (f, f), dC (B, T', f, w)); ``window_backward`` takes dC on to the tokens.
    """
    inputs = _gril_checks.check_states(Q, A, C, Z=Z, dZ=dZ)
    grads = _gril_unfused.states_backward(Q, A, C, Z, dZ, {"method": method, "backend": backend}, inputs)
    return check_finite_result("the gradients", grads, inputs)


def gril_forward_reference(x, Q, q, beta, A, w, s):
    """The explicit, unfused NumPy reference of the block, for testing fused kernels. Kept stable.

    Args:
        x: (B, T, f); Q: (w, w); q: (w,); beta: (1,) or (f,); A: (f, f); w: window width (must equal
        Q's size); s: stride. Requires w <= T and (T - w) % s == 0.
    Returns:
        o: (B, T', f) with T' = (T - w) / s + 1; o[:, k] belongs to input step k s + w - 1.
    """
    params = {"Q": Q, "q": q, "beta": beta, "A": A}
    f, w_Q = _check_forward(params, x, s)
    if check_positive_int("w", w) != w_Q:
        raise ValueError(f"w must equal the size of Q (w, w) = {Q.shape}, got w={w}")
    C = window(x, w, s)
    B, T_out = C.shape[:2]
    U = (C @ Q @ C.transpose(0, 1, 3, 2)).reshape(B, T_out, f * f)
    a = np.empty_like(U)
    a[...] = A.reshape(1, 1, f * f)
    Z = _gril_unfused.guard("the window updates U = C Q C^T", lambda: sequential_scan(a, U), U,  # the plain loop:
                            {"x": x, **params}).reshape(B, T_out, f, f)            # no scan method or backend
    return beta * np.einsum("btij,btj->bti", Z, C @ q)


def examples(rng):
    """Tiny float64 cases in both modes: T = 1 (w = 1), odd T, overlapping windows (s < w), strided
    windows (s = w and s > w), scalar and per-feature β; the parallel ones again with the fused Numba kernels
    (backend="numba"); two with the state readout."""
    out = []
    for mode, backend in (("parallel", "numpy"), ("sequential", "numpy"), ("parallel", "numba")):
        prefix = mode if backend == "numpy" else f"{mode}-{backend}"
        for name, B, T, f, w, s, per_feature in [("T1-w1", 2, 1, 2, 1, 1, False),
                                                 ("T5-w2-s1", 2, 5, 3, 2, 1, False),
                                                 ("T7-w3-s2-beta_f", 1, 7, 3, 3, 2, True),
                                                 ("T6-w2-s2", 1, 6, 2, 2, 2, False),
                                                 ("T7-w1-s3", 2, 7, 2, 1, 3, True)]:
            out.append(Example(f"{prefix}-{name}", init(rng, f, w, per_feature), rng.standard_normal((B, T, f)),
                               {"s": s, "mode": mode, "backend": backend,
                                **({"method": "sequential"} if backend == "numpy" and mode == "parallel" else {})}))
    for mode, name, B, T, f, w, s in [("parallel", "T5-w2-s1", 2, 5, 3, 2, 1),
                                      ("sequential", "T7-w3-s2", 1, 7, 3, 3, 2)]:
        out.append(Example(f"{mode}-state-{name}", init(rng, f, w, True, "state"), rng.standard_normal((B, T, f)),
                           {"s": s, "mode": mode, "backend": "numpy", "readout": "state"}))
    return out
