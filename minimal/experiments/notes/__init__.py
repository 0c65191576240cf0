"""What each results page says beyond the numbers (``minimal.run.report``): per experiment, the notes that explain
its verdicts, the rows a quick run cannot reach, which side of the paper is better, its metric definitions and
what a quick run misses.

``page(work, name)`` returns a dict with any of these keys; an experiment module that defines the attribute of
the same name takes precedence, so a module can carry its own page data:

    NOTES              key or fnmatch pattern -> a sentence, or a function (config, metrics) -> sentence, where
                       config is the run's configuration as a dict (``metrics["config"]``, else the module's
                       ``Config`` of the run's mode) and metrics the run's metrics
    QUICK_UNREACHABLE  key patterns a quick run is not expected to reach (its verdict reads so, not "differs")
    BETTER             key pattern -> "lower" or "higher": the side of the paper's number that is better; only
                       where the row's note says what made a number better (its task, not a better model)
    METRICS            key (or pattern; "<name>" stands for any text) -> definition
    QUICK_MISSES       one paragraph: what a quick run is expected to miss
    LESSON             the notebook (and its sections) that shows why a row comes out as it does: a string, or
                       {key pattern: string}; the page names it after every non-matching row's note
    CLOSED_FORM        key patterns computed in closed form (nothing trained): their notes name no step count

The sentences state settings, read from the configuration, and the reasons the modules' docstrings and the lessons
give, in one or two sentences; they state no measured number, so they stay true when a run's numbers move. Every
metric with a paper value has a note (tests/test_report.py), since any row may come out not matching.

One module per work holds its experiments' entries and the note functions they use (``zucchet``, ``gril``,
``minrnn``: each a ``PAGES`` of its own); ``common`` holds the wording two works share.
"""
from __future__ import annotations

from . import gril, minrnn, zucchet

__all__ = ["page", "pages", "PAGES"]

# "<work>.<experiment>" -> page data, every work's
PAGES = {**zucchet.PAGES, **gril.PAGES, **minrnn.PAGES}


def page(work, name):
    """The page data of experiment ``name`` of ``work`` (module docstring); {} when there is none."""
    return PAGES.get(f"{work}.{name}", {})


def pages(work, names):
    """``{name: page(work, name)}`` for the experiments ``names`` of ``work``: what ``minimal.run.report`` takes."""
    return {name: page(work, name) for name in names}
