"""The results pages say exactly what was compared: every number a page cites is recomputed here from the committed
files under ``data/``, independently of the code that wrote the page, and each note and definition says what the
number is.

- minRNN's page (``reproduce minrnn``, which loads the committed Shakespeare run and selective-copying grid): each
  Shakespeare row from the curves of ``data/minrnn/shakespeare_full.json`` (seed 0: best test loss on the fixed
  subset, its step, the ratios to the Transformer, the steps the Transformer needs to its best over the steps
  minGRU needs to first reach that loss); each selective-copying row's mean ± std from the per-seed accuracies in
  the committed job files (the std with ddof = 0, as the definition says); a note that says "above the paper's"
  or "below the paper's" stands only under rows on that side.
- GRIL's unit-ridge note: the ratio and the loss it quotes at x ~ U(-1, 1) are the closed forms of today's code.
"""
import json
import re

import numpy as np
import pytest

from minimal.run import report
from minimal.data import data_path
from minimal.experiments import notes

ROW = re.compile(r"^\| (?P<exp>\w+) \| (?P<key>\w+) \| (?P<paper>[^|]+) \| (?P<ours>[^|]+) \| (?P<verdict>[^|]+) \|")


def _section(text, title):
    return text.split(f"## {title}")[1].split("\n## ")[0]


@pytest.fixture(scope="module")
def minrnn_page(tmp_path_factory):
    from minimal.experiments.minrnn import selective_copy as SC, shakespeare as S
    from minimal.reproduce.work import reproduce

    if not (S.finished(S.Config()) and SC.finished(SC.Config())):
        pytest.skip("the committed Shakespeare run or selective-copying grid is not here")
    out = tmp_path_factory.mktemp("minrnn")
    reproduce("minrnn", quick=True, only=["shakespeare", "selective_copy"], out_dir=out, progress=False)
    text = (out / "results.md").read_text()
    rows = {(m["exp"], m["key"]): m.groupdict()
            for m in map(ROW.match, _section(text, "Paper-comparable results").splitlines()) if m}
    return text, {k: {f: v.strip() for f, v in r.items()} for k, r in rows.items()}


def _shakespeare_expected():
    """Every Shakespeare row's number, from the committed seed-0 curves alone."""
    saved = json.loads(data_path("minrnn", "shakespeare_full.json").read_text())
    best, step = {}, {}
    for kind, m in saved["models"].items():
        i = int(np.argmin(m["curve"]))
        best[kind], step[kind] = m["curve"][i], m["curve_steps"][i]
    out = {f"test_loss_{k}": v for k, v in best.items()} | {f"steps_to_best_{k}": v for k, v in step.items()}
    tf = saved["models"]["attention"]
    for kind, m in saved["models"].items():
        if kind == "attention":
            continue
        out[f"ratio_{kind}_to_transformer"] = best[kind] / best["attention"]
        out[f"steps_ratio_attention_to_{kind}"] = step["attention"] / step[kind]
        reach = min(s for s, loss in zip(m["curve_steps"], m["curve"]) if loss <= min(tf["curve"]))
        out[f"steps_ratio_attention_to_{kind}_at_transformer_best"] = step["attention"] / reach
    return saved, out


def test_the_shakespeare_rows_are_the_committed_run_s_numbers(minrnn_page):
    _, rows = minrnn_page
    saved, expected = _shakespeare_expected()
    shown = {key: r for (exp, key), r in rows.items() if exp == "shakespeare"}
    assert shown, "no Shakespeare row on the page"
    for key, r in shown.items():
        assert r["ours"] == report._fmt(expected[key]), (key, r["ours"], expected[key])
    # the step ratio at equal loss has its row, against the paper's 2000 / 575, with a verdict
    row = shown["steps_ratio_attention_to_mingru_at_transformer_best"]
    assert (row["paper"], row["ours"], row["verdict"]) == ("3.478", "3.233", "close")
    # test_loss is the best evaluation on the fixed subset, not the final model on every window
    m = saved["models"]["mingru"]
    assert expected["test_loss_mingru"] == m["best_test_loss"] != m["final_test_loss"]
    assert saved["n_eval_targets"] == saved["config"]["eval_windows"] * saved["config"]["T"] == 8192


def test_the_shakespeare_definitions_and_notes_say_what_was_compared(minrnn_page):
    text, _ = minrnn_page
    defs = _section(text, "Metric definitions")
    test_loss = next(line for line in defs.splitlines() if line.startswith("- `shakespeare.test_loss_<model>`"))
    assert "lowest" in test_loss and "fixed test subset" in test_loss and "not the final model" in test_loss
    final = next(line for line in defs.splitlines() if line.startswith("- `shakespeare.final_test_loss_<model>`"))
    assert "every test window" in final and "best evaluated weights" in final
    page_notes = _section(text, "Notes on the verdicts")
    steps_notes = [line for line in page_notes.splitlines() if "`shakespeare.steps_" in line]
    assert steps_notes and all("batch 16" in line or "batch of 16" in line for line in steps_notes)
    assert all("64" in line.split("the paper")[1] for line in steps_notes)


def test_the_shakespeare_page_shows_every_seed_and_their_mean(minrnn_page):
    """The page's rows are seed 0's; its three-seed table gives each seed's best loss, ratio to the Transformer
    and both step ratios (the one at the Transformer's best is the paper's 2000 / 575 reading) with mean ± std
    (ddof = 0), each recomputed here from the committed curves alone."""
    from minimal.experiments.notes import minrnn as NM

    paths = [data_path("minrnn", "shakespeare_full.json")] + \
            [data_path("minrnn", f"shakespeare_full_seed{s}.json") for s in (1, 2)]
    if not all(p.exists() for p in paths):
        pytest.skip("the three Shakespeare seeds are not committed here")
    per_seed = []
    for p in paths:
        models = json.loads(p.read_text())["models"]
        best = {k: min(m["curve"]) for k, m in models.items()}
        step = {k: m["curve_steps"][int(np.argmin(m["curve"]))] for k, m in models.items()}
        reach = {k: min(s for s, loss in zip(m["curve_steps"], m["curve"]) if loss <= best["attention"])
                 for k, m in models.items()}
        per_seed.append((best, step, reach))
    [table] = NM.PAGES["minrnn.shakespeare"]["PAGE_TABLES"]({})

    def cell(vals, fmt):
        return " / ".join(format(v, fmt) for v in vals) + \
            f" (mean {np.mean(vals):{fmt}} ± {np.std(vals, ddof=0):{fmt}})"

    rows = {row[0]: row[1:] for row in table["rows"]}
    assert list(rows) == ["minGRU (log space)", "minLSTM (log space)", "minGRU (vanilla)", "Transformer"]
    for name, kind in zip(rows, ("mingru", "minlstm", "mingru_vanilla", "attention")):
        loss = cell([b[kind] for b, _, _ in per_seed], ".3f")
        if kind == "attention":
            assert rows[name] == [loss, "—", "—", "—"]
            continue
        assert rows[name] == [loss, cell([b[kind] / b["attention"] for b, _, _ in per_seed], ".3f"),
                              cell([st["attention"] / r[kind] for _, st, r in per_seed], ".2f"),
                              cell([st["attention"] / st[kind] for _, st, _ in per_seed], ".2f")]
    assert rows["minGRU (log space)"][2] == "3.23 / 3.27 / 2.17 (mean 2.89 ± 0.51)"     # minrnn_d asserts 2.89
    assert "seeds 0, 1, 2" in table["text"] and "2000 / 575 = 3.48" in table["text"] and "batch 16" in table["text"]
    text, _ = minrnn_page
    assert "Shakespeare over three seeds" in text and "3.23 / 3.27 / 2.17 (mean 2.89 ± 0.51)" in text


def _selective_copy_runs():
    """{row key: [per-seed accuracy]} from the committed job files of Config()'s grid."""
    from minimal.experiments.minrnn import selective_copy as SC, selective_copy_summary as SCS
    from minimal.run.job_files import job_path

    config = SC.Config()
    runs = {}
    for job in SC.jobs(config):
        record = json.loads(job_path(SC.SWEEP.dir(config), SC.SWEEP.job, job, name=SC.SWEEP.name).read_text())
        c = record["config"]
        key = SCS.row_key(c["kind"], c["depth"], bool(c.get("log_space", False)))
        runs.setdefault(key, []).append((c["seed"], record["result"]["accuracy"]))
    return {k: [a for _, a in sorted(v)] for k, v in runs.items()}


def test_the_selective_copying_rows_are_the_committed_runs_mean_and_population_std(minrnn_page):
    text, rows = minrnn_page
    runs = _selective_copy_runs()
    shown = {key: r for (exp, key), r in rows.items() if exp == "selective_copy"}
    assert len(shown) == 12
    for key, r in shown.items():
        acc = np.asarray(runs[key])
        want = f"{report._fmt(float(acc.mean()))} ± {report._fmt(float(acc.std(ddof=0)))} (n = {acc.size})"
        assert r["ours"] == want, (key, r["ours"], want)
    definition = next(line for line in _section(text, "Metric definitions").splitlines()
                      if line.startswith("- `selective_copy.<cell>_<layers>`:"))
    assert "ddof = 0" in definition


def test_a_note_says_above_or_below_the_paper_only_under_rows_on_that_side(minrnn_page):
    text, rows = minrnn_page
    sides = 0
    for line in _section(text, "Notes on the verdicts").splitlines():
        keys = re.findall(r"`selective_copy\.(\w+)`", line)
        for side, holds in (("above the paper's", lambda o, p: o > p), ("below the paper's", lambda o, p: o < p)):
            if f"This accuracy is {side}" in line:
                sides += 1
                for key in keys:
                    ours, paper = (float(rows["selective_copy", key][f].split(" ± ")[0]) for f in ("ours", "paper"))
                    assert holds(ours, paper), (key, side, ours, paper)
        if keys:
            assert "width D = 32" in line and "input dimension 64" in line, line
    assert sides >= 2      # the committed grid has rows on both sides among those that do not match


def test_the_note_on_a_pattern_is_true_on_either_side():
    note = notes.page("minrnn", "selective_copy")["NOTES"]["*"]
    text = note({"T": 64, "n_data": 16, "D": 32, "steps": 300}, {})
    assert "above the paper's does not show a better model, nor one below it a worse one" in text


def test_the_ridge_note_quotes_today_s_closed_forms():
    from minimal.analysis import gril_gd
    from minimal.experiments.gril import model as M, regression as R

    config = R.Config()
    job = R._job(config, config.f)
    readings = R.newton_readings(M.eval_tasks(job), gril_gd.eta_star(config.N, config.f, config.x_scale),
                                 M.eval_tasks(job, x_scale=1.0), gril_gd.eta_star(config.N, config.f, 1.0))
    text = notes.page("gril", "regression")["NOTES"]["ridge_loss"]({}, readings)
    ratio, loss = readings["ridge_over_gd_at_a1"], readings["ridge_loss_at_a1"]
    assert f"0.114 / 0.207 = {R.PAPER['newton_over_gd']:.3f}" in text
    assert f"ours {ratio:.3f}" in text and f"its loss there is {loss:.2f}, {loss / 0.114:.1f} times 0.114" in text
    assert abs(ratio / R.PAPER["newton_over_gd"] - 1) < 0.05 and loss / R.PAPER["newton_loss"] > 3   # the ratio fits,
    assert "the ratio fits, the absolute loss does not" in text                                     # the loss does not


def test_the_comparison_code_says_what_it_builds():
    """No comment of the GRIL comparison calls one of its stacks "+LP" (only the paper's models are): it builds no
    such model (its docstring says why)."""
    from minimal.experiments.gril import comparison

    code = open(comparison.__file__, encoding="utf-8").read().split('"""', 2)[2]
    comments = [line.split("#", 1)[1] for line in code.splitlines() if "#" in line]
    assert not [c for c in comments if "+LP" in c and "paper's +LP" not in c]


# ------------------------------------------------------------------- GRIL comparison: the attention baselines
MEASURE = re.compile(r"^\| [^|]+ \| `(?P<key>\w+)` \| (?P<ours>[^|]+) \|")
ATTENTION = ("lsa_1", "lsa_2", "softmax_2")


@pytest.fixture(scope="module")
def comparison_page(tmp_path_factory):
    from minimal.experiments.gril import comparison as C
    from minimal.reproduce.work import reproduce

    if not C.finished(C.Config()):
        pytest.skip("the committed GRIL comparison grid is not here")
    out = tmp_path_factory.mktemp("gril")
    reproduce("gril", quick=False, only=["comparison"], out_dir=out, progress=False)
    measured = {m["key"]: m["ours"].strip() for m in map(MEASURE.match, (out / "measurements.md").read_text()
                                                         .splitlines()) if m}
    metrics = json.loads((out / "results.json").read_text())["comparison"]["metrics"]
    return (out / "results.md").read_text(), measured, metrics


def _attention_runs():
    """Per (grid, model): [(seed, loss / GD, loss / zero, step the eval curve first fell below 0.97x the zero
    predictor or None)], from the committed job files alone. Grid "" is the default grid's (lr 3e-3, weight decay
    5e-4, no init field set), "b1_" App. B.1's (lr 2e-4, weight decay 0.05)."""
    from minimal.run.job_files import load_records

    runs = {}
    for r in load_records(data_path("gril", "sweeps", "comparison"), name="cmp"):
        c, res = r["config"], r["result"]
        if c["n_out"] != 1 or c["model"] not in ATTENTION:
            continue
        if (c["lr"], c["weight_decay"]) == (2e-4, 0.05):
            grid = "b1_"
        else:
            assert (c["lr"], c["weight_decay"]) == (3e-3, 5e-4) and "value_scale" not in c
            grid = ""
        left = next((s for s, loss in res["eval_curve"] if loss < 0.97 * res["eval_curve_zero"]), None)
        runs.setdefault((grid, c["model"]), []).append((c["seed"], res["loss"] / res["loss_gd"],
                                                         res["loss"] / res["loss_zero"], left))
    return {k: sorted(v) for k, v in runs.items()}


def _numbers(text):
    return [float(x) for x in text.strip("[]").split(",")]


def test_the_attention_baselines_rows_are_the_committed_runs_per_seed_ratios(comparison_page):
    """Each attention baseline's rows on the page (scalar task): its final loss per seed as a multiple of one GD
    step and of the zero predictor, for our grid and for the App. B.1 runs on disk, as the job files give them."""
    _, measured, _ = comparison_page
    runs = _attention_runs()
    assert {m for g, m in runs if g == ""} == set(ATTENTION)
    for (grid, model), seeds in runs.items():
        key = f"{grid}scalar_{model}"
        assert _numbers(measured[f"{key}_seed_ids"]) == [s for s, *_ in seeds]
        for i, name in ((1, "over_gd"), (2, "over_zero")):
            assert np.allclose(_numbers(measured[f"{key}_{name}_seeds"]), [x[i] for x in seeds], rtol=1e-3)
    assert int(measured["b1_jobs_on_disk"]) == sum(len(v) for (g, _), v in runs.items() if g == "b1_")


def test_the_attention_rows_say_where_each_run_left_the_zero_predictor_or_that_it_never_did(comparison_page):
    text, measured, _ = comparison_page
    for (grid, model), seeds in _attention_runs().items():
        said = measured[f"{grid}scalar_{model}_plateau_steps_seeds"].strip("[]").split(",")
        assert [None if x.strip() == "None" else int(float(x)) for x in said] == [left for *_, left in seeds]
        assert int(measured[f"{grid}scalar_{model}_steps"]) > 0
    meta = notes.page("gril", "comparison")
    said = text + " ".join(str(v) for v in list(meta["NOTES"].values()) + list(meta["METRICS"].values()))
    assert "up to 300,000 steps" in text      # the Differs list (the module docstring) gives App. B.1's budget
    assert not re.search(r"steps not given|no step count|gives no step|steps? (is|are) not given", said)


def _fig3c_rows(text):
    """The results page's Fig. 3C table: (grid name, model) -> its cells after the model and grid columns."""
    part = text.split("### comparison: Fig. 3C", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in part.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0] != "model (stands in for)" and not cells[0].startswith("---"):
            rows[(cells[1], cells[0].split()[0])] = cells[2:]
    return rows


def test_the_results_page_shows_fig_3c_as_numbers_per_seed_from_the_job_files(comparison_page):
    """Fig. 3C is on the results page as numbers, not only as the two yes / no claims: per grid and attention
    model, each seed's loss over the zero predictor and over one GD step (3 decimals) and the step it left the
    zero predictor, as the committed job files give them; and the sentence naming the attention model closest to
    GD names the one with the lowest mean loss in each grid."""
    text, _, _ = comparison_page
    rows = _fig3c_rows(text)
    names = {"": "default", "b1_": "App. B.1"}
    runs = _attention_runs()
    for (grid, model), seeds in runs.items():
        steps, seed_ids, over_zero, over_gd, left = rows[(names[grid], model)]
        assert seed_ids == ", ".join(str(s) for s, *_ in seeds)
        assert over_zero == ", ".join(f"{z:.3f}" for _, _, z, _ in seeds)
        assert over_gd == ", ".join(f"{g:.3f}" for _, g, _, _ in seeds)
        assert left == ", ".join("never" if x is None else f"{x:,}" for *_, x in seeds)
    for grid, name in names.items():
        mean = {m: np.mean([z for _, _, z, _ in v]) for (g, m), v in runs.items() if g == grid}
        assert f"{min(mean, key=mean.get)} in the {name} grid" in text
    assert ("App. B.1", "lsa_2") in rows and ("default", "gril_1") in rows


def test_the_teacher_student_page_shows_table_1_for_app_b1_s_optimiser_from_its_sidecar():
    """The paper-optimiser run's Table 1 quantities on the teacher-student page are those its committed sidecar
    keeps (notebook zucchet_d, Sec. 9, checks them against a fresh analysis of the committed weights), beside
    Table 1 and this run's, with the run's own optimiser, step count and the step from which it flushed
    subnormals."""
    from minimal.experiments.notes import zucchet as NZ
    from minimal.experiments.zucchet.teacher_student import PAPER
    from minimal.run import io

    path = data_path("zucchet", "teacher_student_paper_optimiser_full.npz")
    meta = io.load_meta(path) if path.exists() else {}
    if "relative_loss" not in meta:
        pytest.skip("the paper-optimiser run's analysis is not in its committed sidecar")
    ours = {key: 0.5 for _, key in NZ._TABLE1}
    [table] = NZ.PAGES["zucchet.teacher_student"]["PAGE_TABLES"](ours)
    assert table["header"][-1] == f"App. B.1's optimiser, {meta['config']['steps']:,} steps"
    assert [row[0] for row in table["rows"]] == [label for label, _ in NZ._TABLE1]
    for row, (_, key) in zip(table["rows"], NZ._TABLE1):
        assert row[1:] == [PAPER.get(key, "—"), 0.5, meta[key]]
    assert f"for the paper's {meta['config']['steps']:,} steps" in table["text"]
    assert f"lr {meta['config']['lr']:g} cosine-annealed to {meta['config']['final_lr']:g}" in table["text"]
    flushed = meta["subnormals_flushed_from_step"]
    assert (f"From step {flushed:,} on, float32 subnormals" in table["text"]) == (isinstance(flushed, int)
                                                                                and flushed > 0)


def test_the_selective_copy_page_shows_the_trend_in_T_from_the_committed_runs():
    """The trend table on the selective-copying page: for each depth whose runs are all committed, one row per
    length with the seeds' accuracies, mean ± std (ddof = 0) and stopping steps of ``selective_copy_trend``, then
    Table 1's T = 4096 row; a depth with a missing file has no rows."""
    from minimal.experiments.minrnn import selective_copy as S
    from minimal.experiments.minrnn import selective_copy_trend as TR
    from minimal.experiments.notes import minrnn as NM

    if not TR.finished():
        pytest.skip("the selective-copying trend's job files are not committed here")
    table, *more = NM.PAGES["minrnn.selective_copy"]["PAGE_TABLES"]({})
    depths = [d for d in TR.DEPTHS if TR.finished(depth=d)]
    assert 1 in depths and [row[0] for row in table["rows"]] == [d for d in depths for _ in range(len(TR.lengths(d)) + 1)]
    rows = iter(table["rows"])
    for depth in depths:
        key = f"mingru_{depth}"
        for T in TR.lengths(depth):
            acc = np.array([r["result"]["accuracy"] for r in TR.records(T, depth=depth)])
            steps = [r["result"]["steps_run"] for r in TR.records(T, depth=depth)]
            assert next(rows) == [depth, T, " / ".join(f"{a:.2f}" for a in acc),
                                  f"{acc.mean():.1f} ± {acc.std(ddof=0):.1f}", ", ".join(f"{s:,}" for s in steps)]
        assert next(rows) == [depth, "4096 (Table 1)", "—", f"{S.PAPER[key]} ± {S.PAPER[f'{key}_std']}",
                              "up to 400,000"]
    assert "2 at T = 64, 6 at T = 128, 14 at T = 256" in table["text"] and "Sec. 4.4" in table["text"]
    wide = [d for d in TR.DEPTHS if TR.finished(depth=d, D=64)]
    assert len(more) == (1 if wide else 0)
    if wide:
        [width] = more
        rows = iter(width["rows"])
        for depth in wide:
            key = f"mingru_{depth}"
            for D in (32, 64):
                acc = np.array([r["result"]["accuracy"] for r in TR.records(64, depth=depth, D=D)])
                assert [r["config"]["D"] for r in TR.records(64, depth=depth, D=D)] == [D, D, D]
                steps = [r["result"]["steps_run"] for r in TR.records(64, depth=depth, D=D)]
                assert next(rows) == [depth, D, 64, " / ".join(f"{a:.2f}" for a in acc),
                                      f"{acc.mean():.1f} ± {acc.std(ddof=0):.1f}", ", ".join(f"{s:,}" for s in steps)]
            assert next(rows) == [depth, "64 (App. C.2)", "4096 (Table 1)", "—",
                                  f"{S.PAPER[key]} ± {S.PAPER[f'{key}_std']}", "up to 400,000"]
        assert next(rows, None) is None
        assert "D = 64 (expansion factor 6, so H = 384)" in width["text"] and "Sec. 4.4" in width["text"]
