"""minimal.run.io: the one results writer (atomic, one format) and the one weights format (.npz + JSON sidecar), whose
loader names the file and what is wrong on every kind of damage; every committed weights file loads through it."""
import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from minimal import data
from minimal.run import io


# --- write_json ----------------------------------------------------------------------------------------------------

def test_write_json_keeps_the_old_file_when_the_write_fails_midway(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    io.write_json(path, {"loss": 1.0})
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError("disk full")            # the new text is in the temporary file, not yet in place
    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="disk full"):
        io.write_json(path, {"loss": 2.0})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["metrics.json"]       # no temporary file left behind


def test_write_json_refuses_what_is_not_json_before_touching_the_file(tmp_path):
    path = tmp_path / "metrics.json"
    io.write_json(path, {"loss": 1.0})
    with pytest.raises(TypeError, match="object is not JSON serialisable"):
        io.write_json(path, {"loss": object()})
    assert json.loads(path.read_text()) == {"loss": 1.0}


def test_write_json_has_one_format_numpy_numbers_as_python_ones(tmp_path):
    path = tmp_path / "sub" / "r.json"
    io.write_json(path, {"b": np.float32(0.5), "a": np.arange(2), "n": np.int64(3), "ok": np.bool_(True)})
    assert path.read_text() == '{\n "b": 0.5,\n "a": [\n  0,\n  1\n ],\n "n": 3,\n "ok": true\n}\n'  # order kept
    io.write_json(path, {"b": 1, "a": 2}, sort_keys=True)
    assert path.read_text() == '{\n "a": 2,\n "b": 1\n}\n'


# --- the weights format: round trip --------------------------------------------------------------------------------

@dataclasses.dataclass
class _Config:
    D: int = 3
    kinds: tuple = ("a", "b")
    lr: float = 1e-3


def test_flat_params_and_config_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    params = {"W": rng.standard_normal((3, 4)).astype(np.float32), "b": rng.standard_normal(4),
              "steps": np.arange(5), "scale": np.float64(2.0)}
    io.save_weights(tmp_path / "w.npz", params, _Config(), {"metrics": {"loss": 0.25}})
    back, config = io.load_weights(tmp_path / "w.npz")
    assert back.keys() == params.keys()
    for k, v in params.items():
        assert back[k].dtype == np.asarray(v).dtype and np.array_equal(back[k], v)
    assert config == {"D": 3, "kinds": ["a", "b"], "lr": 1e-3}           # a tuple comes back as a list
    meta = io.load_meta(tmp_path / "w.npz")
    assert meta["metrics"] == {"loss": 0.25} and meta["weights"]["arrays"]["W"] == "float32[3,4]"
    assert not (tmp_path / "w.npz").read_bytes().count(b"pickle")


def test_grouped_params_come_back_grouped(tmp_path):
    groups = {"mingru": {"0.E": np.ones((5, 2)), "1.rnn.W_z": np.zeros((4, 2))}, "attention": {"0.E": np.ones(3)}}
    io.save_weights(tmp_path / "w.npz", groups, {"D": 2})
    back, config = io.load_weights(tmp_path / "w.npz")
    assert {g: set(p) for g, p in back.items()} == {g: set(p) for g, p in groups.items()}
    assert np.array_equal(back["mingru"]["0.E"], groups["mingru"]["0.E"]) and config == {"D": 2}


def test_update_meta_adds_entries_and_keeps_the_config_and_array_list(tmp_path):
    io.save_weights(tmp_path / "w.npz", {"w": np.zeros(2)}, {"D": 1}, {"a": 1})
    io.update_meta(tmp_path / "w.npz", {"loss": 0.5, "weights": "ignored"})
    meta = io.load_meta(tmp_path / "w.npz")
    assert meta["a"] == 1 and meta["loss"] == 0.5 and meta["config"] == {"D": 1}
    assert meta["weights"]["arrays"] == {"w": "float64[2]"}
    io.load_weights(tmp_path / "w.npz")


@pytest.mark.parametrize("params, what", [
    ({"a": {"w": np.array([1, None])}}, r"a/w.*object"),
    ({"a": {"w": None}}, r"a/w.*None"),
    ({"seed/1": {"w": np.zeros(2)}, "seed": {"1/w": np.ones(2)}}, r"'seed/1'.*'/'"),
    ({"": {"w": np.zeros(2)}}, r"group ''"),
    ({"a": {"": np.zeros(2)}}, r"'a'.*name ''"),
    ({"a": {"w": np.zeros(2)}, "b": np.zeros(2)}, r"not a mix"),
    ({}, r"non-empty"),
], ids=["object", "None", "slash", "empty-group", "empty-name", "mixed", "nothing"])
def test_save_refuses_what_would_not_load_back_and_writes_nothing(tmp_path, params, what):
    with pytest.raises(ValueError, match=what):
        io.save_weights(tmp_path / "w.npz", params, {})
    assert os.listdir(tmp_path) == []


def test_save_refuses_a_config_that_is_not_json_before_writing(tmp_path):
    with pytest.raises(TypeError, match="not JSON serialisable"):
        io.save_weights(tmp_path / "w.npz", {"w": np.zeros(2)}, {"f": print})
    with pytest.raises(ValueError, match="config must be a dataclass instance or a dict"):
        io.save_weights(tmp_path / "w.npz", {"w": np.zeros(2)}, [1])
    with pytest.raises(ValueError, match=r"\.npz file.*got .*w\.json"):
        io.save_weights(tmp_path / "w.json", {"w": np.zeros(2)}, {})
    assert os.listdir(tmp_path) == []


def test_a_failed_write_leaves_the_old_pair_whole(tmp_path, monkeypatch):
    path = tmp_path / "w.npz"
    io.save_weights(path, {"w": np.zeros(2)}, {"D": 1})
    before = path.read_bytes(), io.sidecar_path(path).read_bytes()

    def failing_savez(f, **arrays):
        f.write(b"half a file")
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(OSError, match="disk full"):
        io.save_weights(path, {"w": np.ones(3)}, {"D": 2})
    monkeypatch.undo()
    assert (path.read_bytes(), io.sidecar_path(path).read_bytes()) == before
    assert sorted(os.listdir(tmp_path)) == ["w.json", "w.npz"]


# --- the weights format: every kind of damage is named ---------------------------------------------------------------

def _sidecar_edit(edit):
    def damage(npz, side):
        meta = json.loads(side.read_text())
        edit(meta)
        side.write_text(json.dumps(meta))
    return damage


def _save_npy(path):
    with open(path, "wb") as f:       # np.save on a path would append .npy to the name
        np.save(f, np.zeros(2))


def _npz_rewrite(**arrays):
    def damage(npz, side):
        np.savez(npz, **arrays)
    return damage


@pytest.mark.parametrize("damage, error, where, what", [
    (lambda npz, side: npz.unlink(), FileNotFoundError, "w.npz", r"is missing: write it with"),
    (lambda npz, side: side.unlink(), FileNotFoundError, "w.json", r"is missing: the weights w\.npz need it"),
    (lambda npz, side: side.write_text('{"config": '), ValueError, "w.json", r"is not valid JSON"),
    (lambda npz, side: side.write_text("[1, 2]"), ValueError, "w.json", r"holds a JSON list"),
    (lambda npz, side: side.write_text('{"loss": 0.5}'), ValueError, "w.json", r"is not a weights sidecar"),
    (_sidecar_edit(lambda m: m.pop("config")), ValueError, "w.json", r"has no \"config\" object"),
    (_sidecar_edit(lambda m: m["weights"].pop("arrays")), ValueError, "w.json", r"without a layout.*\"arrays\""),
    (lambda npz, side: npz.write_bytes(b""), ValueError, "w.npz", r"is empty"),
    (lambda npz, side: npz.write_bytes(npz.read_bytes()[:npz.stat().st_size // 2]), ValueError, "w.npz", r"is not a readable \.npz"),
    (lambda npz, side: npz.write_bytes(b"garbage" * 10), ValueError, "w.npz", r"is not a readable \.npz"),
    (lambda npz, side: _save_npy(npz), ValueError, "w.npz", r"holds one \.npy array"),
    (_npz_rewrite(**{"a/W": np.zeros((3, 2))}), ValueError, "w.npz", r"missing \['a/b'\]"),
    (_npz_rewrite(**{"a/W": np.zeros((3, 2)), "a/b": np.zeros(2), "a/c": np.zeros(1)}), ValueError, "w.npz",
     r"unexpected \['a/c'\]"),
    (_npz_rewrite(**{"a/W": np.zeros((3, 2), np.float32), "a/b": np.zeros(2)}), ValueError, "w.npz",
     r"a/W float32\[3,2\] \(the sidecar lists float64\[3,2\]\)"),
    (_npz_rewrite(**{"a/W": np.zeros((2, 3)), "a/b": np.zeros(2)}), ValueError, "w.npz",
     r"a/W float64\[2,3\] \(the sidecar lists float64\[3,2\]\)"),
], ids=["no-npz", "no-sidecar", "sidecar-truncated", "sidecar-list", "sidecar-of-metrics", "no-config",
        "no-array-list", "npz-empty", "npz-truncated", "npz-garbage", "npy", "key-missing", "key-unexpected",
        "dtype", "shape"])
def test_the_loader_names_the_file_and_what_is_wrong(tmp_path, damage, error, where, what):
    npz = tmp_path / "w.npz"
    io.save_weights(npz, {"a": {"W": np.ones((3, 2)), "b": np.ones(2)}}, {"D": 2})
    damage(npz, io.sidecar_path(npz))
    with pytest.raises(error, match=rf"{tmp_path / where} .*{what}"):
        io.load_weights(npz)


def test_a_committed_file_names_the_command_that_rewrites_it(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "DATA_ROOT", tmp_path)
    npz = tmp_path / "gril" / "regression_full.npz"
    io.save_weights(npz, {"w": np.zeros(2)}, {})
    io.sidecar_path(npz).unlink()
    with pytest.raises(FileNotFoundError, match=r"regression_full\.json is missing.*reproduce gril --full"):
        io.load_weights(npz)


# --- reproduce writes a run's metrics into its weights' sidecar, not over it ----------------------------------------

def test_reproduce_adds_the_metrics_to_the_sidecar_of_the_weights_it_wrote(tmp_path, monkeypatch):
    import types
    from minimal.reproduce import work as R

    def run(config, out_dir=None, progress=True, save_weights_path=None):
        io.save_weights(save_weights_path, {"w": np.zeros(2)}, {"D": 1})
        return {"loss": 0.5}
    class Config:
        @classmethod
        def quick(cls):
            return cls()
    fake = types.SimpleNamespace(Config=Config, PAPER={}, SAVE_METRICS=True, run=run)
    monkeypatch.setattr(data, "DATA_ROOT", tmp_path / "data")
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"fake": fake})
    monkeypatch.setattr(R.report, "render", lambda *a, **k: "table")
    R.reproduce("gril", quick=False, out_dir=tmp_path / "out", progress=False)
    npz = tmp_path / "data" / "gril" / "fake_full.npz"
    meta = io.load_meta(npz)
    assert meta["loss"] == 0.5 and meta["config"] == {"D": 1} and io.load_weights(npz)[1] == {"D": 1}


# --- every committed weights file loads through the one loader --------------------------------------------------------

_SKIP = Path("minrnn") / "sweeps" / "selective_copy"     # not weights of ours to convert
COMMITTED = sorted(p.relative_to(data.DATA_ROOT) for p in data.DATA_ROOT.glob("**/*.npz")
                   if _SKIP not in p.relative_to(data.DATA_ROOT).parents)


def test_the_committed_weights_are_the_nine_known_files():
    assert len(COMMITTED) >= 9, COMMITTED      # the parametrisation below cannot silently be empty


@pytest.mark.parametrize("rel", COMMITTED, ids=str)
def test_every_committed_weights_file_loads_through_the_one_loader(rel):
    params, config = io.load_weights(data.DATA_ROOT / rel)
    assert params and isinstance(config, dict) and config
    arrays = [a for p in params.values() for a in (p.values() if isinstance(p, dict) else [p])]
    assert all(np.all(np.isfinite(a)) for a in arrays if a.dtype.kind == "f")
