"""bench train on the rows named in argv[1] (comma-separated), argv[2] rounds: ``minimal.bench.train.bench_train``
without the cell runners, for a measurement that fits in a session (bench/results/train_cpu_2026-11-29_anchors_subset.txt)."""
import sys
import time

import numpy as np

from minimal.bench import train as bt
from minimal.run import speed

names = sys.argv[1].split(",")
repeats = int(sys.argv[2])
speed.tune()
twins = {n: bt._anchor(n) for n in ("torch", "jax")}
rows, runners = [], []
t0 = time.time()
for model in [m for m in bt.models() if m.name in names]:
    row = {"name": model.name, "ours": {}}
    rows.append(row)
    runners.append((row, "ours", None, bt.project_step(model)))
    for name, tm in twins.items():
        check = tm.check_equal(bt.as_dtype(model, np.float64))
        row.setdefault("checks", {})[name] = {"max_rel": check["max_rel"], "equal": check["max_rel"] <= bt.EQUAL_TOL}
        row.setdefault("theirs", {})
        if check["max_rel"] > bt.EQUAL_TOL:
            print("differs", model.name, name, check, file=sys.stderr)
            continue
        for version in tm.versions(model):
            label = f"{name}: {version}"
            row["theirs"][label] = {}
            runners.append((row, "theirs", label, tm.step(model, version)))
    print(f"built {model.name} at {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
bt.interleaved_minima(runners, repeats, log=lambda s: print(s, file=sys.stderr, flush=True))
print(bt.format_train_table(bt.add_ratios(rows)))
for r in rows:
    print(r["name"], {k: round(v["step"] * 1e3, 2) for k, v in r.get("theirs", {}).items()},
          "median", {k: round(v.get("step median", float("nan")) * 1e3, 2) for k, v in r.get("theirs", {}).items()})
