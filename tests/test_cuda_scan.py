"""cuda_kernels.scan: both kernel versions against minimal.scan's NumPy reference, in the CUDA simulator.

The simulator runs one Python thread per CUDA thread, so launches stay near 1000 elements and the
Blelloch tests use small blocks (a chunk of 64 steps when block=32 and C=1), which also sends every length
above 64 through the multi-chunk path (reduce, scan of the chunk totals, rescan).
"""
import sys

import numba
import numpy as np
import pytest
from numba import cuda

from cuda_kernels import scan as cs
from minimal import scan as ref

hardware = pytest.mark.skipif(numba.config.ENABLE_CUDASIM, reason="needs a real CUDA GPU (not the simulator)")

LENGTHS = (1, 2, 3, 7, 64, 1000, 1025)
# Max |error| relative to the reference's largest magnitude. float64: reassociation error only; float32:
# a few ulps times the tree depth.
TOL = {np.float32: 2e-6, np.float64: 1e-13}


@pytest.fixture(autouse=True, scope="module")
def _fast_thread_switching():
    """The simulator's syncthreads waits on Python threads; the default 5 ms GIL switch interval makes
    each barrier cost milliseconds. A shorter interval makes these tests ~4x faster, results unchanged."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


def problem(rng, shape, dtype, h0=True):
    """Decaying coefficients a in [0.5, 1) keep h bounded for any T, as in a trained gated RNN."""
    a = rng.uniform(0.5, 1.0, shape).astype(dtype)
    b = rng.normal(size=shape).astype(dtype)
    dh = rng.normal(size=shape).astype(dtype)
    h0v = rng.normal(size=(shape[0],) + shape[2:]).astype(dtype) if h0 else None
    return a, b, h0v, dh


def assert_close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    scale = max(1.0, float(np.max(np.abs(want))))
    err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale
    assert err <= TOL[dtype], f"max relative error {err:.3g} > {TOL[dtype]:.0e}"


def check_forward_backward(a, b, h0, dh, dtype, **kw):
    """The kernels' forward and backward (``cs.linear_scan`` with kw: method, block, ...) against the NumPy
    reference loop; returns the kernels' (h, (da, db, dh0))."""
    h_ref = ref.linear_scan(a, b, h0, method="sequential", backend="numpy")
    h = cs.linear_scan(a, b, h0, **kw)
    assert_close(h, h_ref, dtype)
    got = cs.linear_scan_backward(a, h_ref, dh, h0, **kw)
    want = ref.linear_scan_backward(a, h_ref, dh, h0, method="sequential", backend="numpy")
    for g, w in zip(got, want):
        assert_close(g, w, dtype)
    return h, got


# ---------------------------------------------------------------------------------------------------------
# v1: one thread per channel


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("T", LENGTHS)
def test_sequential_kernel_equals_reference_loop(rng, T, dtype):
    a, b, h0, dh = problem(rng, (2, T, 3), dtype)
    check_forward_backward(a, b, h0, dh, dtype, method="sequential")


def test_sequential_kernel_covers_more_channels_than_one_block(rng):
    a, b, h0, dh = problem(rng, (3, 2, cs.SEQUENTIAL_BLOCK + 5), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, method="sequential")


# ---------------------------------------------------------------------------------------------------------
# v2: Blelloch


@pytest.mark.parametrize("T", LENGTHS)
def test_blelloch_equals_reference_loop_float64(rng, T):
    a, b, h0, dh = problem(rng, (1, T, 1), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, method="blelloch", block=32)


@pytest.mark.parametrize("T", [7, 1025])
def test_blelloch_equals_reference_loop_float32(rng, T):
    a, b, h0, dh = problem(rng, (1, T, 1), np.float32)
    check_forward_backward(a, b, h0, dh, np.float32, method="blelloch", block=32)


def test_blelloch_three_levels_of_chunks(rng):
    """block=4: chunks of 8 steps; T=100 -> 13 chunk totals -> 2 -> 1, so the carry scan recurses twice."""
    a, b, h0, dh = problem(rng, (1, 100, 1), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, method="blelloch", block=4)


@pytest.mark.parametrize("B, T, C, block", [
    (2, 70, 3, 32),    # channel tile 4 (one idle lane), chunks of 16 steps, 5 chunks
    (1, 5, 33, 64),    # channel tile 32: a second tile with one real channel, chunks of 4 steps
    (3, 21, 5, 16),    # tile 8, chunks of 4, batch 3
])
def test_blelloch_batch_and_channels_not_multiples_of_the_tile(rng, B, T, C, block):
    a, b, h0, dh = problem(rng, (B, T, C), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, method="blelloch", block=block)


def test_blelloch_channel_tile_one_walks_each_channel_alone(rng):
    a, b, h0, dh = problem(rng, (2, 20, 3), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, method="blelloch", block=8, channel_tile=1)


@pytest.mark.parametrize("method", cs.METHODS)
def test_zero_initial_state_and_its_gradient(rng, method):
    """h0=None is h0 = 0, and dh0 = a_1 g_1 is still returned."""
    a, b, _, dh = problem(rng, (2, 9, 3), np.float64, h0=False)
    zeros = np.zeros((2, 3))
    np.testing.assert_array_equal(cs.linear_scan(a, b, None, method, block=8),
                                  cs.linear_scan(a, b, zeros, method, block=8))
    h = cs.linear_scan(a, b, None, method, block=8)
    got = cs.linear_scan_backward(a, h, dh, None, method, block=8)
    want = ref.linear_scan_backward(a, h, dh, None, method="sequential", backend="numpy")
    assert got[2].shape == (2, 3)
    for g, w in zip(got, want):
        assert_close(g, w, np.float64)


def test_trailing_axes_are_channels(rng):
    a, b, h0, dh = problem(rng, (2, 6, 2, 3), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, method="blelloch", block=8)


@pytest.mark.parametrize("method", cs.METHODS)
def test_device_arrays_in_device_arrays_out(rng, method):
    a, b, h0, dh = problem(rng, (2, 11, 3), np.float64)
    d = [cuda.to_device(x) for x in (a, b, h0, dh)]
    h = cs.linear_scan(d[0], d[1], d[2], method, block=8)
    assert cuda.devicearray.is_cuda_ndarray(h)
    np.testing.assert_array_equal(h.copy_to_host(), cs.linear_scan(a, b, h0, method, block=8))
    grads = cs.linear_scan_backward(d[0], h, d[3], d[2], method, block=8)
    assert all(cuda.devicearray.is_cuda_ndarray(g) for g in grads)
    for g, w in zip(grads, cs.linear_scan_backward(a, h.copy_to_host(), dh, h0, method, block=8)):
        np.testing.assert_array_equal(g.copy_to_host(), w)


def test_minimal_scan_dispatches_to_these_kernels(rng):
    a, b, h0, dh = problem(rng, (1, 3, 1), np.float64)  # default block (256 threads): keep it tiny
    for method in ref.METHODS:
        h = ref.linear_scan(a, b, h0, method=method, backend="cuda")
        np.testing.assert_array_equal(h, cs.linear_scan(a, b, h0, method))
        got = ref.linear_scan_backward(a, h, dh, h0, method=method, backend="cuda")
        for g, w in zip(got, cs.linear_scan_backward(a, h, dh, h0, method)):
            np.testing.assert_array_equal(g, w)


def test_minimal_scan_keeps_device_arrays_on_the_device(rng):
    """backend="cuda" takes device arrays (checked on the device for NaN/inf) and returns device arrays."""
    a, b, h0, dh = problem(rng, (2, 5, 3), np.float64)
    d_a, d_b, d_h0, d_dh = (cuda.to_device(x) for x in (a, b, h0, dh))
    h = ref.linear_scan(d_a, d_b, d_h0, method="sequential", backend="cuda")  # v1: cheap in the simulator
    assert cuda.devicearray.is_cuda_ndarray(h)
    h_ref = ref.linear_scan(a, b, h0, method="sequential", backend="numpy")
    assert_close(h.copy_to_host(), h_ref, np.float64)
    grads = ref.linear_scan_backward(d_a, h, d_dh, d_h0, method="sequential", backend="cuda")
    assert all(cuda.devicearray.is_cuda_ndarray(g) for g in grads)
    for g, w in zip(grads, ref.linear_scan_backward(a, h_ref, dh, h0, method="sequential", backend="numpy")):
        assert_close(g.copy_to_host(), w, np.float64)


def test_minimal_scan_checks_device_arrays_like_numpy_ones(rng):
    a, b, h0, dh = problem(rng, (2, 4, 3), np.float64)
    d_a, d_b, d_h0 = (cuda.to_device(x) for x in (a, b, h0))
    nan_b = b.copy()
    nan_b[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="b contains NaN or inf"):
        ref.linear_scan(d_a, cuda.to_device(nan_b), backend="cuda")
    with pytest.raises(ValueError, match="h0 contains NaN or inf"):
        ref.linear_scan(d_a, d_b, cuda.to_device(np.full_like(h0, np.inf)), backend="cuda")
    with pytest.raises(ValueError, match="dh contains NaN or inf"):
        ref.linear_scan_backward(d_a, d_b, cuda.to_device(nan_b), backend="cuda")
    with pytest.raises(ValueError, match="b must be a CUDA device array like a"):
        ref.linear_scan(d_a, b, backend="cuda")
    with pytest.raises(ValueError, match="b must have the same shape as a"):
        ref.linear_scan(d_a, cuda.to_device(np.ascontiguousarray(b[:, :3])), backend="cuda")
    with pytest.raises(ValueError, match="b must have the dtype of a"):
        ref.linear_scan(d_a, cuda.to_device(b.astype(np.float32)), backend="cuda")
    with pytest.raises(ValueError, match="a must have a floating dtype"):
        ref.linear_scan(cuda.to_device(a.astype(np.int64)), d_b, backend="cuda")
    with pytest.raises(ValueError, match=r"h0 must have shape \(B, ...\)"):
        ref.linear_scan(d_a, d_b, d_h0[:1], backend="cuda")
    with pytest.raises(ValueError, match="a must be a numpy.ndarray"):  # only the CUDA backend takes them
        ref.linear_scan(d_a, d_b, backend="numba")
    with pytest.raises(ValueError, match="log_b contains NaN or inf"):  # b = 0: rejected on every backend
        ref.log_scan(d_a, cuda.to_device(np.full_like(b, -np.inf)), backend="cuda")


def test_all_finite_finds_one_bad_entry(rng):
    x = rng.normal(size=(3, 5, 7))
    assert cs.all_finite(cuda.to_device(x)) and cs.all_finite(x) and cs.all_finite(cuda.device_array((0, 3)))
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[2, 4, 6] = bad  # the last entry: the kernel covers the whole array
        assert not cs.all_finite(cuda.to_device(y))


@pytest.mark.parametrize("shape", [(0, 4, 3), (2, 4, 0)], ids=str)
def test_no_elements_give_empty_results(shape):
    a = np.ones(shape)
    h0 = np.ones((shape[0],) + shape[2:])
    assert ref.linear_scan(a, a, h0, backend="cuda").shape == shape
    assert [g.shape for g in ref.linear_scan_backward(a, a, a, h0, backend="cuda")] == [shape, shape, h0.shape]
    assert ref.log_scan(a, a, h0, backend="cuda").shape == shape
    grads = ref.log_scan_backward(a, a, a, a, h0, backend="cuda")
    assert [g.shape for g in grads] == [shape, shape, h0.shape]
    h = cs.linear_scan(cuda.to_device(a), cuda.to_device(a))
    assert cuda.devicearray.is_cuda_ndarray(h) and h.shape == shape


# ---------------------------------------------------------------------------------------------------------
# Log space (Heinsen 2023)


@pytest.mark.parametrize("method, T, dtype", [
    ("sequential", 1025, np.float64), ("blelloch", 1, np.float64), ("blelloch", 7, np.float32),
    ("blelloch", 1025, np.float64)])
def test_log_space_scan_is_log_of_the_linear_scan(rng, method, T, dtype):
    a, b, h0, _ = problem(rng, (1, T, 1), np.float64)
    b = np.abs(b)
    b[:, 0] = 0.0  # log b = -inf: the identity's b, which logaddexp must not turn into NaN
    h0 = np.abs(h0)
    want = np.log(ref.linear_scan(a, b, h0, method="sequential", backend="numpy"))
    with np.errstate(divide="ignore"):
        log_b = np.log(b)
    got = cs.log_linear_scan(np.log(a).astype(dtype), log_b.astype(dtype), np.log(h0).astype(dtype), method,
                             block=32)
    assert got.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, np.max(np.abs(want))))


@pytest.mark.parametrize("method", cs.METHODS)
def test_log_space_without_h0_starts_from_log_zero(rng, method):
    a, b, _, _ = problem(rng, (1, 9, 2), np.float64)
    b = np.abs(b)
    b[:, :2] = 0.0
    with np.errstate(divide="ignore"):
        want = np.log(ref.linear_scan(a, b, None, method="sequential", backend="numpy"))
        got = cs.log_linear_scan(np.log(a), np.log(b), None, method, block=4)
    assert np.all(got[:, :2] == -np.inf)
    np.testing.assert_allclose(got[:, 2:], want[:, 2:], rtol=1e-12)


def log_problem(rng, shape, dtype, h0=True):
    log_a = np.log(rng.uniform(0.5, 1.0, shape)).astype(dtype)
    log_b = np.log(rng.uniform(0.1, 1.0, shape)).astype(dtype)
    log_h0 = np.log(rng.uniform(0.1, 1.0, (shape[0],) + shape[2:])).astype(dtype) if h0 else None
    return log_a, log_b, log_h0, rng.normal(size=shape).astype(dtype)


@pytest.mark.parametrize("method, T, h0, dtype", [
    ("sequential", 1, True, np.float64), ("sequential", 70, False, np.float64), ("blelloch", 1, False, np.float64),
    ("blelloch", 7, True, np.float32), ("blelloch", 70, True, np.float64)])
def test_log_space_backward_equals_the_numpy_backward(rng, method, T, h0, dtype):
    """The shares and a reverse linear scan on the GPU (T = 70 with block 8: chunks of 8, two carry levels)."""
    log_a, log_b, log_h0, dlog_h = log_problem(rng, (2, T, 3), dtype, h0)
    log_h = ref.log_scan(log_a, log_b, log_h0, backend="numpy")
    got = cs.log_linear_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, method, block=8)
    want = ref.log_scan_backward(log_a, log_b, log_h, dlog_h, log_h0, backend="numpy")
    for g, w in zip(got, want):
        assert_close(g, w, dtype)
    if not h0:
        assert np.all(got[2] == 0.0)  # h0 = 0: w_0 = 0


def test_minimal_log_scan_dispatches_to_these_kernels(rng):
    log_a, log_b, log_h0, dlog_h = log_problem(rng, (1, 3, 1), np.float64)  # default block: keep it tiny
    want = ref.log_scan(log_a, log_b, log_h0, backend="numpy")
    d = [cuda.to_device(x) for x in (log_a, log_b, log_h0, dlog_h)]
    log_h = ref.log_scan(d[0], d[1], d[2], backend="cuda")
    assert cuda.devicearray.is_cuda_ndarray(log_h)
    assert_close(log_h.copy_to_host(), want, np.float64)
    grads = ref.log_scan_backward(d[0], d[1], log_h, d[3], d[2], backend="cuda")
    assert all(cuda.devicearray.is_cuda_ndarray(g) for g in grads)
    for g, w in zip(grads, ref.log_scan_backward(log_a, log_b, want, dlog_h, log_h0, backend="numpy")):
        assert_close(g.copy_to_host(), w, np.float64)


# ---------------------------------------------------------------------------------------------------------
# Bad input


def test_bad_inputs_name_the_argument(rng):
    a, b, h0, dh = problem(rng, (2, 5, 3), np.float64)
    with pytest.raises(ValueError, match="method"):
        cs.linear_scan(a, b, h0, method="tree")
    with pytest.raises(ValueError, match="block"):
        cs.linear_scan(a, b, h0, block=48)
    with pytest.raises(ValueError, match="block"):
        cs.linear_scan(a, b, h0, block=2048)
    with pytest.raises(ValueError, match="channel_tile"):
        cs.linear_scan(a, b, h0, block=8, channel_tile=8)
    with pytest.raises(ValueError, match="b must have the shape of a"):
        cs.linear_scan(a, b[:, :4], h0)
    with pytest.raises(ValueError, match="b must have the dtype of a"):
        cs.linear_scan(a, b.astype(np.float32), h0)
    with pytest.raises(ValueError, match="a must have dtype float32 or float64"):
        cs.linear_scan(a.astype(np.int64), b.astype(np.int64))
    with pytest.raises(ValueError, match="a must have shape"):
        cs.linear_scan(a[0, 0], b[0, 0])
    with pytest.raises(ValueError, match="a must have at least one time step"):
        cs.linear_scan(a[:, :0], b[:, :0])
    with pytest.raises(ValueError, match=r"h0 must have shape \(B, ...\)"):
        cs.linear_scan(a, b, h0[:1])
    with pytest.raises(ValueError, match="b must be a numpy.ndarray"):
        cs.linear_scan(a, b.tolist())
    with pytest.raises(ValueError, match="b must live where a does"):
        cs.linear_scan(a, cuda.to_device(b))
    with pytest.raises(ValueError, match="dh must have the shape of a"):
        cs.linear_scan_backward(a, b, dh[:1], h0)
    with pytest.raises(ValueError, match="log_b must have the shape of log_a"):
        cs.log_linear_scan(a, b[:1])
    with pytest.raises(ValueError, match="dlog_h must have the shape of log_a"):
        cs.log_linear_scan_backward(a, b, b, dh[:1], h0)
    with pytest.raises(ValueError, match="log_h0 must have shape"):
        cs.log_linear_scan_backward(a, b, b, dh, h0[:1])
    with pytest.raises(ValueError, match="method"):
        cs.log_linear_scan_backward(a, b, b, dh, h0, method="tree")


# ---------------------------------------------------------------------------------------------------------
# Real hardware only: sizes the simulator cannot reach


@hardware
@pytest.mark.parametrize("shape, dtype", [((1, 1 << 20, 1), np.float32), ((4, 4096, 300), np.float32),
                                          ((2, 100_003, 3), np.float64)])
def test_large_problems_on_the_gpu(shape, dtype):
    rng = np.random.default_rng(1)
    a, b, h0, dh = problem(rng, shape, dtype)
    for block in (256, 1024):
        check_forward_backward(a, b, h0, dh, dtype, method="blelloch", block=block)
    check_forward_backward(a, b, h0, dh, dtype, method="sequential")


# ---------------------------------------------------------------------------------------------------------
# The benchmark: refused in the simulator; its bookkeeping runs on fake timings


def test_benchmark_refuses_the_simulator():
    from minimal.bench import gpu

    if not numba.config.ENABLE_CUDASIM:
        pytest.skip("on real hardware the benchmark runs")
    with pytest.raises(RuntimeError, match="simulator"):
        gpu.bench_scan(sizes=[2 ** 16])
    assert gpu.main(["scan", "--quick"]) == 2


def test_benchmark_regimes_and_bytes():
    from minimal.bench import gpu, gpu_rows

    assert gpu_rows.shapes_for(2 ** 16) == [("few_channels", (1, 2 ** 16, 1))]
    assert gpu_rows.shapes_for(2 ** 28) == [("many_channels", (8, 4096, 8192)),
                                         ("few_channels_long_T", (1, 2 ** 20, 256))]
    for size in gpu.DEFAULT_SIZES:
        for regime, (B, T, C) in gpu_rows.shapes_for(size):
            assert B * T * C == size
            assert regime != "many_channels" or (B * C >= 65536 and 1024 <= T <= 8192)
            assert regime != "few_channels_long_T" or (B * C <= 256 and T >= 2 ** 20)
    assert gpu_rows.scan_bytes("forward", 10, 4) == 120 and gpu_rows.scan_bytes("backward", 10, 8) == 400
    with pytest.raises(ValueError, match="size"):
        gpu_rows.shapes_for(3 * 2 ** 16)
    with pytest.raises(ValueError, match="kind"):
        gpu_rows.scan_bytes("sideways", 10, 4)


def test_benchmark_rows_table_and_json_on_fake_timings(tmp_path):
    """The row builder really runs the kernels (tiny shape) but reads times from a fake clock."""
    import json

    from minimal.bench import gpu, gpu_rows

    rows = gpu._scan_rows([("tiny", (1, 8, 2))], np.dtype(np.float32), timer=lambda fn: (fn(), 1e-3)[1],
                            block=8, copy=lambda nbytes, timer: 2e-3)
    names = [r["name"] for r in rows]
    assert names[0].startswith("copy") and "blelloch backward" in names and "sequential log forward" in names
    fwd = next(r for r in rows if r["name"] == "blelloch forward")
    assert fwd["bytes"] == 3 * 16 * 4 and fwd["vs_copy"] == pytest.approx(2.0)
    assert fwd["GB_per_s"] == pytest.approx(192 / 1e-3 / 1e9)
    table = gpu_rows.format_table(rows)
    assert "blelloch backward" in table and "(1, 8, 2)" in table and len(table.splitlines()) == len(rows) + 2
    path = gpu_rows.write_json(rows, gpu_rows.result_path(str(tmp_path), "NVIDIA H100 80GB HBM3", "scan"), {"x": 1})
    assert path.endswith("scan_NVIDIA_H100_80GB_HBM3.json")
    assert json.load(open(path))["rows"][0]["name"] == names[0]


@hardware
def test_benchmark_quick_run_on_the_gpu(tmp_path):
    from minimal.bench import gpu

    rows = gpu.bench_scan(sizes=[2 ** 16], out_dir=str(tmp_path), repeats=2)
    assert all(r["seconds"] > 0 for r in rows)
