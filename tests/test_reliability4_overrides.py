"""Reliability round 4 (issue 48), items 1-3: every ``reproduce --set`` value of every selected experiment is
checked in full (the items of a tuple, their ranges and allowed names, sizes that cannot fit in memory) by each
Config's own validation, before the first experiment starts, and refused in one line naming what was typed."""
import dataclasses

import pytest

from minimal import validate
from minimal.reproduce import work as R
from minimal.__main__ import main
from minimal.experiments.minrnn import param_counts, runtime, selective_copy, shakespeare
from minimal.validate import InputError, check_config

GiB = 2 ** 30


@pytest.fixture
def nothing_runs(monkeypatch, tmp_path):
    """Every minrnn experiment's run fails the test: a refused --set must stop before the first one starts."""
    for mod in (param_counts, runtime, selective_copy, shakespeare):
        monkeypatch.setattr(mod, "run", lambda *a, _m=mod.__name__, **k: pytest.fail(f"{_m}.run ran"))
    # a fixed machine: the messages do not depend on the memory of the one running the tests
    monkeypatch.setattr(validate, "memory_bytes", lambda: 16 * GiB, raising=False)
    return tmp_path / "out"


def _refused(args, out, capsys):
    """main(args) exits 2 with one line on stderr, before any experiment ran; returns that line."""
    assert main([*args, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert not (out / "results.json").exists()
    return err.strip()


# --- 1. the items of a tuple field are checked, under the field's own name --------------------------------------
def test_1_tuple_items_are_refused_up_front_naming_the_field_and_what_is_allowed(nothing_runs, capsys):
    err = _refused(["reproduce", "minrnn", "--only", "param_counts", "--set", "alphas=0,-1"], nothing_runs, capsys)
    assert err == ("error: --set alphas=0,-1 for minrnn/param_counts: Config.alphas must be a non-empty tuple of "
                   "distinct items, each an integer >= 1 (0 is not), got (0, -1)")
    assert "d_hidden" not in err


def test_1_every_tuple_of_numbers_gets_the_rule_of_its_defaults_items():
    @dataclasses.dataclass
    class Grid:
        sizes: tuple = (8, 16)            # counts: each an integer >= 1
        seeds: tuple = (1, 2)             # seeds: each an integer >= 0, whatever the default's smallest
        scales: tuple = (0.5, 1.0)        # each a finite number >= 0
        flags: tuple = (True, False)      # each True or False
        names: tuple = ("a", "b")         # each a string

        __post_init__ = check_config

    Grid(sizes=(1,), seeds=(0,), scales=(0.0, 2), flags=(False,), names=("c",), )
    Grid(sizes=())                        # an empty tuple stays allowed where the Config does not say otherwise
    for field, value, want in [
        ("sizes", (8, 0), "a tuple whose items are each an integer >= 1 (0 is not)"),
        ("sizes", (8, 2.5), "a tuple whose items are each an integer >= 1 (2.5 is not)"),
        ("seeds", (-1,), "a tuple whose items are each an integer >= 0 (-1 is not)"),
        ("scales", (1.0, float("nan")), "a tuple whose items are each a finite number >= 0 (nan is not)"),
        ("flags", (True, "yes"), "a tuple whose items are each True or False ('yes' is not)"),
        ("names", ("a", 3), "a tuple whose items are each a string (3 is not)"),
    ]:
        with pytest.raises(InputError) as e:
            Grid(**{field: value})
        assert str(e.value) == f"Grid.{field} must be {want}, got {value!r}"


# --- 2. with several experiments, each one's own rules: names, ranges -------------------------------------------
@pytest.mark.parametrize("item, message", [
    ("kinds=attention", "Config.kinds must be a non-empty tuple of distinct values from ['mingru', 'minlstm', "
                        "'gru', 'lstm'], got ('attention',)"),
    ("kinds=mingru_vanilla", "Config.kinds must be a non-empty tuple of distinct values from ['mingru', 'minlstm', "
                             "'gru', 'lstm'], got ('mingru_vanilla',) (the vanilla cells are log_space=False here: "
                             "kinds=mingru with log_space=False)"),
    ("depths=0", "Config.depths must be a non-empty tuple of distinct items, each an integer >= 1 (0 is not), "
                 "got (0,)"),
    ("seeds=-1", "Config.seeds must be a non-empty tuple of distinct items, each an integer >= 0 (-1 is not), "
                 "got (-1,)"),
    ("seeds=()", "Config.seeds must be a non-empty tuple of distinct items, each an integer >= 0, got ()"),
    ("depths=1,1", "Config.depths must be a non-empty tuple of distinct items, each an integer >= 1 (1 is given "
                   "twice), got (1, 1)"),
    ("log_space=()", "Config.log_space must be a non-empty tuple of distinct items, each True or False, got ()"),
    ("reference_kinds=mingru", "Config.reference_kinds must be a tuple whose items are each one of ['gru', "
                               "'lstm'] ('mingru' is not), got ('mingru',)"),
])
def test_2_selective_copy_refuses_before_shakespeare_trains(item, message, nothing_runs, capsys):
    err = _refused(["reproduce", "minrnn", "--only", "shakespeare", "selective_copy", "--set", item],
                   nothing_runs, capsys)
    key = item.split("=")[0]
    assert err.startswith(f"error: --set {key}=") and f" for minrnn/selective_copy: {message}" in err, err


def test_2_what_selective_copy_refuses_shakespeare_takes_and_the_grid_still_builds():
    # the same values are Shakespeare's own (it trains the Transformer and the vanilla cells by name) ...
    R.plan_overrides("minrnn", {"shakespeare": shakespeare}, True, {"kinds": "attention,mingru_vanilla"})
    # ... and selective copying's allowed ones give its jobs
    typed = R.plan_overrides("minrnn", {"selective_copy": selective_copy}, True,
                             {"kinds": "gru,minlstm", "depths": "3", "seeds": "0,5", "log_space": "false",
                              "reference_kinds": "lstm"})["selective_copy"]
    jobs = selective_copy.jobs(dataclasses.replace(selective_copy.Config.quick(), **typed))
    assert [(j.kind, j.depth, j.seed) for j in jobs] == [("gru", 3, 0), ("gru", 3, 5), ("minlstm", 3, 0),
                                                        ("minlstm", 3, 5), ("lstm", 1, 0), ("lstm", 1, 5)]


# --- 3. sizes that cannot fit: one line naming the size, not NumPy's traceback -----------------------------------
@pytest.mark.parametrize("text", ["1e20", "100000000000000000000"])
def test_3_a_size_past_int64_is_one_line_naming_it(text, nothing_runs, capsys):
    err = _refused(["reproduce", "minrnn", "--only", "param_counts", "--set", f"d_x={text}"], nothing_runs, capsys)
    assert err == ("error: --set d_x=100000000000000000000 for minrnn/param_counts: Config.d_x must be an integer "
                   ">= 1 and below 2**63 (NumPy's sizes and indices are int64), got 100000000000000000000")


def test_3_a_size_whose_arrays_cannot_fit_in_memory_is_one_line_naming_it(nothing_runs, capsys):
    err = _refused(["reproduce", "minrnn", "--only", "param_counts", "--set", "d_x=1000000"], nothing_runs, capsys)
    assert err == ("error: --set d_x=1000000 for minrnn/param_counts: Config.d_x=1000000 with alphas up to 4 "
                   "(d_h = 4000000) makes the LSTM's float64 parameters: at least 582 TiB of memory, more than this "
                   "machine's 16 GiB; choose a smaller d_x (the percentages do not depend on it)")
    err = _refused(["reproduce", "minrnn", "--only", "selective_copy", "--set", "D=100000", "T=100000"],
                   nothing_runs, capsys)
    assert err.startswith("error: --set D=100000 T=100000 for minrnn/selective_copy: Config.D=100000, T=100000 ")
    assert "more than this machine's 16 GiB; choose a smaller D or T" in err
    err = _refused(["reproduce", "minrnn", "--only", "shakespeare", "--set", "batch=10000000"], nothing_runs, capsys)
    assert "for minrnn/shakespeare: Config.D=48, T=64, batch=10000000, expansion=2" in err
    err = _refused(["reproduce", "minrnn", "--only", "runtime", "--set", "T_values=1000000000"], nothing_runs, capsys)
    assert "for minrnn/runtime: Config.batch=64, d_hidden=32, T_values up to 1000000000" in err


def test_3_a_size_given_through_the_python_api_is_refused_as_well(monkeypatch):
    monkeypatch.setattr(validate, "memory_bytes", lambda: 16 * GiB, raising=False)
    with pytest.raises(InputError, match=r"Config.d_x must be an integer >= 1 and below 2\*\*63"):
        param_counts.Config(d_x=10 ** 20)
    with pytest.raises(InputError, match=r"--set d_x=1000000000000 for minrnn/param_counts: Config.d_x="):
        R.plan_overrides("minrnn", {"param_counts": param_counts}, True, {"d_x": 10 ** 12})
    param_counts.Config(d_x=512)                 # what fits is taken (168 MiB: the LSTM at alpha 4)
    # a system that does not say how much memory it has: nothing is refused for its size
    monkeypatch.setattr(validate, "memory_bytes", lambda: None, raising=False)
    param_counts.Config(d_x=10 ** 6)
