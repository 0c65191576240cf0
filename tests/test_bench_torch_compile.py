"""The torch.compile versions of the torch twins (``minimal.bench.torch_models``), skipped without PyTorch.

Compiling takes 30-75 s per (model, version, dtype) on one core, so the float64 check of the compiled versions runs
on one model per kind, not on all 13: vanilla minGRU (selective copy x2: "compile: associative scan", or "compile:
loop" where this torch cannot), log-space minLSTM (Shakespeare: blocks with the conv and dropout; "compile:
Heinsen") and the Transformer ("compile: sdpa"). test_bench_train.py checks the eager versions of all 13;
``python -m minimal bench train`` checks every version of every model before timing it."""
import importlib.util

import numpy as np
import pytest

from minimal.bench import train as bt

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed: the torch twins are not checked")

ONE_PER_KIND = ["selective copy mingru x2", "Shakespeare minLSTM log", "Shakespeare Transformer"]


@pytest.fixture(scope="module")
def models():
    return {m.name: m for m in bt.models()}


def test_each_model_has_one_compiled_version_after_its_eager_ones(models):
    from minimal.bench import torch_models as tm

    for m in models.values():
        vs = tm.versions(m)
        assert [v for v in vs if v.startswith("compile: ")] == vs[-1:], m.name
    vanilla = "compile: associative scan" if tm.associative_scan_compiles() else "compile: loop"
    assert tm.versions(models["selective copy mingru x2"])[-1] == vanilla
    assert tm.versions(models["selective copy minlstm x3 log"])[-1] == "compile: Heinsen"
    assert tm.versions(models["Shakespeare Transformer"])[-1] == "compile: sdpa"


@pytest.mark.parametrize("name", ONE_PER_KIND)
def test_compiled_versions_compute_our_models_in_float64(models, name):
    from minimal.bench import torch_models as tm

    m64 = bt.as_dtype(models[name], np.float64)
    check = tm.check_equal(m64)
    assert "why" not in check, check["why"]
    compiled = tm.versions(m64)[-1]
    assert set(check["versions"]) == set(tm.versions(m64))
    assert check["versions"][compiled] <= bt.EQUAL_TOL and check["max_rel"] <= bt.EQUAL_TOL
    assert (name, compiled, "torch.float64", "loss") in tm._COMPILED     # cached for the next caller


def test_a_compiled_step_runs_without_recompiling(models):
    import torch

    from minimal.bench import torch_models as tm

    m = models["selective copy mingru x2"]
    version = tm.versions(m)[-1]
    step = tm.step(m, version)
    parts = step()                                         # compiles (float32: not the check's float64 function)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(2):
            parts = step()
        assert tm.step(m, version)() is not None           # a second closure reuses the cached compiled loss
    assert set(parts) == {"step", "forward+backward", "update"}
    assert all(t > 0 for t in parts.values()) and parts["step"] >= parts["update"]
