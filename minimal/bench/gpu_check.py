"""The prepared GPU check's benchmark steps (``bench/gpu_check.sh``): the rows issue 22 asks for, written as they
are measured, and the tables that summarise them.

    python -m minimal.bench.gpu_check scan OUT [--tiny]      # OUT/scan_rows.jsonl, one row per line
    python -m minimal.bench.gpu_check window OUT [--tiny]    # OUT/window_rows.jsonl
    python -m minimal.bench.gpu_check table OUT              # prints the tables from those files
    python -m minimal.bench.gpu_check v1 OUT [--tiny]        # OUT/v1_rows.jsonl (bench/gpu_check2.sh)
    python -m minimal.bench.gpu_check v1table OUT            # prints v1's table from that file

Scan shapes (B, T, C), float32: many channels (8, 4096, 8192) = 2^28 and (8, 1024, 8192) = 2^26, few channels
(1, 2^20, 256) = 2^28 and (1, 2^20, 16) = 2^24, one channel (1, 2^20, 1). Per shape, beside a device-to-device
copy of the same bytes (``gpu.copy_seconds``) and, where PyTorch has CUDA, torch.cumsum (1-D, same n) and
torch's Heinsen log scan (``gpu``'s definitions): every version's forward as a plain call (allocating its
output) and into preallocated outputs with a reused ``scan.Workspace``; v1 with K = 1, 2, 4, 8 steps loaded
ahead (``prefetch``) at the many-channel shapes (elsewhere v1 at its default K); the backward (preallocated) of
v1 (K = 1, 4, 8) and v2. ``v1``: v1 alone at the many-channel shapes, preallocated, forward at K = 1 and the
default K, backward at K = 1, 4, 8, beside the copy (the second, short check). Window
cases (B, T, f, w, s): forward v3 and the fused backward v2, allocating and preallocated, at f = 10, 16 and 32
(f = 32: 1024 threads a block, the launch that failed on the H200) and at B = 1, T = 2^20 + 1.

Every time is the best of ``REPEATS`` after a warm-up (``gpu.event_timer``, CUDA events). A variant that
raises is written as a row with ``error`` and NaN seconds, and the check goes on. ``--tiny`` runs a few
hundred elements per shape, also in the CUDA simulator (wall-clock timings, meaningless: a dry run of the
plumbing).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

import numba
import numpy as np
from numba import cuda

from cuda_kernels import scan as cs
from cuda_kernels import window as cw

from . import gpu, gpu_rows

REPEATS = 5
SCAN_CASES = [("many channels", (8, 4096, 8192)), ("many channels", (8, 1024, 8192)),
              ("few channels", (1, 2 ** 20, 256)), ("few channels", (1, 2 ** 20, 16)), ("one channel", (1, 2 ** 20, 1))]
TINY_SCAN_CASES = [("many channels", (1, 16, 8)), ("few channels", (1, 40, 2)), ("one channel", (1, 24, 1))]
WINDOW_CASES = [(64, 16385, 10, 3, 2), (64, 16385, 16, 3, 2), (64, 16385, 32, 3, 2), (1, 2 ** 20 + 1, 16, 2, 1)]
TINY_WINDOW_CASES = [(2, 21, 3, 3, 2), (1, 41, 4, 2, 1)]
PREFETCH = (1, 2, 4, 8)
BACKWARD_PREFETCH = (1, 4, 8)
VERSIONS = [("v1 loop", "sequential", {}), ("v2 Blelloch", "blelloch", {}), ("v3 chunked", "chunked", {}),
            ("v3 look-back", "chunked", {"carry": "lookback"})]
T0 = time.time()


def _log(msg):
    print(f"[{time.time() - T0:7.1f} s] {msg}", flush=True)


class Writer:
    """Appends rows to a .jsonl file as they come (a run cut short keeps what it measured)."""

    def __init__(self, path):
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)

    def __call__(self, row):
        with open(self.path, "a") as fh:
            fh.write(json.dumps(row, default=str) + "\n")
        secs = row.get("seconds", math.nan)
        _log(f"{row.get('shape')} {row['name']}: {secs * 1e3:.3f} ms, vs_copy {row.get('vs_copy', math.nan):.3f}"
             + (f"  ERROR {row['error']}" if "error" in row else ""))


def _wall_timer(repeats):
    """The simulator's stand-in for CUDA events (a dry run only)."""
    def timer(fn):
        fn()
        best = math.inf
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            cuda.synchronize()
            best = min(best, time.perf_counter() - t)
        return best
    return timer


def timers(tiny):
    if numba.config.ENABLE_CUDASIM:
        if not tiny:
            raise RuntimeError("the GPU check needs a real GPU; in the simulator only --tiny runs (a dry run)")
        return _wall_timer(1), lambda nbytes, timer: timer(lambda: None) or 1e-6
    gpu.require_gpu()
    return gpu.event_timer(REPEATS), gpu.copy_seconds


def timed(write, name, fn, timer, nbytes, copy_s, tag, torch_copy_s=None, **extra):
    """Time fn, write its row (or an error row); returns the seconds (NaN on error). The row's vs_copy is
    copy_s / seconds, and with ``torch_copy_s`` (a torch copy of the same bytes) vs_torch_copy too."""
    try:
        t = timer(fn)
    except Exception as e:  # noqa: BLE001 - a failing variant is a result, and the check goes on
        write(error_row(name, e, tag, bytes=nbytes, **extra))
        return math.nan
    more = {"vs_torch_copy": torch_copy_s / t} if torch_copy_s else {}
    write(gpu_rows.make_row(name, t, nbytes, copy_s, **tag, **more, **extra))
    return t


def error_row(name, e, tag, **extra):
    """The row of a variant (or a setup) that raised: NaN seconds and the error, so the check goes on."""
    return {"name": name, "seconds": math.nan, "error": f"{type(e).__name__}: {e}"[:500], **tag, **extra}


def preallocated_grads(shape, dtype):
    """Preallocated (da, db, dh0) for a (B, T, C) scan."""
    return (cuda.device_array(shape, dtype=dtype), cuda.device_array(shape, dtype=dtype),
            cuda.device_array((shape[0], shape[2]), dtype=dtype))


def _scan_copies(write, n, item, timer, copy, tag):
    """The forward's and backward's bytes for n elements and same-run copies of as many bytes, written as rows;
    returns (forward bytes, backward bytes, forward copy seconds, backward copy seconds)."""
    fwd_b, bwd_b = gpu_rows.scan_bytes("forward", n, item), gpu_rows.scan_bytes("backward", n, item)
    copy_f, copy_b = copy(fwd_b, timer), copy(bwd_b, timer)
    write(gpu_rows.make_row("copy (same bytes as forward)", copy_f, fwd_b, copy_f, **tag))
    write(gpu_rows.make_row("copy (same bytes as backward)", copy_b, bwd_b, copy_b, **tag))
    return fwd_b, bwd_b, copy_f, copy_b


def arrays(shape, dtype, rng):
    n = int(np.prod(shape))
    a = (0.5 + 0.5 * rng.random(n, dtype=np.float32)).astype(dtype).reshape(shape)
    b = rng.standard_normal(n, dtype=np.float32).astype(dtype).reshape(shape)
    return a, b


def scan_check(out_dir, tiny=False, dtype=np.float32):
    timer, copy = timers(tiny)
    write = Writer(os.path.join(out_dir, "scan_rows.jsonl"))
    torch = None if numba.config.ENABLE_CUDASIM else gpu.cuda_torch()
    ttimer = gpu.torch_timer(torch, REPEATS) if torch is not None else None
    rng = np.random.default_rng(0)
    item = np.dtype(dtype).itemsize
    for regime, shape in TINY_SCAN_CASES if tiny else SCAN_CASES:
        _log(f"scan {regime} {shape}")
        tag = {"regime": regime, "shape": list(shape), "dtype": np.dtype(dtype).name}
        try:
            a_h, b_h = arrays(shape, dtype, rng)
            a, b = cuda.to_device(a_h), cuda.to_device(b_h)
            dh = cuda.to_device(rng.standard_normal(a_h.size, dtype=np.float32).astype(dtype).reshape(shape))
            h = cs.linear_scan(a, b, None, "blelloch")
            outs = {"h": cuda.device_array(shape, dtype=dtype), "grads": preallocated_grads(shape, dtype)}
        except Exception as e:  # noqa: BLE001
            write(error_row("setup", e, tag))
            continue
        n = a_h.size
        fwd_b, bwd_b, copy_f, copy_b = _scan_copies(write, n, item, timer, copy, tag)
        if torch is not None:
            tdt = getattr(torch, np.dtype(dtype).name)
            flat = torch.randn(n, device="cuda", dtype=tdt)
            cs_b = gpu_rows.scan_bytes("torch_cumsum", n, item)
            timed(write, "torch.cumsum (1-D, same n)", lambda: torch.cumsum(flat, 0), ttimer, cs_b,
                   copy(cs_b, timer), tag)
            del flat
            log_a = torch.log(torch.as_tensor(a_h, device="cuda"))
            log_b = torch.log(torch.abs(torch.as_tensor(b_h, device="cuda")))

            def heinsen():
                a_star = torch.cumsum(log_a, dim=1)
                return a_star + torch.logcumsumexp(log_b - a_star, dim=1)
            timed(write, "torch Heinsen log scan", heinsen, ttimer, fwd_b, copy_f, tag)
            del log_a, log_b
        ws = cs.Workspace()
        many = regime == "many channels"
        for label, method, kw in VERSIONS:
            kw = dict(kw, block=8) if tiny else kw   # the simulator runs one Python thread per CUDA thread
            timed(write, f"{label} forward", lambda: cs.linear_scan(a, b, None, method, **kw), timer, fwd_b, copy_f,
                   tag, method=method, **kw)
            v1_ks = PREFETCH if many else (cs.DEFAULT_PREFETCH_FORWARD,)   # every v1 row names its K
            for K in (v1_ks if method == "sequential" else (None,)):
                kk = dict(kw, prefetch=K) if K is not None else kw
                timed(write, f"{label} forward (preallocated)" + (f" K={K}" if K else ""),
                       lambda: cs.linear_scan(a, b, None, method, out=outs["h"], workspace=ws, **kk), timer, fwd_b,
                       copy_f, tag, method=method, **kk)
            if method == "chunked" or (method == "sequential" and not many):
                continue  # backward rows: v1 (K = 1, 4, 8) where it is the fast version, v2 everywhere
            for K in (BACKWARD_PREFETCH if method == "sequential" else (None,)):
                kk = dict(kw, prefetch=K) if K is not None else kw
                timed(write, f"{label} backward (preallocated)" + (f" K={K}" if K else ""),
                       lambda: cs.linear_scan_backward(a, h, dh, None, method, out=outs["grads"], workspace=ws, **kk),
                       timer, bwd_b, copy_b, tag, method=method, **kk)
        del a, b, dh, h, outs, ws
    _log("scan done")


def v1_check(out_dir, tiny=False, dtype=np.float32):
    """v1 at the many-channel shapes into preallocated outputs: forward at K = 1 and the default K, backward at
    K = ``BACKWARD_PREFETCH``, beside a copy of the same bytes; plus the allocating default call."""
    timer, copy = timers(tiny)
    write = Writer(os.path.join(out_dir, "v1_rows.jsonl"))
    rng = np.random.default_rng(0)
    item = np.dtype(dtype).itemsize
    cases = [c for c in (TINY_SCAN_CASES if tiny else SCAN_CASES) if c[0] == "many channels"]
    for regime, shape in cases:
        _log(f"v1 {regime} {shape}")
        tag = {"regime": regime, "shape": list(shape), "dtype": np.dtype(dtype).name}
        try:
            a_h, b_h = arrays(shape, dtype, rng)
            a, b = cuda.to_device(a_h), cuda.to_device(b_h)
            dh = cuda.to_device(b_h[:, ::-1].copy())
            h = cs.linear_scan(a, b, None, "sequential", prefetch=1)
            out_h = cuda.device_array(shape, dtype=dtype)
            grads = preallocated_grads(shape, dtype)
        except Exception as e:  # noqa: BLE001
            write(error_row("setup", e, tag))
            continue
        n = a_h.size
        fwd_b, bwd_b, copy_f, copy_b = _scan_copies(write, n, item, timer, copy, tag)
        ws = cs.Workspace()
        timed(write, "v1 loop forward", lambda: cs.linear_scan(a, b, None, "sequential"), timer, fwd_b, copy_f,
               tag, method="sequential", prefetch=cs.DEFAULT_PREFETCH_FORWARD)
        for K in sorted({1, cs.DEFAULT_PREFETCH_FORWARD}):
            timed(write, f"v1 loop forward (preallocated) K={K}",
                   lambda: cs.linear_scan(a, b, None, "sequential", prefetch=K, out=out_h, workspace=ws), timer,
                   fwd_b, copy_f, tag, method="sequential", prefetch=K)
        for K in BACKWARD_PREFETCH:
            timed(write, f"v1 loop backward (preallocated) K={K}",
                   lambda: cs.linear_scan_backward(a, h, dh, None, "sequential", prefetch=K, out=grads, workspace=ws),
                   timer, bwd_b, copy_b, tag, method="sequential", prefetch=K)
        del a, b, dh, h, out_h, grads, ws
    _log("v1 done")


def v1_tables(out_dir):
    """v1's rows (``v1_check``) as fraction of copy, K across, one line per shape and direction."""
    rows = read(os.path.join(out_dir, "v1_rows.jsonl"))
    by = {}
    for r in rows:
        by.setdefault(tuple(r.get("shape", ())), {})[r["name"]] = r
    Ks = sorted({1, cs.DEFAULT_PREFETCH_FORWARD} | set(BACKWARD_PREFETCH))   # the K that v1_check times
    lines = [f"\nv1 (preallocated), fraction of copy by K (defaults: forward K = {cs.DEFAULT_PREFETCH_FORWARD}, "
             f"backward K = {cs.DEFAULT_PREFETCH_BACKWARD}):",
             "| shape | direction | " + " | ".join(f"K={K}" for K in Ks) + " | allocating, default K |",
             "|---" * (len(Ks) + 3) + "|"]
    for shape, d in by.items():
        for kind in ("forward", "backward"):
            cells = [fmt(d.get(f"v1 loop {kind} (preallocated) K={K}", {}).get("vs_copy")) for K in Ks]
            alloc = fmt(d.get("v1 loop forward", {}).get("vs_copy")) if kind == "forward" else "-"
            lines.append(f"| {shape} | {kind} | " + " | ".join(cells) + f" | {alloc} |")
    errors = [r for r in rows if "error" in r]
    lines.append(f"\n{len(errors)} failed variant(s)" + "".join(f"\n  {r.get('shape')} {r['name']}: {r['error']}"
                                                                for r in errors))
    text = "\n".join(lines)
    print(text)
    return text


def window_check(out_dir, tiny=False, dtype=np.float32):
    timer, copy = timers(tiny)
    write = Writer(os.path.join(out_dir, "window_rows.jsonl"))
    rng = np.random.default_rng(0)
    for (B, T, f, w, s) in TINY_WINDOW_CASES if tiny else WINDOW_CASES:
        _log(f"window {(B, T, f, w, s)}")
        tag = {"regime": f"f={f} w={w} s={s}", "shape": [B, T, f], "dtype": np.dtype(dtype).name}
        args, T_out = gpu.window_problem(rng, B, T, f, w, s, dtype)
        nb = gpu_rows.window_bytes(B, T, f, w, s, np.dtype(dtype).itemsize)
        copy_t = copy(nb, timer)
        write(gpu_rows.make_row("copy (same bytes)", copy_t, nb, copy_t, **tag))
        sb = {"scan_block": 8} if tiny else {}   # the scan over segment totals, small in the simulator
        ws = cs.Workspace()
        o = cuda.device_array((B, T_out, f), dtype=dtype)
        g = gpu.window_grads(args)
        n_seg = cw.plan_segments(B, T_out, f)[0]
        t_f = timed(write, "forward v3", lambda: cw.gril_forward(*args, version=3, **sb), timer, nb, copy_t, tag,
                     segments=n_seg)
        t_fp = timed(write, "forward v3 (preallocated)", lambda: cw.gril_forward(*args, version=3, out=o, workspace=ws,
                                                                                   **sb),
                      timer, nb, copy_t, tag, segments=n_seg)
        try:
            _, Z = cw.gril_forward(*args, version=3, return_Z=True, **sb)
            do = cuda.to_device(rng.standard_normal((B, T_out, f)).astype(dtype))
        except Exception as e:  # noqa: BLE001
            write(error_row("forward v3 with Z", e, tag))
            continue
        t_b = timed(write, "fused backward v2", lambda: cw.gril_backward(*args, Z, do, version=2, **sb), timer, nb,
                     copy_t, tag, segments=n_seg)
        t_bp = timed(write, "fused backward v2 (preallocated)",
                      lambda: cw.gril_backward(*args, Z, do, version=2, out=g, workspace=ws, **sb), timer, nb, copy_t,
                      tag, segments=n_seg)
        write({"name": "backward / forward", "seconds": math.nan, "allocating": t_b / t_f,
               "preallocated": t_bp / t_fp, **tag})
        del args, Z, do, o, g, ws
    _log("window done")


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def fmt(v, digits=3):
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"


def by_shape(rows):
    """Scan rows by shape, then by name: {(B, T, C): {name: row}}."""
    by = {}
    for r in rows:
        by.setdefault(tuple(r.get("shape", ())), {})[r["name"]] = r
    return by


def window_cases(wrows):
    """Window rows by case, then by name: {((B, T, f), regime): {name: row}}."""
    wby = {}
    for r in wrows:
        wby.setdefault((tuple(r.get("shape", ())), r.get("regime")), {})[r["name"]] = r
    return wby


def finish(lines, errors):
    """The table's last line (the failed variants and their errors), printed; returns the whole text."""
    lines.append(f"\n{len(errors)} failed variant(s)" + "".join(f"\n  {r.get('shape')} {r['name']}: {r['error']}"
                                                               for r in errors))
    text = "\n".join(lines)
    print(text)
    return text


def run_command(argv, doc, commands):
    """``python -m minimal.bench.MODULE COMMAND OUT [--tiny]``: runs commands[COMMAND](OUT, tiny) and returns 0,
    or prints doc and returns 2 when the words are off."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in commands:
        print(doc, file=sys.stderr)
        return 2
    commands[argv[0]](argv[1], "--tiny" in argv)
    return 0


def tables(out_dir):
    """The issue's table (fraction of copy, forward), allocating and preallocated; the K sweep; the backward;
    the window."""
    rows = read(os.path.join(out_dir, "scan_rows.jsonl"))
    by = by_shape(rows)
    cols = [label for label, _, _ in VERSIONS]

    def frac(d, name):
        return fmt(d.get(name, {}).get("vs_copy"))

    lines = []
    for suffix in ("", " (preallocated)"):
        lines.append(f"\nscan forward, fraction of copy{suffix or ' (each call allocates its output)'}:")
        lines.append("| shape (B, T, C) | " + " | ".join(cols) + " | torch cumsum (1-D) | torch Heinsen |")
        lines.append("|---" * (len(cols) + 3) + "|")
        for shape, d in by.items():
            v1 = f"{cols[0]} forward{suffix}"   # preallocated: K = 1 (the sweep's first), else the default K
            v1 = next((f"{v1} K={K}" for K in (1, cs.DEFAULT_PREFETCH_FORWARD) if suffix and f"{v1} K={K}" in d), v1)
            cells = [frac(d, v1)] + [frac(d, f"{c} forward{suffix}") for c in cols[1:]]
            lines.append(f"| {shape} | " + " | ".join(cells) + f" | {frac(d, 'torch.cumsum (1-D, same n)')} | "
                         f"{frac(d, 'torch Heinsen log scan')} |")
    lines.append("\nv1 forward (preallocated), fraction of copy by K (steps loaded ahead):")
    lines.append("| shape | " + " | ".join(f"K={K}" for K in PREFETCH) + " |")
    lines.append("|---" * (len(PREFETCH) + 1) + "|")
    for shape, d in by.items():
        if f"v1 loop forward (preallocated) K={PREFETCH[0]}" in d:
            lines.append(f"| {shape} | " + " | ".join(frac(d, f"v1 loop forward (preallocated) K={K}")
                                                       for K in PREFETCH) + " |")
    lines.append("\nbackward (preallocated), fraction of copy of the backward's bytes:")
    for shape, d in by.items():
        cells = [f"{n.replace(' backward (preallocated)', '')}: {frac(d, n)}" for n in d
                 if "backward (preallocated)" in n]
        if cells:
            lines.append(f"  {shape}: " + ", ".join(cells))
    errors = [r for r in rows if "error" in r]
    wrows = read(os.path.join(out_dir, "window_rows.jsonl"))
    lines.append("\nwindow (GRIL), fraction of copy; backward / forward:")
    lines.append("| case | forward v3 | forward v3 prealloc | backward/forward | backward/forward prealloc |")
    lines.append("|---|---|---|---|---|")
    for (shape, regime), d in window_cases(wrows).items():
        ratio = d.get("backward / forward", {})
        lines.append(f"| {shape} {regime} | {frac(d, 'forward v3')} | {frac(d, 'forward v3 (preallocated)')} | "
                     f"{fmt(ratio.get('allocating'), 2)} | {fmt(ratio.get('preallocated'), 2)} |")
    errors += [r for r in wrows if "error" in r]
    return finish(lines, errors)


def main(argv=None):
    return run_command(argv, __doc__, {"scan": scan_check, "window": window_check, "table": lambda out, _: tables(out),
                                 "v1": v1_check, "v1table": lambda out, _: v1_tables(out)})


if __name__ == "__main__":
    sys.exit(main())
