"""Exam totals on the grading pages, as the authors' SciEx grading UI shows them (``grade_ui.py``): per
examinee the total points and German grade, per exam the maximum total points, the student average total
and the median German grade.  The numbers come from :func:`knockout.sciex.exam_totals` (the leaderboard's
definitions and German-grade mapping), on the exam with the organizers' current maximum points."""

from __future__ import annotations

from dataclasses import dataclass

from knockout.annotations import Exam
from knockout.sciex import DEFAULT_NOTE, ExamineeTotal, ExamTotals, exam_totals
from knockout.web._deps import Ctx


@dataclass(frozen=True)
class TotalsView:
    totals: ExamTotals
    by_number: dict[int, ExamineeTotal]  # examinee number -> total
    sciex: bool  # German grades and student figures are shown (an exam with SciEx exam information)
    whose: str  # "your grades" | "all graders (mean)"
    left_out: int  # grades above the current maximum, left out until given again
    default_note: str = DEFAULT_NOTE


def is_sciex(exam: Exam) -> bool:
    """An exam imported from SciEx data (or a solved SciEx exam): its questions carry SciEx's ``Index``
    and student average, or the exam information."""
    return any("exam_info" in q.meta or ("index" in q.meta and "average_student_points" in q.meta)
               for q in exam.questions)


def totals_view(ctx: Ctx, exam: Exam, grader: str | None) -> TotalsView | None:
    """The exam's totals from ``grader``'s grades (None: the mean over every grader's); None for an exam
    whose answers have no examinee names (nothing to total)."""
    if exam.items is None or not exam.examinees or any(a.examinee is None for a in exam.items):
        return None
    rows = ctx.exams.grades(exam_id=exam.id, grader=grader)
    flagged = {(g["answer_id"], g["grader"]) for g in exam.out_of_range(rows)}
    scores: dict[str, list[float]] = {}
    for g in rows:
        if (g["answer_id"], g["grader"]) not in flagged:
            scores.setdefault(g["answer_id"], []).append(float(g["score"]))
    grades: dict[str, float | None] = {a: sum(s) / len(s) for a, s in scores.items()}
    totals = exam_totals(exam.items, exam.id, grades, [e.key for e in exam.examinees])
    return TotalsView(totals, {e.number: totals.examinees[e.key] for e in exam.examinees}, is_sciex(exam),
                      "your grades" if grader is not None else "all graders (mean)", len(flagged))
