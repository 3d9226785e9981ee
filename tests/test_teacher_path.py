"""The teacher's path of docs/teacher.md in a real browser (issue 36): grade the teacher's own exam (3 questions,
6 students, 2 graded answers per question) with the scripted judge (a SIMULATION, not an LLM), calibrate, open
the exam page, see the review card, enter one grade, export the gradebook and find that grade in it.

``KNOCKOUT_DOC_SCREENSHOTS=1`` writes the screenshots of docs/teacher.md into docs/ (else into a temporary
folder)."""

from __future__ import annotations

import csv
import io
import os
import sys
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
]
pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.test_gradebook import TEACHER, cli  # noqa: E402
from tests.test_web_app import PASSWORD  # noqa: E402
from tests.test_web_browser import log_in, serve  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: the judge of docs/teacher.md: a simulated lenient judge (every grade 20% of the maximum too high)
JUDGE = "scripted?inflation=0.2&noise=0.05"


def shots_dir(tmp_path: Path) -> Path:
    return DOCS if os.environ.get("KNOCKOUT_DOC_SCREENSHOTS") == "1" else tmp_path


def test_the_teachers_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from knockout.annotations import ExamGrades
    from knockout.storage import Store

    monkeypatch.chdir(tmp_path)
    shots = shots_dir(tmp_path)
    # 1. grade the exam (the run stores this command line, as `knockout grade` does)
    args = ["grade", str(TEACHER), "--judge", JUDGE, "--reference", "--out", "teach.db", "--quiet"]
    monkeypatch.setattr(sys, "argv", ["knockout", *args])
    out, _ = cli(*args)
    assert "scripted judge: a simulation, not an LLM" in out
    # 2. calibrate: 6 expert grades in the file move the model to the teacher's level
    out, _ = cli("calibrate", "teach.db", "--resamples", "200")
    out = " ".join(out.split())
    assert "adapted to the teacher's level on 6 teacher grades" in out and "6 answers" in out
    assert "grades written" in out
    # 3. the web app: the exam, and the teacher as its organizer
    cli("import", str(TEACHER), "--db", "teach.db")
    CliInput.users_add("teacher")
    db = tmp_path / "teach.db"
    with serve(db) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.set_default_timeout(15000)
            log_in(page, base, "teacher")
            page.click("a[href='/exam/teach']")
            assert page.url.endswith("/exam/teach")
            assert "6 grades imported from the data, 0 by you, of 18 answers" in page.inner_text("#grade-counts")
            card = page.locator("#grade-next")
            assert "Grade these next" in card.inner_text() and "adapted to the teacher's level" in card.inner_text()
            assert "a simulation, not an LLM" in card.inner_text()
            links = card.locator("a")
            assert links.count() == 5
            page.screenshot(path=str(shots / "teacher-exam.png"), full_page=True)
            first = links.first
            where = first.inner_text()  # "Examinee n, question k"
            first.click()
            page.fill("#score", "1.5")  # within every question's maximum (2, 3 or 4 points)
            page.fill("#comment", "checked by the teacher")
            page.screenshot(path=str(shots / "teacher-grade.png"), full_page=True)
            page.click("button[value=save]")
            page.wait_for_url("**saved=1**")
            page.goto(base + "/exam/teach")
            assert "6 grades imported from the data, 1 by you" in page.inner_text("#grade-counts")
            assert where not in page.locator("#grade-next").inner_text()  # graded: it left the list
        finally:
            browser.close()
    with Store(db) as store:
        (mine,) = ExamGrades(store).grades(exam_id="teach", grader="teacher")
    assert mine["score"] == 1.5
    # 4. the gradebook uses the teacher's grade
    out, err = cli("gradebook", "teach.db", "--format", "csv")
    assert "7 expert, 11 calibrated" in err
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(out))}
    question, student = mine["answer_id"].rsplit("/", 1)
    assert rows[student][question] == "1.5" and rows[student][f"{question} source"] == "expert"
    moodle, _ = cli("gradebook", "teach.db", "--format", "moodle", "--id-column", "email")
    assert moodle.splitlines()[0] == "Email address,teach/1,teach/2,teach/3"


class CliInput:
    @staticmethod
    def users_add(name: str) -> None:
        from typer.testing import CliRunner

        from knockout.cli._main import app

        r = CliRunner().invoke(app, ["users", "add", name, "--db", "teach.db", "--role", "organizer",
                                     "--password-stdin"], input=PASSWORD + "\n")
        assert r.exit_code == 0, r.output
