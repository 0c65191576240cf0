"""What dropout's compiled pass saves (``minimal/layers/_dropout_numba.py``).

``dropout.forward`` on a float32 array with a PCG64 generator (the compiled pass, which draws its own mask) against
``dropout.numpy_pass``, the NumPy lines it is tested against (a float64 draw, a comparison, a cast and two products:
what ``forward`` ran before), each from a generator of the same seed, called in turn in every round, one thread; the
two masks, outputs and generator states are checked equal first. Input: standard normal x (seed 0), rate 0.1 (the
Shakespeare Config()'s).

    python bench/dropout_pass.py [--repeats 100] [--shape 16 128 64]

Prints ms per call, the min (and median) over ``repeats`` rounds after one untimed call of each.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from minimal.layers import dropout

RATE = 0.1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--shape", type=int, nargs="+", default=(16, 128, 64))
    args = ap.parse_args(argv)
    if min(args.shape) < 1:
        ap.error(f"shape must be sizes >= 1, got {tuple(args.shape)}")
    if args.repeats < 1:
        ap.error(f"repeats must be >= 1, got {args.repeats}")
    x = np.random.default_rng(0).standard_normal(tuple(args.shape), dtype=np.float32)
    ours, theirs = np.random.default_rng(1), np.random.default_rng(1)
    y, cache = dropout.forward({}, x, RATE, ours)
    y_ref, mask_ref = dropout.numpy_pass(x, RATE, theirs)
    assert np.array_equal(y, y_ref) and np.array_equal(cache.mask, mask_ref)
    assert ours.bit_generator.state == theirs.bit_generator.state
    calls = {"compiled pass": lambda: dropout.forward({}, x, RATE, ours),
             "NumPy lines": lambda: dropout.numpy_pass(x, RATE, theirs)}
    times = {name: [] for name in calls}
    for _ in range(args.repeats):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    print(f"x {tuple(args.shape)} float32, rate {RATE}, {args.repeats} rounds; the same masks, outputs and states")
    for name, ts in times.items():
        print(f"  {name:16s} {1e3 * min(ts):7.3f} ms  (median {1e3 * float(np.median(ts)):7.3f})")


if __name__ == "__main__":
    main()
