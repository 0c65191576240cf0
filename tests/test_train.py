"""The shared training loop: it equals the hand-written AdamW loop, and checkpoints resume bit for bit."""
import functools
import os
import re
import signal
import threading

import numpy as np
import pytest

from minimal.optim import adamw_init, adamw_step, clip_by_global_norm, cosine_schedule
from minimal.run.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from minimal.run.interrupt import Terminated
from minimal.run.train import NonFiniteLossError, NonFiniteUpdateError, TrainSetup, train
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


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt(), Terminated("SIGTERM (signal 15) during train")])
def test_an_interrupt_that_lands_in_a_compiled_function_still_saves(tmp_path, reference, interrupt):
    """A Ctrl-C or SIGTERM whose handler runs while a Numba function returns surfaces as a SystemError ("returned
    a result with an exception set") caused by the KeyboardInterrupt: train saves as for the interrupt itself and
    raises the interrupt, so the run resumes from the step it reached."""
    path = tmp_path / "ckpt.npz"

    def interrupted(params, step, rng):
        if step == 5:
            try:
                raise interrupt
            except KeyboardInterrupt as e:
                raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set") from e
        return regression(params, step, rng)

    with pytest.raises(type(interrupt)):
        train(interrupted, init_params(), STEPS, checkpoint_path=path, checkpoint_every=100, **KW)
    assert load_checkpoint(path).step == 5
    resumed = train(regression, init_params(), STEPS, checkpoint_path=path, **KW)
    assert resumed.resumed_from == 5
    assert_same_result(resumed, reference)


def test_a_system_error_without_an_interrupt_behind_it_is_a_crash(tmp_path):
    path = tmp_path / "ckpt.npz"

    def broken(params, step, rng):
        if step == 5:
            raise SystemError("a real one")
        return regression(params, step, rng)

    with pytest.raises(SystemError, match="a real one"):
        train(broken, init_params(), STEPS, checkpoint_path=path, checkpoint_every=3, **KW)
    assert load_checkpoint(path).step == 3              # the last periodic checkpoint, nothing saved on the way out


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


# --- reliability (issue 12) ---------------------------------------------------------------------------

def _finished_checkpoint(tmp_path):
    path = tmp_path / "ckpt.npz"
    train(regression, init_params(), 4, checkpoint_path=path, lr_schedule=0.1, progress=False)
    return path


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage", "npy"])
def test_an_unreadable_checkpoint_names_the_file_and_the_way_out(tmp_path, damage):
    path = _finished_checkpoint(tmp_path)
    whole = path.read_bytes()
    path.write_bytes({"empty": b"", "truncated": whole[: len(whole) // 2], "garbage": b"\x00garbage\xff" * 50,
                      "npy": whole[:0]}[damage])
    if damage == "npy":  # a pickled .npy array where a checkpoint was expected: numpy's "allow_pickle" hint
        with open(path, "wb") as f:
            np.save(f, np.ones(3, dtype=object), allow_pickle=True)
    for call in (lambda: load_checkpoint(path),
                 lambda: train(regression, init_params(), 6, checkpoint_path=path, lr_schedule=0.1,
                               progress=False)):
        with pytest.raises(CheckpointError, match=f"checkpoint {re.escape(repr(str(path)))} is not a readable "
                                                  f"checkpoint .*delete it to start the run over"):
            call()
    assert issubclass(CheckpointError, ValueError)
    again = train(regression, init_params(), 6, checkpoint_path=path, lr_schedule=0.1, progress=False,
                  resume=False)  # the way out the message gives
    assert again.resumed_from == 0


@pytest.mark.parametrize("edit, message", [
    (lambda a: a.update(losses=a["losses"][:-1]), r"losses must hold one loss per completed step, \(step,\) = \(4,\)"),
    (lambda a: a.update(step=np.array(-1)), "step must be an integer >= 0"),
    (lambda a: a.pop("m/W"), r"m must have exactly the keys of params: missing \['W'\]"),
    (lambda a: a.update({"v/W": np.full((3, 2), np.inf)}), r"v\['W'\] contains NaN or inf"),
    (lambda a: a.update(rng_state=np.array("{not json")), "rng_state is not JSON"),
    (lambda a: a.pop("adamw_step"), r"it lacks \['adamw_step'\]"),
], ids=["losses", "step", "moments", "overflowed-v", "rng", "adamw-step"])
def test_a_checkpoint_with_an_inconsistent_state_is_refused(tmp_path, edit, message):
    path = _finished_checkpoint(tmp_path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    edit(arrays)
    np.savez(path, **arrays)
    with pytest.raises(CheckpointError, match=f"holds an inconsistent state: {message}.*delete it"):
        load_checkpoint(path)


def test_a_checkpoint_whose_adamw_count_is_not_its_step_is_not_resumed(tmp_path):
    path = _finished_checkpoint(tmp_path)
    ckpt = load_checkpoint(path)
    save_checkpoint(path, ckpt._replace(opt_state=ckpt.opt_state._replace(step=2)))
    with pytest.raises(CheckpointError, match="at step 4 but its AdamW state has taken 2 updates.*delete it"):
        train(regression, init_params(), 6, checkpoint_path=path, lr_schedule=0.1, progress=False)


def test_overflowing_adamw_moments_stop_the_run_and_keep_the_last_checkpoint(tmp_path):
    """float32 gradients of 1e20 are finite, but v = (1 - β2) g² is inf: stop before that state is kept."""
    path = tmp_path / "ckpt.npz"
    params32 = {k: v.astype(np.float32) for k, v in init_params().items()}
    on_disk = {}

    def exploding(params, step, rng):
        loss, grads = regression(params, step, rng)
        grads = {k: g.astype(np.float32) for k, g in grads.items()}
        if step == 5:
            on_disk["bytes"] = path.read_bytes()
            grads["W"] = np.full_like(grads["W"], 1e20)
        return loss, grads

    with pytest.raises(NonFiniteUpdateError, match=r"update of step 5 .*not finite.*checkpoint \(step 4\) was left "
                                                   r"untouched.*v\['W'\] overflowed in float32.*grads\['W'\] has "
                                                   r"values up to 1e\+20.*Clip the gradients") as err:
        train(exploding, params32, STEPS, checkpoint_path=path, checkpoint_every=2, lr_schedule=0.1,
              progress=False)
    assert isinstance(err.value, NonFiniteLossError) and err.value.step == 5  # one except catches both
    assert path.read_bytes() == on_disk["bytes"]
    assert load_checkpoint(path).step == 4  # and it still resumes


def test_a_resume_with_nothing_left_to_train_says_so(tmp_path, capsys):
    path = _finished_checkpoint(tmp_path)
    result = train(regression, init_params(), 4, checkpoint_path=path, lr_schedule=0.1, progress=True)
    assert result.resumed_from == 4 and result.steps_trained == 0
    assert f"resumed from checkpoint {path} at step 4/4 (finished: no step to run)" in capsys.readouterr().err
    result = train(regression, init_params(), 6, checkpoint_path=path, lr_schedule=0.1, progress=True)
    assert result.steps_trained == 2 and "at step 4/6" in capsys.readouterr().err
    assert train(regression, init_params(), 3, lr_schedule=0.1, progress=False).steps_trained == 3


def test_sigterm_saves_and_stops_like_ctrl_c_and_the_old_handler_comes_back(tmp_path, reference):
    path = tmp_path / "ckpt.npz"
    seen = []

    def previous(signum, frame):
        seen.append(signum)

    old = signal.signal(signal.SIGTERM, previous)
    try:
        def terminated(params, step, rng):
            if step == 5:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before os.kill returns to this frame
            return regression(params, step, rng)

        with pytest.raises(Terminated, match="SIGTERM"):
            train(terminated, init_params(), STEPS, checkpoint_path=path, checkpoint_every=100, **KW)
        assert issubclass(Terminated, KeyboardInterrupt)
        assert signal.getsignal(signal.SIGTERM) is previous and seen == []
        assert load_checkpoint(path).step == 5
        resumed = train(regression, init_params(), STEPS, checkpoint_path=path, **KW)
        assert resumed.resumed_from == 5
        assert_same_result(resumed, reference)
        os.kill(os.getpid(), signal.SIGTERM)  # after train: the previous handler again
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, old)


def test_sigterm_handler_is_not_installed_outside_the_main_thread():
    got = {}

    def run():
        def probe(params, step, rng):
            got["handler"] = signal.getsignal(signal.SIGTERM)
            return regression(params, step, rng)
        train(probe, init_params(), 2, lr_schedule=0.1, progress=False)

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert got["handler"] is before


# --- TrainSetup: the one place where optimiser settings become a run ---------------------------------------

SETUP = TrainSetup(lr=0.1, steps=STEPS, warmup=2, final_lr=1e-3, weight_decay=0.1, clip=1.0, seed=6)


def test_a_setup_is_its_schedule_its_clip_its_decay_and_the_batch_stream_seed_plus_one():
    by_hand = train(regression, init_params(), STEPS, lr_schedule=SCHEDULE, clip=1.0, weight_decay=0.1,
                    progress=False, rng=np.random.default_rng(7))
    assert_same_result(train(regression, init_params(), setup=SETUP, progress=False), by_hand)
    assert [SETUP.lr_schedule()(s) for s in range(STEPS)] == [SCHEDULE(s) for s in range(STEPS)]
    assert SETUP.init_rng().random() == np.random.default_rng(6).random()
    assert SETUP.batch_rng().random() == np.random.default_rng(7).random()


def test_decay_until_stops_the_decay_after_that_fraction_of_the_steps():
    wd = TrainSetup(lr=0.1, steps=10, weight_decay=0.3, decay_until=0.25).weight_decay_schedule()
    assert [wd(s) for s in range(10)] == [0.3] * 2 + [0.0] * 8      # round(2.5) = 2 steps
    assert TrainSetup(lr=0.1, steps=10, weight_decay=0.3).weight_decay_schedule()(9) == 0.3


def test_a_given_schedule_rng_or_fewer_steps_replace_the_setups():
    rates = []
    res = train(regression, init_params(), 4, setup=SETUP, lr_schedule=lambda s: rates.append(s) or 0.05,
                rng=np.random.default_rng(3), progress=False)
    assert rates == [0, 1, 2, 3]
    assert_same_result(res, train(regression, init_params(), 4, lr_schedule=0.05, clip=1.0, weight_decay=0.1,
                                  rng=np.random.default_rng(3), progress=False))
    first = train(regression, init_params(), 5, setup=SETUP, progress=False)     # the first 5 of STEPS steps
    np.testing.assert_array_equal(first.losses, train(regression, init_params(), setup=SETUP,
                                                      progress=False).losses[:5])


@pytest.mark.parametrize("kw, match", [({"clip": 1.0}, "clip beside setup"),
                                       ({"weight_decay": 0.1}, "weight_decay beside setup"),
                                       ({"setup": {"lr": 0.1}}, "setup must be a TrainSetup")])
def test_settings_given_twice_are_refused(kw, match):
    with pytest.raises(InputError, match=match):
        train(regression, init_params(), **{"setup": SETUP, "progress": False, **kw})


def test_without_a_setup_the_schedule_is_required():
    with pytest.raises(ValueError, match="lr_schedule"):
        train(regression, init_params(), 3, progress=False)


@pytest.mark.parametrize("kw, name", [({"lr": -1.0}, "TrainSetup.lr"), ({"steps": 0}, "TrainSetup.steps"),
                                      ({"warmup": -1}, "TrainSetup.warmup"), ({"clip": 0.0}, "TrainSetup.clip"),
                                      ({"decay_until": -0.5}, "TrainSetup.decay_until"),
                                      ({"seed": -1}, "TrainSetup.seed")])
def test_bad_setup_fields_are_named(kw, name):
    with pytest.raises(ValueError, match=name):
        TrainSetup(**{"lr": 0.1, "steps": 3, **kw})
