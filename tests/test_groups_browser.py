"""Grading an exam through answer groups in a real browser (issue 61): Playwright driving Debian's headless
chromium against a real uvicorn server; the draft grades come from the scripted SIMULATION judge, not an LLM.
The teacher grades the 3-question teacher exam group by group (with a split, a move out, an override and an
undo), and the gradebook export carries every grade."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_web_browser import CHROMIUM, browser, log_in, page, serve  # noqa: F401  (fixtures)

if not CHROMIUM.exists():
    pytest.skip("needs Debian's chromium (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")

from playwright.sync_api import Page

from knockout.annotations import Assignments, ExamGrades
from knockout.data import load_items
from knockout.storage._store import Store
from knockout.web._auth import Accounts
from tests.test_gradebook import LENIENT, TEACHER, cli
from tests.test_web_app import PASSWORD

#: the group pages cluster a question's answers on their first visit: a longer default timeout (the shared page)
PAGE_TIMEOUT_MS = 30000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    db = tmp_path_factory.mktemp("groups-browser") / "store.db"
    store = Store(db)
    ExamGrades(store).import_items(load_items(TEACHER))
    Accounts(store).add_user("teacher", PASSWORD)
    Assignments(store).assign("teacher", "exam", "teach")
    store.close()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["knockout", "grade"])
        cli("grade", str(TEACHER), "--judge", LENIENT, "--reference", "--out", str(db), "--json", "--quiet")
    with serve(db) as url:
        yield url, db


def grades(db: Path) -> dict[str, dict[str, Any]]:
    store = Store(db)
    try:
        return {g["answer_id"]: g for g in ExamGrades(store).grades(exam_id="teach", grader="teacher")}
    finally:
        store.close()


def test_the_grading_page_shows_the_draft_the_readers_and_the_imported_grade(server: tuple[str, Path],
                                                                             page: Page) -> None:  # noqa: F811
    """Issue 61 item 6: the grading page showed neither the draft grade nor the readers; an answer graded in the
    data file showed an empty box and "0 / 3 graded"; the exam page's judge column was "-" for every question."""
    base, db = server
    store = Store(db)
    try:
        exam = ExamGrades(store).exam("teach")
        assert exam is not None
        file_graded = [(e.number, k) for e in exam.examinees for k, q in enumerate(exam.questions, 1)
                       if q.id in e.answers and "teacher" in e.answers[q.id].human_scores
                       and ExamGrades(store).grade(e.answers[q.id].id, "teacher") is None]
    finally:
        store.close()
    log_in(page, base, "teacher")
    page.goto(base + "/exam/teach")
    means = page.locator(".judge-mean, .needs-expert-mark").all_inner_texts()
    assert len(page.locator("td .judge-mean").all()) + len(page.locator(".needs-expert-mark").all()) == 3, means
    assert all("over 6 answers" in m for m in page.locator(".judge-mean").all_inner_texts())
    assert file_graded  # this test runs before the one that grades every answer through groups
    n, k = file_graded[0]
    page.goto(f"{base}/exam/teach/examinee/{n}/q/{k}")
    assert "/ " in page.inner_text("#draft-grade") and "simulation" in page.inner_text("#draft-grade")
    assert "Graded in the data file" in page.inner_text("#imported-grade")
    assert page.input_value("#score") != ""
    assert "0 / 3 graded" not in page.inner_text("nav.side")


def test_grade_an_exam_through_groups(server: tuple[str, Path], page: Page,  # noqa: F811
                                      tmp_path: Path) -> None:
    base, db = server
    log_in(page, base, "teacher")
    page.goto(base + "/exam/teach")
    page.click("#by-groups >> text=question 1")
    assert page.url.endswith("/groups/teach/q/1")
    first = page.locator("section.group").first
    assert first.locator("blockquote.representative").inner_text().strip()
    assert "draft" in first.locator("h2").inner_text()
    assert not first.locator("details.members").get_attribute("open")  # members collapsed
    # a split (when the largest group has two answers or more), a move out, an override, an undo
    if first.locator("button.split-group").count():
        n_before = page.locator("section.group").count()
        first.locator("button.split-group").click()
        assert "split into" in page.inner_text("#done")
        assert page.locator("section.group").count() == n_before + 1
    first = page.locator("section.group").first
    if first.locator("button.move-out").count():
        first.locator("summary").click()
        first.locator("button.move-out").first.click()
        assert "moved out into" in page.inner_text("#done")
    first = page.locator("section.group").first
    first.locator("input.group-score").fill("2")
    first.locator("button.grade-group").click()
    assert "graded" in page.inner_text("#done")
    gid = page.locator("section.group").first.get_attribute("data-group")
    got = grades(db)
    assert got and {g["via_group"] for g in got.values()} == {gid} and {g["score"] for g in got.values()} == {2.0}
    page.click("#undo")
    assert "undone" in page.inner_text("#done")
    assert grades(db) == {}
    # every group of every question, one grade each (1 point, the override below aside)
    graded_ids = set()
    for k in (1, 2, 3):
        page.goto(f"{base}/groups/teach/q/{k}")
        for i in range(page.locator("section.group").count()):
            sec = page.locator("section.group").nth(i)
            graded_ids.add(sec.get_attribute("data-group"))
            sec.locator("input.group-score").fill("1")
            sec.locator("button.grade-group").click()
            assert "graded" in page.inner_text("#done")
            assert "group graded" in page.locator("section.group").nth(i).locator(".group-status").inner_text()
        assert not page.locator("#next-group").count()  # every group graded: none proposed
    sec = page.locator("section.group").first
    overridden = sec.get_attribute("data-group")
    sec.locator("summary").click()
    member = sec.locator("li.member").first
    aid = member.get_attribute("data-answer")
    member.locator("input.member-score").fill("3.5")
    member.locator("button.override").click()
    assert "graded one answer" in page.inner_text("#done")
    got = grades(db)
    assert got[str(aid)]["score"] == 3.5 and got[str(aid)]["via_group"] is None
    # each group's grade is its representative's (and its near-identical members'): one stored per group at least
    assert graded_ids - {overridden} <= {g["via_group"] for a, g in got.items() if a != aid} <= graded_ids
    assert all(g["via_group"] for a, g in got.items() if a != aid)
    page.screenshot(path="/tmp/knockout-web-groups.png", full_page=True)
    # the gradebook export carries the grades given through groups
    book = tmp_path / "book.csv"
    out, _ = cli("gradebook", str(db), "--output", str(book), "--json")
    summary = json.loads(out)
    # the graded answers carry the teacher's grade; the other members their drafts adapted to those grades
    sources = {k: n for k, n in summary["sources"].items() if n}
    assert sources.get("expert", 0) >= len(got) and sum(sources.values()) == 18, sources
    assert set(sources) <= {"expert", "calibrated", "needs expert", "readers disagree"}, sources

