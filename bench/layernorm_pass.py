"""What LayerNorm's float32-register kernels save (``minimal/layers/_layernorm_numba.py``, the ``_f32`` pair).

On float32 arrays, the forward and the backward pass of the float32-register kernels against the float64-register
ones the layer ran on every dtype before (sums, centred values and products in float64), called in turn in every
round on the same arrays, one thread; the outputs of the two are checked within a few float32 roundings first (the
bound of tests/test_layers.py, widened by the float64 pair's own roundings). Input: x = 3 + 2 N(0, 1) (seed 0),
gamma = 1 + N(0, 1) / 2, standard normal beta and dy.

    python bench/layernorm_pass.py [--repeats 200] [--shape 16 128 64]

Prints µs per call, the min (and median) over ``repeats`` rounds after one untimed call of each.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from minimal.layers import _layernorm_numba as k

EPS = 1e-5


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--shape", type=int, nargs="+", default=(16, 128, 64))
    args = ap.parse_args(argv)
    if len(args.shape) < 2 or min(args.shape) < 1:
        ap.error(f"shape must be two or more sizes >= 1 (..., D), got {tuple(args.shape)}")
    if args.repeats < 1:
        ap.error(f"repeats must be >= 1, got {args.repeats}")
    rng = np.random.default_rng(0)
    D = args.shape[-1]
    x = (3.0 + 2.0 * rng.standard_normal(tuple(args.shape))).astype(np.float32).reshape(-1, D)
    gamma = (1.0 + 0.5 * rng.standard_normal(D)).astype(np.float32)
    beta, dy = rng.standard_normal(D).astype(np.float32), rng.standard_normal(x.shape).astype(np.float32)
    out = {name: (np.empty_like(x), np.empty_like(x), np.empty(x.shape[0], np.float32), np.empty_like(x),
                  np.empty(D), np.empty(D)) for name in ("f64", "f32")}
    kernels = {"f64": (k.layernorm_forward, k.layernorm_backward),
               "f32": (k.layernorm_forward_f32, k.layernorm_backward_f32)}
    for name, (fwd, bwd) in kernels.items():
        y, xhat, inv_std, dx, dgamma, dbeta = out[name]
        fwd(x, gamma, beta, EPS, y, xhat, inv_std)
        bwd(dy, xhat, inv_std, gamma, dx, dgamma, dbeta)
    # the bound of tests/test_layers.py: 8 units of 2^-24 times each output's scale, the float64 pair's outputs the
    # reference (xhat + 1 + |mu| / sigma for xhat; times |gamma|, plus |y|, for y; dx's from its row sums)
    u = 8 * 2.0 ** -24
    y64, xh64, r64, dx64 = (o.astype(np.float64) for o in out["f64"][:4])
    mu_r = np.abs(x.astype(np.float64).mean(axis=1, keepdims=True)) * r64[:, None]
    g64 = np.abs(gamma.astype(np.float64))
    assert np.all(np.abs(out["f32"][1] - xh64) <= u * (mu_r + np.abs(xh64) + 1) + 2 * u * np.abs(xh64)), "xhat"
    assert np.all(np.abs(out["f32"][0] - y64) <= u * (g64 * (mu_r + np.abs(xh64) + 1) + np.abs(y64))
                  + 2 * u * g64 * np.abs(xh64)), "y"
    dyg = np.abs(dy * g64)
    scale = r64[:, None] * (dyg + dyg.mean(axis=1, keepdims=True)
                            + np.abs(xh64) * (dyg * np.abs(xh64)).mean(axis=1, keepdims=True))
    assert np.all(np.abs(out["f32"][3] - dx64) <= 2 * u * scale * (1 + mu_r)), "dx"
    calls = {}
    for name, (fwd, bwd) in kernels.items():
        y, xhat, inv_std, dx, dgamma, dbeta = out[name]
        calls[f"forward, {name} registers"] = lambda f=fwd, o=out[name]: f(x, gamma, beta, EPS, o[0], o[1], o[2])
        calls[f"backward, {name} registers"] = lambda b=bwd, o=out[name]: b(dy, o[1], o[2], gamma, o[3], o[4], o[5])
    times = {name: [] for name in calls}
    for _ in range(args.repeats):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    print(f"x {tuple(args.shape)} float32, {args.repeats} rounds; the outputs within a few float32 roundings")
    for name in sorted(times, key=lambda n: (n.split(",")[0] != "forward", n)):
        ts = times[name]
        print(f"  {name:26s} {1e6 * min(ts):8.1f} us  (median {1e6 * float(np.median(ts)):8.1f})")


if __name__ == "__main__":
    main()
