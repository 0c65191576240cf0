"""`python -m minimal reproduce all`: every work's experiments in turn, then one index page.

Runs ``minimal.reproduce.reproduce`` for each work of ``WORKS`` (quick or full, as asked) into ``OUT/<work>/``
and writes ``OUT/index.md``: a row per work linking its ``results.md`` (the paper next to ours), then per work
its experiments with the configuration that ran, their wall time and links to their figures. The index is
rewritten after each work, so a run that stops part-way leaves an index of what finished; a work that raises
stops the run (the exception propagates, and the command fails).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from ._atomic import atomic_write
from .reproduce import reproduce

__all__ = ["WORKS", "reproduce_all", "index_markdown"]

# work -> the paper it reproduces (run order)
WORKS = {
    "zucchet": 'Zucchet et al., "Gated recurrent neural networks discover attention"',
    "gril": 'Tian et al., "Learning in the Recurrent State: Gradient Descent with Linear Recurrent Networks"',
    "minrnn": 'Feng et al., "Were RNNs All We Needed?"',
}


def _rel(path, root):
    return Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()


def index_markdown(done, out_root, quick):
    """The index page's text. ``done``: {work: reproduce()'s results} for the works that ran, in order."""
    mode = "quick" if quick else "full"
    lines = [f"# Results of every work ({mode})", "",
             f"Written by `python -m minimal reproduce all --{mode}`. Each work's `results.md` puts the paper's "
             "numbers next to ours; the figures are the experiments' own.", "",
             "| work | paper | results | experiments | wall time (s) |", "|---|---|---|---|---|"]
    for work, paper in WORKS.items():
        if work in done:
            seconds = sum(r["seconds"] for r in done[work].values())
            lines.append(f"| `{work}` | {paper} | [{work}/results.md]({work}/results.md) | {len(done[work])} | "
                         f"{seconds:.0f} |")
        else:
            lines.append(f"| `{work}` | {paper} | not run |  |  |")
    for work, results in done.items():
        lines += ["", f"## {work}", "", f"[Paper vs ours]({work}/results.md) · "
                  f"[results.json]({work}/results.json)", "",
                  "| experiment | configuration | wall time (s) | figures |", "|---|---|---|---|"]
        for name, r in results.items():
            figs = ", ".join(f"[{Path(f).name}]({_rel(f, out_root)})" for f in r.get("figures", []))
            lines.append(f"| {name} | {r.get('mode', '')} | {r['seconds']:.1f} | {figs} |")
    return "\n".join(lines) + "\n"


def reproduce_all(quick=True, out_dir=None, progress=True, scheduler=None):
    """Run every work (``WORKS``) into ``out_dir/<work>`` (default ``results``) and write ``out_dir/index.md``;
    returns {work: reproduce()'s results}."""
    out = Path(out_dir or "results")
    out.mkdir(parents=True, exist_ok=True)
    done = {}
    t0 = time.perf_counter()
    for work in WORKS:
        print(f"==== {work}", flush=True)
        done[work] = reproduce(work, quick=quick, out_dir=out / work, progress=progress, scheduler=scheduler)
        with atomic_write(out / "index.md", "w") as fh:
            fh.write(index_markdown(done, out, quick))
    print(f"==== all works in {time.perf_counter() - t0:.0f} s; index: {out / 'index.md'}", flush=True)
    return done
