"""Grades entered in the web app reach ``knockout report`` of a grade run in the same store (issue 13.5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("argon2")

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app
from knockout.reports._report import human_sources
from knockout.web import _auth as auth_mod
from tests.test_web_app import CHEAP_ARGON2, PASSWORD, client_for, csrf_of, version_of

DEMO = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "demo_exam.jsonl"


@pytest.fixture(autouse=True)
def _cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth_mod, "ARGON2_PARAMS", dict(CHEAP_ARGON2))


def cli(*args: str, stdin: str | None = None) -> str:
    register_extensions(app)
    r = CliRunner().invoke(app, list(args), input=stdin)
    assert r.exit_code == 0, r.output
    return r.stdout


def grade_all(c: TestClient, exam: str, score: str) -> int:
    """Grade every answer of ``exam`` through the pages; returns how many were saved."""
    saved = 0
    n = 1
    while c.get(f"/exam/{exam}/examinee/{n}", follow_redirects=False).status_code == 303:
        for k in (1, 2):
            url = f"/exam/{exam}/examinee/{n}/q/{k}"
            page = c.get(url).text
            r = c.post(url, data={"csrf": csrf_of(page), "score": score, "version": str(version_of(page))},
                       follow_redirects=False)
            assert r.status_code == 303
            saved += 1
        n += 1
    return saved


def test_web_grades_reach_the_report(tmp_path: Path) -> None:
    db = tmp_path / "grades.db"
    cli("grade", str(DEMO), "--judge", "scripted", "--out", str(db), "--json", "--quiet")  # a SIMULATION judge
    cli("import", str(DEMO), "--db", str(db))
    cli("users", "add", "prof", "--db", str(db), "--exam", "demo-en", "--password-stdin", stdin=PASSWORD + "\n")
    cli("users", "add", "boss", "--db", str(db), "--role", "organizer", "--password-stdin", stdin=PASSWORD + "\n")
    before = json.loads(cli("report", str(db), "--json", "--resamples", "0"))
    assert before["run"]["human_grades"] == {"file": ["grader-a", "grader-b"], "web": [], "web_grades": 0,
                                             "web_skipped": {}, "web_skipped_answers": {}}

    prof = client_for(db, "prof")
    assert grade_all(prof, "demo-en", "2") == 12
    rep = json.loads(cli("report", str(db), "--json", "--resamples", "0"))
    sources = rep["run"]["human_grades"]
    assert sources == {"file": ["grader-a", "grader-b"], "web": ["web:prof"], "web_grades": 12, "web_skipped": {},
                       "web_skipped_answers": {}}
    assert rep["human_human"]["graders"] == ["grader-a", "grader-b", "web:prof"]
    vs_prof = next(g for g in rep["human_human"]["judge_vs_grader"] if g["grader"] == "web:prof")
    assert vs_prof["n"] == 12
    assert human_sources(sources) == "input file: grader-a, grader-b; web app: web:prof (12 grades)"
    text = cli("report", str(db), "--resamples", "0")
    assert "human grades" in text and "web:prof" in text

    # an organizer changes a question's maximum in the app: its web grades are on another scale than the run
    boss = client_for(db, "boss")
    page = boss.get("/exam/demo-en/q/1/info").text
    r = boss.post("/exam/demo-en/q/1/info", data={"csrf": csrf_of(page), "max_points": "10"},
                  follow_redirects=False)
    assert r.status_code == 303
    sources = json.loads(cli("report", str(db), "--json", "--resamples", "0"))["run"]["human_grades"]
    assert sources["web_grades"] == 6 and sources["web_skipped"] == {"max points changed": 6}
    assert human_sources(sources).endswith("left out: 6 max points changed")
