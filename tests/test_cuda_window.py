"""cuda_kernels.window: GRIL's windowed cross-product on the GPU equals the NumPy GRIL cell (simulator).

References: ``minimal.cells.gril.gril_forward_reference`` (the explicit loop) for o, and the cell's own
``forward``/``backward`` in sequential mode (backpropagation through time, one window at a time) for Z and
every gradient. The segmented kernels (forward v3, backward v2) are also compared with forward v2 and
backward v1, computations that share none of their carry or halo logic.
"""
import numba
import numpy as np
import pytest
from numba import cuda

from cuda_kernels import window as cw
from minimal.cells import gril

from test_cuda_scan import TOL, _fast_thread_switching, hardware  # noqa: F401 (an autouse fixture)


def case(rng, B, T, f, w, s, per_feature_beta=False, dtype=np.float64):
    p = gril.init(rng, f, w, per_feature_beta)
    x = rng.standard_normal((B, T, f))
    return x.astype(dtype), {k: v.astype(dtype) for k, v in p.items()}


def args(x, p, w, s):
    return x, p["Q"], p["q"], p["beta"], p["A"], w, s


def assert_close(got, want, dtype, tol=None):
    tol = TOL[dtype] if tol is None else tol
    assert got.shape == want.shape and got.dtype == dtype
    err = float(np.max(np.abs(got.astype(np.float64) - want))) / max(1.0, float(np.max(np.abs(want))))
    assert err <= tol, f"max relative error {err:.3g} > {tol:.0e}"


# (B, T, f, w, s, per-feature beta): T' = 1, 2, 3, 7, 64 windows; overlapping (s < w), tiling (s = w) and
# gapped (s > w) windows; f not a power of two.
CASES = [
    (2, 1, 2, 1, 1, False),    # T' = 1
    (1, 3, 3, 2, 1, True),     # T' = 2
    (2, 7, 3, 3, 2, False),    # T' = 3
    (1, 14, 2, 2, 2, True),    # T' = 7
    (1, 64, 3, 1, 1, False),   # T' = 64
    (1, 22, 3, 1, 3, True),    # T' = 8, gaps between windows
    (2, 5, 1, 3, 1, True),     # T' = 3, f*f = 1 thread fewer than the w*w entries of Q it loads
]


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("B, T, f, w, s, pf", CASES)
def test_forward_equals_the_numpy_cell(rng, B, T, f, w, s, pf, fused):
    x, p = case(rng, B, T, f, w, s, pf)
    o, Z = cw.gril_forward(*args(x, p, w, s), fused=fused, return_Z=True, scan_block=32)
    assert_close(o, gril.gril_forward_reference(*args(x, p, w, s)), np.float64)
    _, cache = gril.forward(p, x, s=s, mode="sequential")
    assert_close(Z, cache.Z, np.float64)


@pytest.mark.parametrize("B, T, f, w, s, pf", CASES)
def test_backward_equals_the_numpy_cell(rng, B, T, f, w, s, pf):
    x, p = case(rng, B, T, f, w, s, pf)
    o, cache = gril.forward(p, x, s=s, mode="sequential")
    do = rng.standard_normal(o.shape)
    dx_ref, grads_ref = gril.backward(p, cache, do)
    _, Z = cw.gril_forward(*args(x, p, w, s), return_Z=True)
    dx, grads = cw.gril_backward(*args(x, p, w, s), Z, do, scan_block=32)
    assert_close(dx, dx_ref, np.float64)
    assert grads.keys() == grads_ref.keys()
    for name in grads:
        assert_close(grads[name], grads_ref[name], np.float64)


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_float32_stays_float32(rng, fused):
    x, p = case(rng, 2, 9, 3, 3, 2, True, dtype=np.float32)
    o, Z = cw.gril_forward(*args(x, p, 3, 2), fused=fused, return_Z=True, scan_block=32)
    x64, p64 = x.astype(np.float64), {k: v.astype(np.float64) for k, v in p.items()}
    assert_close(o, gril.gril_forward_reference(*args(x64, p64, 3, 2)), np.float32)
    do = rng.standard_normal(o.shape).astype(np.float32)
    dx, grads = cw.gril_backward(*args(x, p, 3, 2), Z, do, scan_block=32)
    _, cache = gril.forward(p64, x64, s=2, mode="sequential")
    dx_ref, grads_ref = gril.backward(p64, cache, do.astype(np.float64))
    assert_close(dx, dx_ref, np.float32)
    for name in grads:
        assert_close(grads[name], grads_ref[name], np.float32)


def test_long_sequence_fused_equals_unfused_equals_reference(rng):
    """T = 1025, w = 2: 1024 windows, so the unfused version's scan runs 16 chunks of 64 windows
    (f = 1 keeps each launch at ~1000 elements for the simulator)."""
    x, p = case(rng, 1, 1025, 1, 2, 1)
    ref = gril.gril_forward_reference(*args(x, p, 2, 1))
    o_fused, Z = cw.gril_forward(*args(x, p, 2, 1), fused=True, return_Z=True)
    o_unfused = cw.gril_forward(*args(x, p, 2, 1), fused=False, scan_block=32)
    assert_close(o_fused, ref, np.float64)
    assert_close(o_unfused, ref, np.float64)
    do = rng.standard_normal(ref.shape)
    _, cache = gril.forward(p, x, s=1, mode="parallel", method="sequential", backend="numpy")
    dx_ref, grads_ref = gril.backward(p, cache, do)
    dx, grads = cw.gril_backward(*args(x, p, 2, 1), Z, do, scan_block=32)
    assert_close(dx, dx_ref, np.float64)
    for name in grads:
        assert_close(grads[name], grads_ref[name], np.float64)


def test_gradient_descent_construction_reads_out_one_gd_step(rng):
    """Q = [[0, 0], [1, 0]], q = (1, 0), w = s = 2, A = 1: o_k = Σ_{i<=k} y_i x_i^T x_k (App. A)."""
    n, d = 5, 3
    xs, ys = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    tokens = np.stack([xs, ys], axis=1).reshape(1, 2 * n, d)  # x_1, y_1, x_2, y_2, ...
    Q = np.array([[0.0, 0.0], [1.0, 0.0]])
    q = np.array([1.0, 0.0])
    o = cw.gril_forward(tokens, Q, q, np.ones(1), np.ones((d, d)), 2, 2)
    want = np.stack([sum(np.outer(ys[i], xs[i]) for i in range(k + 1)) @ xs[k] for k in range(n)])
    np.testing.assert_allclose(o[0], want, rtol=1e-12, atol=1e-12)


def test_device_arrays_in_device_arrays_out(rng):
    x, p = case(rng, 2, 7, 3, 3, 2)
    d = [cuda.to_device(v) for v in args(x, p, 3, 2)[:5]]
    o, Z = cw.gril_forward(*d, 3, 2, return_Z=True)
    assert cuda.devicearray.is_cuda_ndarray(o) and cuda.devicearray.is_cuda_ndarray(Z)
    np.testing.assert_array_equal(o.copy_to_host(), cw.gril_forward(*args(x, p, 3, 2)))
    dx, grads = cw.gril_backward(*d, 3, 2, Z, cuda.to_device(np.ones(o.shape)))
    assert cuda.devicearray.is_cuda_ndarray(dx) and all(cuda.devicearray.is_cuda_ndarray(g)
                                                        for g in grads.values())


# Segmented kernels (forward v3, backward v2): (B, T, f, w, s, per-feature beta), each run with one segment
# (v2's single pass), 2 and 3 segments (T' not a multiple of their length) and one window per segment.
SEG_CASES = [
    (1, 12, 2, 3, 1, False),   # T' = 10, s < w: two halo windows per segment in the backward
    (2, 11, 3, 3, 2, True),    # T' = 5, s < w: one halo window
    (2, 9, 1, 2, 1, True),     # T' = 8, f = 1
    (2, 8, 4, 3, 1, False),    # T' = 6, f = 4 (16 threads)
    (1, 12, 2, 3, 3, False),   # T' = 4, tiling windows (s = w)
    (1, 14, 4, 2, 3, True),    # T' = 5, gaps between windows (s > w)
    (1, 10, 3, 1, 3, True),    # T' = 4, w = 1, gaps
]
SEGMENTS = [1, 2, 3, "per window"]


def _segments(choice, T, w, s):
    return gril.n_windows(T, w, s) if choice == "per window" else choice


@pytest.mark.parametrize("segments", SEGMENTS)
@pytest.mark.parametrize("B, T, f, w, s, pf", SEG_CASES)
def test_segmented_forward_equals_the_numpy_cell_and_v2(rng, B, T, f, w, s, pf, segments):
    x, p = case(rng, B, T, f, w, s, pf)
    n = _segments(segments, T, w, s)
    o, Z = cw.gril_forward(*args(x, p, w, s), version=3, segments=n, return_Z=True, scan_block=8)
    assert_close(o, gril.gril_forward_reference(*args(x, p, w, s)), np.float64)
    _, cache = gril.forward(p, x, s=s, mode="sequential")
    assert_close(Z, cache.Z, np.float64)
    o2, Z2 = cw.gril_forward(*args(x, p, w, s), version=2, return_Z=True)
    assert_close(o, o2, np.float64)
    assert_close(Z, Z2, np.float64)
    assert_close(cw.gril_forward(*args(x, p, w, s), version=3, segments=n, scan_block=8), o2, np.float64)


@pytest.mark.parametrize("segments", SEGMENTS)
@pytest.mark.parametrize("B, T, f, w, s, pf", SEG_CASES)
def test_fused_backward_equals_the_numpy_cell_and_v1(rng, B, T, f, w, s, pf, segments):
    x, p = case(rng, B, T, f, w, s, pf)
    o, cache = gril.forward(p, x, s=s, mode="sequential")
    do = rng.standard_normal(o.shape)
    dx_ref, grads_ref = gril.backward(p, cache, do)
    n = _segments(segments, T, w, s)
    dx, grads = cw.gril_backward(*args(x, p, w, s), cache.Z, do, version=2, segments=n, scan_block=8)
    dx1, grads1 = cw.gril_backward(*args(x, p, w, s), cache.Z, do, version=1, scan_block=8)
    assert_close(dx, dx_ref, np.float64)
    assert_close(dx, dx1, np.float64)
    assert grads.keys() == grads_ref.keys()
    for name in grads:
        assert_close(grads[name], grads_ref[name], np.float64)
        assert_close(grads[name], grads1[name], np.float64)


def test_segmented_float32_stays_float32(rng):
    x, p = case(rng, 2, 13, 3, 3, 1, True, dtype=np.float32)
    o, Z = cw.gril_forward(*args(x, p, 3, 1), version=3, segments=4, return_Z=True, scan_block=8)
    x64, p64 = x.astype(np.float64), {k: v.astype(np.float64) for k, v in p.items()}
    assert_close(o, gril.gril_forward_reference(*args(x64, p64, 3, 1)), np.float32)
    do = rng.standard_normal(o.shape).astype(np.float32)
    dx, grads = cw.gril_backward(*args(x, p, 3, 1), Z, do, version=2, segments=4, scan_block=8)
    _, cache = gril.forward(p64, x64, s=1, mode="sequential")
    dx_ref, grads_ref = gril.backward(p64, cache, do.astype(np.float64))
    assert_close(dx, dx_ref, np.float32)
    for name in grads:
        assert_close(grads[name], grads_ref[name], np.float32)


def test_plan_segments():
    # B alone gives TARGET_THREADS threads: one segment, v2's single pass
    assert cw.plan_segments(cw.TARGET_THREADS, 10 ** 6, 1) == (1, 10 ** 6)
    assert cw.plan_segments(cw.TARGET_THREADS // 1024, 10 ** 6, 32) == (1, 10 ** 6)
    # B = 1, f = 32 (1024 threads a block): 256 blocks of 4096 windows for T' = 2^20
    assert cw.plan_segments(1, 2 ** 20, 32) == (256, 4096)
    # B = 64, f = 32: 4 segments
    assert cw.plan_segments(64, 2 ** 14, 32) == (4, 2 ** 12)
    # short sequences: no segment shorter than MIN_SEGMENT windows
    assert cw.plan_segments(1, 3 * cw.MIN_SEGMENT + 1, 4) == (3, cw.MIN_SEGMENT + 1)
    assert cw.plan_segments(1, cw.MIN_SEGMENT - 1, 4) == (1, cw.MIN_SEGMENT - 1)
    # requested counts: L = ceil(T' / segments), n_seg = ceil(T' / L)
    assert cw.plan_segments(1, 10, 2, 4) == (4, 3)
    assert cw.plan_segments(1, 10, 2, 6) == (5, 2)
    assert cw.plan_segments(1, 10, 2, 10) == (10, 1)


def test_versions_agree_with_the_fused_switch(rng):
    """fused=False is v1 and fused=True a fused version; the default forward is v3, the default backward v2."""
    x, p = case(rng, 1, 100, 2, 2, 1)
    a = args(x, p, 2, 1)
    o3 = cw.gril_forward(*a, version=3, segments=3, scan_block=8)   # T' = 99 = 3 x MIN_SEGMENT + 3: 3 segments
    assert cw.plan_segments(1, 99, 2) == (3, 33)
    np.testing.assert_array_equal(cw.gril_forward(*a, scan_block=8), o3)
    np.testing.assert_array_equal(cw.gril_forward(*a, fused=True, scan_block=8), o3)
    np.testing.assert_array_equal(cw.gril_forward(*a, fused=False, scan_block=8),
                                  cw.gril_forward(*a, version=1, scan_block=8))
    np.testing.assert_array_equal(cw.gril_forward(*a, fused=True, version=2),
                                  cw.gril_forward(*a, version=2))
    o, Z = cw.gril_forward(*a, return_Z=True, scan_block=8)
    do = rng.standard_normal(o.shape)
    dx, grads = cw.gril_backward(*a, Z, do, scan_block=8)
    dx2, grads2 = cw.gril_backward(*a, Z, do, version=2, segments=3, scan_block=8)
    np.testing.assert_array_equal(dx, dx2)
    for name in grads:
        np.testing.assert_array_equal(grads[name], grads2[name])


def test_bad_inputs_name_the_argument(rng):
    x, p = case(rng, 2, 7, 3, 3, 2)
    x_, Q, q, beta, A, w, s = args(x, p, 3, 2)
    with pytest.raises(ValueError, match="x must have shape"):
        cw.gril_forward(x[0], Q, q, beta, A, w, s)
    with pytest.raises(ValueError, match="Q must have shape"):
        cw.gril_forward(x, Q[:2, :2], q, beta, A, w, s)
    with pytest.raises(ValueError, match="q must have shape"):
        cw.gril_forward(x, Q, q[:2], beta, A, w, s)
    with pytest.raises(ValueError, match="A must have shape"):
        cw.gril_forward(x, Q, q, beta, A[:2], w, s)
    with pytest.raises(ValueError, match="beta must have shape"):
        cw.gril_forward(x, Q, q, np.ones(2), A, w, s)
    with pytest.raises(ValueError, match="A must have the dtype of x"):
        cw.gril_forward(x, Q, q, beta, A.astype(np.float32), w, s)
    with pytest.raises(ValueError, match="x must have dtype float32 or float64"):
        cw.gril_forward(x.astype(np.int32), Q, q, beta, A, w, s)
    with pytest.raises(ValueError, match="w must be <= T"):
        cw.gril_forward(x[:, :2], Q, q, beta, A, w, s)
    with pytest.raises(ValueError, match="s must be an integer"):
        cw.gril_forward(x, Q, q, beta, A, w, 0)
    with pytest.raises(ValueError, match=r"T must satisfy \(T - w\) % s == 0"):
        cw.gril_forward(x[:, :6], Q, q, beta, A, w, s)
    with pytest.raises(ValueError, match="q must live where x does"):
        cw.gril_forward(x, Q, cuda.to_device(q), beta, A, w, s)
    big = np.zeros((1, 3, 33))
    for version in (2, 3):
        with pytest.raises(ValueError, match="x must have f <= 32"):
            cw.gril_forward(big, Q, q, beta, np.zeros((33, 33)), w, s, version=version)
    with pytest.raises(ValueError, match="x must have f <= 32"):
        cw.gril_forward(big, Q, q, beta, np.zeros((33, 33)), w, s, fused=True)
    for version in (0, 4, True, "3", 3.0):
        with pytest.raises(ValueError, match="version must be 1 .unfused., 2"):
            cw.gril_forward(x, Q, q, beta, A, w, s, version=version)
    with pytest.raises(ValueError, match="fused must be True, False or None"):
        cw.gril_forward(x, Q, q, beta, A, w, s, fused="yes")
    with pytest.raises(ValueError, match="fused=False contradicts version=3"):
        cw.gril_forward(x, Q, q, beta, A, w, s, fused=False, version=3)
    with pytest.raises(ValueError, match="segments applies to version=3 only"):
        cw.gril_forward(x, Q, q, beta, A, w, s, version=2, segments=2)
    for segments in (0, 4, 1.5):   # T' = 3
        with pytest.raises(ValueError, match=r"segments must be an integer in \[1, 3\]"):
            cw.gril_forward(x, Q, q, beta, A, w, s, segments=segments)
    o, Z = cw.gril_forward(x, Q, q, beta, A, w, s, return_Z=True)
    with pytest.raises(ValueError, match="Z must have shape"):
        cw.gril_backward(x, Q, q, beta, A, w, s, Z[:, :1], o)
    with pytest.raises(ValueError, match="do must have shape"):
        cw.gril_backward(x, Q, q, beta, A, w, s, Z, o[:, :1])
    for version in (0, 3, True, 2.0):
        with pytest.raises(ValueError, match="version must be 1 .elementwise"):
            cw.gril_backward(x, Q, q, beta, A, w, s, Z, o, version=version)
    with pytest.raises(ValueError, match="segments applies to version=2 only"):
        cw.gril_backward(x, Q, q, beta, A, w, s, Z, o, version=1, segments=2)
    with pytest.raises(ValueError, match=r"segments must be an integer in \[1, 3\]"):
        cw.gril_backward(x, Q, q, beta, A, w, s, Z, o, segments=4)
    with pytest.raises(ValueError, match="x must have f <= 32"):
        cw.gril_backward(big, Q, q, beta, np.zeros((33, 33)), w, s, np.zeros((1, 1, 33, 33)),
                         np.zeros((1, 1, 33)), version=2)


def test_the_window_count_is_the_cells_own(rng):
    """One definition of T' and of its errors: cuda_kernels.window counts the windows with the library's
    minimal.cells.gril.n_windows, so a bad (T, w, s) gets the NumPy cell's message word for word."""
    assert cw.n_windows is gril.n_windows
    p = gril.init(rng, 3, 2)
    x = rng.standard_normal((1, 6, 3))
    for w, s in ((2, 3), (7, 1)):   # (T - w) % s != 0; w > T
        with pytest.raises(ValueError) as want:
            gril.n_windows(6, w, s)
        Q, q = (p["Q"], p["q"]) if w == 2 else (np.eye(w), np.ones(w))
        with pytest.raises(ValueError) as got:
            cw.gril_forward(x, Q, q, p["beta"], p["A"], w, s)
        assert str(got.value) == str(want.value)


@hardware
@pytest.mark.parametrize("fused", [False, True])
def test_large_problem_on_the_gpu(fused):
    rng = np.random.default_rng(1)
    x, p = case(rng, 8, 4097, 16, 2, 1, True)
    o = cw.gril_forward(*args(x, p, 2, 1), fused=fused)
    assert_close(o, gril.gril_forward_reference(*args(x, p, 2, 1)), np.float64)


@hardware
@pytest.mark.parametrize("B, T, segments", [(1, 2 ** 16 + 2, None), (1, 2 ** 16 + 2, 7), (64, 1026, None)])
def test_large_segmented_forward_and_fused_backward_on_the_gpu(B, T, segments):
    """f = 16, w = 3, s = 1 (overlapping windows, two halo windows per segment); the default plan splits
    B = 1 into 1024 segments of 64 windows and B = 64 into 16 of 64. Sums over 65536 windows in another
    order than the reference's: 1e-11 instead of 1e-13."""
    rng = np.random.default_rng(2)
    x, p = case(rng, B, T, 16, 3, 1, True)
    a = args(x, p, 3, 1)
    o, Z = cw.gril_forward(*a, version=3, segments=segments, return_Z=True)
    o2, Z2 = cw.gril_forward(*a, version=2, return_Z=True)
    assert_close(o, gril.gril_forward_reference(*a), np.float64, 1e-11)
    assert_close(o, o2, np.float64, 1e-11)
    assert_close(Z, Z2, np.float64, 1e-11)
    do = rng.standard_normal(o.shape)
    _, cache = gril.forward(p, x, s=1, mode="parallel", method="sequential", backend="numpy")
    dx_ref, grads_ref = gril.backward(p, cache, do)
    dx, grads = cw.gril_backward(*a, Z, do, version=2, segments=segments)
    dx1, grads1 = cw.gril_backward(*a, Z, do, version=1)
    assert_close(dx, dx_ref, np.float64, 1e-11)
    assert_close(dx, dx1, np.float64, 1e-11)
    for name in grads:
        assert_close(grads[name], grads_ref[name], np.float64, 1e-11)
        assert_close(grads[name], grads1[name], np.float64, 1e-11)


def test_window_benchmark_rows_on_fake_timings():
    from minimal.bench import gpu, gpu_rows

    rows = gpu._window_rows([(2, 5, 3, 2, 1)], np.dtype(np.float64), timer=lambda fn: (fn(), 1e-3)[1],
                              copy=lambda nbytes, timer: 1e-3, scan_block=8)
    assert [r["name"] for r in rows] == ["unfused forward", "fused forward", "segmented forward", "backward",
                                         "fused backward"]
    assert [r["version"] for r in rows] == [1, 2, 3, 1, 2]
    assert rows[0]["bytes"] == gpu_rows.window_bytes(2, 5, 3, 2, 1, 8) == 8 * (2 * 5 * 3 + 2 * 4 * 3)
    assert rows[1]["vs_unfused"] == pytest.approx(1.0)
    assert rows[2]["vs_unfused"] == rows[2]["vs_fused"] == pytest.approx(1.0)
    assert rows[4]["vs_forward"] == rows[4]["vs_backward_v1"] == pytest.approx(1.0)
    assert rows[2]["segments"] == cw.plan_segments(2, 4, 3)[0]
    seconds = iter([1e-3, 2e-3, 4e-3, 1e-3, 8e-3, 2e-3])   # copy, v1, v2, v3 forwards, v1, v2 backwards
    rows = gpu._window_rows([(2, 5, 3, 2, 1)], np.dtype(np.float64), timer=lambda fn: (fn(), next(seconds))[1],
                              copy=lambda nbytes, timer: timer(lambda: None), scan_block=8)
    assert rows[1]["vs_unfused"] == pytest.approx(0.5) and rows[2]["vs_fused"] == pytest.approx(4.0)
    assert rows[2]["vs_unfused"] == pytest.approx(2.0)
    assert rows[3]["vs_forward"] == pytest.approx(2.0)     # v1 backward over the v2 forward, as before
    assert rows[4]["vs_forward"] == pytest.approx(2.0) and rows[4]["vs_backward_v1"] == pytest.approx(4.0)
    if numba.config.ENABLE_CUDASIM:
        with pytest.raises(RuntimeError, match="simulator"):
            gpu.bench_window(quick=True)
