"""`bench train --profile` (minimal.bench.profile): each function's time goes to the part of the library its file
belongs to, the FLOP count is the step's matrix products, and the tool refuses the benchmarks it does not profile."""
import gc
import time

import numpy as np
import pytest

from minimal.__main__ import main
from minimal.bench import profile as P, train as T
from minimal.validate import InputError


@pytest.mark.parametrize("filename, part", [
    ("/x/minimal/scan/numba_linear.py", "scans"), ("/x/minimal/cells/_gates_numba.py", "gates and cells"),
    ("/x/minimal/layers/_layernorm_numba.py", "norms"), ("/x/minimal/layers/linear.py", "linear layers"),
    ("/x/minimal/layers/cross_entropy.py", "embedding and loss"), ("/x/minimal/optim/__init__.py", "AdamW and clipping"),
    ("/x/minimal/models.py", "stack glue"), ("~", "NumPy calls"), ("/y/site-packages/numpy/_core/fromnumeric.py",
                                                                   "NumPy calls"),
    ("/y/site-packages/numba/core/dispatcher.py", "Numba dispatch"), ("/x/minimal/validate.py", "other Python"),
    ("/x/minimal/products.py", "matrix products")])
def test_each_file_belongs_to_its_part(filename, part):
    assert P._part(filename) == part


def test_the_flops_are_the_steps_matrix_products():
    m = T._selective_copy("mingru", 2, False)
    N = 64 * 64                                   # B T tokens of Job()
    weights = 6 * 192 * 32 + 32 * 16              # two blocks' W_z, W_h, out (H x D), the readout D x V
    assert P.step_flops(m) == 6 * N * weights     # forward, dX, dW: 2 N a b each
    a = T._shakespeare("attention", False)
    B, Tn, D, L = 16, 128, 64, 3
    dense = sum(6 * B * Tn * W.size for k, W in a.params.items()
                if W.ndim == 2 and k.rsplit(".", 1)[-1] not in ("E", "P"))
    assert P.step_flops(a) == dense + 12 * B * Tn * Tn * D * L


def test_a_profile_splits_the_profiled_time_among_the_parts():
    step = T.project_step(T._selective_copy("mingru", 2, True))
    parts = P.profile_step(step, steps=1)
    shares = sum(v for k, v in parts.items() if k not in ("total", P.KERNELS)) / parts["total"]
    assert 0.5 < shares <= 1.01, parts
    # the compiled kernels' time lies inside the parts' (the cells' fused gates and scan, LayerNorm, AdamW)
    assert 0 < parts[P.KERNELS] < sum(v for k, v in parts.items() if k not in ("total", P.KERNELS))
    assert parts["gates and cells"] > 0 and parts["norms"] > 0 and parts["AdamW and clipping"] > 0
    assert parts.get("scans", 0.0) == 0.0    # the cells run their gates and scan in one pass (cells/_min_scan_numba)
    line = P.roofline(T._selective_copy("mingru", 2, True), 0.05, repeats=1)
    assert line["gflops_step"] == pytest.approx(line["gflop"] / 0.05)
    assert line["share"] == pytest.approx(line["gemm_seconds"] / 0.05) and line["gflops_sgemm"] > 0
    text = P.format_profile("m", parts, line)
    assert "gates and cells" in text and "% of the sgemm rate" in text
    assert f"of which compiled kernels (Numba), across the parts above: {1e3 * parts[P.KERNELS]:.2f} ms" in text


def _busy(seconds):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pass


def test_each_entry_is_the_median_over_separately_profiled_steps_with_the_collector_off():
    """One step of three slowed 30-fold (as the machine now and then slows one) moves no entry: each is the median
    over the steps, each profiled on its own; and Python's garbage collector is off while they run, on after."""
    calls, collector = [], []

    def step():
        collector.append(gc.isenabled())
        calls.append(None)
        _busy(0.06 if len(calls) == 3 else 0.002)    # the first, untimed call is call 1

    assert gc.isenabled()
    parts = P.profile_step(step, steps=3)
    assert len(calls) == 4 and collector == [True, False, False, False] and gc.isenabled()
    assert 0.002 <= parts["total"] < 0.02
    assert 0.001 < sum(v for k, v in parts.items() if k not in ("total", P.KERNELS)) < 0.02


def test_a_compiled_kernel_is_told_from_a_python_function():
    from minimal.cells import _min_scan_numba, min_block

    assert P._is_compiled(_min_scan_numba.__file__, "mingru_scan_into")
    assert not P._is_compiled(min_block.__file__, "forward") and not P._is_compiled("~", "<built-in method>")


def test_profile_is_refused_outside_bench_train(capsys):
    assert main(["bench", "scan", "--profile"]) == 2
    assert "--profile applies to bench train only" in capsys.readouterr().err
    with pytest.raises(ValueError, match="steps must be"):
        P.profile_step(lambda: None, steps=0)
    assert np.isfinite(P.sgemm_seconds([(8, 4, 2, 3)], repeats=1))


@pytest.mark.parametrize("small, shape, seconds", [
    (True, (4096, 32, 192, 2), 2 * 1.0),     # a product over many rows: plain or in row blocks
    (True, (32, 4096, 192, 2), 2 * 2.0),     # a weight's gradient (K the long axis): plain or summed blocks
    (True, (4096, 192, 192, 2), 2 * 3.0),    # blocks of 16 rows: too few, plain alone
    (False, (4096, 32, 192, 2), 2 * 3.0),    # a BLAS without the small-matrix kernel: plain alone
])
def test_the_sgemm_rate_is_numpys_fastest_form_of_each_shape(monkeypatch, small, shape, seconds):
    from minimal import products
    monkeypatch.setattr(products, "small_kernel", lambda: small)
    fake = {"plain": 3.0, "rows": 1.0, "outer": 2.0}       # seconds of one product in each form
    monkeypatch.setattr(P, "product_seconds", lambda shapes, repeats, prepare: fake[prepare.__name__])
    assert P.sgemm_seconds([shape], repeats=1) == seconds


def test_profile_times_the_rows_it_is_given_and_refuses_the_flags_it_ignores(capsys):
    chosen = T.choose(T.models(quick=True), [T.models(quick=True)[0].name])
    assert [m.name for m in chosen] == [T.models(quick=True)[0].name]
    with pytest.raises(InputError, match="only: no row named"):
        P.profile_models(quick=True, only=["no such row"])
    assert main(["bench", "train", "--profile", "--no-cells"]) == 2
    assert "--no-cells does not apply to --profile" in capsys.readouterr().err
    assert main(["bench", "train", "--profile", "--burst", "2"]) == 2
    assert "--burst does not apply to --profile" in capsys.readouterr().err


def test_the_roofline_sets_each_frameworks_matrix_product_beside_numpys(monkeypatch):
    monkeypatch.setattr(P, "sgemm_seconds", lambda shapes, repeats: 0.010)     # NumPy: 10 ms for the step's shapes

    class Twin:                      # a framework whose product takes twice NumPy's time
        @staticmethod
        def matmul_seconds(shapes, repeats):
            return 0.020

    model = T._selective_copy("mingru", 2, True)
    line = P.roofline(model, 0.05, repeats=1, anchors={"twin": Twin})
    assert line["anchors"] == {"twin": 0.020} and line["gemm_seconds"] == 0.010
    text = P.format_profile("m", {"total": 0.05, "gates and cells": 0.05}, line)
    gflop = P.step_flops(model) / 1e9
    assert (f"the same shapes with twin's matrix product: {gflop / 0.020:.1f} GFLOP/s, 20.0 ms (0.50x NumPy's rate)"
            in text)


def test_the_profile_runs_only_the_named_rows_and_pinned(monkeypatch, capsys):
    from minimal.bench import cli

    seen, pinned = [], []
    monkeypatch.setattr(T, "project_step", lambda model: seen.append(model.name) or (lambda: {"step": 0.01}))
    monkeypatch.setattr(P, "profile_step", lambda step, steps: {"total": 0.01, "norms": 0.01})
    monkeypatch.setattr(P, "roofline", lambda model, best, repeats, twins: {
        "gflop": 1.0, "gflops_step": 1.0, "gflops_sgemm": 2.0, "gemm_seconds": 0.005, "share": 0.5, "anchors": {}})
    monkeypatch.setattr(cli, "_pin", pinned.append)
    name = T.models(quick=True)[1].name
    assert main(["bench", "train", "--profile", "--quick", "--no-anchors", "--only", name, "--pin", "0"]) == 0
    assert seen == [name] and pinned == [0] and capsys.readouterr().out.startswith(f"{name}: ")


def test_a_profile_names_a_framework_that_is_missing_or_unknown(monkeypatch):
    monkeypatch.setattr(T, "_anchor", lambda name: None)
    messages = []
    assert T.installed_twins(("torch",), messages.append, "matrix-product rate") == {}
    assert messages == ['torch is not installed: no torch matrix-product rate (pip install -e ".[anchors]" to '
                        'compare)']
    with pytest.raises(ValueError, match="anchors: unknown framework 'tf'"):
        P.profile_models(quick=True, anchors=("tf",))


def test_the_committed_split_of_each_row_follows_from_the_committed_table_and_profile():
    """bench/results/train_cpu_2026-11-30_blas.txt: its section 3 is bench/blas_bound.py of its sections 1 and 2."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("blas_bound", root / "bench" / "blas_bound.py")
    blas_bound = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blas_bound)
    text = (root / "bench" / "results" / "train_cpu_2026-11-30_blas.txt").read_text()
    table = text.split("# 1. The step table")[1].split("# 2. ")[0]
    profile = text.split("# 2. ")[1].split("# 3. ")[0]
    split = text.split("# 3. ")[1]
    derived = blas_bound.table(table, profile)
    assert len(derived.splitlines()) == 2 + 13 and derived in split
    # a version whose name holds a comma is read whole, and can be the fastest
    row = "selective copy mingru x2 log"
    line = f"  {row}: torch: Heinsen 225.95 ms, torch: Heinsen (B,H,T) 24.71 ms, jax: lax.scan 66.97 ms"
    assert blas_bound.steps(f"{row}     44.42\n{line}") == {row: (44.42, "torch: Heinsen (B,H,T)", 24.71)}


def test_the_floor_of_a_row_is_its_products_and_its_kernels():
    """bench/blas_bound.py's second table: products at NumPy's rate + compiled kernels, against 0.8 of theirs."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("blas_bound", root / "bench" / "blas_bound.py")
    blas_bound = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blas_bound)
    row = "Shakespeare Transformer"
    table = f"{row}     60.00\n  {row}: torch: sdpa 50.00 ms, jax: jnp attention 110.00 ms"
    profile = (f"{row}: 70.0 ms a step under cProfile; matrix products 2.471 GFLOP, 40.0 GFLOP/s achieved (the "
               f"unprofiled step) against 100.0 GFLOP/s same-run sgemm of its shapes: 40 % of the sgemm rate; sgemm "
               f"alone would take 22.0 ms\n    the same shapes with torch's matrix product: 150.0 GFLOP/s, 16.0 ms "
               f"(1.38x NumPy's rate)\n    {P.KERNELS} (Numba), across the parts above: 19.50 ms  27.9 %")
    assert blas_bound.products(profile) == {row: {"numpy": 22.0, "torch": 16.0, "kernels": 19.5}}
    last = blas_bound.bounds(table, profile).splitlines()[-1].split()
    # ours, theirs, 0.8 theirs, products, kernels, floor = 22.0 + 19.5, floor / theirs, rest = ours - floor
    assert last[2:] == ["60.00", "50.00", "40.00", "22.0", "19.5", "41.5", "0.83", "18.5"]
    assert blas_bound.bounds(table, profile.split("\n    of which")[0]).count("\n") == 1   # no kernels: no row


# file: the step table's, the profile's and the split's sections (head, and what follows), the floors of its
# warm table, and the sentence of its reading that quotes the minLSTM rows' floors
FLOOR_FILES = {
    "train_cpu_2026-12-01_floor.txt": (
        ("# 2. After (command 3)\n", "#\n# 3. "), ("# 3. The profile (command 2)\n", "#\n# 4. "),
        "# 4. The split and the floor",
        {"selective copy minlstm x2": 0.89, "selective copy minlstm x3": 0.94, "Shakespeare Transformer": 0.83},
        "floor alone is 0.81 / 0.89 (x2)\n# and 0.84 / 0.94 (x3) of torch.compile's step"),
    "train_cpu_2026-12-01_shuffled.txt": (
        ("# 1. The step table (command 1)\n", "#\n# 2. "), ("# 2. The profile (command 2)\n", "#\n# 3. "),
        "# 3. The split and the floor",
        {"selective copy minlstm x2": 0.78, "selective copy minlstm x3": 0.76, "Shakespeare Transformer": 0.78},
        "floor is 0.69 / 0.78 (x2) and 0.71 / 0.76 (x3) of\n# torch.compile's step here"),
    "train_cpu_2026-12-01_blocks.txt": (
        ("# 1. The step table (command 1)\n", "#\n# 2. "), ("# 2. The profile (command 2)\n", "#\n# 3. "),
        "# 3. The split and the floor",
        {"selective copy minlstm x2": 0.76, "selective copy minlstm x3": 0.76, "Shakespeare Transformer": 0.65},
        "is 0.64 / 0.76 (x2) and 0.69 / 0.76 (x3) of torch.compile's step"),
    "train_cpu_2026-12-01_slopes.txt": (
        ("# 1. The step table (command 1)\n", "#\n# 2. "), ("# 2. The profile (command 2)\n", "#\n# 3. "),
        "# 3. The split and the floor",
        {"selective copy minlstm x2": 0.74, "selective copy minlstm x3": 0.76, "Shakespeare Transformer": 0.68},
        "the two alone are\n# 0.66-0.76 of the fastest framework's step"),
    "train_cpu_2026-12-01_jacobians.txt": (
        ("# 1. The step table (command 1)\n", "#\n# 2. "), ("# 2. The profile (command 2)\n", "#\n# 3. "),
        "# 3. The split and the floor",
        {"selective copy mingru x2": 0.66, "selective copy minlstm x2": 0.74, "selective copy minlstm x3": 0.74,
         "Shakespeare Transformer": 0.68},
        "the two alone are 0.66-0.69 (minGRU) and 0.74 (minLSTM) of the fastest framework's step"),
    "train_cpu_2026-12-01_reverse.txt": (
        ("# 1. The step table (command 1)\n", "#\n# 2. "), ("# 2. The profile (command 2)\n", "#\n# 3. "),
        "# 3. The split and the floor",
        {"selective copy mingru x2": 0.61, "selective copy minlstm x2": 0.66, "selective copy minlstm x3": 0.66,
         "Shakespeare Transformer": 0.69},
        "our compiled kernels alone are 0.60-0.61 (minGRU) and 0.66 (minLSTM) of the fastest framework's\n# step"),
    "train_cpu_2026-12-02_kernel.txt": (   # OpenBLAS's own kernel's pair (sections 3 and 4)
        ("# 3. OpenBLAS's own kernel, SkylakeX: the step table (command 3)\n", "#\n# 4. "),
        ("# 4. OpenBLAS's own kernel, SkylakeX: the profile (command 4)\n", "#\n# 5. "),
        "# 5. The split and the floor",
        {"selective copy minlstm x3": 0.62, "Shakespeare Transformer": 0.42},
        "framework's warm step on selective copy minLSTM x3 and 0.42 on the Transformer"),
    "train_cpu_2026-12-02_zen4.txt": (
        ("# 1. The step table (command 1)\n", "#\n# 2. "), ("# 2. The profile (command 2)\n", "#\n# 3. "),
        "# 3. The split and the floor",
        {"Shakespeare minGRU": 0.58, "Shakespeare minLSTM": 0.46, "Shakespeare Transformer": 0.60},
        "0.58 / 0.46 / 0.60 on the Shakespeare minGRU /\n# minLSTM / Transformer"),
    "train_cpu_2026-12-03_log_linear.txt": (
        ("# 2. The step table (command 2)\n", "#\n# 3. "), ("# 3. The profile (command 3)\n", "#\n# 4. "),
        "# 4. The split and the floor",
        {"selective copy minlstm x2": 0.59, "selective copy minlstm x3": 0.60, "selective copy mingru x2 log": 0.37,
         "selective copy mingru x3 log": 0.37},
        "the floor is 0.59 / 0.60 on selective copy minLSTM x2 / x3 and\n# 0.37 / 0.37 on minGRU x2 log / x3 log"),
    "train_cpu_2026-12-03_f32_gates.txt": (
        ("# 2. The step table (command 2)\n", "#\n# 3. "), ("# 4. The profile (command 4)\n", "#\n# 5. "),
        "# 5. The split and the floor",
        {"selective copy minlstm x3": 0.54, "selective copy mingru x3 log": 0.49, "Shakespeare minLSTM": 0.46,
         "Shakespeare Transformer": 0.41},
        "0.46 on the Shakespeare minLSTM and 0.41 on the Transformer"),
}


@pytest.mark.parametrize("name", sorted(FLOOR_FILES))
def test_the_committed_floor_of_each_row_follows_from_the_committed_table_and_profile(name):
    """bench/results/train_cpu_2026-12-01_*.txt: the split and the floor are bench/blas_bound.py of the file's step
    table and profile, with the whole table (its warm steps) and with the first table alone; the reading's floors
    are those."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("blas_bound", root / "bench" / "blas_bound.py")
    blas_bound = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blas_bound)
    (t0, t1), (p0, p1), split_head, floors, sentence = FLOOR_FILES[name]
    text = (root / "bench" / "results" / name).read_text()
    table = text.split(t0)[1].split(t1)[0]
    profile = text.split(p0)[1].split(p1)[0]
    split = text.split(split_head)[1]
    first = table.split("\nmodel                           warm ms")[0]
    for t in (table, first):
        derived = blas_bound.table(t, profile) + "\n\n" + blas_bound.bounds(t, profile)
        assert len(derived.splitlines()) == (2 + 13) + 1 + (2 + 13) and derived in split
    floor = {n: float(line.split()[-2]) for n in floors
             for line in blas_bound.bounds(table, profile).splitlines() if line[:32].rstrip() == n}
    assert floor == floors and sentence in text
