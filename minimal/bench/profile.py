"""Where one training step's time goes (``python -m minimal bench train --profile``): a breakdown of the step of
``minimal.bench.train`` by part of the library, its FLOP count, and the same-run sgemm rate of its own matrix
shapes (the roofline a step of matrix products could reach on this core).

Breakdown. The step runs ``steps`` times under ``cProfile``; each function's own time (``tottime``, its callees
excluded) is put in the part of the library its file belongs to (``PARTS``: matrix products, scans, gates and
cells, norms, embedding and loss, linear layers, AdamW and clipping, the stack's glue), and NumPy's C functions
called from Python (``np.empty``, ``ndarray.sum``, ...; cProfile names them ``{built-in method ...}``) and NumPy's
own Python wrappers in "NumPy calls", Numba's dispatcher (type checks before a compiled kernel runs) in "Numba
dispatch". A matrix product written as ``x @ W`` is not a call cProfile sees: its time counts in the function that
wrote it; the layers' and cells' products over many rows are calls of ``minimal.products`` ("matrix products"),
attention's score and value products are written in the cell ("gates and cells"). cProfile's own overhead grows
with the number of Python calls, so the shares are a map of where to look, and the step time is taken without it
(``bench train``). Across the parts, the time inside Numba-compiled kernels (the elementwise passes and scans,
each one call the profiler does not slow) is summed apart (``KERNELS``): with the matrix products at the sgemm rate
below, the time a step needs before any Python or NumPy pass between them (``bench/blas_bound.py`` sets it beside
the frameworks' steps).

FLOPs. Every 2-D weight W (d_in, d_out) of the model, but the embedding and position tables (a gather, not a
product) and the causal convolution's (elementwise), is
used in one forward product (N x d_in by d_in x d_out, N = B T tokens) and two backward ones (dX and dW): 6 N
d_in d_out FLOPs a step. Attention adds its score and value products, 4 B T² D forward and 8 B T² D backward per
layer (dense, as ``cells.softmax_attention`` computes them). The sgemm rate is ``np.matmul`` into a preallocated
output on each of those shapes, or the blocks of rows a step computes it in (``minimal.products``) where they are
faster, in float32, one thread, best of ``repeats``: the step's achieved GFLOP/s over it is
the share of the machine's matrix rate the step reaches. Where torch or JAX is installed (``anchors``), the same
shapes are timed with that framework's own matrix product too (``torch_models.matmul_seconds``: the BLAS the torch
build links; ``jax_models.matmul_seconds``: XLA's dot, each call dispatched from Python as a jitted step's are not):
a framework's step runs its products at about that rate, not at NumPy's, so the difference estimates the part of
a gap between our step and theirs that is the matrix library (``bench/blas_bound.py`` splits the steps that way).
"""
from __future__ import annotations

import cProfile
import gc
import pstats
import sys
import time

import numpy as np

from .. import products
from ..validate import check_positive_int

__all__ = ["PARTS", "KERNELS", "profile_step", "gemm_shapes", "step_flops", "product_seconds", "sgemm_seconds",
           "roofline", "format_profile", "profile_models"]

KERNELS = "of which compiled kernels"   # profile_step's key for the time inside Numba kernels, across the parts

# (part, path fragments of the files it holds); the first match wins, so the narrower fragments come first
PARTS = (
    ("matrix products", ("minimal/products.py",)),
    ("scans", ("minimal/scan/",)),
    ("norms", ("layers/layernorm", "layers/_layernorm")),
    ("embedding and loss", ("layers/embedding", "layers/_embedding", "layers/cross_entropy", "layers/mse",
                            "layers/positional", "layers/token_position")),
    ("linear layers", ("layers/linear", "layers/glu", "layers/mlp", "layers/causal_conv", "layers/_causal_conv",
                       "layers/_gelu", "layers/dropout", "layers/_dropout")),
    ("gates and cells", ("minimal/cells/",)),
    ("AdamW and clipping", ("minimal/optim/",)),
    ("stack glue", ("minimal/models.py", "minimal/experiments/", "minimal/bench/")),
)


def _part(filename):
    path = filename.replace("\\", "/")
    if filename == "~" or filename.startswith("<") or "/numpy/" in path:
        return "NumPy calls"
    if "/numba/" in path:
        return "Numba dispatch"
    for part, fragments in PARTS:
        if any(f in path for f in fragments):
            return part
    return "other Python"


def _is_compiled(filename, function, modules=None):
    """Whether ``function`` of the module at ``filename`` is a Numba-compiled kernel (a CPU dispatcher);
    ``modules``: {file: module} of the imported modules (None: read from ``sys.modules``)."""
    from numba.core.registry import CPUDispatcher

    if modules is None:
        modules = _modules_by_file()
    return isinstance(getattr(modules.get(filename), function, None), CPUDispatcher)


def _modules_by_file():
    return {getattr(m, "__file__", None): m for m in list(sys.modules.values())}


def profile_step(step, steps=5):
    """{part: seconds per step} of ``step()`` (a ``bench.train.project_step`` closure) under cProfile, the profiled
    seconds per step under "total", and under KERNELS the part of the parts' time spent inside Numba-compiled
    kernels (one call each, which the profiler does not slow: the arithmetic of the step's elementwise passes and
    scans); ``steps`` >= 1 calls after one untimed, each profiled on its own, every entry the median over them (a
    step the machine slowed, as it does now and then, moves a median no more than one step of any other length),
    with Python's garbage collector off during them."""
    steps = check_positive_int("steps", steps)
    step()
    modules, runs = _modules_by_file(), []
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()    # as timeit does: a collection walks every object of the process (torch's, JAX's) and is charged
    try:            # to whichever function allocated last (bench/results/train_cpu_2026-12-03_dropout_adamw_log32.txt)
        for _ in range(steps):
            prof = cProfile.Profile()
            t0 = time.perf_counter()
            prof.enable()
            step()
            prof.disable()
            runs.append((time.perf_counter() - t0, prof))
    finally:
        if was_enabled:
            gc.enable()
    parts = []
    for wall, prof in runs:
        out = {"total": wall, KERNELS: 0.0}
        for (filename, _, function), (_, _, tottime, _, _) in pstats.Stats(prof).stats.items():
            part = _part(filename)
            out[part] = out.get(part, 0.0) + tottime
            if _is_compiled(filename, function, modules):
                out[KERNELS] += tottime
        parts.append(out)
    names = {name for out in parts for name in out}
    return {name: float(np.median([out.get(name, 0.0) for out in parts])) for name in names}


def gemm_shapes(model):
    """[(M, K, N, count)]: the matrix products of one training step of ``model`` (a ``bench.train.Model``), as
    (M x K) @ (K x N) shapes with how many times each runs (module docstring)."""
    m = model.meta
    tokens = m["B"] * m["T"]
    shapes = []
    for name, W in model.params.items():
        if W.ndim != 2 or name.rsplit(".", 1)[-1] in ("E", "P") or ".conv." in f".{name}":
            continue   # embedding and position tables are gathered, the causal convolution is elementwise
        a, b = W.shape
        shapes += [(tokens, a, b, 1), (tokens, b, a, 1), (a, tokens, b, 1)]   # forward, dX, dW
    if model.kind == "attention":
        B, T, D, L = m["B"], m["T"], m["D"], m["depth"]
        # per layer: S = Q K^T and O = P V forward; dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q backward
        shapes += [(B * T, D, T, 2 * L), (B * T, T, D, 4 * L)]
    return shapes


def step_flops(model):
    """FLOPs of the matrix products of one training step (``gemm_shapes``: 2 M K N each)."""
    return float(sum(2.0 * M * K * N * c for M, K, N, c in gemm_shapes(model)))


def product_seconds(shapes, repeats, prepare):
    """Seconds of the matrix products ``shapes`` [(M, K, N, count)], each its count times, best of ``repeats``:
    ``prepare(M, K, N)`` returns a call that runs one (M x K) @ (K x N) product to completion (operands made
    once, one untimed call first). The one timing loop of NumPy's rate and each framework's."""
    repeats = check_positive_int("repeats", repeats)
    total = 0.0
    for M, K, N, count in shapes:
        run = prepare(M, K, N)
        run()
        best = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - t0)
        total += count * best
    return total


def sgemm_seconds(shapes, repeats=5, dtype=np.float32):
    """Seconds of NumPy's matrix product summed over ``shapes`` (each its count times), each shape in its fastest
    form, best of ``repeats``: ``np.matmul(a, b, out=c)``, or the blocks of rows a step computes it in
    (``minimal.products``: ``times`` for a product over many rows, ``sum_outer`` for a weight's gradient, whose
    long axis is K), where those apply on this BLAS."""
    rng = np.random.default_rng(0)

    def plain(M, K, N):
        a = rng.standard_normal((M, K)).astype(dtype)
        b = rng.standard_normal((K, N)).astype(dtype)
        c = np.empty((M, N), dtype)
        return lambda: np.matmul(a, b, out=c)

    def rows(M, K, N):
        a, b = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
        return lambda: products.times(a, b)

    def outer(M, K, N):
        a, b = rng.standard_normal((K, M)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
        return lambda: products.sum_outer(a, b)

    total, small = 0.0, products.small_kernel()
    for M, K, N, count in shapes:
        forms = [plain]
        if small and products.rows_per_block(M, K, N, products.LEAST_ROWS["times"]):
            forms.append(rows)
        if small and products.rows_per_block(K, M, N, products.LEAST_ROWS["sum_outer"]):
            forms.append(outer)     # sum_outer's rows are the product's K
        total += count * min(product_seconds([(M, K, N, 1)], repeats, f) for f in forms)
    return total


def roofline(model, step_seconds, repeats=5, anchors=()):
    """{"gflop": the step's matrix-product GFLOPs, "gflops_step": achieved by a step of ``step_seconds``,
    "gflops_sgemm": the same-run sgemm rate of the step's shapes, "gemm_seconds": their sgemm time, "share":
    gflops_step / gflops_sgemm, "anchors": {framework: the same shapes' seconds with that framework's own matrix
    product}} for the twins' modules in ``anchors`` ({framework: module}, as ``bench.train.installed_twins`` gives
    them): the BLAS a framework's step runs on can be faster than NumPy's at the same shapes, an estimate of the part
    of the gap between the steps that is the matrix library."""
    flops = step_flops(model)
    shapes = gemm_shapes(model)
    gemm = sgemm_seconds(shapes, repeats)
    theirs = {name: module.matmul_seconds(shapes, repeats) for name, module in dict(anchors).items()}
    return {"gflop": flops / 1e9, "gflops_step": flops / step_seconds / 1e9, "gflops_sgemm": flops / gemm / 1e9,
            "gemm_seconds": gemm, "share": gemm / step_seconds, "anchors": theirs}


def format_profile(name, parts, line):
    """One model's breakdown as text: the roofline ``line`` (``roofline``'s dict) and each part's ms and share."""
    total = parts["total"]
    out = [f"{name}: {1e3 * total:.1f} ms a step under cProfile; matrix products {line['gflop']:.3f} GFLOP, "
           f"{line['gflops_step']:.1f} GFLOP/s achieved (the unprofiled step) against {line['gflops_sgemm']:.1f} "
           f"GFLOP/s same-run sgemm of its shapes: {100 * line['share']:.0f} % of the sgemm rate; sgemm alone "
           f"would take {1e3 * line['gemm_seconds']:.1f} ms"]
    for name, seconds in line.get("anchors", {}).items():
        out.append(f"    the same shapes with {name}'s matrix product: {line['gflop'] / seconds:.1f} GFLOP/s, "
                   f"{1e3 * seconds:.1f} ms ({line['gemm_seconds'] / seconds:.2f}x NumPy's rate)")
    for part, seconds in sorted(((p, s) for p, s in parts.items() if p not in ("total", KERNELS)),
                                key=lambda x: -x[1]):
        out.append(f"    {part:<20} {1e3 * seconds:8.2f} ms  {100 * seconds / total:5.1f} %")
    if KERNELS in parts:
        out.append(f"    {KERNELS} (Numba), across the parts above: {1e3 * parts[KERNELS]:.2f} ms  "
                   f"{100 * parts[KERNELS] / total:.1f} %")
    return "\n".join(out)


def profile_models(quick=False, steps=5, repeats=5, only=None, anchors=(), log=print):
    """Every model of ``bench train`` (``quick``: a few; ``only``: those rows by name), each profiled
    (``profile_step``), its step timed without the profiler (CPU seconds, best of ``repeats``) and set against the
    sgemm rate of its shapes (``roofline``), and against each installed framework's of ``anchors`` (a name of
    ``bench.train.ANCHORS``; one not installed is skipped with a notice). Returns the text of every model's
    breakdown, slowest step first."""
    from ..run import speed
    from .train import choose, installed_twins, models, project_step

    twins = installed_twins(anchors, log, "matrix-product rate")
    chosen = choose(models(quick), only)
    speed.tune()
    blocks = []
    for model in chosen:
        step = project_step(model)
        parts = profile_step(step, steps)
        best = min(step()["step"] for _ in range(repeats))
        blocks.append((best, format_profile(model.name, parts, roofline(model, best, repeats, twins))))
        log(f"profiled {model.name}")
    return "\n".join(text for _, text in sorted(blocks, key=lambda b: -b[0]))
