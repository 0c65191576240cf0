"""``minimal.run.stopping.ReduceOnPlateau``: the learning rate is cut at each plateau and the run stops at the plateau
after the last cut; a resumed run (the schedule replayed from its saved curve) gets the same rates and stops at the
same step. The Shakespeare experiment trains with it (``Config()``); its interrupted run resumes to the same end."""
import numpy as np
import pytest

from minimal.experiments.minrnn import shakespeare_model as SM
from minimal.run.stopping import ReduceOnPlateau
from minimal.validate import InputError

from _crash import crash_after_evaluation


def _feed(rule, curve):
    for step in sorted(curve):
        rule.update(step, curve[step])
        if rule.done:
            return step
    return None


def test_the_rate_is_cut_at_each_plateau_and_the_run_stops_after_the_last_cut():
    # falls by 0.1 each evaluation until step 100, then flat for good
    curve = {s: 1.0 - 0.1 * min(s, 100) / 10 for s in range(0, 1001, 10)}
    rule = ReduceOnPlateau(lr=1e-2, patience=50, min_gain=0.01, factor=0.1, reductions=2)
    stop = _feed(rule, curve)
    # the clock last restarts at step 100; 50 steps later the first cut, then a fresh rule: its clock starts at the
    # next evaluation (160), so the second cut comes at 210 and the stop at 270
    assert rule.starts == [150, 210] and stop == 270 and rule.done
    assert rule.lr(149) == pytest.approx(1e-2) and rule.lr(150) == pytest.approx(1e-3)
    assert rule.lr(209) == pytest.approx(1e-3) and rule.lr(210) == pytest.approx(1e-4)
    assert (rule.best, rule.best_step) == (pytest.approx(0.0), 100)


def test_a_steady_slow_fall_is_never_cut():
    """Falls of min_gain / 2 per evaluation add up: the clock restarts every second evaluation."""
    curve = {s: 5.0 - 0.005 * s / 10 for s in range(0, 5001, 10)}
    rule = ReduceOnPlateau(lr=1.0, patience=30, min_gain=0.01)
    assert _feed(rule, curve) is None and rule.starts == []


def test_warm_up_then_the_rate():
    rule = ReduceOnPlateau(lr=3e-3, patience=10, min_gain=0.1, warmup=100)
    assert rule.lr(0) == pytest.approx(3e-5) and rule.lr(49) == pytest.approx(1.5e-3)
    assert rule.lr(99) == pytest.approx(3e-3) and rule.lr(5000) == pytest.approx(3e-3)


def test_replaying_a_curve_gives_the_live_schedule():
    rng = np.random.default_rng(0)
    curve = {s: float(v) for s, v in zip(range(0, 3000, 25), 2 + np.cumsum(rng.normal(-0.002, 0.01, 120)))}
    live = ReduceOnPlateau(lr=1e-3, patience=200, min_gain=0.01)
    _feed(live, curve)
    seen = {s: v for s, v in curve.items() if s <= (max(live.starts) if live.starts else max(curve))}
    again = ReduceOnPlateau.replay(seen, lr=1e-3, patience=200, min_gain=0.01)
    assert again.starts == [s for s in live.starts if s <= max(seen)]
    assert [again.lr(s) for s in range(0, max(seen) + 1)] == [live.lr(s) for s in range(0, max(seen) + 1)]


def test_a_nan_evaluation_is_never_the_best():
    rule = ReduceOnPlateau(lr=1.0, patience=100, min_gain=0.01)
    rule.update(0, 2.0)
    assert rule.update(10, float("nan")) is False and rule.best == 2.0


@pytest.mark.parametrize("kw, name", [({"lr": 0}, "lr"), ({"lr": float("nan")}, "lr"), ({"factor": 1.0}, "factor"),
                                      ({"factor": 0}, "factor"), ({"reductions": -1}, "reductions"),
                                      ({"warmup": 1.5}, "warmup"), ({"patience": 0}, "patience"),
                                      ({"min_gain": -0.1}, "min_gain"), ({"mode": "down"}, "mode")])
def test_bad_arguments_are_named(kw, name):
    args = {"lr": 1e-3, "patience": 10, "min_gain": 0.01, **kw}
    with pytest.raises(InputError, match=f"^{name} must"):
        ReduceOnPlateau(**args)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from minimal.experiments.minrnn import shakespeare as S

    c = S.Config(D=8, T=16, batch=4, steps=400, eval_every=10, patience=30, min_gain=0.05, eval_windows=4,
                 warmup=10, kinds=("mingru",), sample_chars=4)
    whole = S.run(c, out_dir=tmp_path_factory.mktemp("whole"), progress=False)["models"]["mingru"]
    assert whole["stopped_early"] and len(whole["lr_cut_steps"]) == 2 and whole["steps_run"] < c.steps
    return c, whole


_SAME = ("curve_steps", "curve", "lr_cut_steps", "steps_run", "steps_to_best", "best_test_loss", "final_test_loss",
         "train_curve", "train_loss_tail")


def test_an_interrupted_shakespeare_run_resumes_to_the_same_stop(tmp_path, monkeypatch, tiny):
    """A tiny Config() with the plateau schedule, stopped by Ctrl-C halfway and resumed: the same curve, the same
    cuts, the same stop and the same scored (best) weights as the run that was never interrupted."""
    from minimal.experiments.minrnn import shakespeare as S

    c, whole = tiny
    real, calls = SM.evaluate, []

    def interrupt(*a):
        calls.append(1)
        if len(calls) == 7:          # the evaluation at step 60, after the checkpoint at step 60 was written
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(S, "evaluate", interrupt)
    with pytest.raises(KeyboardInterrupt):
        S.run(c, out_dir=tmp_path, progress=False)
    monkeypatch.setattr(S, "evaluate", real)
    resumed = S.run(c, out_dir=tmp_path, progress=False)["models"]["mingru"]
    assert resumed["resumed_from"] == 60 and whole["resumed_from"] is None
    for key in _SAME:
        assert resumed[key] == whole[key], key


@pytest.mark.parametrize("where", ["first cut", "stop"])
def test_a_crash_after_an_evaluation_was_saved_resumes_to_the_same_stop(tmp_path, monkeypatch, tiny, where):
    """The run dies right after the curve file got the evaluation at the first cut (or at the stop) and before the
    next checkpoint: the resumed run makes that evaluation again (it must not count it twice, which would move
    the cuts) and, at the stop, scores the best weights saved before the crash."""
    from minimal.experiments.minrnn import shakespeare as S

    c, whole = tiny
    at = whole["lr_cut_steps"][0] if where == "first cut" else whole["steps_run"]
    crash_after_evaluation(monkeypatch, lambda: S.run(c, out_dir=tmp_path, progress=False), at)
    resumed = S.run(c, out_dir=tmp_path, progress=False)["models"]["mingru"]
    assert resumed["resumed_from"] == at
    for key in _SAME:
        assert resumed[key] == whole[key], key


def test_a_resumed_run_scores_the_best_weights_saved_before_the_crash(tmp_path, monkeypatch, tiny):
    """Crash right after the stop's evaluation was saved; on resume no evaluation is a new best (the test subset's
    loss is made worse than any), so the weights scored must be the ones saved beside the checkpoint."""
    from minimal.experiments.minrnn import shakespeare as S

    c, whole = tiny
    at = whole["steps_run"]
    crash_after_evaluation(monkeypatch, lambda: S.run(c, out_dir=tmp_path, progress=False), at)
    real_eval = SM.evaluate
    monkeypatch.setattr(S, "evaluate", lambda p, windows, kind: 99.0 if len(windows) == c.eval_windows
                        else real_eval(p, windows, kind))
    resumed = S.run(c, out_dir=tmp_path, progress=False)["models"]["mingru"]
    assert resumed["curve"][-1] == 99.0 and resumed["steps_run"] == at
    assert resumed["final_test_loss"] == whole["final_test_loss"]


def test_a_stopped_run_reports_its_training_losses_not_its_evaluations(tiny, monkeypatch, tmp_path):
    """train_curve / train_loss_tail of a run the rule stopped are its training losses (every step's, chunked),
    which the run has no TrainResult for."""
    from minimal.experiments.minrnn import shakespeare as S

    c, whole = tiny
    real, seen = SM.lm_loss_and_grads, []

    def spy(*a):
        loss, grads = real(*a)
        seen.append(loss)
        return loss, grads

    monkeypatch.setattr(S, "lm_loss_and_grads", spy)
    m = S.run(c, progress=False)["models"]["mingru"]
    assert m["stopped_early"] and len(seen) == m["steps_run"] == whole["steps_run"]
    assert m["train_curve"] == [float(np.mean(x)) for x in np.array_split(seen, 50)]
    assert m["train_loss_tail"] == float(np.mean(seen[-(len(seen) // 20):]))
