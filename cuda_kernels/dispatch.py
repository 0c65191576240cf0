"""method="auto": the scan version to run for a shape, read off a table of benchmark winners.

Which kernel is fastest depends on the shape more than on anything else (``README.md``, measured table): with
thousands of independent sequences (B x C) v1's one thread per channel already fills the GPU and reads each
array once, while with few channels and long T only a scan across time (v2, v3, v4) has the parallelism. So the
choice is made from measurements, not by rule of thumb:

    bash bench/gpu_round2.sh               # OUT/scan_rows.jsonl (preallocated rows of every version, v4 included)
    python -m minimal.bench.gpu dispatch ROWS.jsonl [MORE_ROWS.jsonl ...] [LOG.json]   # prints TABLE

``TABLE`` holds, for every benchmarked shape (B, T, C), the fastest method of each kind ("forward",
"backward", "log forward") among the versions that were timed. ``choose`` takes the benchmarked shape
nearest to the caller's in (log2 T, log2 B C), the two axes of parallelism, and returns its winner. Only
versions with a timing can win.

Sources (``derive_table``):
- "forward" and "backward": the preallocated rows of one H100 run of 2026-11-27 (``SOURCES`` =
  ``ROUND2_SOURCE``, ``bash bench/gpu_round2.sh``, issue 35: kernels timed into reused outputs and a
  ``scan.Workspace``, no allocation in the timed call): v1 at (8, 4096, 8192), v2, v3 (both carries) and v4 at
  the few-channel shapes, v4 at its default (block, K) at (8, 4096, 8192). Rows are ranked by their fraction of
  a device copy of the same bytes timed in the same run (``vs_copy``), so that rows of several runs would meet
  on the same footing. v1 counts only at the K the host functions use by default (``V1_PREFETCH``: 8 forward
  and backward), v4 only at its default (block, K) (``V4_CONFIG``: (256, 32) forward, (256, 16) backward).
  v4 wins every few-channel cell (forward 0.71 / 0.66 of a copy at (1, 2^20, 256) / (1, 2^20, 16), backward
  0.61 / 0.51, against v2's 0.25 / 0.22 and 0.33 / 0.31) and v1 the many-channel ones (0.94 / 0.88). The earlier
  H200 checks (``SOURCE``, ``V1_SOURCE``) are kept as the measurements of the table before v4.
- "log forward": the allocating rows of the H200 benchmark of 2026-11-26 (``LOG_SOURCE``,
  ``bench/results/scan_NVIDIA_H200.jsonl``, main at 7b70fef), the only log-space timings we have (v1 was
  timed there at K = 1, the default then; it wins every many-channel cell as it is).
The table comes from float32 timings and serves float64 too. ``tests/test_cuda_dispatch.py`` checks that
``TABLE`` is what ``derive_table`` makes of the committed files, so the table cannot drift from the
measurements it cites.
"""
from __future__ import annotations

import json
import math

__all__ = ["TABLE", "SOURCE", "V1_SOURCE", "ROUND2_SOURCE", "SOURCES", "LOG_SOURCE", "KINDS", "VARIANTS", "V1_PREFETCH",
           "V4_CONFIG", "choose",
           "table_from_rows", "table_from_preallocated_rows", "derive_table", "load_rows", "format_table"]

KINDS = ("forward", "backward", "log forward")

# Benchmark row prefixes -> the keywords of ``cuda_kernels.scan.linear_scan`` that run that version.
VARIANTS = {
    "sequential": {"method": "sequential"},
    "blelloch": {"method": "blelloch"},
    "chunked": {"method": "chunked"},
    "chunked lookback": {"method": "chunked", "carry": "lookback"},
    "lookback": {"method": "lookback"},
}

SOURCE = "bench/results/gpu_check_H200_2026-11-26_scan_rows.jsonl"    # the H200 checks (the table before v4)
V1_SOURCE = "bench/results/gpu_check2_H200_2026-11-26_v1_rows.jsonl"  # v1 at K = 1, 4, 8: preallocated, float32
ROUND2_SOURCE = "bench/results/gpu_round2_H100_2026-11-27_scan_rows.jsonl"   # every version, v4 included (H100)
SOURCES = (ROUND2_SOURCE,)   # forward, backward: preallocated, float32, one run
LOG_SOURCE = "bench/results/scan_NVIDIA_H200.jsonl"                 # log forward: allocating, float32, 7b70fef
V1_PREFETCH = {"forward": 8, "backward": 8}   # v1's default K (scan.DEFAULT_PREFETCH_FORWARD / _BACKWARD)
# v4's default (block, K) (lookback.DEFAULT_BLOCK, lookback.DEFAULT_STEPS): "auto" runs v4 with them, so only
# rows timed there compete
V4_CONFIG = {"forward": (256, 32), "backward": (256, 16)}

# (B, T, C): {kind: variant}, from SOURCES and LOG_SOURCE by derive_table (regenerate with
# `python -m minimal.bench.gpu dispatch ROUND2_SOURCE LOG_SOURCE`).
TABLE = {
    (1, 1048576, 256): {"forward": "lookback", "backward": "lookback", "log forward": "blelloch"},
    (1, 1048576, 16): {"forward": "lookback", "backward": "lookback", "log forward": "chunked"},
    (1, 1048576, 1): {"forward": "lookback", "backward": "lookback", "log forward": "chunked"},
    (8, 4096, 8192): {"forward": "sequential", "backward": "sequential", "log forward": "sequential"},
    (1, 65536, 1): {"log forward": "blelloch"},
    (8, 1024, 8192): {"log forward": "sequential"},
    (1, 1048576, 64): {"log forward": "chunked"},
    (1, 1048576, 4): {"log forward": "blelloch"},
    (1, 262144, 1): {"log forward": "blelloch"},
}



def _split(name):
    """'blelloch log forward' -> ('blelloch', 'log forward'); None for rows that are not a scan version."""
    for kind in sorted(KINDS, key=len, reverse=True):
        if name.endswith(" " + kind):
            prefix = name[: -len(kind) - 1]
            return (prefix, kind) if prefix in VARIANTS else None
    return None


def load_rows(path):
    """The rows of a ``minimal.bench.gpu`` scan result file: a JSON file ({"meta", "rows"} or a list of rows),
    or a ``.jsonl`` file with one row per line (as ``bench/gpu_check.sh`` writes them, row by row)."""
    with open(path) as f:
        if str(path).endswith(".jsonl"):
            data = [json.loads(line) for line in f if line.strip()]
        else:
            data = json.load(f)
    rows = data["rows"] if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "name" in r for r in rows):
        raise ValueError(f"{path} must hold the rows of `python -m minimal.bench.gpu scan` (dicts with a name)")
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


def table_from_preallocated_rows(rows, prefetch=None):
    """{(B, T, C): {kind: fastest variant}} over the "(preallocated)" forward / backward rows of
    ``minimal.bench.gpu_check`` (named by their ``method`` / ``carry`` fields), possibly of several runs: the
    fastest is the row with the largest fraction of its run's copy of the same bytes (``vs_copy``). v1 rows
    count only at K = ``prefetch[kind]`` (default ``V1_PREFETCH``); a v1 row without a ``prefetch`` field was
    timed at K = 1. v4 rows count only at its default (block, K), ``V4_CONFIG[kind]``."""
    prefetch = V1_PREFETCH if prefetch is None else prefetch
    best = {}
    for r in rows:
        name = r["name"]
        kind = ("forward" if " forward (preallocated)" in name else
                "backward" if " backward (preallocated)" in name else None)
        if kind is None or "error" in r or not math.isfinite(r.get("seconds", math.nan)):
            continue
        method = r.get("method")
        variant = "chunked lookback" if method == "chunked" and r.get("carry") == "lookback" else method
        if variant not in VARIANTS:
            continue
        if method == "sequential" and int(r.get("prefetch", 1)) != prefetch[kind]:
            continue
        if method == "lookback" and (int(r.get("block", -1)), int(r.get("steps_per_thread", -1))) != V4_CONFIG[kind]:
            continue
        if not math.isfinite(r.get("vs_copy", math.nan)):
            raise ValueError(f"row {name!r} at {r['shape']} has no fraction of a same-run copy (vs_copy): "
                             "preallocated rows of different runs are compared by it")
        shape = tuple(int(v) for v in r["shape"])
        current = best.setdefault(shape, {}).get(kind)
        if current is None or r["vs_copy"] > current[1]:
            best[shape][kind] = (variant, r["vs_copy"])
    return {shape: {k: v[0] for k, v in kinds.items()} for shape, kinds in best.items()}


def derive_table(rows, log_rows=None):
    """``TABLE`` from its sources: forward / backward from the preallocated ``rows`` (the rows of one or more GPU
    checks: scan_rows.jsonl, v1_rows.jsonl), "log forward" from ``log_rows`` (a ``bench scan`` file; its other
    kinds unused)."""
    table = {shape: dict(kinds) for shape, kinds in table_from_preallocated_rows(rows).items()}
    for shape, kinds in (table_from_rows(log_rows) if log_rows else {}).items():
        if "log forward" in kinds:
            table.setdefault(shape, {})["log forward"] = kinds["log forward"]
    return table


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
    """The table as Python source for ``TABLE`` (printed by ``python -m minimal.bench.gpu dispatch``)."""
    lines = [f"# from {source}" if source else "# dispatch table", "TABLE = {"]
    for shape, kinds in table.items():
        lines.append(f"    {shape!r}: {{{', '.join(f'{json.dumps(k)}: {json.dumps(v)}' for k, v in kinds.items())}}},")
    lines.append("}")
    return "\n".join(lines)
