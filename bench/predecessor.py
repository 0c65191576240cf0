"""Whether a training step's time depends on the step that ran just before it: the step of one ``bench train`` row,
ours and two framework versions, timed right after a step of its own (warm), right after torch's scan Function
step of the same row, and right after a JAX step of another row. In the order the rows list the runners, what
preceded our first call of a row was the previous row's last JAX runner (its cell alone, when the cells are timed
too): a whole JAX step stands in for it here. Min of ``--rounds`` rounds, each predecessor in turn, CPU time of the
process.

Usage: python bench/predecessor.py [--rounds 10] [--row "selective copy mingru x2"] [--other "selective copy
mingru x3"]   (needs torch and jax: pip install -e ".[anchors]"; the fair setting of ``bench train``: one thread,
jemalloc preloaded with its decay off, pinned)
"""
import argparse
import time

from minimal.bench import jax_models, torch_models
from minimal.bench import train as bench_train
from minimal.run import speed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--row", default="selective copy mingru x2")
    ap.add_argument("--other", default="selective copy mingru x3")
    args = ap.parse_args()
    speed.tune()
    models = {m.name: m for m in bench_train.models()}
    model, other = models[args.row], models[args.other]
    steps = {"ours": bench_train.project_step(model),
             "torch: compile: associative scan": torch_models.step(model, "compile: associative scan"),
             "jax: lax.scan": jax_models.step(model, "lax.scan")}
    scan_function = torch_models.step(model, "scan Function")
    jax_other = jax_models.step(other, "associative_scan")
    for fn in (*steps.values(), scan_function, jax_other):
        fn(), fn()
    before = {"warm": None, "after torch": scan_function, "after jax": jax_other}
    print(f"{args.row}: CPU ms of a step, min of {args.rounds} rounds, by the step that ran just before it: its own "
          f"(warm), torch's scan Function step of the same row (after torch), JAX's associative_scan step of "
          f"{args.other} (after jax)")
    print(f"{'':34}" + "".join(f"{k:>14}" for k in before))
    for name, fn in steps.items():
        best = {}
        for _ in range(args.rounds):
            for label, prev in before.items():
                (prev or fn)()
                t0 = time.process_time()
                fn()
                best[label] = min(best.get(label, float("inf")), time.process_time() - t0)
        print(f"{name:34}" + "".join(f"{1e3 * best[k]:14.2f}" for k in before))


if __name__ == "__main__":
    main()
