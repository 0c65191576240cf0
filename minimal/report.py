"""The results report of ``python -m minimal reproduce WORK``: ``results/WORK/results.md``.

A reader should trust it at a glance, so the report is in sections:

1. Paper-comparable results: every metric that has a paper value, with a verdict and the tolerance it used,
   and the run mode of its experiment (quick / full / full, loaded from disk).
2. What a quick run is expected to miss (each module's ``QUICK_MISSES``), when the run was quick.
3. Other measurements: metrics without a paper value (timings excluded).
4. Timings: wall time and the time metrics (``*_seconds``, ``ms_per_step``, ...), kept apart from the science.
5. Metric definitions (each module's ``METRICS``: key -> definition) and links to the figures.

Verdicts (``verdict``), per metric from the module's ``TOLERANCE`` (key -> ``Tolerance``), else the default:
    "rel"      |ours / paper - 1| <= match: matches; <= close: close; else differs   (default 5% / 25%)
    "at_most"  ours <= paper * (1 + match): matches; <= paper * close: close (lower is better: losses, errors)
    "log10"    |log10(ours / paper)| <= match decades: matches; <= close: close     (quantities like 5e-8)
    "exact"    ours == paper: matches; |ours - paper| <= close: close                 (counts, orderings)
Integers and booleans default to "exact" with close = 0. A list is compared entry by entry (worst verdict).
"""
from __future__ import annotations

import math
import os
from typing import NamedTuple

__all__ = ["Tolerance", "verdict", "render", "is_timing"]

_TIMING_WORDS = ("seconds", "ms_per_step", "_ms", "wall", "time_", "tokens_per_s", "steps_per_s")
_ORDER = {"matches": 0, "close": 1, "differs": 2, "n/a": 3}


class Tolerance(NamedTuple):
    kind: str = "rel"      # "rel", "at_most", "log10" or "exact"
    match: float = 0.05
    close: float = 0.25

    def describe(self):
        if self.kind == "rel":
            return f"±{100 * self.match:g}% / ±{100 * self.close:g}%"
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
    if p == 0:
        return "n/a"
    d = abs(o / p - 1.0)
    return "matches" if d <= tol.match else "close" if d <= tol.close else "differs"


def verdict(paper, ours, tol=None):
    """"matches", "close", "differs" or "n/a" (no comparable number) for one metric (module docstring)."""
    tol = _default(paper) if tol is None else tol
    if isinstance(paper, (list, tuple)):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(paper):
            return "n/a"
        return max((_one(p, o, tol) for p, o in zip(paper, ours)), key=_ORDER.get, default="n/a")
    return _one(paper, ours, tol)


def _fmt(v):
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def render(work, quick, results, modules, out_dir="."):
    """Markdown text of the report. ``results``: name -> {"metrics", "paper", "seconds", "figures", "mode"};
    ``modules``: name -> the experiment module (for TOLERANCE, METRICS, QUICK_MISSES); figure links are made
    relative to ``out_dir``, the report's folder."""
    title = f"# {work}: paper vs ours ({'quick' if quick else 'full'} run)"
    comp = ["| experiment | metric | paper | ours | verdict | tolerance (matches / close) | run |",
            "|---|---|---|---|---|---|---|"]
    other = ["| experiment | metric | ours | run |", "|---|---|---|---|"]
    times = ["| experiment | measure | value | run |", "|---|---|---|---|"]
    counts = {"matches": 0, "close": 0, "differs": 0, "n/a": 0}
    for name, res in results.items():
        mod = modules.get(name)
        paper, mode = res.get("paper", {}), res.get("mode", "")
        tols = getattr(mod, "TOLERANCE", {})
        for key, ours in res["metrics"].items():
            if key in paper:
                tol = tols.get(key, _default(paper[key]))
                v = verdict(paper[key], ours, tol)
                counts[v] += 1
                comp.append(f"| {name} | {key} | {_fmt(paper[key])} | {_fmt(ours)} | {v} | {tol.describe()} "
                            f"| {mode} |")
            elif isinstance(ours, (dict,)) or (isinstance(ours, list) and len(ours) > 8):
                continue
            elif is_timing(key):
                times.append(f"| {name} | {key} | {_fmt(ours)} | {mode} |")
            else:
                other.append(f"| {name} | {key} | {_fmt(ours)} | {mode} |")
        times.append(f"| {name} | wall time (s) | {res['seconds']:.1f} | {mode} |")
    summary = ", ".join(f"{counts[k]} {k}" for k in ("matches", "close", "differs", "n/a") if counts[k])
    parts = [title, "",
             f"Paper-comparable metrics: {summary or 'none'}. A verdict compares with the paper's number under the "
             "tolerance in its row; \"run\" says whether the experiment ran its quick configuration, its full one, "
             "or loaded a full run committed under `data/`.", "",
             "## Paper-comparable results", "", *comp, ""]
    misses = [(n, getattr(modules.get(n), "QUICK_MISSES", "")) for n, r in results.items()
              if r.get("mode") == "quick"]
    misses = [(n, m) for n, m in misses if m]
    if misses:
        parts += ["## What a quick run is expected to miss", ""]
        parts += [f"- **{n}**: {m}" for n, m in misses] + [""]
    parts += ["## Other measurements", "", *other, "", "## Timings", "", *times, ""]
    defs = [(n, k, d) for n in results for k, d in getattr(modules.get(n), "METRICS", {}).items()]
    if defs:
        parts += ["## Metric definitions", ""]
        parts += [f"- `{n}.{k}`: {d}" for n, k, d in defs] + [""]
    figs = [(n, f) for n, r in results.items() for f in r.get("figures", [])]
    if figs:
        parts += ["## Figures", ""]
        parts += [f"- {n}: [{os.path.basename(f)}]({os.path.relpath(f, out_dir)})" for n, f in figs] + [""]
    return "\n".join(parts)
