"""AdamW with decoupled weight decay, a warm-up + cosine learning-rate schedule, and global-norm clipping.

Functional and stateless: the optimiser state is an ``AdamWState`` named tuple of plain arrays that the
caller keeps (and `minimal.run.train` checkpoints); ``adamw_step`` returns new parameter and state arrays and
never writes into its inputs.

AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019, Algorithm 2), for each
parameter θ with gradient g at update t = 1, 2, ...:

    m_t     = β1 m_{t-1} + (1 - β1) g_t
    v_t     = β2 v_{t-1} + (1 - β2) g_t²
    m̂_t     = m_t / (1 - β1^t)                   (bias correction)
    v̂_t     = v_t / (1 - β2^t)
    θ_t     = θ_{t-1} - lr_t (m̂_t / (√v̂_t + ε) + wd · mask(θ) · θ_{t-1})

Parametrisation: Algorithm 2 writes the step as η_t (α m̂/(√v̂+ε) + λ θ) with a schedule multiplier η_t and
a base rate α. We follow the convention of PyTorch's and optax's AdamW, lr_t = η_t α and wd = λ / α, so
the decay shrinks θ by the factor (1 - lr_t wd) per step and follows the schedule; it is still decoupled
from the adaptive gradient step (never added to g, never divided by √v̂).

Decay mask: the papers exclude the parameters of the recurrence λ from weight decay (decaying ν_log
towards 0 would drag |λ| = exp(-exp(ν_log)) towards exp(-1), not towards a "small" model). The default
mask, ``default_decay_mask``, decays every parameter except those whose name (last component after "." or
"/") is in ``NO_DECAY``.

Glossary: lr learning rate, wd weight decay, β1/β2 (beta1/beta2) moment decay rates, ε (eps) denominator
floor, m/v first/second moment estimates, t update count.
"""
from __future__ import annotations

import functools
import math
import re
from typing import Callable, Mapping, NamedTuple, Union

import numpy as np

from minimal.validate import check_array, check_positive_int

__all__ = ["AdamWState", "NO_DECAY", "default_decay_mask", "adamw_init", "adamw_step",
           "cosine_schedule", "clip_by_global_norm", "global_norm"]

# Recurrent (λ) parameters in the papers' notation: LRU's nu_log, theta_log, gamma_log (Orvieto et al. 2023,
# used by Zucchet et al. Eq. 2 and App. B), a raw λ ("lam", "nu"), GRIL's window "A".
NO_DECAY = frozenset({"nu", "nu_log", "theta_log", "gamma_log", "A", "lam", "lam_log"})

DecayMask = Union[Mapping[str, bool], Callable[[str], bool], None]


class AdamWState(NamedTuple):
    """AdamW state: ``step`` updates taken so far and the moment estimates ``m``, ``v`` (params' keys/shapes)."""
    step: int
    m: dict
    v: dict


def default_decay_mask(name: str) -> bool:
    """True (decay) unless the last component of ``name`` (split on "." or "/") is in ``NO_DECAY``."""
    return re.split(r"[./]", name)[-1] not in NO_DECAY


def check_params(params):
    if not isinstance(params, Mapping) or not params:
        raise ValueError(f"params must be a non-empty dict of name -> float array, got {type(params).__name__}")
    for k, p in params.items():
        check_array(f"params[{k!r}]", p)
    return params


def check_like(name, tree, params):
    """``tree`` must have exactly params' keys, and each array params' shape and dtype."""
    if not isinstance(tree, Mapping):
        raise ValueError(f"{name} must be a dict with the keys of params, got {type(tree).__name__}")
    if set(tree) != set(params):
        missing, extra = sorted(set(params) - set(tree)), sorted(set(tree) - set(params))
        raise ValueError(f"{name} must have exactly the keys of params: missing {missing}, unexpected {extra}")
    for k, p in params.items():
        g = check_array(f"{name}[{k!r}]", tree[k], p.shape)
        if g.dtype != p.dtype:
            raise ValueError(f"{name}[{k!r}] must have params[{k!r}]'s dtype {p.dtype}, got {g.dtype}")
    return tree


def check_scalar(name, value, low, high=math.inf, low_open=False, high_open=False):
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and (value > low if low_open else value >= low)
    ok = ok and (value < high if high_open else value <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")
    return float(value)


def _check_hyperparameters(lr, beta1, beta2, eps, weight_decay):
    """lr >= 0, beta1 and beta2 in [0, 1), eps > 0, weight_decay >= 0 as floats; a ValueError names the first
    that is not."""
    return (check_scalar("lr", lr, 0.0), check_scalar("beta1", beta1, 0.0, 1.0, high_open=True),
            check_scalar("beta2", beta2, 0.0, 1.0, high_open=True), check_scalar("eps", eps, 0.0, low_open=True),
            check_scalar("weight_decay", weight_decay, 0.0))


_default_decay = functools.lru_cache(maxsize=None)(default_decay_mask)   # the same names every step


def _resolve_mask(decay_mask: DecayMask, params) -> dict:
    if decay_mask is None:
        decay_mask = _default_decay
    if callable(decay_mask):
        return {k: bool(decay_mask(k)) for k in params}
    if isinstance(decay_mask, Mapping):
        if set(decay_mask) != set(params):
            missing = sorted(set(params) - set(decay_mask))
            extra = sorted(set(decay_mask) - set(params))
            raise ValueError(f"decay_mask must have exactly the keys of params: missing {missing}, "
                             f"unexpected {extra}")
        return {k: bool(decay_mask[k]) for k in params}
    raise ValueError(f"decay_mask must be None, a dict name -> bool or a callable(name) -> bool, "
                     f"got {type(decay_mask).__name__}")


def adamw_init(params: Mapping[str, np.ndarray]) -> AdamWState:
    """Zero moments with params' keys, shapes and dtypes; ``step`` = 0."""
    check_params(params)
    return AdamWState(step=0, m={k: np.zeros_like(p) for k, p in params.items()},
                      v={k: np.zeros_like(p) for k, p in params.items()})


def adamw_step(params, grads, state: AdamWState, lr, beta1=0.9, beta2=0.999, eps=1e-8,
               weight_decay=0.0, decay_mask: DecayMask = None):
    """One AdamW update (module docstring; Loshchilov & Hutter 2019, Alg. 2).

    Args:
        params: dict name -> float array.
        grads: dict with exactly params' keys; each array params' shape and dtype, finite.
        state: ``AdamWState`` from ``adamw_init`` or a previous step.
        lr: learning rate lr_t >= 0 for this update (e.g. ``cosine_schedule(step, ...)``).
        beta1, beta2: moment decay rates in [0, 1).
        eps: > 0, added to √v̂.
        weight_decay: wd >= 0; 0 (the default) makes this plain Adam. Experiments pass the paper's value.
        decay_mask: which params decay: None (``default_decay_mask``: all but the recurrent λ parameters in
            ``NO_DECAY``), a dict name -> bool with exactly params' keys, or a callable name -> bool.
    Returns:
        ``(new_params, new_state)``: new arrays (params' dtypes); the inputs are not modified.
    Raises:
        ValueError: naming the offending argument (and key).
        FloatingPointError: the new moments or params are not finite (finite grads too large for the dtype);
            nothing is returned, so no overflowed state can be kept.
    """
    fast = _adamw_step_fused(params, grads, state, lr, beta1, beta2, eps, weight_decay, decay_mask)
    if fast is not None:
        return fast
    check_params(params)
    check_like("grads", grads, params)
    if not isinstance(state, AdamWState):
        raise ValueError(f"state must be an AdamWState (from adamw_init), got {type(state).__name__}")
    check_positive_int("state.step", state.step, minimum=0)
    check_like("state.m", state.m, params)
    check_like("state.v", state.v, params)
    lr, beta1, beta2, eps, weight_decay = _check_hyperparameters(lr, beta1, beta2, eps, weight_decay)
    mask = _resolve_mask(decay_mask, params)

    t = state.step + 1
    # Scalars stay Python floats so that float32 params and moments stay float32 (NumPy's weak scalars).
    c1, c2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
    new_params, m, v = {}, {}, {}
    for k, p in params.items():
        g = grads[k]
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, naming grads[k]
            m[k] = beta1 * state.m[k] + (1.0 - beta1) * g
            v[k] = beta2 * state.v[k] + (1.0 - beta2) * (g * g)
            step = (m[k] / c1) / (np.sqrt(v[k] / c2) + eps)
            if mask[k] and weight_decay > 0.0:
                step = step + weight_decay * p  # decoupled: uses θ_{t-1}, bypasses the moments
            new_params[k] = p - lr * step
        _check_finite_update(k, g, m[k], v[k], new_params[k], lr)
    return new_params, AdamWState(step=t, m=m, v=v)


def _adamw_step_fused(params, grads, state, lr, beta1, beta2, eps, weight_decay, decay_mask):
    """``adamw_step`` in one compiled pass a parameter (``_adamw_numba.py`` beside this file, bit-identical), or None where
    that pass does not apply (a dtype other than float32/float64, a non-contiguous array) or anything is off: a
    non-finite input or result, or any argument the checks of ``adamw_step`` would refuse, which then runs the
    NumPy lines and raises its own named error. The checks here are those of shape, dtype and keys; finiteness
    comes out of the pass itself."""
    try:
        if not (isinstance(params, Mapping) and params and isinstance(grads, Mapping) and isinstance(state,
                AdamWState) and set(grads) == set(params) == set(state.m) == set(state.v)):
            return None
        check_positive_int("state.step", state.step, minimum=0)
        lr, beta1, beta2, eps, weight_decay = _check_hyperparameters(lr, beta1, beta2, eps, weight_decay)
        mask = _resolve_mask(decay_mask, params)
    except ValueError:
        return None
    from ._adamw_numba import adamw_update

    t = state.step + 1
    c1, c2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
    scalars = {}
    new_params, m, v = {}, {}, {}
    for k, p in params.items():
        arrays = (p, grads[k], state.m[k], state.v[k])
        if not all(isinstance(a, np.ndarray) and a.dtype == p.dtype and a.shape == p.shape
                   and a.flags.c_contiguous for a in arrays) or p.dtype not in (np.float32, np.float64):
            return None
        if p.dtype not in scalars:   # Python floats rounded to the dtype, as NumPy's weak scalars are
            scalars[p.dtype] = np.array([beta1, 1.0 - beta1, beta2, 1.0 - beta2, c1, c2, eps, weight_decay, lr],
                                        dtype=p.dtype)
        new_p, new_m, new_v = np.empty_like(p), np.empty_like(p), np.empty_like(p)
        flat = [a.reshape(-1) for a in arrays]
        if not adamw_update(*flat, scalars[p.dtype], bool(mask[k] and weight_decay > 0.0),
                            new_p.reshape(-1), new_m.reshape(-1), new_v.reshape(-1)):
            return None
        new_params[k], m[k], v[k] = new_p, new_m, new_v
    return new_params, AdamWState(step=t, m=m, v=v)


def _check_finite_update(k, g, m, v, p, lr):
    """Finite grads can still overflow the moments (v holds g², inf in float32 once |g| > 1.8e19) or, with a
    huge lr, the params: raise before anyone keeps (or checkpoints) that state."""
    for what, a in (("second moment v", v), ("first moment m", m), ("updated params", p)):
        if not np.all(np.isfinite(a)):
            big = float(np.max(np.abs(g))) if g.size else 0.0
            raise FloatingPointError(
                f"AdamW's {what}[{k!r}] overflowed in {a.dtype} (max {np.finfo(a.dtype).max:.3g}): grads[{k!r}] "
                f"has values up to {big:.3g} and lr is {lr:.3g}. Clip the gradients (clip_by_global_norm, or "
                f"train's clip=...), lower the learning rate, or use float64 params.")


def cosine_schedule(step, total_steps, peak_lr, warmup_steps, final_lr):
    """Learning rate for 0-based ``step``: linear warm-up to ``peak_lr``, cosine decay to ``final_lr``.

    With t = step + 1 (the update's 1-based number, as in Adam), W = warmup_steps, N = total_steps:

        t <= W:   lr = peak_lr · t / W                               (warm-up; ends at peak_lr at t = W)
        t >  W:   lr = final_lr + (peak_lr - final_lr) · (1 + cos(π p)) / 2,   p = min(1, (t - W) / (N - W))

    so the last step (t = N) uses exactly ``final_lr``, the decay's midpoint uses (peak_lr + final_lr) / 2,
    and steps past N stay at the floor ``final_lr``. Zucchet et al. (App. B.1) decay 1e-3 -> 1e-6.
    With W = N there is no decay phase: the warm-up ends at peak_lr on the last step, and steps past N
    use ``final_lr`` (p = 1) like every other schedule.

    Args:
        step: int >= 0. total_steps: int >= 1. warmup_steps: int in [0, total_steps].
        peak_lr: >= 0. final_lr: in [0, peak_lr].
    Returns:
        float learning rate.
    """
    step = check_positive_int("step", step, minimum=0)
    total_steps = check_positive_int("total_steps", total_steps)
    warmup_steps = check_positive_int("warmup_steps", warmup_steps, minimum=0)
    if warmup_steps > total_steps:
        raise ValueError(f"warmup_steps must be in [0, total_steps={total_steps}], got {warmup_steps}")
    peak_lr = check_scalar("peak_lr", peak_lr, 0.0)
    final_lr = check_scalar("final_lr", final_lr, 0.0, peak_lr)
    t = step + 1
    if t <= warmup_steps:
        return peak_lr * t / warmup_steps
    # W = N leaves no decay phase, so a step past N is at its end (p = 1) instead of dividing by N - W = 0
    decay_steps = total_steps - warmup_steps
    p = 1.0 if decay_steps == 0 else min(1.0, (t - warmup_steps) / decay_steps)
    return final_lr + (peak_lr - final_lr) * 0.5 * (1.0 + math.cos(math.pi * p))


def global_norm(grads: Mapping[str, np.ndarray]) -> float:
    """‖g‖ = sqrt(Σ over all arrays and entries of g²), accumulated in float64 (a C-contiguous float32 or float64
    array's Σ g² in one compiled pass, ``_adamw_numba.sum_of_squares``; others as NumPy's float64 squares)."""
    from ._adamw_numba import sum_of_squares

    return math.sqrt(sum(sum_of_squares(g.reshape(-1)) if _flat_float(g) else
                         float(np.sum(np.square(g, dtype=np.float64))) for g in grads.values()))


def _flat_float(a):
    # exactly ndarray: a subclass (a masked array, np.matrix) keeps NumPy's formula, which honours it
    return type(a) is np.ndarray and a.dtype in (np.float32, np.float64) and a.flags.c_contiguous


def clip_by_global_norm(grads, max_norm):
    """Rescale all gradients together so that their global norm is at most ``max_norm``.

    g <- g · max_norm / ‖g‖ if ‖g‖ > max_norm, else g unchanged (same arrays).

    Args:
        grads: non-empty dict name -> finite float array.
        max_norm: > 0.
    Returns:
        ``(clipped, norm)``: a new dict (new arrays only when scaled) and ‖g‖ before clipping.
    """
    if not isinstance(grads, Mapping) or not grads:
        raise ValueError(f"grads must be a non-empty dict of name -> float array, got {type(grads).__name__}")
    for k, g in grads.items():
        check_array(f"grads[{k!r}]", g, finite=False)
    norm = global_norm(grads)
    if not math.isfinite(norm):     # a NaN or inf among the grads (or float64 squares past 1.8e308): name it
        for k, g in grads.items():
            check_array(f"grads[{k!r}]", g)
    max_norm = check_scalar("max_norm", max_norm, 0.0, low_open=True)
    if norm <= max_norm:
        return dict(grads), norm
    scale = max_norm / norm
    return {k: g * scale for k, g in grads.items()}, norm
