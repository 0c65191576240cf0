"""`python -m minimal reproduce all`: every work in turn into OUT/WORK, then OUT/index.md linking them."""
import types
from pathlib import Path

import pytest
from _fakes import fake_experiment

from minimal.reproduce import work as R
from minimal.reproduce import index as RA
from minimal.__main__ import main


def _fake_work(work, fail=False):
    """One fake experiment per work; its plot writes one PNG."""
    def plot(metrics, out_dir):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / f"{work}_fig.png"
        path.write_bytes(b"\x89PNG")
        return [path]

    return {"exp": fake_experiment(error=f"{work} broke" if fail else None, plot=plot)}


def test_reproduce_all_runs_every_work_and_links_each_result_and_figure(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(R.registry, "experiments", lambda work: seen.append(work) or _fake_work(work))
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "all", "--quick", "--no-progress"]) == 0
    assert list(dict.fromkeys(seen)) == list(RA.WORKS)   # in order (the index looks each work up again)
    out = tmp_path / "results"
    index = (out / "index.md").read_text()
    for work in RA.WORKS:
        assert (out / work / "results.md").exists()
        assert f"]({work}/results.md)" in index
        assert f"]({work}/exp/{work}_fig.png)" in index
    # every relative link of the index resolves
    import re
    for target in re.findall(r"\]\(([^)]+)\)", index):
        path, _, anchor = target.partition("#")
        assert (out / path).exists(), target
        assert not anchor or f"\n## {anchor.replace('-', ' ')}\n" in (out / path).read_text().lower(), target


def test_reproduce_all_stops_at_a_failing_work_and_indexes_what_finished(tmp_path, monkeypatch):
    monkeypatch.setattr(R.registry, "experiments", lambda work: _fake_work(work, fail=(work == "gril")))
    with pytest.raises(RuntimeError, match="gril broke"):
        RA.reproduce_all(out_dir=tmp_path, progress=False)
    index = (tmp_path / "index.md").read_text()
    assert "(zucchet/results.md)" in index and "| `gril` |" in index and "not run" in index
    assert not (tmp_path / "minrnn").exists()


def test_reproduce_all_refuses_only(capsys):
    assert main(["reproduce", "all", "--only", "icl"]) == 2
    assert "--only names experiments of one work" in capsys.readouterr().err


def test_the_index_counts_verdicts_per_work_full_and_quick_apart_and_says_why(tmp_path, monkeypatch):
    mods = {"exp": types.SimpleNamespace(NOTES={"far": "a quick run trains too few steps"}),
            "sweep": types.SimpleNamespace()}
    monkeypatch.setattr(R.registry, "experiments", lambda work: mods)
    done = {"zucchet": {
        "exp": {"metrics": {"a": 1.0, "far": 3.0}, "paper": {"a": 1.0, "far": 1.0}, "seconds": 1.0, "figures": [],
                "mode": "quick"},
        "sweep": {"metrics": {"b": 2.0, "c": 2.3}, "paper": {"b": 2.0, "c": 2.0}, "seconds": 0.0, "figures": [],
                  "mode": "full, all runs on disk"}}}
    index = RA.index_markdown(done, tmp_path, quick=True)
    row = [line for line in index.splitlines() if line.startswith("| `zucchet` |")][0]
    assert "| 1 / 1 / 0 | 1 / 0 / 1 |" in row   # full: b matches, c close; quick: a matches, far differs
    assert "- **differs** (1): `exp.far`." in index and "too few steps" not in index   # the note: on the page
    assert "(zucchet/results.md#notes-on-the-verdicts)" in index
    assert "- **matches** (2): `exp.a`, `sweep.b`." in index
    from minimal.run import verdicts
    assert verdicts.vocabulary_markdown() in index   # the same verdict words as every page
    # the wall time is the one the run printed for the work, when given
    printed = RA.index_markdown(done, tmp_path, quick=True, seconds={"zucchet": 12.4})
    assert [line for line in printed.splitlines() if line.startswith("| `zucchet` |")][0].endswith("| 12 |")


def test_the_main_job_prints_each_works_counts_and_page_not_the_page(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(R.registry, "experiments", _fake_work)
    seen = []
    real = R.reproduce
    monkeypatch.setattr(R, "reproduce", lambda *a, **kw: seen.append(kw["progress"]) or real(*a, **kw))
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "all", "--quick"]) == 0
    out = capsys.readouterr().out
    for work in RA.WORKS:
        assert f"== {work}: 1 differs; page: {Path('results') / work / 'results.md'}" in out
    assert "| exp |" not in out and "## Paper-comparable results" not in out
    assert seen == [False] * len(RA.WORKS)   # stderr is captured, not a terminal: no progress bars
