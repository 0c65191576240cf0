"""cuda_kernels.chunked (v3, method="chunked"): against minimal.scan's NumPy reference, in the CUDA simulator.

The simulator has no warp shuffles, so v3's shared-memory warp path (``shuffle=False``, the simulator's
default) carries the tests. The shuffle path runs here too, on an emulated ``cuda.shfl_up_sync`` (fixture
``emulated_shuffles``: a block barrier and an exchange through a per-launch buffer, which is exact because every
thread of a v3 block calls the shuffles the same number of times): it must give the shared path's results bit for
bit, since both apply the same combines in the same order. Only real hardware can show that the real shuffles
and their full-mask synchronisation behave; those tests carry the ``hardware`` mark.

Launches stay small (blocks of 4-64 threads, a few steps per thread) so that every length above one chunk goes
through the segment carry (reduce, a recursive scan of the totals, the rescan), or, with carry="lookback", through
the single-pass look-back (see the comment above its tests for what the simulator can and cannot show of it).
"""
import threading

import numba
import numpy as np
import pytest
from numba import cuda

from cuda_kernels import chunked
from cuda_kernels import scan as cs
from minimal import scan as ref
from test_cuda_scan import _fast_thread_switching, assert_close, hardware, problem  # noqa: F401 (an autouse fixture)
from test_cuda_scan import check_forward_backward as check_scan

simulator = pytest.mark.skipif(not numba.config.ENABLE_CUDASIM, reason="emulates shuffles in the simulator")

LENGTHS = (1, 2, 3, 7, 64, 1000, 1025)


_shfl_lock = threading.Lock()


def _emulated_shfl_up_sync(self, mask, value, delta):
    """``cuda.shfl_up_sync`` for the simulator: lane l gets lane l - delta's value (its own if l < delta).

    Every thread writes its value, a block barrier, every thread reads, a second barrier (so the buffer is
    not overwritten by the next shuffle before everyone has read). Exact for kernels whose threads all call
    the shuffles in the same order, as v3's do; the mask is not checked."""
    thread = threading.current_thread()
    manager = thread._manager
    with _shfl_lock:
        buf = manager.__dict__.setdefault("_shfl_buffer", {})
    tid = thread.thread_id
    buf[tid] = value
    thread.syncthreads()
    out = buf[tid - delta] if tid % 32 >= delta else value
    thread.syncthreads()
    return out


@pytest.fixture
def emulated_shuffles(monkeypatch):
    from numba.cuda.simulator import kernelapi

    monkeypatch.setattr(kernelapi.FakeCUDAModule, "shfl_up_sync", _emulated_shfl_up_sync, raising=False)


def check_forward_backward(a, b, h0, dh, dtype, **kw):
    """v3's forward and backward against the NumPy reference loop; returns v3's (h, (da, db, dh0))."""
    return check_scan(a, b, h0, dh, dtype, method="chunked", **kw)


# ---------------------------------------------------------------------------------------------------------
# the shared-memory path (what the simulator runs by default)


@pytest.mark.parametrize("T", LENGTHS)
def test_chunked_equals_reference_loop_float64(rng, T):
    """block 32 x 4 steps: chunks of 128 steps, so T = 1000 and 1025 take the segment carry."""
    a, b, h0, dh = problem(rng, (1, T, 1), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=32, steps_per_thread=4)


@pytest.mark.parametrize("T", [7, 1025])
def test_chunked_equals_reference_loop_float32(rng, T):
    a, b, h0, dh = problem(rng, (1, T, 1), np.float32)
    check_forward_backward(a, b, h0, dh, np.float32, block=32, steps_per_thread=4)


@pytest.mark.parametrize("B, T, C, block, K", [
    (2, 70, 3, 32, 3),    # 4 lanes (one idle) x 8 time-threads: P = 8 time-threads per warp, chunks of 24
    (1, 5, 33, 64, 2),    # 32 lanes: P = 1 (no combine inside a warp), 2 warps; a second tile of one channel
    (3, 9, 5, 16, 1),     # a block smaller than a warp; one step per thread
    (2, 40, 2, 8, 5),     # odd K, 2 lanes x 4 time-threads
])
def test_chunked_batch_and_channels_not_multiples_of_the_tile(rng, B, T, C, block, K):
    a, b, h0, dh = problem(rng, (B, T, C), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=block, steps_per_thread=K)


@pytest.mark.parametrize("chunks_per_block", [1, 2, 3, 7, None])
def test_chunks_per_block_changes_the_split_not_the_result(rng, chunks_per_block):
    """block 8 x 2 steps: 7 chunks of 16 steps run as 7, 4, 3 or 1 segment(s); one block carrying its state
    through several chunks must agree with the segment carry. chunks_per_block=1 gives 7 totals, whose own
    scan splits again (None: as few segments as give TARGET_BLOCKS blocks), so the carry recurses."""
    a, b, h0, dh = problem(rng, (1, 100, 1), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=8, steps_per_thread=2, chunks_per_block=chunks_per_block)


def test_channel_tile_one_and_trailing_axes(rng):
    a, b, h0, dh = problem(rng, (2, 20, 3), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=8, steps_per_thread=2, channel_tile=1)
    a, b, h0, dh = problem(rng, (2, 6, 2, 3), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, block=8, steps_per_thread=3)


def test_device_arrays_stay_on_the_device(rng):
    a, b, h0, dh = problem(rng, (2, 11, 3), np.float64)
    d = [cuda.to_device(x) for x in (a, b, h0, dh)]
    kw = dict(method="chunked", block=8, steps_per_thread=2)
    h = cs.linear_scan(d[0], d[1], d[2], **kw)
    assert cuda.devicearray.is_cuda_ndarray(h)
    np.testing.assert_array_equal(h.copy_to_host(), cs.linear_scan(a, b, h0, **kw))
    grads = cs.linear_scan_backward(d[0], h, d[3], d[2], **kw)
    assert all(cuda.devicearray.is_cuda_ndarray(g) for g in grads)


@pytest.mark.parametrize("T, dtype", [(1, np.float64), (7, np.float32), (60, np.float64)])
def test_chunked_log_space_forward_and_backward(rng, T, dtype):
    log_a = np.log(rng.uniform(0.5, 1.0, (2, T, 3))).astype(dtype)
    log_b = np.log(rng.uniform(0.1, 1.0, (2, T, 3))).astype(dtype)
    log_h0 = np.log(rng.uniform(0.1, 1.0, (2, 3))).astype(dtype)
    dlog_h = rng.normal(size=(2, T, 3)).astype(dtype)
    kw = dict(method="chunked", block=16, steps_per_thread=3)
    want = ref.log_scan(log_a, log_b, log_h0, backend="numpy")
    got = cs.log_linear_scan(log_a, log_b, log_h0, **kw)
    assert_close(got, want, dtype)
    grads = cs.log_linear_scan_backward(log_a, log_b, want, dlog_h, log_h0, **kw)
    for g, w in zip(grads, ref.log_scan_backward(log_a, log_b, want, dlog_h, log_h0, backend="numpy")):
        assert_close(g, w, dtype)


def test_log_space_identity_b_is_exact(rng):
    """log b = -inf (b = 0), the identity's b: the first steps stay -inf, the rest match the linear scan."""
    a = rng.uniform(0.5, 1.0, (1, 40, 2))
    b = np.abs(rng.normal(size=(1, 40, 2)))
    b[:, :5] = 0.0
    with np.errstate(divide="ignore"):
        want = np.log(ref.linear_scan(a, b, None, method="sequential", backend="numpy"))
        got = cs.log_linear_scan(np.log(a), np.log(b), None, "chunked", block=8, steps_per_thread=2)
    assert np.all(got[:, :5] == -np.inf)
    np.testing.assert_allclose(got[:, 5:], want[:, 5:], rtol=1e-12)


# ---------------------------------------------------------------------------------------------------------
# the shuffle path, on emulated shuffles: the same numbers as the shared-memory path


@simulator
@pytest.mark.parametrize("shape, block, K, chunks", [
    ((1, 300, 1), 32, 4, None),   # one lane: P = 32, five shuffle steps; 3 segments
    ((2, 50, 3), 32, 3, 2),       # 4 lanes: P = 8
    ((1, 5, 40), 64, 2, None),    # 32 lanes: P = 1, two warps combined in shared memory; two tiles
    ((1, 130, 2), 64, 2, 1),      # 2 lanes, two warps: both levels; 3 segments
])
def test_shuffle_path_gives_the_shared_path_bit_for_bit(rng, emulated_shuffles, shape, block, K, chunks):
    a, b, h0, dh = problem(rng, shape, np.float64)
    kw = dict(block=block, steps_per_thread=K, chunks_per_block=chunks)
    h_sh, g_sh = check_forward_backward(a, b, h0, dh, np.float64, shuffle=True, **kw)
    h_sm = cs.linear_scan(a, b, h0, "chunked", shuffle=False, **kw)
    np.testing.assert_array_equal(h_sh, h_sm)
    h_ref = ref.linear_scan(a, b, h0, method="sequential", backend="numpy")
    for g1, g2 in zip(g_sh, cs.linear_scan_backward(a, h_ref, dh, h0, "chunked", shuffle=False, **kw)):
        np.testing.assert_array_equal(g1, g2)


@simulator
def test_shuffle_path_log_space(rng, emulated_shuffles):
    log_a = np.log(rng.uniform(0.5, 1.0, (1, 100, 1)))
    log_b = np.log(rng.uniform(0.1, 1.0, (1, 100, 1)))
    kw = dict(method="chunked", block=32, steps_per_thread=2)
    np.testing.assert_array_equal(cs.log_linear_scan(log_a, log_b, None, shuffle=True, **kw),
                                  cs.log_linear_scan(log_a, log_b, None, shuffle=False, **kw))


def test_emulated_shuffle_moves_values_up_within_each_warp_only(emulated_shuffles):
    """The emulation itself: lane l reads lane l - d of its own warp, lanes l < d keep their own value."""
    if not numba.config.ENABLE_CUDASIM:
        pytest.skip("the emulation is for the simulator")

    @cuda.jit
    def kernel(out, d):
        i = cuda.threadIdx.x
        out[i] = cuda.shfl_up_sync(0xFFFFFFFF, i * 10, d)

    for d in (1, 5, 31):
        out = np.zeros(64, dtype=np.int64)
        kernel[1, 64](out, d)
        lane = np.arange(64) % 32
        np.testing.assert_array_equal(out, np.where(lane >= d, (np.arange(64) - d) * 10, np.arange(64) * 10))


# ---------------------------------------------------------------------------------------------------------
# the single-pass carry by decoupled look-back (carry="lookback")
#
# The simulator runs blocks one after another in launch order, and the atomic counter hands out tile ids in
# that order, so every look-back finds its predecessors fully published: no spin ever waits, and (with every
# chunk publishing INCLUSIVE) each look-back stops at its immediate predecessor. That path combines in the
# same order as one block carrying its state through every chunk, so the two agree bit for bit.
# ``chunked.INCLUSIVE_EVERY`` withholds INCLUSIVE from some chunks, so that look-backs must combine AGGREGATE-only
# predecessors (``test_lookback_past_aggregate_only_predecessors``). Spinning on real concurrency: ``hardware``.

LB = dict(carry="lookback", chunks_per_block=1)
ONE_SEGMENT = dict(chunks_per_block=10 ** 6)   # one block per row carries the state through every chunk


def check_lookback(a, b, h0, dh, dtype, **kw):
    """Look-back forward and backward against the reference loop, the reduce-then-scan carry (tolerance) and
    the one-segment carry (bit for bit)."""
    h, grads = check_forward_backward(a, b, h0, dh, dtype, **LB, **kw)
    h_red = cs.linear_scan(a, b, h0, "chunked", carry="reduce", chunks_per_block=1, **kw)
    assert_close(h, h_red, dtype)
    np.testing.assert_array_equal(h, cs.linear_scan(a, b, h0, "chunked", **ONE_SEGMENT, **kw))
    h_ref = ref.linear_scan(a, b, h0, method="sequential", backend="numpy")
    for g, g1 in zip(grads, cs.linear_scan_backward(a, h_ref, dh, h0, "chunked", **ONE_SEGMENT, **kw)):
        np.testing.assert_array_equal(g, g1)
    return h, grads


@pytest.fixture
def lookback_trace(monkeypatch):
    """Record every look-back launch's (flags, walked); yields the list."""
    trace = []
    monkeypatch.setattr(chunked, "LOOKBACK_TRACE", trace)
    return trace


@pytest.mark.parametrize("T", LENGTHS)
def test_lookback_equals_reference_and_other_carries_float64(rng, lookback_trace, T):
    """block 32 x 4 steps: chunks of 128 steps, so T = 1000 and 1025 take 8 and 9 look-back blocks."""
    a, b, h0, dh = problem(rng, (1, T, 1), np.float64)
    check_lookback(a, b, h0, dh, np.float64, block=32, steps_per_thread=4)
    n_chunks = -(-T // 128)
    assert len(lookback_trace) == (2 if n_chunks > 1 else 0)  # one chunk: the single pass, no look-back
    for flags, walked in lookback_trace:
        assert np.all(flags == chunked.INCLUSIVE) and np.all(walked == 0)


@pytest.mark.parametrize("T", [7, 1025])
def test_lookback_float32(rng, T):
    a, b, h0, dh = problem(rng, (1, T, 1), np.float32)
    check_lookback(a, b, h0, dh, np.float32, block=32, steps_per_thread=4)


@pytest.mark.parametrize("B, T, C, block, K", [
    (2, 70, 3, 32, 3),    # 4 lanes (one idle) x 8 time-threads, 3 chunks of 24
    (1, 5, 33, 64, 2),    # 32 lanes, two tiles (the second of one channel), 2 chunks of 4
    (3, 9, 5, 16, 1),     # 8 lanes x 2 time-threads, 5 chunks of 2 steps
    (1, 100, 1, 8, 2),    # one lane, 7 chunks of 16
])
def test_lookback_batch_and_channels_not_multiples_of_the_tile(rng, B, T, C, block, K):
    a, b, h0, dh = problem(rng, (B, T, C), np.float64)
    check_lookback(a, b, h0, dh, np.float64, block=block, steps_per_thread=K)
    check_lookback(a, b, None, dh, np.float64, block=block, steps_per_thread=K)


def log_problem(rng, shape, dtype):
    log_a = np.log(rng.uniform(0.5, 1.0, shape)).astype(dtype)
    log_b = np.log(rng.uniform(0.1, 1.0, shape)).astype(dtype)
    log_h0 = np.log(rng.uniform(0.1, 1.0, (shape[0],) + shape[2:])).astype(dtype)
    dlog_h = rng.normal(size=shape).astype(dtype)
    return log_a, log_b, log_h0, dlog_h


def check_log_lookback(log_a, log_b, log_h0, dlog_h, dtype, **kw):
    """Log-space look-back forward and backward against the reference and the reduce-then-scan carry."""
    want = ref.log_scan(log_a, log_b, log_h0, backend="numpy")
    got = cs.log_linear_scan(log_a, log_b, log_h0, "chunked", **LB, **kw)
    assert_close(got, want, dtype)
    assert_close(got, cs.log_linear_scan(log_a, log_b, log_h0, "chunked", chunks_per_block=1, **kw), dtype)
    grads = cs.log_linear_scan_backward(log_a, log_b, want, dlog_h, log_h0, "chunked", **LB, **kw)
    for g, w in zip(grads, ref.log_scan_backward(log_a, log_b, want, dlog_h, log_h0, backend="numpy")):
        assert_close(g, w, dtype)


@pytest.mark.parametrize("T, dtype", [(1, np.float64), (7, np.float32), (60, np.float64), (200, np.float32)])
def test_lookback_log_space_forward_and_backward(rng, lookback_trace, T, dtype):
    """block 16 x 3 steps over 3 channels (4 lanes): chunks of 12 steps, 1 to 17 look-back blocks per row."""
    check_log_lookback(*log_problem(rng, (2, T, 3), dtype), dtype, block=16, steps_per_thread=3)
    assert len(lookback_trace) == (0 if T <= 12 else 2)  # forward and backward


def _expected_walk(n_chunks, every):
    """Chunk k's look-back combines the aggregates of k-1, k-2, ... down to the last chunk j < k that
    published INCLUSIVE ((j + 1) % every == 0), or to the start of the sequence."""
    walked = np.zeros(n_chunks, dtype=int)
    for k in range(n_chunks):
        j = k - 1
        while j >= 0 and (j + 1) % every:
            j -= 1
        walked[k] = k - 1 - j
    return walked


@pytest.mark.parametrize("every", [1, 3, 10 ** 6])
def test_lookback_past_aggregate_only_predecessors(rng, monkeypatch, lookback_trace, every):
    """With ``INCLUSIVE_EVERY = every`` only chunks k with (k + 1) % every == 0 publish INCLUSIVE; the others
    stay AGGREGATE-only, and their inclusive slots hold NaN, so a look-back that read one would spread NaN.
    every = 3: look-backs combine up to 2 aggregates; every = 10^6: none publishes, and chunk k combines all k
    predecessors' aggregates back to h0. The flags and walk lengths the kernel leaves show that it did; the
    results, linear, log space and both backwards, show that it combined them right. This proves the
    look-back's arithmetic over AGGREGATE-only predecessors (order of the combines, the reversed operator,
    the start state), not its behaviour under real concurrency (spinning, memory ordering): that needs a GPU."""
    monkeypatch.setattr(chunked, "INCLUSIVE_EVERY", every)
    kw = dict(block=8, steps_per_thread=2)        # 4 lanes x 2 time-threads: chunks of 4 steps
    T = 41                                        # 11 chunks, the last one partial
    a, b, h0, dh = problem(rng, (2, T, 3), np.float64)
    check_forward_backward(a, b, h0, dh, np.float64, **LB, **kw)
    check_log_lookback(*log_problem(rng, (2, T, 3), np.float64), np.float64, **kw)
    assert len(lookback_trace) == 4   # linear forward and backward, log forward and backward
    n_chunks = 11
    k = np.arange(n_chunks)
    want_flags = np.where((k + 1) % every == 0, chunked.INCLUSIVE, chunked.AGGREGATE)
    for flags, walked in lookback_trace:
        assert flags.shape == walked.shape == (2, n_chunks, 3)
        np.testing.assert_array_equal(flags, np.broadcast_to(want_flags[None, :, None], flags.shape))
        np.testing.assert_array_equal(walked, np.broadcast_to(_expected_walk(n_chunks, every)[None, :, None],
                                                              walked.shape))
    assert _expected_walk(n_chunks, every).max() == {1: 0, 3: 2, 10 ** 6: 10}[every]


def test_lookback_device_arrays_stay_on_the_device(rng, lookback_trace):
    a, b, h0, dh = problem(rng, (2, 11, 3), np.float64)
    d = [cuda.to_device(x) for x in (a, b, h0, dh)]
    kw = dict(method="chunked", block=8, steps_per_thread=2, carry="lookback")
    h = cs.linear_scan(d[0], d[1], d[2], **kw)
    assert cuda.devicearray.is_cuda_ndarray(h) and len(lookback_trace) == 1
    np.testing.assert_array_equal(h.copy_to_host(), cs.linear_scan(a, b, h0, "chunked", block=8,
                                                                   steps_per_thread=2, **ONE_SEGMENT))
    grads = cs.linear_scan_backward(d[0], h, d[3], d[2], **kw)
    assert all(cuda.devicearray.is_cuda_ndarray(g) for g in grads) and len(lookback_trace) == 2


# ---------------------------------------------------------------------------------------------------------
# the plan and the options


def test_plan_makes_one_pass_when_channels_fill_the_gpu():
    # (8, 4096, 8192): 8 x 256 tiles of 32 lanes = 2048 blocks >= TARGET_BLOCKS: one segment per tile
    CW, TW = chunked.tile(8192, 256, None)
    assert (CW, TW) == (32, 8)
    n_iter, n_seg, n_blocks = chunked.plan((8, 4096, 8192), CW, TW, 8)
    assert (n_iter, n_seg, n_blocks) == (64, 1, 2048)
    # (1, 2^20, 256): 8 tiles; T is split until the grid has TARGET_BLOCKS blocks
    n_iter, n_seg, n_blocks = chunked.plan((1, 2 ** 20, 256), CW, TW, 8)
    assert n_seg * n_iter * 64 >= 2 ** 20 and n_blocks == 8 * n_seg and n_blocks >= chunked.TARGET_BLOCKS
    # one channel: lanes along time, 2048-step chunks
    CW, TW = chunked.tile(1, 256, None)
    assert (CW, TW) == (1, 256)
    assert chunked.plan((1, 2 ** 20, 1), CW, TW, 8) == (1, 512, 512)
    assert chunked.plan((1, 100, 1), 1, 8, 2, chunks_per_block=3) == (3, 3, 3)


def test_bad_options_name_themselves(rng):
    a, b, h0, dh = problem(rng, (1, 5, 2), np.float64)
    with pytest.raises(ValueError, match="steps_per_thread must be an integer in"):
        cs.linear_scan(a, b, h0, "chunked", steps_per_thread=0)
    with pytest.raises(ValueError, match="chunks_per_block must be None or an integer"):
        cs.linear_scan(a, b, h0, "chunked", chunks_per_block=0)
    with pytest.raises(ValueError, match="needs .* bytes of shared memory"):
        cs.linear_scan(a, b, h0, "chunked", block=1024, steps_per_thread=8)
    with pytest.raises(ValueError, match="channel_tile must be a power of two in"):
        cs.linear_scan(a, b, h0, "chunked", block=8, channel_tile=16)
    for bad in ("scan", "Reduce", 1):
        with pytest.raises(ValueError, match="carry must be one of \\['reduce', 'lookback'\\]"):
            cs.linear_scan(a, b, h0, "chunked", carry=bad)
    for fn in (lambda: cs.linear_scan_backward(a, b, dh, h0, "chunked", carry="lookback", chunks_per_block=2),
               lambda: cs.log_linear_scan(a, b, h0, "chunked", carry="lookback", chunks_per_block=3)):
        with pytest.raises(ValueError, match="carry='lookback' runs one chunk per block.*chunks_per_block must "
                                             "be None or 1"):
            fn()
    for fn in (lambda: cs.linear_scan(a, b, h0, "blelloch", steps_per_thread=2),
               lambda: cs.linear_scan_backward(a, b, dh, h0, "sequential", shuffle=False),
               lambda: cs.log_linear_scan(a, b, h0, "blelloch", chunks_per_block=1),
               lambda: cs.log_linear_scan_backward(a, b, b, dh, h0, "sequential", carry="lookback")):
        with pytest.raises(ValueError, match="only apply to method='chunked'"):
            fn()


@simulator
def test_shuffle_in_the_simulator_is_refused_by_name(rng):
    a, b, h0, _ = problem(rng, (1, 5, 2), np.float64)
    with pytest.raises(ValueError, match="shuffle=True needs warp shuffles .* simulator"):
        cs.linear_scan(a, b, h0, "chunked", shuffle=True)


def test_shuffle_needs_whole_warps(rng, emulated_shuffles):
    a, b, h0, _ = problem(rng, (1, 5, 2), np.float64)
    with pytest.raises(ValueError, match="shuffle=True needs whole warps: block must be >= 32"):
        cs.linear_scan(a, b, h0, "chunked", block=16, shuffle=True)


def test_benchmark_has_v3_rows_on_fake_timings(monkeypatch):
    """``python -m minimal bench scan --backend cuda`` times every method of cuda_kernels.scan.METHODS, then v3
    with carry="lookback" (really launched where T is split: (1, 40, 2) makes 2 chunks of 32 steps)."""
    from minimal.bench import gpu, gpu_rows

    assert "chunked" in cs.METHODS
    trace = []
    monkeypatch.setattr(chunked, "LOOKBACK_TRACE", trace)
    clock = iter(np.arange(1, 100) * 1e-3)   # each timed call takes 1 ms more than the one before
    rows = gpu._scan_rows([("tiny", (1, 8, 2)), ("split", (1, 40, 2))], np.dtype(np.float32),
                            timer=lambda fn: (fn(), next(clock))[1], block=8, copy=lambda nbytes, timer: 2e-3)
    names = [r["name"] for r in rows]
    lb_names = ["chunked lookback forward", "chunked lookback backward", "chunked lookback log forward"]
    assert {"chunked forward", "chunked backward", "chunked log forward"} <= set(names)
    assert names.count(lb_names[0]) == 2 and names[-3:] == lb_names
    assert len(trace) == 3   # forward, backward, log forward of the split case; the tiny one is one chunk
    # per case: every method (v1, v2, v3, v4) x (forward, backward, log) then v3's look-back's three, in that order
    n = 3 * len(cs.METHODS)
    for case, (t0, regime) in enumerate(((0, "tiny"), (n + 3, "split"))):
        by = {r["name"]: r for r in rows if r["regime"] == regime}
        red = [by[f"chunked {k}"]["seconds"] for k in ("forward", "backward", "log forward")]
        lb = [by[n]["seconds"] for n in lb_names]
        assert red == pytest.approx([(t0 + k) * 1e-3 for k in (7, 8, 9)])
        assert lb == pytest.approx([(t0 + n + k) * 1e-3 for k in (1, 2, 3)])
        assert [by[n]["vs_reduce"] for n in lb_names] == pytest.approx([r / t for r, t in zip(red, lb)])
        assert by[lb_names[1]]["vs_forward"] == pytest.approx(lb[1] / lb[0])
        assert by[lb_names[1]]["bytes"] == by["chunked backward"]["bytes"]
        assert by[lb_names[0]]["bytes"] == by[lb_names[2]]["bytes"] == by["chunked forward"]["bytes"]
    assert "vs_reduce" in gpu_rows.format_table(rows).splitlines()[0]


# ---------------------------------------------------------------------------------------------------------
# Real hardware only


@hardware
@pytest.mark.parametrize("shape, dtype", [((1, 1 << 20, 1), np.float32), ((4, 4096, 300), np.float32),
                                          ((8, 1024, 8192), np.float32), ((2, 100_003, 3), np.float64)])
def test_large_problems_on_the_gpu_both_warp_paths(shape, dtype):
    rng = np.random.default_rng(1)
    a, b, h0, dh = problem(rng, shape, dtype)
    # Block 1024: K = 2 in float32; in float64 only K = 1 with shuffles fits in shared memory
    # (chunked.shared_bytes; check_options refuses the rest).
    big = dict(block=1024, steps_per_thread=2 if dtype == np.float32 else 1)
    for kw in (dict(), big, dict(block=64, steps_per_thread=16)):
        paths = [sh for sh in (True, False) if chunked.shared_bytes(
            dtype, kw.get("block", cs.DEFAULT_BLOCK), kw.get("steps_per_thread", chunked.DEFAULT_STEPS), sh)
            <= chunked.SHARED_BYTES]
        h, grads = check_forward_backward(a, b, h0, dh, dtype, shuffle=True, **kw)
        if False not in paths:
            continue
        h2, grads2 = check_forward_backward(a, b, h0, dh, dtype, shuffle=False, **kw)
        np.testing.assert_array_equal(h, h2)  # the same combines in the same order
        for g1, g2 in zip(grads, grads2):
            np.testing.assert_array_equal(g1, g2)


@hardware
def test_shuffle_path_small_shapes_on_the_gpu(rng):
    for T in LENGTHS:
        a, b, h0, dh = problem(rng, (2, T, 5), np.float64)
        for block, K, chunks in ((32, 4, None), (64, 3, 1), (256, 8, 2)):
            check_forward_backward(a, b, h0, dh, np.float64, block=block, steps_per_thread=K,
                                   chunks_per_block=chunks, shuffle=True)


@hardware
@pytest.mark.parametrize("shape, dtype, kw", [
    (((1, 1 << 20, 1)), np.float32, dict()),                               # 512 chunks of 2048 steps
    (((2, 100_003, 3)), np.float64, dict(block=32, steps_per_thread=1)),   # 2 x 12501 tiny chunks: many waits
    (((1, 1 << 18, 256)), np.float32, dict(block=256, steps_per_thread=4)),
])
def test_lookback_spins_on_the_gpu(monkeypatch, shape, dtype, kw):
    """Real concurrency: blocks run at once, so look-backs meet unpublished (spin) and AGGREGATE-only
    predecessors. The results must match the reference (the combine order then varies from run to run, so
    not bit for bit), every look-back must have finished and every chunk published INCLUSIVE."""
    trace = []
    monkeypatch.setattr(chunked, "LOOKBACK_TRACE", trace)
    rng = np.random.default_rng(2)
    a, b, h0, dh = problem(rng, shape, dtype)
    for _ in range(3):
        check_forward_backward(a, b, h0, dh, dtype, carry="lookback", **kw)
    assert len(trace) == 6
    for flags, walked in trace:
        assert np.all(flags == chunked.INCLUSIVE) and np.all(walked >= 0)
