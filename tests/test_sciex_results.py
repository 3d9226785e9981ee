"""Exam results: German grades with and without boundaries, per-exam mean vs pooled points, students, CIs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from knockout.data import Answer, ItemSet, Question, load_items
from knockout.errors import InputError
from knockout.sciex import DEFAULT, boundaries_for, examinee_result, exams_of, parse_boundaries, student_result

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "sciex" / "cs-basics-en"


def test_german_grade_from_the_exam_boundaries() -> None:
    info = {"GradeBoundaries": parse_boundaries({"1.0": 18, "2.0": 14, "3,0": 11, "4.0": 8}), "MaximumTotalPoints": 20}
    b = boundaries_for(info, 20)
    assert not b.default
    assert b.grade(20 / 20) == 1.0
    assert b.grade(18 / 20) == 1.0
    assert b.grade(17.5 / 20) == 2.0
    assert b.grade(11 / 20) == 3.0
    assert b.grade(8 / 20) == 4.0
    assert b.grade(7.5 / 20) == 5.0
    # boundaries in points of MaximumTotalPoints, whatever the questions sum to
    assert boundaries_for(info, 10).grade(0.9) == 1.0


def test_without_boundaries_the_documented_default_applies_and_is_flagged() -> None:
    b = boundaries_for({}, 16)
    assert b is DEFAULT and b.default
    assert b.grade(0.49) == 5.0
    assert b.grade(0.50) == 4.0
    assert b.grade(0.55) == 3.7
    assert b.grade(0.80) == 2.0
    assert b.grade(0.95) == 1.0
    assert b.grade(1.0) == 1.0


@pytest.mark.parametrize(("raw", "field"), [
    ({"1.0": 10, "4.0": 12}, "GradeBoundaries.1.0"),  # a better grade needs fewer points
    ({"1.5": 10}, "GradeBoundaries.1.5"),  # not a step of the scale
    ({"1.0": "many"}, "GradeBoundaries.1.0"),
    ([10, 8], "GradeBoundaries"),
])
def test_bad_boundaries_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(InputError) as e:
        parse_boundaries(raw, file="additional_info.json")
    assert e.value.field == field and e.value.file == "additional_info.json"


def test_loader_reads_the_exam_info_and_rejects_bad_boundaries(tmp_path: Path) -> None:
    items = load_items(EXAMPLE)
    info = exams_of(items)["cs-basics-en"].info
    assert info["MaximumTotalPoints"] == 16 and info["GradeBoundaries"]["4.0"] == 8
    exam = tmp_path / "cs-basics-en"
    shutil.copytree(EXAMPLE, exam)
    data = json.loads((exam / "additional_info.json").read_text())
    data["GradeBoundaries"] = {"2.0": 5, "1.0": 4}
    (exam / "additional_info.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"additional_info.json.*GradeBoundaries"):
        load_items(exam)


def _two_exams() -> ItemSet:
    """Exam A: 1 question of 10 points; exam B: 10 questions of 10 points."""
    qs = [Question(id="A/1", text="a", max_points=10, exam_id="A", difficulty="easy",
                   meta={"average_student_points": 5.0})]
    qs += [Question(id=f"B/{i}", text=f"b{i}", max_points=10, exam_id="B", language="de", difficulty="hard",
                    meta={"average_student_points": 2.0}) for i in range(10)]
    ans = [Answer(id="A/1/x", question_id="A/1", examinee="x", text="t", human_scores={"h": 10})]
    ans += [Answer(id=f"B/{i}/x", question_id=f"B/{i}", examinee="x", text="t", human_scores={"h": 0})
            for i in range(10)]
    return ItemSet(qs, ans)


def test_grade_is_the_mean_of_per_exam_percent_not_pooled_points() -> None:
    items = _two_exams()
    res = examinee_result(items, {a.id: a.human_score for a in items}, "x", resamples=200)
    assert res is not None
    assert [e["percent"] for e in res.exams] == [100.0, 0.0]
    assert res.percent == 50.0  # (100 + 0) / 2
    assert res.pooled_percent == pytest.approx(100 * 10 / 110, abs=0.01)  # 9.09: what pooling would say
    assert res.german == pytest.approx((1.0 + 5.0) / 2)
    assert res.german_default  # the exams have no GradeBoundaries


def test_unanswered_scores_zero_invalid_and_ungraded_are_left_out() -> None:
    qs = [Question(id=f"E/{i}", text=str(i), max_points=2, exam_id="E") for i in range(4)]
    ans = [Answer(id=f"E/{i}/x", question_id=f"E/{i}", examinee="x", text="t") for i in range(3)]
    items = ItemSet(qs, ans)
    grades: dict[str, float | None] = {"E/0/x": 2.0, "E/1/x": None}  # E/2/x ungraded, E/3 unanswered
    res = examinee_result(items, grades, "x", resamples=0)
    assert res is not None
    (exam,) = res.exams
    assert (exam["graded"], exam["invalid"], exam["ungraded"], exam["unanswered"]) == (1, 1, 1, 1)
    assert exam["points"] == 2.0 and exam["max_points"] == 4.0  # E/0 (2 of 2) + E/3 (0 of 2)
    assert res.percent == 50.0
    assert examinee_result(items, {}, "x") is None  # nothing graded: no result
    assert examinee_result(items, grades, "nobody") is None


def test_bootstrap_interval_resamples_within_exams_and_is_seeded() -> None:
    items = load_items(EXAMPLE)
    grades = {a.id: a.human_score for a in items}
    a = examinee_result(items, grades, "sample-b", resamples=500, seed=3)
    b = examinee_result(items, grades, "sample-b", resamples=500, seed=3)
    assert a is not None and b is not None and a.percent_ci == b.percent_ci
    lo, hi = a.percent_ci or (None, None)
    assert lo is not None and hi is not None and lo <= a.percent <= hi and hi - lo > 0
    full = examinee_result(items, grades, "sample-a", resamples=500)
    assert full is not None and full.percent == 100.0 and full.percent_ci == [100.0, 100.0]


def test_breakdowns_students_and_the_text_only_english_subset() -> None:
    items = load_items(EXAMPLE)
    grades = {a.id: a.human_score for a in items}
    res = examinee_result(items, grades, "sample-b", resamples=0)
    assert res is not None
    diff = {g["group"]: g for g in res.breakdowns["difficulty"]}
    assert list(diff) == ["easy", "medium", "hard"]
    # easy: questions 1 and 3 (2 points each), sample-b got 1 and 1 -> 50%; students 1.5 and 1.4 of 2
    assert diff["easy"]["percent"] == 50.0
    assert diff["easy"]["diff_to_students"] == pytest.approx(100 * ((0.5 - 0.75) + (0.5 - 0.7)) / 2, abs=0.01)
    modal = {g["group"]: g["questions"] for g in res.breakdowns["modality"]}
    assert modal == {"text-only": 4, "image-related": 2}
    sub = res.text_only_english
    assert sub is not None and sub["percent"] == pytest.approx(100 * (1 + 1 + 1.5 + 1.5) / 9, abs=0.01)
    students = student_result(items)
    assert students is not None
    assert students.percent == pytest.approx(100 * 9.7 / 16, abs=0.01)  # AverageStudentTotalPoints / Maximum
    assert students.german == 3.0 and not students.german_default  # MedianStudentGradeGermanScale
    assert res.german_default is False  # the example exam has GradeBoundaries
