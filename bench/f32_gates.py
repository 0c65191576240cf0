"""What the float32-register one passes of the min cells save (``minimal/cells/_min_scan_f32.py``,
``minimal/cells/_min_log_linear_f32.py``).

The forward one pass of vanilla minGRU and minLSTM, and the log-space cells' linear form, on C-contiguous (B, T, H)
float32 pre-activations, with the gates in float64 registers (``_min_scan_numba.mingru_scan_into`` /
``minlstm_scan_into``, ``_min_log_linear.mingru_log_linear_into`` / ``minlstm_log_linear_into``: the kernels float64
arrays run, which float32 arrays ran until their twins came) and in float32 registers (the ``_f32`` twins, what
float32 arrays run now), each called in turn in every round, one thread. Inputs: standard normal pre-activations
times 3, standard normal biases, a standard normal initial state (vanilla) or one uniform in [0.1, 1) (log space, where
it must be positive) (seed 0). Also printed: the largest difference between the two, relative to each output array's
largest entry.

    python bench/f32_gates.py [--repeats 100] [--shape 64 64 192]

Prints ms per call, the min (and median) over ``repeats`` rounds after one untimed call of each.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from minimal.cells import _min_log_linear, _min_log_linear_f32, _min_scan_f32, _min_scan_numba


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--shape", type=int, nargs=3, default=(64, 64, 192), metavar=("B", "T", "H"))
    args = ap.parse_args(argv)
    if min(args.shape) < 1:
        ap.error(f"shape must be three sizes >= 1 (B, T, H), got {tuple(args.shape)}")
    if args.repeats < 1:
        ap.error(f"repeats must be >= 1, got {args.repeats}")
    B, T, H = args.shape
    rng = np.random.default_rng(0)
    k_f, k_i, k_h = (3.0 * rng.standard_normal((B, T, H), dtype=np.float32) for _ in range(3))
    b_f, b_i, b_h = (rng.standard_normal(H, dtype=np.float32) for _ in range(3))
    h0 = rng.standard_normal((B, H), dtype=np.float32)
    h0_log = rng.uniform(0.1, 1.0, (B, H)).astype(np.float32)
    tiny = _min_log_linear.tiny(k_f)
    lin, lin32 = _min_log_linear, _min_log_linear_f32
    calls = {
        "minGRU f64 registers": (3, lambda o: _min_scan_numba.mingru_scan_into(k_f, k_h, b_f, b_h, h0, *o)),
        "minGRU f32 registers": (3, lambda o: _min_scan_f32.mingru_scan_into_f32(k_f, k_h, b_f, b_h, h0, *o)),
        "minLSTM f64 registers": (5, lambda o: _min_scan_numba.minlstm_scan_into(k_f, k_i, k_h, b_f, b_i, b_h, h0,
                                                                                 *o)),
        "minLSTM f32 registers": (5, lambda o: _min_scan_f32.minlstm_scan_into_f32(k_f, k_i, k_h, b_f, b_i, b_h, h0,
                                                                                   *o)),
        "log minGRU f64 registers": (6, lambda o: lin.mingru_log_linear_into(k_f, k_h, b_f, b_h, h0_log, True, tiny,
                                                                             *o)),
        "log minGRU f32 registers": (6, lambda o: lin32.mingru_log_linear_into_f32(k_f, k_h, b_f, b_h, h0_log, True,
                                                                                   tiny, *o)),
        "log minLSTM f64 registers": (7, lambda o: lin.minlstm_log_linear_into(k_f, k_i, k_h, b_f, b_i, b_h, h0_log,
                                                                               True, tiny, *o)),
        "log minLSTM f32 registers": (7, lambda o: lin32.minlstm_log_linear_into_f32(k_f, k_i, k_h, b_f, b_i, b_h,
                                                                                     h0_log, True, tiny, *o)),
    }
    outs = {name: [np.empty((B, T, H), np.float32) for _ in range(n)] for name, (n, _) in calls.items()}
    calls = {name: call for name, (_, call) in calls.items()}
    for name, call in calls.items():
        assert call(outs[name]), name
    times = {name: [] for name in calls}
    for _ in range(args.repeats):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call(outs[name])
            times[name].append(time.perf_counter() - t0)
    print(f"(B, T, H) = {(B, T, H)} float32, {args.repeats} rounds")
    for name, ts in times.items():
        print(f"  {name:28s} {1e3 * min(ts):7.3f} ms  (median {1e3 * float(np.median(ts)):7.3f})")
    for cell, names in (("minGRU", ("z", "j_z", "h")), ("minLSTM", ("f'", "i'", "j_f", "j_i", "h")),
                        ("log minGRU", ("z", "h", "log h", "1 − z", "j_z", "j_h")),
                        ("log minLSTM", ("f'", "i'", "h", "log h", "j_f", "j_i", "j_h"))):
        diffs = [float(np.abs(a.astype(np.float64) - b).max() / np.abs(a).max())
                 for a, b in zip(outs[f"{cell} f64 registers"], outs[f"{cell} f32 registers"])]
        print(f"  {cell}: largest difference / largest entry: "
              + ", ".join(f"{n} {d:.1e}" for n, d in zip(names, diffs)))


if __name__ == "__main__":
    main()
