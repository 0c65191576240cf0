"""``minimal.evaluations.Evaluations``: a run's evaluations and best weights beside its checkpoint; a resumed run
reads them back without the evaluations it will make again."""
import numpy as np

from minimal.evaluations import Evaluations
from minimal.train import train


def _run(ckpt, steps, log, every=2, stop_at=None):
    """Minimise |w - 3|^2, evaluating (value = the loss) every ``every`` steps; raise KeyboardInterrupt at ``stop_at``."""
    def lg(p, step, rng):
        if step > 0 and step % every == 0:
            value = float(((p["w"] - 3.0) ** 2).sum())
            log.record(step, value, p, best=not log.curve or value < min(log.curve.values()))
            if step == stop_at:
                raise KeyboardInterrupt
        return float(((p["w"] - 3.0) ** 2).sum()), {"w": 2 * (p["w"] - 3.0)}
    return train(lg, {"w": np.zeros(2)}, steps, lr_schedule=lambda s: 0.1, checkpoint_path=ckpt,
                 checkpoint_every=every, progress=False)


def test_a_fresh_run_reads_nothing_and_a_run_without_a_checkpoint_writes_nothing(tmp_path):
    log = Evaluations(tmp_path / "run.npz")
    assert log.curve == {} and log.best_params is None and log.resumed_from is None and log.earlier_losses.size == 0
    off = Evaluations(None)
    off.record(2, 1.0, {"w": np.ones(1)}, best=True)
    assert off.curve == {2: 1.0} and list(tmp_path.iterdir()) == []


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
