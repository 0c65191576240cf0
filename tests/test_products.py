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
    (4096, 32, 16, 32, None),     # 1024 rows a block: more than MOST_ROWS
    (4096, 32, 32, 32, None),     # 512
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


@pytest.mark.parametrize("call, x, W, words", [
    (products.times, np.zeros((4096, 33)), np.zeros((32, 192)),
     r"W a matrix of shape \(K, N\).*\(4096, 33\).*\(32, 192\)"),
    (products.times, np.zeros((0, 64)), np.zeros((32, 192)), r"\(K, N\).*\(0, 64\)"),
    (products.times, np.zeros((8, 32)), np.zeros(32), r"\(K, N\).*\(8, 32\) and \(32,\)"),
    (products.times, np.float64(1.0), np.zeros((1, 3)), r"\(\.\.\., K\)"),
    (products.times, [[1.0, 2.0]], np.zeros((2, 3)), r"\(1, 2\) and \(2, 3\)"),
    (products.times_t, np.zeros((8, 32)), np.zeros((32, 192)), r"W a matrix of shape \(N, K\)"),
    (products.sum_outer, np.float64(1.0), np.zeros(3), r"x and y must be arrays"),
])
def test_bad_operands_are_named_with_their_shapes(call, x, W, words):
    with pytest.raises(ValueError, match=words):
        call(x, W)


def _gate(coretype=None, threads=1):
    """products.small_kernel() in a fresh process with OpenBLAS forced to ``coretype`` and ``threads`` threads."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    code = ("from minimal import products; from threadpoolctl import threadpool_info; "
            "print(products.small_kernel(), "
            "max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    gate, n = out.stdout.split()
    return gate if int(n) == threads else "OpenBLAS runs %s threads" % n   # a machine that caps the threads


def _numpy_blas_is_openblas():
    import numpy
    try:
        return "openblas" in numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except (TypeError, KeyError):      # NumPy < 1.25: no dicts
        return False


def test_the_blocks_follow_the_core_and_the_threads_openblas_runs():
    """The blocks run on a core with OpenBLAS's small-matrix kernel and one thread only: not on a core forced without
    it (the OPENBLAS_CORETYPE the notebooks are also checked under), not with two threads (OpenBLAS would spread a
    plain product over them and runs a small one on one)."""
    if not _numpy_blas_is_openblas():
        pytest.skip("NumPy's BLAS here is not OpenBLAS")
    assert _gate("Sandybridge") == "False"
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:                # NumPy 1
        from numpy.core._multiarray_umath import __cpu_features__
    if not __cpu_features__.get("AVX512F"):
        pytest.skip("no AVX-512 here: OpenBLAS cannot run its SkylakeX kernel")
    assert _gate("SkylakeX") == "True"
    two = _gate("SkylakeX", threads=2)
    if two.startswith("OpenBLAS runs"):
        pytest.skip(two + " when asked for 2")
    assert two == "False"


def test_the_gate_reads_the_thread_count_at_each_call():
    from threadpoolctl import threadpool_limits
    if not products._small_core_openblas():
        pytest.skip("no OpenBLAS on a core with the small-matrix kernel here")
    with threadpool_limits(limits=1, user_api="blas"):
        assert products.small_kernel()
        with threadpool_limits(limits=2, user_api="blas"):
            if products._small_core_openblas()[0].get_num_threads() != 2:
                pytest.skip("OpenBLAS here does not run 2 threads when asked")
            assert not products.small_kernel()
        assert products.small_kernel()


def test_the_benchmark_prints_every_shape_and_product():
    """bench/products.py (one round: it runs, not how fast) prints a row per shape and product, with a ratio
    exactly where blocks apply on this BLAS."""
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "bench" / "products.py"
    out = subprocess.run([sys.executable, str(script), "--rounds", "1"], capture_output=True, text=True, check=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")).stdout.splitlines()
    rows = [line.split() for line in out[2:]]
    assert len(rows) == 3 * 12
    small = out[0].split("small-matrix kernel: ")[1].startswith("True")
    least = products.LEAST_ROWS
    for shape, *name, blocks, plain, ours, ratio in rows:
        M, K, N = map(int, shape.split("x"))
        c = {"x W": products.rows_per_block(M, K, N, least["times"]),
             "dy W^T": products.rows_per_block(M, N, K, least["times"]),
             "x^T dy": products.rows_per_block(M, K, N, least["sum_outer"])}[" ".join(name)]
        assert blocks == (str(c) if small and c else "-")
        assert float(plain) > 0 and float(ours) > 0
