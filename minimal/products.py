"""The matrix products of the layers and cells: x W over many rows (a batch times its time steps), computed in
the blocks of rows that NumPy's BLAS runs fastest.

Why blocks. OpenBLAS, the BLAS of NumPy's wheels, runs a product of at most 10^6 multiply-adds (M N K <= 100^3)
with an unpacked small-matrix kernel, on one thread, on its AVX-512 cores (``SMALL_CORES``), and a larger product
with its packing kernel, on as many threads as it has (its ``kernel/x86_64/sgemm_small_kernel_permit_skylakex.c``,
which also turns away a product with both operands transposed, and one with the first transposed unless its output
is tiny: the blocks below reach it untransposed or with the second operand transposed). So on those cores, when
OpenBLAS runs one thread (as every benchmark and CI here sets it; with more, a plain product is spread over them and
its blocks would not be), ``times`` computes the M rows of x W as M / c products of c rows each, one stacked
``np.matmul`` call (NumPy loops over the blocks in C), c the largest power of two that divides M with
c K N <= 10^6, and ``sum_outer`` sums c-row blocks of x^T y. At the ``bench train`` rows' shapes (K and N of 16 to
256, M = B T = 2048 or 4096) a blocked product takes 0.54 to 1.09 of the plain one's time, float32 and float64
alike, most of them below 0.97, and a training step 0.85 to 1.05 of its time with every product plain (``python
bench/products.py --steps``, one thread, in a run whose two timings of one call differed by up to 15 %;
``bench/results/products_2026-12-01.txt``). Where that leaves fewer than ``LEAST_ROWS`` rows a block, or on any
other BLAS, core or thread count, the product is the one plain ``x @ W``: on OpenBLAS's Haswell and Sandybridge
kernels the same blocks take 0.99 to 1.28 of the plain time (``--force-blocks``).
The check looks at every BLAS loaded in the process (threadpoolctl cannot tell which one NumPy calls), so another
BLAS beside NumPy's turns the blocks off: the plain product, never a wrong one.

Blocks change which kernel adds the products, so a result can differ from the plain product in the last bits
(float rounding, as between two BLAS kernels); each function equals its plain product to rounding (tests).
Shapes: x (..., K), W (K, N): M = the product of x's leading sizes.
"""
from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["SMALL_CORES", "SMALL_PRODUCT", "LEAST_ROWS", "MOST_ROWS", "small_kernel", "loaded_openblas",
           "rows_per_block", "times", "times_t", "sum_outer"]

SMALL_CORES = ("SkylakeX", "Cooperlake", "SapphireRapids")   # OpenBLAS cores with the small-matrix kernel
SMALL_PRODUCT = 100 ** 3   # the kernel's limit on M N K
# The fewest rows a block may have: the summed form x^T y adds a pass over its M / c partial products, which blocks of
# 64 rows do not win back at the bench train rows' shapes (``bench/products.py --least-rows 16 64``, section 5 of
# bench/results/products_2026-12-01.txt).
LEAST_ROWS = {"times": 32, "sum_outer": 128}
# The most: more rows a block means K N < 10^6 / 512, a weight so small that packing it costs the plain product
# little; at 4096 x 32 x 16 and 4096 x 16 x 32 (1024 rows a block) the blocks took 0.64-1.20 of the plain time
# across runs of bench/products.py, the call's own overhead about as large as what the kernel saves.
MOST_ROWS = 256


def small_kernel():
    """Whether the blocks run: every BLAS loaded is OpenBLAS on a core with the small-matrix kernel
    (``SMALL_CORES``, as threadpoolctl reads it from the library, ``OPENBLAS_CORETYPE`` included) and runs one
    thread now (read at each call: ``minimal.run.speed.tune`` and threadpoolctl's limits change it); False where it
    cannot tell."""
    libs = _small_core_openblas()
    return bool(libs) and all(lib.get_num_threads() == 1 for lib in libs)


def loaded_openblas():
    """threadpoolctl's controllers of the loaded BLAS libraries if each is OpenBLAS whose kernel ("core",
    ``.architecture``) threadpoolctl can read, else ()."""
    from threadpoolctl import ThreadpoolController

    blas = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    ok = bool(blas) and all(lib.internal_api == "openblas" and getattr(lib, "architecture", None) for lib in blas)
    return tuple(blas) if ok else ()


@functools.cache
def _small_core_openblas():
    """``loaded_openblas()`` if each is on a ``SMALL_CORES`` core, else (); read once (the core is fixed when
    OpenBLAS loads)."""
    blas = loaded_openblas()
    return blas if all(lib.architecture in SMALL_CORES for lib in blas) else ()


def _check_operands(x, W, k_axis, shape):
    """x (..., K) and a matrix W whose axis ``k_axis`` is K (``shape``: W's shape in words, for the error)."""
    if not (isinstance(x, np.ndarray) and isinstance(W, np.ndarray) and x.ndim >= 1 and W.ndim == 2
            and x.shape[-1] == W.shape[k_axis]):
        raise ValueError(f"x must be an array of shape (..., K) and W a matrix of shape {shape}, got shapes "
                         f"{np.shape(x)} and {np.shape(W)}")


def rows_per_block(M, K, N, least):
    """The rows c of each block of an (M x K) @ (K x N) product: the largest power of two dividing M with
    c K N <= SMALL_PRODUCT; None where the product is small already (M K N <= SMALL_PRODUCT), or c < ``least``, or
    c > MOST_ROWS."""
    if M * K * N <= SMALL_PRODUCT or K * N > SMALL_PRODUCT:
        return None
    fits = SMALL_PRODUCT // (K * N)                    # the most rows a small product can have
    c = min(1 << (fits.bit_length() - 1), M & -M)      # M & -M: the largest power of two dividing M
    return c if least <= c <= MOST_ROWS else None


def times(x, W):
    """x W: x (..., K), W (K, N) -> (..., N), over all leading indices at once."""
    _check_operands(x, W, 0, "(K, N)")
    return _times(x, W)


def times_t(x, W):
    """x W^T: x (..., K), W (N, K) -> (..., N); W^T copied contiguous first (a transposed operand takes
    OpenBLAS's slower transposed kernels, and W is small)."""
    _check_operands(x, W, 1, "(N, K)")
    return _times(x, np.ascontiguousarray(W.T))


def _times(x, W):
    """``times`` of checked operands: one product of M rows, or M / c blocks of c rows in one stacked call."""
    lead, (K, N) = x.shape[:-1], W.shape
    M = math.prod(lead)                      # written out: a reshape to -1 is ambiguous at M = 0
    c = rows_per_block(M, K, N, LEAST_ROWS["times"])
    rows = (M, K) if c is None or not small_kernel() else (M // c, c, K)
    return (x.reshape(rows) @ W).reshape(lead + (N,))


def sum_outer(x, y):
    """Σ over the leading indices of x_i^T y_i, that is x^T y with the rows of x (..., K) and y (..., N) as the
    samples -> (K, N): a weight's gradient (x the layer's input, y dL/d(output)). In blocks, the M / c partial
    products are one (M / c, K, N) array before their sum: K N / c numbers a row, beside x's K and y's N."""
    if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.ndim >= 1 and y.ndim >= 1):
        raise ValueError(f"x and y must be arrays of shapes (..., K) and (..., N), got shapes {np.shape(x)} and "
                         f"{np.shape(y)}")
    if x.shape[:-1] != y.shape[:-1]:
        raise ValueError(f"x and y must have the same leading shape (..., K) and (..., N), got shapes {x.shape} and "
                         f"{y.shape}")
    K, N = x.shape[-1], y.shape[-1]
    M = math.prod(x.shape[:-1])
    x2, y2 = x.reshape(M, K), y.reshape(M, N)
    c = rows_per_block(M, K, N, LEAST_ROWS["sum_outer"])
    if c is None or not small_kernel():
        return x2.T @ y2
    blocks = np.matmul(x2.reshape(M // c, c, K).transpose(0, 2, 1), y2.reshape(M // c, c, N))   # (M / c, K, N)
    return blocks.sum(axis=0)
