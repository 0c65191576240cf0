"""numba.cuda kernels for the linear recurrence h_t = a_t * h_{t-1} + b_t, forward and backward.

Glossary: B batch, T time, C channels; arrays are (B, T, C) with channels contiguous (time on axis 1, as in
``minimal.scan``). Trailing axes beyond the third are flattened into C and restored on return.

Kernel versions (kept side by side, each tested against the NumPy reference before it is timed; the kernels of
v1 are in ``sequential.py``, of v2 in ``blelloch.py`` (its host side, the tiles and the reduce-then-scan passes, in
``blelloch_host.py``), of v3 in ``chunked_kernels.py`` (its host side in ``chunked.py``), v4 in ``lookback.py``,
the device functions they share in ``_device.py``, the checks of host arrays in ``arrays.py``, the log-space
backward's elementwise kernels in ``log_shares.py``; this module is the entry point of all four: the checks of
the options, v1's launch, and the steps of the backward and of log space):

    v1 "sequential"  one thread per (b, c) runs the loop over t. Consecutive threads take consecutive
                     channels, so every load of a time step is coalesced. O(T) steps, no synchronisation.
                     ``prefetch=K`` (software pipelining): the thread loads the next K steps of a and b into
                     registers before it uses the first, so K loads per array are in flight instead of one
                     (default K = 8 forward and backward, measured on an H200; ``prefetch=1`` is the plain loop).
    v2 "blelloch"    the work-efficient scan (Blelloch 1990; GPU Gems 3, ch. 39) over the pairs (a_t, b_t)
                     with the associative operator
                         (a1, b1) ∘ (a2, b2) = (a1 a2, a2 b1 + b2),      identity (1, 0),
                     so that the inclusive prefix (A_t, H_t) = x_1 ∘ ... ∘ x_t gives h_t = A_t h_0 + H_t.
                     A block of (CW, TW) threads scans a chunk of L = 2 TW time steps of CW channels in
                     shared memory: up-sweep (reduce), root := identity, down-sweep (exclusive prefix), then
                     each thread combines the prefix with its own two elements. Shared indices are padded by
                     one word every 32 (``pad``) so that the tree's strided accesses avoid bank conflicts.
                     Sequences longer than one chunk take three passes (reduce-then-scan):
                         1. ``reduce``: each block writes its chunk total (A_k, H_k) -> (B, n_chunks, C);
                         2. the chunk totals are themselves scanned (recursively, the same kernels) from h0,
                            giving the state S_k at the end of every chunk;
                         3. ``scan``: each block rescans its chunk starting from S_{k-1} and writes h.
                     Pass 3 re-reads a and b instead of storing per-chunk prefixes: 2 + 3 array passes
                     instead of 2 + 2 + 3.
    v3 "chunked"     (``chunked.py``, opt-in) each thread scans K consecutive steps in registers, warps combine
                     the threads' pairs with ``cuda.shfl_up_sync`` (or through shared memory: ``shuffle=False``,
                     which the simulator runs), blocks combine their warps' totals, and a block runs several
                     chunks in turn carrying the state, so that with enough channels one pass reads a, b and
                     writes h once; long sequences with few channels are split across blocks and joined
                     as in v2 (reduce-then-scan) or in one pass by decoupled look-back (``carry``).
    v4 "lookback"    (``lookback.py``, opt-in) the single pass for few channels: one launch, one chunk per block,
                     each thread's K steps loaded straight into registers, decoupled look-back with epoch flags
                     and tile ids from ``blockIdx`` (no zeroing launches, no tile counter); takes
                     ``steps_per_thread`` and ``shuffle`` as v3 does.

Backward (vector-Jacobian product), the same kernels run in reverse time with the coefficient shifted:
    g_t = dh_t + a_{t+1} g_{t+1}  (g_{T+1} = 0),  dL/db_t = g_t,  dL/da_t = g_t h_{t-1},  dL/dh0 = a_1 g_1.
The reversal and the shift are index arithmetic in the loader; no reversed copy is made, and dL/da and
dL/dh0 are written by the same pass that writes g.

Log space (Heinsen 2023, "Efficient parallelization of a ubiquitous sequential computation", used by
minGRU/minLSTM, Feng et al. 2024 App. B): for positive a, b, h0 the same tree runs on (log a, log b) with
    (la1, lb1) ∘ (la2, lb2) = (la1 + la2, logaddexp(la2 + lb1, lb2)),     identity (0, -inf),
returning log h (``log_linear_scan``). Its backward (``log_linear_scan_backward``) is a linear reverse scan:
with l_t = log h_t, the shares w_t = exp(log a_t + l_{t-1} - l_t) = a_t h_{t-1} / h_t and
v_t = exp(log b_t - l_t) = b_t / h_t (both in [0, 1], formed from differences of logs), the adjoint
G_t = dlog_h_t + w_{t+1} G_{t+1} is ``linear_scan_backward`` with coefficients w, and
dlog_a_t = w_t G_t, dlog_b_t = v_t G_t, dlog_h0 = w_0 G_0 (as ``minimal.scan.log_scan_backward``).
The kernels accept log b = -inf (b = 0): it is the identity's b, which the tree needs for padding. The
public ``minimal.scan.log_scan`` rejects it for every backend (NaN or inf in log_b is a ValueError there):
minGRU/minLSTM always have b > 0, and the backward's share v = b / h would be 0 / 0 where h is 0 too.

Host functions accept NumPy arrays (copied to the device, result copied back) or numba device arrays
(anything with ``__cuda_array_interface__``, or the simulator's arrays; results stay on the device).
Arrays with no elements (B = 0 or C = 0) give empty results without a launch.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ._device import REGISTERS_PER_BLOCK, kernel  # noqa: F401 - in __all__
from .arrays import (all_finite, check_block, check_inputs, check_out, empty, empty_grads, grad_shapes, grads_3d,
                     grads_out, is_device, shape3, to_device, to_device_3d)
from .blelloch_host import blelloch, blelloch_forward
from .log_shares import log_share_kernels
from .sequential import SEQUENTIAL_BLOCK, sequential_kernels
from .workspace import Workspace, alloc, check_workspace, dummy

__all__ = ["linear_scan", "linear_scan_backward", "log_linear_scan", "log_linear_scan_backward", "is_device",
           "to_device", "all_finite", "kernel", "Workspace", "METHODS", "DEFAULT_BLOCK", "DEFAULT_PREFETCH_FORWARD",
           "DEFAULT_PREFETCH_BACKWARD",
           "REGISTERS_PER_BLOCK"]

METHODS = ("sequential", "blelloch", "chunked", "lookback")
DEFAULT_BLOCK = 256          # threads per block
# v1's K, the steps of its inputs each thread loads ahead into registers (``prefetch``), from the H200 runs of
# 2026-11-26 (float32, preallocated outputs, fraction of a same-run device copy of the same bytes at
# (8, 4096, 8192) / (8, 1024, 8192)):
#     forward   K = 1: 0.364 / 0.444,  K = 2: 0.433 / 0.516,  K = 4: 0.683 / 0.749,  K = 8: 0.835 / 0.868
#               (``bench/results/gpu_check_H200_2026-11-26_scan_rows.jsonl``)
#     backward  K = 1: 0.446 / 0.491,  K = 4: 0.795 / 0.808,  K = 8: 0.903 / 0.898
#               (``bench/results/gpu_check2_H200_2026-11-26_v1_rows.jsonl``, bench/gpu_check2.sh; the K = 4 rows
#               of the first run gave 0.792 / 0.799)
# K = 1 (``prefetch=1``) stays the plain loop, the teaching version.
DEFAULT_PREFETCH_FORWARD = 8
DEFAULT_PREFETCH_BACKWARD = 8


def _check_method(method):
    if method not in METHODS + ("auto",):
        raise ValueError(f"method must be one of {list(METHODS) + ['auto']}, got {method!r}")


def _resolve(method, shape, kind, v3_options, prefetch=None):
    """method="auto" -> (method, carry) from ``dispatch.choose`` for this shape; other methods unchanged.
    v3's tuning keywords belong to an explicit method="chunked", so "auto" refuses them."""
    if method != "auto":
        return method, v3_options["carry"]
    if prefetch is not None:
        raise ValueError("prefetch only applies to method='sequential'; method='auto' picks the version and its "
                         "options from the dispatch table (cuda_kernels/dispatch.py)")
    given = [k for k, v in v3_options.items() if v is not None]
    if given:
        raise ValueError(f"{', '.join(given)} only apply to method='chunked'; method='auto' picks the version "
                         f"and its options from the dispatch table (cuda_kernels/dispatch.py)")
    from . import dispatch

    chosen = dispatch.choose(shape3(shape), kind) if 0 not in shape else {"method": "blelloch"}
    return chosen["method"], chosen.get("carry")


def _check_prefetch(method, prefetch, default):
    """v1's K (steps loaded ahead): an integer in [1, 16], only with method="sequential" (called after
    method="auto" is resolved; ``_resolve`` refuses prefetch with "auto"); None gives ``default``."""
    if method != "sequential":
        if prefetch is not None:
            raise ValueError(f"prefetch only applies to method='sequential' (v1), got method={method!r}")
        return None
    K = default if prefetch is None else prefetch
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or not 1 <= K <= 16:
        raise ValueError(f"prefetch must be an integer in [1, 16] (steps of a and b loaded ahead), got {prefetch!r}")
    return int(K)


def _check_v3(method, dtype, block, steps_per_thread, chunks_per_block, shuffle, carry, kind="forward"):
    """v3's options as (K, chunks_per_block, shuffle, carry), v4's as (K, shuffle), or None for v1 / v2 (which
    take none of them)."""
    if method == "lookback":
        given = [k for k, v in (("chunks_per_block", chunks_per_block), ("carry", carry)) if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} only apply to method='chunked', got method={method!r}")
        from . import lookback

        return lookback.check_options(block, steps_per_thread, shuffle,
                                      "backward" if kind == "backward" else "forward")[1:]
    if method != "chunked":
        given = [k for k, v in (("steps_per_thread", steps_per_thread), ("chunks_per_block", chunks_per_block),
                                ("shuffle", shuffle), ("carry", carry)) if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} only apply to method='chunked', got method={method!r}")
        return None
    from . import chunked

    return chunked.check_options(dtype, block, steps_per_thread, chunks_per_block, shuffle, carry)


def _prepare(kind, names, arrays, h0, out, out_names, method, block, v3_options, prefetch, workspace):
    """The checks of every host function, in this order: method, block, the inputs (``names[:-1]`` for
    ``arrays``, ``names[-1]`` for h0), out=, "auto" resolved for ``kind``, v3's options, v1's K, workspace.
    Returns (on_device, shape, out, method, block, v3, K1)."""
    _check_method(method)
    block = check_block(block)
    on_device, shape = check_inputs(names[:-1], arrays, names[-1], h0)
    dtype = arrays[0].dtype
    out = check_out(out, out_names, (shape,) if len(out_names) == 1 else grad_shapes(shape), dtype, on_device)
    method, carry = _resolve(method, shape, kind, v3_options, prefetch)
    v3 = _check_v3(method, dtype, block, v3_options["steps_per_thread"], v3_options["chunks_per_block"],
                   v3_options["shuffle"], carry, kind)
    K1 = _check_prefetch(method, prefetch, DEFAULT_PREFETCH_BACKWARD if kind == "backward"
                         else DEFAULT_PREFETCH_FORWARD)
    check_workspace(workspace)
    return on_device, shape, out, method, block, v3, K1


def _v3_options(steps_per_thread, chunks_per_block, shuffle, carry):
    return {"steps_per_thread": steps_per_thread, "chunks_per_block": chunks_per_block, "shuffle": shuffle,
            "carry": carry}


def _scan(op, names, a, b, h0, method, block, channel_tile, steps_per_thread=None, chunks_per_block=None,
          shuffle=None, carry=None, prefetch=None, out=None, workspace=None):
    on_device, shape, out, method, block, v3, K1 = _prepare(
        "forward" if op == "linear" else "log forward", names, (a, b), h0, out, ("h",), method, block,
        _v3_options(steps_per_thread, chunks_per_block, shuffle, carry), prefetch, workspace)
    if 0 in shape:
        return out[0] if out is not None else empty(shape, a.dtype, on_device)
    s3 = shape3(shape)
    a_d, b_d = to_device_3d(a, s3), to_device_3d(b, s3)
    has_h0 = h0 is not None
    h0_d = to_device_3d(h0, (s3[0], s3[2])) if has_h0 else dummy(2, a.dtype, workspace)
    h = out[0].reshape(s3) if out is not None else cuda.device_array(s3, dtype=a.dtype)
    if method == "sequential":
        forward, _ = sequential_kernels(a.dtype, op, K1)
        n = s3[0] * s3[2]
        forward[-(-n // SEQUENTIAL_BLOCK), SEQUENTIAL_BLOCK](a_d, b_d, h0_d, has_h0, h)
    elif method == "chunked":
        from . import chunked

        chunked.forward(op, a_d, b_d, h0_d, has_h0, block, channel_tile, *v3, h=h, workspace=workspace)
    elif method == "lookback":
        from . import lookback

        lookback.forward(op, a_d, b_d, h0_d, has_h0, block, *v3, h=h, workspace=workspace)
    else:
        blelloch_forward(op, a_d, b_d, h0_d, has_h0, block, channel_tile, h, workspace)
    if out is not None:
        return out[0]
    h = h.reshape(shape)
    return h if on_device else h.copy_to_host()


def linear_scan(a, b, h0=None, method="blelloch", *, block=DEFAULT_BLOCK, channel_tile=None,
                steps_per_thread=None, chunks_per_block=None, shuffle=None, carry=None, prefetch=None, out=None,
                workspace=None):
    """h_t = a_t * h_{t-1} + b_t along axis 1, h_0 = h0 (zeros if None), on the GPU.

    Args:
        a, b: (B, T, ...) float32 or float64, one shape and dtype; NumPy or device arrays.
        h0: (B, ...) or None.
        method: "sequential" (v1, one thread per channel), "blelloch" (v2, shared-memory tree scan),
            "chunked" (v3, ``chunked.py``: K steps per thread in registers, a warp-level combine; opt-in,
            slower than v4 on the committed GPU rows), "lookback" (v4, ``lookback.py``: one launch, single pass by decoupled
            look-back, K steps per thread in registers; takes steps_per_thread (default 32 forward, 16
            backward) and shuffle; the channel tile is min(C, 32) rounded up to a power of two), or "auto":
            the benchmark's fastest version for the nearest benchmarked shape (``dispatch.py``; then v3's and
            v4's keywords are refused).
        block: threads per block for v2 and v3, a power of two in [2, 1024] (a v2 chunk is
            2 * block / channel_tile time steps, a v3 chunk steps_per_thread * block / channel_tile); small
            values exercise the multi-chunk path cheaply in the simulator.
        channel_tile: channels per block for v2 (power of two < block; default min(C, 32, block / 2) rounded
            up to a power of two) and v3 (power of two <= min(32, block); default min(C, 32, block) rounded up).
        steps_per_thread, chunks_per_block, shuffle, carry: v3 only (an error with another method).
            steps_per_thread: K, consecutive steps each thread scans in registers (default 8).
            chunks_per_block: chunks of K * block / channel_tile steps one block runs in turn, carrying the
                state; None splits T just enough to give ``chunked.TARGET_BLOCKS`` blocks.
            shuffle: combine inside a warp with ``cuda.shfl_up_sync`` (True) or through shared memory
                (False); None: True on a GPU, False in the simulator (which has no shuffles).
            carry: how the segments are joined when T is split across blocks: "reduce" (None, the default;
                reduce-then-scan, 5 array passes) or "lookback" (single pass with decoupled look-back,
                3 passes, one chunk per block, so chunks_per_block must be None or 1; simulator-tested only).
        prefetch: v1 only (an error with another method): K, the steps of a and b each thread loads into
            registers before it uses the first (software pipelining), an integer in [1, 16]; default
            ``DEFAULT_PREFETCH_FORWARD`` = 8 (0.835 / 0.868 of a copy on an H200, K = 1: 0.364 / 0.444; the
            numbers and their files are beside the constant); the backward's default is
            ``DEFAULT_PREFETCH_BACKWARD`` = 8 (0.903 / 0.898, K = 4: 0.795 / 0.808). ``prefetch=1`` is the plain
            loop, the teaching version.
        out: a C-contiguous device array of h's shape and dtype to write h into (inputs on the device), or
            None for a fresh one.
        workspace: a ``Workspace`` whose buffers the temporaries reuse (nothing allocated on a repeated call
            with ``out``), or None.
    Returns:
        h: (B, T, ...), on the device if ``a`` was a device array (``out`` if given), else a NumPy array.
    """
    return _scan("linear", ("a", "b", "h0"), a, b, h0, method, block, channel_tile, steps_per_thread,
                 chunks_per_block, shuffle, carry, prefetch, out, workspace)


def log_linear_scan(log_a, log_b, log_h0=None, method="blelloch", *, block=DEFAULT_BLOCK, channel_tile=None,
                    steps_per_thread=None, chunks_per_block=None, shuffle=None, carry=None, prefetch=None,
                    out=None, workspace=None):
    """log h for h_t = a_t h_{t-1} + b_t with positive a, b, h0, computed in log space (Heinsen 2023).

    Args:
        log_a, log_b: (B, T, ...) float32 or float64. log_b = -inf (b = 0) is computed correctly here (it is
            the identity's b), but ``minimal.scan.log_scan`` rejects it, as for every backend.
        log_h0: (B, ...) or None (h0 = 0, i.e. log h0 = -inf).
        method, block, channel_tile, steps_per_thread, chunks_per_block, shuffle, carry, prefetch, out,
            workspace: as in ``linear_scan``.
    Returns:
        log_h: (B, T, ...), where the inputs live.
    """
    return _scan("log", ("log_a", "log_b", "log_h0"), log_a, log_b, log_h0, method, block, channel_tile,
                 steps_per_thread, chunks_per_block, shuffle, carry, prefetch, out, workspace)


def _backward_device(a, h, dh, h0, has_h0, method, block, channel_tile, v3=None, K1=None, grads=None,
                     workspace=None):
    """Device-level VJP of (B, T, C) device arrays into grads = (da, db, dh0) ((B, T, C), (B, T, C), (B, C);
    allocated if None); returns them."""
    B, T, C = a.shape
    if grads is None:
        grads = (cuda.device_array((B, T, C), dtype=a.dtype), cuda.device_array((B, T, C), dtype=a.dtype),
                 cuda.device_array((B, C), dtype=a.dtype))
    if method == "chunked":
        from . import chunked

        return chunked.backward(a, h, dh, h0, has_h0, block, channel_tile, *v3, grads=grads, workspace=workspace)
    if method == "lookback":
        from . import lookback

        return lookback.backward(a, h, dh, h0, has_h0, block, *v3, grads=grads, workspace=workspace)
    if method == "sequential":
        _, backward = sequential_kernels(a.dtype, "linear", DEFAULT_PREFETCH_BACKWARD if K1 is None else K1)
        backward[-(-B * C // SEQUENTIAL_BLOCK), SEQUENTIAL_BLOCK](a, h, dh, h0, has_h0, *grads)
        return grads
    da, db, dh0 = grads
    blelloch("linear", True, a, dh, h0, has_h0, (da, h, db, dh0), block, channel_tile, workspace)
    return grads



def linear_scan_backward(a, h, dh, h0=None, method="blelloch", *, block=DEFAULT_BLOCK, channel_tile=None,
                         steps_per_thread=None, chunks_per_block=None, shuffle=None, carry=None, prefetch=None,
                         out=None, workspace=None):
    """Vector-Jacobian product of ``linear_scan``: a reverse-time scan with the same kernels.

        g_t = dh_t + a_{t+1} g_{t+1},  da_t = g_t h_{t-1} (h_0 = h0 or 0),  db_t = g_t,  dh0 = a_1 g_1.

    Args:
        a: (B, T, ...) the forward's coefficients; h: (B, T, ...) the forward's output;
        dh: (B, T, ...) dL/dh; h0: (B, ...) or None as in the forward. NumPy or device arrays.
        method, block, channel_tile, steps_per_thread, chunks_per_block, shuffle, carry, prefetch, workspace:
            as in ``linear_scan``.
        out: (da, db, dh0) C-contiguous device arrays of the results' shapes and dtype, or None.
    Returns:
        (da, db, dh0): (B, T, ...), (B, T, ...), (B, ...); dh0 is returned even when h0 is None.
    """
    on_device, shape, out, method, block, v3, K1 = _prepare(
        "backward", ("a", "h", "dh", "h0"), (a, h, dh), h0, out, ("da", "db", "dh0"), method, block,
        _v3_options(steps_per_thread, chunks_per_block, shuffle, carry), prefetch, workspace)
    if 0 in shape:
        return out if out is not None else empty_grads(shape, a.dtype, on_device)
    s3 = shape3(shape)
    a_d, h_d, dh_d = (to_device_3d(x, s3) for x in (a, h, dh))
    has_h0 = h0 is not None
    h0_d = to_device_3d(h0, (s3[0], s3[2])) if has_h0 else dummy(2, a.dtype, workspace)
    grads = None if out is None else grads_3d(out, s3)
    grads = _backward_device(a_d, h_d, dh_d, h0_d, has_h0, method, block, channel_tile, v3, K1, grads, workspace)
    return out if out is not None else grads_out(grads, shape, on_device)


def log_linear_scan_backward(log_a, log_b, log_h, dlog_h, log_h0=None, method="blelloch", *,
                             block=DEFAULT_BLOCK, channel_tile=None, steps_per_thread=None, chunks_per_block=None,
                             shuffle=None, carry=None, prefetch=None, out=None, workspace=None):
    """Vector-Jacobian product of ``log_linear_scan`` with respect to its log inputs (module docstring).

    One elementwise pass forms the shares w_t = a_t h_{t-1} / h_t and v_t = b_t / h_t from differences of
    logs; ``linear_scan_backward``'s kernels (v1, v2 or v3, ``method``) run the adjoint G_t = dlog_h_t +
    w_{t+1} G_{t+1} and write dlog_a = w G and dlog_h0 = w_0 G_0; a last pass writes dlog_b = v G.

    Args:
        log_a, log_b, log_h, dlog_h: (B, T, ...) of one dtype; log_h is ``log_linear_scan``'s output.
        log_h0: (B, ...) or None (h0 = 0). NumPy or device arrays.
        method, block, channel_tile, steps_per_thread, chunks_per_block, shuffle, carry, prefetch, workspace:
            as in ``linear_scan``; out: (dlog_a, dlog_b, dlog_h0) device arrays, as in ``linear_scan_backward``.
    Returns:
        (dlog_a, dlog_b, dlog_h0): (B, T, ...), (B, T, ...), (B, ...) (zeros when log_h0 is None).
    """
    on_device, shape, out, method, block, v3, K1 = _prepare(
        "backward", ("log_a", "log_b", "log_h", "dlog_h", "log_h0"), (log_a, log_b, log_h, dlog_h), log_h0, out,
        ("dlog_a", "dlog_b", "dlog_h0"), method, block, _v3_options(steps_per_thread, chunks_per_block, shuffle,
                                                                    carry), prefetch, workspace)
    if 0 in shape:
        return out if out is not None else empty_grads(shape, log_a.dtype, on_device)
    s3 = shape3(shape)
    B, T, C = s3
    dt = log_a.dtype
    la, lb, lh, dlh = (to_device_3d(x, s3) for x in (log_a, log_b, log_h, dlog_h))
    has_h0 = log_h0 is not None
    lh0 = to_device_3d(log_h0, (B, C)) if has_h0 else dummy(2, dt, workspace)
    w, w_as_h = (alloc(workspace, name, s3, dt) for name in ("w", "w_as_h"))
    w0 = alloc(workspace, "w0", (B, C), dt)
    G = alloc(workspace, "G", s3, dt)
    if out is None:
        dlog_a, v, dlog_h0 = (cuda.device_array(s3, dtype=dt), cuda.device_array(s3, dtype=dt),
                              cuda.device_array((B, C), dtype=dt))
    else:
        dlog_a, v, dlog_h0 = grads_3d(out, s3)
    shares, times = log_share_kernels(dt)
    n = B * T * C
    shares[-(-n // SEQUENTIAL_BLOCK), SEQUENTIAL_BLOCK](la, lb, lh, lh0, has_h0, w, w_as_h, w0, v)
    # w_as_h[:, T-1] stays unwritten: the backward reads h_{t-1} for t <= T-1 only.
    _backward_device(w, w_as_h, dlh, w0, True, method, block, channel_tile, v3, K1, (dlog_a, G, dlog_h0),
                     workspace)
    times[-(-n // SEQUENTIAL_BLOCK), SEQUENTIAL_BLOCK](v.reshape(n), G.reshape(n))
    if out is not None:
        return out
    return grads_out((dlog_a, v, dlog_h0), shape, on_device)
