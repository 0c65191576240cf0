"""The answers a check hands to the grader (``minimal.course.grading``) and the verdict reached outside the student's
kernel (``minimal.course.judge``): every natural form of a right answer counts, nothing but data crosses, and a forged
or malformed record fails without harming the grader."""
import numpy as np
import nbformat
import pytest

from minimal.course import grading, judge


class Anything:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value,want", [
    ([1, 2, 3], [1.0, 2.0, 3.0]), ((1, 2, 3), [1.0, 2.0, 3.0]), (np.array([1, 2, 3]), [1.0, 2.0, 3.0]),
    (3, 3.0), (np.float32(3), 3.0), (True, True), (np.bool_(False), False), (" Lower ", "lower"),
    ({0.5, 1.0}, [0.5, 1.0])])
def test_every_natural_form_of_an_answer_has_one_canonical_value(value, want):
    got = grading.canonical(value)
    assert type(got) is type(want) and got == want if not isinstance(want, list) else np.array_equal(got, want)


def test_names_in_a_set_keep_their_case_and_a_one_word_answer_does_not():
    assert list(grading.canonical({"Q", "q", "A"})) == ["A", "Q", "q"]
    assert grading.canonical("B") == "b"


def test_an_unanswered_or_non_data_answer_is_refused_in_words():
    with pytest.raises(grading.NotAnswered, match="not answered yet: write predicted_rank"):
        grading.record("ex1", predicted_rank=None)
    with pytest.raises(ValueError, match="must be a number, a string"):
        grading.record("ex1", predicted_rank=Anything())
    with pytest.raises(ValueError, match="must be numbers"):
        grading.record("ex1", predicted_rank=[Anything(), 1])
    with pytest.raises(grading.NotAnswered):
        grading.answered(f=None)


def _cell(source, gid="ex1-check"):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": gid, "points": 10}
    return cell


def _record(folder, check, **values):
    np.savez(folder / f"{check}.npz", **{k: np.asarray(v) for k, v in values.items()})


def test_the_default_rule_compares_with_the_reference_and_a_rule_judges_many_right_answers(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        _cell('grading.record("ex1", x=x, message="not the x asked")'),
        _cell('grading.record("ex2", w=w, c=c, rule="np.sum(w) > ref[\'c\'] and all(v >= 0 for v in w)")', "ex2")])
    ref, good, bad = tmp_path / "ref", tmp_path / "good", tmp_path / "bad"
    for d in (ref, good, bad):
        d.mkdir()
    _record(ref, "ex1", x=[1.0, 2.0])
    _record(ref, "ex2", w=[1.0], c=0.5)
    _record(good, "ex1", x=[1.0, 2.0 + 1e-12])
    _record(good, "ex2", w=[0.4, 0.4], c=99.0)            # the rule reads the reference's c, never the student's
    _record(bad, "ex1", x=[1.0, 2.1])
    _record(bad, "ex2", w=[2.0, -1.0], c=0.0)
    assert all(v.passed for v in judge.judge(nb, ref, good).values())
    verdicts = judge.judge(nb, ref, bad)
    assert verdicts["ex1-check"] == judge.Verdict(False, "not the x asked")
    assert not verdicts["ex2"].passed
    assert judge.judge(nb, ref, tmp_path / "nothing")["ex1-check"].message.startswith("not answered yet")


def test_a_forged_record_is_data_or_nothing(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[_cell('grading.record("ex1", x=x)')])
    ref, student = tmp_path / "ref", tmp_path / "student"
    ref.mkdir()
    student.mkdir()
    _record(ref, "ex1", x=[1.0])
    np.save(student / "pickled.npy", np.array([Anything()], dtype=object), allow_pickle=True)
    (student / "pickled.npy").rename(student / "ex1.npz")
    assert judge.judge(nb, ref, student)["ex1-check"].passed is False
    np.savez(student / "ex1.npz", x=np.array([Anything()], dtype=object))        # an object array in an npz
    assert judge.judge(nb, ref, student)["ex1-check"].passed is False
    (student / "ex1.npz").write_bytes(b"\0" * (judge.MAX_BYTES + 1))
    assert "too large" in judge.judge(nb, ref, student)["ex1-check"].message


def test_rules_come_from_the_source_and_a_record_in_a_hidden_check_is_refused():
    cell = _cell('x = 1\ngrading.record("ex3", a=a, rtol=1e-6, rule="a > 0", message="m")')
    (r,) = judge.cell_rules(cell.source)
    assert (r.check, r.names, r.rtol, r.rule, r.message) == ("ex3", ("a",), 1e-6, "a > 0", "m")
    with pytest.raises(ValueError, match="records no answer"):
        judge.rules(nbformat.v4.new_notebook(cells=[_cell("assert True, 'x'")]))
    hidden = _cell('### BEGIN HIDDEN TESTS\ngrading.record("ex1", a=a)\n### END HIDDEN TESTS')
    with pytest.raises(ValueError, match="inside a hidden check"):
        judge.rules(nbformat.v4.new_notebook(cells=[hidden]))


def test_an_empty_answer_makes_no_rule_true_and_a_malformed_record_fails_without_raising(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[_cell('grading.record("ex1", r=r, rule="abs(r - ref[\'r\']) < 0.05")'),
                                         _cell('grading.record("ex2", x=x)', "ex2")])
    ref, student = tmp_path / "ref", tmp_path / "student"
    ref.mkdir()
    student.mkdir()
    _record(ref, "ex1", r=2.0)
    _record(ref, "ex2", x=1.0)
    _record(student, "ex1", r=grading.canonical([]))               # [] -> an empty array: no rule holds for it
    np.savez(student / "ex2.npz", **{"x": np.ones(1), "x.y": np.ones(1)})     # a value and a group at once
    verdicts = judge.judge(nb, ref, student)
    assert not verdicts["ex1-check"].passed and not verdicts["ex2"].passed
    # a header that claims 10^15 items is refused before anything is allocated
    import io
    import zipfile

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10 ** 15,)})
    with zipfile.ZipFile(student / "ex2.npz", "w") as z:
        z.writestr("x.npy", buf.getvalue())
    assert "too large" in judge.judge(nb, ref, student)["ex2"].message
