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
    whose: str  # "your grades" | "all graders (mean)", saying when grades imported with the data are included
    left_out: int  # grades above the current maximum, left out until given again
    default_note: str = DEFAULT_NOTE


def is_sciex(exam: Exam) -> bool:
    """An exam imported from SciEx data (or a solved SciEx exam): its questions carry SciEx's ``Index``
    and student average, or the exam information."""
    return any("exam_info" in q.meta or ("index" in q.meta and "average_student_points" in q.meta)
               for q in exam.questions)


def totals_view(ctx: Ctx, exam: Exam, grader: str | None) -> TotalsView | None:
    """The exam's totals from ``grader``'s grades (None: the mean over every grader's); None for an exam
    whose answers have no examinee names (nothing to total).  The grades imported with the data (an answer's
    ``human_scores``) count as expert grades, as in calibration, review and the gradebook: for every grader
    they join the web grades (each file grader one more grader); for one grader, the file's grades of the
    grader of that name (a teacher who imported their own grades) fill the answers they have not graded in
    the app (other graders' file grades are not theirs: each grader grades independently, as in SciEx)."""
    if exam.items is None or not exam.examinees or any(a.examinee is None for a in exam.items):
        return None
    rows = ctx.exams.grades(exam_id=exam.id, grader=grader)
    flagged = {(g["answer_id"], g["grader"]) for g in exam.out_of_range(rows)}
    scores: dict[str, list[float]] = {}
    for g in rows:
        if (g["answer_id"], g["grader"]) not in flagged:
            scores.setdefault(g["answer_id"], []).append(float(g["score"]))
    imported = 0
    # the file's grades are on the examinees' answers (``exam.items`` holds the answers without them), each
    # checked against the question's current maximum (an organizer may have lowered it)
    for a in (a for e in exam.examinees for a in e.answers.values()):
        q = exam.items.questions[a.question_id]
        file = [float(v) for who, v in a.human_scores.items()
                if (grader is None or who == grader) and q.human_scale == "points"
                and 0 <= float(v) <= q.max_points + 1e-9]
        if not file or (grader is not None and a.id in scores):
            continue
        imported += 1
        scores.setdefault(a.id, []).extend(file if grader is None else [sum(file) / len(file)])
    grades: dict[str, float | None] = {a: sum(s) / len(s) for a, s in scores.items()}
    totals = exam_totals(exam.items, exam.id, grades, [e.key for e in exam.examinees])
    return TotalsView(totals, {e.number: totals.examinees[e.key] for e in exam.examinees}, is_sciex(exam),
                      ("your grades" + (" (yours imported with the data included)" if imported else "")
                       if grader is not None else
                       "all graders (mean)" + (", the grades imported with the data included" if imported else "")),
                      len(flagged))
