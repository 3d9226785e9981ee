"""``knockout gradebook`` (issue 36): one row per student with each question's final grade (expert, calibrated,
judge), written as plain CSV and in the import layouts of Moodle and Canvas, then read back by small parsers
written from those systems' documentation.  The judge is the scripted SIMULATION, not an LLM."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app

TEACHER = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "teacher_exam.jsonl"
#: a lenient simulated judge (every grade 20% of the maximum too high): calibration chooses a map
LENIENT = "scripted?inflation=0.2&noise=0.05"


def launcher() -> str:
    """How a command line started as ``knockout`` is stored to run again (its full path when that is not on PATH,
    as under ``make test``)."""
    from unittest import mock

    from knockout.cli._common import knockout_command

    with mock.patch.object(sys, "argv", ["knockout"]):
        return knockout_command()


def cli(*args: str, code: int = 0) -> tuple[str, str]:
    if not any(c.name == "gradebook" for c in app.registered_commands):
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


@pytest.fixture()
def graded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "t.db"
    grade(str(TEACHER), "--judge", LENIENT, "--reference", "--out", str(db), "--json", "--quiet",
          monkeypatch=monkeypatch)
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
        assert r["calibration"] in ("calibrated (linear, 6 expert grades)",
                                    "calibrated (per-question, 6 expert grades)")


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
                                                         "needs expert": 0, "flagged": 0}
    assert book.calibration is not None and book.calibration["map"] in ("linear", "per-question")
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
