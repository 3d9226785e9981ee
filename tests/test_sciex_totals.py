"""knockout.sciex.exam_totals and the gold answers per language of the SciEx loader (no web dependency)."""

from __future__ import annotations

from pathlib import Path

from knockout.data import load_items
from knockout.sciex import exam_totals, write_sciex

EXAMPLE = Path(__file__).resolve().parents[1] / "src/knockout/examples/sciex"


def test_exam_totals_of_the_example() -> None:
    items = load_items(EXAMPLE / "cs-basics-en")
    grades: dict[str, float | None] = {"cs-basics-en/1/sample-a": 2.0, "cs-basics-en/2/sample-a": None}
    t = exam_totals(items, "cs-basics-en", grades, ["sample-a", "sample-c"])
    assert (t.max_total, t.max_total_from, t.questions_max) == (16.0, "MaximumTotalPoints", 16.0)
    assert (t.student_points, t.student_german, t.student_german_from) == (9.7, 3.0, "MedianStudentGradeGermanScale")
    assert not t.german_default and t.boundaries["4.0"] == 8.0
    a = t.examinees["sample-a"]
    assert (a.points, a.graded_max, a.percent, a.german) == (2.0, 2.0, 100.0, 1.0)
    assert (a.graded, a.ungraded, a.invalid, a.unanswered) == (1, 4, 1, 0) and a.provisional
    c = t.examinees["sample-c"]
    assert (c.points, c.percent, c.german, c.graded, c.ungraded) == (0.0, None, None, 0, 6)


def test_gold_answers_per_language_round_trip(tmp_path: Path) -> None:
    items = load_items(EXAMPLE / "cs-basics-de")
    q = items.questions["cs-basics-de/1"]
    assert set(q.meta["gold_answers"]) == {"en", "de"} and q.reference == q.meta["gold_answers"]["de"]
    assert q.meta["gold_answers"]["en"].startswith("TCP is connection-oriented")
    (folder,) = write_sciex(items, tmp_path)
    again = load_items(folder).questions["cs-basics-de/1"]
    assert again.meta["gold_answers"] == q.meta["gold_answers"] and again.reference == q.reference
