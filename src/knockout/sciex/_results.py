"""Exam results as SciEx reports them: per exam points and percent, an examinee's grade, German grades,
the student average, breakdowns, and bootstrap confidence intervals.

Definitions (Dinh et al. 2024, section 4.1 and the authors' leaderboard, github TuAnh23/SciEx README):

* An exam's result is the points over the exam's questions divided by their maximum points (percent).
* An examinee's **grade is the mean of its per-exam percentages** ("average grade percentage across
  exams"), not its points pooled over all exams (which would weigh exams by their maximum points); the
  pooled figure is reported beside it for comparison.
* The German grade of an exam comes from that exam's grade boundaries (:mod:`knockout.sciex._german`;
  without them, the documented default mapping, flagged); an examinee's German grade is the mean of its
  per-exam German grades (so 2.4 in the paper's Table 3 is not a step of the scale).
* The student average: per exam, ``AverageStudentTotalPoints`` / ``MaximumTotalPoints`` of the exam info,
  else the questions' ``AverageStudentPoints`` over their maximum points; its German grade is the exam's
  ``MedianStudentGradeGermanScale`` when given (as the authors' UI collects it), else mapped from the
  percent.
* Breakdowns (paper Figures 1-3) are question-level: the mean share of the maximum points over the
  questions of a group (difficulty, language, text-only vs image-related), and the mean difference to the
  students' share on the questions that have a student average.  Table 8's subset (text-only questions of
  English exams) is exam-level, like the headline grade.

What counts: an examinee takes the exams it has at least one answer in; a question of such an exam it
did not answer scores 0 (``unanswered``); an answer without a grade from the source (``ungraded``) or
with an invalid judge grade (``invalid``) is left out of its exam, numerator and denominator, and
counted: knockout never turns an invalid reply into a grade (the authors' grading script adds nothing for
a failed parse, i.e. counts it as 0 points, and reports ``NrFailed``).

The 95% interval of an examinee's grade is a percentile bootstrap that resamples the graded questions
within each exam (so every exam stays in every resample) and recomputes the mean of the per-exam
percentages (numpy, seeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knockout.data._records import Answer, ItemSet, Question
from knockout.sciex._german import Boundaries, boundaries_for

NONE_EXAM = "(no exam)"
DIFFICULTY_ORDER = ("easy", "medium", "hard")
MODALITIES = ("text-only", "image-related")
GROUP_KEYS = ("difficulty", "language", "modality")


def exam_of(q: Question) -> str:
    return q.exam_id or NONE_EXAM


def modality(q: Question) -> str:
    return "image-related" if q.images else "text-only"


def group_of(q: Question, key: str) -> str:
    if key == "difficulty":
        return q.difficulty or "unknown"
    if key == "language":
        return q.language
    return modality(q)


def _order(key: str, names: set[str]) -> list[str]:
    fixed = DIFFICULTY_ORDER if key == "difficulty" else MODALITIES if key == "modality" else ()
    return [n for n in fixed if n in names] + sorted(names - set(fixed))


@dataclass
class Exam:
    """One exam of the item set: its questions, its info and its German-grade mapping."""

    exam_id: str
    questions: list[Question]
    info: dict[str, Any]
    boundaries: Boundaries

    @property
    def language(self) -> str:
        langs = sorted({q.language for q in self.questions})
        return langs[0] if len(langs) == 1 else "/".join(langs)

    @property
    def max_points(self) -> float:
        return float(sum(q.max_points for q in self.questions))

    def student_share(self) -> float | None:
        total, top = self.info.get("AverageStudentTotalPoints"), self.info.get("MaximumTotalPoints")
        if total is not None and top:
            return float(total) / float(top)
        qs = [q for q in self.questions if q.meta.get("average_student_points") is not None]
        if not qs:
            return None
        return float(sum(q.meta["average_student_points"] for q in qs)) / float(sum(q.max_points for q in qs))


def exams_of(items: ItemSet) -> dict[str, Exam]:
    """The exams of an item set (questions grouped by ``exam_id``), in file order."""
    grouped: dict[str, list[Question]] = {}
    for q in items.questions.values():
        grouped.setdefault(exam_of(q), []).append(q)
    out = {}
    for exam_id, qs in grouped.items():
        info = next((dict(q.meta["exam_info"]) for q in qs if isinstance(q.meta.get("exam_info"), dict)), {})
        out[exam_id] = Exam(exam_id, qs, info, boundaries_for(info, float(sum(q.max_points for q in qs))))
    return out


@dataclass
class Cell:
    """One question of an exam an examinee took: points (None: left out) and why."""

    question: Question
    points: float | None
    status: str  # graded | unanswered | ungraded | invalid


@dataclass
class ExamineeResult:
    """An examinee's results from one grade source (the experts, or one judge)."""

    examinee: str
    exams: list[dict[str, Any]]
    percent: float | None
    percent_ci: list[float] | None
    pooled_percent: float | None
    german: float | None
    german_default: bool
    breakdowns: dict[str, list[dict[str, Any]]]
    text_only_english: dict[str, Any] | None
    counts: dict[str, int]
    cells: list[Cell] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "cells"}


def _cells(exam: Exam, answers: Mapping[str, Answer], grades: Mapping[str, float | None]) -> list[Cell]:
    cells = []
    for q in exam.questions:
        a = answers.get(q.id)
        if a is None:
            cells.append(Cell(q, 0.0, "unanswered"))
        elif a.id not in grades:
            cells.append(Cell(q, None, "ungraded"))
        elif grades[a.id] is None:
            cells.append(Cell(q, None, "invalid"))
        else:
            cells.append(Cell(q, float(grades[a.id]), "graded"))  # type: ignore[arg-type]
    return cells


def _share(cells: list[Cell]) -> float | None:
    kept = [c for c in cells if c.points is not None]
    top = sum(c.question.max_points for c in kept)
    return float(sum(c.points for c in kept if c.points is not None)) / top if kept and top > 0 else None


def bootstrap_grade(per_exam: list[tuple[np.ndarray, np.ndarray]], *, resamples: int, seed: int,
                    alpha: float = 0.05) -> list[float] | None:
    """Percentile interval (in percent) of the mean of per-exam percentages, resampling each exam's
    questions with replacement; ``per_exam``: (points, maximum points) of each exam's graded questions."""
    if resamples <= 0 or not per_exam or sum(len(p) for p, _ in per_exam) < 2:
        return None
    rng = np.random.default_rng(seed)
    shares = np.zeros((resamples, len(per_exam)))
    for e, (pts, top) in enumerate(per_exam):
        idx = rng.integers(0, len(pts), size=(resamples, len(pts)))
        shares[:, e] = pts[idx].sum(axis=1) / top[idx].sum(axis=1)
    means = shares.mean(axis=1) * 100
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return [round(float(lo), 2), round(float(hi), 2)]


def _groups(cells: list[Cell], students: bool = False) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for key in GROUP_KEYS:
        by: dict[str, list[Cell]] = {}
        for c in cells:
            if c.points is not None:
                by.setdefault(group_of(c.question, key), []).append(c)
        rows = []
        for name in _order(key, set(by)):
            group = by[name]
            shares = [c.points / c.question.max_points for c in group if c.points is not None]
            diffs = [s - float(c.question.meta["average_student_points"]) / c.question.max_points
                     for s, c in zip(shares, group, strict=True)
                     if c.question.meta.get("average_student_points") is not None]
            row = {"group": name, "questions": len(group), "percent": round(100 * float(np.mean(shares)), 2)}
            if not students:
                row["diff_to_students"] = round(100 * float(np.mean(diffs)), 2) if diffs else None
                row["questions_with_students"] = len(diffs)
            rows.append(row)
        out[key] = rows
    return out


def _subset_result(exams: dict[str, Exam], cells_by_exam: dict[str, list[Cell]]) -> dict[str, Any] | None:
    """Table 8: text-only questions of English exams, exam level."""
    shares, germans, default = [], [], False
    for exam_id, cells in cells_by_exam.items():
        kept = [c for c in cells if c.question.language == "en" and not c.question.images]
        share = _share(kept)
        if share is None:
            continue
        b = exams[exam_id].boundaries
        shares.append(share)
        germans.append(b.grade(share))
        default = default or b.default
    if not shares:
        return None
    return {"percent": round(100 * float(np.mean(shares)), 2), "german": round(float(np.mean(germans)), 2),
            "german_default": default, "exams": len(shares)}


def examinee_result(items: ItemSet, grades: Mapping[str, float | None], examinee: str, *,
                    exams: dict[str, Exam] | None = None, resamples: int = 1000,
                    seed: int = 0) -> ExamineeResult | None:
    """The examinee's results from ``grades`` (answer id -> points, None for an invalid grade; answers
    missing from it are ungraded); None when no answer of the examinee is graded."""
    exams = exams if exams is not None else exams_of(items)
    answers: dict[str, dict[str, Answer]] = {}
    for a in items:
        if a.examinee == examinee:
            answers.setdefault(exam_of(items.question_of(a)), {})[a.question_id] = a
    cells_by_exam = {e: _cells(exams[e], answers[e], grades) for e in exams if e in answers}
    rows, per_exam, shares, germans = [], [], [], []
    default = False
    counts = {"graded": 0, "unanswered": 0, "ungraded": 0, "invalid": 0}
    points_total = max_total = 0.0
    for exam_id, cells in cells_by_exam.items():
        for c in cells:
            counts[c.status] += 1
        kept = [c for c in cells if c.points is not None]
        if not any(c.status == "graded" for c in cells):
            continue
        exam = exams[exam_id]
        share = _share(kept)
        assert share is not None
        pts = float(sum(c.points for c in kept if c.points is not None))
        top = float(sum(c.question.max_points for c in kept))
        german = exam.boundaries.grade(share)
        default = default or exam.boundaries.default
        rows.append({
            "exam": exam_id, "language": exam.language, "points": round(pts, 3), "max_points": round(top, 3),
            "exam_max_points": exam.max_points, "percent": round(100 * share, 2), "german": german,
            "german_default": exam.boundaries.default,
            **{k: sum(c.status == k for c in cells) for k in ("graded", "unanswered", "ungraded", "invalid")},
        })
        per_exam.append((np.array([c.points for c in kept], dtype=float),
                         np.array([c.question.max_points for c in kept], dtype=float)))
        shares.append(share)
        germans.append(german)
        points_total += pts
        max_total += top
    if not rows:
        return None
    all_cells = [c for cells in cells_by_exam.values() for c in cells]
    return ExamineeResult(
        examinee=examinee, exams=rows, percent=round(100 * float(np.mean(shares)), 2),
        percent_ci=bootstrap_grade(per_exam, resamples=resamples, seed=seed),
        pooled_percent=round(100 * points_total / max_total, 2) if max_total else None,
        german=round(float(np.mean(germans)), 2), german_default=default, breakdowns=_groups(all_cells),
        text_only_english=_subset_result(exams, cells_by_exam), counts=counts, cells=all_cells,
    )


def student_result(items: ItemSet, *, exams: dict[str, Exam] | None = None,
                   only: set[str] | None = None) -> ExamineeResult | None:
    """The student average row: the exams' student results (see the module docstring); ``only``: the
    exams to include (default all)."""
    exams = exams if exams is not None else exams_of(items)
    rows, shares, germans, default = [], [], [], False
    cells_by_exam: dict[str, list[Cell]] = {}
    for exam_id, exam in exams.items():
        if only is not None and exam_id not in only:
            continue
        share = exam.student_share()
        if share is None:
            continue
        median = exam.info.get("MedianStudentGradeGermanScale")
        german = float(median) if median is not None else exam.boundaries.grade(share)
        used_default = median is None and exam.boundaries.default
        default = default or used_default
        rows.append({"exam": exam_id, "language": exam.language, "percent": round(100 * share, 2), "german": german,
                     "german_default": used_default,
                     "german_from": "MedianStudentGradeGermanScale" if median is not None else "boundaries"})
        shares.append(share)
        germans.append(german)
        cells_by_exam[exam_id] = [Cell(q, float(q.meta["average_student_points"]), "graded") for q in exam.questions
                                  if q.meta.get("average_student_points") is not None]
    if not rows:
        return None
    all_cells = [c for cells in cells_by_exam.values() for c in cells]
    return ExamineeResult(
        examinee="student average", exams=rows, percent=round(100 * float(np.mean(shares)), 2), percent_ci=None,
        pooled_percent=None, german=round(float(np.mean(germans)), 2), german_default=default,
        breakdowns=_groups(all_cells, students=True), text_only_english=_subset_result(exams, cells_by_exam),
        counts={"graded": len(all_cells), "unanswered": 0, "ungraded": 0, "invalid": 0}, cells=all_cells,
    )


def expert_grades(items: ItemSet) -> dict[str, float | None]:
    """Answer id -> the mean of its human grades, for the answers that have any."""
    return {a.id: a.human_score for a in items if a.human_score is not None}


def default_boundaries_used(*results: ExamineeResult | None) -> bool:
    return any(r is not None and r.german_default for r in results)

