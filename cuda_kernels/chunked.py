"""v3 of the linear-recurrence scan, its host side: options, plans and the launches of both carries.

Glossary as in ``scan.py``: B batch, T time, C channels, arrays (B, T, C) with channels contiguous. The kernels
and what each step of a chunk does are in ``chunked_kernels.py``: a block of CW channel lanes x TW
time-threads scans chunks of L = TW K steps, each thread K consecutive steps in registers, combined inside a
warp by shuffles (or shared memory, ``shuffle=False``, which the simulator runs) and across warps in shared
memory.

A block loops over ``n_iter`` consecutive chunks (a segment, ``plan``). When B x (channel tiles) alone gives
enough blocks (``TARGET_BLOCKS``), a segment is the whole sequence: one pass that reads a and b once and writes
h once (3 array passes, the minimum). With few channels and long T the sequence is split into segments, joined
by one of two carries (keyword ``carry``):

    "reduce"    (the default) as v2 joins its chunks, reduce-then-scan: ``reduce`` writes each segment's total,
                the totals are scanned from h0 by this same scan (recursively, ``_run``), and ``scan``
                reruns each segment from its carried state: 5 array passes.
    "lookback"  a single pass by decoupled look-back (Merrill & Garland 2016): 3 array passes, one chunk per
                block, per-(b, chunk, channel) descriptors zeroed before each launch (``_lookback``).
                Simulator-tested only; the test hooks ``INCLUSIVE_EVERY`` and ``LOOKBACK_TRACE`` are below.

Backward: as v2, the same kernels in reverse time with the coefficient shifted (x_s = (a_{t+1}, dh_t) at
t = T-1-s), and the store phase writes dL/db_t = g_t, dL/da_t = g_t h_{t-1} and dL/dh0 = a_1 g_1; either
carry runs over the chunks in this scan order, from g = 0.
Log space: the same kernels with the log-space operator (``_device.combine_log``), either carry.

The tuning constants (``DEFAULT_STEPS``, ``TARGET_BLOCKS``) are timed only at the values of the committed GPU rows
(``cuda_kernels/README.md``); v3 is slower than v4 and v1 there, so "auto" does not pick it for linear scans.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import cuda

from ._device import zero_int32
from .chunked_kernels import AGGREGATE, INCLUSIVE, WARP, kernels, shared_words  # noqa: F401
from .workspace import alloc, dummy

__all__ = ["forward", "backward", "plan", "tile", "check_options", "shared_bytes", "shuffle_available",
           "DEFAULT_STEPS", "TARGET_BLOCKS", "SHARED_BYTES", "CARRIES", "DEFAULT_CARRY"]

DEFAULT_STEPS = 8          # K, steps per thread
TARGET_BLOCKS = 1024       # split T into segments until the grid has about this many blocks (H100: 132 SMs x 8)
SHARED_BYTES = 48 * 1024   # static shared memory per block
CARRIES = ("reduce", "lookback")   # how segments are joined when T is split across blocks
DEFAULT_CARRY = "reduce"           # the look-back carry is timed too (README); neither wins by much

# Test hooks for the look-back (tests/test_cuda_scan_v3.py); the values here are the ones in use.
# Chunk k publishes its inclusive state only when (k + 1) % INCLUSIVE_EVERY == 0, so that a larger value makes
# look-backs combine several AGGREGATE-only predecessors (the simulator runs blocks one after another, so
# otherwise every look-back stops at its immediate predecessor).
INCLUSIVE_EVERY = 1
# A list: each look-back launch appends (flags, walked) as host arrays, walked[b, k, c] being the number of
# aggregates chunk k's look-back combined. None: nothing is recorded (nor written by the kernel).
LOOKBACK_TRACE = None


def shared_bytes(dtype, block, K, shuffle):
    """Static shared memory of a v3 block, in bytes (the largest of its kernels, ``lookback``): the staging
    arrays sa, sb (``shared_words``), the warp totals wa, wb (one word per thread), the shared-memory warp
    scan's hs_a, hs_b (one word per thread, only without shuffles), the carried state st (one word per channel
    lane, at most min(32, block)) and the look-back's tile id (4 bytes). A block can have at most
    ``SHARED_BYTES`` of static shared memory, or it does not launch."""
    hs = 1 if shuffle else block
    words = 2 * shared_words(block, K) + 2 * hs + 2 * block + min(WARP, block)
    return words * np.dtype(dtype).itemsize + 4


def shuffle_available():
    """Whether ``cuda.shfl_up_sync`` can run here: always on a GPU; in the simulator only where a test has
    supplied an emulation (``tests/test_cuda_scan_v3.py``), since numba's simulator has no warp shuffles."""
    if not numba.config.ENABLE_CUDASIM:
        return True
    from numba.cuda.simulator import kernelapi

    return hasattr(kernelapi.FakeCUDAModule, "shfl_up_sync")


def check_options(dtype, block, steps_per_thread, chunks_per_block, shuffle, carry=None):
    """Validate v3's keywords; returns (K, chunks_per_block or None, shuffle as a bool, carry)."""
    K = DEFAULT_STEPS if steps_per_thread is None else steps_per_thread
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1 or K > 64:
        raise ValueError(f"steps_per_thread must be an integer in [1, 64], got {steps_per_thread!r}")
    if chunks_per_block is not None and (isinstance(chunks_per_block, bool)
                                         or not isinstance(chunks_per_block, (int, np.integer))
                                         or chunks_per_block < 1):
        raise ValueError(f"chunks_per_block must be None or an integer >= 1, got {chunks_per_block!r}")
    if shuffle is None:
        shuffle = not numba.config.ENABLE_CUDASIM
    need = shared_bytes(dtype, block, int(K), bool(shuffle))
    if need > SHARED_BYTES:
        raise ValueError(f"block * steps_per_thread = {block} * {K} needs {need} bytes of shared memory for "
                         f"{np.dtype(dtype).name} (shuffle={bool(shuffle)}), more than a block has "
                         f"({SHARED_BYTES}); use fewer steps per thread or a smaller block")
    if shuffle and not shuffle_available():
        raise ValueError("shuffle=True needs warp shuffles (cuda.shfl_up_sync), which the CUDA simulator does "
                         "not have; use shuffle=False (the shared-memory path) in the simulator")
    if shuffle and block < WARP:
        raise ValueError(f"shuffle=True needs whole warps: block must be >= {WARP}, got {block}")
    carry = DEFAULT_CARRY if carry is None else carry
    if not isinstance(carry, str) or carry not in CARRIES:
        raise ValueError(f"carry must be one of {list(CARRIES)} (or None: {DEFAULT_CARRY!r}), got {carry!r}")
    if carry == "lookback" and chunks_per_block is not None and chunks_per_block != 1:
        raise ValueError(f"carry='lookback' runs one chunk per block (a block holds its chunk on chip between "
                         f"the look-back and the rescan): chunks_per_block must be None or 1, got "
                         f"{chunks_per_block!r}")
    return int(K), (None if chunks_per_block is None else int(chunks_per_block)), bool(shuffle), carry


def tile(C, block, channel_tile):
    """(CW, TW): CW channel lanes (a power of two <= min(32, block)) x TW time-threads."""
    ws = min(WARP, block)
    if channel_tile is None:
        CW = 1
        while CW < min(C, ws):
            CW *= 2
    else:
        if isinstance(channel_tile, bool) or not isinstance(channel_tile, (int, np.integer)) \
                or channel_tile < 1 or channel_tile > ws or channel_tile & (channel_tile - 1):
            raise ValueError(f"channel_tile must be a power of two in [1, min(32, block) = {ws}], "
                             f"got {channel_tile!r}")
        CW = int(channel_tile)
    return CW, block // CW


def plan(shape3, CW, TW, K, chunks_per_block=None, target_blocks=TARGET_BLOCKS):
    """(n_iter, n_seg, n_blocks): chunks per block, segments along T, blocks in the grid.

    With ``chunks_per_block=None`` the sequence is split into the fewest segments that give about
    ``target_blocks`` blocks (one segment, a single pass, when B x channel tiles is already that many)."""
    B, T, C = shape3
    n_chunks = -(-T // (TW * K))
    rows = B * (-(-C // CW))
    if chunks_per_block is None:
        want = max(1, -(-target_blocks // rows))
        n_iter = max(1, -(-n_chunks // want))
    else:
        n_iter = chunks_per_block
    n_seg = -(-n_chunks // n_iter)
    return n_iter, n_seg, rows * n_seg



def _zeroed_int32(workspace, name, shape):
    """An int32 device array of zeros: written on the device (no host copy), from ``workspace`` if given."""
    return zero_int32(alloc(workspace, name, shape, np.int32))


def _lookback(look_back_kernel, shape3, CW, TW, K, dtype, args, outs, workspace=None):
    """Launch the single-pass look-back kernel: one block per (chunk, b, channel tile), descriptors zeroed."""
    B, T, C = shape3
    n_chunks = -(-T // (TW * K))
    n_blocks = n_chunks * B * (-(-C // CW))
    counter = _zeroed_int32(workspace, "lookback counter", (1,))
    flags = _zeroed_int32(workspace, "lookback flags", (B, n_chunks, C))
    agg_a, agg_b = (alloc(workspace, name, (B, n_chunks, C), dtype) for name in ("agg_a", "agg_b"))
    trace = LOOKBACK_TRACE is not None
    if INCLUSIVE_EVERY != 1:  # a look-back that wrongly reads a skipped inclusive state then reads NaN
        inc = cuda.to_device(np.full((B, n_chunks, C), np.nan, dtype=dtype))
    else:
        inc = alloc(workspace, "inc", (B, n_chunks, C), dtype)
    walked = cuda.to_device(np.full((B, n_chunks, C), -1, dtype=np.int32)) if trace else dummy(3, np.int32,
                                                                                                 workspace)
    look_back_kernel[n_blocks, (CW, TW)](*args, *outs, counter, flags, agg_a, agg_b, inc, int(INCLUSIVE_EVERY),
                                         walked, trace)
    if trace:
        LOOKBACK_TRACE.append((flags.copy_to_host(), walked.copy_to_host()))


def _run(op, reverse, x1, x2, h0, has_h0, outs, block, channel_tile, K, chunks_per_block, shuffle, carry,
         workspace):
    """Either direction on (B, T, C) device arrays: x1, x2 = a, b into outs = (h, -, -, -) (forward), or
    x1, x2 = a, dh into outs = (da, h, db, dh0) (``reverse``: the backward, h the forward's output)."""
    B, T, C = x1.shape
    dt = x1.dtype
    CW, TW = tile(C, block, channel_tile)
    reduce, scan, lookback = kernels(dt, CW, TW, K, op, reverse, shuffle)
    n_iter, n_seg, n_blocks = plan(x1.shape, CW, TW, K, chunks_per_block)
    if n_seg > 1 and carry == "lookback":
        # The backward's chunks are in scan (reversed-time) order, from g = 0 (start_state ignores h0 there).
        _lookback(lookback, x1.shape, CW, TW, K, dt, (x1, x2, h0, has_h0), outs, workspace)
        return
    if n_seg > 1:
        tot_a = alloc(workspace, "tot_a", (B, n_seg, C), dt)
        tot_b = alloc(workspace, "tot_b", (B, n_seg, C), dt)
        reduce[n_blocks, (CW, TW)](x1, x2, n_iter, tot_a, tot_b)
        # S_k, the state after segment k: the totals scanned by this same scan (reduce-then-scan), from h0;
        # the backward's totals are in scan (reversed-time) order, so its carries are a forward scan from 0.
        start, has_start = (dummy(2, dt, workspace), False) if reverse else (h0, has_h0)
        carry_d = forward(op, tot_a, tot_b, start, has_start, block, channel_tile, K, None, shuffle, "reduce",
                          alloc(workspace, "carry", tot_a.shape, dt), workspace)
    else:
        carry_d = dummy(3, dt, workspace)
    scan[n_blocks, (CW, TW)](x1, x2, carry_d, h0, has_h0, n_iter, *outs)


def forward(op, a, b, h0, has_h0, block, channel_tile, K, chunks_per_block, shuffle, carry=DEFAULT_CARRY,
            h=None, workspace=None):
    """Device-level v3 forward scan of (B, T, C) device arrays into h (allocated if None); returns h.
    Temporaries come from ``workspace`` (``workspace.Workspace``) when given."""
    h = cuda.device_array(a.shape, dtype=a.dtype) if h is None else h
    d3, d2 = dummy(3, a.dtype, workspace), dummy(2, a.dtype, workspace)
    _run(op, False, a, b, h0, has_h0, (h, d3, d3, d2), block, channel_tile, K, chunks_per_block, shuffle, carry,
         workspace)
    return h


def backward(a, h, dh, h0, has_h0, block, channel_tile, K, chunks_per_block, shuffle, carry=DEFAULT_CARRY,
             grads=None, workspace=None):
    """Device-level v3 backward: the reverse scan of (a_{t+1}, dh_t) into grads = (da, db, dh0) (allocated if
    None); returns them."""
    B, T, C = a.shape
    if grads is None:
        grads = (cuda.device_array((B, T, C), dtype=a.dtype), cuda.device_array((B, T, C), dtype=a.dtype),
                 cuda.device_array((B, C), dtype=a.dtype))
    da, db, dh0 = grads
    _run("linear", True, a, dh, h0, has_h0, (da, h, db, dh0), block, channel_tile, K, chunks_per_block, shuffle,
         carry, workspace)
    return da, db, dh0
