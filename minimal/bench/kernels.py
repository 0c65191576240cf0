"""Speed of the scans as ratios to a memory copy timed in the same run (``python -m minimal bench scan``); the
Zucchet gated RNN's training step (``python -m minimal bench step``) is timed in ``minimal.bench.step``.

A scan of n = B*T*C float32 elements reads a and b and writes h: 3 * 4 * n bytes, counted the same for every
row (the log-space scan reads log a, log b and writes log h). The bound is ``np.copyto`` of a float32 buffer
of 1.5 n elements into another: it reads 6 n and writes 6 n bytes, the same 3 * 4 * n bytes in all, so
``vs_copy`` = (copy time) / (scan time) is the scan's share of the memory bandwidth this machine delivers.

The copy and the bare Numba kernels write into preallocated outputs, so they do not pay for the page faults
of fresh allocations (the NumPy loop is timed as ``minimal.scan.sequential_scan``, allocating). Two rows time
the public call ``minimal.scan.linear_scan(a, b, h0, method="sequential")`` as a user makes it: its checks
(NaN/inf fused into the kernel's flag) and a fresh output, and the same call with ``out=`` reusing one
buffer. ``np.add(a, b, out=h)`` reads and writes the same three streams with no recurrence: what any kernel
that reads two arrays and writes a third can reach here (1.0-1.2x the copy on the project's CPUs, measured).
Timing: one warm-up call of each row (it also compiles), then ``repeats`` rounds that time every row once;
each row reports its best. One thread: these CPUs give no parallel speedup (measured here).

``python -m minimal bench window`` (``bench_window``) times GRIL's block on the CPU in the same way; its
bytes are counted in ``bench_window``'s docstring.

Memory: before allocating anything, the CPU benchmarks estimate their peak memory (``peak_gb``: the measured
peak at the default shape, scaled by the elements) and refuse (``InputError``, one line naming the shape, the
estimate and the memory) a shape whose estimate exceeds the memory this machine has available
(``machine_memory_gb``: /proc/meminfo's MemAvailable, else the physical memory), rather than failing at the first
allocation.

backend="cuda" hands over to ``minimal.bench.gpu`` (the GPU benchmark of ``cuda_kernels``, imported only then,
once ``minimal.scan.cuda_module`` has found the kernels and a GPU), which prints and saves its own tables.
"""
from __future__ import annotations

import time

import numpy as np

from ..scan import checks as scan_checks
from ..validate import InputError, check_choice, check_positive_int

__all__ = ["bench_scan", "bench_window", "format_table", "format_window_table", "peak_gb", "machine_memory_gb",
           "check_memory", "best_of_interleaved", "DEFAULT_SHAPE", "WINDOW_SHAPE"]

DEFAULT_SHAPE = (64, 4096, 256)  # (B, T, C): 67M elements, 805 MB read + written per scan in float32
DEFAULT_REPEATS = 5
WINDOW_SHAPE = (64, 2 ** 14 + 1, 10, 3, 1)  # GRIL (B, T, f, w, s): T' = T - w + 1 = 16383 windows of 3 tokens
PEAK_GB = {"scan": 2.4, "window": 3.5}       # measured peak resident memory at the default shapes (issue 24)


def cuda_module(name):
    """``minimal.scan.cuda_module`` with the refusal worded for the benchmark: its --backend takes numba or cuda."""
    try:
        return scan_checks.cuda_module(name)
    except ValueError as e:
        why = str(e).split("available (", 1)[-1].split(")", 1)[0] if "available (" in str(e) else str(e)
        raise InputError(f"--backend cuda needs a CUDA GPU and cannot run here ({why}); drop --backend cuda to time "
                         f"the CPU kernels (--backend numba, the default)") from None


def gpu_bench():
    """``minimal.bench.gpu``, imported only when --backend cuda asks for it, after ``cuda_module`` has refused (an
    InputError naming the flag) where the kernels cannot be imported or there is no GPU."""
    cuda_module("scan")
    from . import gpu

    return gpu


def scaled_shape(what, T):
    """The default shape of ``bench scan`` / ``bench window`` with T time steps instead (``--size T``): peak memory
    about ``PEAK_GB[what]`` x T / default T."""
    check_positive_int("size", T, minimum=2 if what == "scan" else 4)
    if what == "scan":
        return (DEFAULT_SHAPE[0], int(T), DEFAULT_SHAPE[2])
    B, _, f, w, s = WINDOW_SHAPE
    return (B, int(T) - (int(T) - w) % s, f, w, s)


def peak_gb(what, shape):
    """The estimated peak memory (GB) of ``bench scan`` / ``bench window`` on the CPU at ``shape``: ``PEAK_GB``
    (measured at the default shape) scaled by the elements of the big arrays, B T C (scan) or B T f (window)."""
    default = DEFAULT_SHAPE if what == "scan" else WINDOW_SHAPE
    n = lambda sh: float(sh[0]) * float(sh[1]) * float(sh[2])    # noqa: E731 - floats: no overflow at any size
    return PEAK_GB[what] * n(shape) / n(default)


def machine_memory_gb():
    """``(available, total)``: this machine's memory in GB. available: /proc/meminfo's MemAvailable (what can be
    allocated without swapping), else the total; total: ``os.sysconf`` SC_PHYS_PAGES x SC_PAGE_SIZE, else
    /proc/meminfo's MemTotal. None for what cannot be read (then nothing is refused)."""
    import os

    info = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemAvailable", "MemTotal") and rest.split():
                    info[key] = int(rest.split()[0]) * 1024 / 1e9      # kB
    except (OSError, ValueError):
        pass
    total = info.get("MemTotal")
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e9
    except (AttributeError, ValueError, OSError):
        pass
    return info.get("MemAvailable", total), total


def check_memory(what, shape, given=None, fix=None):
    """Refuse, before allocating, a CPU benchmark whose estimated peak memory (``peak_gb``) exceeds the memory this
    machine has available (``machine_memory_gb``). ``given``: what the user passed, for the message (default the
    shape); ``fix``: what to do instead (default: a smaller shape). Returns the estimate (GB).

    Raises:
        InputError: one line naming ``given``, the estimate and the machine's memory, and the fix.
    """
    gb = peak_gb(what, shape)
    available, total = machine_memory_gb()
    if available is not None and gb > available:
        default = DEFAULT_SHAPE if what == "scan" else WINDOW_SHAPE
        t_max = int(available / PEAK_GB[what] * default[0] * default[1] * default[2] / (shape[0] * shape[2]))
        of = f" (of {total:,.1f} GB)" if total is not None and total != available else ""
        raise InputError(f"bench {what} {given or f'at shape {tuple(shape)}'} needs about {gb:,.1f} GB of memory "
                         f"(estimate: {PEAK_GB[what]} GB at the default shape {default[:3]}, scaled by B x T x "
                         f"{'C' if what == 'scan' else 'f'}), more than the {available:,.1f} GB this machine has "
                         f"available{of}; {fix or 'give a smaller shape'} (T <= {t_max:,} fits)")
    return gb


def best_of_interleaved(fns, repeats):
    """Best time of each function over ``repeats`` rounds, each round timing every function once.

    Interleaving makes every row see the same spells of load from other processes, so the ratios to the
    copy stay meaningful on a shared machine."""
    for fn in fns:
        fn()  # warm-up: compiles, and faults in the pages of the outputs
    best = [np.inf] * len(fns)
    for _ in range(repeats):
        for j, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[j] = min(best[j], time.perf_counter() - t0)
    return best


def _cpu_shape_and_repeats(fn_name, kw, shape, default, dims, repeats):
    """The CPU benchmark's arguments, checked: no CUDA-only keywords, ``shape`` of len(dims) positive integers
    (None: ``default``), ``repeats`` >= 1 (None: ``DEFAULT_REPEATS``)."""
    if kw:
        raise ValueError(f"{fn_name}(backend='numba') takes shape and repeats only, got {sorted(kw)}")
    shape = default if shape is None else tuple(shape)
    if len(shape) != len(dims) or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in shape):
        raise ValueError(f"shape must be ({', '.join(dims)}) of {len(dims)} positive integers, got {shape!r}")
    return shape, check_positive_int("repeats", DEFAULT_REPEATS if repeats is None else repeats)


def bench_scan(backend="numba", shape=None, repeats=None, **kw):
    """Time the CPU scans (float32) against a same-run copy of the same number of bytes.

    Args:
        backend: "numba" (the CPU scans below) or "cuda" (delegates to ``minimal.bench.gpu.bench_scan``
            with the arguments given here).
        shape: (B, T, C) of a, b and h; default ``DEFAULT_SHAPE``.
        repeats: best-of-k timing after one warm-up call; default 5.
    Returns:
        one dict per row: name, seconds (best), elements_per_s, GB_per_s (bytes as counted in the module
        docstring), vs_copy (copy time / row time), bytes. Rows: the copy, the same copy into a fresh array
        (what a fresh output costs: the OS maps and zeroes its pages on first touch, which glibc's allocator
        asks for anew for arrays above its 32 MB mmap threshold), ``np.add`` of the same streams,
        the NumPy sequential loop, the bare Numba sequential kernel, the public ``linear_scan`` (sequential,
        numba: checks and a fresh output), the same with ``out=``, the Numba Blelloch kernel, the Numba
        log-space kernel (its NaN/inf flag included: it rides in the same pass), the public ``log_scan``
        (backend numba, a fresh output).
    """
    check_choice("backend", backend, ("numba", "cuda"))
    if backend == "cuda":
        given = {k: v for k, v in (("shape", shape), ("repeats", repeats)) if v is not None}
        return gpu_bench().bench_scan(**given, **kw)
    shape, repeats = _cpu_shape_and_repeats("bench_scan", kw, shape, DEFAULT_SHAPE, ("B", "T", "C"), repeats)
    check_memory("scan", shape)

    from .. import scan
    from ..scan import numba_linear, numba_log
    from ..scan.reference import sequential_scan

    B, T, C = shape
    n = B * T * C
    rng = np.random.default_rng(0)
    a = rng.uniform(0.9, 1.0, shape).astype(np.float32)
    b = rng.standard_normal(shape, dtype=np.float32)
    h0 = np.zeros((B, C), dtype=np.float32)
    h = np.empty_like(b)
    scratch = numba_linear.scratch_for(a)
    log_a = np.log(a)
    src = np.ones((3 * n + 1) // 2, dtype=np.float32)  # 1.5 n elements (rounded up for odd n)
    dst = np.empty_like(src)

    nbytes = 3 * 4 * n
    cases = [
        ("np.copyto (bound)", lambda: np.copyto(dst, src)),
        ("np.copyto, fresh dst", lambda: np.copyto(np.empty_like(src), src)),
        ("np.add a + b -> h", lambda: np.add(a, b, out=h)),
        ("numpy sequential", lambda: sequential_scan(a, b, h0)),
        ("numba sequential", lambda: numba_linear.sequential_into(a, b, h0, h)),
        ("public linear_scan", lambda: scan.linear_scan(a, b, h0, method="sequential")),
        ("public linear_scan out=", lambda: scan.linear_scan(a, b, h0, method="sequential", out=h)),
        ("numba blelloch", lambda: numba_linear.blelloch_into(a, b, h0, h, scratch)),
        ("numba log-space", lambda: numba_log.log_scan_into(log_a, b, h0, False, h)),
        ("public log_scan", lambda: scan.log_scan(log_a, b)),
    ]
    rows = []
    for (name, _), seconds in zip(cases, best_of_interleaved([fn for _, fn in cases], repeats)):
        rows.append({"name": name, "seconds": seconds, "elements_per_s": n / seconds,
                     "GB_per_s": nbytes / seconds / 1e9, "bytes": nbytes})
    copy_seconds = rows[0]["seconds"]
    for r in rows:
        r["vs_copy"] = copy_seconds / r["seconds"]
    return rows


def bench_window(backend="cuda", shape=None, repeats=None, **kw):
    """GRIL's block (float32) on the CPU: the fused Numba kernels against the NumPy parallel path, with a
    same-run copy of the bytes the fused forward must move.

    Bytes: the forward reads x (B T f) and writes o (B T' f), 4 (B T f + B T' f) bytes in float32; the
    parameters are a few hundred bytes. The bound is ``np.copyto`` of a float32 buffer of (B T f + B T' f) / 2
    elements into another, which reads and writes that many bytes in all. The fused forward is compute-bound
    rather than memory-bound: a window costs about f w^2 + f w + f^2 (w + 2) multiply-adds (C_k Q, r_k, the
    rank-w update of Z with its decay, the readout), 620 at f = 10, w = 3, against 4 f s = 40 new bytes of x
    per window (s = 1) plus 4 f = 40 written.

    Args:
        backend: "numba" (the default of ``python -m minimal bench window``) or "cuda" (delegates to
            ``minimal.bench.gpu.bench_window`` with ``kw``; the Python default, kept for compatibility).
        shape: (B, T, f, w, s), default ``WINDOW_SHAPE``; (T - w) % s == 0.
        repeats: best-of-k timing after one warm-up call; default 5.
    Returns:
        one dict per row: name, seconds (best), bytes (as counted above, the same for every row), vs_copy
        (copy time / row time), and for the Numba rows vs_numpy (NumPy time / Numba time, the speedup).
        Rows: the copy, the NumPy forward (``gril.forward`` backend="numpy": the unfused kernel, default scan), the
        fused Numba forward without stored states (inference), NumPy forward + backward, Numba forward
        (storing the states) + backward.
    """
    check_choice("backend", backend, ("numba", "cuda"))
    if backend == "cuda":
        given = {k: v for k, v in (("repeats", repeats),) if v is not None}
        return gpu_bench().bench_window(**given, **kw)
    shape, repeats = _cpu_shape_and_repeats("bench_window", kw, shape, WINDOW_SHAPE, ("B", "T", "f", "w", "s"),
                                            repeats)
    check_memory("window", shape)

    from ..cells import _gril_numba
    from ..cells import gril

    B, T, f, w, s = shape
    T_out = gril.n_windows(T, w, s)
    rng = np.random.default_rng(0)
    params = {k: v.astype(np.float32) for k, v in gril.init(rng, f, w).items()}
    x = rng.standard_normal((B, T, f), dtype=np.float32)
    do = rng.standard_normal((B, T_out, f), dtype=np.float32)
    args = (x, params["Q"], params["q"], params["beta"], params["A"], w, s)
    n_copy = (B * T * f + B * T_out * f + 1) // 2
    src = np.ones(n_copy, dtype=np.float32)
    dst = np.empty_like(src)

    def fwd_bwd(backend):
        o, cache = gril.forward(params, x, s, backend=backend)
        gril.backward(params, cache, do)

    cases = [
        ("np.copyto (bound)", lambda: np.copyto(dst, src)),
        ("numpy forward", lambda: gril.forward(params, x, s, backend="numpy")),
        ("numba forward", lambda: _gril_numba.gril_forward(*args)),
        ("numpy forward+backward", lambda: fwd_bwd("numpy")),
        ("numba forward+backward", lambda: fwd_bwd("numba")),
    ]
    nbytes = 4 * (B * T * f + B * T_out * f)
    rows = [{"name": name, "seconds": seconds, "bytes": nbytes}
            for (name, _), seconds in zip(cases, best_of_interleaved([fn for _, fn in cases], repeats))]
    for r in rows:
        r["vs_copy"] = rows[0]["seconds"] / r["seconds"]
    for numba_row, numpy_row in ((rows[2], rows[1]), (rows[4], rows[3])):
        numba_row["vs_numpy"] = numpy_row["seconds"] / numba_row["seconds"]
    return rows


def format_window_table(rows, shape=None):
    """A plain-text table of ``bench_window``'s CPU rows."""
    B, T, f, w, s = WINDOW_SHAPE if shape is None else shape
    lines = [f"GRIL block, float32, B={B} T={T} f={f} w={w} s={s}",
             f"{'row':<24} {'ms':>10} {'numba speedup':>14} {'vs copy':>8}", "-" * 59]
    for r in rows:
        speedup = f"{r['vs_numpy']:.1f}x" if "vs_numpy" in r else ""
        lines.append(f"{r['name']:<24} {1e3 * r['seconds']:>10.2f} {speedup:>14} {r['vs_copy']:>8.3f}")
    lines.append("-" * 59)
    if rows:
        lines.append(f"bytes: read x + write o = {rows[0]['bytes'] / 1e6:.1f} MB; the copy moves the same bytes")
    return "\n".join(lines)


def format_table(rows):
    """A plain-text table of ``bench_scan``'s rows, with the Blelloch / Numba-sequential time ratio."""
    lines = [f"{'scan (float32)':<24} {'ms':>10} {'Gelem/s':>9} {'GB/s':>8} {'vs copy':>8}", "-" * 63]
    for r in rows:
        lines.append(f"{r['name']:<24} {1e3 * r['seconds']:>10.2f} {r['elements_per_s'] / 1e9:>9.3f} "
                     f"{r['GB_per_s']:>8.2f} {r['vs_copy']:>8.2f}")
    lines.append("-" * 63)
    by_name = {r["name"]: r for r in rows}
    if "numba blelloch" in by_name and "numba sequential" in by_name:
        ratio = by_name["numba blelloch"]["seconds"] / by_name["numba sequential"]["seconds"]
        lines.append(f"blelloch / numba sequential: {ratio:.2f}x the time")
    if "public linear_scan" in by_name:
        lines.append("public linear_scan: method='sequential', backend='numba', NaN/inf checks included, a fresh "
                     "output (compare the fresh-dst copy); out=: one reused output buffer")
    if rows:
        lines.append(f"bytes per row: read a, b + write h = 3 x 4 B x n = {rows[0]['bytes'] / 1e6:.1f} MB; "
                     f"the copy moves the same bytes")
    return "\n".join(lines)
