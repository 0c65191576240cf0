"""The matrix products of the layers and cells: x W over many rows (a batch times its time steps), computed in
the blocks of rows that NumPy's BLAS runs fastest.

Why blocks. OpenBLAS, the BLAS of NumPy's wheels, runs a product of at most 10^6 multiply-adds (M N K <= 100^3;
its ``kernel/x86_64/sgemm_small_kernel_permit_skylakex.c``, and the same for float64) with an unpacked small-matrix
kernel on its AVX-512 cores (``SMALL_CORES``), and a larger product with its packing kernel. So on those cores
``times`` computes the M rows of x W as M / c products of c rows each, one stacked ``np.matmul`` call (NumPy loops
over the blocks in C), c the largest power of two that divides M with c K N <= 10^6, and ``sum_outer`` sums c-row
blocks of x^T y. At the ``bench train`` rows' shapes (K and N of 16 to 256, M = B T = 2048 or 4096) a blocked
product takes 0.52 to 0.97 of the plain one's time, float32 and float64 alike (``python bench/products.py``, one
thread; ``bench/results/products_2026-12-01.txt``). Where that leaves fewer than ``LEAST_ROWS`` rows a block, or on
any other BLAS or core, the product is the one plain ``x @ W``: on OpenBLAS's Haswell and Sandybridge kernels the
same blocks take 0.99 to 1.33 of the plain time (``--force-blocks``).

Blocks change which kernel adds the products, so a result can differ from the plain product in the last bits
(float rounding, as between two BLAS kernels); each function equals its plain product to rounding (tests).
Shapes: x (..., K), W (K, N): M = the product of x's leading sizes.
"""
from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["SMALL_CORES", "SMALL_PRODUCT", "LEAST_ROWS", "small_kernel", "rows_per_block", "times", "times_t",
           "sum_outer"]

SMALL_CORES = ("SkylakeX", "Cooperlake", "SapphireRapids")   # OpenBLAS cores with the small-matrix kernel
SMALL_PRODUCT = 100 ** 3   # the kernel's limit on M N K
# The fewest rows a block may have (bench/products.py at the bench train rows' shapes, one thread, float32): blocks
# of 16 rows gain at most 7 % on x W, and the summed form x^T y adds a pass over its M / c partial products, which
# blocks of 64 rows do not win back.
LEAST_ROWS = {"times": 32, "sum_outer": 128}


@functools.cache
def small_kernel():
    """Whether every BLAS NumPy has loaded is OpenBLAS on a core with the small-matrix kernel (``SMALL_CORES``),
    as threadpoolctl reads it from the library (``OPENBLAS_CORETYPE`` included); False where it cannot tell."""
    from threadpoolctl import threadpool_info

    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return bool(blas) and all(lib.get("internal_api") == "openblas" and lib.get("architecture") in SMALL_CORES
                              for lib in blas)


def rows_per_block(M, K, N, least):
    """The rows c of each block of an (M x K) @ (K x N) product: the largest power of two dividing M with
    c K N <= SMALL_PRODUCT; None where the product is small already (M K N <= SMALL_PRODUCT), or c < ``least``."""
    if M * K * N <= SMALL_PRODUCT or K * N == 0:
        return None
    c = 1
    while M % (2 * c) == 0 and 2 * c * K * N <= SMALL_PRODUCT:
        c *= 2
    return c if c >= least else None


def times(x, W):
    """x W: x (..., K), W (K, N) -> (..., N), over all leading indices at once."""
    lead, K, N = x.shape[:-1], W.shape[0], W.shape[1]
    M = math.prod(lead)                      # written out: a reshape to -1 is ambiguous at M = 0
    c = rows_per_block(M, K, N, LEAST_ROWS["times"]) if small_kernel() else None
    if c is None:
        return (x.reshape(M, K) @ W).reshape(lead + (N,))
    return (x.reshape(M // c, c, K) @ W).reshape(lead + (N,))


def times_t(x, W):
    """x W^T: x (..., K), W (N, K) -> (..., N); W^T copied contiguous first (a transposed operand takes
    OpenBLAS's slower transposed kernels, and W is small)."""
    return times(x, np.ascontiguousarray(W.T))


def sum_outer(x, y):
    """Σ over the leading indices of x_i^T y_i, that is x^T y with the rows of x (..., K) and y (..., N) as the
    samples -> (K, N): a weight's gradient (x the layer's input, y dL/d(output))."""
    if x.shape[:-1] != y.shape[:-1]:
        raise ValueError(f"x and y must have the same leading shape (..., K) and (..., N), got shapes {x.shape} and "
                         f"{y.shape}")
    K, N = x.shape[-1], y.shape[-1]
    M = math.prod(x.shape[:-1])
    x2, y2 = x.reshape(M, K), y.reshape(M, N)
    c = rows_per_block(M, K, N, LEAST_ROWS["sum_outer"]) if small_kernel() else None
    if c is None:
        return x2.T @ y2
    blocks = np.matmul(x2.reshape(M // c, c, K).transpose(0, 2, 1), y2.reshape(M // c, c, N))   # (M / c, K, N)
    return blocks.sum(axis=0)
