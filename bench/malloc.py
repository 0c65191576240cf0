"""A training step under each memory allocator a user may have: glibc's malloc as it comes, glibc with the thresholds
``minimal.run.speed.tune`` sets (the experiments and the lessons call it), and jemalloc preloaded with its default
decay and with its decay off (``bench train``'s fair setting), where libjemalloc is installed. For each, the CPU ms of
a step (``bench.train.project_step``, min over the rounds) and its minor page faults (the kernel zero-filling pages
that a freed temporary handed back and the next step maps again).

Each setting runs in its own process (an allocator is chosen when a process starts), one process per setting in
turn, ``--rounds`` times; in each, 3 untimed steps, then ``--steps`` timed ones, one BLAS thread, pinned to one core
with ``--pin``.

Usage: python bench/malloc.py [--rows "selective copy minlstm x2" ...] [--rounds 3] [--steps 20] [--pin 0]
"""
import argparse
import json
import os
import subprocess
import sys

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

_CHILD = r"""
import json, resource, sys, time
from minimal.run import speed
if sys.argv[1] == "tuned":
    assert speed.tune_malloc()
from minimal.bench import train as TR
rows, steps = json.loads(sys.argv[2]), int(sys.argv[3])
out = {}
for m in TR.models():
    if m.name not in rows:
        continue
    step = TR.project_step(m)
    for _ in range(3):
        step()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    best = min(step()["step"] for _ in range(steps))
    f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out[m.name] = (best * 1e3, (f1 - f0) / steps)
print(json.dumps(out))
"""


def settings():
    """(name, extra environment, child mode) of each allocator setting available here."""
    out = [("glibc malloc, as it comes", {}, "plain"),
           ("glibc malloc, speed.tune()'s thresholds", {}, "tuned")]
    if os.path.exists(JEMALLOC):
        out += [("jemalloc, default decay", {"LD_PRELOAD": JEMALLOC}, "plain"),
                ("jemalloc, decay off", {"LD_PRELOAD": JEMALLOC,
                                         "MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"}, "plain")]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", default=["selective copy minlstm x2", "Shakespeare minGRU"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--pin", type=int, default=None, help="the core to pin each process to (taskset)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        raise SystemExit(f"--rounds and --steps must be >= 1, got {args.rounds} and {args.steps}")
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}
    base.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    pin = ["taskset", "-c", str(args.pin)] if args.pin is not None else []
    best = {}
    for r in range(args.rounds):
        for name, env, mode in settings():
            cmd = pin + [sys.executable, "-c", _CHILD, mode, json.dumps(args.rows), str(args.steps)]
            res = subprocess.run(cmd, env={**base, **env}, capture_output=True, text=True, check=True)
            for row, (ms, faults) in json.loads(res.stdout.strip().splitlines()[-1]).items():
                old = best.get((name, row))
                best[(name, row)] = (ms, faults) if old is None or ms < old[0] else old
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
    missing = set(args.rows) - {row for _, row in best}
    if missing:
        raise SystemExit(f"no bench train row named {sorted(missing)}")
    print(f"{'row':30s} {'allocator':42s} {'step ms':>8s} {'faults/step':>12s}")
    for row in args.rows:
        for name, _, _ in settings():
            ms, faults = best[(name, row)]
            print(f"{row:30s} {name:42s} {ms:8.2f} {faults:12.0f}")
    print(f"CPU ms per step, min over {args.rounds} processes per setting of {args.steps} steps each, one thread; "
          f"faults: minor page faults per step, in the process whose step was fastest")


if __name__ == "__main__":
    main()
