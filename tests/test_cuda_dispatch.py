"""method="auto": the dispatch table is the committed benchmark's winners, and "auto" runs what it names.

The kernels run in the CUDA simulator (tests/conftest.py), so the shapes stay tiny; which version "auto" picks
is observed by wrapping ``dispatch.choose``.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from cuda_kernels import dispatch
from minimal.bench import gpu, gpu_rows
from cuda_kernels import scan as cs
from minimal import scan as ref

from test_cuda_scan import assert_close, problem

ROOT = Path(__file__).resolve().parents[1]


def test_the_table_is_what_the_committed_benchmark_measured():
    """TABLE cannot drift from the files it cites: it is re-derived here from their rows."""
    rows = [r for path in dispatch.SOURCES for r in dispatch.load_rows(ROOT / path)]
    log_rows = dispatch.load_rows(ROOT / dispatch.LOG_SOURCE)
    assert dispatch.TABLE == dispatch.derive_table(rows, log_rows)
    # forward / backward from the preallocated rows of the H100 round-2 run (issue 35): thousands of channels ->
    # v1 (at its default K), few channels and long T -> v4 (at its default block and K); log forward from the
    # allocating H200 benchmark (v4's log space was not timed)
    assert dispatch.SOURCES == ("bench/results/gpu_round2_H100_2026-11-27_scan_rows.jsonl",)
    assert dispatch.TABLE[(8, 4096, 8192)] == {"forward": "sequential", "backward": "sequential",
                                               "log forward": "sequential"}
    for C in (1, 16, 256):
        assert {k: dispatch.TABLE[(1, 1048576, C)][k] for k in ("forward", "backward")} == \
            {"forward": "lookback", "backward": "lookback"}
    assert dispatch.TABLE[(1, 1048576, 16)]["log forward"] == "chunked"
    cells = [v for kinds in dispatch.TABLE.values() for v in kinds.values()]
    assert len(cells) == 17 and cells.count("chunked lookback") == 0
    from cuda_kernels import lookback

    assert dispatch.V4_CONFIG == {k: (lookback.DEFAULT_BLOCK, lookback.DEFAULT_STEPS[k]) for k in ("forward",
                                                                                                  "backward")}


def test_the_backward_default_k_8_wins_through_the_v1_rows_of_the_second_check():
    """v1's backward runs at K = 8 by default, which only the second H200 check (gpu_check2) timed: 0.903 /
    0.898 of a same-run copy against K = 4's 0.795 / 0.808 and v2's 0.232 / 0.273 (first check). Without its
    rows v1 would have no backward candidate at K = 8 and v2 would win; with them "auto" runs v1 at K = 8."""
    assert cs.DEFAULT_PREFETCH_BACKWARD == dispatch.V1_PREFETCH["backward"] == 8
    v1_rows = dispatch.load_rows(ROOT / dispatch.V1_SOURCE)
    first = dispatch.load_rows(ROOT / dispatch.SOURCE)

    def fraction(rows, name, shape):
        (r,) = [r for r in rows if r["name"] == name and tuple(r["shape"]) == shape]
        return round(r["vs_copy"], 3)

    for shape, k8, k4, v2 in (((8, 4096, 8192), 0.903, 0.795, 0.232), ((8, 1024, 8192), 0.898, 0.808, 0.273)):
        assert fraction(v1_rows, "v1 loop backward (preallocated) K=8", shape) == k8
        assert fraction(v1_rows, "v1 loop backward (preallocated) K=4", shape) == k4
        assert fraction(first, "v2 Blelloch backward (preallocated)", shape) == v2
        assert dispatch.table_from_preallocated_rows(first)[shape]["backward"] == "blelloch"
        assert dispatch.table_from_preallocated_rows(first + v1_rows)[shape]["backward"] == "sequential"
        assert dispatch.choose(shape, "backward") == {"method": "sequential"}
    # at K = 4 (the old default) the first check alone made v1 the winner too
    assert dispatch.table_from_preallocated_rows(first, {"forward": 8, "backward": 4})[(8, 4096, 8192)] \
        == {"forward": "sequential", "backward": "sequential"}


def test_rows_of_two_runs_are_ranked_by_their_fraction_of_a_same_run_copy():
    """A row of a run whose copy was slower can take more seconds and still be the faster kernel."""
    pre = "(preallocated)"
    rows = [dict(_row(f"v2 Blelloch backward {pre}", (8, 64, 64), 1.0), method="blelloch", vs_copy=0.5),
            dict(_row(f"v1 loop backward {pre} K=8", (8, 64, 64), 1.5), method="sequential", prefetch=8,
                 vs_copy=0.6)]
    assert dispatch.table_from_preallocated_rows(rows) == {(8, 64, 64): {"backward": "sequential"}}
    with pytest.raises(ValueError, match="no fraction of a same-run copy"):
        dispatch.table_from_preallocated_rows([_row(f"v2 Blelloch forward {pre}", (1, 8, 1), 1.0)
                                               | {"method": "blelloch"}])


def test_v1_competes_only_at_the_k_the_host_functions_use():
    """The dispatch table's v1 is v1 at scan's default K; rows at another K (or at K = 1 where the check
    wrote none) are no candidates, and a version the rows never timed cannot win."""
    assert dispatch.V1_PREFETCH == {"forward": cs.DEFAULT_PREFETCH_FORWARD, "backward": cs.DEFAULT_PREFETCH_BACKWARD}
    pre = "(preallocated)"
    rows = [_pre(f"v1 loop forward {pre} K=1", (8, 64, 64), 0.5, method="sequential", prefetch=1),
            _pre(f"v1 loop forward {pre} K=8", (8, 64, 64), 3.0, method="sequential", prefetch=8),
            _pre(f"v2 Blelloch forward {pre}", (8, 64, 64), 2.0, method="blelloch"),
            _pre(f"v1 loop backward {pre} K=4", (8, 64, 64), 0.5, method="sequential", prefetch=4),
            _pre(f"v1 loop backward {pre} K=8", (8, 64, 64), 1.0, method="sequential", prefetch=8),
            _pre(f"v2 Blelloch backward {pre}", (8, 64, 64), 2.0, method="blelloch"),
            _pre(f"v1 loop forward {pre}", (1, 64, 1), 0.1, method="sequential"),   # K = 1
            _pre(f"v3 look-back forward {pre}", (1, 64, 1), 1.0, method="chunked", carry="lookback"),
            _pre(f"v3 chunked forward {pre}", (1, 64, 1), 2.0, method="chunked"),
            _pre("v3 chunked forward", (1, 64, 1), 0.01, method="chunked"),            # allocating: unused
            _pre(f"v2 Blelloch backward {pre}", (1, 64, 1), float("nan"), method="blelloch")]
    assert dispatch.table_from_preallocated_rows(rows) == {
        (8, 64, 64): {"forward": "blelloch", "backward": "sequential"},
        (1, 64, 1): {"forward": "chunked lookback"}}
    assert dispatch.table_from_preallocated_rows(rows, {"forward": 1, "backward": 4})[(8, 64, 64)]["forward"] \
        == "sequential"
    no_k8 = [r for r in rows if r.get("prefetch") != 8]   # no backward row at the default K: v2 wins
    assert dispatch.table_from_preallocated_rows(no_k8)[(8, 64, 64)]["backward"] == "blelloch"
    log_rows = [_row("blelloch log forward", (1, 64, 1), 1.0), _row("chunked log forward", (1, 64, 1), 2.0),
                _row("chunked forward", (1, 64, 1), 0.001)]
    assert dispatch.derive_table(rows, log_rows)[(1, 64, 1)] == {"forward": "chunked lookback",
                                                                "log forward": "blelloch"}


def test_the_printed_table_is_the_python_of_the_table(capsys):
    assert gpu.main(["dispatch", *(str(ROOT / f) for f in dispatch.SOURCES), str(ROOT / dispatch.LOG_SOURCE)]) == 0
    printed = capsys.readouterr().out
    namespace = {}
    exec(printed, namespace)
    assert namespace["TABLE"] == dispatch.TABLE


def _row(name, shape, seconds):
    return {"name": name, "shape": list(shape), "seconds": seconds}


def _pre(name, shape, seconds, **fields):
    """A preallocated row of a run whose copy of the same bytes took 1 s."""
    return dict(_row(name, shape, seconds), vs_copy=1.0 / seconds, **fields)


def test_winners_are_the_fastest_timed_version_of_each_kind():
    rows = [_row("copy (same bytes as forward)", (1, 8, 1), 1e-9), _row("torch.cumsum (1-D, same n)", (1, 8, 1), 1e-9),
            _row("sequential forward", (1, 8, 1), 3.0), _row("blelloch forward", (1, 8, 1), 2.0),
            _row("chunked lookback forward", (1, 8, 1), 1.0), _row("chunked forward", (1, 8, 1), 1.5),
            _row("blelloch log forward", (1, 8, 1), 1.0), _row("chunked log forward", (1, 8, 1), float("nan")),
            _row("sequential backward", (4, 2, 64), 1.0), _row("blelloch backward", (4, 2, 64), 2.0)]
    table = dispatch.table_from_rows(rows)
    assert table == {(1, 8, 1): {"forward": "chunked lookback", "log forward": "blelloch"},
                     (4, 2, 64): {"backward": "sequential"}}
    assert dispatch.choose((1, 9, 1), "forward", table) == {"method": "chunked", "carry": "lookback"}
    assert dispatch.choose((3, 3, 50), "backward", table) == {"method": "sequential"}
    with pytest.raises(ValueError, match="has no 'backward' timings"):
        dispatch.choose((1, 8, 1), "backward", {(1, 8, 1): {"forward": "blelloch"}})


def test_choose_takes_the_nearest_benchmarked_shape():
    assert dispatch.choose((8, 2048, 4096)) == {"method": "sequential"}        # many sequences
    assert dispatch.choose((1, 100_000, 3), "backward") == {"method": "lookback"}  # few channels, long T
    assert dispatch.choose((1, 2_000_000, 1)) == {"method": "lookback"}           # one channel, long T
    assert dispatch.choose((2, 50_000, 8), "log forward") == {"method": "blelloch"}


def test_rows_load_from_json_and_from_jsonl(tmp_path):
    rows = [_row("blelloch forward", (1, 8, 1), 2.0), _row("chunked forward", (1, 8, 1), 1.0)]
    (tmp_path / "r.json").write_text(json.dumps({"meta": {}, "rows": rows}))
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert dispatch.load_rows(tmp_path / "r.json") == dispatch.load_rows(tmp_path / "r.jsonl") == rows


def test_bad_arguments_name_themselves(tmp_path):
    with pytest.raises(ValueError, match="kind must be one of"):
        dispatch.choose((1, 8, 1), "sideways")
    with pytest.raises(ValueError, match=r"shape must be \(B, T, C\)"):
        dispatch.choose((1, 8))
    with pytest.raises(ValueError, match=r"shape must be \(B, T, C\)"):
        dispatch.choose((1, 0, 4))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": [1, 2]}))
    with pytest.raises(ValueError, match="must hold the rows"):
        dispatch.load_rows(bad)
    with pytest.raises(SystemExit):
        gpu.main(["dispatch"])
    with pytest.raises(SystemExit):
        gpu.main(["scan", str(bad)])


@pytest.fixture
def chosen(monkeypatch):
    """Records (shape, kind) of every dispatch decision, and what it returned."""
    calls = []
    real = dispatch.choose

    def spy(shape, kind="forward", table=None):
        result = real(shape, kind, table)
        calls.append((tuple(shape), kind, result))
        return result

    monkeypatch.setattr(dispatch, "choose", spy)
    return calls


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_auto_runs_the_tables_choice_and_equals_the_reference(rng, chosen, dtype):
    a, b, h0, dh = problem(rng, (2, 7, 3), dtype)
    h_ref = ref.linear_scan(a, b, h0, method="sequential", backend="numpy")
    assert_close(cs.linear_scan(a, b, h0, method="auto"), h_ref, dtype)
    for g, w in zip(cs.linear_scan_backward(a, h_ref, dh, h0, method="auto"),
                    ref.linear_scan_backward(a, h_ref, dh, h0, method="sequential", backend="numpy")):
        assert_close(g, w, dtype)
    assert [(s, k) for s, k, _ in chosen] == [((2, 7, 3), "forward"), ((2, 7, 3), "backward")]


def test_auto_can_run_a_v3_choice(rng, chosen, monkeypatch):
    """A table whose winner is v3's look-back makes "auto" run it (default K = 8; block 16 with 2 channels is a
    chunk of 64 steps, so T = 150 makes 3 chunks and the look-back walks)."""
    from cuda_kernels import chunked

    monkeypatch.setattr(dispatch, "TABLE", {(1, 1, 1): {k: "chunked lookback" for k in dispatch.KINDS}})
    monkeypatch.setattr(chunked, "LOOKBACK_TRACE", [])
    a, b, h0, _ = problem(rng, (1, 150, 2), np.float64)
    log_a, log_b = np.log(a), np.log(np.abs(b) + 0.1)
    h = cs.linear_scan(a, b, h0, method="auto", block=16)
    assert_close(h, ref.linear_scan(a, b, h0, method="sequential", backend="numpy"), np.float64)
    log_h = cs.log_linear_scan(log_a, log_b, method="auto", block=16)
    assert_close(log_h, ref.log_scan(log_a, log_b, backend="numpy"), np.float64)
    assert [r for _, _, r in chosen] == [{"method": "chunked", "carry": "lookback"}] * 2
    assert len(chunked.LOOKBACK_TRACE) == 2


def test_auto_refuses_v3_keywords(rng):
    a, b, h0, _ = problem(rng, (1, 4, 2), np.float64)
    for kw in ({"steps_per_thread": 2}, {"carry": "lookback"}, {"shuffle": False}, {"chunks_per_block": 1}):
        with pytest.raises(ValueError, match=f"{next(iter(kw))} only apply to method='chunked'; method='auto'"):
            cs.linear_scan(a, b, h0, method="auto", **kw)
    with pytest.raises(ValueError, match=r"method must be one of \['sequential', 'blelloch', 'chunked', 'lookback', 'auto'\]"):
        cs.linear_scan(a, b, h0, method="fastest")


def test_minimal_scan_auto_is_the_sequential_loop_on_the_cpu_and_the_table_on_cuda(rng, chosen):
    a, b, h0, dh = problem(rng, (2, 9, 3), np.float64)
    for backend in ("numpy", "numba"):
        h = ref.linear_scan(a, b, h0, method="auto", backend=backend)
        np.testing.assert_array_equal(h, ref.linear_scan(a, b, h0, method="sequential", backend=backend))
        for g, w in zip(ref.linear_scan_backward(a, h, dh, h0, method="auto", backend=backend),
                        ref.linear_scan_backward(a, h, dh, h0, method="sequential", backend=backend)):
            np.testing.assert_array_equal(g, w)
    assert chosen == []
    h = ref.linear_scan(a, b, h0, method="auto", backend="cuda")
    assert_close(h, ref.linear_scan(a, b, h0, method="sequential", backend="numpy"), np.float64)
    log_a, log_b = np.log(a), np.log(np.abs(b) + 0.1)
    assert_close(ref.log_scan(log_a, log_b, backend="cuda"), ref.log_scan(log_a, log_b, backend="numpy"), np.float64)
    assert [(s, k) for s, k, _ in chosen] == [((2, 9, 3), "forward"), ((2, 9, 3), "log forward")]


def test_a_float64_benchmark_does_not_overwrite_the_float32_file_the_table_cites():
    assert gpu_rows.result_path("r", "NVIDIA H100", "scan").endswith("scan_NVIDIA_H100.json")
    assert gpu_rows.result_path("r", "NVIDIA H100", "scan", "float64").endswith("scan_NVIDIA_H100_float64.json")
