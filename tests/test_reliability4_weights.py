"""Reliability round 4, weights (issue 48, items 8-10): a weights ``.npz`` and its JSON sidecar carry a shared
digest, so one run's arrays beside another run's sidecar are refused naming both files; two processes saving the
same path never leave or show a mispaired pair (the pair is written under a lock on its folder, read under a shared
one, and the digest catches any writer that bypassed it); NaN or inf weights are refused on save, naming the
arrays, and a file that holds them anyway loads with a warning naming them."""
import hashlib
import json
import multiprocessing
import os
import shutil
import time

import numpy as np
import pytest

from minimal import data
from minimal.run import io


def _params(value, shape=(3, 4)):
    return {"model": {"W": np.full(shape, float(value)), "b": np.full(shape[-1], float(value))}}


# --- item 8: a shared digest -------------------------------------------------------------------------------------

def test_the_sidecar_holds_the_sha256_of_the_npz_beside_it(tmp_path):
    path = tmp_path / "w.npz"
    io.save_weights(path, _params(1), {"run": 1}, {"loss": 0.5})
    meta = io.load_meta(path)
    assert meta["weights"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    io.update_meta(path, {"loss": 0.25})                   # metrics added later keep the digest
    assert io.load_meta(path)["weights"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    io.load_weights(path)


def test_one_runs_npz_beside_another_runs_sidecar_is_refused_naming_both_files(tmp_path):
    """The same model (same names, dtypes and shapes) trained twice: before, run A's arrays loaded under run B's
    config without a word."""
    a, b = tmp_path / "a" / "w.npz", tmp_path / "b" / "w.npz"
    io.save_weights(a, _params(1), {"run": "A", "lr": 1e-3})
    io.save_weights(b, _params(2), {"run": "B", "lr": 3e-3})
    shutil.copyfile(a, b)                                  # A's arrays beside B's sidecar
    with pytest.raises(ValueError) as e:
        io.load_weights(b)
    msg = str(e.value)
    assert str(b) in msg and str(io.sidecar_path(b)) in msg, msg
    assert "not one pair" in msg and "sha256" in msg and "delete both and rewrite them with" in msg, msg
    assert "\n" not in msg
    assert isinstance(e.value, io.MispairedWeightsError)


def test_another_runs_sidecar_beside_the_npz_is_refused_too(tmp_path):
    a, b = tmp_path / "a" / "w.npz", tmp_path / "b" / "w.npz"
    io.save_weights(a, _params(1), {"run": "A"})
    io.save_weights(b, _params(2), {"run": "B"})
    shutil.copyfile(io.sidecar_path(a), io.sidecar_path(b))
    with pytest.raises(io.MispairedWeightsError, match=rf"{b} and its sidecar {io.sidecar_path(b)} are not one pair"):
        io.load_weights(b)


def test_a_committed_pair_that_is_mispaired_names_the_command_that_rewrites_it(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "DATA_ROOT", tmp_path)
    npz = tmp_path / "gril" / "regression_full.npz"
    io.save_weights(npz, _params(1), {"run": "A"})
    other = tmp_path / "other.npz"
    io.save_weights(other, _params(2), {"run": "B"})
    shutil.copyfile(other, npz)
    with pytest.raises(io.MispairedWeightsError,
                       match=r"regression_full\.json are not one pair.*reproduce gril --full"):
        io.load_weights(npz)


def test_a_sidecar_without_digest_from_before_it_existed_still_loads(tmp_path):
    """The committed sidecars predate the digest (git keeps each committed pair together): accepted as they are."""
    path = tmp_path / "w.npz"
    io.save_weights(path, _params(1), {"run": 1})
    side = io.sidecar_path(path)
    meta = json.loads(side.read_text())
    del meta["weights"]["sha256"]
    side.write_text(json.dumps(meta))
    params, config = io.load_weights(path)
    assert config == {"run": 1} and np.all(params["model"]["W"] == 1)


def test_a_digest_that_is_not_a_sha256_is_named(tmp_path):
    path = tmp_path / "w.npz"
    io.save_weights(path, _params(1), {})
    side = io.sidecar_path(path)
    meta = json.loads(side.read_text())
    meta["weights"]["sha256"] = 12
    side.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=rf"{side} .*\"sha256\".*64 hex digits"):
        io.load_weights(path)


def test_the_committed_sidecars_load_as_they_are():
    """Every committed sidecar is read as committed (with or without a digest) and its pair loads."""
    npzs = [p for p in data.DATA_ROOT.glob("**/*.npz") if io.sidecar_path(p).is_file()
            and "minimal-weights-1" in io.sidecar_path(p).read_text()]
    assert len(npzs) >= 9
    for p in npzs:
        want = io.load_meta(p)["weights"].get("sha256")
        assert want is None or want == hashlib.sha256(p.read_bytes()).hexdigest(), p
        io.load_weights(p)


# --- item 9: two processes saving one path ------------------------------------------------------------------------

def _writer(path, who, rounds, start):
    start.wait()
    for i in range(rounds):
        # the same model saved by two runs: same names, dtypes and shapes; every value and the config differ
        io.save_weights(path, _params(who), {"writer": who, "round": i}, {"by": who})


def test_two_processes_saving_one_path_never_give_a_reader_a_mixed_pair(tmp_path):
    path = tmp_path / "w.npz"
    io.save_weights(path, _params(1), {"writer": 1, "round": -1})
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    start = ctx.Event()
    writers = [ctx.Process(target=_writer, args=(path, who, 150, start)) for who in (1, 2)]
    for w in writers:
        w.start()
    loads, refused, mixed = 0, [], []
    try:
        start.set()
        deadline = time.monotonic() + 60
        while any(w.is_alive() for w in writers) and time.monotonic() < deadline:
            try:
                params, config = io.load_weights(path)
            except (ValueError, FileNotFoundError) as e:      # allowed: a clear refusal naming the file
                refused.append(str(e))
                continue
            loads += 1
            W = params["model"]["W"]
            if not (np.all(W == config["writer"]) and np.all(params["model"]["b"] == config["writer"])):
                mixed.append((config, W.shape, float(W.flat[0])))
    finally:
        for w in writers:
            w.join(60)
    assert all(w.exitcode == 0 for w in writers), [w.exitcode for w in writers]
    assert not mixed, f"{len(mixed)} of {loads} loads mixed one writer's arrays with the other's config: {mixed[:3]}"
    assert all(str(path) in m for m in refused), refused[:3]
    assert loads >= 20, (loads, refused[:3])
    params, config = io.load_weights(path)                  # what the two writers left is one pair
    assert np.all(params["model"]["W"] == config["writer"]) and config["round"] == 149
    assert sorted(os.listdir(tmp_path)) == ["w.json", "w.npz"]  # no lock file, no temporary file left


def test_two_processes_saving_one_path_leave_a_whole_pair_each_time(tmp_path):
    """Without a reader: after each race of two writers the pair on disk is one writer's whole."""
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    mixed = 0
    for k in range(30):
        path = tmp_path / f"w{k}.npz"
        start = ctx.Event()
        writers = [ctx.Process(target=_writer, args=(path, who, 3, start)) for who in (1, 2)]
        for w in writers:
            w.start()
        start.set()
        for w in writers:
            w.join(60)
        assert all(w.exitcode == 0 for w in writers)
        params, config = io.load_weights(path)
        mixed += not np.all(params["model"]["W"] == config["writer"])
    assert mixed == 0, f"{mixed} of 30 races left one writer's arrays beside the other's sidecar"


def test_a_reader_retries_once_over_a_torn_pair_then_refuses(tmp_path, monkeypatch):
    """A writer that did not take the lock (e.g. a file system without flock) can leave a torn pair for an
    instant: the reader reads again once; a pair still torn is refused."""
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    io.save_weights(a, _params(1), {"writer": 1})
    io.save_weights(b, _params(2), {"writer": 2})
    torn = a.read_bytes()
    shutil.copyfile(io.sidecar_path(b), io.sidecar_path(a))   # a writer of b's pair to a, between its renames
    reads = []
    real = io._read_pair

    def heal_after_first(path):
        reads.append(path)
        got = real(path)
        if len(reads) == 1:                               # the other writer finishes its second rename
            shutil.copyfile(b, a)
        return got
    monkeypatch.setattr(io, "_read_pair", heal_after_first)
    params, config = io.load_weights(a)
    assert len(reads) == 2 and config == {"writer": 2} and np.all(params["model"]["W"] == 2)
    reads.clear()
    a.write_bytes(torn)                                   # torn for good now: refused after the one retry
    monkeypatch.setattr(io, "_read_pair", lambda p: reads.append(p) or real(p))
    with pytest.raises(io.MispairedWeightsError):
        io.load_weights(a)
    assert len(reads) == 2


# --- item 10: NaN weights ------------------------------------------------------------------------------------------

def test_nan_or_inf_weights_are_refused_on_save_naming_the_arrays(tmp_path):
    path = tmp_path / "w.npz"
    io.save_weights(path, _params(1), {"run": "good"})
    before = path.read_bytes(), io.sidecar_path(path).read_bytes()
    bad = {"mingru": {"W": np.ones((2, 2)), "b": np.array([1.0, np.nan]), "c": np.full(3, np.nan, np.float32)},
           "attention": {"E": np.array([np.inf, 0.0]), "n": np.arange(3)}}
    with pytest.raises(ValueError) as e:
        io.save_weights(path, bad, {"run": "diverged"})
    msg = str(e.value)
    assert isinstance(e.value, io.NonFiniteWeightsError)
    assert "NaN in mingru/b (1 of 2 values), mingru/c (3 of 3 values)" in msg, msg
    assert "inf in attention/E (1 of 2 values)" in msg, msg
    assert "mingru/W" not in msg and "attention/n" not in msg and str(path) in msg and "\n" not in msg
    assert (path.read_bytes(), io.sidecar_path(path).read_bytes()) == before      # the old pair is kept
    assert sorted(os.listdir(tmp_path)) == ["w.json", "w.npz"]
    with pytest.raises(io.NonFiniteWeightsError, match=r"NaN in w \(1 of 1 values\)"):
        io.save_weights(tmp_path / "x.npz", {"w": np.complex128(complex(np.nan, 0))}, {})
    assert not (tmp_path / "x.npz").exists()


def test_a_file_with_nan_written_elsewhere_loads_with_a_warning_naming_the_arrays(tmp_path):
    path = tmp_path / "w.npz"
    io.save_weights(path, _params(1), {"run": 1})
    side = io.sidecar_path(path)
    np.savez(path, **{"model/W": np.full((3, 4), np.nan), "model/b": np.ones(4)})   # not through save_weights
    meta = json.loads(side.read_text())
    meta["weights"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    side.write_text(json.dumps(meta))
    with pytest.warns(io.NonFiniteWeightsWarning, match=rf"{path} holds NaN in model/W \(12 of 12 values\)"):
        params, _ = io.load_weights(path)
    assert np.isnan(params["model"]["W"]).all()
