"""`python -m minimal reproduce WORK --set KEY=VALUE ...`: Config fields from the command line, typed, checked,
recorded in results.json and shown on the results page."""
import dataclasses
import json
import types
from typing import Optional

import pytest
from _fakes import fake_experiment

from minimal.run import overrides as O
from minimal.reproduce import work as R
from minimal.reproduce import index as RA
from minimal.__main__ import build_parser, main
from minimal.validate import InputError, check_config
from minimal import optim


@dataclasses.dataclass
class TrainConfig:
    """A stand-in experiment's Config with one field of each kind --set parses."""
    steps: int = 100
    lr: float = 1e-2
    kinds: tuple = ("mingru", "minlstm")
    seeds: tuple = (0, 1)
    log_space: bool = True
    dtype: str = "float32"
    sweep_dir: Optional[str] = None

    __post_init__ = check_config

    @classmethod
    def quick(cls):
        return cls(steps=10)


def _module(config_cls, **attrs):
    """An experiment module whose run returns the config it was given (as a dict)."""
    run = lambda config, out_dir=None, progress=True: {"ran": dataclasses.asdict(config)}   # noqa: E731
    return types.SimpleNamespace(Config=config_cls, PAPER={}, run=run, **attrs)


# --- a real experiment, a tiny run: the override reaches the Config, AdamW, results.json and the page -------------
def test_set_reaches_the_config_adamw_results_json_and_the_page(tmp_path, monkeypatch):
    import minimal.run.train as T

    lrs = []
    real = optim.adamw_step
    monkeypatch.setattr(T, "adamw_step", lambda p, g, s, lr, *a, **k: lrs.append(lr) or real(p, g, s, lr, *a, **k))
    out = tmp_path / "out"
    assert main(["reproduce", "gril", "--only", "regression", "--no-progress", "--out", str(out),
                 "--set", "lr=2e-3", "steps=50", "n_eval=200", "scales=1.0"]) == 0
    # two models (multivariate, scalar) of 50 AdamW steps each; the cosine schedule peaks at the lr set
    assert len(lrs) == 100 and max(lrs) == pytest.approx(2e-3)
    entry = json.loads((out / "results.json").read_text())["regression"]
    assert entry["overrides"] == {"lr": 2e-3, "steps": 50, "n_eval": 200, "scales": [1.0]}
    assert entry["mode"] == "quick"
    assert {k: entry["config"][k] for k in ("lr", "steps", "n_eval", "scales", "N")} == {
        "lr": 2e-3, "steps": 50, "n_eval": 200, "scales": [1.0], "N": 10}   # the rest: the quick variant's
    page = (out / "results.md").read_text()
    assert "## Not the default configuration" in page
    assert ("- **regression** (quick): `lr=0.002` (default 0.01), `steps=50` (default 5000), `n_eval=200` "
            "(default 10000), `scales=1.0` (default 0.25,0.5,1.0,2.0,4.0)") in page
    assert "| regression | loss | 0.206 |" in page and "| quick, --set |" in page
    assert "## regression (quick, --set `lr=0.002`" in (out / "measurements.md").read_text()


def test_a_run_without_set_records_no_overrides_and_the_page_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"plain": fake_experiment()})
    R.reproduce("gril", out_dir=tmp_path, progress=False)
    assert json.loads((tmp_path / "results.json").read_text())["plain"]["overrides"] == {}
    assert "Not the default configuration" not in (tmp_path / "results.md").read_text()


# --- values are typed by the Config field's annotation --------------------------------------------------------------
@pytest.mark.parametrize("text, field, expected", [
    ("2000", "steps", 2000), ("2_000", "steps", 2000), ("2e3", "steps", 2000),
    ("1e-3", "lr", 1e-3), ("3", "lr", 3.0),
    ("false", "log_space", False), ("Yes", "log_space", True), ("0", "log_space", False),
    ("float64", "dtype", "float64"),
    ("mingru", "kinds", ("mingru",)), ("(minlstm, mingru)", "kinds", ("minlstm", "mingru")),
    ("0,1,2", "seeds", (0, 1, 2)), ("[3]", "seeds", (3,)), ("()", "seeds", ()),
    ("None", "sweep_dir", None), ("/tmp/jobs", "sweep_dir", "/tmp/jobs"),
])
def test_each_value_is_parsed_by_its_fields_type(text, field, expected):
    typed = O.plan({field: text}, {"x/exp": TrainConfig()})["x/exp"]
    assert typed == {field: expected} and type(typed[field]) is type(expected)


def test_a_non_text_value_is_used_as_it_stands_and_still_checked():
    assert O.plan({"lr": 5e-4}, {"x/exp": TrainConfig()}) == {"x/exp": {"lr": 5e-4}}
    with pytest.raises(InputError, match=r"TrainConfig.lr must be a finite number > 0, got 0"):
        O.plan({"lr": 0}, {"x/exp": TrainConfig()})


# --- errors: an unknown key, a bad value, a malformed item -----------------------------------------------------------
def test_an_unknown_key_is_named_with_a_close_one_and_the_valid_keys(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["reproduce", "minrnn", "--only", "shakespeare", "--out", str(out), "--set", "lrr=1e-3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --set lrr: no experiment (minrnn/shakespeare) has a Config field 'lrr' "
                          "(did you mean 'lr'?); the keys are: D, T, batch, clip,")
    assert "steps" in err and "warmup" in err
    assert not (out / "results.json").exists()   # refused before anything ran


def test_a_value_of_the_wrong_type_names_the_key_the_type_and_the_value(capsys):
    assert main(["reproduce", "minrnn", "--only", "shakespeare", "--set", "steps=2.5"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --set steps (minrnn/shakespeare): expected int (e.g. steps=2000), got '2.5'")
    assert main(["reproduce", "minrnn", "--only", "shakespeare", "--set", "lr=fast"]) == 2
    assert "--set lr (minrnn/shakespeare): expected float (e.g. lr=1e-3), got 'fast'" in capsys.readouterr().err


def test_a_value_the_config_refuses_names_the_experiment_and_its_rule(capsys):
    assert main(["reproduce", "minrnn", "--only", "shakespeare", "--set", "lr=-1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --set lr=-1.0 for minrnn/shakespeare: Config.lr must be a finite number > 0, got -1.0")
    assert main(["reproduce", "minrnn", "--only", "shakespeare", "--set", "kinds=mingru,gpt"]) == 2
    assert "Config.kinds must be a non-empty tuple of distinct values from" in capsys.readouterr().err


@pytest.mark.parametrize("items, message", [
    (["lr"], "--set takes KEY=VALUE items"), (["=1"], "--set takes KEY=VALUE items"),
    (["lr=1", "lr=2"], "--set names 'lr' twice"),
    (["scheduler=tcp://h:1"], "--set scheduler: set it with --scheduler"),
])
def test_malformed_items_and_flagged_fields_are_refused(items, message, capsys):
    assert main(["reproduce", "zucchet", "--set", *items]) == 2
    assert message in capsys.readouterr().err


# --- which experiments a key goes to; the variant it goes on top of -----------------------------------------------
def test_with_several_experiments_a_key_goes_to_those_that_have_it(tmp_path, monkeypatch):
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"train": _module(TrainConfig), "count": fake_experiment()})
    res = R.reproduce("minrnn", out_dir=tmp_path, progress=False, overrides={"lr": "1e-3"})
    assert res["train"]["metrics"]["ran"]["lr"] == 1e-3 and res["train"]["overrides"] == {"lr": 1e-3}
    assert res["count"]["overrides"] == {} and res["count"]["metrics"] == {"size": 1}
    with pytest.raises(InputError, match=r"no experiment \(minrnn/train, minrnn/count\) has a Config field 'size2' "
                                         r"\(did you mean 'size'\?\)"):
        R.reproduce("minrnn", out_dir=tmp_path, progress=False, overrides={"size2": "3"})


def test_overrides_go_on_top_of_the_quick_or_full_variant(tmp_path, monkeypatch):
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"train": _module(TrainConfig)})
    quick = R.reproduce("gril", quick=True, out_dir=tmp_path, progress=False, overrides={"lr": "1e-3"})
    full = R.reproduce("gril", quick=False, out_dir=tmp_path, progress=False, overrides={"lr": "1e-3"})
    assert (quick["train"]["metrics"]["ran"]["steps"], quick["train"]["mode"]) == (10, "quick")
    assert (full["train"]["metrics"]["ran"]["steps"], full["train"]["mode"]) == (100, "full")
    assert quick["train"]["metrics"]["ran"]["lr"] == full["train"]["metrics"]["ran"]["lr"] == 1e-3


def test_with_overrides_quick_runs_quick_instead_of_loading_the_committed_grid(tmp_path, monkeypatch):
    monkeypatch.setattr(R.registry, "experiments", lambda work: {"done": fake_experiment(True)})
    res = R.reproduce("zucchet", quick=True, out_dir=tmp_path, progress=False, overrides={"size": "3"})
    assert (res["done"]["metrics"]["size"], res["done"]["mode"]) == (3, "quick")


def test_a_full_run_with_overrides_leaves_the_committed_data_files_alone(tmp_path, monkeypatch):
    from minimal import data

    monkeypatch.setattr(R.registry, "experiments", lambda work: {"saving": fake_experiment(SAVE_METRICS=True)})
    monkeypatch.setattr(data, "DATA_ROOT", tmp_path / "data")
    R.reproduce("gril", quick=False, out_dir=tmp_path / "out", progress=False, overrides={"size": "3"})
    assert not (tmp_path / "data").exists()


def test_a_sweep_grid_changed_by_set_never_writes_into_the_committed_folder():
    from minimal.experiments.gril import ablations as A

    changed = R._off_committed(A, dataclasses.replace(A.Config.quick(), lr=1e-3))
    assert changed.sweep_dir == str(A.SWEEP.quick_folder())
    assert R._off_committed(A, A.Config.quick()).sweep_dir is None   # the quick grid: the Sweep's own choice
    assert R._off_committed(A, A.Config(n_workers=4)).sweep_dir is None   # the committed grid: load it
    assert R._off_committed(A, A.Config(lr=1e-3, sweep_dir="/x")).sweep_dir == "/x"


# --- reproduce all ----------------------------------------------------------------------------------------------
def test_reproduce_all_gives_each_work_the_keys_its_experiments_have(tmp_path, monkeypatch):
    works = {"zucchet": {"train": _module(TrainConfig)}, "gril": {"count": fake_experiment()},
             "minrnn": {"count": fake_experiment()}}
    monkeypatch.setattr(R.registry, "experiments", lambda work: works[work])
    done = RA.reproduce_all(out_dir=tmp_path, progress=False, overrides={"lr": "1e-3", "size": "4"})
    assert done["zucchet"]["train"]["overrides"] == {"lr": 1e-3}
    assert done["gril"]["count"]["overrides"] == {"size": 4} and done["gril"]["count"]["metrics"] == {"size": 4}
    assert "| train | quick, --set lr=0.001 |" in (tmp_path / "index.md").read_text()
    with pytest.raises(InputError, match="no experiment .* has a Config field 'nope'"):
        RA.reproduce_all(out_dir=tmp_path / "again", progress=False, overrides={"nope": "1"})
    assert not (tmp_path / "again").exists()   # refused before any work ran


def test_help_and_readme_describe_set(capsys):
    from pathlib import Path

    with pytest.raises(SystemExit):
        build_parser().parse_args(["reproduce", "--help"])
    assert "--set KEY=VALUE [KEY=VALUE ...]" in capsys.readouterr().out
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "python -m minimal reproduce minrnn --only shakespeare --set lr=1e-3 steps=2000" in readme


# --- every experiment of reproduce, through the generic mechanism -------------------------------------------------
def _every_config():
    from minimal.experiments import MODULES, experiments

    return {f"{work}/{name}": mod.Config() for work in MODULES for name, mod in experiments(work).items()}


def test_every_field_of_every_experiment_takes_its_default_back_as_text():
    """What the page prints (``value_text``) is what --set takes: each default, written out, parses to itself."""
    for label, config in _every_config().items():
        for f in dataclasses.fields(config):
            if f.name in O.FLAGS:
                continue
            default = getattr(config, f.name)
            typed = O.plan({f.name: O.value_text(default)}, {label: config})[label]
            assert typed == {f.name: default}, (label, f.name)


# the experiments without one peak lr and one step count: two tasks with one of each per task, or no training
TWO_TASKS_OR_NONE = {"zucchet/hidden_size", "zucchet/architectures", "minrnn/param_counts", "minrnn/runtime",
                     "minrnn/peak_memory"}


def test_every_experiment_that_trains_one_model_kind_calls_them_lr_and_steps_and_checks_them():
    configs = _every_config()
    for key in ("lr", "steps"):
        having = {label for label, c in configs.items() if key in {f.name for f in dataclasses.fields(c)}}
        assert set(configs) - having == TWO_TASKS_OR_NONE, key
        for label in having:
            with pytest.raises(InputError, match=rf"for {label}: Config.{key} must be"):
                O.plan({key: "-1"}, {label: configs[label]})
    for label in ("zucchet/hidden_size", "zucchet/architectures"):
        assert {"lr_teacher", "lr_icl", "steps_teacher", "steps_icl"} <= {f.name for f in
                                                                          dataclasses.fields(configs[label])}
