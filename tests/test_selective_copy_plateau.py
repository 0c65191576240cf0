"""Selective copying trained until no learning rate helps any more (``Job.reductions``, stopping.ReduceOnPlateau):
the rate is cut at each plateau of the accuracy and the run stops at the plateau after the last cut; a run stopped
by Ctrl-C or a crash resumes from its checkpoint to the same cuts, the same stop and the same scored weights."""
import numpy as np
import pytest

from minimal.experiments.minrnn import selective_copy as S, selective_copy_model as SCM, selective_copy_summary as SCS
from minimal.run.stopping import ReduceOnPlateau
from minimal.run.train import train

from _crash import crash_after_evaluation


def test_the_plateau_schedule_cuts_the_rate_at_each_plateau_and_stops_after_the_last(monkeypatch):
    """A scripted accuracy: rises to step 6, then flat. With patience 4 and 2 reductions the rate is lr up to the
    evaluation at step 10 (4 steps after the last rise), lr / 10 after it; each new phase's clock starts at its
    first evaluation (step 12), so the next cut is at 16 and the stop at 22. Each step trains at the rate the rule
    gave it, and the weights scored are those of the best evaluation."""
    accuracies = iter([10.0, 20.0, 30.0] + [30.0] * 20)          # evaluations at steps 2, 4, 6, 8, ...
    seen, scored, rates = {}, [], []

    def fake_evaluate(params, job, batch=None):
        if batch is None:
            scored.append(seen[id(params)])
            return {"accuracy": -1.0}
        seen[id(params)] = next(accuracies)
        return {"accuracy": seen[id(params)]}

    def spy_train(lg, params, *, lr_schedule, **kw):
        return train(lg, params, lr_schedule=lambda s: rates.append(lr_schedule(s)) or rates[-1], **kw)

    monkeypatch.setattr(S, "evaluate", fake_evaluate)
    monkeypatch.setattr(S, "eval_batch", lambda job: "the fixed set")
    monkeypatch.setattr(S, "init_params", lambda rng, job: {"w": np.zeros(1)})
    monkeypatch.setattr(S, "loss_and_grads", lambda p, job, x, y: (1.0, {"w": np.ones(1)}))
    monkeypatch.setattr(f"{S.__name__}.train", spy_train)   # the name selective_copy calls
    job = S.Job(kind="mingru", depth=1, T=8, n_data=2, D=4, expansion=1, steps=100, eval_every=2, patience=4,
                min_gain=0.1, reductions=2, factor=0.1, warmup_steps=0, lr=1.0)
    out = S.run_job(job)
    assert out["lr_cut_steps"] == [10, 16] and out["steps_run"] == 22 and out["stopped_early"]
    assert out["steps_to_best"] == 6 and scored == [30.0]
    assert len(rates) == 22                                       # steps 0..21 trained, stopped at 22's evaluation
    assert rates[:10] == [1.0] * 10
    assert rates[10:16] == pytest.approx([0.1] * 6, rel=1e-15) and rates[16:] == pytest.approx([0.01] * 6, rel=1e-15)
    # the rule a saved curve replays to is the live one
    rule = S.replay(out["curve"], job)
    assert isinstance(rule, ReduceOnPlateau) and rule.starts == [10, 16] and rule.done and rule.best_step == 6


@pytest.mark.parametrize("kw,match", [({"reductions": -1}, "Job.reductions must be None or an integer >= 0"),
                                      ({"reductions": 2, "patience": None}, "Job.reductions needs Job.patience"),
                                      ({"factor": 1.0}, r"Job.factor must be a number in \(0, 1\)"),
                                      ({"factor": "0.1"}, r"Job.factor must be a number in \(0, 1\), got '0.1'")])
def test_bad_schedule_fields_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        S.Job(**kw)


def test_bad_schedule_fields_of_a_config_are_named():
    with pytest.raises(ValueError, match="Config.reductions needs Config.patience"):
        S.Config(reductions=2, patience=None)
    with pytest.raises(ValueError, match="factor"):
        S.Config(factor=1.5)


def test_the_default_grid_is_table_1s_trained_until_no_rate_helps():
    jobs = S.jobs(S.Config())
    assert len(jobs) == 36 and {(j.kind, j.depth, j.log_space) for j in jobs} == {
        (k, d, ls) for k in ("mingru", "minlstm") for d in (1, 2, 3) for ls in (True, False)}
    assert all(j.reductions == 2 and j.factor == 0.1 and j.patience == 1_000 and j.min_gain == 0.1
               and j.eval_every == 200 and j.steps == 30_000 and j.n_data == 16 and j.T == 64 for j in jobs)


TINY = S.Job(kind="mingru", depth=1, T=8, n_data=2, D=4, expansion=1, steps=300, eval_every=4, patience=12,
             min_gain=3.0, reductions=2, n_eval=64, batch=8, lr=3e-2)
_SAME = ("curve", "lr_cut_steps", "steps_run", "steps_to_best", "stopped_early", "accuracy", "accuracy_by_position",
         "eval_loss", "train_loss_tail")


@pytest.fixture(scope="module")
def whole():
    out = S.run_job(TINY)
    assert out["stopped_early"] and len(out["lr_cut_steps"]) == 2 and out["steps_run"] < TINY.steps
    return out


def test_an_interrupted_run_resumes_to_the_same_stop(tmp_path, monkeypatch, whole):
    """Ctrl-C at an evaluation between the two cuts, then the same call again: the same curve, cuts, stop, scored
    weights and training losses as the run that was never interrupted."""
    at = (whole["lr_cut_steps"][0] + whole["lr_cut_steps"][1]) // 2 // TINY.eval_every * TINY.eval_every
    real, calls = SCM.evaluate, []

    def interrupt(params, job, batch=None):
        calls.append(1)
        if batch is not None and len(calls) == at // TINY.eval_every:
            raise KeyboardInterrupt
        return real(params, job, batch)

    monkeypatch.setattr(S, "evaluate", interrupt)
    with pytest.raises(KeyboardInterrupt):
        S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz")
    monkeypatch.setattr(S, "evaluate", real)
    with np.load(tmp_path / "ckpt.npz") as z:
        assert int(z["step"]) == at
    resumed = S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz")
    for key in _SAME:
        assert resumed[key] == whole[key], key


@pytest.mark.parametrize("at", [2, 10])
def test_a_run_interrupted_between_evaluations_resumes_to_the_same_stop(tmp_path, monkeypatch, whole, at):
    """Ctrl-C inside the training step ``at``: before the first evaluation (step 2, no curve file yet) and between two
    (step 10); the checkpoint written on the way out holds ``at`` steps' losses, which the resumed run keeps."""
    real, calls = SCM.loss_and_grads, []

    def interrupt(*a):
        calls.append(1)
        if len(calls) == at + 1:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(S, "loss_and_grads", interrupt)
    with pytest.raises(KeyboardInterrupt):
        S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz")
    monkeypatch.setattr(S, "loss_and_grads", real)
    with np.load(tmp_path / "ckpt.npz") as z:
        assert int(z["step"]) == at and z["losses"].shape == (at,)
    assert (tmp_path / "ckpt.curve.json").exists() == (at > TINY.eval_every)
    resumed, never = S.train_job(TINY, checkpoint_path=tmp_path / "ckpt.npz"), S.train_job(TINY)
    assert resumed.curve == never.curve == whole["curve"] and resumed.steps_trained == len(never.losses) - at
    np.testing.assert_array_equal(resumed.losses, never.losses)          # every step's, the checkpoint's first
    for name in never.params:
        np.testing.assert_array_equal(resumed.params[name], never.params[name])


def test_resuming_a_stopped_run_trains_nothing_and_says_so(tmp_path, whole):
    first = S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz")
    again = S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz")      # the stop's checkpoint: the rule stops at once
    for key in _SAME:
        assert first[key] == whole[key] and again[key] == whole[key], key
    assert np.isfinite(first["ms_per_step"]) and np.isnan(again["ms_per_step"])


@pytest.mark.parametrize("where", ["first cut", "stop"])
def test_a_crash_after_an_evaluation_was_saved_resumes_to_the_same_stop(tmp_path, monkeypatch, whole, where):
    """The run dies right after the curve file got the evaluation at the first cut (or at the stop): the resumed
    run makes that evaluation again (counting it twice would move the cuts) and stops where the whole run did."""
    at = whole["lr_cut_steps"][0] if where == "first cut" else whole["steps_run"]
    crash_after_evaluation(monkeypatch, lambda: S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz"), at)
    resumed = S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz")
    for key in _SAME:
        assert resumed[key] == whole[key], key


def test_a_resumed_run_scores_the_best_weights_saved_before_the_crash(tmp_path, monkeypatch, whole):
    """Crash right after the stop's evaluation was saved; on resume no evaluation is a new best (the fixed set's
    accuracy is made worse than any), so the weights scored must be the ones saved beside the checkpoint."""
    at = whole["steps_run"]
    crash_after_evaluation(monkeypatch, lambda: S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz"), at)
    real = SCM.evaluate
    monkeypatch.setattr(S, "evaluate", lambda p, job, batch=None: {"accuracy": -1.0} if batch is not None
                        else real(p, job))
    resumed = S.run_job(TINY, checkpoint_path=tmp_path / "ckpt.npz")
    assert resumed["curve"]["accuracy"][-1] == -1.0 and resumed["steps_run"] == at
    assert resumed["accuracy"] == whole["accuracy"] and resumed["eval_loss"] == whole["eval_loss"]


def test_the_results_page_says_how_a_run_was_trained():
    import dataclasses
    from minimal.experiments.notes import minrnn as notes

    plateau = notes._sc_budget(dataclasses.asdict(S.Config()))
    assert "multiplied by 0.1 at each of the first 2 plateaus of 1,000 steps" in plateau
    assert "a cap of 30,000 steps" in plateau
    capped = notes._sc_budget(dataclasses.asdict(S.Config.capped()))
    assert "cap of 4,000 steps" in capped and "multiplied" not in capped
    assert notes._sc_budget(dataclasses.asdict(S.Config.log_space_400_8tokens())).startswith("400 steps")


def test_the_committed_runs_replay_to_their_recorded_cuts_and_stops():
    """Each committed run of ``Config()``: the rule replayed on its saved curve, evaluation by evaluation, cuts the
    rate where the run recorded it, is done first at the run's last evaluation (the live run stopped there, not
    before and not at the cap) and scores the recorded best evaluation."""
    config = S.Config()
    if not S.finished(config):
        pytest.skip("the 16-token grid of Config() is not committed here")
    jobs = S.jobs(config)
    assert len(jobs) == 36
    for job in jobs:
        r = S.SWEEP.record(job, config)
        res, curve = r["result"], r["result"]["curve"]
        done_at = None
        for i, step in enumerate(curve["steps"]):
            rule = S.replay({"steps": curve["steps"][:i + 1], "accuracy": curve["accuracy"][:i + 1]}, job)
            if rule.done:
                done_at = step
                break
        assert done_at == res["steps_run"] == curve["steps"][-1] < job.steps and res["stopped_early"], r["config"]
        assert rule.starts == res["lr_cut_steps"] and len(rule.starts) == job.reductions
        assert rule.best_step == res["steps_to_best"]


def test_the_docstring_states_the_committed_runs():
    """The numbers ``selective_copy_summary``'s docstring states for ``Config()``, Table 1's grid trained until no
    rate helps, are the committed runs'."""
    import re

    config = S.Config()
    if not S.finished(config):
        pytest.skip("the 16-token grid of Config() is not committed here")
    r = S.run(config, progress=False)
    text = " ".join(SCS.__doc__.split())
    for kind, name in (("mingru", "minGRU"), ("minlstm", "minLSTM")):
        log = " / ".join(f"{r[f'{kind}_{d}']:.1f} ± {r[f'{kind}_{d}_std']:.1f}" for d in (1, 2, 3))
        van = " / ".join(f"{r[f'{kind}_{d}_vanilla']:.1f} ± {r[f'{kind}_{d}_vanilla_std']:.1f}" for d in (1, 2, 3))
        assert f"{name}: log space {log}; vanilla {van}" in text
        ones = r[f"{kind}_1_runs"] + r[f"{kind}_1_vanilla_runs"]
        deeper = sum((r[f"{kind}_{d}{s}_runs"] for d in (2, 3) for s in ("", "_vanilla")), [])
        assert min(deeper) - max(ones) > 48          # "in each cell ... more than 48 points"
    assert "in each cell every deeper run stays more than 48 points above every one-layer run" in text
    rows = r["rows"]
    stop = sum((r[k + "_steps_run"] for k in rows), [])
    best = sum((r[k + "_steps_to_best"] for k in rows), [])
    assert f"at steps {min(stop):,} to {max(stop):,} (best evaluations at {min(best):,} to {max(best):,})" in text
    capped = S.run(S.Config.capped(), progress=False)
    gain = [a - b for k in rows for a, b in zip(r[k + "_runs"], capped[k + "_runs"])]
    assert f"{sum(g > 0 for g in gain)} of the {len(gain)} end above" in text and f"up to {max(gain):.1f} points" in text
    wrong = [f"{100 - r[k]:.1f}" for k in ("mingru_2", "mingru_3")]
    times = [f"{(100 - r[k]) / (100 - S.PAPER[k]):.1f}" for k in ("mingru_2", "mingru_3")]
    assert re.search(rf"{wrong[0]} and {wrong[1]} % wrong, {times[0]} and {times[1]} times", text)
    lstm = [(100 - r[k]) / (100 - S.PAPER[k.replace("_vanilla", "")]) for k in rows
            if k.startswith("minlstm") and "_1" not in k]
    assert f"({min(lstm):.2f} to {max(lstm):.2f} times its error rate)" in text
    assert f"(log space {r['mingru_2']:.1f} against {r['minlstm_2']:.1f})" in text
    one = [np.array(S.SWEEP.record(j, config)["result"]["accuracy_by_position"]) for j in S.jobs(config) if j.depth == 1]
    last, others = [p[-1] for p in one], [p[:-1].max() for p in one]
    assert (f"the last data token {min(last):.0f} to {max(last):.0f} % right, no other position above "
            f"{max(others):.0f} %") in text
