"""Exam totals and gold answers per language on the grading pages of a SciEx exam (issue 15, item 6), over
HTTP (Starlette's TestClient), checked against :mod:`knockout.sciex` on the bundled example exam."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("argon2")

from fastapi.testclient import TestClient

from knockout.annotations import Assignments, ExamGrades
from knockout.data import load_items
from knockout.data._records import ItemSet
from knockout.sciex import DEFAULT_NOTE, examinee_result, exams_of, student_result
from knockout.storage._store import Store
from knockout.web._auth import Accounts
from tests.test_web_app import PASSWORD, _cheap_argon2, client_for, csrf_of, version_of  # noqa: F401

EXAMPLE = Path(__file__).resolve().parents[1] / "src/knockout/examples/sciex"


def sciex_store(path: Path) -> Path:
    """Both language versions of the example exam imported; ``prof`` grades both, ``org`` organizes."""
    store = Store(path)
    grades = ExamGrades(store)
    for lang in ("en", "de"):
        folder = EXAMPLE / f"cs-basics-{lang}"
        grades.import_items(load_items(folder), root=folder)
    accounts, assignments = Accounts(store), Assignments(store)
    accounts.add_user("prof", PASSWORD)
    accounts.add_user("prof2", PASSWORD)
    for user in ("prof", "prof2"):
        for lang in ("en", "de"):
            assignments.assign(user, "exam", f"cs-basics-{lang}")
    accounts.add_user("org", PASSWORD, "organizer")
    store.close()
    return path


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return sciex_store(tmp_path / "store.db")


def numbers(db: Path, exam_id: str) -> dict[str, int]:
    """Examinee name -> its anonymous number on the pages."""
    store = Store(db)
    try:
        exam = ExamGrades(store).exam(exam_id)
        assert exam is not None
        return {e.key: e.number for e in exam.examinees}
    finally:
        store.close()


def grade(c: TestClient, exam: str, n: int, k: int, score: float) -> str:
    url = f"/exam/{exam}/examinee/{n}/q/{k}"
    page = c.get(url)
    r = c.post(url, data={"csrf": csrf_of(page.text), "version": version_of(page.text), "score": str(score)})
    assert r.status_code == 200, r.text
    return r.text


def field(html: str, id_: str) -> str:
    m = re.search(rf'id="{id_}"[^>]*>(.*?)</dd>', html, re.DOTALL)
    assert m, f"no #{id_} on the page"
    return re.sub(r"<[^>]+>", "", m.group(1)).strip()


def test_totals_match_knockout_sciex(db: Path) -> None:
    """A few grades entered through the pages: the totals on the grading and exam pages are those of
    knockout.sciex on the same grades."""
    number = numbers(db, "cs-basics-en")
    na = number["sample-a"]
    c = client_for(db, "prof")
    entered = {"cs-basics-en/1/sample-a": 2.0, "cs-basics-en/2/sample-a": 2.5, "cs-basics-en/4/sample-a": 1.5}
    for answer_id, score in entered.items():
        html = grade(c, "cs-basics-en", na, int(answer_id.split("/")[1]), score)

    items = load_items(EXAMPLE / "cs-basics-en")
    row = examinee_result(items, entered, "sample-a", resamples=0)
    assert row is not None
    expected = row.exams[0]
    assert (expected["points"], expected["max_points"], expected["ungraded"]) == (6.0, 9.0, 3)
    assert field(html, "total-points") == f"6 of 9 graded points ({expected['percent']:.1f}%)"
    assert field(html, "total-ungraded").startswith("3 graded, 3 still ungraded")
    # the exam's own boundaries (GradeBoundaries in additional_info.json), no default-mapping note
    assert field(html, "total-german") == f"{expected['german']:.1f} (provisional: from the graded questions)"
    assert 'id="german-default"' not in html
    info = items.questions["cs-basics-en/1"].meta["exam_info"]
    assert field(html, "max-total") == f"{info['MaximumTotalPoints']:g}"
    students = student_result(items)
    assert students is not None
    assert field(html, "student-total") == (f"{info['AverageStudentTotalPoints']:g} points "
                                            f"({students.exams[0]['percent']:.1f}%)")
    assert field(html, "student-german") == f"{info['MedianStudentGradeGermanScale']:.1f}"

    # the remaining questions graded: the total is final and equals the result of knockout.sciex
    for k, score in ((3, 2.0), (5, 3.0), (6, 0.5)):
        entered[f"cs-basics-en/{k}/sample-a"] = score
        html = grade(c, "cs-basics-en", na, k, score)
    final = examinee_result(items, entered, "sample-a", resamples=0)
    assert final is not None and final.exams[0]["ungraded"] == 0
    assert field(html, "total-points") == f"11.5 of 16 graded points ({final.exams[0]['percent']:.1f}%)"
    assert field(html, "total-german") == f"{final.exams[0]['german']:.1f}"
    assert final.exams[0]["german"] == exams_of(items)["cs-basics-en"].boundaries.grade(11.5 / 16)

    # the exam page: per examinee your totals; another examinee has none yet
    page = c.get("/exam/cs-basics-en").text
    rows = dict(re.findall(r'examinee/(\d+)">Examinee \d+</a></td>.*?<td class="total">(.*?)</td>', page, re.DOTALL))
    assert rows[str(na)].startswith("11.5 / 16")
    nb = number["sample-b"]
    assert re.sub(r"<[^>]+>", "", rows[str(nb)]).strip() == "0 / 0 (6 ungraded)"
    assert "the exam's grade boundaries" in field(page, "boundaries")

    # another grader's totals are their own; the organizer sees the mean of both
    c2 = client_for(db, "prof2")
    html2 = grade(c2, "cs-basics-en", na, 1, 1.0)
    assert field(html2, "total-points").startswith("1 of 2 graded points")
    org = client_for(db, "org").get("/exam/cs-basics-en").text
    # ... and the grades imported with the data (SciEx's grader "human"), as calibration and the gradebook count
    # them (issue 42)
    given: dict[str, list[float]] = {aid: [v] for aid, v in entered.items()}
    given["cs-basics-en/1/sample-a"].append(1.0)
    for a in items:
        if a.examinee == "sample-a":
            given.setdefault(a.id, []).extend(a.human_scores.values())
    mean = {aid: sum(v) / len(v) for aid, v in given.items()}
    expect_mean = examinee_result(items, mean, "sample-a", resamples=0)
    assert expect_mean is not None
    cell = dict(re.findall(r'examinee/(\d+)">.*?<td class="all-total">(.*?)</td>', org, re.DOTALL))[str(na)]
    assert cell.startswith(f"{round(expect_mean.exams[0]['points'], 2):g} / 16")  # shown rounded to 2 decimals


def test_totals_follow_max_point_edits(db: Path) -> None:
    """An organizer lowers a maximum: the grade above it is left out, the maximum total follows."""
    na = numbers(db, "cs-basics-en")["sample-a"]
    c = client_for(db, "prof")
    grade(c, "cs-basics-en", na, 2, 3.0)
    grade(c, "cs-basics-en", na, 3, 2.0)
    org = client_for(db, "org")
    info = org.get("/exam/cs-basics-en/q/2/info")
    r = org.post("/exam/cs-basics-en/q/2/info", data={"csrf": csrf_of(info.text), "max_points": "2",
                                                     "student_average": "1", "reference": "", "difficulty": ""})
    assert r.status_code == 200
    html = c.get(f"/exam/cs-basics-en/examinee/{na}/q/3").text
    assert field(html, "total-points") == "2 of 2 graded points (100.0%)"
    assert "1 grade above the maximum left out" in field(html, "total-ungraded")
    # MaximumTotalPoints stays the exam info's; the page says the questions' maxima now sum to less
    assert field(html, "max-total") == "16 (exam info; the questions' maxima now sum to 15)"
    # given again within the new maximum, it counts
    grade(c, "cs-basics-en", na, 2, 2.0)
    html = c.get(f"/exam/cs-basics-en/examinee/{na}/q/3").text
    assert field(html, "total-points") == "4 of 4 graded points (100.0%)"


def test_default_mapping_flagged(tmp_path: Path) -> None:
    """An exam without GradeBoundaries: the German grade comes from the default mapping, flagged."""
    store = Store(tmp_path / "s.db")
    items = load_items(EXAMPLE / "cs-basics-de")
    qs = []
    for q in items.questions.values():
        info = {k: v for k, v in q.meta["exam_info"].items() if k != "GradeBoundaries"}
        qs.append(q.model_copy(update={"meta": {**q.meta, "exam_info": info}}))
    ExamGrades(store).import_items(ItemSet(qs, list(items), source=items.source))
    Accounts(store).add_user("org", PASSWORD, "organizer")
    store.close()
    c = client_for(tmp_path / "s.db", "org")
    html = grade(c, "cs-basics-de", 1, 1, 2.0)
    assert field(html, "total-german").startswith("1.0*")
    assert DEFAULT_NOTE in unescape(html)
    assert "default mapping*" in field(c.get("/exam/cs-basics-de").text, "boundaries")


def gold_of(html: str) -> str:
    m = re.search(r'<details id="gold">(.*?)</details>', html, re.DOTALL)
    assert m, "no gold answer on the page"
    return unescape(m.group(1))


def test_gold_answer_per_language(db: Path) -> None:
    """The German version shows the German gold answer; the grader may switch to the English one, and the
    choice stays on the links and after a save."""
    c = client_for(db, "prof")
    html = c.get("/exam/cs-basics-de/examinee/1/q/1").text
    gold = gold_of(html)  # (an examinee's answer may say the same)
    assert "Gold answer (Deutsch)" in gold and "TCP ist verbindungsorientiert" in gold
    assert "TCP is connection-oriented" not in gold
    assert 'href="/exam/cs-basics-de/examinee/1/q/1?gold=en">English</a>' in html
    html = c.get("/exam/cs-basics-de/examinee/1/q/1?gold=en").text
    gold = gold_of(html)
    assert "Gold answer (English)" in gold and "TCP is connection-oriented" in gold
    assert "the exam's language is Deutsch" in gold
    assert 'href="/exam/cs-basics-de/examinee/1/q/2?gold=en"' in html
    r = c.post("/exam/cs-basics-de/examinee/1/q/1?gold=en",
               data={"csrf": csrf_of(html), "version": version_of(html), "score": "1"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith("/q/1?saved=1&gold=en")
    # the English version shows English by default; an unknown language falls back to it
    gold = gold_of(c.get("/exam/cs-basics-en/examinee/1/q/1?gold=xx").text)
    assert "Gold answer (English)" in gold and "TCP is connection-oriented" in gold
    # an organizer's change of the gold answer is the exam language's gold answer
    org = client_for(db, "org")
    info = org.get("/exam/cs-basics-de/q/1/info")
    r = org.post("/exam/cs-basics-de/q/1/info", data={"csrf": csrf_of(info.text), "max_points": "2",
                                                       "reference": "Neue Musterlösung", "difficulty": "easy"})
    assert r.status_code == 200, r.text
    gold = gold_of(c.get("/exam/cs-basics-de/examinee/1/q/1").text)
    assert "Neue Musterlösung" in gold and "TCP ist verbindungsorientiert" not in gold


def test_no_totals_without_examinee_names(tmp_path: Path) -> None:
    from tests.test_web_app import build_store

    db = build_store(tmp_path / "plain.db")
    html = client_for(db, "alice").get("/exam/exam-a/examinee/1/q/1").text
    # a plain exam: points totals, no German grade nor student figures
    assert 'id="totals"' in html and 'id="total-german"' not in html and 'id="student-total"' not in html
