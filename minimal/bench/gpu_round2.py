"""GPU round 2 (issue 35): the rows of the issue's table measured again in one run, v4 (``lookback.py``) beside
the earlier versions, and where the window kernel's time goes. Run by ``bench/gpu_round2.sh``:

    python -m minimal.bench.gpu_round2 scan OUT [--tiny]     # OUT/scan_rows.jsonl, one row per line, as measured
    python -m minimal.bench.gpu_round2 window OUT [--tiny]   # OUT/window_rows.jsonl (rows and per-kernel phases)
    python -m minimal.bench.gpu_round2 table OUT             # prints the issue's table from those files

Every time is the best of ``REPEATS`` after a warm-up, with CUDA events around the host call (so a call's
launch overhead counts, as a caller sees it), float32, outputs preallocated and temporaries from a reused
``scan.Workspace``. Anchors in the same run: a device-to-device copy of the same bytes by numba
(``gpu.copy_seconds``, the anchor of the committed H200 rows: ``vs_copy``) and by torch (``vs_torch_copy``:
``dst.copy_(src)``), torch.cumsum (1-D, same n) and torch's Heinsen log scan; ``launch floor``: an empty
numba kernel timed the same way, the host's cost of one launch, which bounds the small shapes.

Phases (window kernels, and v4 at its defaults at each scan shape): one call's kernels, each between two CUDA
events recorded around its launch (numba's ``_LaunchConfiguration.__call__`` wrapped for the measurement), beside
the call's total; the difference is host time around and between launches. A variant that raises is written as a row with ``error`` and the run goes on.
``--tiny`` is a dry run of the plumbing at a few hundred elements (also in the simulator).
"""
from __future__ import annotations

import math
import os
import sys
import time

import numba
import numpy as np
from numba import cuda

from cuda_kernels import lookback
from cuda_kernels import scan as cs
from cuda_kernels import window as cw

from . import gpu, gpu_rows
from .gpu_check import (Writer, arrays, by_shape, error_row, finish, fmt, preallocated_grads, read, run_command, timed,
                        timers, window_cases)

REPEATS = 7
MANY = (8, 4096, 8192)
FEW256 = (1, 2 ** 20, 256)
FEW16 = (1, 2 ** 20, 16)
ONE = (1, 2 ** 20, 1)
SCAN_CASES = [FEW256, FEW16, ONE, MANY]   # the open rows first
TINY_SCAN_CASES = [(1, 16, 8), (1, 40, 2), (1, 24, 1)]
V4_FORWARD = [(256, 8), (256, 16), (256, 32), (512, 16), (128, 32), (1024, 8)]   # (block, K)
V4_BACKWARD = [(256, 16), (256, 32), (512, 16)]
WINDOW_CASES = [(64, 16385, 10, 3, 2), (64, 16385, 16, 3, 2), (64, 16385, 32, 3, 2), (1, 2 ** 20 + 1, 16, 2, 1)]
TINY_WINDOW_CASES = [(2, 21, 3, 3, 2), (1, 41, 4, 2, 1)]
T0 = time.time()


def _log(msg):
    print(f"[{time.time() - T0:7.1f} s] {msg}", flush=True)


def _tag(shape, **extra):
    return {"shape": list(shape), "dtype": "float32", **extra}


def _time_row(write, name, fn, timer, nbytes, copies, tag, **extra):
    """Time fn and write its row: vs_copy (numba copy), vs_torch_copy; an error row if it raises. copies: (numba
    copy seconds, torch copy seconds or None)."""
    return timed(write, name, fn, timer, nbytes, copies[0], tag, torch_copy_s=copies[1], **extra)


@cuda.jit
def _empty_kernel(x):
    pass


def _torch_copy(torch, ttimer, nbytes):
    n = max(1, nbytes // 2)
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return ttimer(lambda: dst.copy_(src))


def scan_round(out_dir, tiny=False):
    timer, copy = timers(tiny)
    write = Writer(os.path.join(out_dir, "scan_rows.jsonl"))
    torch = None if numba.config.ENABLE_CUDASIM else gpu.cuda_torch()
    ttimer = gpu.torch_timer(torch, REPEATS) if torch is not None else None
    dummy = cuda.device_array(1, dtype=np.float32)
    t = timer(lambda: _empty_kernel[1, 32](dummy))
    write({"name": "launch floor (empty numba kernel)", "seconds": t})
    rng = np.random.default_rng(0)
    for shape in TINY_SCAN_CASES if tiny else SCAN_CASES:
        _log(f"scan {shape}")
        tag = _tag(shape)
        try:
            a_h, b_h = arrays(shape, np.float32, rng)
            a, b = cuda.to_device(a_h), cuda.to_device(b_h)
            dh = cuda.to_device(rng.standard_normal(a_h.size, dtype=np.float32).reshape(shape))
            h = cs.linear_scan(a, b, None, "blelloch")
            out_h = cuda.device_array(shape, dtype=np.float32)
            grads = preallocated_grads(shape, np.float32)
        except Exception as e:  # noqa: BLE001
            write(error_row("setup", e, tag))
            continue
        n = a_h.size
        fwd_b, bwd_b = gpu_rows.scan_bytes("forward", n, 4), gpu_rows.scan_bytes("backward", n, 4)
        cf, cb = copy(fwd_b, timer), copy(bwd_b, timer)
        tf = _torch_copy(torch, ttimer, fwd_b) if torch is not None else None
        tb = _torch_copy(torch, ttimer, bwd_b) if torch is not None else None
        write(gpu_rows.make_row("copy (same bytes as forward)", cf, fwd_b, cf, torch_copy_seconds=tf, **tag))
        write(gpu_rows.make_row("copy (same bytes as backward)", cb, bwd_b, cb, torch_copy_seconds=tb, **tag))
        CF, CB = (cf, tf), (cb, tb)
        if torch is not None:
            flat = torch.randn(n, device="cuda", dtype=torch.float32)
            cs_b = gpu_rows.scan_bytes("torch_cumsum", n, 4)
            _time_row(write, "torch.cumsum (1-D, same n)", lambda: torch.cumsum(flat, 0), ttimer, cs_b,
                      (copy(cs_b, timer), _torch_copy(torch, ttimer, cs_b)), tag)
            del flat
            if shape[2] <= 16:   # torch's logcumsumexp along dim 1 with C > 1 takes about a second at C = 16
                log_a = torch.log(torch.as_tensor(a_h, device="cuda")).reshape(-1) if shape[2] == 1 else \
                    torch.log(torch.as_tensor(a_h, device="cuda"))
                log_b = torch.log(torch.abs(torch.as_tensor(b_h, device="cuda")))
                log_b = log_b.reshape(-1) if shape[2] == 1 else log_b
                dim = 0 if shape[2] == 1 else 1

                def heinsen():
                    a_star = torch.cumsum(log_a, dim=dim)
                    return a_star + torch.logcumsumexp(log_b - a_star, dim=dim)
                if shape[2] == 1:
                    _time_row(write, "torch Heinsen log scan (1-D)", heinsen, ttimer, fwd_b, CF, tag)
                del log_a, log_b
        ws = cs.Workspace()
        many = shape == MANY
        sb = {"block": 8} if tiny else {}
        if many:
            versions = [("v1 loop forward (preallocated) K=8", {"method": "sequential", "prefetch": 8},
                         lambda: cs.linear_scan(a, b, None, "sequential", prefetch=8, out=out_h, workspace=ws)),
                        ("v1 loop backward (preallocated) K=8", {"method": "sequential", "prefetch": 8},
                         lambda: cs.linear_scan_backward(a, h, dh, None, "sequential", prefetch=8, out=grads,
                                                         workspace=ws))]
        else:
            v2, v3, lb = {"method": "blelloch"}, {"method": "chunked"}, {"method": "chunked", "carry": "lookback"}
            versions = [("v2 Blelloch forward (preallocated)", v2,
                         lambda: cs.linear_scan(a, b, None, "blelloch", out=out_h, workspace=ws, **sb)),
                        ("v3 chunked forward (preallocated)", v3,
                         lambda: cs.linear_scan(a, b, None, "chunked", out=out_h, workspace=ws, **sb)),
                        ("v3 look-back forward (preallocated)", lb,
                         lambda: cs.linear_scan(a, b, None, "chunked", carry="lookback", out=out_h, workspace=ws,
                                                **sb)),
                        ("v2 Blelloch backward (preallocated)", v2,
                         lambda: cs.linear_scan_backward(a, h, dh, None, "blelloch", out=grads, workspace=ws, **sb)),
                        ("v3 chunked backward (preallocated)", v3,
                         lambda: cs.linear_scan_backward(a, h, dh, None, "chunked", out=grads, workspace=ws, **sb))]
        for name, fields, fn in versions:
            _time_row(write, name, fn, timer, bwd_b if "backward" in name else fwd_b, CB if "backward" in name else CF,
                      tag, **fields)
        # many channels: v4 at its default only
        v4f = [(8, 2)] if tiny else [(lookback.DEFAULT_BLOCK, lookback.DEFAULT_STEPS["forward"])] if many \
            else V4_FORWARD
        v4b = [(8, 2)] if tiny else [(lookback.DEFAULT_BLOCK, lookback.DEFAULT_STEPS["backward"])] if many \
            else V4_BACKWARD
        for block, K in v4f:
            _time_row(write, f"v4 look-back forward (preallocated) block={block} K={K}",
                      lambda: cs.linear_scan(a, b, None, "lookback", block=block, steps_per_thread=K, out=out_h,
                                             workspace=ws), timer, fwd_b, CF, tag, method="lookback", block=block,
                      steps_per_thread=K)
        for block, K in v4b:
            _time_row(write, f"v4 look-back backward (preallocated) block={block} K={K}",
                      lambda: cs.linear_scan_backward(a, h, dh, None, "lookback", block=block, steps_per_thread=K,
                                                      out=grads, workspace=ws), timer, bwd_b, CB, tag,
                      method="lookback", block=block, steps_per_thread=K)
        if not numba.config.ENABLE_CUDASIM:   # where v4's time goes: its kernel between events vs the whole call
            _phase_rows(write, (("v4 forward", lambda: cs.linear_scan(a, b, None, "lookback", out=out_h,
                                                                      workspace=ws)),
                                ("v4 backward", lambda: cs.linear_scan_backward(a, h, dh, None, "lookback",
                                                                                out=grads, workspace=ws))), tag)
        if not tiny:   # check v4 against v2 on this shape (the default configuration), forward and backward
            try:
                ref_h = cs.linear_scan(a, b, None, "blelloch").copy_to_host()
                got = cs.linear_scan(a, b, None, "lookback").copy_to_host()
                ref_g = cs.linear_scan_backward(a, h, dh, None, "blelloch")[0].copy_to_host()
                got_g = cs.linear_scan_backward(a, h, dh, None, "lookback")[0].copy_to_host()
                write({"name": "v4 vs v2 max relative difference", "seconds": math.nan,
                       "forward": float(np.max(np.abs(got - ref_h)) / max(1.0, np.max(np.abs(ref_h)))),
                       "backward_da": float(np.max(np.abs(got_g - ref_g)) / max(1.0, np.max(np.abs(ref_g)))), **tag})
            except Exception as e:  # noqa: BLE001
                write(error_row("v4 vs v2 check", e, tag))
        del a, b, dh, h, out_h, grads, ws
    _log("scan done")


def _phases(fn, repeats=3):
    """(total ms, [(kernel, grid, block, ms)]) of the fastest of ``repeats`` calls of fn, each kernel between
    two events recorded around its launch."""
    from numba.cuda import dispatcher as D

    orig = D._LaunchConfiguration.__call__
    log = []

    def wrapped(self, *args):
        e0 = cuda.event()
        e0.record()
        r = orig(self, *args)
        e1 = cuda.event()
        e1.record()
        log.append((self.dispatcher.py_func.__name__, str(self.griddim), str(self.blockdim), e0, e1))
        return r

    fn()
    cuda.synchronize()
    best = None
    for _ in range(repeats):
        log.clear()
        D._LaunchConfiguration.__call__ = wrapped
        try:
            s, e = cuda.event(), cuda.event()
            s.record()
            fn()
            e.record()
            e.synchronize()
        finally:
            D._LaunchConfiguration.__call__ = orig
        total = cuda.event_elapsed_time(s, e)
        phases = [(k, g, b, cuda.event_elapsed_time(e0, e1)) for k, g, b, e0, e1 in log]
        if best is None or total < best[0]:
            best = (total, phases)
    return best


def _phase_rows(write, calls, tag):
    """For each (name, fn) of calls, the row ``phases: name`` of ``_phases(fn)`` (total and per-kernel ms), or
    an error row if it raises."""
    for name, fn in calls:
        try:
            total, phases = _phases(fn)
            write({"name": f"phases: {name}", "seconds": total / 1e3, "total_ms": total,
                   "kernels": [{"kernel": k, "grid": gd, "block": bd, "ms": ms} for k, gd, bd, ms in phases],
                   "kernels_ms": sum(p[3] for p in phases), **tag})
        except Exception as e:  # noqa: BLE001
            write(error_row(f"phases: {name}", e, tag))


def window_round(out_dir, tiny=False):
    timer, copy = timers(tiny)
    write = Writer(os.path.join(out_dir, "window_rows.jsonl"))
    rng = np.random.default_rng(0)
    for (B, T, f, w, s) in TINY_WINDOW_CASES if tiny else WINDOW_CASES:
        _log(f"window {(B, T, f, w, s)}")
        tag = {"regime": f"f={f} w={w} s={s}", "shape": [B, T, f], "dtype": "float32"}
        try:
            args, T_out = gpu.window_problem(rng, B, T, f, w, s, np.float32)
            nb = gpu_rows.window_bytes(B, T, f, w, s, 4)
            copy_t = copy(nb, timer)
            write(gpu_rows.make_row("copy (same bytes)", copy_t, nb, copy_t, **tag))
            sb = {"scan_block": 8} if tiny else {}
            ws = cs.Workspace()
            o = cuda.device_array((B, T_out, f), dtype=np.float32)
            g = gpu.window_grads(args)
            n_seg = cw.plan_segments(B, T_out, f)[0]
            _, Z = cw.gril_forward(*args, version=3, return_Z=True, **sb)
            do = cuda.to_device(rng.standard_normal((B, T_out, f)).astype(np.float32))
        except Exception as e:  # noqa: BLE001
            write(error_row("setup", e, tag))
            continue
        # flops: per window and entry of Z, U = C Q C^T costs about 2 w (w + 1) flops (C Q once per row, then a
        # dot with C's row), the update 2, the readout Z C q 2 (w + 1) per entry: the forward's arithmetic
        flops = B * T_out * f * f * (2 * w * (w + 1) + 2 + 2 * (w + 1))
        fwd = lambda: cw.gril_forward(*args, version=3, out=o, workspace=ws, **sb)  # noqa: E731
        bwd = lambda: cw.gril_backward(*args, Z, do, version=2, out=g, workspace=ws, **sb)  # noqa: E731
        t_f = _time_row(write, "forward v3 (preallocated)", fwd, timer, nb, (copy_t, None), tag, segments=n_seg,
                        flops=flops)
        t_b = _time_row(write, "fused backward v2 (preallocated)", bwd, timer, nb, (copy_t, None), tag,
                        segments=n_seg)
        write({"name": "backward / forward", "seconds": math.nan, "preallocated": t_b / t_f, **tag})
        for seg in sorted({1, max(1, n_seg // 4), n_seg * 4}):   # the split's effect on the forward
            if seg == n_seg or seg > T_out:
                continue
            _time_row(write, f"forward v3 (preallocated) segments={seg}",
                      lambda: cw.gril_forward(*args, version=3, segments=seg, out=o, workspace=ws, **sb), timer, nb,
                      (copy_t, None), tag, segments=seg)
        if not numba.config.ENABLE_CUDASIM:
            _phase_rows(write, (("forward v3", fwd), ("fused backward v2", bwd)), tag)
        del args, Z, do, o, g, ws
    _log("window done")


def _best(d, prefix):
    """(name, row) of the fastest finite row whose name starts with prefix."""
    cand = [(r["seconds"], n, r) for n, r in d.items() if n.startswith(prefix) and "error" not in r
            and isinstance(r.get("seconds"), (int, float)) and math.isfinite(r["seconds"])]
    if not cand:
        return None, None
    _, n, r = min(cand)
    return n, r


def tables(out_dir):
    rows = read(os.path.join(out_dir, "scan_rows.jsonl"))
    by = by_shape(rows)
    lines = ["issue 35's table, float32, preallocated outputs; fractions of a same-run copy of the same bytes "
             "(numba copy | torch copy)", "| case | ours | anchor in the same run | goal | met |", "|---|---|---|---|---|"]

    def frac(r):
        if r is None:
            return "-"
        return f"{fmt(r.get('vs_copy'))} | {fmt(r.get('vs_torch_copy'))}"

    def us(r):
        return "-" if r is None else f"{r['seconds'] * 1e6:.1f} us"

    m = by.get(MANY, {})
    cum = m.get("torch.cumsum (1-D, same n)")
    for kind in ("forward", "backward"):
        r = m.get(f"v1 loop {kind} (preallocated) K=8")
        ok = r is not None and r.get("vs_copy", 0) >= 0.8
        lines.append(f"| many channels {MANY} {kind} | v1 K=8 {frac(r)} ({us(r)}) | torch.cumsum {frac(cum)} | "
                     f">= 0.8 (keep) | {'yes' if ok else 'no'} |")
    for shape, goal in ((FEW256, 0.8), (FEW16, 0.8)):
        d = by.get(shape, {})
        cum = d.get("torch.cumsum (1-D, same n)")
        n, r = _best(d, "v")
        fwd = {k: v for k, v in d.items() if "forward" in k}
        n, r = _best(fwd, "v")
        ok = r is not None and r.get("vs_copy", 0) >= goal and (shape != FEW256 or cum is None
                                                                 or r["vs_copy"] >= cum.get("vs_copy", 0))
        lines.append(f"| few channels {shape} forward | {n}: {frac(r)} ({us(r)}) | torch.cumsum {frac(cum)} | "
                     f">= {goal}{' and >= torch.cumsum' if shape == FEW256 else ''} | {'yes' if ok else 'no'} |")
    d = by.get(ONE, {})
    fwd = {k: v for k, v in d.items() if "forward" in k}
    n, r = _best(fwd, "v")
    hein = d.get("torch Heinsen log scan (1-D)")
    cum = d.get("torch.cumsum (1-D, same n)")
    ok = r is not None and hein is not None and r["seconds"] <= hein["seconds"]
    lines.append(f"| one channel {ONE} forward | {n}: {frac(r)} ({us(r)}) | torch Heinsen {frac(hein)} ({us(hein)}), "
                 f"cumsum {frac(cum)} ({us(cum)}) | time <= torch Heinsen | {'yes' if ok else 'no'} |")
    for shape in (FEW256, FEW16, ONE):
        d = by.get(shape, {})
        bwd = {k: v for k, v in d.items() if "backward" in k}
        n, r = _best(bwd, "v")
        ok = r is not None and r.get("vs_copy", 0) >= 0.8
        lines.append(f"| backward {shape} | {n}: {frac(r)} ({us(r)}) | | >= 0.8 | {'yes' if ok else 'no'} |")
    floor = next((r for r in rows if r["name"].startswith("launch floor")), None)
    if floor:
        lines.append(f"\nlaunch floor (an empty numba kernel, same timer): {floor['seconds'] * 1e6:.1f} us")
    for shape, d in by.items():
        c = d.get("copy (same bytes as forward)")
        if c:
            lines.append(f"copy {shape}: numba {c['seconds'] * 1e6:.1f} us, torch "
                         f"{(c.get('torch_copy_seconds') or math.nan) * 1e6:.1f} us for {c['bytes'] / 1e6:.1f} MB")
    lines.append("\nall scan rows (fraction of numba copy | torch copy, time):")
    for shape, d in by.items():
        for n, r in d.items():
            if n.startswith("v") and "error" not in r and "vs_copy" in r:
                lines.append(f"  {shape} {n}: {frac(r)} ({us(r)})")
            elif n.startswith("phases:"):
                ks = ", ".join(f"{k['kernel']} {k['ms'] * 1e3:.1f} us" for k in r["kernels"])
                lines.append(f"  {shape} {n} (defaults): call {r['total_ms'] * 1e3:.1f} us, kernels: {ks}")
            elif n.startswith("v4 vs v2"):
                lines.append(f"  {shape} {n}: forward {r.get('forward', math.nan):.2e}, "
                             f"backward da {r.get('backward_da', math.nan):.2e}")
    wrows = read(os.path.join(out_dir, "window_rows.jsonl"))
    lines.append("\nwindow (GRIL), float32, preallocated: forward fraction of copy (goal >= 0.3), backward / forward "
                 "(goal <= 3), forward GFLOP/s")
    lines.append("| case | forward v3 | backward / forward | forward GFLOP/s | met |")
    lines.append("|---|---|---|---|---|")
    for (shape, regime), d in window_cases(wrows).items():
        fr = d.get("forward v3 (preallocated)", {})
        ratio = d.get("backward / forward", {}).get("preallocated")
        gf = fr.get("flops", math.nan) / fr["seconds"] / 1e9 if fr.get("seconds") else math.nan
        ok = (fr.get("vs_copy") or 0) >= 0.3 and ratio is not None and ratio <= 3
        lines.append(f"| {shape} {regime} | {fmt(fr.get('vs_copy'))} ({fr.get('seconds', math.nan) * 1e3:.3f} ms) | "
                     f"{fmt(ratio, 2)} | {gf:.0f} | {'yes' if ok else 'no'} |")
        for n, r in d.items():
            if n.startswith("forward v3 (preallocated) segments="):
                lines.append(f"  {n}: {fmt(r.get('vs_copy'))} ({r['seconds'] * 1e3:.3f} ms)")
            if n.startswith("phases:"):
                ks = ", ".join(f"{k['kernel']} {k['grid']}x{k['block']} {k['ms']:.3f}" for k in r["kernels"])
                lines.append(f"  {n}: total {r['total_ms']:.3f} ms, kernels {r['kernels_ms']:.3f} ms: {ks}")
    return finish(lines, [r for r in rows + wrows if "error" in r])


def main(argv=None):
    return run_command(argv, __doc__, {"scan": scan_round, "window": window_round, "table": lambda out, _: tables(out)})


if __name__ == "__main__":
    sys.exit(main())
