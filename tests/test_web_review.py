"""The web app's "grade these next" (issue 24): the exam page lists the answers an expert grade would help
most, from the review queue of a grading run in the same store (the scripted judge: a SIMULATION)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("argon2")

from knockout.web import _auth as auth_mod
from tests.test_web_app import CHEAP_ARGON2, PASSWORD, client_for, csrf_of, version_of
from tests.test_web_report import DEMO, cli


@pytest.fixture(autouse=True)
def _cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth_mod, "ARGON2_PARAMS", dict(CHEAP_ARGON2))


def test_exam_page_offers_grade_these_next(tmp_path: Path) -> None:
    data = tmp_path / "ungraded.jsonl"  # the demo exam without its file grades: experts grade in the app
    lines = [json.loads(x) for x in DEMO.read_text().splitlines() if x.strip()]
    data.write_text("".join(json.dumps({k: v for k, v in x.items() if k != "human_scores"}) + "\n" for x in lines))
    db = tmp_path / "g.db"
    cli("grade", str(data), "--judge", "scripted?noise=0.2", "--out", str(db), "--json", "--quiet")
    cli("import", str(data), "--db", str(db))
    cli("users", "add", "prof", "--db", str(db), "--exam", "demo-en", "--password-stdin", stdin=PASSWORD + "\n")
    prof = client_for(db, "prof")
    page = prof.get("/exam/demo-en").text
    assert 'id="grade-next"' in page and "the model&#39;s grade (not adapted: 0 answers have both" in page
    # each number in plain words (issue 36): why an answer is listed, the priority as its weighted sum
    assert "few expert grades on this question: 0 of its 6 answers (coverage 1.00 = 1 / (1 + 0))" in page
    assert re.search(r"<td>\d\.\d\d = [^<]*\(coverage\)", page) and "calibrated, " not in page
    links = re.findall(r'href="/exam/demo-en/examinee/(\d+)/q/(\d+)">Examinee', page)
    assert len(links) == 5
    # the expert grades the first of them: it leaves the list
    n, k = links[0]
    url = f"/exam/demo-en/examinee/{n}/q/{k}"
    grading = prof.get(url).text
    assert 'id="grade-next-link"' in grading
    r = prof.post(url, data={"csrf": csrf_of(grading), "score": "2", "version": str(version_of(grading))},
                  follow_redirects=False)
    assert r.status_code == 303
    after = re.findall(r'href="/exam/demo-en/examinee/(\d+)/q/(\d+)">Examinee', prof.get("/exam/demo-en").text)
    assert (n, k) not in after and len(after) == 5


TEACHER = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "teacher_exam.jsonl"


def test_exam_page_counts_the_imported_grades(tmp_path: Path) -> None:
    """The teacher's file has 6 grades: the exam page says so, beside the user's own (issue 36)."""
    db = tmp_path / "t.db"
    cli("grade", str(TEACHER), "--judge", "scripted?inflation=0.2&noise=0.05", "--out", str(db), "--json", "--quiet")
    cli("import", str(TEACHER), "--db", str(db))
    cli("users", "add", "prof", "--db", str(db), "--exam", "teach", "--password-stdin", stdin=PASSWORD + "\n")
    prof = client_for(db, "prof")
    page = prof.get("/exam/teach").text
    assert "6 grades imported from the data, 0 by you, of 18 answers" in page
    assert page.count('class="muted imported">(2 imported)') == 3  # ada, ben and dan: 2 graded answers each
    # the review queue leaves the imported grades out: 12 answers without an expert grade, adapted
    assert 'id="grade-next"' in page and "adapted to the teacher&#39;s level on 6 teacher grades" in page


def test_exam_page_says_why_there_is_no_list_and_how_to_resume(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Only an interrupted judge run: no "grade these next" list, a line saying why and (to an organizer) the
    command that resumes the run -- the one it stored."""
    import sys

    from knockout.storage import Store

    db = tmp_path / "t.db"
    args = ["grade", str(TEACHER), "--judge", "scripted", "--out", str(db), "--json", "--quiet"]
    monkeypatch.setattr(sys, "argv", ["knockout", *args])
    cli(*args)
    with Store(db) as store:
        (run,) = store.runs()
        store.db.execute("DELETE FROM results WHERE run_id = ?", (run.id,))
        store.end_run(run.id, "interrupted", "stopped by the user")
    cli("import", str(TEACHER), "--db", str(db))
    cli("users", "add", "prof", "--db", str(db), "--exam", "teach", "--password-stdin", stdin=PASSWORD + "\n")
    cli("users", "add", "boss", "--db", str(db), "--role", "organizer", "--password-stdin", stdin=PASSWORD + "\n")
    boss = client_for(db, "boss").get("/exam/teach").text
    assert f"judge run {run.id} (scripted:sim, a simulation, not an LLM) that grades this exam" in boss
    assert "is interrupted, with 0 of its 18 answers here graded" in boss
    from unittest import mock

    from knockout.cli._common import knockout_command

    with mock.patch.object(sys, "argv", ["knockout"]):
        resume = f"{knockout_command()} grade {TEACHER} --judge scripted --out {db} --json --quiet"
    assert f'<code id="resume-command">{resume}</code>' in boss
    prof = client_for(db, "prof").get("/exam/teach").text
    assert "is interrupted" in prof and "An organizer can resume it." in prof and "resume-command" not in prof


def test_grade_these_next_shows_rounded_grades_and_totals_count_imported_grades(tmp_path: Path) -> None:
    """Issue 42: the queue showed ``2.16667 / 3`` (a mean of 3 draws): rounded to 2 decimals; and the exam page
    showed ``0 / 0`` totals although the teacher's file had 6 grades: the imported grades count in the totals
    (as in calibration, review and the gradebook): the organizer's mean over every grader has them, and the
    teacher (the user named as the file's grader) sees them as their own."""
    db = tmp_path / "t.db"
    cli("grade", str(TEACHER), "--judge", "scripted?inflation=0.2&noise=0.2", "--samples", "3", "--out", str(db),
        "--json", "--quiet")
    cli("import", str(TEACHER), "--db", str(db))
    cli("users", "add", "teacher", "--db", str(db), "--exam", "teach", "--password-stdin", stdin=PASSWORD + "\n")
    cli("users", "add", "prof", "--db", str(db), "--exam", "teach", "--password-stdin", stdin=PASSWORD + "\n")
    cli("users", "add", "boss", "--db", str(db), "--role", "organizer", "--password-stdin", stdin=PASSWORD + "\n")
    page = client_for(db, "teacher").get("/exam/teach").text  # the file's grader "teacher": their own grades
    judged = re.findall(r"<td>(\d+(?:\.\d+)?) / (\d+)</td>", page)
    assert len(judged) == 5 and all(len(g.partition(".")[2]) <= 2 for g, _ in judged), judged
    assert any("." in g for g, _ in judged)
    # the teacher's file: ada 2 + 4 (q1, q3), ben 0 + 0 (q1, q2), dan 2.5 + 1 (q2, q3)
    expected = sorted(["6 / 6", "0 / 5", "3.5 / 7", "0 / 0", "0 / 0", "0 / 0"])
    totals = dict(re.findall(r'examinee/(\d+)">Examinee \d+</a>.*?<td class="total">([^<]+)<', page, re.S))
    assert sorted(t.strip() for t in totals.values()) == expected, totals
    assert "your grades (yours imported with the data included)" in page
    # another grader's totals are their own (each grades independently); the organizer's mean has the file's
    other = client_for(db, "prof").get("/exam/teach").text
    assert re.findall(r'<td class="total">([^<]+)<', other) == ["0 / 0 "] * 6
    boss = client_for(db, "boss").get("/exam/teach").text
    means = re.findall(r'<td class="all-total">([^<]+)<', boss)
    assert sorted(m.strip() for m in means) == expected, means
