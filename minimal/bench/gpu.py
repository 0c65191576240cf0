"""GPU benchmark of the ``cuda_kernels`` scan and window kernels, as ratios to quantities measured in the same run.

    python -m minimal.bench.gpu scan [--quick]      # or: python -m minimal bench scan --backend cuda
    python -m minimal.bench.gpu window [--quick]    # or: python -m minimal bench window --backend cuda
    python -m minimal.bench.gpu dispatch ROWS...    # cuda_kernels.dispatch.TABLE from result files (no GPU)

Every time is the best of ``repeats`` runs after one warm-up, measured with CUDA events around the launch(es)
on device-resident data (no host transfers). Each row reports
    seconds, GB/s = bytes / seconds, vs_copy = (time of a device-to-device copy moving the same bytes) / seconds,
so vs_copy = 1 means the kernel runs at copy bandwidth. Bytes are the ideal traffic, each array read or
written once (``gpu_rows.scan_bytes``, ``gpu_rows.window_bytes``); a copy of n bytes moves 2n (read + write), so
the reference copy is of bytes / 2. Where PyTorch is installed, the same run also times torch.cumsum over a
contiguous 1-D tensor of the same element count and a log-space (Heinsen 2023) scan built on torch.logcumsumexp
over the same (B, T, C) shape; ``vs_torch_cumsum`` and ``vs_torch_heinsen`` are their times divided by ours.

Regimes (``gpu_rows.shapes_for``): many channels (B*C = 65536, T = size / 65536 in 1024 .. 8192) and few
channels with long T (B*C = min(256, size / 2^20), so T >= 2^20 once size >= 2^20). Results are written as JSON
under ``out_dir`` in a file named after the GPU. The benchmark refuses to run in the CUDA simulator. The rows'
bookkeeping (shapes, bytes, rows, table, JSON; no GPU needed) is in ``gpu_rows.py``; ``gpu_check.py`` and
``gpu_round2.py`` are the prepared GPU checks (``bench/gpu_check.sh``, ``bench/gpu_round2.sh``) built on both.
"""
from __future__ import annotations

import math
import sys

import numba
import numpy as np
from numba import cuda

from cuda_kernels import scan as cs
from cuda_kernels import window as cw

from .gpu_rows import format_table, make_row, result_path, scan_bytes, shapes_for, window_bytes, write_json

__all__ = ["bench_scan", "bench_window", "window_problem", "window_grads", "require_gpu", "event_timer", "cuda_torch",
           "torch_timer", "copy_seconds", "DEFAULT_SIZES", "QUICK_SIZES", "DEFAULT_REPEATS"]

DEFAULT_SIZES = tuple(2 ** k for k in range(16, 29, 2))   # 2^16 .. 2^28 elements
QUICK_SIZES = (2 ** 16, 2 ** 20)
DEFAULT_REPEATS = 5


# ---------------------------------------------------------------------------------------------------------
# Timing on a real GPU


def require_gpu():
    if numba.config.ENABLE_CUDASIM:
        raise RuntimeError("minimal.bench.gpu needs a real CUDA GPU, but NUMBA_ENABLE_CUDASIM=1 is set: the "
                           "simulator runs one Python thread per CUDA thread, so its timings mean nothing. "
                           "Unset NUMBA_ENABLE_CUDASIM and run on a machine with a GPU.")
    if not cuda.is_available():
        raise RuntimeError("minimal.bench.gpu needs a CUDA GPU and none is available (numba.cuda.detect() "
                           "says why)")


def event_timer(repeats):
    """best-of-``repeats`` seconds of fn() after one warm-up call, measured with CUDA events."""
    def timer(fn):
        fn()
        cuda.synchronize()
        best = math.inf
        for _ in range(repeats):
            start, end = cuda.event(), cuda.event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, cuda.event_elapsed_time(start, end) / 1e3)
        return best
    return timer


def cuda_torch():
    """PyTorch where it is installed and finds a CUDA GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def torch_timer(torch, repeats):
    """``event_timer`` with torch's CUDA events (for the PyTorch baselines)."""
    def timer(fn):
        fn()
        torch.cuda.synchronize()
        best = math.inf
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        return best
    return timer


def copy_seconds(nbytes, timer):
    """A device-to-device copy that moves ``nbytes`` in total (reads and writes nbytes / 2)."""
    n = max(1, nbytes // 2)
    src = cuda.device_array(n, dtype=np.uint8)
    dst = cuda.device_array(n, dtype=np.uint8)
    return timer(lambda: dst.copy_to_device(src))


# ---------------------------------------------------------------------------------------------------------
# Row builders (separate from the GPU checks so the simulator tests can run them with a fake timer)


def _scan_rows(cases, dtype, timer, block, torch=None, torch_timer=None, copy=copy_seconds, preallocated=False):
    """Rows per case: the copy, torch's baselines, then every method's forward, backward and log forward (each
    call allocating its outputs, as a plain call does), the look-back carry's three; with ``preallocated``
    the same calls again writing into preallocated outputs with a reused ``scan.Workspace`` (rows named
    "... (preallocated)", ``vs_allocating`` = the allocating call's time / this one's): the kernels' time."""
    rows = []
    rng = np.random.default_rng(0)
    for regime, shape in cases:
        n = int(np.prod(shape))
        item = np.dtype(dtype).itemsize
        a = cuda.to_device(rng.uniform(0.5, 1.0, shape).astype(dtype))
        b = cuda.to_device(rng.standard_normal(shape).astype(dtype))
        dh = cuda.to_device(rng.standard_normal(shape).astype(dtype))
        h = cs.linear_scan(a, b, None, "sequential")
        tag = {"regime": regime, "shape": shape, "dtype": np.dtype(dtype).name}
        fwd_bytes, bwd_bytes = scan_bytes("forward", n, item), scan_bytes("backward", n, item)
        copy_fwd, copy_bwd = copy(fwd_bytes, timer), copy(bwd_bytes, timer)
        rows.append(make_row("copy (same bytes as forward)", copy_fwd, fwd_bytes, copy_fwd, **tag))
        torch_t = {}
        if torch is not None:
            tdt = getattr(torch, np.dtype(dtype).name)
            flat = torch.randn(n, device="cuda", dtype=tdt)
            torch_t["cumsum"] = torch_timer(lambda: torch.cumsum(flat, 0))
            log_a = torch.log(torch.as_tensor(a.copy_to_host(), device="cuda"))
            log_b = torch.log(torch.abs(torch.as_tensor(b.copy_to_host(), device="cuda")))

            def heinsen():
                a_star = torch.cumsum(log_a, dim=1)
                return a_star + torch.logcumsumexp(log_b - a_star, dim=1)
            torch_t["heinsen"] = torch_timer(heinsen)
            rows.append(make_row("torch.cumsum (1-D, same n)", torch_t["cumsum"],
                                 scan_bytes("torch_cumsum", n, item), copy(scan_bytes("torch_cumsum", n, item),
                                                                           timer), **tag))
            rows.append(make_row("torch Heinsen log scan", torch_t["heinsen"], fwd_bytes, copy_fwd, **tag))
        log_a_d = cuda.to_device(np.log(a.copy_to_host()))
        log_b_d = cuda.to_device(np.log(np.abs(b.copy_to_host())))
        alloc_t = {}
        for method in cs.METHODS:
            t_f = timer(lambda: cs.linear_scan(a, b, None, method, block=block))
            t_b = timer(lambda: cs.linear_scan_backward(a, h, dh, None, method, block=block))
            vs_torch = {}
            if torch_t:
                vs_torch = {"vs_torch_cumsum": torch_t["cumsum"] / t_f, "vs_torch_heinsen": torch_t["heinsen"] / t_f}
            rows.append(make_row(f"{method} forward", t_f, fwd_bytes, copy_fwd, **tag, **vs_torch))
            rows.append(make_row(f"{method} backward", t_b, bwd_bytes, copy_bwd, vs_forward=t_b / t_f, **tag))
            t_l = timer(lambda: cs.log_linear_scan(log_a_d, log_b_d, None, method, block=block))
            vs_h = {"vs_torch_heinsen": torch_t["heinsen"] / t_l} if torch_t else {}
            rows.append(make_row(f"{method} log forward", t_l, fwd_bytes, copy_fwd, vs_forward=t_l / t_f, **tag,
                                 **vs_h))
            if method == "chunked":
                t_red = (t_f, t_b, t_l)
            alloc_t[method] = (t_f, t_b, t_l)
        # v3 with the single-pass look-back carry; it differs from "chunked" (reduce-then-scan) only where
        # T is split across blocks. vs_reduce = the reduce carry's time / the look-back's.
        lb = dict(block=block, carry="lookback")
        t_f = timer(lambda: cs.linear_scan(a, b, None, "chunked", **lb))
        t_b = timer(lambda: cs.linear_scan_backward(a, h, dh, None, "chunked", **lb))
        t_l = timer(lambda: cs.log_linear_scan(log_a_d, log_b_d, None, "chunked", **lb))
        rows.append(make_row("chunked lookback forward", t_f, fwd_bytes, copy_fwd, vs_reduce=t_red[0] / t_f, **tag))
        rows.append(make_row("chunked lookback backward", t_b, bwd_bytes, copy_bwd, vs_forward=t_b / t_f,
                             vs_reduce=t_red[1] / t_b, **tag))
        rows.append(make_row("chunked lookback log forward", t_l, fwd_bytes, copy_fwd, vs_forward=t_l / t_f,
                             vs_reduce=t_red[2] / t_l, **tag))
        alloc_t["chunked lookback"] = (t_f, t_b, t_l)
        if preallocated:
            rows += _preallocated_rows(a, b, h, dh, log_a_d, log_b_d, alloc_t, timer, block, copy_fwd, copy_bwd,
                                       fwd_bytes, bwd_bytes, tag)
    return rows


def _preallocated_rows(a, b, h, dh, log_a, log_b, alloc_t, timer, block, copy_fwd, copy_bwd, fwd_bytes, bwd_bytes,
                       tag):
    """Every variant of ``alloc_t`` ({variant: allocating (forward, backward, log) seconds}) timed again with
    outputs and temporaries allocated once, before the timing."""
    rows = []
    ws = cs.Workspace()
    h_out, lh_out = (cuda.device_array(a.shape, dtype=a.dtype) for _ in range(2))
    grads = (cuda.device_array(a.shape, dtype=a.dtype), cuda.device_array(a.shape, dtype=a.dtype),
             cuda.device_array((a.shape[0], a.shape[2]), dtype=a.dtype))
    for variant, (f0, b0, l0) in alloc_t.items():
        kw = dict(block=block, workspace=ws)
        method = "chunked" if variant == "chunked lookback" else variant
        if variant == "chunked lookback":
            kw["carry"] = "lookback"
        t_f = timer(lambda: cs.linear_scan(a, b, None, method, out=h_out, **kw))
        t_b = timer(lambda: cs.linear_scan_backward(a, h, dh, None, method, out=grads, **kw))
        t_l = timer(lambda: cs.log_linear_scan(log_a, log_b, None, method, out=lh_out, **kw))
        rows.append(make_row(f"{variant} forward (preallocated)", t_f, fwd_bytes, copy_fwd, vs_allocating=f0 / t_f,
                             **tag))
        rows.append(make_row(f"{variant} backward (preallocated)", t_b, bwd_bytes, copy_bwd, vs_forward=t_b / t_f,
                             vs_allocating=b0 / t_b, **tag))
        rows.append(make_row(f"{variant} log forward (preallocated)", t_l, fwd_bytes, copy_fwd,
                             vs_allocating=l0 / t_l, **tag))
    return rows


def window_problem(rng, B, T, f, w, s, dtype):
    """The window benchmarks' problem on the device: ((x, Q, q, beta, A, w, s), T' = (T - w) / s + 1), with
    x, Q, q drawn from rng (Q, q scaled by 1 / sqrt(w)), beta = 1 and A in [0.9, 1] (long memory)."""
    x = cuda.to_device(rng.standard_normal((B, T, f)).astype(dtype))
    Q = cuda.to_device((rng.standard_normal((w, w)) / np.sqrt(w)).astype(dtype))
    q = cuda.to_device((rng.standard_normal(w) / np.sqrt(w)).astype(dtype))
    beta = cuda.to_device(np.ones(f, dtype=dtype))
    A = cuda.to_device(rng.uniform(0.9, 1.0, (f, f)).astype(dtype))
    return (x, Q, q, beta, A, w, s), (T - w) // s + 1


def window_grads(args):
    """Device arrays for ``gril_backward(..., out=)`` on ``window_problem``'s args: (dx, {"Q", "q", "beta", "A"})."""
    x, Q, q, beta, A = args[:5]
    return (cuda.device_array(x.shape, dtype=x.dtype),
            {k: cuda.device_array(v.shape, dtype=x.dtype) for k, v in (("Q", Q), ("q", q), ("beta", beta), ("A", A))})


def _window_rows(cases, dtype, timer, copy=copy_seconds, scan_block=None, preallocated=False):
    """Per case: the forward versions 1-3 (v3 with ``window.plan_segments``'s default split) and the
    backward versions 1-2, each with the ratios to the rows it replaces; with ``preallocated`` also forward
    v3 and backward v2 writing into preallocated outputs with a reused ``scan.Workspace`` ("... (preallocated)",
    ``vs_allocating`` = the allocating call's time / this one's)."""
    rows = []
    rng = np.random.default_rng(0)
    for (B, T, f, w, s) in cases:
        args, T_out = window_problem(rng, B, T, f, w, s, dtype)
        nb = window_bytes(B, T, f, w, s, np.dtype(dtype).itemsize)
        copy_t = copy(nb, timer)
        tag = {"regime": f"f={f} w={w} s={s}", "shape": (B, T, f), "dtype": np.dtype(dtype).name}
        t_unf = timer(lambda: cw.gril_forward(*args, version=1, scan_block=scan_block))
        t_fus = timer(lambda: cw.gril_forward(*args, version=2))
        t_seg = timer(lambda: cw.gril_forward(*args, version=3, scan_block=scan_block))
        _, Z = cw.gril_forward(*args, return_Z=True, scan_block=scan_block)
        do = cuda.to_device(rng.standard_normal((B, T_out, f)).astype(dtype))
        t_bwd = timer(lambda: cw.gril_backward(*args, Z, do, version=1, scan_block=scan_block))
        t_fbwd = timer(lambda: cw.gril_backward(*args, Z, do, version=2, scan_block=scan_block))
        n_seg = cw.plan_segments(B, T_out, f)[0]
        rows.append(make_row("unfused forward", t_unf, nb, copy_t, version=1, **tag))
        rows.append(make_row("fused forward", t_fus, nb, copy_t, version=2, vs_unfused=t_unf / t_fus, **tag))
        rows.append(make_row("segmented forward", t_seg, nb, copy_t, version=3, segments=n_seg,
                             vs_unfused=t_unf / t_seg, vs_fused=t_fus / t_seg, **tag))
        rows.append(make_row("backward", t_bwd, nb, copy_t, version=1, vs_forward=t_bwd / t_fus, **tag))
        rows.append(make_row("fused backward", t_fbwd, nb, copy_t, version=2, segments=n_seg,
                             vs_forward=t_fbwd / t_seg, vs_backward_v1=t_bwd / t_fbwd, **tag))
        if preallocated:
            ws = cs.Workspace()
            o = cuda.device_array((B, T_out, f), dtype=dtype)
            g = window_grads(args)
            t_seg_p = timer(lambda: cw.gril_forward(*args, version=3, scan_block=scan_block, out=o, workspace=ws))
            t_fbwd_p = timer(lambda: cw.gril_backward(*args, Z, do, version=2, scan_block=scan_block, out=g,
                                                      workspace=ws))
            rows.append(make_row("segmented forward (preallocated)", t_seg_p, nb, copy_t, version=3, segments=n_seg,
                                 vs_allocating=t_seg / t_seg_p, **tag))
            rows.append(make_row("fused backward (preallocated)", t_fbwd_p, nb, copy_t, version=2, segments=n_seg,
                                 vs_forward=t_fbwd_p / t_seg_p, vs_allocating=t_fbwd / t_fbwd_p, **tag))
    return rows


def _device_name():
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def bench_scan(sizes=None, out_dir="bench/results", *, shape=None, repeats=DEFAULT_REPEATS, dtype="float32",
               block=cs.DEFAULT_BLOCK, quick=False, torch=True):
    """Time the scan kernels (every method of ``scan.METHODS``: v1, v2, v3; forward, backward, log space; and
    v3 with ``carry="lookback"``) on the GPU and save a JSON table.

    Args:
        sizes: element counts B*T*C (powers of two, 2^16 .. 2^28 by default, ``QUICK_SIZES`` if quick);
            each gives the regimes of ``shapes_for``.
        out_dir: folder for ``scan_<device>.json``.
        shape: one (B, T, C) instead of ``sizes`` (as ``minimal.bench.kernels`` passes it).
        repeats: best of this many timed runs after one warm-up.
        dtype: "float32" or "float64". block: threads per block of the Blelloch kernels.
        torch: time the PyTorch baselines when PyTorch with CUDA is installed.
    Returns:
        the rows (dicts from ``make_row`` plus regime, shape, dtype and the same-run ratios).
    Raises:
        RuntimeError: in the CUDA simulator or without a GPU.
    """
    require_gpu()
    if shape is not None:
        cases = [("given", tuple(shape))]
    else:
        cases = [c for size in (sizes or (QUICK_SIZES if quick else DEFAULT_SIZES)) for c in shapes_for(size)]
    tmod = cuda_torch() if torch else None
    timer = event_timer(repeats)
    rows = _scan_rows(cases, np.dtype(dtype), timer, block, tmod, torch_timer(tmod, repeats) if tmod else None,
                      preallocated=True)
    meta = {"device": _device_name(), "repeats": repeats, "block": block, "numba": numba.__version__,
            "torch": getattr(tmod, "__version__", None), "dtype": np.dtype(dtype).name}
    path = write_json(rows, result_path(out_dir, meta["device"], "scan", dtype), meta)
    print(format_table(rows))
    print(f"\nwritten to {path}")
    return rows


def bench_window(cases=None, out_dir="bench/results", *, repeats=DEFAULT_REPEATS, dtype="float32", quick=False):
    """Time GRIL's window kernels: the forward versions 1 (unfused), 2 (fused), 3 (fused, T split into
    segments) and the backward versions 1 (elementwise) and 2 (fused). Rows: ``vs_unfused`` and
    ``vs_fused`` are those forwards' times over this one's; a backward's ``vs_forward`` is its time over the
    forward it pairs with (v1 backward: the v2 forward, as in earlier runs; v2 backward: v3), and
    ``vs_backward_v1`` the v1 backward's time over the v2 backward's.

    Args:
        cases: (B, T, f, w, s) tuples; default: f in (4, 16, 32), w = 2, s = 1 at B = 64, and f = 16 at
            B = 1, with B*T = 2^20 (2^16 if quick).
    Returns:
        the rows; also printed and saved as ``window_<device>.json`` under out_dir.
    """
    require_gpu()
    n = 2 ** 16 if quick else 2 ** 20
    cases = cases or [(64, n // 64 + 1, f, 2, 1) for f in (4, 16, 32)] + [(1, n + 1, 16, 2, 1)]
    timer = event_timer(repeats)
    rows = _window_rows(cases, np.dtype(dtype), timer, preallocated=True)
    meta = {"device": _device_name(), "repeats": repeats, "numba": numba.__version__, "dtype": np.dtype(dtype).name}
    path = write_json(rows, result_path(out_dir, meta["device"], "window", dtype), meta)
    print(format_table(rows))
    print(f"\nwritten to {path}")
    return rows


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(prog="python -m minimal.bench.gpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["scan", "window", "dispatch"],
                   help="dispatch: print dispatch.TABLE for a scan result file (no GPU needed)")
    p.add_argument("results", nargs="*", help="dispatch only: GPU checks' scan_rows.jsonl / v1_rows.jsonl "
                   "(preallocated rows: forward, backward) and/or a bench/results/scan_<GPU>.json(l) file "
                   "(allocating rows: alone, every kind; beside preallocated files, its 'log forward' rows)")
    p.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    p.add_argument("--out-dir", default="bench/results")
    args = p.parse_args(argv)
    if args.what == "dispatch":
        from cuda_kernels import dispatch

        if not args.results:
            p.error("dispatch needs a result file, e.g. bench/results/scan_NVIDIA_H100_80GB_HBM3.json")
        pre, alloc = [], []
        for path in args.results:
            rows = dispatch.load_rows(path)
            (pre if any("(preallocated)" in r["name"] for r in rows) else alloc).extend(rows)
        table = dispatch.derive_table(pre, alloc or None) if pre else dispatch.table_from_rows(alloc)
        print(dispatch.format_table(table, " + ".join(args.results)))
        return 0
    if args.results:
        p.error(f"a result file is read by 'dispatch' only, not by {args.what!r}")
    try:
        if args.what == "scan":
            bench_scan(out_dir=args.out_dir, repeats=args.repeats, dtype=args.dtype, quick=args.quick)
        else:
            bench_window(out_dir=args.out_dir, repeats=args.repeats, dtype=args.dtype, quick=args.quick)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
