"""v2 "blelloch" on the host side (``scan.linear_scan(..., method="blelloch")``): the tile of a block, the launch
grid and the passes over (B, T, C) device arrays, in either direction. A sequence of one chunk is one launch of
``scan``; a longer one takes the three passes of reduce-then-scan (``scan.py``'s docstring): ``reduce`` writes each
chunk's total, the totals are scanned by the same function one level up (recursively), and ``scan`` reruns each
chunk from its carried state. The kernels are in ``blelloch.py``; the checks of the arguments and the entry
points in ``scan.py``, which calls ``blelloch`` and ``blelloch_forward`` after them.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from .blelloch import blelloch_kernels
from .workspace import alloc, dummy

__all__ = ["blelloch", "blelloch_forward"]


def _tile(C, block, channel_tile):
    """(CW, TW): CW channels of one time step side by side (coalesced), TW threads along time."""
    if channel_tile is None:
        CW = 1
        while CW < min(C, 32, block // 2):
            CW *= 2
    else:
        if isinstance(channel_tile, bool) or not isinstance(channel_tile, (int, np.integer)) \
                or channel_tile < 1 or channel_tile > block // 2 or channel_tile & (channel_tile - 1):
            raise ValueError(f"channel_tile must be a power of two in [1, block / 2 = {block // 2}], "
                             f"got {channel_tile!r}")
        CW = int(channel_tile)
    return CW, block // CW


def _launch_grid(shape3, CW, TW):
    B, T, C = shape3
    n_chunks = -(-T // (2 * TW))
    return n_chunks, B * n_chunks * (-(-C // CW))


def blelloch(op, reverse, x1, x2, h0, has_h0, outs, block, channel_tile, workspace=None):
    """Device-level v2 in either direction on (B, T, C) device arrays: x1, x2 = a, b into outs = (h, -, -, -)
    (forward), or x1, x2 = a, dh into outs = (da, h, db, dh0) (``reverse``: the backward, h the forward's output).

    The temporaries (chunk totals, the carried states one level up) come from ``workspace`` when given; each
    level's have their own shape, so the levels never share a buffer."""
    B, T, C = x1.shape
    CW, TW = _tile(C, block, channel_tile)
    reduce, scan = blelloch_kernels(x1.dtype, CW, TW, op, reverse)
    n_chunks, n_blocks = _launch_grid(x1.shape, CW, TW)
    if n_chunks > 1:
        tot_a = alloc(workspace, "tot_a", (B, n_chunks, C), x1.dtype)
        tot_b = alloc(workspace, "tot_b", (B, n_chunks, C), x1.dtype)
        reduce[n_blocks, (CW, TW)](x1, x2, tot_a, tot_b)
        # S_k: the state after chunk k, from h0 — the same scan one level up. The backward's chunk totals are
        # stored in scan (reversed-time) order, so its carries are a forward scan from 0.
        start, has_start = (dummy(2, x1.dtype, workspace), False) if reverse else (h0, has_h0)
        carry = blelloch_forward(op, tot_a, tot_b, start, has_start, block, channel_tile,
                                  alloc(workspace, "carry", (B, n_chunks, C), x1.dtype), workspace)
    else:
        carry = dummy(3, x1.dtype, workspace)
    scan[n_blocks, (CW, TW)](x1, x2, carry, h0, has_h0, *outs)


def blelloch_forward(op, a, b, h0, has_h0, block, channel_tile, h=None, workspace=None):
    """Device-level forward scan of (B, T, C) device arrays into h (allocated if None); returns h."""
    h = cuda.device_array(a.shape, dtype=a.dtype) if h is None else h
    d3, d2 = dummy(3, a.dtype, workspace), dummy(2, a.dtype, workspace)
    blelloch(op, False, a, b, h0, has_h0, (h, d3, d3, d2), block, channel_tile, workspace)
    return h
