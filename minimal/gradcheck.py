"""Central finite-difference gradient checks in float64 (the CS231n idea, one shared helper).

For a cell with ``forward(params, x, **kw) -> (y, cache)`` and ``backward(params, cache, dy) -> (dx, grads)``
we take the scalar L = sum(y * R) for a fixed random R of y's shape, so that dL/dy = R, and compare the
hand-written gradients with

    dL/dθ_i ≈ (L(θ + ε e_i) − L(θ − ε e_i)) / (2ε)

for every entry of every parameter and of the input. The error of one array is

    rel_error(analytic, numeric) = max_i |a_i − n_i| / max(max_i |a_i|, max_i |n_i|, floor)

that is, the largest absolute error relative to the array's own scale (an elementwise ratio would divide
finite-difference noise by gradients that are exactly zero). A correct backward gives 1e-7 .. 1e-12 here.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

__all__ = ["rel_error", "numerical_gradient", "check_cell", "check_function", "backward_rel_errors", "TOLERANCE"]

TOLERANCE = 1e-6  # max relative error accepted for a float64 backward (design card)


def rel_error(analytic, numeric, floor=1e-12):
    """Max absolute difference divided by the larger of the two arrays' max magnitudes (>= floor)."""
    a = np.asarray(analytic, dtype=np.float64)
    n = np.asarray(numeric, dtype=np.float64)
    if a.shape != n.shape:
        raise ValueError(f"analytic has shape {a.shape} but numeric has shape {n.shape}")
    if a.size == 0:
        return 0.0
    scale = max(np.max(np.abs(a)), np.max(np.abs(n)), floor)
    return float(np.max(np.abs(a - n)) / scale)


def numerical_gradient(f: Callable[[], float], x: np.ndarray, eps=1e-6):
    """Central differences of the scalar ``f()`` with respect to ``x`` (perturbed in place, restored)."""
    if x.dtype != np.float64:
        raise ValueError(f"x must be float64 for a gradient check, got {x.dtype}")
    grad = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"], op_flags=["readwrite"])
    for _ in it:
        i = it.multi_index
        old = x[i]
        x[i] = old + eps
        fp = f()
        x[i] = old - eps
        fm = f()
        x[i] = old
        grad[i] = (fp - fm) / (2 * eps)
    return grad


def check_function(forward, backward, params: Mapping[str, np.ndarray], x, kwargs=None, seed=0,
                   eps=1e-6):
    """Gradient-check one forward/backward pair.

    Args:
        forward: ``forward(params, x, **kwargs) -> (y, cache)``.
        backward: ``backward(params, cache, dy) -> (dx, grads)``; ``grads`` has exactly ``params``' keys,
            ``dx`` is None when ``x`` is not a float array (e.g. token ids).
        params: dict of float64 arrays.
        x: the input (float64 array, or an integer array which is not checked).
    Returns:
        dict ``{"x": err, name: err, ...}`` of relative errors (``"x"`` only for a float input).
    """
    kwargs = dict(kwargs or {})
    y, cache = forward(params, x, **kwargs)
    rng = np.random.default_rng(seed)
    R = rng.standard_normal(np.shape(y))
    dx, grads = backward(params, cache, R)
    if set(grads) != set(params):
        raise AssertionError(f"backward returned gradients for {sorted(grads)}, params are {sorted(params)}")

    def loss():
        return float(np.sum(forward(params, x, **kwargs)[0] * R))

    errors = {}
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        if dx is None or np.shape(dx) != x.shape:
            raise AssertionError(f"dx must have the input's shape {x.shape}, got {np.shape(dx)}")
        errors["x"] = rel_error(dx, numerical_gradient(loss, x, eps))
    for name, p in params.items():
        if np.shape(grads[name]) != p.shape:
            raise AssertionError(f"grads[{name!r}] has shape {np.shape(grads[name])}, param {p.shape}")
        errors[name] = rel_error(grads[name], numerical_gradient(loss, p, eps))
    return errors


def check_cell(module, example, seed=0, eps=1e-6):
    """Gradient-check ``module`` (a registered cell) on one of its ``examples``; see ``check_function``."""
    return check_function(module.forward, module.backward, example.params, example.x, example.kwargs,
                          seed=seed, eps=eps)


def backward_rel_errors(backward, params, cache_a, cache_b, dy):
    """Two backward passes of one cell for the same dy, from the caches of two forwards that should agree (two
    modes, two scans, with and without ``out=``): ``{"x": rel_error(dx_a, dx_b), name: rel_error of each
    parameter's gradient}``; exactly 0 everywhere when the two are bit-identical."""
    dx_a, grads_a = backward(params, cache_a, dy)
    dx_b, grads_b = backward(params, cache_b, dy)
    return {"x": rel_error(dx_a, dx_b), **{k: rel_error(grads_a[k], grads_b[k]) for k in params}}
