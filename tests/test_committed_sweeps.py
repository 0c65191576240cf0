"""Every committed sweep job file (``data/<work>/sweeps/<grid>/<name>-<job_key>.json``) is found by today's code.

A job file is named by a hash of its job function's import path and its config (``minimal.run.job_files.job_key``), so a
job function that moves, or a config field that changes, leaves its committed files behind unseen: the sweep
would silently train them again. Here each file's ``function`` must import, and the file's name must be the one
``job_path`` gives for that function and config; then each experiment's grid is found whole on disk."""
import importlib
import json

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
