"""The evaluations of a run that trains until a watched number stops improving, kept beside its checkpoint.

A run trained by ``minimal.run.train`` with a checkpoint at ``<run>.npz`` and evaluated every few steps keeps two more
files, so that a resumed run decides its learning rate, its stop and its scored weights exactly as an
uninterrupted one:

    <run>.curve.json    {step: value} of every evaluation so far (rewritten after each)
    <run>.best.npz      the best evaluated weights so far (``minimal.run.io.save_weights``, sidecar <run>.best.json)

    log = Evaluations(checkpoint_path)        # reads what an earlier, interrupted run left
    rule = ReduceOnPlateau.replay(log.curve, ...)
    ...
    log.record(step, value, params, best=rule.update(step, value))

On resume, the evaluations at or after the checkpoint's step are dropped: the resumed run makes them again (an
evaluation counted twice would move a ``stopping.Plateau``'s clock). ``log.losses(seen)`` gives every step's
training loss of a run that stopped by raising out of ``minimal.run.train``, which then returns no ``TrainResult``:
the checkpoint's, then those this process saw.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import io

__all__ = ["Evaluations"]


class Evaluations:
    """The evaluation curve and best weights of one run (module docstring).

    Args:
        checkpoint_path: the run's ``minimal.run.train`` checkpoint (``.npz``), or None: nothing is written or read.
        meta: JSON values saved in the best weights' sidecar (e.g. the run's config).
    Attributes:
        curve: {step: value} of the evaluations kept; best_params: the best evaluated weights (None before one);
        resumed_from: the checkpoint's step (None for a fresh run); earlier_losses: its training losses,
        (resumed_from,), empty for a fresh run.
    """

    def __init__(self, checkpoint_path=None, meta=None):
        self.meta = {} if meta is None else dict(meta)
        self.curve, self.best_params, self.resumed_from, self.earlier_losses = {}, None, None, np.zeros(0)
        self.curve_path = self.best_path = None
        if checkpoint_path is None:
            return
        ckpt = Path(checkpoint_path)
        self.curve_path, self.best_path = ckpt.with_suffix(".curve.json"), ckpt.with_suffix(".best.npz")
        if not ckpt.exists():
            return
        # (a checkpoint may predate the first evaluation: then there is no curve file yet)
        with np.load(ckpt, allow_pickle=False) as z:
            self.resumed_from, self.earlier_losses = int(z["step"]), np.asarray(z["losses"], np.float64)
        if self.curve_path.exists():
            # evaluations from the checkpoint's step on are made again by the resumed run
            self.curve = {int(k): v for k, v in json.loads(self.curve_path.read_text()).items()
                          if int(k) < self.resumed_from}
        if self.best_path.exists():
            self.best_params = io.load_weights(self.best_path)[0]["best"]

    def record(self, step, value, params, best):
        """Keep the evaluation ``value`` at ``step``; ``best``: ``params`` are the best so far (saved)."""
        self.curve[int(step)] = value
        if best:
            self.best_params = params
            if self.best_path is not None:
                io.save_weights(self.best_path, {"best": params}, self.meta, {"step": int(step)})
        if self.curve_path is not None:
            io.write_json(self.curve_path, self.curve)

    def losses(self, seen):
        """Every step's training loss of a run that raised out of ``train``: the checkpoint's, then ``seen``."""
        return np.concatenate([self.earlier_losses, np.asarray(seen, np.float64)])
