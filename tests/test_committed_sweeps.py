"""Every committed sweep job file (``data/<work>/sweeps/<grid>/<name>-<job_key>.json``) is found by today's code.

A job file is named by a hash of its job function's import path and its config (``minimal.run.job_files.job_key``), so a
job function that moves, or a config field that changes, leaves its committed files behind unseen: the sweep
would silently train them again. Here each file's ``function`` must import, and the file's name must be the one
``job_path`` gives for that function and config; then each experiment's grid is found whole on disk, and so is the
selective-copying trend in T (``selective_copy_trend``), whose loader names a missing or damaged file."""
import importlib
import json

import numpy as np
import pytest

from minimal.data import data_path
from minimal.experiments import experiments
from minimal.run.job_files import job_path, load_records

FILES = sorted(data_path().glob("*/sweeps/*/*.json"))


def _function(dotted):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def test_there_are_committed_job_files():
    if not data_path().exists():
        pytest.skip("no data/ folder (an installed copy of minimal)")
    assert len(FILES) >= 148 + 27 + 21      # Zucchet's three sweeps (112 + 32 + 4), GRIL's two, at least


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(data_path())))
def test_a_committed_job_file_resolves_to_its_function_and_its_own_name(path):
    record = json.loads(path.read_text())
    fn = _function(record["function"])
    assert callable(fn)
    prefix = path.name.rsplit("-", 1)[0]
    assert job_path(path.parent, fn, record["config"], name=prefix) == path


@pytest.mark.parametrize("work,name", [("zucchet", "architectures"), ("zucchet", "hidden_size"),
                                       ("zucchet", "icl_seeds"), ("gril", "ablations"), ("gril", "comparison"),
                                       ("minrnn", "selective_copy")])
def test_each_committed_grid_loads_and_is_finished(work, name):
    mod = experiments(work)[name]
    folder = mod.SWEEP.dir(mod.Config())
    if not folder.exists():
        pytest.skip(f"{folder} is not committed here")
    records = load_records(folder, name=mod.SWEEP.name)
    assert records and all(r["function"] == f"{mod.SWEEP.job.__module__}.{mod.SWEEP.job.__name__}"
                           for r in records)
    assert mod.finished(mod.Config())


def _trend():
    from minimal.experiments.minrnn import selective_copy_trend as TR

    from minimal.experiments.minrnn import selective_copy as S

    if not S.SWEEP.folder.exists():
        pytest.skip("the selective-copying job files are not committed here")
    return TR


def test_the_selective_copying_trend_in_T_loads_as_the_command_line_made_it():
    """The T-trend grids (one and two log-space minGRU layers at T = 64, 128 and 256, and both at D = 64 and T = 64)
    are the grids of the ``--set`` commands that trained them, their three files per length load, and the accuracies
    are those the notebook and the docstring state."""
    import dataclasses
    import re

    from minimal.experiments.minrnn import selective_copy as S
    from minimal.run import overrides
    from minimal.run.job_files import job_key

    TR = _trend()
    for depth, configs in ((1, TR.CONFIGS), (2, TR.CONFIGS_2)):
        assert tuple(configs) == TR.lengths(depth)
        for T in TR.lengths(depth):
            words = [f"T={T}", "kinds=mingru", f"depths={depth}", "log_space=true"]
            typed = overrides.plan(overrides.parse_set(words),
                                   {"minrnn/selective_copy": S.Config()})["minrnn/selective_copy"]
            typed_config = overrides.apply(S.Config(), typed, "minrnn/selective_copy")
            assert [job_key(S.run_job, j) for j in S.jobs(typed_config)] == \
                   [job_key(S.run_job, j) for j in S.jobs(configs[T])]
            records = TR.records(T, depth=depth)
            assert [(r["config"]["T"], r["config"]["kind"], r["config"]["depth"], r["config"]["log_space"],
                     r["config"]["seed"]) for r in records] == [(T, "mingru", depth, True, s) for s in (0, 1, 2)]
    # T = 64: three of Config()'s committed runs, the Table 1 grid's
    assert set(S.jobs(TR.CONFIGS[64])) <= set(S.jobs(S.Config()))
    assert dataclasses.replace(TR.CONFIGS[128], T=64) == TR.CONFIGS[64]
    summary = TR.summary()
    runs = {T: [round(a, 2) for a in r["mingru_1_runs"]] for T, r in summary.items()}
    assert runs == {64: [43.09, 38.28, 43.31], 128: [33.24, 34.5, 37.8], 256: [36.27, 36.85, 33.97]}
    for T, r in summary.items():      # the std over seeds is NumPy's, ddof = 0
        acc = np.array([x["result"]["accuracy"] for x in TR.records(T)])
        assert r["mingru_1"] == acc.mean() and r["mingru_1_std"] == acc.std(ddof=0)
    stated = {T: f"{r['mingru_1']:.1f} ± {r['mingru_1_std']:.1f}" for T, r in summary.items()}
    assert stated == {64: "41.6 ± 2.3", 128: "35.2 ± 1.9", 256: "35.7 ± 1.2"}
    doc = " ".join(TR.__doc__.split())
    for T in TR.LENGTHS:
        seeds = " / ".join(f"{a:.2f}" for a in summary[T]["mingru_1_runs"])
        assert f"{stated[T]} % at T = {T} (seeds {seeds})" in doc
    # two layers: T = 64 is section 4.2's grid, T = 128 and 256 three more seeds each
    summary2 = TR.summary(depths=(2,))
    assert {T: [round(a, 2) for a in r["mingru_2_runs"]] for T, r in summary2.items()} == \
           {64: [94.06, 94.51, 98.93], 128: [94.82, 94.97, 95.54], 256: [85.57, 90.37, 97.49]}
    stated2 = {T: f"{r['mingru_2']:.1f} ± {r['mingru_2_std']:.1f}" for T, r in summary2.items()}
    assert stated2 == {64: '95.8 ± 2.2', 128: '95.1 ± 0.3', 256: '91.1 ± 4.9'}
    for T in TR.lengths(2):
        seeds = " / ".join(f"{a:.2f}" for a in summary2[T]["mingru_2_runs"])
        assert f"{stated2[T]} % at T = {T} (seeds {seeds})" in doc
    assert min(a for r in summary2.values() for a in r["mingru_2_runs"]) > \
           max(a for r in summary.values() for a in r["mingru_1_runs"]) + 40
    change = summary2[256]["mingru_2"] - summary2[128]["mingru_2"]
    assert f"{-change:.1f} points below T = 128, within the two spreads" in doc
    assert abs(change) < summary2[128]["mingru_2_std"] + summary2[256]["mingru_2_std"]
    runs128, runs256 = summary2[128]["mingru_2_runs"], summary2[256]["mingru_2_runs"]
    assert [sum(a < min(runs128) for a in runs256), sum(a > max(runs128) for a in runs256)] == [2, 1]
    assert "two seeds below every T = 128 run and one above them all" in doc
    assert f"{S.PAPER['mingru_2'] - summary2[256]['mingru_2']:.1f} below Table 1's 96.8 ± 3.2" in doc
    # one layer at the paper's width, D = 64, T = 64: the grid of --set T=64 D=64 kinds=mingru depths=1 log_space=true
    words = ["T=64", "D=64", "kinds=mingru", "depths=1", "log_space=true"]
    typed = overrides.plan(overrides.parse_set(words), {"minrnn/selective_copy": S.Config()})["minrnn/selective_copy"]
    assert [job_key(S.run_job, j) for j in S.jobs(overrides.apply(S.Config(), typed, "minrnn/selective_copy"))] == \
           [job_key(S.run_job, j) for j in S.jobs(TR.config(64, D=64))]
    wide = TR.records(64, D=64)
    assert [(r["config"]["T"], r["config"]["D"], r["config"]["depth"], r["config"]["log_space"], r["config"]["seed"])
            for r in wide] == [(64, 64, 1, True, s) for s in (0, 1, 2)]
    w = TR.summary(D=64)[64]
    assert [round(a, 2) for a in w["mingru_1_runs"]] == [41.95, 43.55, 42.33]
    assert f"{w['mingru_1']:.1f} ± {w['mingru_1_std']:.1f} % (seeds 41.95 / 43.55 / 42.33)" in doc
    # two layers at the paper's width: the grid of --set T=64 D=64 kinds=mingru depths=2 log_space=true
    words = ["T=64", "D=64", "kinds=mingru", "depths=2", "log_space=true"]
    typed = overrides.plan(overrides.parse_set(words), {"minrnn/selective_copy": S.Config()})["minrnn/selective_copy"]
    assert [job_key(S.run_job, j) for j in S.jobs(overrides.apply(S.Config(), typed, "minrnn/selective_copy"))] == \
           [job_key(S.run_job, j) for j in S.jobs(TR.config(64, depth=2, D=64))]
    wide2 = TR.records(64, depth=2, D=64)
    assert [(r["config"]["T"], r["config"]["D"], r["config"]["depth"], r["config"]["log_space"], r["config"]["seed"])
            for r in wide2] == [(64, 64, 2, True, s) for s in (0, 1, 2)]
    w2 = TR.summary(depths=(2,), D=64)[64]
    assert [round(a, 2) for a in w2["mingru_2_runs"]] == [83.60, 89.41, 91.38]
    assert f"{w2['mingru_2']:.1f} ± {w2['mingru_2_std']:.1f} % (seeds 83.60 / 89.41 / 91.38)" in doc
    assert all(a < b for a, b in zip(w2["mingru_2_runs"], summary2[64]["mingru_2_runs"]))   # "every seed lower"
    notebook = data_path().parent / "notebooks" / "minrnn_c_selective_copy.ipynb"
    if notebook.exists():
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        text = " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
        assert (f"one layer reaches {w['mingru_1']:.1f} ± {w['mingru_1_std']:.1f} % at $T = 64$ (seeds 41.95, 43.55 and "
                "42.33 %)") in text
        assert (f"Two layers at the paper's width reach {w2['mingru_2']:.1f} ± {w2['mingru_2_std']:.1f} % at $T = 64$ "
                "(seeds 83.60, 89.41 and 91.38 %)") in text
        seeds = ", ".join(f"{a:.2f}" for a in summary[128]["mingru_1_runs"][:2])
        assert (f"falls from {stated[64]} % at $T = 64$ to {stated[128]} % at $T = 128$ (seeds {seeds} and "
                f"{summary[128]['mingru_1_runs'][2]:.2f} %") in text
        fall = summary[64]["mingru_1"] - summary[128]["mingru_1"]
        assert f"The fall, {fall:.1f} points" in text
        assert re.search(rf"mean is {37.0 - summary[128]['mingru_1']:.1f} points below Table 1's 37\.0", text)
        seeds2 = ", ".join(f"{a:.2f}" for a in summary2[256]["mingru_2_runs"][:2])
        assert (f"At $T = 256$ two layers reach {stated2[256]} % (seeds {seeds2} and "
                f"{summary2[256]['mingru_2_runs'][2]:.2f} %)") in text
        change2 = summary2[128]["mingru_2"] - summary2[256]["mingru_2"]
        assert f"{change2:.1f} points below their {stated2[128]} %" in text


def test_a_missing_or_damaged_trend_file_is_named_not_skipped(tmp_path):
    import shutil

    from minimal.experiments.minrnn import selective_copy as S
    from minimal.validate import InputError

    TR = _trend()
    files = [job_path(S.SWEEP.folder, S.SWEEP.job, j, name=S.SWEEP.name) for j in S.jobs(TR.CONFIGS[128])]
    for f in files[:2]:
        shutil.copy(f, tmp_path)
    with pytest.raises(InputError, match=rf"T = 128, 1 layer\(s\), D = 32: 1 of 3 job files do not read: .*{files[2].name} "
                                         r"\(missing\).*--set T=128 kinds=mingru depths=1 log_space=true"):
        TR.records(128, sweep_dir=str(tmp_path))
    assert not TR.finished(sweep_dir=str(tmp_path))
    (tmp_path / files[2].name).write_text("<<<<<<< HEAD\n")
    with pytest.raises(InputError, match=rf"{files[2].name} \(not valid JSON"):
        TR.records(128, sweep_dir=str(tmp_path))
    shutil.copy(files[0], tmp_path / files[2].name)        # another job's record under this job's name
    with pytest.raises(InputError, match="computed for another job"):
        TR.records(128, sweep_dir=str(tmp_path))
    with pytest.raises(InputError, match="T must be one of"):
        TR.records(512)
    with pytest.raises(InputError, match=r"T must be one of the lengths trained with 2 layer\(s\) of width "
                                         r"D = 32 \[64, 128, 256\]"):
        TR.records(512, depth=2)
    with pytest.raises(InputError, match=r"of width D = 64 \[64\], got 128"):
        TR.records(128, depth=1, D=64)
    with pytest.raises(InputError, match="depth must be one of"):
        TR.records(128, depth=3)
    with pytest.raises(InputError, match=r"D must be one of the widths trained \[32, 64\], got 48"):
        TR.records(64, D=48)
    with pytest.raises(InputError, match=r"D must be one of the widths trained \[32, 64\], got 64\.0"):
        TR.records(64, D=64.0)
    with pytest.raises(InputError, match=r"T = 64, 2 layer\(s\), D = 64: 3 of 3 job files do not read: .*\(missing\).*"
                                         r"--set T=64 D=64 kinds=mingru depths=2 log_space=true"):
        TR.records(64, sweep_dir=str(tmp_path / "none"), depth=2, D=64)
    assert not TR.finished(sweep_dir=str(tmp_path), depth=2)       # no two-layer file in the folder
