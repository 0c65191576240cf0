"""`python -m minimal reproduce all`: every work's experiments in turn, then one index page.

Runs ``minimal.reproduce.work.reproduce`` for each work of ``WORKS`` (quick or full, as asked) into ``OUT/<work>/``
and writes ``OUT/index.md``: a row per work with its matches / close / differs (``minimal.run.report``'s verdicts),
counted apart for experiments that ran a full configuration and quick ones, linking its ``results.md``; then per
work every verdict but the matches with its note, and its experiments with the configuration that ran, their
wall time and links to their figures. The index is rewritten after each work, so a run that stops part-way
leaves an index of what finished; a work that raises stops the run (the exception propagates, and the command
fails).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from ..run import overrides as overrides_
from ..run import report, verdicts
from ..experiments import notes
from ..run._atomic import atomic_write
from . import work as _reproduce

__all__ = ["WORKS", "KERNEL", "reproduce_all", "index_markdown", "work_rows"]

# work -> the paper it reproduces (run order)
WORKS = {
    "zucchet": 'Zucchet et al., "Gated recurrent neural networks discover attention"',
    "gril": 'Tian et al., "Learning in the Recurrent State: Gradient Descent with Linear Recurrent Networks"',
    "minrnn": 'Feng et al., "Were RNNs All We Needed?"',
}
KERNEL = 'Katharopoulos et al., "Transformers are RNNs"'


def experiments(work):
    return _reproduce.registry.experiments(work)   # looked up at call time (tests replace it)


def _rel(path, root):
    return Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()


def _sentence(note):
    return (note[:1].upper() + note[1:]) if note else ""


def _counts_cell(rows):
    c = report.count(rows)
    return f"{c['matches']} / {c['close']} / {c['differs']}" + (
        f" (+{c[verdicts.BETTER]} better)" if c[verdicts.BETTER] else "") + (
        f" (+{c[verdicts.QUICK]} not reached by a quick run)" if c[verdicts.QUICK] else "")


def _split(rows):
    """(rows of experiments that ran or loaded a full configuration, rows of quick runs)."""
    return [r for r in rows if r[6].startswith("full")], [r for r in rows if r[6] == "quick"]


def work_rows(work, results):
    """``report.rows`` of one work's results (the modules and page data from ``minimal.experiments``)."""
    return report.rows(results, experiments(work), notes.pages(work, results))


def index_markdown(done, out_root, quick, seconds=None):
    """The index page's text. ``done``: {work: reproduce()'s results} for the works that ran, in order;
    ``seconds``: {work: its wall time as the run printed it} (default: the sum of its experiments' times)."""
    mode = "quick" if quick else "full"
    table = {work: work_rows(work, results) for work, results in done.items()}
    lines = [f"# Results of every work ({mode})", "",
             f"Written by `python -m minimal reproduce all --{mode}`. Each work's `results.md` puts the paper's "
             "numbers next to ours, row by row, and explains every verdict; the figures are the experiments' own. "
             "Counts are matches / close / differs among the metrics the paper gives a number for, split by how "
             "each experiment ran: a full configuration (trained now, or a full run committed under `data/` and "
             "loaded) or a quick one (CPU minutes, which is not expected to reach every paper number). The "
             "verdicts, the same on every page:", "", verdicts.vocabulary_markdown(), "",
             "| work | paper | full runs: matches / close / differs | quick runs: matches / close / differs | "
             "results | wall time (s), as printed |", "|---|---|---|---|---|---|"]
    for work, paper in WORKS.items():
        if work in done:
            full, quick_rows = _split(table[work])
            wall = (seconds or {}).get(work, sum(r["seconds"] for r in done[work].values()))
            lines.append(f"| `{work}` | {paper} | {_counts_cell(full) if full else 'none'} | "
                         f"{_counts_cell(quick_rows) if quick_rows else 'none'} | "
                         f"[{work}/results.md]({work}/results.md) | {wall:.0f} |")
        else:
            lines.append(f"| `{work}` | {paper} | not run |  |  |  |")
    lines += ["", f"The fourth work, `kernel` ({KERNEL}), is taught by the notebook "
              "`notebooks/kernel_attention_is_an_rnn.ipynb` alone: it trains nothing, so it has no results page."]
    for work, results in done.items():
        lines += ["", f"## {work}", "", f"[Paper vs ours]({work}/results.md) · "
                  f"[other measurements]({work}/measurements.md) · [results.json]({work}/results.json)", ""]
        by = {}
        for r in table[work]:
            by.setdefault(r[4], []).append(r)
        for verdict in verdicts.VERDICTS:      # the keys only: each row's numbers and note are on the work's page
            if verdict in by:
                names = ", ".join(f"`{r[0]}.{r[1]}`" for r in by[verdict])
                lines.append(f"- **{verdict}** ({len(by[verdict])}): {names}.")
        said = report.claims(results, experiments(work), notes.pages(work, results))
        if said:
            not_held = [f"`{c[0]}.{c[1]}`" for c in said if c[4] != "holds"]
            lines.append(f"- **claims** (yes / no, counted apart): {sum(c[4] == 'holds' for c in said)} of "
                         f"{len(said)} hold" + (f"; not: {', '.join(not_held)}." if not_held else "."))
        if any(v != "matches" for v in by) or (said and any(c[4] != "holds" for c in said)):
            lines.append(f"- Why each one does not match, and the lesson that shows it: "
                         f"[{work}/results.md, Notes on the verdicts]({work}/results.md#notes-on-the-verdicts).")
        lines += ["", "| experiment | configuration | wall time (s) | figures |", "|---|---|---|---|"]
        for name, r in results.items():
            figs = ", ".join(f"[{Path(f).name}]({_rel(f, out_root)})" for f in r.get("figures", []))
            sets = f", --set {overrides_.describe(r['overrides'])}" if r.get("overrides") else ""
            lines.append(f"| {name} | {r.get('mode', '')}{sets} | {r['seconds']:.1f} | {figs} |")
    return "\n".join(lines) + "\n"


def _split_overrides(overrides, quick):
    """{work: the overrides its experiments' Configs have}, every key and value checked against every work's
    experiments before any runs (``minimal.run.overrides.plan``): a key that no experiment of any work has is an
    error, as is a value that one of them refuses."""
    if not overrides:
        return {work: None for work in WORKS}
    configs = {f"{work}/{name}": mod.Config.quick() if quick else mod.Config()
               for work in WORKS for name, mod in experiments(work).items()}
    typed = overrides_.plan(overrides, configs)
    return {work: {k: v for k, v in overrides.items()
                   if any(k in t for label, t in typed.items() if label.startswith(f"{work}/"))}
            for work in WORKS}


def reproduce_all(quick=True, out_dir=None, progress=True, scheduler=None, overrides=None, **kw):
    """Run every work (``WORKS``) into ``out_dir/<work>`` (default ``results``) and write ``out_dir/index.md``;
    returns {work: reproduce()'s results}. ``overrides``: {Config field: value or text} (``--set``), each given
    to the works whose experiments have it, all checked before the first work runs. ``kw``: passed on to
    ``reproduce`` (``connect_timeout``)."""
    by_work = _split_overrides(overrides, quick)
    out = Path(out_dir or "results")
    out.mkdir(parents=True, exist_ok=True)
    done, seconds = {}, {}
    t0 = time.perf_counter()
    for work in WORKS:
        print(f"==== {work}", flush=True)
        t1 = time.perf_counter()
        done[work] = _reproduce.reproduce(work, quick=quick, out_dir=out / work, progress=progress,
                                          scheduler=scheduler, overrides=by_work[work], **kw)
        seconds[work] = time.perf_counter() - t1   # the index shows the time this line prints
        with atomic_write(out / "index.md", "w") as fh:
            fh.write(index_markdown(done, out, quick, seconds))
        print(f"==== {work} done in {seconds[work]:.0f} s", flush=True)
    print(f"==== all works in {time.perf_counter() - t0:.0f} s; index: {out / 'index.md'}", flush=True)
    return done
