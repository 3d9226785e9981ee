"""What people enter: exams to grade and their human grades, side-by-side pair sets and their verdicts.

Stored in the same SQLite file as the judges' store (tables from :mod:`knockout.storage._migrations`).
Accounts, sessions and the pages that fill these tables are the web app's (:mod:`knockout.web`).

* :class:`ExamGrades`: import an item set as gradable exams (figures copied into ``<store>.files``),
  question information, per-grader versioned grades (:class:`StaleWrite` on a stale save), history.
* :class:`PairAnnotations`: pair sets, the allocation of pairs to annotators, each annotator's queue,
  versioned verdicts and their agreement (Cohen's and Fleiss' kappa from :mod:`knockout.metrics`).
* :class:`Assignments`: which user grades which exam or annotates which pair set.
* :func:`human_grades`, :func:`with_human_grades`, :func:`add_web_grades` (for ``knockout report``),
  :func:`export_rows` and :func:`format_rows` (``knockout annotations export``).
"""

from __future__ import annotations

from knockout.annotations._assignments import Assignments, Kind
from knockout.annotations._common import MAX_VERSION, StaleWrite
from knockout.annotations._exams import (
    DIFFICULTIES,
    Exam,
    ExamGrades,
    Examinee,
    ImportedExams,
    check_half_points,
)
from knockout.annotations._export import (
    EXPORTS,
    WEB_PREFIX,
    add_web_grades,
    export_rows,
    format_rows,
    human_grades,
    with_human_grades,
)
from knockout.annotations._files import ImageFiles, ImportedImages, files_dir
from knockout.annotations._pairs import (
    CHOICE_LABELS,
    DEFAULT_OVERLAP,
    MAX_OVERLAP,
    SHOWN,
    VERDICT_LABELS,
    VERDICTS,
    PairAnnotations,
    PairView,
    check_overlap,
    check_pairs,
    verdict_from_shown,
)

__all__ = [
    "CHOICE_LABELS",
    "DEFAULT_OVERLAP",
    "DIFFICULTIES",
    "EXPORTS",
    "MAX_OVERLAP",
    "MAX_VERSION",
    "SHOWN",
    "VERDICTS",
    "VERDICT_LABELS",
    "WEB_PREFIX",
    "Assignments",
    "Exam",
    "ExamGrades",
    "Examinee",
    "ImageFiles",
    "ImportedExams",
    "ImportedImages",
    "Kind",
    "PairAnnotations",
    "PairView",
    "StaleWrite",
    "add_web_grades",
    "check_half_points",
    "check_overlap",
    "check_pairs",
    "export_rows",
    "files_dir",
    "format_rows",
    "human_grades",
    "verdict_from_shown",
    "with_human_grades",
]
