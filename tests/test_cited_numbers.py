"""A measured number in a README or a docstring cites the committed file that holds it, and is found there.

Timings, speed ratios and memory figures go stale when the code changes or the machine was loaded; the files under
``bench/results/`` and ``data/`` keep them with their date, command and machine. Prose states what the code does and
points at the file (the rules, what counts as a citation, a measured number and a match: ``tests/_cited.py``)."""
from pathlib import Path

import pytest

from tests import _cited

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = ["README.md", "notebooks/README.md", "cuda_kernels/README.md",
            *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "bench").glob("README*"))]
SKIP = set()   # files whose docstrings are not scanned (none)
DOCSTRING_FILES = sorted(p.relative_to(ROOT).as_posix() for folder in ("minimal", "cuda_kernels")
                         for p in (ROOT / folder).rglob("*.py")
                         if p.relative_to(ROOT).as_posix() not in SKIP)

# Times that are not measurements, so cite nothing; keep this short: a measured time belongs in a results file.
ALLOWED = {
    "notebooks/README.md": [
        r"\| \d+ min \| \d \|",                           # the "read" column: estimated from words and lines of code
        r"each worth 5-15 minutes",                        # an estimate per exercise, not a measurement
        r"about 8\.5 hours of reading\s+and 57 exercises \(5-14 hours\), some 15-22 hours",  # sums of the two above
    ],
    "minimal/experiments/minrnn/runtime.py": [r"2\.7-3\.4 ms for T = 512-4096, Sec\. 4\.1"],   # the paper's T4 times
    "minimal/layers/_gelu_numba.py": [r"4 s \(1 − s\)"],             # s = σ(2y), not seconds
    "minimal/course/nbtidy.py": [r'"in 14 s",\s+"167\.3 ms"'],              # examples of the output text it removes
}


def _units(name):
    """(where, text, caption, unitless) for every unit of text of one file."""
    path = ROOT / name
    if name.endswith(".md"):
        return [(f"{name}:{line}", text, caption, True)
                for line, text, caption in _cited.markdown_units(path.read_text(encoding="utf-8"))]
    return [(f"{name}:{line}", text, "", False) for line, text in _cited.docstring_units(path)]


def _problems(names):
    out = []
    for name in names:
        for where, text, caption, unitless in _units(name):
            out += [f"{where}: {p}" for p in _cited.check_unit(text, caption, ROOT, unitless, ALLOWED.get(name, ()))]
    return out


def test_every_readme_is_scanned():
    assert all((ROOT / name).is_file() for name in MARKDOWN)
    assert {"README.md", "notebooks/README.md", "cuda_kernels/README.md"} <= set(MARKDOWN)


@pytest.mark.parametrize("name", MARKDOWN)
def test_a_readme_quotes_measurements_from_the_files_it_cites(name):
    problems = _problems([name])
    assert problems == [], "cite the results file and quote its number, or drop the number:\n" + "\n".join(problems)


def test_docstrings_quote_measurements_from_the_files_they_cite():
    assert len(DOCSTRING_FILES) > 100, "the scan found the package's modules"
    problems = _problems(DOCSTRING_FILES)
    assert problems == [], "cite the results file and quote its number, or drop the number:\n" + "\n".join(problems)


@pytest.mark.parametrize("old, new, stale", [("(1285 us)", "(1250 us)", "1250"),
                                             ("0.943 / 0.835", "0.951 / 0.835", "0.951"),
                                             ("backward 5.05x", "backward 4.1x", "4.1")])
def test_a_stale_number_in_the_kernels_readme_would_be_caught(old, new, stale):
    text = (ROOT / "cuda_kernels/README.md").read_text(encoding="utf-8")
    assert text.count(old) == 1
    units = _cited.markdown_units(text.replace(old, new))
    problems = [p for _, unit, caption in units for p in _cited.check_unit(unit, caption, ROOT, True)]
    assert len(problems) == 1 and f"quotes {stale}" in problems[0]


def test_the_skip_list_names_files_that_exist():
    assert all((ROOT / name).is_file() for name in SKIP)


# The checker itself, on made-up text and files.

@pytest.fixture
def results(tmp_path):
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "run.txt").write_text(
        "forward 0.714 | 0.606 (1799.5 us)\nstep 5.3 ms\n{\"seconds\": 0.0012852, \"vs_copy\": 0.4712}\n")
    return tmp_path


def _check(text, root, unitless=True, caption="", allowed=()):
    return _cited.check_unit(text, caption, root, unitless, allowed)


def test_a_number_found_in_the_cited_file_passes(results):
    assert _check("v4 reaches 0.714 of a copy (1799.5 us), `bench/results/run.txt`", results) == []


def test_a_stale_number_is_caught(results):
    problems = _check("v4 reaches 0.714 of a copy in 1650 us (bench/results/run.txt)", results)
    assert len(problems) == 1 and "1650 us" in problems[0] and "bench/results/run.txt" in problems[0]


def test_a_stale_fraction_without_a_unit_is_caught_in_a_readme_but_not_in_a_docstring(results):
    text = "v4 reaches 0.752 of a copy (bench/results/run.txt)"
    assert len(_check(text, results, unitless=True)) == 1
    assert _check(text, results, unitless=False) == []


def test_a_quoted_number_may_round_the_files_value_to_its_own_digits(results):
    assert _check("0.71 and 0.47 of a copy, 1800 us, 5 ms a step (bench/results/run.txt)", results) == []
    assert len(_check("0.72 of a copy (bench/results/run.txt)", results)) == 1     # 0.714 rounds to 0.71


def test_a_time_may_be_quoted_in_another_unit_than_the_files(results):
    assert _check("1285 us, 1.285 ms, 1.80 ms (bench/results/run.txt)", results) == []
    assert len(_check("1.29 s (bench/results/run.txt)", results)) == 1              # seconds are not milliseconds


def test_a_citation_of_a_missing_file_is_caught(results):
    problems = _check("a step takes 5.3 ms (bench/results/gone.txt)", results)
    assert any("gone.txt, which does not exist" in p for p in problems)


def test_a_timing_without_a_citation_is_caught_unless_allowed(results):
    assert len(_check("At Config() a training step costs 0.06-0.09 CPU-s.", results)) == 2
    assert len(_check("The fused loop is ~1.4x faster than reading h.", results)) == 1
    assert _check("Shapes (8 x 8), 2^20 steps, tolerance 1e-7, numba 0.68.0, v1 at K = 8.", results) == []
    assert _check("a budget of 90 minutes", results, allowed=[r"budget of 90 minutes"]) == []


def test_a_table_row_uses_the_citations_of_its_caption(results):
    text = "Rows from `bench/results/run.txt`:\n\n| case | time |\n|---|---|\n| forward | 1799.5 us |\n| stale | 9.9 ms |\n"
    units = _cited.markdown_units(text)
    problems = [p for _, row, caption in units for p in _check(row, results, caption=caption)]
    assert len(problems) == 1 and "9.9 ms" in problems[0]


def test_templates_and_folders_are_not_citations():
    assert _cited.citations("`bench/results/scan_<GPU>.json`, `data/zucchet/sweeps/`, `..._run1_*`") == []
    assert _cited.citations("(data/minrnn/shakespeare_step_cpu.json)") == ["data/minrnn/shakespeare_step_cpu.json"]
