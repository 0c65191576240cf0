"""``minimal.run.evaluations.Evaluations``: a run's evaluations and best weights beside its checkpoint; a resumed run
reads them back without the evaluations it will make again."""
import numpy as np
import pytest

from minimal.run.evaluations import Evaluations
from minimal.run.train import train


def _run(ckpt, steps, log, every=2, stop_at=None):
    """Minimise |w - 3|^2, evaluating (value = the loss) every ``every`` steps; Ctrl-C (KeyboardInterrupt) inside
    step ``stop_at``, after its evaluation if it has one."""
    def lg(p, step, rng):
        if step > 0 and step % every == 0:
            value = float(((p["w"] - 3.0) ** 2).sum())
            log.record(step, value, p, best=not log.curve or value < min(log.curve.values()))
        if step == stop_at:
            raise KeyboardInterrupt
        return float(((p["w"] - 3.0) ** 2).sum()), {"w": 2 * (p["w"] - 3.0)}
    return train(lg, {"w": np.zeros(2)}, steps, lr_schedule=lambda s: 0.1, checkpoint_path=ckpt,
                 checkpoint_every=every, progress=False)


def test_a_fresh_run_reads_nothing(tmp_path):
    log = Evaluations(tmp_path / "run.npz")
    assert log.curve == {} and log.best_params is None and log.resumed_from is None and log.earlier_losses.size == 0


def test_without_a_checkpoint_nothing_is_written(monkeypatch):
    from minimal.run import io

    def refuse(*a, **k):
        raise AssertionError("wrote a file")

    monkeypatch.setattr(io, "write_json", refuse)
    monkeypatch.setattr(io, "save_weights", refuse)
    off = Evaluations(None)
    off.record(2, 1.0, {"w": np.ones(1)}, best=True)
    assert off.curve == {2: 1.0} and off.best_params["w"][0] == 1.0 and off.resumed_from is None


def test_a_checkpoint_before_the_first_evaluation_gives_its_losses(tmp_path):
    """Ctrl-C at step 1, before the first evaluation (every 2 steps): no curve file, but the checkpoint's loss is
    kept for a run that the rule later stops."""
    log = Evaluations(tmp_path / "run.npz")
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "run.npz", 12, log, stop_at=1)
    assert not (tmp_path / "run.curve.json").exists()
    again = Evaluations(tmp_path / "run.npz")
    assert again.resumed_from == 1 and again.curve == {} and again.earlier_losses.shape == (1,)


def test_a_resumed_run_gets_the_curve_before_its_checkpoint_and_the_best_weights(tmp_path):
    ckpt = tmp_path / "run.npz"
    whole = Evaluations(tmp_path / "whole.npz")
    _run(tmp_path / "whole.npz", 12, whole)
    log = Evaluations(ckpt)
    try:
        _run(ckpt, 12, log, stop_at=8)          # Ctrl-C inside the evaluation at step 8, after it was saved
    except KeyboardInterrupt:
        pass
    again = Evaluations(ckpt)
    assert again.resumed_from == 8 and sorted(again.curve) == [2, 4, 6]      # step 8 is evaluated again
    assert again.curve == {k: whole.curve[k] for k in (2, 4, 6)}
    np.testing.assert_array_equal(again.best_params["w"], log.best_params["w"])  # the last saved best: step 8's
    assert again.earlier_losses.shape == (8,)
    np.testing.assert_array_equal(again.losses([1.0, 2.0])[-2:], [1.0, 2.0])
    res = _run(ckpt, 12, again)
    assert again.curve == whole.curve and res.resumed_from == 8
    np.testing.assert_array_equal(again.best_params["w"], whole.best_params["w"])
