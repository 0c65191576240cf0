"""The shared training loop: it equals the hand-written AdamW loop, and checkpoints resume bit for bit."""
import functools
import os

import numpy as np
import pytest

from minimal.optim import adamw_init, adamw_step, clip_by_global_norm, cosine_schedule
from minimal.train import Checkpoint, NonFiniteLossError, load_checkpoint, save_checkpoint, train
from minimal.validate import InputError

STEPS = 9
W_TRUE = np.array([[1.0, -2.0], [0.5, 0.0], [3.0, 1.0]])  # (D=3, K=2)
SCHEDULE = functools.partial(cosine_schedule, total_steps=STEPS, peak_lr=0.1, warmup_steps=2, final_lr=1e-3)


def init_params():
    return {"W": np.zeros((3, 2)), "nu_log": np.array([0.3, -0.2])}


def regression(params, step, rng):
    """Least squares on a fresh mini-batch drawn from rng: L = mean((x W - y)²) + mean(nu_log²)."""
    B = 4 + step % 3  # the amount of randomness drawn varies with the step
    x = rng.standard_normal((B, 3))
    err = x @ params["W"] - (x @ W_TRUE + 0.01 * rng.standard_normal((B, 2)))
    loss = np.mean(err ** 2) + np.mean(params["nu_log"] ** 2)
    return loss, {"W": 2 * x.T @ err / err.size, "nu_log": params["nu_log"]}


KW = dict(lr_schedule=SCHEDULE, clip=1.0, weight_decay=0.1, progress=False, rng=7)


def assert_same_result(a, b):
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
        np.testing.assert_array_equal(a.opt_state.m[k], b.opt_state.m[k])
        np.testing.assert_array_equal(a.opt_state.v[k], b.opt_state.v[k])
    assert a.opt_state.step == b.opt_state.step
    np.testing.assert_array_equal(a.losses, b.losses)


@pytest.fixture
def reference():
    return train(regression, init_params(), STEPS, **KW)


def test_train_equals_the_hand_written_adamw_loop(reference):
    params, state, rng = init_params(), adamw_init(init_params()), np.random.default_rng(7)
    for step in range(STEPS):
        _, grads = regression(params, step, rng)
        grads, _ = clip_by_global_norm(grads, 1.0)
        params, state = adamw_step(params, grads, state, SCHEDULE(step), weight_decay=0.1)
    for k in params:
        np.testing.assert_array_equal(reference.params[k], params[k])
    assert reference.losses.shape == (STEPS,) and reference.resumed_from == 0


def test_weight_decay_schedule_is_applied_step_by_step():
    wd = lambda step: 0.1 if step < STEPS // 2 else 0.0  # noqa: E731
    result = train(regression, init_params(), STEPS, **{**KW, "weight_decay": wd})
    params, state, rng = init_params(), adamw_init(init_params()), np.random.default_rng(7)
    for step in range(STEPS):
        _, grads = regression(params, step, rng)
        grads, _ = clip_by_global_norm(grads, 1.0)
        params, state = adamw_step(params, grads, state, SCHEDULE(step), weight_decay=wd(step))
    for k in params:
        np.testing.assert_array_equal(result.params[k], params[k])
    constant = train(regression, init_params(), STEPS, **KW)
    assert not np.array_equal(constant.params["W"], result.params["W"])


def test_negative_weight_decay_is_refused():
    with pytest.raises(ValueError, match="weight_decay"):
        train(regression, init_params(), 3, **{**KW, "weight_decay": -0.1})


def test_training_reduces_the_loss():
    result = train(regression, init_params(), 300, lr_schedule=0.05, progress=False, rng=0)
    assert result.losses[-1] < 1e-2 * result.losses[0]


def test_resume_after_keyboard_interrupt_is_bitwise_identical(tmp_path, reference):
    path = tmp_path / "ckpt.npz"

    def interrupted(params, step, rng):
        if step == 5:
            raise KeyboardInterrupt
        return regression(params, step, rng)

    with pytest.raises(KeyboardInterrupt):
        train(interrupted, init_params(), STEPS, checkpoint_path=path, checkpoint_every=100, **KW)
    assert load_checkpoint(path).step == 5  # saved on the interrupt, not by the (100-step) schedule
    resumed = train(regression, init_params(), STEPS, checkpoint_path=path, **KW)
    assert resumed.resumed_from == 5
    assert_same_result(resumed, reference)


def test_resume_after_a_crash_starts_from_the_last_periodic_checkpoint(tmp_path, reference):
    path = tmp_path / "ckpt.npz"

    def crashing(params, step, rng):
        if step == 7:
            raise RuntimeError("out of memory")
        return regression(params, step, rng)

    with pytest.raises(RuntimeError):
        train(crashing, init_params(), STEPS, checkpoint_path=path, checkpoint_every=3, **KW)
    seen = []

    def recording(params, step, rng):
        seen.append(step)
        return regression(params, step, rng)

    resumed = train(recording, init_params(), STEPS, checkpoint_path=path, checkpoint_every=3, **KW)
    assert seen == [6, 7, 8]
    assert_same_result(resumed, reference)


def test_checkpoint_holds_plain_arrays_and_no_temporary_file_is_left(tmp_path, reference):
    path = tmp_path / "run.npz"
    train(regression, init_params(), STEPS, checkpoint_path=path, checkpoint_every=4, **KW)
    assert os.listdir(tmp_path) == ["run.npz"]
    with np.load(path, allow_pickle=False) as z:  # would raise on pickled objects
        assert set(z.files) == {"step", "adamw_step", "losses", "rng_state", "params/W", "params/nu_log",
                                "m/W", "m/nu_log", "v/W", "v/nu_log"}
    ckpt = load_checkpoint(path)
    assert ckpt.step == STEPS and ckpt.opt_state.step == STEPS
    np.testing.assert_array_equal(ckpt.losses, reference.losses)
    rng = np.random.default_rng()
    rng.bit_generator.state = ckpt.rng_state  # the JSON round trip gives a state numpy accepts


def test_save_and_load_round_trip_keeps_dtypes(tmp_path):
    params = {"W_Q": np.arange(6, dtype=np.float32).reshape(2, 3)}
    state = adamw_init(params)._replace(step=3)
    rng_state = np.random.default_rng(1).bit_generator.state
    save_checkpoint(tmp_path / "c.npz", Checkpoint(params, state, 3, rng_state, np.ones(3)))
    ck = load_checkpoint(tmp_path / "c.npz")
    assert ck.params["W_Q"].dtype == np.float32 and ck.opt_state.m["W_Q"].dtype == np.float32
    np.testing.assert_array_equal(ck.params["W_Q"], params["W_Q"])
    assert ck.step == 3 and ck.opt_state.step == 3 and ck.rng_state == rng_state


def test_non_finite_loss_stops_with_a_clear_error_and_keeps_the_last_checkpoint(tmp_path):
    path = tmp_path / "ckpt.npz"
    on_disk = {}

    def diverging(params, step, rng):
        loss, grads = regression(params, step, rng)
        if step == 5:
            on_disk["bytes"] = path.read_bytes()  # the checkpoint of step 4
            return np.nan, grads
        return loss, grads

    with pytest.raises(NonFiniteLossError, match="loss became nan at step 5.*checkpoint \\(step 4\\)") as err:
        train(diverging, init_params(), STEPS, checkpoint_path=path, checkpoint_every=2, **KW)
    assert err.value.step == 5 and np.isnan(err.value.loss)
    assert path.read_bytes() == on_disk["bytes"]
    assert load_checkpoint(path).step == 4


def test_infinite_loss_without_checkpoint():
    with pytest.raises(NonFiniteLossError, match="loss became inf at step 0"):
        train(lambda p, s, r: (np.inf, {k: np.zeros_like(v) for k, v in p.items()}), init_params(), 3,
              lr_schedule=0.1, progress=False)


def test_resume_false_starts_over(tmp_path, reference):
    path = tmp_path / "ckpt.npz"
    train(regression, init_params(), STEPS, checkpoint_path=path, **KW)
    again = train(regression, init_params(), STEPS, checkpoint_path=path, resume=False, **KW)
    assert again.resumed_from == 0
    assert_same_result(again, reference)


def test_a_finished_checkpoint_returns_at_once(tmp_path, reference):
    path = tmp_path / "ckpt.npz"
    train(regression, init_params(), STEPS, checkpoint_path=path, **KW)
    never = train(lambda *a: pytest.fail("no step should run"), init_params(), STEPS, checkpoint_path=path,
                  **KW)
    assert_same_result(never, reference)


def test_progress_bar_only_when_asked(capsys):
    kw = {**KW, "progress": True}
    train(regression, init_params(), 3, **kw)
    assert "3/3" in capsys.readouterr().err
    train(regression, init_params(), 3, **KW)
    assert capsys.readouterr().err == ""


# --- bad input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw, arg", [({"steps": 0}, "steps"), ({"checkpoint_every": 0}, "checkpoint_every"),
                                     ({"log_every": 0}, "log_every"), ({"clip": 0.0}, "clip"),
                                     ({"lr_schedule": -1.0}, "lr_schedule"), ({"rng": "seed"}, "rng"),
                                     ({"loss_and_grads": None}, "loss_and_grads"),
                                     ({"params": {}}, "params")])
def test_bad_arguments(kw, arg):
    args = {"loss_and_grads": regression, "params": init_params(), "steps": 3, "lr_schedule": 0.1,
            "progress": False, **kw}
    with pytest.raises(ValueError, match=arg):
        train(**args)


def test_checkpoint_must_fit_the_run(tmp_path):
    path = tmp_path / "ckpt.npz"
    train(regression, init_params(), 4, checkpoint_path=path, lr_schedule=0.1, progress=False)
    with pytest.raises(InputError, match="checkpoint_path .* past steps=3"):
        train(regression, init_params(), 3, checkpoint_path=path, lr_schedule=0.1, progress=False)
    other = {"W": np.zeros((2, 2)), "nu_log": np.zeros(2)}
    with pytest.raises(ValueError, match="checkpoint_path .*params\\['W'\\] must have shape"):
        train(regression, other, 5, checkpoint_path=path, lr_schedule=0.1, progress=False)
    mt = np.random.Generator(np.random.MT19937(0))
    with pytest.raises(ValueError, match="rng uses MT19937"):
        train(regression, init_params(), 5, checkpoint_path=path, lr_schedule=0.1, progress=False, rng=mt)


def test_a_failed_write_leaves_the_previous_checkpoint_whole(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    train(regression, init_params(), 4, checkpoint_path=path, lr_schedule=0.1, progress=False)
    before = path.read_bytes()

    def torn_write(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", torn_write)
    with pytest.raises(OSError, match="disk full"):
        train(regression, init_params(), 6, checkpoint_path=path, lr_schedule=0.1, progress=False)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.npz"]
