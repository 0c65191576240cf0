"""Train until a watched number stops improving: the rule both "trained to convergence" experiments use.

A run is evaluated every few steps. The rule keeps a reference value and a clock: an evaluation at least
``min_gain`` better than the reference becomes the new reference and restarts the clock; the run stops once
``patience`` steps have passed since the clock last restarted. Small improvements add up: a run that gains
``min_gain / 2`` per evaluation restarts the clock every second evaluation, it is never stopped for improving
slowly. The best value seen (any improvement, however small) is tracked on its own: its weights are the ones
a run scores. A NaN evaluation is never an improvement; a run whose every evaluation so far is NaN has no
reference, and is stale once its NaN evaluations span ``patience`` steps (it would otherwise never stop).

    rule = Plateau(patience=500, min_gain=0.005, mode="min")
    for step, value in evaluations:
        improved = rule.update(step, value)    # True: keep these weights as the best
        if rule.stale(step):
            break

``Plateau.replay(curve)`` rebuilds the rule from a saved evaluation curve {step: value}, so a resumed run stops
where an uninterrupted one would.

``ReduceOnPlateau`` trains until no learning rate helps any more: each time the rule above is met the learning rate
is multiplied by ``factor`` and the rule starts afresh; the run stops at the plateau after the last reduction. The
learning rate of a step is a function of the evaluations before it, so a resumed run replays it exactly.
"""
from __future__ import annotations

import math

from minimal.validate import InputError

__all__ = ["Plateau", "ReduceOnPlateau"]


class Plateau:
    """The stopping rule of the module docstring.

    Args:
        patience: steps (int >= 1) without an improvement of ``min_gain`` after which ``stale`` is True.
        min_gain: the improvement (>= 0, in the watched number's units) that restarts the clock.
        mode: "min" (a loss) or "max" (an accuracy).
    Attributes:
        best, best_step: the best value seen and the step of its evaluation (None before the first update);
        reference, clock: the value and step where the clock last restarted;
        first_nan, last_nan: the steps of the first and last evaluations while every one was NaN (None once a
            value is not NaN, and before the first update).
    """

    def __init__(self, patience, min_gain, mode="min"):
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise InputError(f"patience must be an integer >= 1 (steps), got {patience!r}")
        if isinstance(min_gain, bool) or not isinstance(min_gain, (int, float)) or not (
                math.isfinite(min_gain) and min_gain >= 0):
            raise InputError(f"min_gain must be a finite number >= 0, got {min_gain!r}")
        if mode not in ("min", "max"):
            raise InputError(f"mode must be 'min' or 'max', got {mode!r}")
        self.patience, self.min_gain, self.mode = patience, float(min_gain), mode
        self.best = self.best_step = self.reference = None
        self.first_nan = self.last_nan = None
        self.clock = 0

    def _gain(self, value, than):
        return (than - value) if self.mode == "min" else (value - than)

    def update(self, step, value):
        """Record the evaluation ``value`` at ``step``; True when it is the best so far (strictly better).
        A NaN value is never an improvement; NaN values before the first other one run the clock of ``stale``."""
        value = float(value)
        if math.isnan(value):
            if self.reference is None:
                self.first_nan = int(step) if self.first_nan is None else self.first_nan
                self.last_nan = int(step)
            return False
        self.first_nan = self.last_nan = None
        if self.reference is None or self._gain(value, self.reference) >= self.min_gain:
            self.reference, self.clock = value, int(step)
        if self.best is None or self._gain(value, self.best) > 0:
            self.best, self.best_step = value, int(step)
            return True
        return False

    def stale(self, step):
        """True once ``patience`` steps have passed at ``step`` since the clock last restarted; while every
        evaluation was NaN, once the NaN evaluations span ``patience`` steps (a run whose metric is NaN from its
        first evaluation stops, rather than never)."""
        if self.reference is None:
            return self.first_nan is not None and min(int(step), self.last_nan) - self.first_nan >= self.patience
        return int(step) - self.clock >= self.patience

    @classmethod
    def replay(cls, curve, patience, min_gain, mode="min"):
        """The rule after the evaluations of ``curve`` ({step: value}), in step order."""
        rule = cls(patience, min_gain, mode)
        for step in sorted(curve):
            rule.update(step, curve[step])
        return rule


class ReduceOnPlateau:
    """A learning rate cut at each plateau, and a stop at the last one.

    lr(step) = lr · min(1, (step + 1) / warmup) · factor^k, k = the number of reductions made at evaluations at or
    before ``step``. A ``Plateau(patience, min_gain, mode)`` watches each phase; when it is stale, the first
    ``reductions`` times a new phase starts (k + 1, a fresh Plateau from the next evaluation on), the next time
    ``done`` becomes True. The best value and its step are tracked over the whole run.

    Args:
        lr: the first phase's learning rate (> 0); warmup: linear warm-up steps (int >= 0);
        patience, min_gain, mode: the ``Plateau`` of each phase; factor: in (0, 1); reductions: int >= 0.
    Attributes:
        starts: the steps where the phases after the first began; done; best, best_step.
    """

    def __init__(self, lr, patience, min_gain, factor=0.1, reductions=2, warmup=0, mode="min"):
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (math.isfinite(lr) and lr > 0):
            raise InputError(f"lr must be a finite number > 0, got {lr!r}")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor < 1:
            raise InputError(f"factor must be a number in (0, 1), got {factor!r}")
        for name, v in (("reductions", reductions), ("warmup", warmup)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"{name} must be an integer >= 0, got {v!r}")
        self.base, self.factor, self.reductions, self.warmup = float(lr), float(factor), reductions, warmup
        self.patience, self.min_gain, self.mode = patience, min_gain, mode
        self.phase = Plateau(patience, min_gain, mode)
        self.overall = Plateau(patience, min_gain, mode)
        self.starts, self.done = [], False

    @property
    def best(self):
        return self.overall.best

    @property
    def best_step(self):
        return self.overall.best_step

    def update(self, step, value):
        """Record an evaluation; True when it is the best of the run so far. After it, ``done`` says whether the
        run should stop and ``lr(step)`` is the rate of the step that follows the evaluation."""
        improved = self.overall.update(step, value)
        self.phase.update(step, value)
        if not self.done and self.phase.stale(step):
            if len(self.starts) < self.reductions:
                self.starts.append(int(step))
                self.phase = Plateau(self.patience, self.min_gain, self.mode)
            else:
                self.done = True
        return improved

    def lr(self, step):
        """The learning rate of 0-based ``step``."""
        k = sum(s <= step for s in self.starts)
        warm = min(1.0, (step + 1) / self.warmup) if self.warmup else 1.0
        return self.base * warm * self.factor ** k

    @classmethod
    def replay(cls, curve, **kw):
        """The schedule after the evaluations of ``curve`` ({step: value}), in step order (``kw``: __init__'s)."""
        rule = cls(**kw)
        for step in sorted(curve):
            rule.update(step, curve[step])
        return rule
