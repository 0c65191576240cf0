"""The rounds of a benchmark (``python -m minimal bench train``): every runner called in turn, round after round, each
part's minimum and median over the rounds kept, and, with bursts, the steps right after a step of their own apart
from the first of each burst.

Glossary: a runner is (row, where, version, fn), fn() -> {part: seconds}; a round calls every runner once (or
``burst`` times in a row).
"""
from __future__ import annotations

import numpy as np

from ..validate import check_positive_int

__all__ = ["interleaved_minima"]


def _page_faults():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def interleaved_minima(runners, repeats, log=print, warmup=2, burst=1, shuffle=True, seed=0):
    """Run every runner ``warmup`` times, then ``repeats`` rounds of each runner ``burst`` times in a row, runner
    after runner; each part's minimum lands in its row, ``row[where][part]`` (version None) or
    ``row[where][version][part]``, and its median beside it as "<part> median"; each runner's minor page faults per
    call (``ru_minflt``, median over the rounds, of each burst's first call) as "page faults" where the runner times
    a "step". A burst's first call (after another runner's) is the sample of "<part>"; its others, each after a call
    of its own as the steps of a training loop, are those of "<part> warm" (and "<part> warm median").

    ``shuffle``: each round runs the runners in a new order (a permutation drawn from ``seed``, never opening with
    the runner that closed the round before), so that no runner's first call always follows the same other runner:
    which step ran just before changes a step's time, for every side (selective copy minGRU x2: after a JAX step of
    another row, ours takes 24.17 ms and torch.compile's 27.17, after torch's scan Function 18.71 and 21.05;
    bench/results/predecessor_2026-12-01.txt, ``bench/predecessor.py``), and in the order the rows list them (ours
    first, then each framework's versions) our step would always follow the previous row's last JAX runner (its cell
    alone, when the cells are timed). False: the runners' own order every round.

    runners: (row, where, version, fn) with fn() -> {part: seconds}."""
    burst = check_positive_int("burst", burst)
    for _ in range(warmup):
        for _, _, _, fn in runners:
            fn()
    samples = {}   # (id(target), part) -> (target, [values])
    rng = np.random.default_rng(seed)
    last = len(runners) - 1 if warmup else None        # the warm-up runs them in their own order
    for r in range(repeats):
        order = list(rng.permutation(len(runners))) if shuffle else list(range(len(runners)))
        if len(order) > 1 and order[0] == last:       # a round never opens with the runner that closed the last
            order[0], order[1] = order[1], order[0]    # one: its first call would follow its own
        last = order[-1]
        for i in order:
            row, where, version, fn = runners[i]
            target = row[where] if version is None else row[where][version]
            for call in range(burst):
                before = _page_faults()
                parts = fn()
                faults = _page_faults() - before
                for part, seconds in parts.items():
                    samples.setdefault((id(target), part + (" warm" if call else "")), (target, []))[1].append(seconds)
                if "step" in parts and call == 0:
                    samples.setdefault((id(target), "page faults"), (target, []))[1].append(faults)
        log(f"round {r + 1}/{repeats}")
    for (_, part), (target, values) in samples.items():
        if part == "page faults":
            target[part] = float(np.median(values))
        else:
            target[part], target[f"{part} median"] = min(values), float(np.median(values))
