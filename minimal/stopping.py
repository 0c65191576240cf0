"""Train until a watched number stops improving: the rule both "trained to convergence" experiments use.

A run is evaluated every few steps. The rule keeps a reference value and a clock: an evaluation at least
``min_gain`` better than the reference becomes the new reference and restarts the clock; the run stops once
``patience`` steps have passed since the clock last restarted. Small improvements add up: a run that gains
``min_gain / 2`` per evaluation restarts the clock every second evaluation, it is never stopped for improving
slowly. The best value seen (any improvement, however small) is tracked on its own: its weights are the ones
a run scores.

    rule = Plateau(patience=500, min_gain=0.005, mode="min")
    for step, value in evaluations:
        improved = rule.update(step, value)    # True: keep these weights as the best
        if rule.stale(step):
            break

``Plateau.replay(curve)`` rebuilds the rule from a saved evaluation curve {step: value}, so a resumed run stops
where an uninterrupted one would.
"""
from __future__ import annotations

import math

from minimal.validate import InputError

__all__ = ["Plateau"]


class Plateau:
    """The stopping rule of the module docstring.

    Args:
        patience: steps (int >= 1) without an improvement of ``min_gain`` after which ``stale`` is True.
        min_gain: the improvement (>= 0, in the watched number's units) that restarts the clock.
        mode: "min" (a loss) or "max" (an accuracy).
    Attributes:
        best, best_step: the best value seen and the step of its evaluation (None before the first update);
        reference, clock: the value and step where the clock last restarted.
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
        self.clock = 0

    def _gain(self, value, than):
        return (than - value) if self.mode == "min" else (value - than)

    def update(self, step, value):
        """Record the evaluation ``value`` at ``step``; True when it is the best so far (strictly better).
        A NaN value is never an improvement."""
        value = float(value)
        if math.isnan(value):
            return False
        if self.reference is None or self._gain(value, self.reference) >= self.min_gain:
            self.reference, self.clock = value, int(step)
        if self.best is None or self._gain(value, self.best) > 0:
            self.best, self.best_step = value, int(step)
            return True
        return False

    def stale(self, step):
        """True once ``patience`` steps have passed at ``step`` since the clock last restarted."""
        return self.reference is not None and int(step) - self.clock >= self.patience

    @classmethod
    def replay(cls, curve, patience, min_gain, mode="min"):
        """The rule after the evaluations of ``curve`` ({step: value}), in step order."""
        rule = cls(patience, min_gain, mode)
        for step in sorted(curve):
            rule.update(step, curve[step])
        return rule
