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
3. What a quick run is expected to miss (each experiment's ``QUICK_MISSES``).
4. Metric definitions (``METRICS``: key -> definition), then links to the figures and to ``measurements.md``:
   the metrics without a paper value and the timings, one table per experiment, named for a reader.

Verdicts (``judge``). First the tolerance (the module's ``TOLERANCE``: key -> ``Tolerance``, else the default):
    "rel"      |ours / paper - 1| <= match: matches; <= close: close; else differs   (default 5% / 25%)
    "at_most"  ours <= paper * (1 + match): matches; <= paper * close: close (lower is better: losses, errors)
    "log10"    |log10(ours / paper)| <= match decades: matches; <= close: close     (quantities like 5e-8)
    "exact"    ours == paper: matches; |ours - paper| <= close: close                 (counts, orderings)
    "error"    "rel" on the error rates 100 - ours and 100 - paper                     (accuracies in %, near 100)
Integers and booleans default to "exact" with close = 0. A list is compared entry by entry (worst verdict).
Then three refinements, in order:
    printed precision   a number the paper prints (at most 4 significant digits, e.g. 33 or 0.206) is matched by
                        ours rounded the same way: 33.33 matches 33 (``printed_match``). Derived ratios such as
                        0.206 / 0.207 have no printed precision and keep the tolerance alone. A float loses
                        trailing zeros (0.10 reads as 0.1, matched within 0.05): give such a number a TOLERANCE.
                        A paper value that encodes a claim, not a printed number (1.0 for "GRIL matches GD"),
                        gets a Tolerance with ``printed=False``: the tolerance alone decides.
    better              a "close" / "differs" row on the better side of the paper (the experiment's ``BETTER``:
                        key pattern -> "lower" / "higher"; "at_most" tolerances are lower-is-better) reads
                        "better than the paper"; an experiment declares BETTER only where the row's note says
                        what made the number better (an easier task, not a better model).
    quick               in a quick run, a "close" / "differs" row the experiment declares out of a quick run's
                        reach (``QUICK_UNREACHABLE``) reads "not reached by a quick run", not "differs".
Metadata is looked up on the experiment module first, then in ``minimal.experiments.notes`` (``notes.page``).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import math
import os
import re
from pathlib import Path
from typing import NamedTuple

from .overrides import value_text

__all__ = ["Tolerance", "VERDICTS", "verdict", "judge", "printed_match", "render", "write", "count", "summary",
           "is_timing", "reader_name", "overrides_markdown"]

_TIMING_WORDS = ("seconds", "ms_per_step", "_ms", "wall", "time_", "tokens_per_s", "steps_per_s")
_ORDER = {"matches": 0, "close": 1, "differs": 2, "n/a": 3}
BETTER, QUICK = "better than the paper", "not reached by a quick run"
NO_NOTE = "no note"   # what a non-matching row without a note shows (tests/test_report.py fails on it)
VERDICTS = ("matches", "close", "differs", BETTER, QUICK, "n/a")   # the order of counts and summaries

# The one definition of the verdict words: every results page, the index and the README print it as it stands here
# (tests/test_report.py checks the README against it).
VOCABULARY = (
    ("matches", "our number is within the row's first tolerance of the paper's, or equal to it at the precision "
                "the paper prints (33.33 matches 33)."),
    ("close", "outside the first tolerance, within the second."),
    ("differs", "outside both tolerances."),
    (BETTER, "outside the first tolerance on the side the paper counts as better (a lower loss, a higher "
             "accuracy); the row's note says what made it so, such as an easier task, which is not a claim of a "
             "better model."),
    (QUICK, "a quick run's row outside the first tolerance that its experiment declares beyond a quick run's "
            "reach; the full run is judged by the same tolerances."),
    ("n/a", "no number to compare."),
)
TOLERANCE_RULE = ("Tolerances: ±5% (matches) / ±25% (close) of the paper's number unless the row names another; a "
                  "paper number gets the same tolerance in every experiment of a work that reports it. Every row "
                  "that does not match has a note on its work's page that says why, and the lesson (notebook) "
                  "that shows it.")


def vocabulary_markdown():
    """The verdict words and the tolerance rule as Markdown: one bullet per word, then the rule."""
    return "\n".join([*(f"- **{word}**: {text}" for word, text in VOCABULARY), "", TOLERANCE_RULE])


class Tolerance(NamedTuple):
    kind: str = "rel"      # "rel", "at_most", "log10", "exact" or "error" (rel on 100 - x: accuracies in %)
    match: float = 0.05
    close: float = 0.25
    printed: bool = True   # False: the paper value encodes a claim (1.0 = "matches GD"), not a number it prints

    def describe(self):
        if self.kind == "rel":
            return f"±{100 * self.match:g}% / ±{100 * self.close:g}%"
        if self.kind == "error":
            return f"error rate (100 - %) ±{100 * self.match:g}% / ±{100 * self.close:g}%"
        if self.kind == "at_most":
            return f"<= paper x {1 + self.match:g} / x {self.close:g}"
        if self.kind == "log10":
            return f"{self.match:g} / {self.close:g} decades"
        return "equal" if self.close == 0 else f"equal / ±{self.close:g}"


def is_timing(key):
    """True for metrics that measure time, not science."""
    return any(w in key for w in _TIMING_WORDS)


def _default(paper):
    if isinstance(paper, bool) or isinstance(paper, int):
        return Tolerance("exact", 0.0, 0.0)
    return Tolerance()


def _one(paper, ours, tol):
    try:
        p, o = float(paper), float(ours)
    except (TypeError, ValueError):
        return "n/a"
    if math.isnan(o) or math.isnan(p):
        return "n/a"
    if tol.kind == "exact":
        d = abs(o - p)
        return "matches" if d == 0 else "close" if d <= tol.close else "differs"
    if tol.kind == "at_most":
        if p <= 0:
            return "n/a"
        return "matches" if o <= p * (1 + tol.match) else "close" if o <= p * tol.close else "differs"
    if tol.kind == "log10":
        if p <= 0 or o <= 0:
            return "n/a"
        d = abs(math.log10(o / p))
        return "matches" if d <= tol.match else "close" if d <= tol.close else "differs"
    if tol.kind == "error":
        p, o = 100.0 - p, 100.0 - o
    if p == 0:
        return "n/a"
    d = abs(o / p - 1.0)
    return "matches" if d <= tol.match else "close" if d <= tol.close else "differs"


def _printed_step(paper):
    """The unit in the last printed place of a paper number (33 -> 1, 0.206 -> 0.001, 4.97e-8 -> 1e-10), or None
    for a number with more than 4 significant digits (a ratio we derived, not a number the paper prints)."""
    if isinstance(paper, bool) or not isinstance(paper, (int, float)) or not math.isfinite(paper):
        return None
    if isinstance(paper, int):
        return 1.0
    mantissa, _, exp = repr(paper).partition("e")
    digits = mantissa.replace("-", "").replace(".", "").lstrip("0") or "0"
    if len(digits) > 4:
        return None
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def printed_match(paper, ours):
    """True when ``ours`` rounded to the paper's printed precision is the paper's number (33.33 vs 33)."""
    step = _printed_step(paper)
    try:
        o = float(ours)
    except (TypeError, ValueError):
        return False
    return step is not None and math.isfinite(o) and abs(o - paper) <= 0.5 * step * (1 + 1e-9)


def verdict(paper, ours, tol=None):
    """"matches", "close", "differs" or "n/a" (no comparable number) for one metric: the tolerance, then the
    paper's printed precision (module docstring)."""
    tol = _default(paper) if tol is None else tol
    if isinstance(paper, (list, tuple)):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(paper):
            return "n/a"
        return max((verdict(p, o, tol) for p, o in zip(paper, ours)), key=_ORDER.get, default="n/a")
    v = _one(paper, ours, tol)
    return "matches" if v in ("close", "differs") and tol.printed and printed_match(paper, ours) else v


def _lookup(table, key):
    """``table[key]``, else the first pattern of ``table`` (fnmatch, e.g. "test_loss_*"; a placeholder such as
    "<cell>" stands for any text, as "*" does) that ``key`` matches."""
    if key in table:
        return table[key]
    return next((v for k, v in table.items() if fnmatch.fnmatchcase(key, re.sub(r"<[^<>]+>", "*", k))), None)


def _better(paper, ours, direction):
    try:
        p, o = float(paper), float(ours)
    except (TypeError, ValueError):
        return False
    return (direction == "lower" and o < p) or (direction == "higher" and o > p)


def judge(paper, ours, tol=None, better=None, unreachable=False):
    """The row's verdict (module docstring): ``verdict``, then "better than the paper" when ``better``
    ("lower" / "higher") says ours is on the good side, then "not reached by a quick run" when ``unreachable``."""
    tol = _default(paper) if tol is None else tol
    v = verdict(paper, ours, tol)
    if v not in ("close", "differs"):
        return v
    better = "lower" if better is None and tol.kind == "at_most" else better
    if better and not isinstance(paper, (list, tuple)) and _better(paper, ours, better):
        return BETTER
    return QUICK if unreachable else v


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


def reader_name(key):
    """A metric key as words: "scalar_no_window_over_full" -> "scalar no window / full", "gru_params_alpha2" ->
    "gru params at α = 2", "ms_gru_T512" -> "ms gru at T = 512"."""
    words = key.replace("_over_", " / ").replace("_", " ")
    words = re.sub(r"\balpha(\d+)\b", r"at α = \1", re.sub(r"\bT(\d+)\b", r"at T = \1", words))
    return re.sub(r"\bpct\b", "%", re.sub(r"\bstd\b", "spread (std)", words))


class _Meta:
    """One experiment's page metadata: the module's attribute, else ``minimal.experiments.notes``'s entry."""

    def __init__(self, work, name, mod):
        from .experiments import notes

        self.mod, self.extra = mod, notes.page(work, name)

    def get(self, attr, default):
        v = getattr(self.mod, attr, None)
        if attr == "METRICS":   # definitions add up: the module's first (its patterns looked up first), then
            merged = dict(v or {})   # the page data's
            for key, text in self.extra.get(attr, {}).items():
                merged.setdefault(key, text)
            return merged or default
        return self.extra.get(attr, default) if v is None else v


# Definitions that hold for a key of every experiment (``measurements.md``), after the experiment's own METRICS;
# "{base}" is the key without the pattern's suffix.
GENERIC_METRICS = {
    "*_std": "standard deviation over seeds of `{base}`",
    "*_seeds": "seeds behind `{base}`",
    "*_mean": "mean over seeds of `{base}`",
    "*_n_params": "trainable parameters of `{base}`",
    "*_diverged": "runs of `{base}` whose loss diverged (left out of its mean)",
    "steps": "training steps of the run", "steps_trained": "training steps of the run",
    "ms_per_step": "wall time per training step (ms)", "train_seconds": "wall time of the training (s)",
    "sweep_seconds": "wall time of the sweep in this run (s): loading only, when every job is on disk",
    "job_seconds_total": "sum of the sweep's job times (s)", "n_jobs": "jobs in the sweep",
    "n_eval": "evaluation tasks (a fixed set, shared by every model of the experiment)",
    "eta_star": "η*, the optimal size of one GD step from 0 (in closed form)",
    "functional_*": "the same after functional pruning (a neuron removed when that leaves the loss unchanged)",
    "construction_vs_gd_max_abs": "largest |difference| of the construction's and GD's predictions (exact: ~0)",
    "*_seconds": "wall time (s)",
    "*_over_*": "the ratio of the two quantities its name gives, `{a}` / `{b}`",
}


def definition(defs, key):
    """``key``'s definition: the experiment's ``METRICS`` (``defs``), else ``GENERIC_METRICS``; None if neither."""
    d = _lookup(defs, key)
    if d:
        return d
    for pattern, text in GENERIC_METRICS.items():
        if fnmatch.fnmatchcase(key, pattern):
            a, _, b = key.partition("_over_")
            base = key.rsplit("_", 2 if pattern in ("*_n_params",) else 1)[0]
            return text.format(base=base, a=a, b=b)
    return None


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
    text = _lookup(meta.get("NOTES", {}), key)
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
    return _lookup(got, key) if isinstance(got, dict) else got


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


def rows(results, modules, work=""):
    """Per paper-comparable metric: (experiment, key, paper text, ours text, verdict, tolerance, mode, note)."""
    out = []
    for name, res in results.items():
        meta = _Meta(work, name, modules.get(name))
        metrics, paper, mode = res["metrics"], res.get("paper", {}), res.get("mode", "")
        sets = res.get("overrides") or {}
        tols, better = meta.get("TOLERANCE", {}), meta.get("BETTER", {})
        unreachable = mode == "quick" and _unreachable(meta, metrics)
        for key, ours in metrics.items():
            if key not in paper or key.endswith("_std") and key[:-4] in paper:
                continue
            tol = _lookup(tols, key) or _default(paper[key])
            v = judge(paper[key], ours, tol, _lookup(better, key),
                      bool(unreachable) and any(fnmatch.fnmatchcase(key, u) for u in unreachable))
            sk = _spread_key(key, metrics)
            p_spread = paper.get(sk) if sk else paper.get(f"{key}_std")
            n = metrics.get(f"{key}_seeds")
            note = _note(meta, key, metrics, mode, sets)
            if v != "matches":
                note = _explained(note, lesson(meta, key))
            out.append((name, key, _with_spread(paper[key], p_spread), _with_spread(ours, metrics.get(sk), n), v,
                        tol.describe(), mode, note))
    return out


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


def _measurements(work, results, modules):
    """measurements.md: per experiment, the metrics without a paper value, then the timings."""
    parts = [f"# {work}: other measurements", "",
             "Metrics that have no number in the paper to compare with, and the timings, one table per experiment "
             "(name for a reader, then the key in `results.json`). Series and nested tables are in `results.json`.",
             ""]
    for name, res in results.items():
        meta = _Meta(work, name, modules.get(name))
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


def render(work, quick, results, modules, out_dir=".", measurements="measurements.md"):
    """Markdown text of the page. ``results``: name -> {"metrics", "paper", "seconds", "figures", "mode"};
    ``modules``: name -> the experiment module; figure links are relative to ``out_dir``, the page's folder;
    ``measurements``: the file name of the other measurements' page (None: no link)."""
    table = rows(results, modules, work)
    counts = count(table)
    title = f"# {work}: paper vs ours ({'quick' if quick else 'full'} run)"
    comp = ["| experiment | metric | paper | ours | verdict | tolerance (matches / close) | run |",
            "|---|---|---|---|---|---|---|"]
    comp += [f"| {n} | {k} | {p} | {o} | {v} | {t} | {m}{', --set' if results[n].get('overrides') else ''} |"
             for n, k, p, o, v, t, m, _ in table]
    parts = [title, "",
             f"Paper-comparable metrics: {summary(counts)}. A spread (± one standard deviation over seeds) stands "
             "beside its mean; \"run\" says whether the experiment ran its quick configuration, its full one, or "
             "loaded a full run committed under `data/`, and \"--set\" that fields of it were changed. The "
             "verdicts:", "", vocabulary_markdown(), "", *overrides_markdown(results, modules),
             "## Paper-comparable results", "", *comp, "", "## Notes on the verdicts", ""]
    noted = [(n, k, v, note) for n, k, _, _, v, _, _, note in table if v != "matches"]
    for n, k, v, note in noted:
        parts.append(f"- `{n}.{k}` ({v}): {note or NO_NOTE}")
    if not noted:
        parts.append("Every paper-comparable metric matches.")
    parts += ["", "How each experiment differs from the paper (from its module's docstring):", ""]
    for name in results:
        text = _differs_list(modules.get(name))
        parts.append(f"- **{name}**: {text or 'the module states no difference.'}")
    parts += ["", "## What a quick run is expected to miss", ""]
    quick_runs = [n for n, r in results.items() if r.get("mode") == "quick"]
    if not quick_runs:
        parts.append("Nothing: every experiment ran its full configuration or loaded a full run from `data/`.")
    for n in quick_runs:
        m = _Meta(work, n, modules.get(n)).get("QUICK_MISSES", "")
        parts.append(f"- **{n}**: {m or 'the experiment states nothing it expects to miss.'}")
    defs = [(n, k, d) for n in results for k, d in _Meta(work, n, modules.get(n)).get("METRICS", {}).items()]
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


def write(work, quick, results, modules, out_dir):
    """Write ``out_dir/results.md`` and ``out_dir/measurements.md``; returns {verdict: count}."""
    out = Path(out_dir)
    (out / "measurements.md").write_text(_measurements(work, results, modules))
    (out / "results.md").write_text(render(work, quick, results, modules, out))
    return count(rows(results, modules, work))
