"""Stored notebook outputs hold on any machine: no number at float-rounding level is stored with its digits.

Strict nbval compares every stored output with a fresh run. The digits of a rounding-level number (3.0e-16 here,
1.5e-16 under another BLAS kernel) differ between CPUs, so a lesson prints the bound its assert checks instead (a
number its code writes, not one computed from the value);
this test scans every stored output of every lesson so that a new cell cannot bring such digits back."""
import nbformat
import pytest

from minimal.course import build as course
from minimal.course import nbtidy

NOTEBOOKS = sorted(p.name for p in course.NOTEBOOKS.glob("*.ipynb"))


def _nb(*texts, source="print(err)"):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", text=t) for t in texts]
    return nbformat.v4.new_notebook(cells=[cell])


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_stored_output_prints_the_digits_of_a_rounding_level_number(name):
    found = nbtidy.rounding_digits(nbformat.read(course.NOTEBOOKS / name, as_version=4))
    assert found == [], f"{name}: print the bound the assert checks instead of these digits: {found}"


@pytest.mark.parametrize("text", ["parallel vs recurrent: 3.0e-16\n", "KV score 7e-30\n", "{'x': '3e-10'}\n",
                                  "best error 4E-09 at eps = 1e-4\n", "residual -2.2e-16\n"])
def test_the_scan_finds_digits_below_the_threshold(text):
    assert len(nbtidy.rounding_digits(_nb(text))) == 1


@pytest.mark.parametrize("text", ["relative error < 1e-12\n", "agree to <= 1e-12\n", "error ≤ 1e-13\n",
                                  "fit error below 1e-12: True\n", "equals gril.forward to 1e-12\n",
                                  "lr 3e-3, eps 1e-06\n", "exactly 0.0e+00\n", "loss 0.2039\n", "2.5e+06 steps\n",
                                  "arg lambda = exp(-50), between 0 and 1e-20\n"])
def test_bounds_zeros_and_ordinary_numbers_pass(text):
    literals = "assert err < 1e-12 and err <= 1e-13 and 1e-20 > 0"
    assert nbtidy.rounding_digits(_nb(text, source=literals)) == []


def test_a_bound_computed_from_the_value_is_flagged_like_its_digits():
    """'< 1e-09' from the power of ten above a value moves with the value's digits: a printed bound must be a number
    the notebook's code writes (the one its assert checks)."""
    derived = 'print(f"< {10.0 ** np.ceil(np.log10(v)):.0e}")'
    assert [n for _, n, _ in nbtidy.rounding_digits(_nb("loss < 1e-09\n", source=derived))] == ["1e-09"]
    written = 'assert v < 1e-9\nprint("loss < 1e-09")'
    assert nbtidy.rounding_digits(_nb("loss < 1e-09\n", source=written)) == []
    # a number in a comment or a string is not a literal of the code
    for source in ('x = f(v)  # below 1e-9', 'print("loss < 1e-09")'):
        assert [n for _, n, _ in nbtidy.rounding_digits(_nb("loss < 1e-09\n", source=source))] == ["1e-09"]


def test_a_literal_in_another_cell_counts_as_written():
    """A table of bounds in one cell, printed by the next (zucchet_d's BOUND)."""
    nb = _nb("KV score < 1.35e-09\n", source="print(small(v, 'kv_score'))")
    nb.cells.insert(0, nbformat.v4.new_code_cell('BOUND = {"kv_score": 1.35e-9}'))
    assert nbtidy.rounding_digits(nb) == []


def test_a_value_printed_just_after_a_bound_is_still_found():
    """Each number is judged by the text just before it, even when another number stands there."""
    found = nbtidy.rounding_digits(_nb("residual 3.0e-16 < 1e-12\n", source="assert r < 1e-12"))
    assert [n for _, n, _ in found] == ["3.0e-16"]
    found = nbtidy.rounding_digits(_nb("residual < 1e-12: 3.0e-16\n", source="assert r < 1e-12"))
    assert [n for _, n, _ in found] == ["3.0e-16"]


def test_markdown_shown_by_a_cell_is_scanned_too():
    cell = nbformat.v4.new_code_cell("display(Markdown(s))")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": "| error | 1.1e-16 |",
                                                                 "text/plain": "<IPython.core.display.Markdown>"})]
    assert [n for _, n, _ in nbtidy.rounding_digits(nbformat.v4.new_notebook(cells=[cell]))] == ["1.1e-16"]


def test_a_cell_tagged_digits_hold_keeps_its_digits():
    nb = _nb("trained residual loss 2.0e-10\n")
    assert len(nbtidy.rounding_digits(nb)) == 1
    nb.cells[0].metadata["tags"] = [nbtidy.DIGITS_HOLD]
    assert nbtidy.rounding_digits(nb) == []


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_digits_hold_cell_is_compared_by_strict_nbval_and_needs_the_tag(name):
    """The tag is a claim that the digits are the same under every BLAS kernel; CI's strict nbval under a second
    kernel is what checks it, so a tagged cell must be compared (not NBVAL_IGNORE_OUTPUT), and the tag must still
    be needed (the cell prints a small number with its digits)."""
    nb = nbformat.read(course.NOTEBOOKS / name, as_version=4)
    for i, cell in enumerate(nb.cells):
        if nbtidy.DIGITS_HOLD not in cell.get("metadata", {}).get("tags", []):
            continue
        assert nbtidy.IGNORE not in cell.source and "NBVAL_SKIP" not in cell.source, f"{name} cell {i}"
        untagged = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell.source)])
        untagged.cells[0].outputs = cell.outputs
        assert nbtidy.rounding_digits(untagged), f"{name} cell {i}: tagged {nbtidy.DIGITS_HOLD} but prints no small number"
