"""Training checkpoints: one ``.npz`` file that ``minimal.run.train`` writes and resumes from, bit for bit.

Checkpoints are ``.npz`` files holding only plain arrays (loadable with ``allow_pickle=False``):

    params/<name>, m/<name>, v/<name>   parameters and AdamW moments
    adamw_step, step                    AdamW's update count and the number of completed training steps
    losses                              (step,) float64 loss history
    rng_state                           the Generator's ``bit_generator.state`` as a JSON string
    config                              (optional) the run's ``config`` as a JSON string

A checkpoint is written to a temporary file and moved into place with ``os.replace`` (``minimal.run._atomic``), so a
crash never leaves a half-written checkpoint. A file that cannot be read as a checkpoint, or holds an inconsistent
state, raises ``CheckpointError`` naming it: delete it to start over.

A checkpoint records the ``config`` of the run that wrote it (a dict, e.g. ``dataclasses.asdict`` of an
experiment's Config): resuming it with another config is refused (``ConfigMismatchError``, naming each
differing field with both values) instead of continuing the old run under the new run's name
(``resume_checkpoint``, with the other checks a resume makes).
"""
from __future__ import annotations

import json
import os
from typing import NamedTuple

import numpy as np

from minimal.run._atomic import atomic_write
from minimal.optim import AdamWState, check_like, check_params
from minimal.validate import InputError, check_array

__all__ = ["Checkpoint", "CheckpointError", "ConfigMismatchError", "save_checkpoint", "load_checkpoint"]


class ConfigMismatchError(InputError):
    """``checkpoint_path`` was written by a run with another ``config``; the message names the fields."""


class CheckpointError(InputError):
    """A checkpoint file cannot be read, or holds an inconsistent state; the message names the file."""


class Checkpoint(NamedTuple):
    """Everything a run needs to continue: ``step`` completed steps, ``losses`` of shape (step,)."""
    params: dict
    opt_state: AdamWState
    step: int
    rng_state: dict
    losses: np.ndarray
    config: dict = None      # the run's config (JSON types), or None: not recorded


def save_checkpoint(path, ckpt: Checkpoint):
    """Write ``ckpt`` to ``path`` atomically (temporary file in the same folder, then ``os.replace``)."""
    path = os.fspath(path)
    arrays = {"step": np.array(ckpt.step), "adamw_step": np.array(ckpt.opt_state.step),
              "losses": np.asarray(ckpt.losses, dtype=np.float64),
              "rng_state": np.array(json.dumps(ckpt.rng_state))}
    if ckpt.config is not None:
        arrays["config"] = np.array(json.dumps(ckpt.config, sort_keys=True))
    for prefix, tree in (("params", ckpt.params), ("m", ckpt.opt_state.m), ("v", ckpt.opt_state.v)):
        arrays.update({f"{prefix}/{k}": a for k, a in tree.items()})
    with atomic_write(path) as f:
        np.savez(f, **arrays)


_START_OVER = "delete it to start the run over (or pass resume=False to overwrite it)"


def load_checkpoint(path) -> Checkpoint:
    """Read a checkpoint written by ``save_checkpoint`` (no pickle involved) and check that it is whole.

    Raises:
        FileNotFoundError: no file at ``path``.
        CheckpointError: the file is not a readable checkpoint (empty, truncated, garbage), or its state is
            inconsistent (losses not of length step, moments unlike the params, NaN or inf); the message names
            the file and the way out.
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}  # reads every member now: a damaged one fails here
    except FileNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001 - BadZipFile, EOFError, zlib.error, numpy's "allow_pickle" ValueError
        raise CheckpointError(f"checkpoint {path!r} is not a readable checkpoint ({type(e).__name__}: {e}); it "
                              f"was damaged or is another kind of file: {_START_OVER}") from None
    try:
        return _checkpoint_from(arrays)
    except ValueError as e:
        raise CheckpointError(f"checkpoint {path!r} holds an inconsistent state: {e}; {_START_OVER}") from None


def _checkpoint_from(arrays) -> Checkpoint:
    """Build and check a Checkpoint from the arrays of a checkpoint file; ValueError says what is wrong."""
    missing = sorted({"step", "adamw_step", "losses", "rng_state"} - set(arrays))
    if missing:
        raise ValueError(f"it lacks {missing}")
    tree = {prefix: {k.split("/", 1)[1]: a for k, a in arrays.items() if k.startswith(prefix + "/")}
            for prefix in ("params", "m", "v")}
    if not tree["params"]:
        raise ValueError("it holds no params/<name> arrays")
    check_params(tree["params"])
    for prefix in ("m", "v"):
        check_like(prefix, tree[prefix], tree["params"])
    counts = {}
    for name in ("step", "adamw_step"):
        a = arrays[name]
        if a.shape != () or a.dtype.kind not in "iu" or int(a) < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {a!r}")
        counts[name] = int(a)
    losses = check_array("losses", arrays["losses"], ndim=1)
    if losses.shape != (counts["step"],):
        raise ValueError(f"losses must hold one loss per completed step, (step,) = ({counts['step']},), "
                         f"got shape {losses.shape}")
    try:
        rng_state = json.loads(str(arrays["rng_state"]))
    except ValueError as e:
        raise ValueError(f"rng_state is not JSON ({e})") from None
    if not isinstance(rng_state, dict) or "bit_generator" not in rng_state:
        raise ValueError("rng_state is not a numpy bit generator state")
    config = None
    if "config" in arrays:
        try:
            config = json.loads(str(arrays["config"]))
        except ValueError as e:
            raise ValueError(f"config is not JSON ({e})") from None
    return Checkpoint(params=tree["params"], opt_state=AdamWState(counts["adamw_step"], tree["m"], tree["v"]),
                      step=counts["step"], rng_state=rng_state, losses=losses, config=config)


def _check_config(path, saved, config):
    """Refuse to resume a checkpoint that another config wrote (a checkpoint without a config predates this
    check and resumes as before)."""
    if saved is None or config is None or saved == config:
        return
    keys = sorted(set(saved) | set(config))
    diffs = [f"{k}: checkpoint {saved.get(k, '(absent)')!r}, this run {config.get(k, '(absent)')!r}"
             for k in keys if saved.get(k, "(absent)") != config.get(k, "(absent)")]
    raise ConfigMismatchError(f"checkpoint_path {path!r} was written by a run with another config "
                              f"({'; '.join(diffs)}): resuming it would continue that run under this one's name. "
                              f"Give this run another output folder or checkpoint_path, or delete the checkpoint "
                              f"to start over (resume=False overwrites it)")


def resume_checkpoint(path, params, steps, rng, config=None) -> Checkpoint:
    """Load the checkpoint at ``path`` to continue a run of ``steps`` steps from ``params`` with ``config``: check
    that it fits (config, params' keys, shapes and dtypes, AdamW's count, steps, the rng's kind), set ``rng``
    to its state and return it. Raises CheckpointError, ConfigMismatchError or InputError, naming the file."""
    ckpt = load_checkpoint(path)
    _check_config(path, ckpt.config, config)
    try:
        check_like("checkpoint params", ckpt.params, params)
    except ValueError as e:
        raise InputError(f"checkpoint_path {path!r} does not fit params: {e}") from None
    if ckpt.opt_state.step != ckpt.step:  # train takes one AdamW update per step
        raise CheckpointError(f"checkpoint_path {path!r} is at step {ckpt.step} but its AdamW state has taken "
                              f"{ckpt.opt_state.step} updates, so train did not write it; {_START_OVER}")
    if ckpt.step > steps:
        raise InputError(f"checkpoint_path {path!r} is at step {ckpt.step}, past steps={steps}")
    if ckpt.rng_state.get("bit_generator") != type(rng.bit_generator).__name__:
        raise InputError(f"rng uses {type(rng.bit_generator).__name__} but checkpoint_path {path!r} saved a "
                         f"{ckpt.rng_state.get('bit_generator')} state")
    rng.bit_generator.state = ckpt.rng_state
    return ckpt
