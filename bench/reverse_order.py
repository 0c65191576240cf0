"""Why the min cells' reverse pass runs its batch rows and channels in descending order
(``minimal/cells/_min_scan_numba.py``).

The vanilla minGRU reverse pass, ``mingru_scan_backward`` (batch rows, time and channels descending: each array one
descending stream), against the same loop with the batch rows and channels ascending (its order until the change)
and the same loop run forward in time (not a backward: the plain ascending stream, for scale), on C-contiguous
(B, T, H) float32 arrays: right after the previous round (in the last-level cache, where the arrays fit in it) and
from main memory (after a pass over 64 MiB of other data, as in a training step, where the forward wrote these
arrays long before). The two orders of the reverse pass give the same bytes (checked here); only the order in which
memory is read differs.

    python bench/reverse_order.py [--repeats 30] [--shape 64 64 192]

Prints ms per call, the min over ``repeats`` rounds, the three kernels in turn in each round, one thread.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from minimal.cells._min_scan_numba import mingru_scan_backward


@njit(cache=True, error_model="numpy")
def ascending_channels(z, j_z, dh, dk_z, dk_h):
    """``mingru_scan_backward`` with the batch rows and channels ascending: each sequence's rows taken from the last
    one back, each read forward."""
    B, T, H = z.shape
    g, a_next = np.empty(H, dh.dtype), np.empty(H, dh.dtype)
    for i in range(B):
        for c in range(H):
            g[c] = 0.0
            a_next[c] = 0.0
        for t in range(T - 1, -1, -1):
            for c in range(H):
                gc = dh[i, t, c] + a_next[c] * g[c]
                zc = np.float64(z[i, t, c])
                dk_z[i, t, c] = np.float64(gc) * np.float64(j_z[i, t, c])
                dk_h[i, t, c] = np.float64(gc) * zc
                g[c] = gc
                a_next[c] = 1.0 - zc


@njit(cache=True, error_model="numpy")
def forward_in_time(z, j_z, dh, dk_z, dk_h):
    """The same arithmetic with t ascending: one ascending stream per array (not a backward pass)."""
    B, T, H = z.shape
    g, a_next = np.empty(H, dh.dtype), np.empty(H, dh.dtype)
    for i in range(B):
        for c in range(H):
            g[c] = 0.0
            a_next[c] = 0.0
        for t in range(T):
            for c in range(H):
                gc = dh[i, t, c] + a_next[c] * g[c]
                zc = np.float64(z[i, t, c])
                dk_z[i, t, c] = np.float64(gc) * np.float64(j_z[i, t, c])
                dk_h[i, t, c] = np.float64(gc) * zc
                g[c] = gc
                a_next[c] = 1.0 - zc


KERNELS = {"descending (the library's)": mingru_scan_backward, "ascending rows, channels": ascending_channels,
           "forward in time": forward_in_time}


def run(shape=(64, 64, 192), repeats=30, evict_mib=64, seed=0):
    """{(kernel name, "in cache" | "from memory"): ms}, min over ``repeats`` rounds (the kernels in turn in each)."""
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"shape must be three sizes >= 1 (B, T, H), got {shape}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rng = np.random.default_rng(seed)
    z, j_z, dh = (rng.random(shape).astype(np.float32) for _ in range(3))
    outs = {name: (np.empty(shape, np.float32), np.empty(shape, np.float32)) for name in KERNELS}
    for name, kernel in KERNELS.items():
        kernel(z, j_z, dh, *outs[name])                  # compiled (or loaded) before timing
    for a, b in zip(outs["descending (the library's)"], outs["ascending rows, channels"]):
        if a.tobytes() != b.tobytes():
            raise AssertionError("the two orders of the reverse pass must give the same bytes")
    other = np.ones(evict_mib * 2 ** 20 // 4, np.float32)
    best = {}
    for where in ("in cache", "from memory"):
        for _ in range(repeats):
            for name, kernel in KERNELS.items():
                if where == "from memory":
                    other += 1.0
                t0 = time.perf_counter()
                kernel(z, j_z, dh, *outs[name])
                ms = (time.perf_counter() - t0) * 1e3
                best[name, where] = min(best.get((name, where), np.inf), ms)
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--shape", type=int, nargs=3, default=(64, 64, 192), metavar=("B", "T", "H"))
    a = p.parse_args(argv)
    try:
        best = run(tuple(a.shape), a.repeats)
    except ValueError as e:
        p.error(str(e))
    print(f"minGRU's reverse pass over (B, T, H) = {tuple(a.shape)} float32, ms, min of {a.repeats} rounds")
    print(f"{'order':<28}{'in cache':>10}{'from memory':>13}")
    for name in KERNELS:
        print(f"{name:<28}{best[name, 'in cache']:10.3f}{best[name, 'from memory']:13.3f}")


if __name__ == "__main__":
    main()
