"""Subnormal gate gradients and the gates' matrix products: the forward and backward of one training step of the
selective-copying sweep's model (``experiments.minrnn.selective_copy.Job``: log-space minGRU, D 32, H 192, batch 64,
float32) at T = 64, 128 and 256, with and without ``_gates_numba.flush_and_sum_`` setting the subnormal entries of
dL/dk_n to 0 before ``_min_modes.affine_backward``'s products (without: the same kernel's sum, no flush, as before the
flush was added), interleaved in one process, min and median over the rounds. Prints, per T, the share of subnormal
entries in the gate gradients, the time both ways and their ratio, and whether the two ways' gradients are equal
bit for bit.

Usage: python bench/subnormal_gradients.py [--depth 1] [--rounds 8]
Fair setting as for ``python -m minimal bench train``: one thread (OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1),
jemalloc preloaded, a quiet machine.
"""
import argparse
import time

import numpy as np
from numba import njit

from minimal.cells import _gates_numba
from minimal.experiments.minrnn import selective_copy as S, selective_copy_model as SCM
from minimal.tasks import selective_copy as task


@njit(cache=True)
def _sum_only(a, tiny, out):
    """flush_and_sum_ without the flush: out = a.sum(axis=0) row by row, a left as it is."""
    for c in range(a.shape[1]):
        out[c] = 0
    for r in range(a.shape[0]):
        for c in range(a.shape[1]):
            out[c] += a[r, c]


def _subnormal_share(job, params, batch):
    """Share of subnormal entries among the gate gradients dL/dk_n of one step (recorded before the flush)."""
    seen, flush = [], _gates_numba.flush_and_sum_

    def spy(a, tiny, out):
        seen.append(float(np.mean((a != 0) & (np.abs(a) < tiny))))
        flush(a, tiny, out)

    _gates_numba.flush_and_sum_ = spy
    try:
        SCM.loss_and_grads(params, job, batch.inputs, batch.targets)
    finally:
        _gates_numba.flush_and_sum_ = flush
    return float(np.mean(seen))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    flush = _gates_numba.flush_and_sum_
    print(f"log-space minGRU x{args.depth}, D 32, H 192, batch 64, float32; {args.rounds} interleaved rounds")
    print("T     subnormal share   with flush ms (min / median)   without ms (min / median)   with / without   equal")
    for T in (64, 128, 256):
        job = S.Job(kind="mingru", depth=args.depth, dtype="float32", log_space=True, T=T)
        params = SCM.init_params(np.random.default_rng(0), job)
        batch = task.sample(np.random.default_rng(1), job.batch, job.T, job.n_data, job.vocab)
        share = _subnormal_share(job, params, batch)
        times, grads = {"with": [], "without": []}, {}
        for r in range(args.rounds + 1):                    # round 0 warms up (compiles), not timed
            for way, kernel in (("with", flush), ("without", _sum_only)):
                _gates_numba.flush_and_sum_ = kernel
                try:
                    t0 = time.process_time()
                    _, g = SCM.loss_and_grads(params, job, batch.inputs, batch.targets)
                    dt = time.process_time() - t0
                finally:
                    _gates_numba.flush_and_sum_ = flush
                if r:
                    times[way].append(dt)
                grads[way] = g
        equal = all(np.array_equal(grads["with"][k], grads["without"][k]) for k in grads["with"])
        w, wo = (1e3 * np.array(times[k]) for k in ("with", "without"))
        print(f"{T:<5} {share:>15.3f}   {w.min():>12.1f} / {np.median(w):<10.1f}     {wo.min():>10.1f} / "
              f"{np.median(wo):<10.1f}   {w.min() / wo.min():>14.2f}   {equal}")


if __name__ == "__main__":
    main()
