"""Exams to grade, the question information organizers set, and the human grades people enter.

Tables (schema in :mod:`knockout.storage._migrations`; read and written through :attr:`Store.annotations`)
------
``web_exams``      exam id -> fingerprint of the item-set snapshot (``itemsets``) that holds it.
``web_images``     the question figures copied at import (:mod:`knockout.annotations._files`).
``question_info``  max points, student average, gold answer and difficulty set on the question-info page
                   (by an organizer), overriding the snapshot.
``human_grades``   one row per (answer, grader): score, comment, version, time.  Grades of different
                   graders never overwrite each other.  ``version`` starts at 1 and grows by one per
                   save; a save names the version it was based on and is refused (:class:`StaleWrite`)
                   when that is no longer the current one (the same grader in two tabs).
``grade_history``  every accepted save (answer, grader, score, comment, version, time): nothing is lost.

A grade above the question's current maximum (the maximum was lowered after it was given) is *out of
range*: it is flagged on the grading pages and counted, and no save can store such a grade again.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knockout._bounds import MAX_NAME, ExamName, check_name, max_points_ok
from knockout.annotations._common import check_version
from knockout.annotations._files import ImageFiles, ImportedImages
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import InputError
from knockout.storage._store import Store

DIFFICULTIES = ("easy", "medium", "hard")
#: Tolerance when comparing a grade with the maximum.
EPS = 1e-9


@dataclass(frozen=True)
class Examinee:
    """An examinee of an exam under its anonymous number (1..n)."""

    number: int
    key: str  # the examinee name (or answer id) — never shown to graders
    answers: dict[str, Answer]  # question id -> answer


@dataclass(frozen=True)
class Exam:
    id: str
    fingerprint: str  # the item-set snapshot it comes from
    questions: list[Question]  # with the question-info overrides applied
    examinees: list[Examinee]
    #: every question of the exam (with the overrides and ``exam_id`` set, also those nobody answered)
    #: and the exam's answers without the file's grades: what the exam totals are computed from
    items: ItemSet | None = None

    def question(self, question_id: str) -> Question | None:
        return next((q for q in self.questions if q.id == question_id), None)

    def out_of_range(self, grades: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The grades (rows of :meth:`ExamGrades.grades`) above their question's current maximum."""
        maxima = {q.id: q.max_points for q in self.questions}
        return [g for g in grades if g["question_id"] in maxima and g["score"] > maxima[g["question_id"]] + EPS]


@dataclass(frozen=True)
class ImportedExams:
    exams: list[str]
    images: ImportedImages


def check_half_points(score: float, max_points: float) -> float:
    """A grade within 0..max_points in steps of half a point."""
    if not math.isfinite(score) or score < 0 or score > max_points + EPS:
        raise InputError(f"grade {score:g} is outside 0..{max_points:g}", field="score")
    if abs(score * 2 - round(score * 2)) > EPS:
        raise InputError(f"grade {score:g} is not a multiple of 0.5", field="score")
    return round(score * 2) / 2


class ExamGrades:
    """Exams, question information and human grades of a store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.tables = store.annotations

    # -- exams -------------------------------------------------------------------------
    def import_items(self, items: ItemSet, default_exam: str | None = None, *,
                     root: Path | None = None) -> ImportedExams:
        """Snapshot ``items`` (``Store.save_items``), make their exams gradable and copy their figures.

        Questions without ``exam_id`` form the exam ``default_exam`` (default: the file's stem).  Figures
        are copied only from inside ``root`` (the data folder; default: the folder of ``items.source``
        when that exists)."""
        if default_exam is not None:
            check_name(default_exam, "exam", ExamName)
        fp = self.store.save_items(items)
        fallback_name = default_exam or Path(items.source).stem[:MAX_NAME] or "exam"
        exams = {q.exam_id for q in items.questions.values() if q.exam_id}
        has_fallback = any(q.exam_id is None for q in items.questions.values())
        now = time.time()
        for e in sorted(exams):
            self.tables.put_exam(e, fp, fallback=False, updated=now)
        if has_fallback:
            self.tables.put_exam(fallback_name, fp, fallback=True, updated=now)
            exams.add(fallback_name)
        if root is None and Path(items.source).exists():
            source = Path(items.source)
            root = source if source.is_dir() else source.parent
        images = ImageFiles(self.store).record(fp, list(items.questions.values()), root)
        return ImportedExams(sorted(exams), images)

    def exam_ids(self) -> list[str]:
        return self.tables.exam_ids()

    def exam(self, exam_id: str) -> Exam | None:
        row = self.tables.exam_source(exam_id)
        if row is None:
            return None
        items = self.store.load_items(row[0])
        if items is None:
            return None
        questions = [
            self._with_info(q) for q in items.questions.values()
            if q.exam_id == exam_id or (row[1] and q.exam_id is None)
        ]
        qids = {q.id for q in questions}
        by_examinee: dict[str, dict[str, Answer]] = {}
        for a in items:
            if a.question_id in qids:
                by_examinee.setdefault(a.examinee or a.id, {})[a.question_id] = a
        salt = self.tables.setting("anonymise_salt")

        def order(key: str) -> str:
            return hashlib.sha256(f"{salt}\0{exam_id}\0{key}".encode()).hexdigest()

        keys = sorted(by_examinee, key=order)
        examinees = [Examinee(i, k, by_examinee[k]) for i, k in enumerate(keys, 1)]
        own = ItemSet([q.model_copy(update={"exam_id": exam_id}) for q in questions],
                      [a.model_copy(update={"human_scores": {}}) for a in items if a.question_id in qids],
                      source=items.source)  # the file's grades may lie above a lowered maximum
        return Exam(exam_id, row[0], [q for q in questions if any(q.id in e.answers for e in examinees)],
                    examinees, own)

    def _with_info(self, q: Question) -> Question:
        row = self.tables.question_info(q.id)
        if row is None:
            return q
        meta = dict(q.meta)
        if row[1] is not None:
            meta["average_student_points"] = row[1]
        return q.model_copy(update={
            "max_points": row[0] if row[0] is not None else q.max_points,
            "reference": row[2] if row[2] is not None else q.reference,
            "difficulty": row[3] if row[3] is not None else q.difficulty,
            "meta": meta,
        })

    def set_question_info(
        self,
        question: Question,
        *,
        user: str,
        max_points: float,
        student_average: float | None,
        reference: str | None,
        difficulty: str | None,
    ) -> int:
        """Store the question's information (decided by an organizer; the caller checks the role).

        Returns how many grades of the question are now above the new maximum (out of range)."""
        try:
            max_points_ok(max_points)
        except ValueError as exc:
            raise InputError(str(exc), field="max_points") from None
        if student_average is not None and (not math.isfinite(student_average) or not
                                            0 <= student_average <= max_points):
            raise InputError(f"must be within 0..{max_points:g}", field="student_average")
        if difficulty is not None and difficulty not in DIFFICULTIES:
            raise InputError(f"must be one of {', '.join(DIFFICULTIES)}", field="difficulty")
        self.tables.put_question_info(question.id, max_points=max_points, student_average=student_average,
                                      reference=reference or None, difficulty=difficulty or None,
                                      updated=time.time(), updated_by=user)
        return self.tables.grades_above(question.id, max_points + EPS)

    # -- grades ------------------------------------------------------------------------
    def grade(self, answer_id: str, grader: str) -> dict[str, Any] | None:
        return self.tables.grade(answer_id, grader)

    def save_grade(
        self,
        *,
        answer: Answer,
        question: Question,
        exam_id: str,
        grader: str,
        score: float,
        comment: str,
        base_version: int,
    ) -> int:
        """Store ``grader``'s grade of ``answer``; returns the new version.

        ``question`` carries the current maximum (with the question info applied): a grade above it is
        refused.  ``base_version`` is the version the grader saw (0: none yet).  When another save came
        in between (the same grader in another tab) this raises :class:`StaleWrite` carrying the newer
        row, and nothing is written.  Other graders' rows are never touched."""
        score = check_half_points(score, question.max_points)
        return self.tables.save_grade(answer_id=answer.id, grader=grader, question_id=question.id, exam_id=exam_id,
                                      score=score, comment=comment, base_version=check_version(base_version),
                                      now=time.time())

    def grades(self, *, exam_id: str | None = None, grader: str | None = None) -> list[dict[str, Any]]:
        return self.tables.grades(exam_id=exam_id, grader=grader)

    def history(self) -> list[dict[str, Any]]:
        """Every accepted save, oldest first."""
        return self.tables.grade_history()
