"""What people entered, for reports and for export: human grades and side-by-side verdicts."""

from __future__ import annotations

import json
import math
from typing import Any

from knockout.annotations._exams import EPS, ExamGrades
from knockout.annotations._pairs import PairAnnotations
from knockout.data._csv import dicts_text
from knockout.data._records import ItemSet
from knockout.errors import ConfigError
from knockout.storage._store import Store

#: Web graders appear in a report's human grades as ``web:<user>``, apart from the input file's graders.
WEB_PREFIX = "web:"
EXPORTS = ("grades", "history", "verdicts")


def human_grades(store: Store) -> dict[str, dict[str, float]]:
    """Grades entered in the web app: answer id -> {grader: score} (the latest grade of every grader)."""
    out: dict[str, dict[str, float]] = {}
    for answer_id, grader, score in store.annotations.grade_scores():
        out.setdefault(answer_id, {})[grader] = score
    return out


def with_human_grades(items: ItemSet, grades: dict[str, dict[str, float]], *, replace: bool = False) -> ItemSet:
    """``items`` with ``grades`` (answer id -> {grader: score}) added to each answer's ``human_scores`` (or
    replacing them)."""
    answers = [
        a if a.id not in grades else a.model_copy(update={
            "human_scores": dict(grades[a.id]) if replace else {**a.human_scores, **grades[a.id]}})
        for a in items
    ]
    return ItemSet(items.questions.values(), answers, source=items.source)


def add_web_grades(store: Store, items: ItemSet) -> tuple[ItemSet, dict[str, Any]]:
    """``items`` (a run's snapshot) with the grades entered in the web app on the same answers added, each
    web grader as ``web:<user>``, and where the human grades came from::

        {"file": [graders of the input file], "web": ["web:<user>", ...], "web_grades": n,
         "web_skipped": {reason: n}, "web_skipped_answers": {reason: [answer ids]}}

    Web grades are left out (and counted by reason) where they are not on the run's scale: the question's
    human grades are not points (``other scale``), an organizer changed the question's maximum in the app
    (``max points changed``: the grades are on another scale than the judge's), a grade is not a finite
    number (``not a number``: text, NaN or an infinity in a store written by hand), or a grade lies outside
    ``0..max_points`` (``out of range``)."""
    file_graders = sorted(items.graders())
    web = human_grades(store)
    changed_max = store.annotations.changed_max_points()
    keep: dict[str, dict[str, float]] = {}
    skipped: dict[str, int] = {}
    skipped_answers: dict[str, list[str]] = {}
    graded = sorted(i for aid in web if (i := items.find(aid)) is not None)  # the set's answers with web grades
    for i in graded:
        q, aid = items.question_at(i), items.answer_id_at(i)
        for grader, score in web[aid].items():
            why = ("other scale" if q.human_scale != "points" else
                   "max points changed" if abs(changed_max.get(q.id, q.max_points) - q.max_points) > EPS else
                   "not a number" if not math.isfinite(score) else
                   "out of range" if not 0 <= score <= q.max_points + EPS else None)
            if why:
                skipped[why] = skipped.get(why, 0) + 1
                skipped_answers.setdefault(why, []).append(aid)
            else:
                keep.setdefault(aid, {})[WEB_PREFIX + grader] = score
    sources = {
        "file": file_graders,
        "web": sorted({g for v in keep.values() for g in v}),
        "web_grades": sum(len(v) for v in keep.values()),
        "web_skipped": skipped,
        "web_skipped_answers": skipped_answers,
    }
    return (with_human_grades(items, keep) if keep else items), sources


def export_rows(store: Store, what: str) -> list[dict[str, Any]]:
    """``grades`` (current; with the question's current ``max_points`` and ``out_of_range``), ``history``
    (every accepted save) or ``verdicts``, as flat rows."""
    if what == "grades":
        exams = ExamGrades(store)
        grades = exams.grades()
        maxima: dict[tuple[str, str], float] = {}
        for exam_id in sorted({g["exam_id"] for g in grades}):
            exam = exams.exam(exam_id)
            for q in exam.questions if exam else []:
                maxima[(exam_id, q.id)] = q.max_points
        for g in grades:
            top = maxima.get((g["exam_id"], g["question_id"]))
            g["max_points"] = top
            g["out_of_range"] = top is not None and g["score"] > top + EPS
        return grades
    if what == "history":
        return ExamGrades(store).history()
    if what == "verdicts":
        return PairAnnotations(store).verdicts()
    raise ConfigError(f"unknown export '{what}' ({', '.join(EXPORTS)})")


def format_rows(rows: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if fmt != "csv":
        raise ConfigError(f"unknown export format '{fmt}' (csv or jsonl)")
    return dicts_text(rows)  # the one CSV writer: a grader's text read as a formula is neutralised
