"""cuda_kernels.lookback (v4, method="lookback"): against minimal.scan's NumPy reference, in the CUDA simulator.

v4 is one launch per call: one chunk per block, the thread's K steps in registers, decoupled look-back over the
chunks with epoch flags (never zeroed between launches) and tile ids from blockIdx. The simulator runs blocks
one after another in index order, so every look-back finds its predecessor's INCLUSIVE state and never spins:
what these tests show is the arithmetic (the warp, block and chunk combines, the tails in T and C, the
backward's shifted coefficient and gradient stores, log space), that flags left by earlier launches in a reused
``Workspace`` are never taken for this launch's, and that the shuffle path gives the shared path's numbers bit
for bit (on the emulated ``shfl_up_sync`` of ``test_cuda_scan_v3``). Real concurrency (spinning, AGGREGATE-only
predecessors, memory ordering) and the real shuffles are ``hardware`` tests.
"""
import numba
import numpy as np
import pytest
from numba import cuda

from cuda_kernels import lookback
from cuda_kernels import scan as cs
from minimal import scan as ref
from test_cuda_scan import _fast_thread_switching, assert_close, hardware, problem  # noqa: F401 (an autouse fixture)
from test_cuda_scan import check_forward_backward as check_scan
from test_cuda_scan_v3 import emulated_shuffles, simulator  # noqa: F401 (a fixture)

LENGTHS = (1, 2, 3, 7, 64, 1000, 1025)
V4 = dict(method="lookback")


def check_forward_backward(a, b, h0, dh, dtype, **kw):
    """v4's forward and backward against the NumPy reference loop; returns v4's (h, (da, db, dh0))."""
    return check_scan(a, b, h0, dh, dtype, **dict(V4, **kw))


@pytest.mark.parametrize("T", LENGTHS)
def test_lookback_v4_equals_reference_loop_float64(rng, T):
    # C = 1 and block 32: one channel lane, 32 time-threads of 4 steps, chunks of 128 steps (9 at T = 1025)
    a, b, h0, dh = problem(rng, (1, T, 1), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=32, steps_per_thread=4)


@pytest.mark.parametrize("T", (7, 1000))
def test_lookback_v4_float32_and_no_h0(rng, T):
    a, b, h0, dh = problem(rng, (2, T, 1), np.float32)
    check_forward_backward(a, b, h0, dh, np.float32, block=16, steps_per_thread=5)
    check_forward_backward(a, b, None, dh, np.float32, block=16, steps_per_thread=5)


@pytest.mark.parametrize("B, T, C, block, K", [(2, 37, 3, 8, 2),      # 4 lanes (one idle), 2 time-threads
                                               (1, 40, 33, 64, 1),    # 32 lanes: two channel tiles, the second
                                                                      # with 31 idle lanes
                                               (3, 21, 5, 16, 3),     # 8 lanes, 2 time-threads, 7 chunks
                                               (1, 300, 2, 32, 4)])   # 2 lanes, 16 time-threads in one warp
def test_lookback_v4_batch_and_channels_not_multiples_of_the_tile(rng, B, T, C, block, K):
    a, b, h0, dh = problem(rng, (B, T, C), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=block, steps_per_thread=K)


def test_lookback_v4_log_space_forward_and_backward(rng):
    shape = (2, 300, 2)
    log_a = np.log(rng.uniform(0.5, 1.0, shape))
    log_b = rng.normal(size=shape)
    log_h0 = rng.normal(size=(2, 2))
    dlog_h = rng.normal(size=shape)
    kw = dict(V4, block=16, steps_per_thread=3)
    want = ref.log_scan(log_a, log_b, log_h0, backend="numpy")
    got = cs.log_linear_scan(log_a, log_b, log_h0, **kw)
    assert_close(got, want, np.float64)
    gw = ref.log_scan_backward(log_a, log_b, want, dlog_h, log_h0, backend="numpy")
    gg = cs.log_linear_scan_backward(log_a, log_b, want, dlog_h, log_h0, **kw)
    for g, w in zip(gg, gw):
        assert_close(g, w, np.float64)


@pytest.mark.parametrize("every", (3, 10 ** 6))
def test_lookback_v4_over_aggregate_only_windows(rng, monkeypatch, every):
    """Chunks that publish only their aggregate (``INCLUSIVE_EVERY``): with block 8 (one lane, 8 time-threads:
    windows of 8 chunks) and chunks of 16 steps, T = 1000 has 63 chunks, so with INCLUSIVE from chunk 0 only
    the last look-backs combine 62 aggregates over 8 windows, the sequence's start in the last one. Forward,
    backward, log space, several lanes and batch rows."""
    monkeypatch.setattr(lookback, "INCLUSIVE_EVERY", every)
    a, b, h0, dh = problem(rng, (1, 1000, 1), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=8, steps_per_thread=2)
    a, b, h0, dh = problem(rng, (2, 90, 3), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=8, steps_per_thread=3)   # 4 lanes, 2 time-threads
    shape = (1, 200, 1)
    log_a, log_b, log_h0 = np.log(rng.uniform(0.5, 1.0, shape)), rng.normal(size=shape), rng.normal(size=(1, 1))
    want = ref.log_scan(log_a, log_b, log_h0, backend="numpy")
    assert_close(cs.log_linear_scan(log_a, log_b, log_h0, block=4, steps_per_thread=2, **V4), want, np.float64)


def test_reused_workspace_never_reads_an_earlier_launch_flags(rng):
    """The flags of a reused workspace keep the last launch's values; each launch's epoch is larger, so a
    look-back never takes them for its own. Three launches on one workspace with different inputs (and a
    backward in between, on other descriptors) all equal the reference."""
    ws = cs.Workspace()
    epoch0 = lookback.EPOCH[0]
    shape = (1, 500, 1)
    for _ in range(3):
        a, b, h0, dh = problem(rng, shape, np.float64)
        h = cs.linear_scan(a, b, h0, workspace=ws, block=16, steps_per_thread=4, **V4)
        assert_close(h, ref.linear_scan(a, b, h0, method="sequential", backend="numpy"), np.float64)
        cs.linear_scan_backward(a, h, dh, h0, workspace=ws, block=16, steps_per_thread=4, **V4)
    assert lookback.EPOCH[0] == epoch0 + 6
    flags = [v[0].copy_to_host() for k, v in ws._buffers.items() if k[0] == "v4 descriptors"]
    assert len(flags) == 1   # forward and backward share the (B, n_chunks, C) descriptors: one after the other
    assert np.all(flags[0] == 2 * lookback.EPOCH[0] + 1)   # every chunk of the last launch published INCLUSIVE


def test_device_arrays_stay_on_the_device(rng):
    a, b, h0, dh = problem(rng, (1, 200, 2), np.float64)
    ad, bd, h0d, dhd = (cuda.to_device(x) for x in (a, b, h0, dh))
    h = cs.linear_scan(ad, bd, h0d, block=16, **V4)
    assert cuda.devicearray.is_cuda_ndarray(h)
    grads = cs.linear_scan_backward(ad, h, dhd, h0d, block=16, **V4)
    assert all(cuda.devicearray.is_cuda_ndarray(g) for g in grads)
    assert_close(h.copy_to_host(), ref.linear_scan(a, b, h0, method="sequential", backend="numpy"), np.float64)


@simulator
@pytest.mark.parametrize("shape, block, K", [((1, 1000, 1), 64, 4), ((2, 150, 3), 32, 3), ((1, 70, 40), 64, 1)])
def test_lookback_v4_shuffle_path_gives_the_shared_path_bit_for_bit(rng, emulated_shuffles, shape, block, K):
    a, b, h0, dh = problem(rng, shape, np.float64)
    kw = dict(block=block, steps_per_thread=K)
    h1, g1 = check_forward_backward(a, b, h0, dh, np.float64, shuffle=True, **kw)
    h2, g2 = check_forward_backward(a, b, h0, dh, np.float64, shuffle=False, **kw)
    np.testing.assert_array_equal(h1, h2)
    for x, y in zip(g1, g2):
        np.testing.assert_array_equal(x, y)


def test_lookback_v4_bad_options_name_themselves(rng):
    a, b, h0, dh = problem(rng, (1, 8, 1), np.float64)
    with pytest.raises(ValueError, match="steps_per_thread must be an integer in \\[1, 32\\]"):
        cs.linear_scan(a, b, h0, steps_per_thread=33, **V4)
    for kw in (dict(carry="lookback"), dict(chunks_per_block=1)):
        with pytest.raises(ValueError, match="only apply to method='chunked', got method='lookback'"):
            cs.linear_scan(a, b, h0, **V4, **kw)
    if numba.config.ENABLE_CUDASIM:
        with pytest.raises(ValueError, match="shuffle=True needs warp shuffles"):
            cs.linear_scan(a, b, h0, shuffle=True, **V4)


@hardware
@pytest.mark.parametrize("shape, dtype, kw", [
    ((1, 1 << 20, 1), np.float32, dict()),                                # defaults: 128 / 256 chunks
    ((1, 1 << 20, 1), np.float32, dict(block=1024, steps_per_thread=16)),
    ((1, 1 << 16, 256), np.float32, dict()),                             # 8 channel tiles x 1024 chunks
    ((1, 1 << 18, 16), np.float32, dict(block=128, steps_per_thread=16)),
    ((2, 100_003, 3), np.float64, dict(block=32, steps_per_thread=1)),   # 2 x 12501 tiny chunks: many waits
])
def test_lookback_v4_large_problems_on_the_gpu(shape, dtype, kw):
    """Real concurrency: blocks run at once, so look-backs meet unpublished and AGGREGATE-only predecessors;
    three launches on one workspace (flags never zeroed between them), shuffles and the shared-memory path."""
    rng = np.random.default_rng(3)
    a, b, h0, dh = problem(rng, shape, dtype)
    ws = cs.Workspace()
    for shuffle in (True, True, False):
        check_forward_backward(a, b, h0, dh, dtype, shuffle=shuffle, workspace=ws, **kw)


def test_round2_table_reads_the_rows_it_wrote(tmp_path):
    """``python -m minimal.bench.gpu_round2 table``: the issue's rows from the scan and window rows as the GPU run
    writes them (fake numbers): the best v4 row per case, its goal, the phases, the failed variants."""
    import json

    from minimal.bench import gpu_round2 as g2, gpu_rows

    def row(name, shape, seconds, copy_s, **extra):
        return dict(gpu_rows.make_row(name, seconds, 10, copy_s), shape=list(shape), dtype="float32", **extra)

    few, one = g2.FEW256, g2.ONE
    rows = [row("torch.cumsum (1-D, same n)", few, 1.0, 0.7),
            row("v2 Blelloch forward (preallocated)", few, 4.0, 1.0, method="blelloch"),
            row("v4 look-back forward (preallocated) block=256 K=32", few, 1.2, 1.0, vs_torch_copy=0.7),
            row("v4 look-back forward (preallocated) block=256 K=8", few, 2.0, 1.0),
            row("v4 look-back forward (preallocated) block=256 K=16", one, 2e-4, 1e-4),
            row("torch Heinsen log scan (1-D)", one, 1e-4, 1e-4),
            {"name": "phases: v4 forward", "seconds": 2e-4, "total_ms": 0.2, "kernels_ms": 0.05, "shape": list(one),
             "kernels": [{"kernel": "scan", "grid": "(256, 1, 1)", "block": "(1, 256, 1)", "ms": 0.05}]},
            {"name": "v4 look-back backward (preallocated) block=256 K=16", "seconds": float("nan"),
             "shape": list(one), "error": "boom"}]
    (tmp_path / "scan_rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = g2.tables(str(tmp_path))
    assert ("| few channels (1, 1048576, 256) forward | v4 look-back forward (preallocated) block=256 K=32: 0.833 | "
            "0.700 (1200000.0 us) | torch.cumsum 0.700 | - | >= 0.8 and >= torch.cumsum | yes |") in text
    assert "| one channel (1, 1048576, 1) forward | v4 look-back forward (preallocated) block=256 K=16" in text
    assert "time <= torch Heinsen | no |" in text
    assert "phases: v4 forward (defaults): call 200.0 us, kernels: scan 50.0 us" in text
    assert "1 failed variant(s)" in text and "boom" in text
