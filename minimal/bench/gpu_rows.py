"""The GPU benchmark's bookkeeping, pure and without a GPU (``minimal.bench.gpu`` times the kernels): the
shapes of each regime, the ideal bytes of a call, the result rows with their same-run ratios, their table and
their JSON file. Tested in the simulator on fake timings.

Regimes (``shapes_for``): many channels (B*C = 65536, T = size / 65536 in 1024 .. 8192) and few channels
with long T (B*C = min(256, size / 2^20), so T >= 2^20 once size >= 2^20). Bytes are the ideal traffic, each
array read or written once (``scan_bytes``, ``window_bytes``).
"""
from __future__ import annotations

import json
import math
import os
import re

import numpy as np

__all__ = ["shapes_for", "scan_bytes", "window_bytes", "make_row", "format_table", "result_path", "write_json",
           "MANY_CHANNELS"]

MANY_CHANNELS = 65536



def shapes_for(size):
    """[(regime, (B, T, C))] for ``size`` = B*T*C elements (a power of two >= 2^16)."""
    if size < 2 ** 16 or size & (size - 1):
        raise ValueError(f"size must be a power of two >= 2^16, got {size}")
    out = []
    T = size // MANY_CHANNELS
    if 1024 <= T <= 8192:
        out.append(("many_channels", (8, T, MANY_CHANNELS // 8)))
    bc = max(1, min(256, size >> 20))
    out.append(("few_channels_long_T" if size // bc >= 2 ** 20 else "few_channels", (1, size // bc, bc)))
    return out


def scan_bytes(kind, n, itemsize):
    """Ideal bytes moved by one call on n = B*T*C elements: forward and log read a, b and write h;
    the backward reads a, h, dh and writes da, db (dh0 is B*C, negligible)."""
    per = {"forward": 3, "log": 3, "backward": 5, "torch_cumsum": 2}
    if kind not in per:
        raise ValueError(f"kind must be one of {sorted(per)}, got {kind!r}")
    return per[kind] * n * itemsize


def window_bytes(B, T, f, w, s, itemsize, with_Z=False):
    """Ideal bytes of the GRIL forward: read x (B, T, f), write o (B, T', f) (and Z (B, T', f, f))."""
    T_out = (T - w) // s + 1
    return itemsize * (B * T * f + B * T_out * f + (B * T_out * f * f if with_Z else 0))


def make_row(name, seconds, nbytes, copy_seconds, **extra):
    """One result row; ratios are copy time / our time (> 1: faster than a copy of the same bytes)."""
    row = {"name": name, "seconds": float(seconds), "bytes": int(nbytes),
           "GB_per_s": nbytes / seconds / 1e9 if seconds > 0 else math.inf,
           "vs_copy": copy_seconds / seconds if seconds > 0 else math.inf}
    row.update(extra)
    return row


def format_table(rows):
    """A fixed-width text table of rows from ``make_row`` (missing optional columns print as '-')."""
    cols = [("regime", "{}"), ("shape", "{}"), ("dtype", "{}"), ("name", "{}"), ("seconds", "{:.3e}"),
            ("GB_per_s", "{:.1f}"), ("vs_copy", "{:.3f}"), ("vs_forward", "{:.2f}"), ("vs_reduce", "{:.2f}"),
            ("vs_allocating", "{:.2f}"),
            ("vs_torch_cumsum", "{:.2f}"), ("vs_torch_heinsen", "{:.2f}")]
    cells = [[c for c, _ in cols]]
    for r in rows:
        cells.append([fmt.format(tuple(r[c]) if c == "shape" else r[c]) if r.get(c) is not None else "-"
                      for c, fmt in cols])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(v.rjust(wd) for v, wd in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * wd for wd in widths))
    return "\n".join(lines)


def result_path(out_dir, device_name, what, dtype="float32"):
    """bench/results/<what>_<device name as a file name>.json for float32, ..._<dtype>.json otherwise (a
    float64 run must not overwrite the float32 file that ``dispatch.TABLE`` cites)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", str(device_name)).strip("_") or "unknown_device"
    suffix = "" if np.dtype(dtype) == np.float32 else f"_{np.dtype(dtype).name}"
    return os.path.join(out_dir, f"{what}_{safe}{suffix}.json")


def write_json(rows, path, meta):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=str)
    return path
