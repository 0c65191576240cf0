"""Host functions that allocate nothing when asked (``out=``, ``workspace=``) and v1's software pipelining
(``prefetch=K``), in the CUDA simulator.

``out=`` results are the allocating call's numbers bit for bit (the same kernels on the same inputs), the
returned arrays are the caller's, and a second call with the same ``Workspace`` adds no buffer. v1 with K steps
loaded ahead is checked against the NumPy reference loop at lengths that are and are not multiples of K.
"""
import json

import numpy as np
import pytest
from numba import cuda

from cuda_kernels import scan as cs
from cuda_kernels import window as cw
from minimal import scan as ref
from minimal.cells import gril

from test_cuda_scan import _fast_thread_switching, assert_close, check_forward_backward, problem  # noqa: F401

METHOD_OPTIONS = [("sequential", {}), ("sequential", {"prefetch": 4}), ("blelloch", {"block": 8}),
                  ("chunked", {"block": 8, "steps_per_thread": 2}),
                  ("chunked", {"block": 8, "steps_per_thread": 2, "carry": "lookback"})]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", [1, 2, 3, 4, 8])
def test_v1_with_steps_loaded_ahead_equals_the_reference_loop(rng, K, dtype):
    for T in (1, K - 1, K, 2 * K + 1, 13):
        if T < 1:
            continue
        a, b, h0, dh = problem(rng, (2, T, 5), dtype)
        check_forward_backward(a, b, h0, dh, dtype, method="sequential", prefetch=K)
        la, lb, lh0 = np.log(a), np.log(np.abs(b)), np.log(np.abs(h0))
        log_h = cs.log_linear_scan(la, lb, lh0, "sequential", prefetch=K)
        assert_close(log_h, ref.log_scan(la, lb, lh0, backend="numpy"), dtype)
        got = cs.log_linear_scan_backward(la, lb, log_h, dh, lh0, "sequential", prefetch=K)
        want = ref.log_scan_backward(la, lb, log_h, dh, lh0, backend="numpy")
        for g, w in zip(got, want):
            assert_close(g, w, dtype)


def _device(*xs):
    return tuple(None if x is None else cuda.to_device(x) for x in xs)


@pytest.mark.parametrize("method, kw", METHOD_OPTIONS)
def test_scans_write_into_out_and_reuse_the_workspace(rng, method, kw):
    a, b, h0, dh = problem(rng, (2, 37, 3), np.float64)
    ad, bd, h0d, dhd = _device(a, b, h0, dh)
    la, lb, lh0 = _device(np.log(a), np.log(np.abs(b)), np.log(np.abs(h0)))
    h_fresh = cs.linear_scan(ad, bd, h0d, method, **kw).copy_to_host()
    g_fresh = [g.copy_to_host() for g in cs.linear_scan_backward(ad, cuda.to_device(h_fresh), dhd, h0d, method,
                                                                  **kw)]
    lh_fresh = cs.log_linear_scan(la, lb, lh0, method, **kw)
    lg_fresh = [g.copy_to_host() for g in cs.log_linear_scan_backward(la, lb, lh_fresh, dhd, lh0, method, **kw)]
    ws = cs.Workspace()
    h = cuda.device_array(a.shape)
    grads = (cuda.device_array(a.shape), cuda.device_array(a.shape), cuda.device_array(h0.shape))
    lh = cuda.device_array(a.shape)
    lgrads = (cuda.device_array(a.shape), cuda.device_array(a.shape), cuda.device_array(h0.shape))
    for call in range(2):
        assert cs.linear_scan(ad, bd, h0d, method, out=h, workspace=ws, **kw) is h
        assert cs.linear_scan_backward(ad, h, dhd, h0d, method, out=grads, workspace=ws, **kw) is grads
        assert cs.log_linear_scan(la, lb, lh0, method, out=lh, workspace=ws, **kw) is lh
        assert cs.log_linear_scan_backward(la, lb, lh, dhd, lh0, method, out=lgrads, workspace=ws, **kw) is lgrads
        if call == 0:
            n_buffers = len(ws)
        np.testing.assert_array_equal(h.copy_to_host(), h_fresh)
        for g, want in zip(grads, g_fresh):
            np.testing.assert_array_equal(g.copy_to_host(), want)
        np.testing.assert_array_equal(lh.copy_to_host(), lh_fresh.copy_to_host())
        for g, want in zip(lgrads, lg_fresh):
            np.testing.assert_array_equal(g.copy_to_host(), want)
    assert len(ws) == n_buffers   # the second round allocated nothing new
    assert_close(h.copy_to_host(), ref.linear_scan(a, b, h0, method="sequential", backend="numpy"), np.float64)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_window_writes_into_out_and_reuses_the_workspace(rng, version):
    B, T, f, w, s = 2, 21, 3, 3, 2
    p = gril.init(rng, f, w, True)
    x = rng.standard_normal((B, T, f))
    host = (x, p["Q"], p["q"], p["beta"], p["A"])
    dev = tuple(cuda.to_device(v) for v in host)
    a = dev + (w, s)
    seg = {"segments": 3} if version == 3 else {}
    o_fresh, Z_fresh = cw.gril_forward(*a, version=version, return_Z=True, **seg)
    T_out = o_fresh.shape[1]
    do = cuda.to_device(rng.standard_normal((B, T_out, f)))
    bversion = 1 if version == 1 else 2
    bseg = {"segments": 3} if bversion == 2 else {}
    dx_fresh, g_fresh = cw.gril_backward(*a, Z_fresh, do, version=bversion, **bseg)
    ws = cs.Workspace()
    o, Z = cuda.device_array((B, T_out, f)), cuda.device_array((B, T_out, f, f))
    o_only = cuda.device_array((B, T_out, f))
    out_b = (cuda.device_array((B, T, f)), {k: cuda.device_array(v.shape) for k, v in p.items()})
    for call in range(2):
        assert cw.gril_forward(*a, version=version, return_Z=True, out=(o, Z), workspace=ws, **seg) == (o, Z)
        assert cw.gril_forward(*a, version=version, out=o_only, workspace=ws, **seg) is o_only
        assert cw.gril_backward(*a, Z, do, version=bversion, out=out_b, workspace=ws, **bseg) is out_b
        if call == 0:
            n_buffers = len(ws)
        for got, want in ((o, o_fresh), (o_only, o_fresh), (Z, Z_fresh)):
            np.testing.assert_array_equal(got.copy_to_host(), want.copy_to_host())
        # backward v1 sums with atomic adds, whose order (and last bits) varies from call to call; v2 has none
        same = np.testing.assert_array_equal if bversion == 2 else (
            lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-13))
        same(out_b[0].copy_to_host(), dx_fresh.copy_to_host())
        for k in g_fresh:
            same(out_b[1][k].copy_to_host(), g_fresh[k].copy_to_host())
    assert len(ws) == n_buffers
    np.testing.assert_allclose(o.copy_to_host(), gril.gril_forward_reference(*host, w, s), rtol=1e-12, atol=1e-12)


def test_bad_out_workspace_and_prefetch_name_themselves(rng):
    a, b, h0, dh = problem(rng, (1, 5, 2), np.float64)
    ad, bd = _device(a, b)
    with pytest.raises(ValueError, match=r"out \(h\) must have shape \(1, 5, 2\) and dtype float64"):
        cs.linear_scan(ad, bd, out=cuda.device_array((1, 5, 3)))
    with pytest.raises(ValueError, match=r"out \(h\) must have shape"):
        cs.linear_scan(ad, bd, out=cuda.device_array((1, 5, 2), dtype=np.float32))
    with pytest.raises(ValueError, match=r"out \(h\) must be a CUDA device array"):
        cs.linear_scan(ad, bd, out=np.empty((1, 5, 2)))
    with pytest.raises(ValueError, match="out= takes device arrays and needs the inputs on the device"):
        cs.linear_scan(a, b, out=cuda.device_array((1, 5, 2)))
    with pytest.raises(ValueError, match=r"out must be a tuple of 3 device arrays \(da, db, dh0\)"):
        cs.linear_scan_backward(ad, ad, ad, out=cuda.device_array((1, 5, 2)))
    with pytest.raises(ValueError, match="workspace must be a cuda_kernels.scan.Workspace or None"):
        cs.linear_scan(ad, bd, workspace={})
    with pytest.raises(ValueError, match="prefetch only applies to method='sequential'"):
        cs.linear_scan(a, b, method="blelloch", prefetch=2)
    with pytest.raises(ValueError, match="prefetch only applies to method='sequential'; method='auto'"):
        cs.linear_scan(a, b, method="auto", prefetch=2)
    for bad in (0, 17, 2.0, True):
        with pytest.raises(ValueError, match=r"prefetch must be an integer in \[1, 16\]"):
            cs.linear_scan_backward(a, a, dh, method="sequential", prefetch=bad)
    x = cuda.to_device(rng.standard_normal((1, 5, 2)))
    p = gril.init(rng, 2, 3, False)
    wa = (x,) + tuple(cuda.to_device(p[k]) for k in ("Q", "q", "beta", "A")) + (3, 1)
    with pytest.raises(ValueError, match=r"out \(o\) must have shape \(1, 3, 2\)"):
        cw.gril_forward(*wa, out=cuda.device_array((1, 5, 2)))
    with pytest.raises(ValueError, match=r"out must be a tuple of 2 device arrays \(o, Z\)"):
        cw.gril_forward(*wa, return_Z=True, out=cuda.device_array((1, 3, 2)))
    with pytest.raises(ValueError, match=r'out must be \(dx, \{"Q": dQ'):
        cw.gril_backward(*wa, cuda.device_array((1, 3, 2, 2)), cuda.device_array((1, 3, 2)),
                         out=cuda.device_array((1, 5, 2)))


def test_benchmark_times_preallocated_calls_beside_allocating_ones():
    """bench's "(preallocated)" rows: every variant again with out= and a Workspace, vs_allocating = the
    allocating row's seconds / this row's (fake clock: each timed call 1 ms longer than the one before)."""
    from minimal.bench import gpu

    clock = iter(np.arange(1, 100) * 1e-3)
    rows = gpu._scan_rows([("tiny", (1, 8, 2))], np.dtype(np.float32), timer=lambda fn: (fn(), next(clock))[1],
                            block=8, copy=lambda nbytes, timer: 2e-3, preallocated=True)
    by = {r["name"]: r for r in rows}
    variants = list(cs.METHODS) + ["chunked lookback"]   # v1, v2, v3, v4, then v3 with the look-back carry
    for v in variants:
        for kind in ("forward", "backward", "log forward"):
            pre = by[f"{v} {kind} (preallocated)"]
            assert pre["vs_allocating"] == pytest.approx(by[f"{v} {kind}"]["seconds"] / pre["seconds"])
            assert pre["bytes"] == by[f"{v} {kind}"]["bytes"]
    assert [r["name"] for r in rows[-3 * len(variants):]] == [f"{v} {k} (preallocated)" for v in variants
                                                for k in ("forward", "backward", "log forward")]
    wrows = gpu._window_rows([(2, 5, 3, 2, 1)], np.dtype(np.float64), timer=lambda fn: (fn(), 1e-3)[1],
                               copy=lambda nbytes, timer: 1e-3, preallocated=True)
    assert [r["name"] for r in wrows[-2:]] == ["segmented forward (preallocated)", "fused backward (preallocated)"]
    assert wrows[-1]["vs_allocating"] == pytest.approx(1.0)


def test_gpu_check_tables_read_the_rows_it_wrote(tmp_path, capsys):
    from minimal.bench import gpu_check, gpu_rows

    def row(name, shape, vs_copy, **extra):
        return dict(gpu_rows.make_row(name, 1e-3, 10, vs_copy * 1e-3), shape=list(shape), **extra)

    many, one = (8, 4096, 8192), (1, 2 ** 20, 1)
    scan_rows = [row("v1 loop forward", many, 0.3), row("v1 loop forward (preallocated) K=1", many, 0.35),
                 row("v1 loop forward (preallocated) K=4", many, 0.7),
                 row("v2 Blelloch forward (preallocated)", many, 0.2),
                 row("torch.cumsum (1-D, same n)", many, 0.72), row("v1 loop forward (preallocated)", one, 0.002),
                 row("v2 Blelloch backward (preallocated)", one, 0.1),
                 {"name": "v3 chunked forward", "seconds": float("nan"), "shape": list(one), "error": "boom"}]
    (tmp_path / "scan_rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scan_rows))
    wrows = [dict(row("forward v3", (64, 16385, 32), 0.1), regime="f=32 w=3 s=2"),
             {"name": "backward / forward", "seconds": float("nan"), "allocating": 3.5, "preallocated": 3.25,
              "shape": [64, 16385, 32], "regime": "f=32 w=3 s=2"}]
    (tmp_path / "window_rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wrows))
    text = gpu_check.tables(str(tmp_path))
    lines = text.splitlines()
    assert "| (8, 4096, 8192) | 0.300 | - | - | - | 0.720 | - |" in lines
    assert "| (8, 4096, 8192) | 0.350 | 0.200 | - | - | 0.720 | - |" in lines   # preallocated (K = 1); torch as is
    assert "| (1, 1048576, 1) | 0.002 | - | - | - | - | - |" in lines
    assert "| (8, 4096, 8192) | 0.350 | - | 0.700 | - |" in lines                # v1 by K
    assert "  (1, 1048576, 1): v2 Blelloch: 0.100" in lines
    assert "| (64, 16385, 32) f=32 w=3 s=2 | 0.100 | - | 3.50 | 3.25 |" in lines
    assert "1 failed variant(s)" in text and "v3 chunked forward: boom" in text


def test_gpu_check2_v1_rows_dry_run_and_table(tmp_path, capsys):
    """``gpu_check v1 --tiny`` (bench/gpu_check2.sh's benchmark step) in the simulator: every row it promises
    is written without an error, and the table reads them (timings meaningless here)."""
    from minimal.bench import gpu_check

    assert gpu_check.main(["v1", str(tmp_path), "--tiny"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "v1_rows.jsonl").read_text().splitlines()]
    assert [r for r in rows if "error" in r] == []
    Kf = cs.DEFAULT_PREFETCH_FORWARD
    assert [r["name"] for r in rows] == (
        ["copy (same bytes as forward)", "copy (same bytes as backward)", "v1 loop forward"]
        + [f"v1 loop forward (preallocated) K={K}" for K in sorted({1, Kf})]
        + [f"v1 loop backward (preallocated) K={K}" for K in gpu_check.BACKWARD_PREFETCH])
    assert all(r["prefetch"] == (Kf if r["name"] == "v1 loop forward" else int(r["name"][-1]))
               for r in rows[2:])
    text = gpu_check.v1_tables(str(tmp_path))
    assert f"defaults: forward K = {Kf}, backward K = {cs.DEFAULT_PREFETCH_BACKWARD}" in text
    assert sum(line.startswith("| (1, 16, 8) |") for line in text.splitlines()) == 2
    assert "0 failed variant(s)" in text
