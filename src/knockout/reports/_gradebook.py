"""The gradebook of a grading run: one row per student (examinee), one final grade per question, the total.

Each answer's final grade is, in this order:

* ``expert``: the expert grade (the mean of the data file's human grades and the web app's, as
  :func:`knockout.reports.load_run` reads them), when there is one;
* ``calibrated``: the judge's grade mapped to the expert grades (:mod:`knockout.calibration._run`, the map
  ``knockout calibrate`` chooses), with its stated error (the standard deviation over refits), when the
  calibration chose a map (not when there are too few expert grades, or when no map beat the judge's own
  grades);
* ``judge``: the judge's grade;
* ``none``: no grade (the judge's reply was invalid, or the run has no result for the answer);

and, where there is no expert grade, the trust marks (:mod:`knockout.calibration._trust`) replace the source:

* ``flagged``: the persuasion defence flagged the answer: the grade is the defended one (calibrated when a map
  was chosen), the column ``would have had`` the grade before the defence (``details["guard"]["grade_full"]``);
* ``needs expert``: the judge cannot grade the answer's question reliably (its reliability below the
  threshold): the grade is the calibrated or the judge's, to be replaced by an expert's.

Layouts (``fmt``): ``csv`` (student, then per question the grade, its source and error, then the total and
the maximum), ``moodle`` (Moodle's CSV grade import: an identifier column, then one column per grade item)
and ``canvas`` (Canvas's gradebook CSV: Student, ID, SIS User ID, SIS Login ID, Section, then one column per
assignment, and a "Points Possible" row).  See docs/teacher.md.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any, TextIO

from knockout.data._records import Question
from knockout.errors import ConfigError
from knockout.storage._store import RunRecord

FORMATS = ("csv", "moodle", "canvas")
SOURCES = ("expert", "calibrated", "judge", "none", "needs expert", "flagged")
#: Moodle's identifier column for an ``--id-column`` of that name (else "ID number")
MOODLE_ID = {"email": "Email address", "useremail": "Email address", "username": "Username",
             "idnumber": "ID number", "useridnumber": "ID number"}


@dataclass
class Grade:
    grade: float | None
    source: str  # one of SOURCES
    error: float | None = None  # a calibrated grade's standard deviation
    #: a flagged answer's grade before the persuasion defence ("would have had")
    full: float | None = None


@dataclass
class Student:
    id: str
    grades: dict[str, Grade] = field(default_factory=dict)  # question id -> grade

    @property
    def total(self) -> float:
        return round(sum(g.grade for g in self.grades.values() if g.grade is not None), 2)


@dataclass
class Gradebook:
    run: RunRecord
    questions: list[Question]
    students: list[Student]
    #: the calibration used: map, expert grades, label; or ``{"refused": why}``; None for a run without
    #: expert grades on the points scale
    calibration: dict[str, Any] | None
    id_column: str
    #: the trust marks' counts and words (:meth:`knockout.calibration._trust.Trust.counts`)
    trust: dict[str, Any] = field(default_factory=dict)

    @property
    def max_total(self) -> float:
        return sum(q.max_points for q in self.questions)

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(SOURCES, 0)
        for s in self.students:
            for g in s.grades.values():
                out[g.source] += 1
        return out

    def summary(self) -> dict[str, Any]:
        return {"run_id": self.run.id, "status": self.run.status, "judge": self.run.judge,
                "simulated_judge": self.run.simulated, "students": len(self.students),
                "questions": [q.id for q in self.questions], "sources": self.counts(),
                "calibration": self.calibration, "id_column": self.id_column, "trust": self.trust}


def _student_id(answer: Any, id_column: str) -> str:
    if id_column == "examinee":
        return str(answer.examinee or answer.id)
    value = answer.meta.get(id_column)
    if value is None or str(value).strip() == "":
        raise ConfigError(f"answer {answer.id} has no '{id_column}' (--id-column reads the examinee, or a field "
                          "of each answer's meta, e.g. \"meta\": {\"email\": ...})")
    return str(value).strip()


def build(loaded: Any, *, id_column: str = "examinee", seed: int = 0) -> Gradebook:
    """The gradebook of a loaded grading run (:func:`knockout.reports.load_run`: its human grades are the
    file's and the web app's)."""
    from knockout.calibration._run import section_or_refusal
    from knockout.calibration._trust import trust_of_loaded

    items = loaded.items
    trust = trust_of_loaded(loaded)
    results = {str(r["item_id"]): r for r in loaded.results}
    expert_any = any(a.human_score is not None for a in items)
    section = section_or_refusal(loaded, seed=seed, resamples=0) if expert_any else None
    calibrated = section is not None and "refused" not in section and section["map"] != "raw"
    calibration = None if section is None else (
        {"refused": section["refused"]} if "refused" in section else
        {"map": section["map"], "expert_grades": section["expert_grades"], "label": section["label"],
         "used": calibrated})
    questions = list(items.questions.values())
    by_examinee: dict[str, Student] = {}
    owner: dict[str, str] = {}  # student id -> the examinee it stands for
    for a in items:
        q = items.question_of(a)
        sid = _student_id(a, id_column)
        key = str(a.examinee or a.id)
        if owner.setdefault(sid, key) != key:
            raise ConfigError(f"examinees {owner[sid]} and {key} have the same {id_column} {sid!r}")
        student = by_examinee.setdefault(sid, Student(sid))
        r = results.get(a.id)
        if a.human_score is not None:
            g = Grade(round(a.human_score, 2), "expert")
        elif r is not None and r["valid"] and r["score"] is not None:
            if calibrated:
                assert section is not None
                cal = float(section["grades"].get(a.id, r["score"]))
                g = Grade(round(min(max(cal, 0.0), q.max_points), 2), "calibrated",
                          round(float(section["sd"].get(a.id, 0.0)), 2))
            else:
                g = Grade(round(float(r["score"]), 2), "judge")
            marks = trust.marks(a.id)
            if marks:  # flagged, then needs expert: the grade stays, its source says what to do
                full = trust.grade_full(a.id)
                g = Grade(g.grade, marks[0], g.error, None if full is None else round(full, 2))
        else:
            g = Grade(None, "none")
        student.grades[q.id] = g
    students = sorted(by_examinee.values(), key=lambda s: s.id)
    return Gradebook(loaded.run, questions, students, calibration, id_column,
                     {**trust.counts(), "words": trust.summary_words(),
                      "questions": {r.question_id: r.words() for r in trust.unreliable()}})


def gradebook(store: Any, run_id: str | None = None, *, id_column: str = "examinee", partial: bool = False,
              seed: int = 0) -> Gradebook:
    """The gradebook of the grading run ``run_id`` of ``store`` (a path or an open Store; default: its latest
    grading run).  A run that is not complete is refused, with the command that resumes it, unless
    ``partial``."""
    from knockout.reports._runs import pick_run, read_run, reading, refuse_partial

    with reading(store) as st:
        record = refuse_partial(st, pick_run(st, run_id, "grades"), partial, "use")
        # details: the judge's own spread (a question's reliability) and the persuasion defence's flags
        loaded = read_run(st, record, details=True, web_grades=True)
    return build(loaded, id_column=id_column, seed=seed)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


def item_name(q: Question) -> str:
    """A question's grade-item name in an LMS: its id (exam and number), as the data names it."""
    return q.id


def write(book: Gradebook, fmt: str, out: TextIO) -> None:
    """``book`` in the layout ``fmt`` (:data:`FORMATS`) to ``out``."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown gradebook format '{fmt}' ({', '.join(FORMATS)})")
    w = csv.writer(out, lineterminator="\n")
    qs = book.questions
    if fmt == "csv":
        head = ["student"]
        for q in qs:
            head += [item_name(q), f"{item_name(q)} source", f"{item_name(q)} error",
                     f"{item_name(q)} would have had"]
        w.writerow([*head, "total", "max_total", "calibration"])
        label = (book.calibration or {}).get("label", "") if (book.calibration or {}).get("used") else ""
        for s in book.students:
            row: list[str] = [s.id]
            for q in qs:
                g = s.grades.get(q.id, Grade(None, "none"))
                row += [_num(g.grade), g.source, _num(g.error), _num(g.full)]
            w.writerow([*row, _num(s.total), _num(book.max_total), label])
        return
    if fmt == "moodle":
        w.writerow([MOODLE_ID.get(book.id_column.lower(), "ID number"), *(item_name(q) for q in qs)])
        for s in book.students:
            w.writerow([s.id, *(_num(s.grades.get(q.id, Grade(None, "none")).grade) for q in qs)])
        return
    # canvas: the identifier goes in "SIS User ID" (or "SIS Login ID" for a login / email); Canvas matches a
    # row by any of Student, ID, SIS User ID, SIS Login ID
    login = book.id_column.lower() in ("email", "login", "username", "sis_login_id")
    w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *(item_name(q) for q in qs)])
    w.writerow(["Points Possible", "", "", "", "", *(_num(q.max_points) for q in qs)])
    for s in book.students:
        w.writerow([s.id, "", "" if login else s.id, s.id if login else "", "",
                    *(_num(s.grades.get(q.id, Grade(None, "none")).grade) for q in qs)])


def text(book: Gradebook, fmt: str) -> str:
    buf = io.StringIO()
    write(book, fmt, buf)
    return buf.getvalue()
