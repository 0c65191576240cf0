"""The code a reader opens is the code that runs: every compiled kernel that a cell, the scans or AdamW runs by
default sits in the same folder as the NumPy reference it is tested against, and the top of ``minimal/`` is small.

Which kernels run is measured, not declared: every Numba dispatcher of the package is wrapped in a recorder, each
registered cell runs forward and backward on its examples with the default choices (the convention keywords
``mode``, ``method``, ``backend`` and ``kernel`` dropped), and the files of the kernels called from Python are
collected. The table below is then the answer a reader can trust: change a default, and this test names the cell.
"""
import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import minimal
from minimal.cells import REGISTRY

ROOT = Path(minimal.__file__).resolve().parent
CHOICE_KEYS = ("mode", "method", "backend", "kernel")

# The compiled files that run by default (relative to minimal/), and for each the NumPy reference it is tested
# against, in the same folder.
REFERENCE = {
    "scan/numba_linear.py": "scan/reference.py",
    "scan/numba_log.py": "scan/reference.py",
    "cells/_gates_numba.py": "cells/_gates.py",
    "cells/_min_scan_numba.py": "cells/_min_modes.py",
    "cells/_min_log_linear.py": "cells/_min_modes.py",
    "cells/_min_log_linear_f32.py": "cells/_min_modes.py",
    "cells/_min_scan_f32.py": "cells/_min_modes.py",
    "cells/_gril_numba.py": "cells/gril.py",
    "cells/_softmax_numba.py": "cells/softmax_attention.py",
    "layers/_layernorm_numba.py": "layers/layernorm.py",
    "layers/_gelu_numba.py": "layers/mlp.py",
    "layers/_dropout_numba.py": "layers/dropout.py",
    "layers/_embedding_numba.py": "layers/embedding.py",
    "layers/_causal_conv_numba.py": "layers/causal_conv.py",
    "optim/_adamw_numba.py": "optim/__init__.py",
}

# What each registered cell runs by default on its examples (forward and backward); cells absent from this table
# run NumPy alone.
RUNS = {
    "gated_rnn": {"scan/numba_linear.py"},
    "gril": {"cells/_gril_numba.py", "scan/numba_linear.py"},   # the scan: readout "state" runs the unfused path
    "layernorm": {"layers/_layernorm_numba.py"},
    # the min cells: gates and scan are one pass of _min_scan_numba, in log space its linear form _min_log_linear (the
    # gates' and the scans' own kernels run with method="blelloch" or after a non-finite value); _gates_numba's
    # flush_and_sum_ on the gate gradients before their matrix products
    "min_block": {"cells/_min_scan_numba.py", "cells/_min_log_linear.py", "cells/_gates_numba.py",
                  "cells/_softmax_numba.py", "layers/_layernorm_numba.py", "layers/_gelu_numba.py",
                  "layers/_causal_conv_numba.py", "layers/_dropout_numba.py"},
    "causal_conv": {"layers/_causal_conv_numba.py"},
    "mingru": {"cells/_min_scan_numba.py", "cells/_min_log_linear.py", "cells/_gates_numba.py"},
    "minlstm": {"cells/_min_scan_numba.py", "cells/_min_log_linear.py", "cells/_gates_numba.py"},
    "mlp": {"layers/_gelu_numba.py"},
    "dropout": {"layers/_dropout_numba.py"},
    "residual": {"layers/_layernorm_numba.py", "layers/_gelu_numba.py"},
    "softmax_attention": {"cells/_softmax_numba.py"},
    "token_position_embedding": {"layers/_embedding_numba.py"},
    "embedding": {"layers/_embedding_numba.py"},
}


def _compiled_modules():
    """Every module of minimal that defines Numba dispatchers, imported."""
    from numba.core.registry import CPUDispatcher

    found = {}
    for info in pkgutil.walk_packages([str(ROOT)], prefix="minimal."):
        if ".experiments" in info.name or info.name.startswith(("minimal.bench", "minimal.__main__")):
            continue
        try:
            mod = importlib.import_module(info.name)
        except ImportError:
            continue
        names = [n for n, v in vars(mod).items() if isinstance(v, CPUDispatcher) and v.__module__ == mod.__name__]
        if names:
            found[mod] = names
    return found


def _scans_and_adamw():
    from minimal import scan
    from minimal.optim import adamw_init, adamw_step

    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.1, 0.9, (2, 5, 3)), rng.standard_normal((2, 5, 3))
    h = scan.linear_scan(a, b)
    scan.linear_scan_backward(a, h, np.ones_like(h))
    yield "linear"
    log_h = scan.log_scan(np.log(a), np.log(np.abs(b)))
    scan.log_scan_backward(np.log(a), np.log(np.abs(b)), log_h, np.ones_like(log_h))
    yield "log"
    params = {"w": rng.standard_normal(4)}
    adamw_step(params, {"w": rng.standard_normal(4)}, adamw_init(params), lr=1e-3)
    yield "adamw"


@pytest.fixture(scope="module")
def compiled():
    """Everything compiled before any dispatcher is wrapped: a kernel compiled while its callees are wrapped would
    see Python functions where it needs dispatchers."""
    for name in sorted(REGISTRY):
        _run_defaults(REGISTRY[name], set())
    list(_scans_and_adamw())


@pytest.fixture
def recorder(monkeypatch, compiled):
    ran = set()
    for mod, names in _compiled_modules().items():
        rel = Path(mod.__file__).resolve().relative_to(ROOT).as_posix()
        for n in names:
            fn = getattr(mod, n)

            def wrapped(*a, _fn=fn, _rel=rel, **kw):
                ran.add(_rel)
                return _fn(*a, **kw)
            monkeypatch.setattr(mod, n, wrapped)
    return ran


def _run_defaults(cell, ran):
    ran.clear()
    for ex in cell.examples(np.random.default_rng(0)):
        kwargs = {k: v for k, v in ex.kwargs.items() if k not in CHOICE_KEYS}
        y, cache = cell.forward(ex.params, ex.x, **kwargs)
        cell.backward(ex.params, cache, np.ones_like(y))
    return set(ran)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_the_kernels_a_cell_runs_by_default_are_those_listed(name, recorder):
    assert _run_defaults(REGISTRY[name], recorder) == RUNS.get(name, set())


def test_the_scans_and_adamw_run_the_kernels_beside_their_references(recorder):
    want = {"linear": {"scan/numba_linear.py"}, "log": {"scan/numba_log.py"}, "adamw": {"optim/_adamw_numba.py"}}
    for step in _scans_and_adamw():
        assert recorder == want[step], step
        recorder.clear()


def test_every_compiled_file_sits_beside_its_reference():
    """The table names every file of minimal that holds Numba kernels (apart from the benchmarks) and a reference
    in the same folder that exists."""
    files = {Path(m.__file__).resolve().relative_to(ROOT).as_posix() for m in _compiled_modules()}
    assert files == set(REFERENCE)
    for kernel, ref in REFERENCE.items():
        assert Path(kernel).parent == Path(ref).parent and (ROOT / ref).is_file(), (kernel, ref)


def test_the_top_of_the_package_is_small():
    """At most 12 files stand at the top of minimal/, and none of them is a compiled kernel; no module of the
    package is over 400 lines."""
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= 12, top
    assert [n for n in top if n.endswith("_numba.py")] == []
    long = {p.relative_to(ROOT).as_posix(): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
