"""The matrix products of ``minimal.products`` against the plain products, side by side in one run: for each shape
of the ``bench train`` rows (B T rows by K by N), the forward x W, the input gradient dy W^T and the weight gradient
x^T dy, each plain (``x @ W``, ``dy @ W.T``, ``x.T @ dy``) and as ``minimal.products`` computes it (``times``,
``times_t``, ``sum_outer``: row blocks where this BLAS has the small-matrix kernel), min of ``--rounds``
interleaved rounds, one thread. A ratio below 1: the blocks are faster; "-" where no blocks apply (the two forms
are the same call). With ``--steps``, each ``bench train`` row's whole step (``bench.train.project_step``) too,
with the blocks and without (``products.small_kernel`` forced off: every product plain), a step of each in turn,
each timed right after an untimed step of its own.

``--force-blocks`` computes the blocks on any BLAS (on a core without the small-matrix kernel, what the gate in
``products.small_kernel`` saves).

``--least-rows T S`` sets ``products.LEAST_ROWS`` (times, sum_outer) for the run: the blocks that the defaults
leave plain.

Usage: python bench/products.py [--rounds 30] [--dtype float32] [--steps] [--force-blocks] [--least-rows T S]
(the fair setting of ``bench train``: one thread, jemalloc preloaded with its decay off, pinned;
OPENBLAS_CORETYPE=Haswell shows a core without the kernel)
"""
import argparse
import time

import numpy as np

from minimal import products
from minimal.run import speed

# (M = B T, K, N) of the bench train rows' weights (profile.gemm_shapes): selective copying (B T = 64 x 64, D 32,
# H 192) and the Shakespeare LMs (16 x 128, D 64, MLP 256, 4 heads, vocabulary 70)
SHAPES = [(4096, 32, 192), (4096, 192, 32), (4096, 32, 16), (4096, 16, 32),
          (2048, 64, 64), (2048, 64, 128), (2048, 128, 64), (2048, 64, 192), (2048, 64, 256), (2048, 256, 64),
          (2048, 64, 70), (2048, 70, 64)]


def forms(M, K, N, dtype, rng):
    x, W = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
    dy = rng.standard_normal((M, N)).astype(dtype)
    return {"x W": (lambda: x @ W, lambda: products.times(x, W),
                    products.rows_per_block(M, K, N, products.LEAST_ROWS["times"])),
            "dy W^T": (lambda: dy @ W.T, lambda: products.times_t(dy, W),
                       products.rows_per_block(M, N, K, products.LEAST_ROWS["times"])),
            "x^T dy": (lambda: x.T @ dy, lambda: products.sum_outer(x, dy),
                       products.rows_per_block(M, K, N, products.LEAST_ROWS["sum_outer"]))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--steps", action="store_true", help="also each bench train row's step, blocks on and off")
    ap.add_argument("--force-blocks", action="store_true", help="the blocks on any BLAS (products.small_kernel on)")
    ap.add_argument("--least-rows", type=int, nargs=2, metavar=("TIMES", "SUM_OUTER"),
                    help="products.LEAST_ROWS for this run")
    args = ap.parse_args()
    speed.tune()
    if args.least_rows:
        products.LEAST_ROWS.update(times=args.least_rows[0], sum_outer=args.least_rows[1])
    has = products.small_kernel()
    if args.force_blocks:
        products.small_kernel = lambda: True
    if args.steps:
        steps(args.rounds)
    rng = np.random.default_rng(0)
    small = products.small_kernel()   # with --force-blocks: True
    table = {(s, name): f for s in SHAPES for name, f in forms(*s, np.dtype(args.dtype), rng).items()}
    best = {key: [np.inf, np.inf] for key in table}
    for r in range(args.rounds):
        for key, (plain, ours, _) in table.items():
            for i in ((0, 1) if r % 2 else (1, 0)):
                f = (plain, ours)[i]
                t0 = time.perf_counter()
                f()
                best[key][i] = min(best[key][i], time.perf_counter() - t0)
    print(f"minimal.products against the plain product, {args.dtype}, one thread, min of {args.rounds} interleaved "
          f"rounds; the BLAS has the small-matrix kernel: {has}" + ("; blocks forced on" if args.force_blocks else "")
          + f"; fewest rows a block: {products.LEAST_ROWS}")
    print(f"{'M x K x N':>16} {'product':>8} {'rows/block':>10} {'plain us':>9} {'ours us':>8} {'ratio':>6}")
    for (shape, name), (_, _, c) in table.items():
        plain, ours = (1e6 * t for t in best[shape, name])
        blocks = c if small and c else "-"
        ratio = f"{ours / plain:6.2f}" if blocks != "-" else f"{'-':>6}"
        print(f"{'x'.join(map(str, shape)):>16} {name:>8} {blocks!s:>10} {plain:9.1f} {ours:8.1f} {ratio}")


def steps(rounds):
    from minimal.bench import train

    if not products.small_kernel():
        print("no small-matrix kernel on this BLAS: the steps run plain products either way")
        return
    on = products.small_kernel
    runs = {m.name: train.project_step(m) for m in train.models()}
    best = {name: [np.inf, np.inf] for name in runs}
    for r in range(rounds):
        for name, step in runs.items():
            for i in ((0, 1) if r % 2 else (1, 0)):
                products.small_kernel = on if i else (lambda: False)
                step()
                t0 = time.perf_counter()
                step()
                best[name][i] = min(best[name][i], time.perf_counter() - t0)
    products.small_kernel = on
    print(f"bench train's steps with every product plain and with minimal.products' blocks, min of {rounds} "
          f"interleaved rounds, one thread")
    print(f"{'row':32} {'plain ms':>9} {'blocks ms':>9} {'ratio':>6}")
    for name, (plain, ours) in best.items():
        print(f"{name:32} {1e3 * plain:9.2f} {1e3 * ours:9.2f} {ours / plain:6.2f}")
    print()


if __name__ == "__main__":
    main()
