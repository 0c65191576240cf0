"""The results page (`minimal.report`): the paper next to ours with a verdict a reader can trust, every verdict
explained, the other measurements and timings on a linked page."""
import types

import pytest

from minimal import report


def _section(text, title):
    return text.split(f"## {title}")[1].split("\n## ")[0]


def _page(tmp_path, mode="quick", **meta):
    mod = types.SimpleNamespace(TOLERANCE={"kv": report.Tolerance("log10", 0.5, 1.0)},
                                METRICS={"loss": "mean squared error on the fixed set"},
                                QUICK_MISSES="the loss floor of the full run", **meta)
    results = {"exp": {"metrics": {"loss": 0.26, "kv": 4e-7, "n": 85, "ms_per_step": 5.0, "curve": list(range(20)),
                                   "extra": 1.5, "pct": 33.33, "acc": 96.1, "acc_std": 1.2, "acc_seeds": 3,
                                   "vocab": "\n !|a", "far": 3.0},
                       "paper": {"loss": 0.25, "kv": 4.5e-8, "n": 86, "pct": 33, "acc": 90.1, "acc_std": 3.2,
                                 "far": 1.0},
                       "seconds": 3.0, "figures": [str(tmp_path / "exp" / "f.png")], "mode": mode}}
    counts = report.write("w", mode == "quick", results, {"exp": mod}, tmp_path)
    return (tmp_path / "results.md").read_text(), (tmp_path / "measurements.md").read_text(), counts


def test_the_page_puts_paper_next_to_ours_with_a_verdict_and_keeps_timings_apart(tmp_path):
    text, other, counts = _page(tmp_path)
    comparable = _section(text, "Paper-comparable results")
    assert "| exp | loss | 0.25 | 0.26 | matches | ±5% / ±25% | quick |" in comparable
    assert "| exp | kv | 4.5e-08 | 4e-07 | close | 0.5 / 1 decades | quick |" in comparable
    assert "| exp | n | 86 | 85 | differs | equal | quick |" in comparable
    assert "ms_per_step" not in text and "curve" not in text and "extra" not in comparable
    assert "| ms per step | `ms_per_step` | 5 |" in other and "| extra | `extra` | 1.5 |" in other
    assert "wall time of the experiment (s) | | 3.0" in other
    assert "the loss floor of the full run" in text and "`exp.loss`: mean squared error" in text
    assert "[f.png](exp/f.png)" in text and "[measurements.md](measurements.md)" in text
    assert (counts["matches"], counts["close"], counts["differs"]) == (2, 2, 2)   # loss, pct; kv, acc; n, far


def test_a_number_the_paper_rounds_is_matched_at_its_printed_precision():
    assert report.verdict(33, 33.33) == "matches" and report.verdict(33, 33.6) == "differs"
    tight = report.Tolerance("rel", 0.001, 0.05)
    assert report.verdict(0.206, 0.2064, tight) == "matches" and report.verdict(0.206, 0.2066, tight) == "close"
    assert report.verdict(0.1, 0.12) == "matches"   # 0.1 is printed to one decimal
    assert report.verdict(4.97e-8, 4.974e-8, report.Tolerance("exact")) == "matches"
    # a ratio we derived has no printed precision: the tolerance alone decides
    assert report.verdict(0.206 / 0.207, 0.9, report.Tolerance("rel", 0.01, 0.05)) == "differs"


def test_a_claim_encoded_as_a_number_is_not_rounded_to_it():
    # 1.0 for "GRIL matches GD" is a claim, not a number printed to one decimal: 1.036 is close, not a match
    claim = report.Tolerance("rel", 0.01, 0.10, printed=False)
    assert report.verdict(1.0, 1.036) == "matches"            # read as a printed 1.0, 1.036 rounds to it
    assert report.verdict(1.0, 1.036, claim) == "close" and report.verdict(1.0, 1.004, claim) == "matches"
    assert report.verdict(1.0, 1.2, claim) == "differs"


def test_a_spread_stands_beside_its_mean_not_in_a_row_of_its_own(tmp_path):
    comparable = _section(_page(tmp_path)[0], "Paper-comparable results")
    assert "| exp | acc | 90.1 ± 3.2 | 96.1 ± 1.2 (n = 3) |" in comparable
    assert "acc_std" not in comparable


def test_better_than_the_paper_and_out_of_a_quick_runs_reach_are_named(tmp_path):
    text, _, counts = _page(tmp_path, BETTER={"acc": "higher"}, QUICK_UNREACHABLE=("far",),
                            NOTES={"far": lambda config, metrics: f"needs {metrics['far']:g} x more steps"})
    comparable = _section(text, "Paper-comparable results")
    assert "| 96.1 ± 1.2 (n = 3) | better than the paper |" in comparable
    assert "| exp | far | 1 | 3 | not reached by a quick run |" in comparable
    notes = _section(text, "Notes on the verdicts")
    assert "`exp.far` (not reached by a quick run): needs 3 x more steps" in notes
    assert counts[report.BETTER] == 1 and counts[report.QUICK] == 1
    # a full run is judged as it is
    assert "| exp | far | 1 | 3 | differs |" in _page(tmp_path, mode="full", QUICK_UNREACHABLE=("far",))[0]


def test_every_page_has_the_same_sections(tmp_path):
    text = _page(tmp_path, mode="full")[0]
    for title in ("Paper-comparable results", "Notes on the verdicts", "What a quick run is expected to miss",
                  "Metric definitions", "Figures and other measurements"):
        assert f"\n## {title}\n" in text


def test_a_string_metric_with_a_newline_keeps_the_table_one_row_per_line(tmp_path):
    other = _page(tmp_path)[1]
    row = [line for line in other.splitlines() if "`vocab`" in line]
    assert row == ["| vocab | `vocab` | \\n !\\|a |  |"]


@pytest.mark.parametrize("paper,ours,tol,want", [
    (0.125, 0.13, None, "matches"), (0.125, 0.15, None, "close"), (0.125, 0.25, None, "differs"),
    (5e-8, 3e-9, ("at_most", 0.0, 10.0), "matches"), (5e-8, 2e-7, ("at_most", 0.0, 10.0), "close"),
    (86, 86, None, "matches"), (1, 0, None, "differs"), (86, 85, ("exact", 0, 2), "close"),
    ([0.0681, 0.0682], [0.0681, 0.09], None, "differs"), (0.1, float("nan"), None, "n/a")])
def test_verdicts(paper, ours, tol, want):
    assert report.verdict(paper, ours, None if tol is None else report.Tolerance(*tol)) == want


def test_every_experiment_of_every_work_has_page_notes_or_its_own():
    """Each experiment's page data (minimal.experiments.notes) names only patterns and kinds the report reads."""
    from minimal.experiments import _MODULES, notes

    for work, names in _MODULES.items():
        for name in names:
            page = notes.page(work, name)
            assert set(page) <= {"NOTES", "QUICK_UNREACHABLE", "BETTER", "METRICS", "QUICK_MISSES"}, (work, name)
            assert all(v in ("lower", "higher") for v in page.get("BETTER", {}).values())
    assert set(notes.PAGES) <= {f"{w}.{n}" for w, ns in _MODULES.items() for n in ns}


def test_every_note_reads_its_settings_from_the_experiments_config():
    """A note that quotes a setting finds it in the experiment's Config (quick and full): none prints '?'."""
    import dataclasses

    from minimal.experiments import experiments, notes

    for key, page in notes.PAGES.items():
        work, name = key.split(".")
        mod = experiments(work)[name]
        for config in (mod.Config.quick(), mod.Config()):
            for pattern, note in page.get("NOTES", {}).items():
                text = note(dataclasses.asdict(config), {}) if callable(note) else note
                assert isinstance(text, str) and text and "?" not in text, (key, pattern, text)
