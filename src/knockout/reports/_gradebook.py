"""The gradebook of a grading run: one row per student (examinee), one final grade per question, the total.

Each answer's final grade is, in this order:

* ``expert``: the expert grade (the mean of the data file's human grades and the web app's, as
  :func:`knockout.reports.load_run` reads them), when there is one;
* ``calibrated``: the model's grade adapted to the teacher's level (:mod:`knockout.calibration._run`, as
  ``knockout calibrate`` adapts it: the teacher's grades moved it, and its label says on how many), with its
  stated error (the standard deviation over refits), when there are teacher grades to adapt to;
* ``judge``: the judge's grade;
* ``grade model``: the grade model's grade from the answer's readings (:mod:`knockout.grading`: the judge's, the
  meaning reader's, the lexical ones and the guard's; the model's name and digest are in the run's details);
* ``none``: no grade (the judge's reply was invalid, or the run has no result for the answer);

and, where there is no expert grade, the trust marks (:mod:`knockout.calibration._trust`) replace the source:

* ``flagged``: the persuasion defence flagged the answer: the grade is the defended one (adapted when there
  are teacher grades), the column ``would have had`` the grade before the defence (``details["guard"]["grade_full"]``);
* ``readers disagree``: the judge and the meaning reader disagreed beyond their measured spread: the grade leans
  to the lower reading; check it;
* ``needs expert``: the judge cannot grade the answer's question reliably (its reliability below the
  threshold): the grade is the calibrated or the judge's, to be replaced by an expert's.

Layouts (``fmt``): ``csv`` (student, then per question the grade, its source and error, then the total and
the maximum), ``moodle`` (Moodle's CSV grade import: an identifier column, then one column per grade item)
and ``canvas`` (Canvas's gradebook CSV: Student, ID, SIS User ID, SIS Login ID, Section, then one column per
assignment, and a "Points Possible" row).  See docs/teacher.md.
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TextIO

from knockout.data._csv import FORMULA_LEAD, Number, blank, write_rows
from knockout.data._csv import formula_lead as formula_lead  # re-exported: the gradebook's tests and callers
from knockout.data._csv import neutralise as neutralise
from knockout.data._records import Question
from knockout.errors import ConfigError, InputError
from knockout.storage._store import RunRecord

FORMATS = ("csv", "moodle", "canvas")
SOURCES = ("expert", "calibrated", "judge", "none", "needs expert", "flagged", "grade model", "readers disagree")
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
    examinee: str = ""  # the examinee the id stands for (the data's examinee, else the answer id)

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
    #: the web app's grades left out, by reason (``not a number``, ``out of range``, ...): answer ids
    web_left_out: dict[str, list[str]] = field(default_factory=dict)
    #: where the answers came from (the run's data file), for error messages
    source: str | None = None
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

    def ungraded(self) -> list[str]:
        """The answers without a grade (source ``none``), as ``student question``."""
        return [f"{s.id} {q}" for s in self.students for q, g in s.grades.items() if g.grade is None]

    def left_out(self) -> dict[str, list[str]]:
        """Every grade that is not in the gradebook, by reason: the web app's grades that are not usable (text,
        an infinity, out of range, another scale) and the answers without a grade."""
        out = {f"web grade {why}": list(ids) for why, ids in self.web_left_out.items() if ids}
        if none := self.ungraded():
            out["no grade"] = none
        return out

    def summary(self) -> dict[str, Any]:
        return {"run_id": self.run.id, "status": self.run.status, "judge": self.run.judge,
                "simulated_judge": self.run.simulated, "students": len(self.students),
                "questions": [q.id for q in self.questions], "sources": self.counts(),
                "calibration": self.calibration, "id_column": self.id_column, "left_out": self.left_out(),
                "trust": self.trust}


def _student_id(answer: Any, id_column: str, source: str | None = None) -> str:
    if id_column == "examinee":
        return str(answer.examinee or answer.id)
    value = answer.meta.get(id_column)
    if value is None or str(value).strip() == "":
        raise ConfigError(f"answer {answer.id} has no '{id_column}' (--id-column reads the examinee, or a field "
                          "of each answer's meta, e.g. \"meta\": {\"email\": ...})")
    if isinstance(value, bool) or not isinstance(value, str | int):
        # a list, an object, a number with a fraction: its Python spelling is no id an LMS knows
        raise InputError(f"--id-column {id_column}: the id must be a text or a whole number, got "
                         f"{type(value).__name__}", file=source, record=answer.id, field=f"meta.{id_column}")
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
    calibrated = section is not None and "refused" not in section
    calibration = None if section is None else (
        {"refused": section["refused"]} if "refused" in section else
        {"map": section["map"], "expert_grades": section["expert_grades"], "label": section["label"],
         "used": calibrated})
    questions = list(items.questions.values())
    by_examinee: dict[str, Student] = {}
    owner: dict[str, str] = {}  # student id -> the examinee it stands for
    for a in items:
        q = items.question_of(a)
        sid = _student_id(a, id_column, items.source)
        key = str(a.examinee or a.id)
        if owner.setdefault(sid, key) != key:
            raise ConfigError(f"examinees {owner[sid]} and {key} have the same {id_column} {sid!r}")
        student = by_examinee.setdefault(sid, Student(sid, examinee=key))
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
                g = Grade(round(float(r["score"]), 2), "grade model" if a.id in trust.readings else "judge")
            marks = trust.marks(a.id)
            if marks:  # flagged, then needs expert: the grade stays, its source says what to do
                full = trust.grade_full(a.id)
                g = Grade(g.grade, marks[0], g.error, None if full is None else round(full, 2))
        else:
            g = Grade(None, "none")
        student.grades[q.id] = g
    students = sorted(by_examinee.values(), key=lambda s: s.id)
    web_left_out = {why: list(ids) for why, ids in (loaded.human_grades or {}).get("web_skipped_answers", {}).items()}
    return Gradebook(loaded.run, questions, students, calibration, id_column, web_left_out, items.source,
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
    return "" if x is None else Number(x)


def item_name(q: Question) -> str:
    """A question's grade-item name in an LMS: its id (exam and number), as the data names it."""
    return q.id


# -- writing: what the LMS importers and spreadsheets read ------------------------------------------------------
#
# * Cells: every cell that holds a CR, a LF, a quote or the separator is quoted (RFC 4180).  Moodle's CSV reader
#   (lib/csvlib.class.php, ``csv_import_reader::load_csv_content``) turns every ``\r\n`` and lone ``\r`` into
#   ``\n`` before it parses, and its grade import (grade/import/csv/classes/load_data.php) trims every value: a
#   bare CR left unquoted in an id starts a new row there, so ``zz\rs_victim`` would add a row for ``s_victim``.
#   Python's csv writer quotes only the characters of its line terminator, so the one CSV writer
#   (:mod:`knockout.data._csv`) quotes as for ``\r\n`` (every CR and LF quoted); the rows end with ``\n``.
# * Formulas (OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection, and ASVS 1.2.10):
#   a spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a CR (ASVS adds NUL) as a
#   formula.  The one CSV writer prefixes such a text cell with a single quote (OWASP's advice: the spreadsheet
#   then shows it as text; :func:`~knockout.data._csv.neutralise`); the LMS layouts refuse a formula id or
#   question name first, since a changed id would no longer match the LMS's.
# * Moodle's grade import (load_data.php): the user column is read only when ``!empty($value)`` after the trim,
#   so an id ``0`` or an empty one is skipped and that row's grades go to the student of the row before (the
#   user id is not reset between rows); an empty cell or ``-`` in an existing grade item sets "no grade",
#   clearing the grade already there; a grade above 100 (``gradepointmax``) stops the import.
# * Canvas's gradebook importer (app/models/gradebook_importer.rb): a row whose first cell matches
#   ``/Points Possible/`` is read as the points row; an assignment column ``Name (12345)`` is the existing
#   assignment 12345 (``Assignment.title_and_id``); trailing columns matching ``Current Score``, ``Final Grade``
#   and the like are dropped as read-only totals; students are matched by ID, SIS User ID, SIS Login ID, then name.
# * Both match users through their database's collation, not byte for byte.  Moodle recommends MySQL's
#   ``utf8mb4_unicode_ci`` (the Unicode Collation Algorithm): case, Unicode compatibility forms (NFC and NFD
#   ``zoé``, fullwidth ``ａlice``, ``Ⅸ``, mathematical ``𝐛𝐨𝐛``, circled ``ⓐ``, NBSP for a space), accents (``jose`` and
#   ``josé``) and invisible format characters (ZWSP, BOM) are all ignored; Canvas (PostgreSQL, ``LOWER``) and
#   either importer's trimming fold less, but refusing what one of them would merge costs nothing.  Two ids
#   equal after :func:`lms_key` would be one user there, and are refused, naming both; so are two questions.
# * A formula look-alike (:func:`~knockout.data._csv.formula_lead`): leading blanks and the fullwidth and small
#   forms of ``= + - @``.

#: what PHP's trim() removes, as Moodle's importer trims every value
_PHP_TRIM = " \t\n\r\0\x0b"
_CANVAS_ID_COLUMN = re.compile(r"\(\d+\)\s*$")
_CANVAS_TOTALS = re.compile(r"Current Score|Current Points|Final Score|Final Points|Final Grade", re.IGNORECASE)
_CANVAS_POINTS = re.compile(r"points\s+possible", re.IGNORECASE)
#: the layouts whose LMS folds accents (Moodle on MySQL's utf8mb4_unicode_ci)
_FOLDS_ACCENTS = frozenset({"moodle"})


def lms_key(value: str, *, fold_accents: bool = False) -> str:
    """An id as an LMS matches it (its database's collation, see above): format and control characters left
    out, NFKC (compatibility forms: fullwidth, circled, mathematical letters, NBSP), case folded, every Unicode
    space and invisible character trimmed; with ``fold_accents`` (Moodle) the accents left out too (combining
    marks after NFD)."""
    s = "".join(ch for ch in value if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf"))
    s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", s).casefold())
    if fold_accents:
        s = unicodedata.normalize("NFC", "".join(ch for ch in unicodedata.normalize("NFD", s)
                                                 if unicodedata.category(ch) not in ("Mn", "Me")))
    return _trim(s)


def _trim(s: str) -> str:
    """``s`` without blank characters (:func:`~knockout.data._csv.blank`) at either end."""
    start, end = 0, len(s)
    while start < end and blank(s[start]):
        start += 1
    while end > start and blank(s[end - 1]):
        end -= 1
    return s[start:end]


#: the collations each LMS layout compares ids and grade-item names by (name -> how it folds): two ids equal under
#: any of them are one user there.  Moodle recommends MySQL (utf8mb4_unicode_ci; utf8mb4_0900_ai_ci is MySQL 8's
#: default); Canvas (PostgreSQL) compares SIS login ids through LOWER() and trims; knockout's own fold (NFKC, case,
#: invisible characters, and for Moodle accents) is kept under both as the stricter floor.
COLLATIONS: dict[str, tuple[str, ...]] = {
    "moodle": ("knockout", "utf8mb4_unicode_ci", "utf8mb4_0900_ai_ci"),
    "canvas": ("knockout",),
}
_COLLATION_WORDS = {
    "utf8mb4_unicode_ci": "MySQL's utf8mb4_unicode_ci, the UCA at primary strength: case, accents, strokes (ø, ł), "
                          "ligatures (æ = ae) and invisible characters ignored, every character beyond U+FFFF "
                          "(an emoji) weighing as one",
    "utf8mb4_0900_ai_ci": "MySQL 8's utf8mb4_0900_ai_ci, the UCA 9.0.0 at primary strength: case, accents, strokes "
                          "(ø, ł), ligatures (æ = ae) and invisible characters ignored",
}


@cache
def _collator(version: str) -> Any:
    """pyuca's collator of the DUCET of that UCA version (``5.2.0`` or ``9.0.0``), loaded once (about a second)."""
    from pyuca.collator import Collator_5_2_0, Collator_9_0_0

    return {"5.2.0": Collator_5_2_0, "9.0.0": Collator_9_0_0}[version]()


def _primary(version: str, text: str) -> tuple[int, ...]:
    """The UCA sort key of ``text`` at primary strength (non-ignorable variable weighting, as MySQL's)."""
    key = _collator(version).sort_key(text)
    return tuple(key[:key.index(0)] if 0 in key else key)


def collation_key(value: str, collation: str, *, fold_accents: bool = False) -> Any:
    """``value`` as the collation ``collation`` (:data:`COLLATIONS`) compares it, after the importer's trim: equal
    keys are one user (or one grade item) to the LMS.

    * ``utf8mb4_unicode_ci`` (MySQL, UCA 4.0.0): the UCA at primary strength over the DUCET of UCA 5.2.0, the
      oldest table a UCA library ships (pyuca; 4.0.0's is not published in a package: the two differ by the
      characters added in between, which 4.0.0 weighs by code point), with MySQL's quirk for characters beyond
      the BMP: all of them weigh as U+FFFD (``kim🍣`` = ``kim🍺``).
    * ``utf8mb4_0900_ai_ci`` (MySQL 8, UCA 9.0.0): the UCA at primary strength over the DUCET of 9.0.0.
    * ``knockout``: :func:`lms_key` (NFKC, case folded, invisible characters out, trimmed; accents with
      ``fold_accents``)."""
    if collation == "knockout":
        return lms_key(value, fold_accents=fold_accents)
    trimmed = _trim(value)
    if collation == "utf8mb4_unicode_ci":
        return _primary("5.2.0", "".join("\ufffd" if ord(ch) > 0xFFFF else ch for ch in trimmed))
    if collation == "utf8mb4_0900_ai_ci":
        return _primary("9.0.0", trimmed)
    raise ConfigError(f"unknown collation '{collation}' ({', '.join(_COLLATION_WORDS)}, knockout)")


def _shown(value: str) -> str:
    """``value`` quoted, with its escapes beside it when Unicode forms may draw it like another id."""
    shown = repr(value)
    return shown if unicodedata.normalize("NFKC", value) == value or ascii(value) == shown else \
        f"{shown} ({ascii(value)[1:-1]})"


def _lead_words(value: str, lead: str) -> str:
    """How ``value`` starts with the formula character ``lead``."""
    read = unicodedata.normalize("NFKC", lead).replace("\u2212", "-")
    return (f"starts with {lead!r}" + ("" if value.startswith(lead) else " after blank characters")
            + ("" if read == lead or lead in FORMULA_LEAD else f" (read as {read!r})"))


def _refuse(book: Gradebook, fmt: str, message: str, *, record: str | None = None, field: str | None = None) -> None:
    raise InputError(f"{message}; refused for --format {fmt}", file=book.source, record=record, field=field)


def check(book: Gradebook, fmt: str, *, write_empty: bool = False) -> None:
    """Refuse (an :class:`~knockout.errors.InputError`, before anything is written) what the layout ``fmt``
    would make an LMS read wrong: formula ids and question names (:func:`formula_lead`), ids and question names
    equal as the LMS compares them (:func:`lms_key`), reserved ids and names, and (Moodle) empty cells unless
    ``write_empty``."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown gradebook format '{fmt}' ({', '.join(FORMATS)})")
    if fmt == "csv":
        return
    folds = fmt in _FOLDS_ACCENTS
    collations = COLLATIONS[fmt]
    own = ("it trims spaces and invisible characters and ignores case, Unicode compatibility forms"
           + (" and accents" if folds else ""))

    def how(collation: str) -> str:
        return _COLLATION_WORDS.get(collation, own)
    field_name = book.id_column if book.id_column == "examinee" else f"meta.{book.id_column}"
    names: dict[tuple[str, Any], Question] = {}
    for q in book.questions:
        name = item_name(q)
        if (lead := formula_lead(name)) is not None:
            _refuse(book, fmt, f"question {_shown(name)} {_lead_words(name, lead)}, which a spreadsheet reads as a "
                    "formula (rename the question)", record=q.id, field="id")
        if fmt == "canvas" and _CANVAS_ID_COLUMN.search(name):
            _refuse(book, fmt, f"question {name!r} ends like 'Name (12345)': Canvas would read it as the existing "
                    "assignment with that id (rename the question)", record=q.id, field="id")
        if fmt == "canvas" and _CANVAS_TOTALS.search(name):
            _refuse(book, fmt, f"question {name!r} looks like one of Canvas's total columns, which its import "
                    "drops (rename the question)", record=q.id, field="id")
        for c in collations:
            key = (c, collation_key(name, c, fold_accents=folds))
            if key in names:
                _refuse(book, fmt, f"questions {_shown(item_name(names[key]))} and {_shown(name)} are the same grade "
                        f"item to the LMS ({how(c)}): rename one", record=q.id, field="id")
            names[key] = q
    seen: dict[tuple[str, Any], Student] = {}
    for s in book.students:
        if (lead := formula_lead(s.id)) is not None:
            _refuse(book, fmt, f"student id {_shown(s.id)} {_lead_words(s.id, lead)}, which a spreadsheet reads as "
                    "a formula (the LMS must match the id as it is: it cannot be neutralised; change the id)",
                    record=s.examinee, field=field_name)
        if fmt == "moodle" and s.id.strip(_PHP_TRIM) in ("", "0"):
            _refuse(book, fmt, f"student id {s.id!r}: Moodle skips the user column when it is empty or 0, and "
                    "gives that row's grades to the student of the row before", record=s.examinee, field=field_name)
        if fmt == "canvas" and _CANVAS_POINTS.search(s.id):
            _refuse(book, fmt, f"student {s.id!r}: Canvas reads a row whose first cell holds 'Points Possible' "
                    "as the points row, not a student", record=s.examinee, field=field_name)
        for c in collations:
            key = (c, collation_key(s.id, c, fold_accents=folds))
            if key in seen:
                _refuse(book, fmt, f"student ids {_shown(seen[key].id)} and {_shown(s.id)} are the same to the LMS "
                        f"({how(c)}): it would give both rows to one student", record=s.examinee, field=field_name)
            seen[key] = s
    if fmt == "moodle" and not write_empty and (none := book.ungraded()):
        _refuse(book, fmt, f"{len(none)} answer(s) without a grade ({_some(none)}): Moodle clears the grade "
                "already there for an empty cell; grade them, or pass --write-empty to clear those grades")


def _some(names: Sequence[str], n: int = 5) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


#: the sources of a grade that rests on no teacher grade (neither the teacher's own nor calibrated on theirs)
UNANCHORED = ("judge", "grade model", "readers disagree", "needs expert", "flagged")


def unanchored_line(book: Gradebook) -> str | None:
    """One line saying how many of the gradebook's grades rest on no teacher grade (the judge's as they are:
    the Moodle and Canvas files cannot say so), and on which questions; None when every grade does."""
    n = sum(1 for s in book.students for g in s.grades.values() if g.source in UNANCHORED and g.grade is not None)
    if not n:
        return None
    total = sum(1 for s in book.students for g in s.grades.values() if g.grade is not None)
    qs = sorted({q for s in book.students for q, g in s.grades.items() if g.source in UNANCHORED
                 and g.grade is not None})
    return (f"{n} of {total} grades rest on no teacher grade (the judge's, not calibrated; questions "
            f"{_some(qs)}): the file does not say so; grade some answers or groups (knockout groups, "
            "knockout review) or calibrate before importing it")


def left_out_line(book: Gradebook) -> str | None:
    """One line counting every grade the gradebook leaves out, by reason, with the first of each; None when
    none is left out."""
    parts = [f"{len(ids)} {why} ({_some(ids)})" for why, ids in book.left_out().items()]
    return "left out: " + "; ".join(parts) if parts else None


def write(book: Gradebook, fmt: str, out: TextIO, *, write_empty: bool = False) -> None:
    """``book`` in the layout ``fmt`` (:data:`FORMATS`) to ``out``, after :func:`check` (nothing is written
    when it refuses)."""
    check(book, fmt, write_empty=write_empty)
    qs = book.questions
    rows: list[list[str]] = []
    if fmt == "csv":
        head = ["student"]
        for q in qs:
            head += [item_name(q), f"{item_name(q)} source", f"{item_name(q)} error",
                     f"{item_name(q)} would have had"]
        rows.append([*head, "total", "max_total", "calibration"])
        label = (book.calibration or {}).get("label", "") if (book.calibration or {}).get("used") else ""
        for s in book.students:
            row: list[str] = [s.id]
            for q in qs:
                g = s.grades.get(q.id, Grade(None, "none"))
                row += [_num(g.grade), g.source, _num(g.error), _num(g.full)]
            rows.append([*row, _num(s.total), _num(book.max_total), label])
    elif fmt == "moodle":
        rows.append([MOODLE_ID.get(book.id_column.lower(), "ID number"), *(item_name(q) for q in qs)])
        for s in book.students:
            rows.append([s.id, *(_num(s.grades.get(q.id, Grade(None, "none")).grade) for q in qs)])
    else:
        # canvas: the identifier goes in "SIS User ID" (or "SIS Login ID" for a login / email); Canvas matches a
        # row by any of ID, SIS User ID, SIS Login ID, then the name in Student
        login = book.id_column.lower() in ("email", "login", "username", "sis_login_id")
        rows.append(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *(item_name(q) for q in qs)])
        rows.append(["Points Possible", "", "", "", "", *(_num(q.max_points) for q in qs)])
        for s in book.students:
            rows.append([s.id, "", "" if login else s.id, s.id if login else "", "",
                         *(_num(s.grades.get(q.id, Grade(None, "none")).grade) for q in qs)])
    write_rows(out, rows, lineterminator="\n")  # the one CSV writer: cells quoted and neutralised (data._csv)


def text(book: Gradebook, fmt: str, *, write_empty: bool = False) -> str:
    buf = io.StringIO()
    write(book, fmt, buf, write_empty=write_empty)
    return buf.getvalue()
