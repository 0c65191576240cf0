"""``minimal.run.stopping.Plateau``: the clock restarts at a gain of ``min_gain`` over the value where it last restarted
(so small gains add up), the best value is tracked apart from the clock, NaN is never an improvement, a replayed
curve gives the rule the live updates give, and bad arguments are refused by name."""
import math

import pytest

from minimal.run.stopping import Plateau
from minimal.validate import InputError


def _run(rule, curve):
    """Update ``rule`` with ``curve`` ({step: value}) in step order; the first step where it is stale, or None."""
    for step in sorted(curve):
        rule.update(step, curve[step])
        if rule.stale(step):
            return step
    return None


def test_a_loss_that_stops_falling_is_stale_patience_steps_after_its_last_real_fall():
    rule = Plateau(patience=30, min_gain=0.1, mode="min")
    curve = {10: 2.0, 20: 1.5, 30: 1.45, 40: 1.48, 50: 1.46}
    assert _run(rule, curve) == 50                  # 1.5 at step 20 restarted the clock; 1.45 is a gain of 0.05 only
    assert (rule.reference, rule.clock) == (1.5, 20)
    assert (rule.best, rule.best_step) == (1.45, 30)    # the best is any improvement, however small


def test_an_accuracy_that_stops_rising_is_stale_in_max_mode():
    rule = Plateau(patience=400, min_gain=0.5, mode="max")
    curve = {200: 40.0, 400: 60.0, 600: 60.3, 800: 59.0}
    assert _run(rule, curve) == 800 and rule.clock == 400 and rule.best_step == 600 and rule.best == 60.3


@pytest.mark.parametrize("mode,sign", [("min", -1), ("max", 1)])
def test_small_gains_add_up_and_restart_the_clock(mode, sign):
    """A gain of 0.6 min_gain per evaluation, never min_gain at once, restarts the clock every second evaluation
    (1.2 min_gain above the reference): a slowly improving run is never stale."""
    rule = Plateau(patience=2, min_gain=0.1, mode=mode)
    curve = {step: 5.0 + sign * 0.06 * step for step in range(1, 101)}
    assert _run(rule, curve) is None
    assert rule.clock == 99 and rule.best_step == 100


@pytest.mark.parametrize("mode,values", [("min", [3.0, 3.0, 3.0, 3.0]), ("max", [70.0, 70.0, 70.0, 70.0])])
def test_a_flat_curve_is_stale_after_patience_and_keeps_its_first_value_as_best(mode, values):
    rule = Plateau(patience=20, min_gain=0.01, mode=mode)
    assert _run(rule, dict(zip((10, 20, 30, 40), values))) == 30
    assert rule.best_step == 10          # equal is not better: the first of equal values stays the best


def test_the_best_is_tracked_apart_from_the_clock():
    rule = Plateau(patience=100, min_gain=1.0, mode="min")
    assert rule.update(1, 10.0) is True
    assert rule.update(2, 9.5) is True and rule.clock == 1          # better, but by less than min_gain
    assert rule.update(3, 9.7) is False and rule.best == 9.5        # worse than the best: not kept
    assert rule.update(4, 9.0) is True and rule.clock == 4          # 1.0 below the reference 10.0: restarts
    assert (rule.reference, rule.best, rule.best_step) == (9.0, 9.0, 4)


@pytest.mark.parametrize("mode", ["min", "max"])
def test_nan_is_never_an_improvement(mode):
    rule = Plateau(patience=5, min_gain=0.0, mode=mode)
    assert rule.update(1, math.nan) is False and rule.best is None and rule.reference is None
    assert not rule.stale(100)                      # no evaluation yet: no clock to run out
    assert rule.update(2, 1.0) is True
    assert rule.update(3, math.nan) is False and (rule.best, rule.best_step, rule.clock) == (1.0, 2, 2)
    assert rule.stale(7) and not rule.stale(6)


def test_min_gain_zero_restarts_on_any_value_at_least_as_good():
    rule = Plateau(patience=10, min_gain=0, mode="max")
    rule.update(1, 5.0)
    rule.update(2, 5.0)
    assert rule.clock == 2 and rule.best_step == 1     # an equal value restarts the clock, but is not a new best


def test_replay_equals_the_live_updates():
    curve = {25: 4.1, 50: 3.2, 75: 3.25, 100: 3.15, 125: 3.0, 150: math.nan, 175: 3.02, 200: 2.99}
    live = Plateau(patience=50, min_gain=0.1, mode="min")
    for step in (25, 50, 75, 100, 125, 150, 175, 200):
        live.update(step, curve[step])
    # the dict's order does not matter: replay goes in step order
    replayed = Plateau.replay(dict(reversed(list(curve.items()))), patience=50, min_gain=0.1, mode="min")
    fields = ("best", "best_step", "reference", "clock")
    assert [getattr(replayed, f) for f in fields] == [getattr(live, f) for f in fields] == [2.99, 200, 3.0, 125]
    assert replayed.stale(175) and not replayed.stale(174)


@pytest.mark.parametrize("kwargs,name", [
    ({"patience": 0, "min_gain": 0.1}, "patience"),
    ({"patience": 2.5, "min_gain": 0.1}, "patience"),
    ({"patience": True, "min_gain": 0.1}, "patience"),
    ({"patience": 10, "min_gain": -0.1}, "min_gain"),
    ({"patience": 10, "min_gain": math.nan}, "min_gain"),
    ({"patience": 10, "min_gain": math.inf}, "min_gain"),
    ({"patience": 10, "min_gain": "0.1"}, "min_gain"),
    ({"patience": 10, "min_gain": 0.1, "mode": "maximum"}, "mode"),
])
def test_bad_arguments_are_refused_by_name(kwargs, name):
    with pytest.raises(InputError, match=f"^{name} must be"):
        Plateau(**kwargs)
    with pytest.raises(InputError, match=f"^{name} must be"):
        Plateau.replay({1: 1.0}, **kwargs)
