"""method="auto": the scan version to run for a shape, read off a table of benchmark winners.

Which kernel is fastest depends on the shape more than on anything else (``README.md``, measured table): with
thousands of independent sequences (B x C) v1's one thread per channel already fills the GPU and reads each
array once, while with few channels and long T only a tree over time (v2, v3) has the parallelism. So the
choice is made from measurements, not by rule of thumb:

    python -m cuda_kernels.bench scan                  # writes bench/results/scan_<GPU>.json
    python -m cuda_kernels.bench dispatch FILE.json    # prints the table below for that file

``TABLE`` holds, for every benchmarked shape (B, T, C), the fastest method of each kind ("forward",
"backward", "log forward") among the versions that file timed. ``choose`` takes the benchmarked shape
nearest to the caller's in (log2 T, log2 B C), the two axes of parallelism, and returns its winner. Only
versions with a timing can win. ``SOURCE`` is the H200 run of 2026-11-26 (``bench/results/scan_NVIDIA_H200.jsonl``,
one row per line), which timed v1, v2 and v3 with both carries: v1 wins with thousands of channels, v2 and v3
share the few-channel shapes, and the look-back carry wins one of 27 (shape, kind) cells. Those timings
include each call's output allocation (the rows of ``bench/gpu_check.sh`` time preallocated outputs too).
The table comes from float32 timings and serves float64 too (a float64 run writes
``scan_<GPU>_float64.json``; its winners are not measured here). ``tests/test_cuda_dispatch.py`` checks that
``TABLE`` is what ``table_from_rows`` derives from the committed JSON, so the table cannot drift from the
measurements it cites.
"""
from __future__ import annotations

import json
import math

__all__ = ["TABLE", "SOURCE", "KINDS", "VARIANTS", "choose", "table_from_rows", "load_rows", "format_table"]

KINDS = ("forward", "backward", "log forward")

# Benchmark row prefixes -> the keywords of ``cuda_kernels.scan.linear_scan`` that run that version.
VARIANTS = {
    "sequential": {"method": "sequential"},
    "blelloch": {"method": "blelloch"},
    "chunked": {"method": "chunked"},
    "chunked lookback": {"method": "chunked", "carry": "lookback"},
}

SOURCE = "bench/results/scan_NVIDIA_H200.jsonl"   # float32, 2026-11-26, main at 7b70fef; v1, v2, v3 (both carries)

# (B, T, C): {kind: variant}, from SOURCE by table_from_rows (regenerate with `python -m cuda_kernels.bench
# dispatch SOURCE`). The H100 file (bench/results/scan_NVIDIA_H100_80GB_HBM3.json, 2026-11-22) timed v1 and v2
# only; the H200 rows time every version, so they are the source.
TABLE = {
    (8, 4096, 8192): {"forward": "sequential", "backward": "sequential", "log forward": "sequential"},
    (1, 1048576, 256): {"forward": "chunked", "backward": "blelloch", "log forward": "blelloch"},
    (1, 1048576, 16): {"forward": "chunked", "backward": "chunked", "log forward": "chunked"},
    (1, 1048576, 1): {"forward": "blelloch", "backward": "chunked", "log forward": "chunked"},
    (1, 65536, 1): {"forward": "blelloch", "backward": "blelloch", "log forward": "blelloch"},
    (8, 1024, 8192): {"forward": "sequential", "backward": "sequential", "log forward": "sequential"},
    (1, 1048576, 64): {"forward": "chunked", "backward": "chunked", "log forward": "chunked"},
    (1, 1048576, 4): {"forward": "blelloch", "backward": "chunked lookback", "log forward": "blelloch"},
    (1, 262144, 1): {"forward": "blelloch", "backward": "blelloch", "log forward": "blelloch"},
}


def _split(name):
    """'blelloch log forward' -> ('blelloch', 'log forward'); None for rows that are not a scan version."""
    for kind in sorted(KINDS, key=len, reverse=True):
        if name.endswith(" " + kind):
            prefix = name[: -len(kind) - 1]
            return (prefix, kind) if prefix in VARIANTS else None
    return None


def load_rows(path):
    """The rows of a ``cuda_kernels.bench`` scan result file: a JSON file ({"meta", "rows"} or a list of rows),
    or a ``.jsonl`` file with one row per line (as ``bench/gpu_check.sh`` writes them, row by row)."""
    with open(path) as f:
        if str(path).endswith(".jsonl"):
            data = [json.loads(line) for line in f if line.strip()]
        else:
            data = json.load(f)
    rows = data["rows"] if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "name" in r for r in rows):
        raise ValueError(f"{path} must hold the rows of `python -m cuda_kernels.bench scan` (dicts with a name)")
    return rows


def table_from_rows(rows):
    """{(B, T, C): {kind: fastest variant}} over the scan-version rows of a benchmark (other rows ignored)."""
    best = {}
    for r in rows:
        parsed = _split(r["name"])
        if parsed is None or not math.isfinite(r.get("seconds", math.nan)):
            continue
        shape = tuple(int(v) for v in r["shape"])
        variant, kind = parsed
        current = best.setdefault(shape, {}).get(kind)
        if current is None or r["seconds"] < current[1]:
            best[shape][kind] = (variant, r["seconds"])
    return {shape: {k: v[0] for k, v in kinds.items()} for shape, kinds in best.items()}


def choose(shape, kind="forward", table=None):
    """Keywords for ``cuda_kernels.scan`` (e.g. {"method": "blelloch"}) for a (B, T, C) problem.

    Args:
        shape: (B, T, C) with positive sizes (C = the product of the trailing axes).
        kind: "forward", "backward" or "log forward" (the log-space backward runs the linear backward's
            kernels, so it takes "backward").
        table: {(B, T, C): {kind: variant}}; default ``TABLE``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    if len(shape) != 3 or not all(int(v) >= 1 for v in shape):
        raise ValueError(f"shape must be (B, T, C) of positive sizes, got {tuple(shape)!r}")
    table = TABLE if table is None else table
    candidates = [(s, kinds[kind]) for s, kinds in table.items() if kind in kinds]
    if not candidates:
        raise ValueError(f"the dispatch table has no {kind!r} timings")
    B, T, C = (int(v) for v in shape)

    def distance(s):
        return math.hypot(math.log2(T) - math.log2(s[1]), math.log2(B * C) - math.log2(s[0] * s[2]))

    _, variant = min(candidates, key=lambda sv: (distance(sv[0]), sv[0]))
    return dict(VARIANTS[variant])


def format_table(table, source=None):
    """The table as Python source for ``TABLE`` (printed by ``python -m cuda_kernels.bench dispatch``)."""
    lines = [f"# from {source}" if source else "# dispatch table", "TABLE = {"]
    for shape, kinds in table.items():
        lines.append(f"    {shape!r}: {{{', '.join(f'{json.dumps(k)}: {json.dumps(v)}' for k, v in kinds.items())}}},")
    lines.append("}")
    return "\n".join(lines)
