"""The results page of ``python -m minimal reproduce WORK``: ``results/WORK/results.md`` (+ ``measurements.md``).

Every work's page has the same sections, so a reader knows where to look:

1. Paper-comparable results: every metric that has a paper value, the paper's number and ours (a spread, where
   one exists, beside its mean: ``0.209 ± 0.0012``), a verdict, the tolerance it used, and the run mode of its
   experiment (quick / full / full, loaded from disk).
   Above it, the verdict words (``VOCABULARY``, the same on every page, the index and the README), the
   tolerance rule (``TOLERANCE_RULE``) and, when ``--set`` changed a run, "Not the default configuration": each
   field set beside the variant's default (``overrides_markdown``); such a run's "run" cell reads "quick, --set".
2. Notes on the verdicts: for every row that is not a match, why (``minimal.experiments.notes`` or the module's
   own ``NOTES``) and the lesson that shows it (``LESSON``), then each experiment's "Differs from the paper" list,
   quoted from its docstring.

   Between the claims and the notes, "Figures of the paper, as numbers": the tables an experiment builds from its
   metrics (``PAGE_TABLES``: metrics -> a list of ``{"title", "text", "header", "rows"}``) for a result the paper
   shows only as a figure, so that a yes / no claim about it stands beside the numbers behind it, or for a run of
   the paper's own set-up beside ours.
3. What a quick run is expected to miss (each experiment's ``QUICK_MISSES``).
4. Metric definitions (``METRICS``: key -> definition; the generic ones and a key's name for a reader:
   ``minimal.run.metric_keys``), then links to the figures and to ``measurements.md``:
   the metrics without a paper value and the timings, one table per experiment, named for a reader.

Verdicts: ``minimal.run.verdicts`` (the tolerance kinds, printed precision, "better", "quick").
Metadata is looked up on the experiment module first, then in the page data the caller passes (``pages``: name ->
dict, e.g. ``minimal.experiments.notes.pages``); this module imports no experiment.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import math
import os
import re
from pathlib import Path
from .metric_keys import definition, is_timing, lookup, reader_name
from .overrides import value_text
from .verdicts import VERDICTS, default_tolerance, direction, is_claim, is_setting, judge, vocabulary_markdown

__all__ = ["render", "write", "rows", "claims", "settings", "tables", "count", "summary", "overrides_markdown",
           "grouped_notes"]

NO_NOTE = "no note"   # what a non-matching row without a note shows (tests/test_report.py fails on it)


def _fmt(v):
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    # a cell of a Markdown table: one line, no column separator (a vocabulary starts with "\n"); printable
    # characters such as λ stay as they are
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(v))
    return text.replace("|", "\\|")


class _Meta:
    """One experiment's page metadata: the module's attribute, else the entry of its page data (``page``: a dict
    of the keys ``minimal.experiments.notes`` describes; None: none)."""

    def __init__(self, mod, page=None):
        self.mod, self.extra = mod, page or {}

    def get(self, attr, default):
        v = getattr(self.mod, attr, None)
        if attr == "METRICS":   # definitions add up: the module's first (its patterns looked up first), then
            merged = dict(v or {})   # the page data's
            for key, text in self.extra.get(attr, {}).items():
                merged.setdefault(key, text)
            return merged or default
        return self.extra.get(attr, default) if v is None else v


def _spread_key(key, metrics):
    for k in (f"{key}_std", f"{key[:-5]}_std" if key.endswith("_mean") else None):
        if k and k in metrics:
            return k
    return None


def _with_spread(value, spread, n=None):
    text = _fmt(value)
    if spread is not None:
        text += f" ± {_fmt(spread)}"
    return text + (f" (n = {n})" if isinstance(n, int) and not isinstance(n, bool) else "")


def _unreachable(meta, metrics):
    u = meta.get("QUICK_UNREACHABLE", ())
    return set(u(metrics) if callable(u) else u)


def _config(mod, metrics, mode, overrides=None):
    """The run's configuration as a dict: ``metrics["config"]``, else the module's Config of the run's mode with
    the run's ``--set`` overrides."""
    if isinstance(metrics.get("config"), dict):
        return metrics["config"]
    cls = getattr(mod, "Config", None)
    try:
        return {**dataclasses.asdict(cls.quick() if mode == "quick" else cls()), **(overrides or {})}
    except (TypeError, AttributeError):
        return {}


def _note(meta, key, metrics, mode, overrides=None):
    text = lookup(meta.get("NOTES", {}), key)
    return text(_config(meta.mod, metrics, mode, overrides), metrics) if callable(text) else text


def _set_text(overrides, defaults):
    """"`lr=0.001` (default 0.003), `steps=2000` (default 300)": a run's --set overrides for the page."""
    return ", ".join(f"`{k}={value_text(v)}`" + (f" (default {value_text(defaults[k])})" if k in defaults else "")
                     for k, v in overrides.items())


def overrides_markdown(results, modules):
    """The page's lines on the runs that ``--set`` changed (none: an empty list): per experiment, each field set
    with the variant's default beside it."""
    changed = [(n, r) for n, r in results.items() if r.get("overrides")]
    if not changed:
        return []
    lines = ["## Not the default configuration", "",
             "These experiments ran with Config fields changed on the command line "
             "(`python -m minimal reproduce ... --set KEY=VALUE`); their numbers are not those of the default run:",
             ""]
    for n, r in changed:
        defaults = _config(modules.get(n), {}, r.get("mode", ""))
        lines.append(f"- **{n}** ({r.get('mode', '')}): {_set_text(r['overrides'], defaults)}")
    return lines + [""]


def lesson(meta, key):
    """The lesson (notebook) that shows why ``key`` comes out as it does: the experiment's ``LESSON``, a string
    or {key pattern: string}; None when it names none."""
    got = meta.get("LESSON", None)
    return lookup(got, key) if isinstance(got, dict) else got


def _explained(note, where):
    """A non-matching row's note with its lesson: "why. Shown in `notebooks/NAME.ipynb` (Sec. 4.1)."."""
    if not note:
        return NO_NOTE
    note = note.rstrip()
    note += "" if note.endswith(".") else "."
    if not where:
        return note
    name, _, sections = where.partition(" ")
    return f"{note} Shown in `notebooks/{name}`" + (f" {sections}." if sections else ".")


def rows(results, modules, pages=None):
    """Per paper-comparable metric: (experiment, key, paper text, ours text, verdict, tolerance, mode, note).
    ``pages``: name -> the experiment's page data (module docstring)."""
    out = []
    for name, res in results.items():
        meta = _Meta(modules.get(name), (pages or {}).get(name))
        metrics, paper, mode = res["metrics"], res.get("paper", {}), res.get("mode", "")
        sets = res.get("overrides") or {}
        tols, better = meta.get("TOLERANCE", {}), meta.get("BETTER", {})
        unreachable = mode == "quick" and _unreachable(meta, metrics)
        for key, ours in metrics.items():
            if key not in paper or key.endswith("_std") and key[:-4] in paper:
                continue
            if is_claim(paper[key]) or is_setting(key):     # listed apart (``claims``, ``settings``)
                continue
            tol = lookup(tols, key) or default_tolerance(paper[key])
            sk = _spread_key(key, metrics)
            p_spread = paper.get(sk) if sk else paper.get(f"{key}_std")
            o_spread = metrics.get(sk) if sk else None
            v = judge(paper[key], ours, tol, direction(key, lookup(better, key)),
                      bool(unreachable) and any(fnmatch.fnmatchcase(key, u) for u in unreachable),
                      paper_spread=p_spread, ours_spread=o_spread)
            n = metrics.get(f"{key}_seeds")
            note = _note(meta, key, metrics, mode, sets)
            if v != "matches":
                note = _explained(note, lesson(meta, key))
            described = tol.describe() + (" (or 1 / 2 combined sd)" if p_spread is not None else "")
            out.append((name, key, _with_spread(paper[key], p_spread), _with_spread(ours, o_spread, n), v,
                        described, mode, note))
    return out


def claims(results, modules, pages=None):
    """The paper's yes/no claims: (experiment, key, paper's claim, ours, "holds" / "does not hold" / "n/a", mode,
    note). Not verdicts: a page lists them apart and counts none of them as a match."""
    out = []
    for name, res in results.items():
        meta = _Meta(modules.get(name), (pages or {}).get(name))
        metrics, paper, mode = res["metrics"], res.get("paper", {}), res.get("mode", "")
        for key, ours in metrics.items():
            if key in paper and is_claim(paper[key]):
                try:
                    holds = "holds" if bool(ours) == bool(paper[key]) else "does not hold"
                except (TypeError, ValueError):
                    holds = "n/a"
                note = _note(meta, key, metrics, mode, res.get("overrides") or {})
                if holds != "holds":
                    note = _explained(note, lesson(meta, key))
                yes = lambda v: "yes" if v else "no"  # noqa: E731
                out.append((name, key, yes(paper[key]), yes(ours) if isinstance(ours, (bool, int, float)) else
                            _fmt(ours), holds, mode, note))
    return out


def settings(results, modules, pages=None):
    """Set-up counts beside the paper's (``verdicts.is_setting``: seeds): (experiment, key, paper, ours)."""
    return [(name, key, _fmt(res["paper"][key]), _fmt(ours)) for name, res in results.items()
            for key, ours in res["metrics"].items() if key in res.get("paper", {}) and is_setting(key)
            and not is_claim(res["paper"][key])]


def tables(results, modules, pages=None):
    """Per experiment, the tables of its ``PAGE_TABLES`` (metrics -> ``[{"title", "text", "header", "rows"}]``):
    (experiment, table) pairs, in ``results``' order; a table whose rows are empty is left out."""
    out = []
    for name, res in results.items():
        build = _Meta(modules.get(name), (pages or {}).get(name)).get("PAGE_TABLES", None)
        for table in (build(res["metrics"]) if callable(build) else ()):
            if table["rows"]:
                out.append((name, table))
    return out


def _table_markdown(name, table):
    header = table["header"]
    lines = [f"### {name}: {table['title']}", ""] + ([table["text"], ""] if table.get("text") else [])
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table["rows"]:
        if len(row) != len(header):
            raise ValueError(f"{name}'s PAGE_TABLES: a row has {len(row)} cells, the header {len(header)}")
        lines.append("| " + " | ".join(_fmt(c) for c in row) + " |")
    return lines + [""]


def grouped_notes(items):
    """``[(label, verdict, note)]`` -> one line per distinct note, every row it explains named once:
    "- `a.x`, `a.y` (differs): note" (a note is never repeated verbatim)."""
    order, by = [], {}
    for label, verdict, note in items:
        text = note or NO_NOTE
        if text not in by:
            order.append(text)
            by[text] = []
        by[text].append((label, verdict))
    lines = []
    for text in order:
        labels = ", ".join(f"`{label}`" for label, _ in by[text])
        kinds = "; ".join(dict.fromkeys(v for _, v in by[text]))
        lines.append(f"- {labels} ({kinds}): {text}")
    return lines


def count(table_rows):
    """{verdict: count} over ``rows``' output (every verdict of ``VERDICTS``, zeros included)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in table_rows:
        counts[r[4]] += 1
    return counts


def summary(counts):
    """"11 matches, 4 close, 2 differs, 3 not reached by a quick run" (zero counts left out)."""
    return ", ".join(f"{counts[k]} {k}" for k in VERDICTS if counts.get(k)) or "no paper-comparable metric"


def _differs_list(mod):
    """The "Differs from the paper" paragraph of a module's docstring, as one line (empty if none)."""
    doc = (getattr(mod, "__doc__", None) or "")
    m = re.search(r"Differs from the paper(.*?)(?:\n\s*\n|\Z)", doc, re.S)
    return " ".join(re.sub(r"\n\s*- ", " • ", m.group(0)).split()) if m else ""


def _measurements(work, results, modules, pages=None):
    """measurements.md: per experiment, the metrics without a paper value, then the timings."""
    parts = [f"# {work}: other measurements", "",
             "Metrics that have no number in the paper to compare with, and the timings, one table per experiment "
             "(name for a reader, then the key in `results.json`). Series and nested tables are in `results.json`.",
             ""]
    for name, res in results.items():
        meta = _Meta(modules.get(name), (pages or {}).get(name))
        defs, paper = meta.get("METRICS", {}), res.get("paper", {})
        other, times = [], []
        for key, ours in res["metrics"].items():
            if key in paper or key.endswith("_std") and key[:-4] in paper:
                continue
            if isinstance(ours, dict) or isinstance(ours, list) and len(ours) > 8:
                continue
            d = definition(defs, key)
            row = f"| {reader_name(key)} | `{key}` | {_fmt(ours)} | {_fmt(d) if d else ''} |"
            (times if is_timing(key) else other).append(row)
        loaded = res.get("mode", "").startswith("full, all runs on disk")
        if loaded:
            header = ("Timings: `sweep_seconds` and the last row are this run's, which loaded the committed runs "
                      "under `data/`; the others were recorded by those runs when they were trained, on their "
                      "machine and load:")
            times.append(f"| wall time of this run, loading the committed runs (s) | | {res['seconds']:.1f} | |")
        else:
            header = "Timings (this run, on this machine):"
            times.append(f"| wall time of the experiment (s) | | {res['seconds']:.1f} | |")
        sets = f", --set {_set_text(res['overrides'], {})}" if res.get("overrides") else ""
        parts += [f"## {name} ({res.get('mode', '')}{sets})", "", "| measure | key | ours | definition |",
                  "|---|---|---|---|", *other, "", header, "",
                  "| measure | key | ours | definition |", "|---|---|---|---|", *times, ""]
    return "\n".join(parts)


def render(work, quick, results, modules, out_dir=".", measurements="measurements.md", pages=None):
    """Markdown text of the page. ``results``: name -> {"metrics", "paper", "seconds", "figures", "mode"};
    ``modules``: name -> the experiment module; figure links are relative to ``out_dir``, the page's folder;
    ``measurements``: the file name of the other measurements' page (None: no link); ``pages``: name -> page data
    (module docstring)."""
    pages = pages or {}
    table = rows(results, modules, pages)
    counts = count(table)
    said = claims(results, modules, pages)
    setup = settings(results, modules, pages)
    title = f"# {work}: paper vs ours ({'quick' if quick else 'full'} run)"
    comp = ["| experiment | metric | paper | ours | verdict | tolerance (matches / close) | run |",
            "|---|---|---|---|---|---|---|"]
    comp += [f"| {n} | {k} | {p} | {o} | {v} | {t} | {m}{', --set' if results[n].get('overrides') else ''} |"
             for n, k, p, o, v, t, m, _ in table]
    held = sum(c[4] == "holds" for c in said)
    claim_text = f" Claims of the paper (yes / no, counted apart): {held} of {len(said)} hold." if said else ""
    parts = [title, "",
             f"Paper-comparable metrics: {summary(counts)}.{claim_text} A spread (± one standard deviation over seeds) stands "
             "beside its mean; \"run\" says whether the experiment ran its quick configuration, its full one, or "
             "loaded a full run committed under `data/`, and \"--set\" that fields of it were changed. The "
             "verdicts:", "", vocabulary_markdown(), "", *overrides_markdown(results, modules),
             "## Paper-comparable results", "", *comp, ""]
    if said:
        parts += ["## Claims (yes / no)", "",
                  "Statements of the paper that hold or do not; they are not numbers to match and are counted in no "
                  "verdict.", "", "| experiment | claim | paper | ours | | run |", "|---|---|---|---|---|---|"]
        parts += [f"| {n} | {k} | {p} | {o} | {h} | {m} |" for n, k, p, o, h, m, _ in said] + [""]
    if setup:
        parts += ["## Set-up beside the paper's", "",
                  "How the runs were made (not results, not judged):", "", "| experiment | setting | paper | ours |",
                  "|---|---|---|---|", *[f"| {n} | {k} | {p} | {o} |" for n, k, p, o in setup], ""]
    figures = tables(results, modules, pages)
    if figures:
        parts += ["## Figures of the paper, as numbers", "",
                  "Results the paper shows only as a figure, and runs at the paper's own set-up beside ours: the "
                  "numbers behind our side (not judged).", ""]
        for name, fig in figures:
            parts += _table_markdown(name, fig)
    parts += ["## Notes on the verdicts", ""]
    noted = [(f"{n}.{k}", v, note) for n, k, _, _, v, _, _, note in table if v != "matches"]
    noted += [(f"{n}.{k}", h, note) for n, k, _, _, h, _, note in said if h != "holds"]
    parts += grouped_notes(noted)
    if not noted:
        parts.append("Every paper-comparable metric matches and every claim holds.")
    parts += ["", "How each experiment differs from the paper (from its module's docstring):", ""]
    for name in results:
        text = _differs_list(modules.get(name))
        parts.append(f"- **{name}**: {text or 'the module states no difference.'}")
    parts += ["", "## What a quick run is expected to miss", ""]
    quick_runs = [n for n, r in results.items() if r.get("mode") == "quick"]
    if not quick_runs:
        parts.append("Nothing: every experiment ran its full configuration or loaded a full run from `data/`.")
    for n in quick_runs:
        m = _Meta(modules.get(n), pages.get(n)).get("QUICK_MISSES", "")
        parts.append(f"- **{n}**: {m or 'the experiment states nothing it expects to miss.'}")
    defs = [(n, k, d) for n in results for k, d in _Meta(modules.get(n), pages.get(n)).get("METRICS", {}).items()]
    parts += ["", "## Metric definitions", ""]
    parts += [f"- `{n}.{k}`: {d}" for n, k, d in defs] or ["No experiment of this work defines its metrics."]
    parts += ["", "## Figures and other measurements", ""]
    for n, r in results.items():
        for f in r.get("figures", []):
            parts.append(f"- {n}: [{os.path.basename(f)}]({Path(os.path.relpath(f, out_dir)).as_posix()})")
    if measurements:
        parts.append(f"- [{measurements}]({measurements}): the metrics without a paper value and the timings, "
                     "per experiment; wall times: " + ", ".join(f"{n} {r['seconds']:.0f} s"
                                                               for n, r in results.items()))
    return "\n".join(parts) + "\n"


def write(work, quick, results, modules, out_dir, pages=None):
    """Write ``out_dir/results.md`` and ``out_dir/measurements.md``; returns {verdict: count}. ``pages``: name ->
    the experiment's page data (module docstring)."""
    out = Path(out_dir)
    (out / "measurements.md").write_text(_measurements(work, results, modules, pages))
    (out / "results.md").write_text(render(work, quick, results, modules, out, pages=pages))
    return count(rows(results, modules, pages))
