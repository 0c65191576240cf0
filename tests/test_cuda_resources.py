"""Every kernel launches at its largest block: registers per thread x threads <= 65,536 and static shared memory
<= 48 KiB (``cuda_kernels.scan.kernel``'s launch bounds, ``chunked.shared_bytes``).

On an H200 three v3 shapes (block 1024) and window forward v3 at f = 32 (1024 threads) failed with
CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: without launch bounds ptxas gives v3's float32 backward scan at block 1024,
K = 2 80 registers a thread, and a 1024-thread block may use 64 (the control test below); and v3 in float64 at
block 1024, K = 2 needs more than 48 KiB of static shared memory, which ``chunked.check_options`` now refuses
with a clear error. The simulator shows neither, so the CPU test compiles the kernels for sm_90
(``numba.cuda.compile_ptx`` needs no GPU) and reads ptxas's register and shared-memory counts
(``tests/_ptx_registers.py``); it is skipped, saying why, where ptxas or libnvvm is missing. The hardware test
asks the driver the same questions about the kernels it has just run.
"""
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from cuda_kernels import blelloch_host, chunked, lookback, scan as cs
from cuda_kernels import window as cw

from test_cuda_scan import _fast_thread_switching, check_forward_backward, hardware, problem  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
REGISTERS = cs.REGISTERS_PER_BLOCK


@pytest.fixture(scope="module")
def ptx_report():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "_ptx_registers.py"), "--control"],
                         capture_output=True, text=True, env=env, timeout=1800)
    if res.returncode == 3:
        pytest.skip(f"NO CHECK OF REGISTERS: the CUDA toolchain is missing here ({res.stderr.strip()})")
    assert res.returncode == 0, res.stderr[-3000:]
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def test_every_kernel_fits_its_largest_block_when_compiled_for_sm90(ptx_report):
    kernels = [r for r in ptx_report if not r["name"].startswith("control")]
    assert len(kernels) == 26   # v2 4, v3 7 (forward and backward: 3 each, log: 1), window 5 (all at 1024
    for r in kernels:           # threads), v1 2 (block 128, at the default K), v4 8 (block 1024 and its default)
        assert r["launch_bounds"] == r["threads"], r
        assert r["registers"] * r["threads"] <= REGISTERS, r
        assert r["shared_bytes"] <= chunked.SHARED_BYTES, r
    names = {r["name"] for r in kernels}
    assert {"v3 backward scan, block 1024, K=1", "window v3 forward scan, f=32",
            "window v2 fused backward, f=32"} <= names


def test_v1_keeps_its_prefetched_steps_in_registers_at_the_default_k(ptx_report):
    """v1's software pipelining loads K = 8 steps of each input ahead (forward and backward defaults, the H200
    rows in scan.py): the loads only overlap if those K values live in registers. ptxas's stack frame and
    spill stores are the local memory a kernel uses: none for either direction in float64 (the wider type)."""
    assert cs.DEFAULT_PREFETCH_FORWARD == cs.DEFAULT_PREFETCH_BACKWARD == 8
    v1 = {r["name"]: r for r in ptx_report if r["name"].startswith("v1 ")}
    assert set(v1) == {"v1 forward, K=8, block 128", "v1 backward, K=8, block 128"}
    for r in v1.values():
        print(f"\n{r['name']}: {r['registers']} registers, {r['local_bytes']} bytes of local memory")
        assert r["local_bytes"] == 0, r
        assert r["threads"] == cs.SEQUENTIAL_BLOCK and r["registers"] * r["threads"] <= REGISTERS, r


def test_v4_keeps_its_steps_in_registers_at_its_default(ptx_report):
    """v4 holds its K steps in registers between the look-back and the rescan: at its defaults (block 256,
    K = 32 forward, 16 backward) the linear kernels use no local memory in float64, whatever the channel tile
    (about 210 registers forward). The log-space kernel at K = 32 in float64 is the exception ptxas makes (64
    registers, 512 bytes of local memory: printed, not asserted; "auto" never runs v4 in log space, whose rows
    were not timed), and at block 1024 the launch bound leaves 64 registers a thread and ptxas spills: those
    launch but are not the fast configurations."""
    v4 = [r for r in ptx_report if r["name"].startswith("v4 ") and f"block {lookback.DEFAULT_BLOCK}," in r["name"]]
    assert len(v4) == 4
    for r in v4:
        print(f"\n{r['name']}: {r['registers']} registers, {r['local_bytes']} bytes of local memory")
        if not r["name"].startswith("v4 log"):
            assert r["local_bytes"] == 0, r


def test_v3_shared_memory_is_what_check_options_counts(ptx_report):
    """chunked.shared_bytes is an upper bound of what ptxas allocates (exact for the look-back kernel up to the
    carried state's width), so check_options refuses exactly the blocks that could not launch."""
    for r in ptx_report:
        if r["name"].startswith("v3 ") and "lookback" in r["name"]:
            block = r["threads"]
            K = int(r["name"].rsplit("K=", 1)[1])
            assert r["shared_bytes"] <= chunked.shared_bytes(np.float64, block, K, True)
            assert r["shared_bytes"] >= chunked.shared_bytes(np.float64, block, K, True) - 8 * 32 - 4


def test_without_launch_bounds_the_h200_failure_comes_back(ptx_report):
    """The control: v3's backward scan at block 1024, K = 2 in float32 (a configuration that failed on the H200)
    compiled without launch bounds asks for more registers than a 1024-thread block has."""
    (control,) = [r for r in ptx_report if r["name"].startswith("control")]
    print(f"\nwithout launch bounds: {control['registers']} registers x 1024 threads")
    assert control["registers"] * 1024 > REGISTERS


def test_shared_memory_check_refuses_blocks_that_cannot_launch():
    f64, f32 = np.dtype(np.float64), np.dtype(np.float32)
    # float64, block 1024: K = 1 fits with shuffles only; K = 2 (which the H200 test asked for) fits neither
    assert chunked.shared_bytes(f64, 1024, 1, True) <= chunked.SHARED_BYTES
    assert chunked.shared_bytes(f64, 1024, 1, False) > chunked.SHARED_BYTES
    assert chunked.shared_bytes(f64, 1024, 2, True) > chunked.SHARED_BYTES
    assert chunked.shared_bytes(f32, 1024, 2, False) <= chunked.SHARED_BYTES
    assert chunked.shared_bytes(f64, cs.DEFAULT_BLOCK, chunked.DEFAULT_STEPS, False) <= chunked.SHARED_BYTES
    with pytest.raises(ValueError, match=r"needs \d+ bytes of shared memory for float64 \(shuffle=False\)"):
        chunked.check_options(f64, 1024, 1, None, False)
    with pytest.raises(ValueError, match=r"needs \d+ bytes of shared memory for float64 \(shuffle=True\)"):
        chunked.check_options(f64, 1024, 2, None, True)
    assert chunked.check_options(f32, 1024, 2, None, False) == (2, None, False, "reduce")


def _threads(factory, args):
    """Threads per block of a kernel family, from its factory's arguments (what the host launches it with)."""
    if factory in ("kernels", "blelloch_kernels", "_kernel"):     # (dtype, CW, TW, ...): CW x TW threads
        return args[1] * args[2]
    if factory == "sequential_kernels":
        return cs.SEQUENTIAL_BLOCK
    return args[1] * args[1]                              # window (dtype, f, w): f x f threads


@hardware
def test_compiled_kernels_fit_their_blocks_on_the_gpu(monkeypatch):
    """The largest blocks run (v3 at 1024 threads in float64, the window kernels at f = 32) and the driver's
    own numbers for every kernel those runs compiled fit: max threads per block >= the block, and
    registers x block <= 65,536. The kernels are the ones the host functions launched (their factories are
    wrapped to record what they return), not fresh copies of them. The window's segmented factories return a
    namespace of kernels launched with different blocks (f*f threads, or the elementwise block for
    ``fill_power`` and ``sum_partials``): each of those is checked at its own launch bound, the most threads it
    is ever launched with."""
    launched = []

    def record(module, name):
        factory = getattr(module, name)

        def wrapped(*args):
            out = factory(*args)
            kernels = (tuple((k, k.targetoptions["launch_bounds"]) for k in vars(out).values())
                       if isinstance(out, SimpleNamespace) else
                       tuple((k, _threads(name, args)) for k in (out if isinstance(out, tuple) else (out,))))
            launched.append((name, args, kernels))
            return out
        monkeypatch.setattr(module, name, wrapped)

    for module, name in ((chunked, "kernels"), (blelloch_host, "blelloch_kernels"), (cs, "sequential_kernels"),
                         (cw, "segmented_forward"), (cw, "segmented_backward"), (cw, "fused_kernel"),
                         (lookback, "_kernel")):
        record(module, name)
    rng = np.random.default_rng(3)
    a, b, h0, dh = problem(rng, (2, 5000, 40), np.float64)
    for kw in (dict(block=1024, steps_per_thread=1, shuffle=True), dict(steps_per_thread=8),
               dict(block=1024, steps_per_thread=1, shuffle=True, carry="lookback")):
        check_forward_backward(a, b, h0, dh, np.float64, method="chunked", **kw)
    check_forward_backward(a, b, h0, dh, np.float64, method="blelloch", block=1024)
    for kw in (dict(block=1024, steps_per_thread=16), dict()):   # v4 at its largest block and K, and its default
        check_forward_backward(a, b, h0, dh, np.float64, method="lookback", **kw)
    check_forward_backward(a, b, h0, dh, np.float64, method="sequential", prefetch=8)
    from minimal.cells import gril

    p = gril.init(rng, 32, 3, True)
    x = rng.standard_normal((2, 301, 32))
    wargs = (x, p["Q"], p["q"], p["beta"], p["A"], 3, 2)
    o, Z = cw.gril_forward(*wargs, version=3, segments=3, return_Z=True)
    o2 = cw.gril_forward(*wargs, version=2)
    np.testing.assert_allclose(o, gril.gril_forward_reference(*wargs), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(o2, o, rtol=1e-10, atol=1e-10)
    dx, _ = cw.gril_backward(*wargs, Z, rng.standard_normal(o.shape), version=2, segments=3)
    assert np.all(np.isfinite(dx))
    checked, largest = 0, 0
    seen = set()
    for name, args, kernels in launched:
        for k, threads in kernels:
            if not hasattr(k, "overloads") or id(k) in seen:
                continue
            seen.add(id(k))
            for sig, overload in k.overloads.items():
                assert overload.max_threads_per_block >= threads, (name, args, sig)
                assert overload.regs_per_thread * threads <= REGISTERS, (name, args, sig, overload.regs_per_thread)
                checked += 1
                largest = max(largest, threads)
    assert {name for name, _, _ in launched} >= {"kernels", "blelloch_kernels", "sequential_kernels",
                                                 "segmented_forward", "segmented_backward", "fused_kernel",
                                                 "_kernel"}
    assert checked >= 12 and largest == 1024, (checked, largest)
