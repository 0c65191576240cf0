"""The results page (`minimal.run.report`): the paper next to ours with a verdict a reader can trust, every verdict
explained, the other measurements and timings on a linked page."""
import types

import pytest

from minimal.run import metric_keys, report, verdicts


def _section(text, title):
    return text.split(f"## {title}")[1].split("\n## ")[0]


def _page(tmp_path, mode="quick", **meta):
    mod = types.SimpleNamespace(TOLERANCE={"kv": verdicts.Tolerance("log10", 0.5, 1.0)},
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
    assert "| exp | n | 86 | 85 | matches | ±5% / ±25% | quick |" in comparable     # an int is a measured number
    assert "ms_per_step" not in text and "curve" not in text and "extra" not in comparable
    assert "| ms per step | `ms_per_step` | 5 |" in other and "| extra | `extra` | 1.5 |" in other
    assert "wall time of the experiment (s) | | 3.0" in other
    assert "the loss floor of the full run" in text and "`exp.loss`: mean squared error" in text
    assert "[f.png](exp/f.png)" in text and "[measurements.md](measurements.md)" in text
    assert (counts["matches"], counts["close"], counts["differs"]) == (3, 2, 1)   # loss, pct, n; kv, acc; far


def test_a_number_the_paper_rounds_is_matched_at_its_printed_precision():
    exact = verdicts.Tolerance("exact", 0.0, 0.0)
    assert verdicts.verdict(33, 33.33, exact) == "matches" and verdicts.verdict(33, 33.6, exact) == "differs"
    tight = verdicts.Tolerance("rel", 0.001, 0.05)
    assert verdicts.verdict(0.206, 0.2064, tight) == "matches" and verdicts.verdict(0.206, 0.2066, tight) == "close"
    assert verdicts.verdict(0.1, 0.12) == "matches"   # 0.1 is printed to one decimal
    assert verdicts.verdict(4.97e-8, 4.974e-8, verdicts.Tolerance("exact")) == "matches"
    # a ratio we derived has no printed precision: the tolerance alone decides
    assert verdicts.verdict(0.206 / 0.207, 0.9, verdicts.Tolerance("rel", 0.01, 0.05)) == "differs"


def test_a_claim_encoded_as_a_number_is_not_rounded_to_it():
    # 1.0 for "GRIL matches GD" is a claim, not a number printed to one decimal: 1.036 is close, not a match
    claim = verdicts.Tolerance("rel", 0.01, 0.10, printed=False)
    assert verdicts.verdict(1.0, 1.036) == "matches"            # read as a printed 1.0, 1.036 rounds to it
    assert verdicts.verdict(1.0, 1.036, claim) == "close" and verdicts.verdict(1.0, 1.004, claim) == "matches"
    assert verdicts.verdict(1.0, 1.2, claim) == "differs"


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
    assert counts[verdicts.BETTER] == 1 and counts[verdicts.QUICK] == 1
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
    ([0.0681, 0.0682], [0.0681, 0.09], None, "differs"), (0.1, float("nan"), None, "n/a"),
    # an accuracy is judged as itself and as an error rate: 99.5 vs 95.9 is a 0.5 % against a 4.1 % error,
    # 37.0 vs 48.9 a 32 % relative gap in accuracy though only 19 % in the error rate
    (99.5, 95.9, ("error", 0.05, 0.25), "differs"), (99.5, 95.9, None, "matches"),
    (37.0, 48.9, ("error", 0.05, 0.25), "differs"), (37.0, 48.9, ("rel", 0.05, 0.25), "differs"),
    (37.0, 35.9, ("error", 0.05, 0.25), "matches"), (85.7, 83.0, ("error", 0.05, 0.25), "close"),
    (99.5, 99.46, ("error", 0.05, 0.25), "matches")])
def test_verdicts(paper, ours, tol, want):
    assert verdicts.verdict(paper, ours, None if tol is None else verdicts.Tolerance(*tol)) == want


def test_every_experiment_of_every_work_has_page_notes_or_its_own():
    """Each experiment's page data (minimal.experiments.notes) names only patterns and kinds the report reads."""
    from minimal.experiments import MODULES, notes

    for work, names in MODULES.items():
        for name in names:
            page = notes.page(work, name)
            assert set(page) <= {"NOTES", "QUICK_UNREACHABLE", "BETTER", "METRICS", "QUICK_MISSES", "LESSON",
                                 "CLOSED_FORM", "PAGE_TABLES"}, (work, name)
            assert callable(page.get("PAGE_TABLES", callable))
            assert all(v in ("lower", "higher") for v in page.get("BETTER", {}).values())
    assert set(notes.PAGES) <= {f"{w}.{n}" for w, ns in MODULES.items() for n in ns}


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


def _paper_rows():
    """(work, name, module, key) for every metric that gets a row on a results page (a paper value, not a spread)."""
    from minimal.experiments import MODULES, experiments

    for work in MODULES:
        for name, mod in experiments(work).items():
            for key in mod.PAPER:
                if not (key.endswith("_std") and key[:-4] in mod.PAPER):
                    yield work, name, mod, key


_BELOW = __import__("re").compile(r"\bbelow\s*([.;,)]|$)")
_STEP_COUNT = __import__("re").compile(r"(\d[\d,]*|\?)\s*(k\s+)?steps?\b")


def test_every_row_that_may_not_match_has_a_note_that_says_why_and_names_its_lesson():
    """Any row can come out not matching, so every metric with a paper value has a note under the quick and the
    full configuration, names the lesson that shows why (a notebook that exists), points to no section the index
    lacks ("below"), and a closed-form metric's note names no step count (nothing was trained for it)."""
    import dataclasses
    import fnmatch
    from pathlib import Path

    from minimal.experiments import notes

    root = Path(report.__file__).resolve().parents[2]
    for work, name, mod, key in _paper_rows():
        meta = report._Meta(mod, notes.page(work, name))
        where = report.lesson(meta, key)
        assert where and (root / "notebooks" / where.split(" ")[0]).is_file(), (work, name, key, where)
        closed = any(fnmatch.fnmatchcase(key, p) for p in meta.get("CLOSED_FORM", ()))
        for config in (mod.Config.quick(), mod.Config()):
            note = report._note(meta, key, {"config": dataclasses.asdict(config)}, "quick")
            assert note and report.NO_NOTE not in note, (work, name, key)
            assert not _BELOW.search(note), (work, name, key, note)   # "slightly below 1" is fine
            assert not (closed and _STEP_COUNT.search(note)), (work, name, key, note)
            better = metric_keys.lookup(meta.get("BETTER", {}), key)
            assert not better or "better model" in note, (work, name, key, note)   # says what made it better
            row = report._explained(note, where)
            assert row.count(". ") + row.count("; ") <= 6 and f"notebooks/{where.split(' ')[0]}" in row


def test_a_row_without_a_note_or_a_closed_form_note_with_a_step_count_is_caught(tmp_path):
    """The page shows "no note" for a non-matching row without one (what the test above rules out), and the
    step-count check sees a count."""
    text = _page(tmp_path)[0]
    assert any("`exp.far`" in line and line.endswith(f"): {report.NO_NOTE}") for line in text.splitlines())
    assert _STEP_COUNT.search("trained 5000 steps") and _STEP_COUNT.search("20,000 steps")
    assert not _STEP_COUNT.search("one GD step at η*, a closed form")


def test_the_same_paper_number_gets_the_same_tolerance_across_a_works_experiments():
    """GRIL's 0.206 is judged alike wherever it stands (regression, multistep, ablations, comparison): one rule per
    printed paper number within a work. Claims encoded as numbers (1.0 for "tracks GD") are not printed numbers."""
    seen = {}
    for work, name, mod, key in _paper_rows():
        paper = mod.PAPER[key]
        if isinstance(paper, bool) or not isinstance(paper, float) or verdicts._printed_step(paper) is None:
            continue
        tol = metric_keys.lookup(getattr(mod, "TOLERANCE", {}), key) or verdicts.default_tolerance(paper)
        if not tol.printed:
            continue
        seen.setdefault((work, paper), {})[f"{name}.{key}"] = tol
    for (work, paper), tols in seen.items():
        assert len(set(tols.values())) == 1, (work, paper, tols)
    assert len(seen[("gril", 0.206)]) >= 4


def test_one_vocabulary_on_every_page_and_in_the_readme(tmp_path):
    from pathlib import Path

    text = _page(tmp_path)[0]
    assert verdicts.vocabulary_markdown() in text
    for word, _ in verdicts.VOCABULARY:
        assert f"- **{word}**: " in text
    readme = (Path(report.__file__).resolve().parents[2] / "README.md").read_text()
    assert " ".join(verdicts.vocabulary_markdown().split()) in " ".join(readme.split())   # as wrapped there


def test_measurements_keep_greek_letters_and_say_whose_timings_they_are(tmp_path):
    mod = types.SimpleNamespace(METRICS={"lam_<i>": "the decay λ of neuron i"})
    results = {"run": {"metrics": {"lam_0": 0.99, "note": "λ ~ U[0, 1]", "ms_per_step": 2.0}, "paper": {},
                       "seconds": 1.0, "figures": [], "mode": "quick"},
               "sweep": {"metrics": {"ms_per_step": 3.0}, "paper": {}, "seconds": 0.2, "figures": [],
                         "mode": "full, all runs on disk"}}
    report.write("w", True, results, {"run": mod, "sweep": mod}, tmp_path)
    other = (tmp_path / "measurements.md").read_text()
    assert "\\u03bb" not in other and "| λ ~ U[0, 1] |" in other
    assert "| lam 0 | `lam_0` | 0.99 | the decay λ of neuron i |" in other
    run, sweep = other.split("## sweep")
    assert "Timings (this run, on this machine)" in run
    assert "recorded by those runs when they were trained" in sweep and "loading the committed runs (s) | | 0.2" in sweep


def _claims_page(tmp_path):
    mod = types.SimpleNamespace(NOTES={"acc*": "the task is easier here", "loss*": "fewer steps here"},
                                TOLERANCE={"acc*": verdicts.Tolerance("error", 0.05, 0.25)})
    results = {"exp": {"metrics": {"gated_beats_lstm": 1, "lru_helps": 0, "seeds": 4, "acc": 95.83, "acc_std": 2.2,
                                   "acc3": 98.96, "acc3_std": 0.3, "loss_a": 0.5, "loss_b": 0.6,
                                   "newton_loss": 7.5e-14},
                       "paper": {"gated_beats_lstm": True, "lru_helps": True, "seeds": 4, "acc": 96.8,
                                 "acc_std": 3.2, "acc3": 99.5, "acc3_std": 0.2, "loss_a": 0.25, "loss_b": 0.25,
                                 "newton_loss": 0.114},
                       "seconds": 1.0, "figures": [], "mode": "full"}}
    counts = report.write("w", False, results, {"exp": mod}, tmp_path)
    return (tmp_path / "results.md").read_text(), counts


def test_claims_and_set_up_counts_are_listed_apart_and_counted_in_no_verdict(tmp_path):
    text, counts = _claims_page(tmp_path)
    comparable = _section(text, "Paper-comparable results")
    assert "gated_beats_lstm" not in comparable and "seeds" not in comparable
    assert sum(counts.values()) == 5                        # acc, acc3, loss_a, loss_b, newton_loss only
    assert "| exp | gated_beats_lstm | yes | yes | holds | full |" in _section(text, "Claims (yes / no)")
    assert "| exp | lru_helps | yes | no | does not hold | full |" in _section(text, "Claims (yes / no)")
    assert "| exp | seeds | 4 | 4 |" in _section(text, "Set-up beside the paper's")
    assert "1 of 2 hold" in text


def test_a_value_inside_the_papers_spread_is_not_differs_and_a_lower_loss_is_better(tmp_path):
    text, _ = _claims_page(tmp_path)
    comparable = _section(text, "Paper-comparable results")
    assert "| exp | acc | 96.8 ± 3.2 | 95.83 ± 2.2 | matches |" in comparable       # inside one combined sd
    assert "| exp | acc3 | 99.5 ± 0.2 | 98.96 ± 0.3 | close |" in comparable      # 1.5 combined sd
    assert "| exp | newton_loss | 0.114 | 7.5e-14 | better than the paper |" in comparable   # a loss: lower is better
    assert verdicts.spread_verdict(96.8, 95.83, 3.2, 2.2) == "matches"
    assert verdicts.spread_verdict(99.5, 98.96, 0.2, 0.3) == "close"
    assert verdicts.spread_verdict(99.5, 90.0, 0.2, 0.3) == "differs"


def test_a_note_is_said_once_for_every_row_it_explains(tmp_path):
    text, _ = _claims_page(tmp_path)
    notes = _section(text, "Notes on the verdicts")
    assert notes.count("fewer steps here") == 1
    assert "- `exp.loss_a`, `exp.loss_b` (differs): fewer steps here" in notes
    lines = [line for line in notes.splitlines() if line.startswith("- `")]
    assert len(lines) == len({line.split("): ", 1)[1] for line in lines})      # no note twice


def test_a_figure_the_paper_gives_without_numbers_gets_its_table_between_the_claims_and_the_notes(tmp_path):
    """PAGE_TABLES: an experiment's own tables from its metrics, one row per line, a cell's "|" escaped; a table
    without rows is left out, and a row whose length is not the header's is an error naming the experiment."""
    def tables(metrics):
        return [{"title": "Fig. 9, per seed", "text": "Bars in the paper.", "header": ["model", "loss / zero"],
                 "rows": [["a|b", metrics["loss"]]]},
                {"title": "empty", "text": "", "header": ["x"], "rows": []}]

    text = _page(tmp_path, mode="full", PAGE_TABLES=tables)[0]
    part = _section(text, "Figures of the paper, as numbers")
    assert "### exp: Fig. 9, per seed\n\nBars in the paper.\n\n| model | loss / zero |\n|---|---|\n| a\\|b | 0.26 |" \
        in part
    assert "empty" not in part
    assert text.index("## Figures of the paper") < text.index("## Notes on the verdicts")
    assert "## Figures of the paper" not in _page(tmp_path, mode="full")[0]
    with pytest.raises(ValueError, match="exp's PAGE_TABLES: a row has 1 cells, the header 2"):
        _page(tmp_path, mode="full", PAGE_TABLES=lambda m: [{"title": "t", "header": ["a", "b"], "rows": [[1]]}])
