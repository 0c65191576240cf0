"""Hostile-user checks: atomic writes after a killed writer, and `train` killed at random moments (issue 12);
then round 2 (issue 21, one section per item): text generation, encode / decode, damaged Shakespeare data and
committed weights (the weights format itself: tests/test_io.py), reproduce and course paths, resume with another
config, divergence, Config fields, one float dtype per call, method= where no scan runs."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from minimal.run import _atomic
from minimal.run._atomic import atomic_write
from minimal.data import data_path
from minimal.experiments.minrnn import shakespeare_model as SM
from minimal.run.checkpoint import load_checkpoint


def _dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _temp_name(target, pid, host=None):
    return f"{target}.{host or _atomic._HOST}.{pid}.0123abcd.tmp"


def test_a_write_removes_the_temporary_files_that_a_killed_writer_left(tmp_path):
    dead, alive = _dead_pid(), os.getppid()
    stale = tmp_path / _temp_name("run.npz", dead)
    live = tmp_path / _temp_name("run.npz", alive)              # a writer still at work: not ours to remove
    remote = tmp_path / _temp_name("run.npz", dead, "otherhost")  # another machine's pids mean nothing here
    other = tmp_path / _temp_name("other.npz", dead)             # another target's
    for p in (stale, live, remote, other):
        p.write_bytes(b"half a file")
    with atomic_write(tmp_path / "run.npz") as f:
        f.write(b"whole")
    assert sorted(os.listdir(tmp_path)) == sorted(["run.npz", live.name, remote.name, other.name])
    assert (tmp_path / "run.npz").read_bytes() == b"whole"


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077], ids=["022", "002", "077"])
def test_new_files_honour_the_umask_and_a_replaced_file_keeps_its_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        with atomic_write(tmp_path / "new.json", "w") as f:
            f.write("{}")
    finally:
        os.umask(old)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o666 & ~umask
    (tmp_path / "kept.json").write_text("{}")
    os.chmod(tmp_path / "kept.json", 0o640)
    with atomic_write(tmp_path / "kept.json", "w") as f:
        f.write("[]")
    assert (tmp_path / "kept.json").stat().st_mode & 0o777 == 0o640


# --- train killed with SIGKILL at random moments -------------------------------------------------------

CHILD = r'''
import io
import json
import os
import sys
import time

import numpy as np

from minimal.run.train import train

STEPS = 60
W_TRUE = np.linspace(-1.0, 1.0, 12).reshape(4, 3)


def loss_and_grads(params, step, rng, verbose=False):
    if verbose:
        print(f"step {step}", flush=True)
    x = rng.standard_normal((5 + step % 4, 4))
    err = np.tanh(x @ params["W"] + params["b"]) - x @ W_TRUE
    d = 2 * err * (1 - np.tanh(x @ params["W"] + params["b"]) ** 2) / err.size
    return np.mean(err ** 2), {"W": x.T @ d, "b": d.sum(axis=0)}


def run(path, verbose=False):
    params = {"W": np.zeros((4, 3)), "b": np.zeros(3)}
    return train(lambda p, s, r: loss_and_grads(p, s, r, verbose), params, STEPS, lr_schedule=0.05, rng=3,
                 clip=1.0, weight_decay=0.01, checkpoint_path=path, checkpoint_every=4, progress=False)


def hang_in_the_middle_of_a_write():
    """The next checkpoint write stops half way (half its bytes in the temporary file) and waits to be killed."""
    real = np.savez

    def half(f, **arrays):
        buf = io.BytesIO()
        real(buf, **arrays)
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        f.flush()
        print("writing", flush=True)
        time.sleep(60)

    np.savez = half


if __name__ == "__main__":
    if os.environ.get("HANG_IN_WRITE"):
        hang_in_the_middle_of_a_write()
    run(sys.argv[1], verbose=True)
'''


def _child_env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _run_until(script, path, stop_line, delay, env=None):
    """Start the child, read its output until ``stop_line`` (then SIGKILL it after ``delay`` s) or its end."""
    child = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True,
                             env={**_child_env(), **(env or {})})
    for line in child.stdout:
        if stop_line(line.strip()):
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
            break
    child.stdout.close()
    return child.wait()


def test_train_killed_at_random_moments_resumes_bit_identical(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ns = {"__name__": "child"}
    exec(compile(CHILD, str(script), "exec"), ns)
    reference = ns["run"](tmp_path / "reference.npz")
    steps = ns["STEPS"]

    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "ckpt.npz"
    draw = random.Random(12)
    # a kill in the middle of a checkpoint write: the temporary file is left behind half written
    assert _run_until(script, path, lambda s: s == "writing", 0.0, env={"HANG_IN_WRITE": "1"}) == -signal.SIGKILL
    assert [p.name for p in folder.glob("*.tmp")] and not path.exists()
    kills = 1
    for target in sorted(draw.sample(range(2, steps - 2), 5)):
        # at step >= t, not == t: on a loaded machine the previous child may have run past t before its kill
        rc = _run_until(script, path, lambda s, t=target: s.startswith("step ") and int(s[5:]) >= t,
                        draw.uniform(0.0, 0.003))
        kills += rc == -signal.SIGKILL
    # once more in a write, after some checkpoints exist: the previous checkpoint must survive it
    before = load_checkpoint(path).step
    assert _run_until(script, path, lambda s: s == "writing", 0.0, env={"HANG_IN_WRITE": "1"}) == -signal.SIGKILL
    assert load_checkpoint(path).step == before
    assert kills >= 5
    assert _run_until(script, path, lambda s: False, 0.0) == 0  # the last run finishes

    final = load_checkpoint(path)
    assert final.step == steps and final.opt_state.step == steps
    np.testing.assert_array_equal(final.losses, reference.losses)
    for k in reference.params:
        np.testing.assert_array_equal(final.params[k], reference.params[k])
        np.testing.assert_array_equal(final.opt_state.m[k], reference.opt_state.m[k])
        np.testing.assert_array_equal(final.opt_state.v[k], reference.opt_state.v[k])
    assert os.listdir(folder) == ["ckpt.npz"]  # the killed writers' temporary files were cleaned up


# --- the command line checks --scheduler and --out before any experiment runs ---------------------------

@pytest.fixture
def no_experiment_may_run(monkeypatch):
    from minimal.reproduce import work as reproduce

    monkeypatch.setattr(reproduce.registry, "experiments", lambda work: pytest.fail("an experiment was looked up"))


@pytest.mark.parametrize("address, why", [("localhost:8786", "no protocol:// in front"), ("tcp://host", "no port"),
                                          ("tcp://:8786", "no host"), ("http://host:8786", "unknown protocol 'http'"),
                                          ("tcp://host:port", "no port")])
def test_a_bad_scheduler_address_fails_before_any_experiment(no_experiment_may_run, capsys, address, why):
    from minimal.__main__ import main

    assert main(["reproduce", "zucchet", "--scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: scheduler must be None or an address like 'tcp://host:8786', got {address!r}")
    assert why in err


def test_good_scheduler_addresses_pass_the_check():
    from minimal.run.scheduler import check_scheduler

    for address in (None, "tcp://10.0.0.5:8786", "tls://scheduler.example.org:8786", "tcp://[::1]:8786",
                    "inproc://10.0.0.5/1234/1"):
        assert check_scheduler(address) == address


def test_out_pointing_at_a_file_is_a_one_line_error(no_experiment_may_run, tmp_path, capsys):
    from minimal.__main__ import main

    (tmp_path / "results.txt").write_text("not a folder")
    assert main(["reproduce", "zucchet", "--out", str(tmp_path / "results.txt")]) == 2
    assert capsys.readouterr().err.startswith(f"error: --out must be a folder, but "
                                              f"{str(tmp_path / 'results.txt')!r} is a file")
    assert main(["reproduce", "zucchet", "--out", str(tmp_path / "results.txt" / "zucchet")]) == 2
    assert "cannot be made a folder" in capsys.readouterr().err


def test_reproduce_itself_checks_the_scheduler_before_any_experiment(no_experiment_may_run):
    from minimal.reproduce.work import reproduce

    with pytest.raises(ValueError, match="scheduler must be None or an address like 'tcp://host:8786', got "
                                         "'host:8786': no protocol"):
        reproduce("zucchet", scheduler="host:8786")


# --- issue 21, reliability round 2 ----------------------------------------------------------------------

# item 2: encode / decode refuse what they cannot map, naming the character or id

def test_encode_refuses_characters_outside_latin1_by_name():
    from minimal.tasks import char_lm
    vocab = "?ab"                                    # "?" in the vocabulary: a replaced character would pass
    for ch in ("\u2014", "\U0001F600", "\u00e9"):
        with pytest.raises(ValueError, match=f"{ch!r} at position 1 is not in the vocabulary"):
            char_lm.encode(f"a{ch}b", vocab)
    assert char_lm.encode("a?b", vocab).tolist() == [1, 0, 2]


@pytest.mark.parametrize("ids, what", [([-1], "-1"), ([0, 3], "3"), (np.array([1.7]), "float64"),
                                       (np.array([True]), "bool")])
def test_decode_refuses_ids_outside_the_vocabulary(ids, what):
    from minimal.tasks import char_lm
    with pytest.raises(ValueError, match=f"ids.*{what}"):
        char_lm.decode(ids, "abc")
    assert char_lm.decode(np.array([2, 0], dtype=np.uint8), "abc") == "ca"


# item 3: damaged Shakespeare data names the file and the command that rebuilds it

def _damage_copy(tmp_path, monkeypatch, name, damage):
    import shutil
    from minimal.tasks import char_lm
    for f in ("meta.json", "train.txt", "test.txt"):
        shutil.copy(data_path("shakespeare", f), tmp_path / f)
    raw = bytearray((tmp_path / name).read_bytes())
    (tmp_path / name).write_bytes(bytes(damage(raw)))
    monkeypatch.setattr(char_lm, "data_path", lambda *parts: tmp_path.joinpath(*parts[1:]))
    return char_lm


def _poke(at, byte):
    def damage(raw):
        raw[at] = byte
        return raw
    return damage


@pytest.mark.parametrize("name, damage, what", [
    ("meta.json", lambda raw: raw[: len(raw) // 2], "not valid JSON"),
    ("meta.json", lambda raw: raw.replace(b'"sha256": {\n  "input', b'"sha257": {\n  "input'), "sha256"),
    ("train.txt", _poke(1000, 0), "sha256"),
    ("train.txt", _poke(1000, 0xE9), "sha256"),
    ("test.txt", _poke(500, ord("Q")), "sha256"),
    ("test.txt", lambda raw: raw[:-10], "characters"),
], ids=["meta-truncated", "meta-no-hashes", "train-NUL", "train-non-ascii", "test-edited-same-size",
        "test-truncated"])
def test_damaged_shakespeare_data_names_the_file_and_the_rebuild_command(tmp_path, monkeypatch, name, damage,
                                                                        what):
    char_lm = _damage_copy(tmp_path, monkeypatch, name, damage)
    with pytest.raises(ValueError, match=f"(?s){name}.*{what}.*python data/shakespeare/prepare.py"):
        char_lm.load()


# item 4: damaged committed weights, loaded the way the notebooks load them

@pytest.fixture
def committed_copy(tmp_path, monkeypatch):
    """A copy of data/<work>/<files> under a DATA_ROOT in tmp_path; returns a function (work, name) -> path."""
    import shutil
    from minimal import data
    root = data.DATA_ROOT

    def copy(work, *names):
        (tmp_path / work).mkdir(exist_ok=True)
        for name in names:
            shutil.copy(root / work / name, tmp_path / work / name)
        return [tmp_path / work / name for name in names]
    monkeypatch.setattr(data, "DATA_ROOT", tmp_path)
    return copy


def _truncate(path):
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def test_missing_shakespeare_weights_name_the_regenerate_command(committed_copy):
    from minimal.experiments.minrnn import shakespeare as S, shakespeare_runs as SR
    npz, js = committed_copy("minrnn", "shakespeare_small.npz", "shakespeare_small.json")
    npz.unlink()
    with pytest.raises(FileNotFoundError, match=r"shakespeare_small\.npz is missing.*python -m minimal\.reproduce\.extra minrnn/shakespeare_small"):
        SR.load_weights(npz)
    js.unlink()
    with pytest.raises(FileNotFoundError, match=r"shakespeare_small\.json is missing.*python -m minimal\.reproduce\.extra minrnn/shakespeare_small"):
        S.load_curves(js)


@pytest.mark.parametrize("which", ["npz", "json"])
def test_truncated_shakespeare_weights_name_the_file_and_the_command(committed_copy, which):
    from minimal.experiments.minrnn import shakespeare_runs as SR
    npz, js = committed_copy("minrnn", "shakespeare_small.npz", "shakespeare_small.json")
    _truncate(npz if which == "npz" else js)
    with pytest.raises(ValueError, match=rf"shakespeare_small\.{which} is not (a readable|valid)"
                                         r".*python -m minimal\.reproduce\.extra minrnn/shakespeare_small"):
        SR.load_weights(npz)


def test_a_wrong_shaped_shakespeare_weight_is_named_with_both_shapes(committed_copy):
    from minimal.run import io
    from minimal.experiments.minrnn import shakespeare as S, shakespeare_runs as SR
    npz, _ = committed_copy("minrnn", "shakespeare_small.npz", "shakespeare_small.json")
    groups, config = io.load_weights(npz)
    groups["mingru"]["1.rnn.W_z"] = groups["mingru"]["1.rnn.W_z"][:, :-1]
    io.save_weights(npz, groups, config)   # a consistent pair: only the config's shapes can tell
    with pytest.raises(ValueError, match=r"(?s)shakespeare_small\.npz.*'mingru'.*1\.rnn\.W_z \(\d+, \d+\) "
                                         r"\(expected \(\d+, \d+\)\).*python -m minimal\.reproduce\.extra minrnn/shakespeare_small"):
        SR.load_weights(npz, S.Config.small())


def test_a_wrong_shaped_gril_weight_is_blamed_on_the_file_not_the_input(committed_copy):
    from minimal.run import io
    from minimal.experiments.gril import regression as R
    npz, _ = committed_copy("gril", "regression_full.npz", "regression_full.json")
    groups, config = io.load_weights(npz)
    groups["scalar"]["Q"] = np.zeros((4, 4))
    io.save_weights(npz, groups, config)
    with pytest.raises(ValueError, match=r"(?s)regression_full\.npz.*'scalar'.*Q \(4, 4\) \(expected \(3, 3\)\)"
                                         r".*reproduce gril --full"):
        R.load_weights(npz)
    _truncate(npz)
    with pytest.raises(ValueError, match=r"regression_full\.npz is not a readable .npz.*reproduce gril --full"):
        R.load_weights(npz)


@pytest.mark.parametrize("name", ["icl_full.npz", "teacher_student_full.npz"])
def test_truncated_zucchet_weights_name_the_file_and_the_command(committed_copy, name):
    from minimal.experiments.zucchet import icl, teacher_student
    npz, _ = committed_copy("zucchet", name, name.replace(".npz", ".json"))
    _truncate(npz)
    load = icl.load_weights if name.startswith("icl") else teacher_student.load_weights
    with pytest.raises(ValueError, match=rf"{name} is not a readable .npz.*reproduce zucchet --full"):
        load(npz)
    npz.unlink()
    with pytest.raises(FileNotFoundError, match=rf"{name} is missing.*reproduce zucchet --full"):
        load(npz)


# item 5 (save_groups / load_groups refusing what cannot round-trip, naming a damaged file): tests/test_io.py,
# for minimal.run.io, which replaced them


# items 12-13: one dtype per call. Every cell and layer with float params refuses an input x or an upstream
# gradient dy of the other float dtype, naming it, and returns dx and grads in the params' dtype.

def _float_cases():
    from minimal.cells import REGISTRY
    rng = np.random.default_rng(0)
    for name, mod in sorted(REGISTRY.items()):
        for ex in mod.examples(rng):
            if any(isinstance(v, np.ndarray) and v.dtype.kind == "f" for v in ex.params.values()):
                yield pytest.param(mod, ex, id=f"{name}-{ex.name}")


def _as(tree, dtype):
    if isinstance(tree, np.ndarray) and tree.dtype.kind == "f":
        return tree.astype(dtype)
    if isinstance(tree, dict):
        return {k: _as(v, dtype) for k, v in tree.items()}
    return tree


@pytest.mark.parametrize("mod, ex", list(_float_cases()))
@pytest.mark.parametrize("params_dtype, other", [(np.float32, np.float64), (np.float64, np.float32)],
                         ids=["params32", "params64"])
def test_cells_and_layers_refuse_the_other_float_dtype_by_name(mod, ex, params_dtype, other):
    params, x, kw = _as(ex.params, params_dtype), _as(ex.x, params_dtype), _as(ex.kwargs, params_dtype)
    if isinstance(ex.x, np.ndarray) and ex.x.dtype.kind == "f":
        with pytest.raises(ValueError, match=r"^x must have .*dtype"):
            mod.forward(params, _as(ex.x, other), **kw)
    y, cache = mod.forward(params, x, **kw)
    with pytest.raises(ValueError, match=r"^(dy|do) must have .*dtype"):
        mod.backward(params, cache, np.ones(y.shape, other))
    dx, grads = mod.backward(params, cache, np.ones(y.shape, params_dtype))
    assert {k: g.dtype for k, g in grads.items()} == {k: np.dtype(params_dtype) for k in grads}
    if isinstance(ex.x, np.ndarray) and ex.x.dtype.kind == "f":
        assert dx.dtype == params_dtype


def test_min_block_refuses_mixed_param_dtypes_and_a_step_input_of_the_other_dtype():
    from minimal.cells import min_block
    from minimal.validate import InputError
    params = _as(min_block.init(np.random.default_rng(0), 4, "mingru"), np.float32)
    mixed = params | {k: v.astype(np.float64) for k, v in params.items() if k.startswith("mlp.")}
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(InputError, match=r"mlp\.\w+ must have the dtype of .* \(float32\), got float64"):
        min_block.forward(mixed, x, "mingru")
    with pytest.raises(InputError, match=r"mlp\.\w+ must have the dtype of .* \(float32\), got float64"):
        min_block.step_forward(mixed, None, x[:, 0], "mingru")
    with pytest.raises(InputError, match=r"^x_t must have .*dtype float32, got float64"):
        min_block.step_forward(params, None, x[:, 0].astype(np.float64), "mingru")


# item 14: method= is refused where no scan runs; an overflow in minGRU / minLSTM's backward names dy

def _method_cases():
    from minimal.cells import gated_rnn, gril, mingru, minlstm
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3))
    for mod in (mingru, minlstm):
        p = mod.init(rng, 3, 4)
        yield pytest.param(mod, p, x, {"mode": "sequential"}, id=f"{mod.__name__[14:]}-sequential")
        yield pytest.param(mod, p, x, {"log_space": True}, id=f"{mod.__name__[14:]}-log-space")
    p = gated_rnn.init(rng, 3, 4, 2, recurrence="dense")
    yield pytest.param(gated_rnn, p, x, {}, id="gated_rnn-dense")
    p = gated_rnn.init(rng, 3, 4, 2)
    yield pytest.param(gated_rnn, p, x, {"readout": "last"}, id="gated_rnn-readout-last")
    p = gril.init(rng, 3, 2)
    yield pytest.param(gril, p, x, {"mode": "sequential"}, id="gril-sequential")


@pytest.mark.parametrize("mod, params, x, kw", list(_method_cases()))
def test_method_is_refused_where_no_scan_runs(mod, params, x, kw):
    from minimal.validate import InputError
    mod.forward(params, x, **kw)
    with pytest.raises(InputError, match=r"^method='sequential' has no effect .*pass method=None"):
        mod.forward(params, x, method="sequential", **kw)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("log_space", [False, True], ids=["vanilla", "log"])
@pytest.mark.parametrize("cell", ["mingru", "minlstm"])
def test_an_overflow_in_the_min_cells_backward_names_the_callers_dy(cell, log_space, backend):
    import importlib
    from minimal.validate import OverflowInputError
    mod = importlib.import_module(f"minimal.cells.{cell}")
    rng = np.random.default_rng(0)
    p = {k: v.astype(np.float32) for k, v in mod.init(rng, 2, 3).items()}
    keep = "b_z" if cell == "mingru" else "b_f"              # a_t ~ 1: the adjoint sums dy over all 64 steps
    p[keep] = np.full(3, -20.0 if cell == "mingru" else 20.0, np.float32)
    x = rng.standard_normal((1, 64, 2)).astype(np.float32)
    y, cache = mod.forward(p, x, log_space=log_space, backend=backend)
    dy = np.full(y.shape, 1e37, np.float32)
    if cell == "mingru" and log_space:      # its adjoint is scaled by h ~ 1e-7 here: finite, so no error is due
        dx, grads = mod.backward(p, cache, dy)
        assert all(np.all(np.isfinite(g)) for g in (dx, *grads.values()))
        return
    with np.errstate(all="ignore"), pytest.raises(OverflowInputError, match=r"^dy has float32 values up to 1e\+37"):
        mod.backward(p, cache, dy)


# item 1: generation refuses what it cannot sample from, naming temperature, prompt_ids, n; temperature 0 is greedy

@pytest.fixture(scope="module")
def tiny_lm():
    from minimal.experiments.minrnn import shakespeare as S
    return S, SM.init_lm(np.random.default_rng(3), "mingru", 5, 6, 2)


@pytest.mark.parametrize("kw, what", [
    ({"temperature": float("nan")}, "temperature"), ({"temperature": float("inf")}, "temperature"),
    ({"temperature": -0.05}, "temperature"), ({"temperature": True}, "temperature"),
    ({"prompt_ids": np.array([-1])}, "prompt_ids"), ({"prompt_ids": np.array([1.7])}, "prompt_ids"),
    ({"prompt_ids": np.array([5])}, "prompt_ids"), ({"prompt_ids": np.array([[1, 2]])}, "prompt_ids"),
    ({"prompt_ids": np.array([], dtype=np.int64)}, "prompt_ids"),
    ({"n": -3}, "n"), ({"n": 2.0}, "n"),
], ids=["T-nan", "T-inf", "T-negative", "T-bool", "id-negative", "id-float", "id-V", "prompt-2d", "prompt-empty",
        "n-negative", "n-float"])
def test_generate_refuses_bad_arguments_by_name(tiny_lm, kw, what):
    S, params = tiny_lm
    args = {"prompt_ids": np.array([1, 2]), "n": 4, "temperature": 1.0} | kw
    with np.errstate(all="raise"), pytest.raises(ValueError, match=f"^{what} must"):
        SM.generate(params, "mingru", args["prompt_ids"], args["n"], np.random.default_rng(0),
                   temperature=args["temperature"])


def test_generate_at_temperature_zero_is_greedy(tiny_lm):
    S, params = tiny_lm
    ids = SM.generate(params, "mingru", np.array([1]), 6, np.random.default_rng(0), temperature=0)
    states, tok, want = None, np.array([1]), []
    for _ in range(6):
        z, states = SM.step_logits(params, states, tok, "mingru")
        tok = np.array([int(np.argmax(z[0]))])
        want.append(int(tok[0]))
    assert ids.tolist() == want
    assert np.array_equal(SM.generate(params, "mingru", np.array([1]), 6, np.random.default_rng(5), temperature=0),
                          ids)                                    # no randomness left
    assert SM.generate(params, "mingru", np.array([1]), 0, np.random.default_rng(0)).shape == (0,)


# item 8: `course student|html OUT` where OUT is a file is a one-line error, exit 2, as `reproduce --out FILE`

@pytest.mark.parametrize("what", ["student", "html"])
def test_course_out_pointing_at_a_file_is_a_one_line_error(tmp_path, capsys, monkeypatch, what):
    from minimal.course import build, site
    from minimal.__main__ import main

    def must_not_run(*a, **k):
        raise AssertionError("the course was built although OUT is a file")
    monkeypatch.setattr({"student": build, "html": site}[what], what, must_not_run)
    (tmp_path / "site.txt").write_text("not a folder")
    assert main(["course", what, str(tmp_path / "site.txt")]) == 2
    assert capsys.readouterr().err.startswith(f"error: OUT must be a folder, but "
                                              f"{str(tmp_path / 'site.txt')!r} is a file")
    assert main(["course", what, str(tmp_path / "site.txt" / "sub")]) == 2
    assert "cannot be made a folder" in capsys.readouterr().err


# item 6: `reproduce --full` run from another folder writes the weights and metrics where the notebooks read them

def _fake_experiment(seen):
    import types

    class Config:
        @classmethod
        def quick(cls):
            return cls()

    def run(config, out_dir=None, progress=True, save_weights_path=None):
        seen["weights"] = save_weights_path
        return {"loss": 0.5}
    return types.SimpleNamespace(Config=Config, PAPER={}, SAVE_METRICS=True, run=run)


def test_reproduce_full_from_another_folder_writes_under_the_repository_data(tmp_path, monkeypatch):
    from minimal import data
    from minimal.reproduce import work as R
    seen = {}
    monkeypatch.setattr(data, "DATA_ROOT", tmp_path / "repo" / "data")
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"fake": _fake_experiment(seen)})
    monkeypatch.setattr(R.report, "render", lambda *a, **k: "table")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    R.reproduce("gril", quick=False, out_dir=tmp_path / "out", progress=False)
    assert seen["weights"] == tmp_path / "repo" / "data" / "gril" / "fake_full.npz"
    assert json.loads((tmp_path / "repo" / "data" / "gril" / "fake_full.json").read_text()) == {"loss": 0.5}
    assert not (tmp_path / "elsewhere" / "data").exists()


# item 9: a checkpoint records its config; resuming it with another config is refused, naming the fields

def _quadratic(params, step, rng):
    x = rng.standard_normal(3)
    return float(np.sum((params["w"] - x) ** 2)), {"w": 2 * (params["w"] - x)}


def test_train_refuses_a_checkpoint_of_another_config_naming_the_fields(tmp_path):
    from minimal.run.checkpoint import ConfigMismatchError, load_checkpoint
    from minimal.run.train import train
    path = tmp_path / "run.npz"
    p0 = {"w": np.zeros(3)}
    old = {"lr": 3e-3, "seed": 0, "dropout": 0.1, "kinds": ("mingru",)}
    train(_quadratic, p0, 3, lr_schedule=0.01, checkpoint_path=path, progress=False, config=old)
    assert load_checkpoint(path).config == {"lr": 3e-3, "seed": 0, "dropout": 0.1, "kinds": ["mingru"]}
    new = old | {"lr": 0.1, "seed": 7, "dropout": 0.5}
    with pytest.raises(ConfigMismatchError, match=r"(?s)another config.*dropout: checkpoint 0\.1, this run 0\.5; "
                                                  r"lr: checkpoint 0\.003, this run 0\.1; seed: checkpoint 0, "
                                                  r"this run 7.*another output folder"):
        train(_quadratic, p0, 6, lr_schedule=0.01, checkpoint_path=path, progress=False, config=new)
    res = train(_quadratic, p0, 6, lr_schedule=0.01, checkpoint_path=path, progress=False, config=old)
    assert res.resumed_from == 3                                # the same config resumes


def test_gril_and_selective_copy_jobs_refuse_a_checkpoint_of_another_job(tmp_path):
    import dataclasses
    from minimal.experiments.gril import model as M
    from minimal.experiments.minrnn import selective_copy as SC
    from minimal.run.checkpoint import ConfigMismatchError
    job = M.Job(variant="full", N=4, f=3, n_out=1, seed=0, steps=2, lr=1e-2, n_eval=8)
    M.train_job(job, checkpoint_path=tmp_path / "gril.npz")
    with pytest.raises(ConfigMismatchError, match=r"lr: checkpoint 0\.01, this run 0\.02"):
        M.train_job(dataclasses.replace(job, lr=2e-2, steps=3), checkpoint_path=tmp_path / "gril.npz")
    sc = SC.Job(T=8, n_data=2, D=4, expansion=1, depth=1, steps=2, batch=2, n_eval=4)
    SC.train_job(sc, checkpoint_path=tmp_path / "sc.npz")
    with pytest.raises(ConfigMismatchError, match=r"seed: checkpoint \d+, this run"):
        SC.train_job(dataclasses.replace(sc, seed=sc.seed + 1), checkpoint_path=tmp_path / "sc.npz")


def test_shakespeare_resumed_with_another_config_is_refused(tmp_path):
    import dataclasses
    from minimal.experiments.minrnn import shakespeare as S
    from minimal.run.checkpoint import ConfigMismatchError
    config = S.Config(D=8, n_layers=1, T=16, batch=2, steps=2, warmup=1, eval_every=1, eval_windows=2,
                      kinds=("mingru",), sample_chars=5)
    S.run(config, out_dir=tmp_path, progress=False)
    other = dataclasses.replace(config, lr=0.1, seed=7, dropout=0.5, steps=3)
    with pytest.raises(ConfigMismatchError, match=r"(?s)mingru_checkpoint\.npz.*dropout.*lr.*seed.*steps"):
        S.run(other, out_dir=tmp_path, progress=False)


# item 10: divergence stops with the step, the loss tail and "lower the learning rate"; a final loss far above the
# initial one is flagged

@pytest.mark.parametrize("kind", ["mingru", "minlstm"])
def test_a_diverging_language_model_stops_with_the_step_and_the_advice(kind):
    from minimal.experiments.minrnn import shakespeare as S
    from minimal.run.train import DivergedError, NonFiniteLossError, train
    rng = np.random.default_rng(0)
    params = SM.init_lm(rng, kind, 5, 6, 1)
    windows = rng.integers(0, 5, (4, 9))
    with pytest.raises(NonFiniteLossError, match=r"(?s)step [1-9]\d*.*Losses of steps \d+\.\.\d+: \[.*\].*"
                                                 r"Lower the learning rate") as e:
        train(lambda p, step, g: SM.lm_loss_and_grads(p, windows, kind), params, 20, lr_schedule=1e12,
              progress=False)
    if isinstance(e.value, DivergedError):         # a layer's own check met the NaN: it is named, with the step
        assert "NaN or inf" in str(e.value)


def test_a_run_whose_loss_ends_far_above_its_start_is_flagged():
    from minimal.run.train import LossRoseWarning, train
    with pytest.warns(LossRoseWarning, match=r"(?s)the loss ended at .*x its first value.*diverged.*"
                                             r"Lower the learning rate"):
        res = train(_quadratic, {"w": np.zeros(3)}, 40, lr_schedule=3e3, progress=False)
    assert np.isfinite(res.losses).all() and res.losses[-1] > 1e4 * res.losses[0]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossRoseWarning)             # a converging run is not flagged
        train(_quadratic, {"w": np.zeros(3)}, 40, lr_schedule=0.05, progress=False)


# item 11: every Config field is checked up front, by its own name, before any training

@pytest.mark.parametrize("field, value, what", [
    ("kinds", ("transformer",), "a non-empty tuple of distinct values from"), ("kinds", (), "non-empty"),
    ("eval_every", 0, "an integer >= 1"), ("sample_chars", -5, "an integer >= 0"), ("lr", float("nan"), "> 0"),
    ("dropout", 1.0, r"\[0, 1\)"), ("D", 8.0, "an integer >= 1"), ("dtype", "float16", "one of"),
    ("seed", True, "an integer >= 0"), ("clip", -1.0, "> 0"),
])
def test_shakespeare_config_names_the_bad_field_before_training(monkeypatch, field, value, what):
    import dataclasses
    from minimal.experiments.minrnn import shakespeare as S
    from minimal.validate import InputError
    with pytest.raises(InputError, match=rf"^Config\.{field} must be .*{what}.*, got "):
        dataclasses.replace(S.Config.quick(), **{field: value})


def test_shakespeare_eval_windows_beyond_the_test_text_is_named_before_training(monkeypatch):
    from minimal.experiments.minrnn import shakespeare as S
    from minimal.validate import InputError

    def no_training(*a, **k):
        raise AssertionError("training started")
    monkeypatch.setattr(S, "_train_one", no_training)
    with pytest.raises(InputError, match=r"^Config\.eval_windows must be <= \d+ .*got 1000000"):
        S.run(S.Config(eval_windows=10 ** 6), progress=False)


def _experiment_configs():
    from minimal.experiments import MODULES, experiments
    seen = set()
    for work in MODULES:
        for name, mod in experiments(work).items():
            if hasattr(mod, "Config") and mod.Config not in seen:
                seen.add(mod.Config)
                yield pytest.param(mod.Config, id=f"{work}-{name}")


@pytest.mark.parametrize("Config", list(_experiment_configs()))
def test_every_experiment_config_names_a_bad_field_before_any_work(Config):
    import dataclasses
    from minimal.validate import InputError
    Config(), Config.quick()                                    # the defaults and the quick variant pass
    checked = 0
    for f in dataclasses.fields(Config):
        default = getattr(Config(), f.name)
        if isinstance(default, bool):
            bad = "yes"
        elif isinstance(default, (int, float)) and default >= 0:
            bad = -1
        elif isinstance(default, str):
            bad = 3
        else:
            continue
        with pytest.raises(InputError, match=rf"^Config\.{f.name} must be .*, got {bad!r}"):
            dataclasses.replace(Config(), **{f.name: bad})
        checked += 1
    assert checked >= 2


# item 7: `reproduce --only A` then `--only B` into one folder keeps both; concurrent runs lose nothing

def _named_experiment(value):
    import types

    class Config:
        @classmethod
        def quick(cls):
            return cls()

    def run(config, out_dir=None, progress=True):
        return {"value": value}
    return types.SimpleNamespace(Config=Config, PAPER={"value": 1.0}, run=run)


def test_reproduce_only_a_then_only_b_keeps_both_results(tmp_path, monkeypatch):
    from minimal.reproduce import work as R
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"a": _named_experiment(1.0), "b": _named_experiment(2.0)})
    R.reproduce("gril", only=["a"], out_dir=tmp_path, progress=False)
    R.reproduce("gril", only=["b"], out_dir=tmp_path, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert {k: v["metrics"]["value"] for k, v in results.items()} == {"a": 1.0, "b": 2.0}
    assert [p.name for p in tmp_path.rglob("*.json")] == ["results.json"]   # each metric written once, there
    md = (tmp_path / "results.md").read_text()
    assert "| a |" in md and "| b |" in md


CONCURRENT = r'''
import sys, time, types
from minimal.reproduce import work as R

name = sys.argv[2]

class Config:
    @classmethod
    def quick(cls):
        return cls()

def run(config, out_dir=None, progress=True):
    time.sleep(0.5)
    return {"value": float(len(name))}

R.registry.experiments = lambda work: {n: types.SimpleNamespace(Config=Config, PAPER={"value": 1.0}, run=run)
                              for n in ("first", "second", "third")}
R.reproduce("gril", only=[name], out_dir=sys.argv[1], progress=False)
'''


def test_concurrent_reproduce_runs_into_one_folder_lose_no_result(tmp_path):
    env = os.environ | {"PYTHONPATH": os.getcwd()}
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(tmp_path), n], env=env,
                              stdout=subprocess.DEVNULL) for n in ("first", "second", "third")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    results = json.loads((tmp_path / "results.json").read_text())
    assert sorted(results) == ["first", "second", "third"]
    assert not (tmp_path / ".results.lock").exists()   # the lock is the folder itself: no file left behind


def test_every_committed_file_that_reproduce_does_not_write_has_its_writer():
    """data.COMMANDS names `python -m minimal.reproduce.extra NAME` for exactly the files extra.FILES writes, and
    every one of them is committed."""
    from minimal import data
    from minimal.reproduce import extra
    named = {k for k, v in data.COMMANDS.items() if v.startswith("python -m minimal.reproduce.extra ")}
    assert named == set(extra.FILES)
    assert all(data.COMMANDS[k] == f"python -m minimal.reproduce.extra {k}" for k in named)
    for name in extra.FILES:
        work, stem = name.split("/")
        assert list(data.data_path(work).glob(stem + ".*")), name
    with pytest.raises(ValueError, match="name must be one of"):
        extra.write("minrnn/nothing")
    assert extra.main([]) == 2
