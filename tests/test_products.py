"""The layers' and cells' matrix products (minimal/products.py) equal the plain products to rounding, blocked or
not, and the blocks follow OpenBLAS's small-matrix rule: the largest power of two c dividing M with c K N <= 10^6."""
import os
import subprocess
import sys

import numpy as np
import pytest

from minimal import products


@pytest.mark.parametrize("M, K, N, least, c", [
    (4096, 32, 192, 32, 128),     # 128 * 32 * 192 = 786 432 <= 10^6 < 2 * that
    (2048, 64, 256, 32, 32),
    (2048, 64, 256, 64, None),    # 32 rows a block: fewer than least
    (4096, 192, 192, 32, None),   # 16 rows
    (100, 100, 100, 32, None),    # M K N = 10^6: small already
    (4097, 32, 192, 32, None),    # odd M: no power of two above 1 divides it
    (6144, 32, 192, 32, 128),     # 6144 = 3 * 2048
    (0, 32, 192, 32, None),
    (4096, 0, 192, 32, None),
])
def test_rows_per_block_is_the_largest_power_of_two_that_keeps_a_block_small(M, K, N, least, c):
    assert products.rows_per_block(M, K, N, least) == c
    if c is not None:
        assert M % c == 0 and c * K * N <= products.SMALL_PRODUCT < 2 * c * K * N or M % (2 * c) != 0


def _operands(rng, lead, K, N, dtype):
    x = rng.standard_normal(lead + (K,)).astype(dtype)
    W = rng.standard_normal((K, N)).astype(dtype)
    y = rng.standard_normal(lead + (N,)).astype(dtype)
    return x, W, y


@pytest.mark.parametrize("blocked", [True, False])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-13), (np.float32, 2e-5)])
@pytest.mark.parametrize("lead, K, N", [((4096,), 32, 192), ((16, 128), 64, 64), ((64, 64), 192, 32),
                                        ((3, 5), 4, 2), ((0, 7), 32, 192)])
def test_products_equal_the_plain_products(monkeypatch, blocked, dtype, rtol, lead, K, N):
    monkeypatch.setattr(products, "small_kernel", lambda: blocked)
    x, W, y = _operands(np.random.default_rng(0), lead, K, N, dtype)
    M = int(np.prod(lead))
    x2, y2 = x.reshape(M, K), y.reshape(M, N)
    pairs = [(products.times(x, W), (x2 @ W).reshape(lead + (N,))),
             (products.times_t(y, W), (y2 @ W.T).reshape(lead + (K,))),
             (products.sum_outer(x, y), x2.T @ y2)]
    for got, want in pairs:
        assert got.shape == want.shape and got.dtype == dtype
        scale = max(np.abs(want).max(initial=0.0), 1.0)
        assert np.abs(got - want).max(initial=0.0) <= rtol * scale * np.sqrt(max(K, M, 1))


def test_non_contiguous_inputs_give_the_same_products(monkeypatch):
    monkeypatch.setattr(products, "small_kernel", lambda: True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 128, 64))[:, :, ::2]           # (64, 128, 32), strided
    W = rng.standard_normal((32, 192))
    y = rng.standard_normal((64, 128, 192))
    assert np.allclose(products.times(x, W), x @ W, rtol=1e-12, atol=1e-12)
    assert np.allclose(products.sum_outer(x, y), x.reshape(-1, 32).T @ y.reshape(-1, 192), rtol=1e-12, atol=1e-10)


def test_sum_outer_names_mismatched_rows():
    with pytest.raises(ValueError, match=r"x and y must have the same leading shape.*\(4, 3\).*\(5, 2\)"):
        products.sum_outer(np.zeros((4, 3)), np.zeros((5, 2)))


def _openblas_core():
    from threadpoolctl import threadpool_info

    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return blas[0].get("architecture") if blas and blas[0].get("internal_api") == "openblas" else None


def test_the_blocks_follow_the_core_openblas_runs_on():
    """On OpenBLAS, the small-matrix kernel's cores block the products and a core forced without it (the
    OPENBLAS_CORETYPE the notebooks are also checked under) does not."""
    if _openblas_core() is None:
        pytest.skip("NumPy's BLAS here is not OpenBLAS")
    assert products.small_kernel() == (_openblas_core() in products.SMALL_CORES)
    code = "from minimal import products; print(products.small_kernel())"
    env = dict(os.environ, OPENBLAS_CORETYPE="Sandybridge")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_benchmark_prints_every_shape_and_product():
    """bench/products.py (one round: it runs, not how fast) prints a row per shape and product, with a ratio
    exactly where blocks apply on this BLAS."""
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "bench" / "products.py"
    out = subprocess.run([sys.executable, str(script), "--rounds", "1"], capture_output=True, text=True, check=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")).stdout.splitlines()
    rows = [line.split() for line in out[2:]]
    assert len(rows) == 3 * 12
    for shape, *name, blocks, plain, ours, ratio in rows:
        assert float(plain) > 0 and float(ours) > 0
        assert (ratio == "-") == (blocks == "-")
