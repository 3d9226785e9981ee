"""One exam's totals while it is being graded, as the authors' grading UI shows them (``grade_ui.py`` of
github TuAnh23/SciEx: per examinee and exam ``TotalPoints`` and ``TotalGradeGermanScale``; per exam
``MaximumTotalPoints``, ``AverageStudentTotalPoints`` and ``MedianStudentGradeGermanScale``).

The authors' lecturers typed those totals in; knockout computes them from the grades entered so far with
the definitions of :mod:`knockout.sciex._results` (the same functions as the leaderboard): points over the
graded questions, a question the examinee did not answer scores 0, an answer not graded yet is left out
and counted, the German grade comes from the exam's ``GradeBoundaries`` or the flagged default mapping.
While questions are still ungraded the German grade is that of the share of the points on the graded
questions, i.e. provisional.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from knockout.data._records import ItemSet
from knockout.sciex._results import Exam, _cells, examinee_result, exams_of, student_result


@dataclass(frozen=True)
class ExamineeTotal:
    """An examinee's total on one exam from one set of grades."""

    examinee: str
    points: float  # graded so far (unanswered questions count 0)
    graded_max: float  # the maximum points of the questions counted in ``points``
    percent: float | None  # points / graded_max
    german: float | None  # from the exam's boundaries (or the default mapping), provisional while ungraded > 0
    graded: int
    ungraded: int  # answered, not graded yet
    unanswered: int  # not answered: 0 points
    invalid: int

    @property
    def provisional(self) -> bool:
        return self.ungraded > 0 or self.invalid > 0


@dataclass(frozen=True)
class ExamTotals:
    """The exam's information and every examinee's total."""

    exam_id: str
    max_total: float  # ``MaximumTotalPoints`` of the exam info, else the sum of the questions' maximum points
    max_total_from: str  # "MaximumTotalPoints" | "questions"
    questions_max: float  # the sum of the questions' (current) maximum points
    student_points: float | None  # ``AverageStudentTotalPoints``, else the sum of the questions' student averages
    student_percent: float | None
    student_german: float | None  # ``MedianStudentGradeGermanScale``, else mapped from the percent
    student_german_from: str | None  # "MedianStudentGradeGermanScale" | "boundaries"
    boundaries: dict[str, float]  # German grade -> least points (out of ``max_total``)
    german_default: bool  # the default mapping is used (no GradeBoundaries)
    examinees: dict[str, ExamineeTotal]


def _student_points(exam: Exam) -> float | None:
    total = exam.info.get("AverageStudentTotalPoints")
    if total is not None:
        return float(total)
    averages = [q.meta["average_student_points"] for q in exam.questions
                if q.meta.get("average_student_points") is not None]
    return float(sum(averages)) if averages else None


def exam_totals(items: ItemSet, exam_id: str, grades: Mapping[str, float | None],
                examinees: Iterable[str]) -> ExamTotals:
    """The totals of exam ``exam_id`` of ``items`` for ``examinees`` (their ``Answer.examinee``) from
    ``grades`` (answer id -> points; None: invalid; missing: not graded yet).  ``items`` carries the
    current maximum points (organizers' edits applied)."""
    exams = exams_of(items)
    exam = exams[exam_id]
    info_total = exam.info.get("MaximumTotalPoints")
    max_total = float(info_total) if info_total else exam.max_points
    students = student_result(items, exams=exams, only={exam_id})
    srow = students.exams[0] if students is not None else None
    out = {}
    for name in examinees:
        result = examinee_result(items, grades, name, exams=exams, resamples=0)
        row = next((r for r in result.exams if r["exam"] == exam_id), None) if result is not None else None
        if row is not None:
            out[name] = ExamineeTotal(name, row["points"], row["max_points"], row["percent"], row["german"],
                                      row["graded"], row["ungraded"], row["unanswered"], row["invalid"])
            continue
        answers = {a.question_id: a for a in items if a.examinee == name and a.question_id in
                   {q.id for q in exam.questions}}
        cells = _cells(exam, answers, grades)  # nothing graded yet
        out[name] = ExamineeTotal(name, 0.0, 0.0, None, None, 0, sum(c.status == "ungraded" for c in cells),
                                  sum(c.status == "unanswered" for c in cells),
                                  sum(c.status == "invalid" for c in cells))
    return ExamTotals(
        exam_id=exam_id, max_total=max_total,
        max_total_from="MaximumTotalPoints" if info_total else "questions", questions_max=exam.max_points,
        student_points=_student_points(exam),
        student_percent=srow["percent"] if srow else None, student_german=srow["german"] if srow else None,
        student_german_from=srow["german_from"] if srow else None,
        boundaries={f"{g:.1f}": round(least * max_total, 3) for g, least in exam.boundaries.steps},
        german_default=exam.boundaries.default, examinees=out,
    )
