"""Registers per thread of the kernels at their largest blocks, compiled for sm_90 without a GPU.

Run as a script (``tests/test_cuda_resources.py`` does, in a subprocess): it needs the real compiler, so it sets
``NUMBA_ENABLE_CUDASIM=0`` before numba is imported, and ``NUMBA_FORCE_CUDA_CC`` so that numba-cuda does not ask
NVRTC (often absent where there is no GPU) which architectures it knows. Each kernel is compiled to PTX by
``numba.cuda.compile_ptx`` with the launch bounds its dispatcher carries (``cuda_kernels.scan.kernel``), then
assembled by ``ptxas -arch=sm_90 -v``, whose "Used N registers" line is the number the driver checks at launch.
Prints one JSON object per kernel: name, threads (its block), launch_bounds, registers, shared_bytes (static
shared memory), and with ``--control``
also the registers of v3's float32 backward scan at block 1024, K = 2 compiled without launch bounds.

Exit status 3 with a message on stderr when the toolchain is missing (no ptxas, no libnvvm / libdevice).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
os.environ.setdefault("NUMBA_FORCE_CUDA_CC", "9.0")
CC = (9, 0)


def _toolchain():
    ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas")
                                      else None)
    if ptxas is None:
        print("ptxas not found (CUDA toolkit or pip nvidia-cuda-nvcc)", file=sys.stderr)
        sys.exit(3)
    from numba.cuda import cuda_paths as cp

    # Without NVRTC, numba-cuda's path discovery fails although NVVM and libdevice (all that compile_ptx needs)
    # are there: fill its cache with what it finds, NVRTC left out.
    if not hasattr(cp.get_cuda_paths, "_cached_result"):
        paths = {"nvrtc": None}
        for key, find in (("nvvm", cp._get_nvvm_path), ("libdevice", cp._get_libdevice_path),
                          ("cudalib_dir", cp._get_cudalib_dir), ("static_cudalib_dir", cp._get_static_cudalib_dir),
                          ("include_dir", cp._get_include_dir)):
            try:
                paths[key] = find()
            except Exception as e:  # noqa: BLE001 - any failure means: no toolkit here
                if key in ("nvvm", "libdevice"):
                    print(f"CUDA toolkit incomplete: {key} not found ({type(e).__name__}: {e})", file=sys.stderr)
                    sys.exit(3)
                paths[key] = None
        cp.get_cuda_paths._cached_result = paths
    # A device function that is not inlined (window_forward.py's ``window``) is compiled for "the current device"
    # (numba-cuda 0.30.4 asks the driver for its compute capability); with no driver, answer sm_90.
    from types import SimpleNamespace

    from numba.cuda import dispatcher

    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=CC)
    return ptxas


def registers(ptxas, dispatcher, argtypes, launch_bounds="from the kernel"):
    from numba import cuda

    if launch_bounds == "from the kernel":
        launch_bounds = dispatcher.targetoptions.get("launch_bounds")
    ptx, _ = cuda.compile_ptx(dispatcher.py_func, argtypes, cc=CC, launch_bounds=launch_bounds)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as fh:
            fh.write(ptx)
        res = subprocess.run([ptxas, f"-arch=sm_{CC[0]}{CC[1]}", "-v", path, "-o", os.path.join(d, "k.cubin")],
                             capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"ptxas failed: {res.stderr[-2000:]}")
    used = [line for line in res.stderr.splitlines() if re.search(r"Used \d+ registers", line)]
    if len(used) != 1:
        raise RuntimeError(f"expected one 'Used N registers' line from ptxas, got: {res.stderr[-2000:]}")
    regs = int(re.search(r"Used (\d+) registers", used[0]).group(1))
    smem = re.search(r"(\d+) bytes smem", used[0])
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", res.stderr)
    local = int(frame.group(1)) + int(frame.group(2)) if frame else 0
    return regs, int(smem.group(1)) if smem else 0, launch_bounds, local


def kernels():
    """(name, dispatcher, argtypes, threads): every kernel family launched with more than 256 threads, at its
    largest block, in float64, and v1 at its default K. Other kernels of at most 256 threads need no check:
    ptxas never gives a thread more than 255 registers, and 255 x 256 < 65,536 (the elementwise kernels, v3 at
    its default block 256)."""
    import numpy as np
    from numba import types

    from cuda_kernels import blelloch, chunked_kernels, scan, sequential, window_backward, window_forward

    dt = types.float64
    A1, A2, A3 = (types.Array(dt, n, "C") for n in (1, 2, 3))
    I1, I3 = types.Array(types.int32, 1, "C"), types.Array(types.int32, 3, "C")
    b, i = types.boolean, types.int64
    f64 = np.float64
    out = []
    red, sc = blelloch.blelloch_kernels(f64, 32, 32, "linear", False)
    _, scb = blelloch.blelloch_kernels(f64, 32, 32, "linear", True)
    _, scl = blelloch.blelloch_kernels(f64, 32, 32, "log", False)
    v2_scan = (A3, A3, A3, A2, b, A3, A3, A3, A2)
    out += [("v2 reduce, block 1024", red, (A3, A3, A3, A3), 1024),
            ("v2 scan, block 1024", sc, v2_scan, 1024),
            ("v2 backward scan, block 1024", scb, v2_scan, 1024),
            ("v2 log scan, block 1024", scl, v2_scan, 1024)]
    v3_reduce = (A3, A3, i, A3, A3)
    v3_scan = (A3, A3, A3, A2, b, i, A3, A3, A3, A2)
    v3_lookback = (A3, A3, A2, b, A3, A3, A3, A2, I1, I3, A3, A3, A3, i, I3, b)
    # v3 at block 1024 in float64: K = 1 is the most steps per thread whose shared memory fits
    # (chunked.shared_bytes).
    for block, K in ((1024, 1),):
        for op, rev, what in (("linear", False, "forward"), ("linear", True, "backward"), ("log", False, "log")):
            r3, s3, l3 = chunked_kernels.kernels(f64, 32, block // 32, K, op, rev, True)
            out.append((f"v3 {what} scan, block {block}, K={K}", s3, v3_scan, block))
            if what != "log":
                out += [(f"v3 {what} reduce, block {block}, K={K}", r3, v3_reduce, block),
                        (f"v3 {what} lookback, block {block}, K={K}", l3, v3_lookback, block)]
    # v1 at its default K (scan.DEFAULT_PREFETCH_*), block SEQUENTIAL_BLOCK = 128: it fits whatever ptxas does
    # (255 x 128 < 65,536); what these rows show is that the K prefetched steps stay in registers (no local
    # memory, the test checks it), which the pipelining needs.
    v1_fwd, _ = sequential.sequential_kernels(f64, "linear", scan.DEFAULT_PREFETCH_FORWARD)
    _, v1_bwd = sequential.sequential_kernels(f64, "linear", scan.DEFAULT_PREFETCH_BACKWARD)
    out += [(f"v1 forward, K={scan.DEFAULT_PREFETCH_FORWARD}, block 128", v1_fwd, (A3, A3, A2, b, A3),
             scan.SEQUENTIAL_BLOCK),
            (f"v1 backward, K={scan.DEFAULT_PREFETCH_BACKWARD}, block 128", v1_bwd, (A3, A3, A3, A2, b, A3, A3, A2),
             scan.SEQUENTIAL_BLOCK)]
    # v4 (lookback.py): at its largest block with K = 16 and at its defaults (block 256, K = 32 forward, 16
    # backward); the K steps are held in registers (no local memory), which its single pass needs.
    from cuda_kernels import lookback

    v4_args = (A3, A3, A2, b, A3, A3, A3, A2, I3, A3, A3, A3, types.int32, types.int32)
    for block, K in ((1024, 16), (lookback.DEFAULT_BLOCK, None)):
        for op, rev, what in (("linear", False, "forward"), ("linear", True, "backward"), ("log", False, "log")):
            K = lookback.DEFAULT_STEPS["backward" if rev else "forward"] if block == lookback.DEFAULT_BLOCK else K
            CW, TW = lookback.tile(1, block)
            out.append((f"v4 {what}, block {block}, K={K}, one channel", lookback._kernel(f64, CW, TW, K, op, rev,
                                                                                          True), v4_args, block))
        CW, TW = lookback.tile(256, block)
        K = lookback.DEFAULT_STEPS["forward"] if block == lookback.DEFAULT_BLOCK else K
        out.append((f"v4 forward, block {block}, K={K}, 32 channel lanes",
                    lookback._kernel(f64, CW, TW, K, "linear", False, True), v4_args, block))
    f, w = 32, 3
    fwd, bwd = window_forward.segmented_forward(f64, f, w), window_backward.segmented_backward(f64, f, w)
    out += [("window v2 fused forward, f=32", window_forward.fused_kernel(f64, f, w),
             (A3, A2, A1, A1, A2, i, b, A3, A3), f * f),
            ("window v3 reduce, f=32", fwd.reduce, (A3, A2, A2, i, i, A3), f * f),
            ("window v3 forward scan, f=32", fwd.scan, (A3, A2, A1, A1, A2, i, i, A3, b, b, A3, A3), f * f),
            ("window backward reduce, f=32", bwd.reduce_backward, (A3, A1, A1, A2, A3, i, i, A3), f * f),
            ("window v2 fused backward, f=32", bwd.backward, (A3, A2, A1, A1, A2, A3, A3, i, i, A3, b, A3, A2),
             f * f)]
    return out


def main(argv):
    ptxas = _toolchain()
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    for name, disp, argtypes, threads in kernels():
        if only and only not in name:
            continue
        regs, smem, lb, local = registers(ptxas, disp, argtypes)
        print(json.dumps({"name": name, "threads": threads, "launch_bounds": lb, "registers": regs,
                          "shared_bytes": smem, "local_bytes": local}), flush=True)
    if "--control" in argv:
        from cuda_kernels import chunked_kernels
        import numpy as np
        from numba import types

        # float32 (which K = 2 at block 1024 fits), the configuration that failed on the H200
        A2, A3 = types.Array(types.float32, 2, "C"), types.Array(types.float32, 3, "C")
        _, s3, _ = chunked_kernels.kernels(np.float32, 32, 32, 2, "linear", True, True)
        regs, smem, _, _ = registers(ptxas, s3, (A3, A3, A3, A2, types.boolean, types.int64, A3, A3, A3, A2), None)
        print(json.dumps({"name": "control: v3 float32 backward scan, block 1024, K=2, no launch bounds",
                          "threads": 1024,
                          "launch_bounds": None, "registers": regs, "shared_bytes": smem}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main(sys.argv[1:]))
