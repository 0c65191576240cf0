"""The shared training loop: AdamW steps with checkpoints that resume bit for bit.

    schedule = functools.partial(cosine_schedule, total_steps=steps, peak_lr=1e-3, warmup_steps=100,
                                 final_lr=1e-6)
    result = train(loss_and_grads, params, steps, lr_schedule=schedule, checkpoint_path="runs/teacher.npz")

``loss_and_grads(params, step, rng) -> (loss, grads)`` is the model: it draws its mini-batch from ``rng``
(a ``numpy.random.Generator``) and returns the scalar loss and a dict of gradients with params' keys.
Each step then clips (optional, ``minimal.optim.clip_by_global_norm``) and applies ``minimal.optim.adamw_step``.

Checkpoints are ``.npz`` files holding only plain arrays (loadable with ``allow_pickle=False``):

    params/<name>, m/<name>, v/<name>   parameters and AdamW moments
    adamw_step, step                    AdamW's update count and the number of completed training steps
    losses                              (step,) float64 loss history
    rng_state                           the Generator's ``bit_generator.state`` as a JSON string

A checkpoint is written every ``checkpoint_every`` steps, after the last step, and when the run is
interrupted (KeyboardInterrupt, re-raised after saving). It is written to a temporary file and moved into
place with ``os.replace``, so a crash never leaves a half-written checkpoint. Because the rng state is
saved with the parameters, a resumed run ends with bitwise the same parameters as an uninterrupted one.
A NaN or infinite loss stops the run with ``NonFiniteLossError`` before that step's update, and leaves the
last checkpoint as it was.
"""
from __future__ import annotations

import json
import math
import os
from typing import Callable, NamedTuple, Union

import numpy as np
from tqdm import tqdm  # plain tqdm: tqdm.auto needs ipywidgets in notebooks, which we do not depend on

from minimal._atomic import atomic_write
from minimal.optim import AdamWState, _check_like, _check_params, _check_scalar, adamw_init, adamw_step, \
    clip_by_global_norm
from minimal.validate import InputError, check_positive_int

__all__ = ["train", "TrainResult", "Checkpoint", "NonFiniteLossError", "save_checkpoint", "load_checkpoint"]


class NonFiniteLossError(FloatingPointError):
    """The loss at ``step`` was NaN or inf; the run stopped before applying that step's update."""

    def __init__(self, step, loss, checkpoint_step=None):
        self.step, self.loss = int(step), float(loss)
        kept = ("" if checkpoint_step is None
                else f"; the last checkpoint (step {checkpoint_step}) was left untouched")
        super().__init__(f"loss became {self.loss} at step {self.step}, parameters not updated{kept}. "
                         f"Lower the learning rate or clip the gradients (clip=...).")


class Checkpoint(NamedTuple):
    """Everything a run needs to continue: ``step`` completed steps, ``losses`` of shape (step,)."""
    params: dict
    opt_state: AdamWState
    step: int
    rng_state: dict
    losses: np.ndarray


class TrainResult(NamedTuple):
    """Final ``params`` and ``opt_state``, the ``losses`` of all steps (steps,), and the step it resumed from."""
    params: dict
    opt_state: AdamWState
    losses: np.ndarray
    resumed_from: int


def save_checkpoint(path, ckpt: Checkpoint):
    """Write ``ckpt`` to ``path`` atomically (temporary file in the same folder, then ``os.replace``)."""
    path = os.fspath(path)
    arrays = {"step": np.array(ckpt.step), "adamw_step": np.array(ckpt.opt_state.step),
              "losses": np.asarray(ckpt.losses, dtype=np.float64),
              "rng_state": np.array(json.dumps(ckpt.rng_state))}
    for prefix, tree in (("params", ckpt.params), ("m", ckpt.opt_state.m), ("v", ckpt.opt_state.v)):
        arrays.update({f"{prefix}/{k}": a for k, a in tree.items()})
    with atomic_write(path) as f:
        np.savez(f, **arrays)


def load_checkpoint(path) -> Checkpoint:
    """Read a checkpoint written by ``save_checkpoint`` (no pickle involved)."""
    with np.load(os.fspath(path), allow_pickle=False) as z:
        tree = {prefix: {k.split("/", 1)[1]: z[k] for k in z.files if k.startswith(prefix + "/")}
                for prefix in ("params", "m", "v")}
        return Checkpoint(params=tree["params"],
                          opt_state=AdamWState(int(z["adamw_step"]), tree["m"], tree["v"]),
                          step=int(z["step"]), rng_state=json.loads(str(z["rng_state"])), losses=z["losses"])


def _make_rng(rng):
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise ValueError(f"rng must be a numpy.random.Generator or a seed (int >= 0), got {rng!r}")


def _resume(path, params, steps, rng) -> Checkpoint:
    ckpt = load_checkpoint(path)
    try:
        _check_like("checkpoint params", ckpt.params, params)
    except ValueError as e:
        raise InputError(f"checkpoint_path {path!r} does not fit params: {e}") from None
    if ckpt.step > steps:
        raise InputError(f"checkpoint_path {path!r} is at step {ckpt.step}, past steps={steps}")
    if ckpt.rng_state.get("bit_generator") != type(rng.bit_generator).__name__:
        raise InputError(f"rng uses {type(rng.bit_generator).__name__} but checkpoint_path {path!r} saved a "
                         f"{ckpt.rng_state.get('bit_generator')} state")
    rng.bit_generator.state = ckpt.rng_state
    return ckpt


def train(loss_and_grads: Callable, params: dict, steps: int, *, lr_schedule: Union[Callable, float],
          checkpoint_path=None, checkpoint_every=100, resume=True, progress=True, log_every=10, rng=0,
          clip=None, weight_decay=0.0, decay_mask=None, beta1=0.9, beta2=0.999, eps=1e-8,
          desc="train") -> TrainResult:
    """Run ``steps`` AdamW steps on ``loss_and_grads``, checkpointing and resuming (module docstring).

    Args:
        loss_and_grads: ``(params, step, rng) -> (loss, grads)``; loss a scalar, grads a dict with params'
            keys, shapes and dtypes. Draw all randomness from ``rng`` so that resuming is exact.
        params: dict name -> float array, the starting point (not modified). Ignored, except for its keys,
            shapes and dtypes, when resuming from a checkpoint.
        steps: total number of steps (int >= 1), counting those done before a resume.
        lr_schedule: ``step -> lr`` (e.g. a ``minimal.optim.cosine_schedule`` partial) or a constant lr.
        checkpoint_path: ``.npz`` file to write (None: no checkpoints).
        checkpoint_every: save after every this many steps (and after the last one).
        resume: continue from ``checkpoint_path`` when it exists; False starts over and overwrites it.
        progress: show a tqdm bar (on stderr). log_every: refresh the bar's loss every this many steps.
        rng: a ``numpy.random.Generator`` (advanced in place) or an int seed.
        clip: None, or the max global gradient norm (> 0) applied before each update.
        weight_decay: AdamW's decoupled decay, a constant >= 0 or a ``step -> wd`` schedule like
            ``lr_schedule`` (e.g. decay early to prune, none at the end to reach the loss floor).
        decay_mask, beta1, beta2, eps: passed to ``minimal.optim.adamw_step``.
        desc: the progress bar's label.
    Returns:
        ``TrainResult(params, opt_state, losses (steps,), resumed_from)``.
    Raises:
        NonFiniteLossError: the loss became NaN or inf (the last checkpoint is left untouched).
        KeyboardInterrupt: re-raised after saving a checkpoint of the last completed step.
        ValueError: a bad argument, naming it.
    """
    if not callable(loss_and_grads):
        raise ValueError(f"loss_and_grads must be a callable (params, step, rng) -> (loss, grads), "
                         f"got {type(loss_and_grads).__name__}")
    _check_params(params)
    steps = check_positive_int("steps", steps)
    checkpoint_every = check_positive_int("checkpoint_every", checkpoint_every)
    log_every = check_positive_int("log_every", log_every)
    if clip is not None:
        clip = _check_scalar("clip", clip, 0.0, low_open=True)
    if not callable(lr_schedule):
        lr_value = _check_scalar("lr_schedule", lr_schedule, 0.0)
        lr_schedule = lambda step: lr_value  # noqa: E731
    if not callable(weight_decay):
        wd_value = _check_scalar("weight_decay", weight_decay, 0.0)
        weight_decay = lambda step: wd_value  # noqa: E731
    rng = _make_rng(rng)
    path = None if checkpoint_path is None else os.fspath(checkpoint_path)

    resumed = path is not None and resume and os.path.exists(path)
    if resumed:
        done = _resume(path, params, steps, rng)
    else:
        done = Checkpoint(dict(params), adamw_init(params), 0, rng.bit_generator.state, np.zeros(0))
    start = done.step
    losses = list(done.losses)
    saved_step = start if resumed else None  # the step of the checkpoint on disk, for error messages

    def save(ckpt):
        nonlocal saved_step
        save_checkpoint(path, ckpt._replace(losses=np.array(losses[:ckpt.step], dtype=np.float64)))
        saved_step = ckpt.step

    bar = tqdm(total=steps, initial=start, disable=not progress, desc=desc)
    try:
        for step in range(start, steps):
            loss, grads = loss_and_grads(done.params, step, rng)
            loss = float(loss)
            if not math.isfinite(loss):
                raise NonFiniteLossError(step, loss, checkpoint_step=saved_step)
            if clip is not None:
                grads, _ = clip_by_global_norm(grads, clip)
            new_params, opt_state = adamw_step(done.params, grads, done.opt_state, lr_schedule(step),
                                               beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay(step),
                                               decay_mask=decay_mask)
            losses.append(loss)
            # One assignment commits the step, so an interrupt saves either the old or the new state whole.
            done = Checkpoint(new_params, opt_state, step + 1, rng.bit_generator.state, None)
            bar.update(1)
            if done.step % log_every == 0 or done.step == steps:
                bar.set_postfix(loss=f"{loss:.4g}")
            if path is not None and (done.step % checkpoint_every == 0 or done.step == steps):
                save(done)
    except KeyboardInterrupt:
        if path is not None:
            save(done)
        raise
    finally:
        bar.close()
    return TrainResult(done.params, done.opt_state, np.array(losses, dtype=np.float64), start)
