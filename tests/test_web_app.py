"""The web app through HTTP (Starlette's TestClient): login, CSRF, access control, escaping, concurrency."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("argon2")

from fastapi.testclient import TestClient

from knockout.annotations import Assignments, ExamGrades, PairAnnotations, human_grades
from knockout.data._records import Answer, ItemSet, PairItem, Question
from knockout.storage._store import Store
from knockout.web import _auth as auth_mod
from knockout.web._app import create_app
from knockout.web._auth import Accounts
from knockout.web._deps import WebSettings, safe_next

PASSWORD = "correct horse battery"
CHEAP_ARGON2 = {"time_cost": 1, "memory_cost": 1024, "parallelism": 1}
XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> **bold** [x](javascript:alert(1))'


@pytest.fixture(autouse=True, scope="module")
def _cheap_argon2() -> Iterator[None]:
    """Cheaper argon2 parameters (the defaults take 64 MiB and ~0.1-0.5 s per hash)."""
    saved = dict(auth_mod.ARGON2_PARAMS)
    auth_mod.ARGON2_PARAMS.update(CHEAP_ARGON2)
    yield
    auth_mod.ARGON2_PARAMS.clear()
    auth_mod.ARGON2_PARAMS.update(saved)


def build_store(path: Path, *, figure: Path | None = None) -> Path:
    """Two exams (A: 3 questions x 2 examinees, one answer an XSS attempt; B: 1 question), a pair set of 6
    pairs with overlap 3, users ``alice`` (exam A, pairs), ``bob`` (exam B, pairs), ``carol`` (pairs) and the
    organizer ``org``; all with :data:`PASSWORD`."""
    qs = [Question(id=f"A/{i}", text=f"Question **{i}** of exam A?", max_points=2.0 if i > 1 else 4.0,
                   exam_id="exam-a", reference=f"gold {i}", images=[str(figure)] if figure and i == 1 else [])
          for i in (1, 2, 3)]
    qs.append(Question(id="B/1", text="Secret question of exam B", exam_id="exam-b", max_points=1.0))
    answers = [Answer(id=f"A/{i}/{s}", question_id=f"A/{i}", examinee=s,
                      text=XSS if (i, s) == (2, "gpt-4") else f"answer text {i}")
               for i in (1, 2, 3) for s in ("gpt-4", "student-7")]
    answers.append(Answer(id="B/1/x", question_id="B/1", examinee="claude", text="exam B answer"))
    store = Store(path)
    ExamGrades(store).import_items(ItemSet(qs, answers, source="test"), root=figure.parent if figure else None)
    pairs = [PairItem(id=f"p{i}", question=f"Pair question {i}", answer_a=f"answer A{i}", answer_b=f"answer B{i}")
             for i in range(6)]
    PairAnnotations(store).import_pairs(pairs, "sbs")
    accounts, assignments = Accounts(store), Assignments(store)
    for name, exams in (("alice", ["exam-a"]), ("bob", ["exam-b"]), ("carol", [])):
        accounts.add_user(name, PASSWORD)
        for e in exams:
            assignments.assign(name, "exam", e)
        assignments.assign(name, "pairset", "sbs")
    accounts.add_user("org", PASSWORD, "organizer")
    store.close()
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("web") / "store.db")


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field on the page"
    return m.group(1)


def version_of(html: str) -> int:
    m = re.search(r'name="version" value="(\d+)"', html)
    assert m
    return int(m.group(1))


def login(client: TestClient, user: str, password: str = PASSWORD) -> None:
    page = client.get("/login")
    r = client.post("/login", data={"csrf": csrf_of(page.text), "username": user, "password": password},
                    follow_redirects=False)
    assert r.status_code == 303, r.text


ORIGIN = "http://127.0.0.1"


def client_for(db: Path, user: str | None = None, settings: WebSettings | None = None) -> TestClient:
    """A client of a fresh app on ``db``, sending the ``Origin`` header a browser sends with a form."""
    c = TestClient(create_app(db, settings), base_url=ORIGIN, headers={"Origin": ORIGIN})
    if user:
        login(c, user)
    return c


def test_every_page_needs_login(db: Path) -> None:
    c = client_for(db)
    for url in ("/", "/exam/exam-a", "/exam/exam-a/examinee/1/q/1", "/exam/exam-a/image/1/0", "/pairs/sbs",
                "/pairs/sbs/agreement", "/exam/exam-a/q/1/info"):
        r = c.get(url, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login"), url
    r = c.post("/exam/exam-a/examinee/1/q/1", data={"score": "1", "version": "0", "csrf": "x"},
               follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")


def test_wrong_password_and_csrf_refused(db: Path) -> None:
    c = client_for(db)
    page = c.get("/login")
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    r = c.post("/login", data={"csrf": csrf_of(page.text), "username": "alice", "password": "wrong"})
    assert r.status_code == 401 and "Wrong user name or password" in r.text
    r = c.post("/login", data={"csrf": csrf_of(page.text), "username": "nobody", "password": PASSWORD})
    assert r.status_code == 401
    r = c.post("/login", data={"csrf": "forged", "username": "alice", "password": PASSWORD})
    assert r.status_code == 403
    assert c.get("/", follow_redirects=False).status_code == 303
    cookie = c.cookies.get("knockout_session")
    login(c, "alice")
    assert c.cookies.get("knockout_session") != cookie  # a new session after login
    assert c.get("/").status_code == 200


def test_session_cookie_flags(db: Path) -> None:
    c = client_for(db)
    r = c.get("/login")
    set_cookie = r.headers["set-cookie"].lower()
    assert "httponly" in set_cookie and "samesite=strict" in set_cookie


def test_grader_sees_only_assigned_exams(db: Path) -> None:
    alice = client_for(db, "alice")
    home = alice.get("/").text
    assert "exam-a" in home and "exam-b" not in home
    for url in ("/exam/exam-b", "/exam/exam-b/examinee/1/q/1", "/exam/exam-b/q/1/info", "/exam/nope"):
        assert alice.get(url).status_code == 403, url
    r = alice.post("/exam/exam-b/examinee/1/q/1",
                   data={"csrf": csrf_of(home), "score": "1", "version": "0"})
    assert r.status_code == 403
    org = client_for(db, "org")
    assert org.get("/exam/exam-b").status_code == 200
    assert org.get("/exam/nope").status_code == 404


def test_examinees_are_anonymous_and_text_escaped(db: Path) -> None:
    c = client_for(db, "alice")
    pages = [c.get(f"/exam/exam-a/examinee/{n}/q/{k}").text for n in (1, 2) for k in (1, 2, 3)]
    pages.append(c.get("/exam/exam-a").text)
    for html in pages:
        assert "gpt-4" not in html and "student-7" not in html
        assert "<script>" not in html and "onerror=" not in html.replace("onerror=&quot;", "")
    xss = next(p for p in pages if "window.__xss" in p)
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in xss
    assert "<strong>bold</strong>" in xss  # Markdown still rendered
    assert 'href="javascript:' not in xss
    assert "Examinee 1" in pages[0] and "Examinee 2" in pages[0]


def test_grades_saved_and_conflicts(db: Path) -> None:
    alice = client_for(db, "alice")
    url = "/exam/exam-a/examinee/1/q/3"
    page = alice.get(url).text
    token, v = csrf_of(page), version_of(page)
    assert v == 0
    r = alice.post(url, data={"csrf": token, "score": "1,5", "comment": "ok", "version": "0", "action": "save"},
                   follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith("?saved=1")
    page = alice.get(url).text
    assert 'value="1.5"' in page and version_of(page) == 1
    # the same grader in a second tab, still showing version 0: refused with the newer value shown
    r = alice.post(url, data={"csrf": token, "score": "2", "comment": "tab 2", "version": "0"})
    assert r.status_code == 409
    assert 'value="1.5"' in r.text and "another window" in r.text and version_of(r.text) == 1
    # saving again on the version now shown succeeds
    r = alice.post(url, data={"csrf": token, "score": "2", "comment": "tab 2", "version": "1"},
                   follow_redirects=False)
    assert r.status_code == 303
    # bad grades
    for bad in ("2.5", "-1", "0.3", "abc"):
        r = alice.post(url, data={"csrf": token, "score": bad, "version": "2"})
        assert r.status_code == 400, bad
    # another grader (the organizer) grades the same answer: both grades are kept
    org = client_for(db, "org")
    page = org.get(url).text
    r = org.post(url, data={"csrf": csrf_of(page), "score": "0.5", "version": str(version_of(page))},
                 follow_redirects=False)
    assert r.status_code == 303
    store = Store(db)
    try:
        grades = human_grades(store)
        exam = ExamGrades(store).exam("exam-a")
        assert exam is not None
        answer_id = exam.examinees[0].answers["A/3"].id
        assert grades[answer_id] == {"alice": 2.0, "org": 0.5}
        history = store.db.execute("SELECT COUNT(*) FROM grade_history WHERE answer_id = ?", (answer_id,)).fetchone()
        assert history[0] == 3
    finally:
        store.close()


def test_save_and_next_moves_on(db: Path) -> None:
    alice = client_for(db, "alice")
    url = "/exam/exam-a/examinee/2/q/1"
    page = alice.get(url).text
    r = alice.post(url, data={"csrf": csrf_of(page), "score": "4", "version": str(version_of(page)),
                              "action": "next"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/exam/exam-a/examinee/2/q/2"


def test_csrf_checked_on_every_form(db: Path) -> None:
    alice = client_for(db, "alice")
    forms = [
        ("/exam/exam-a/examinee/1/q/1", {"score": "1", "version": "0"}),
        ("/exam/exam-a/q/1/info", {"max_points": "4"}),
        ("/pairs/sbs/item/1", {"choice": "left", "version": "0"}),
        ("/logout", {}),
    ]
    for url, data in forms:
        assert alice.post(url, data={**data, "csrf": "forged"}).status_code == 403, url
    assert alice.get("/").status_code == 200  # still logged in: the forged logout did nothing


def test_question_info_page(db: Path) -> None:
    org = client_for(db, "org")
    page = org.get("/exam/exam-a/q/2/info").text
    data = {"csrf": csrf_of(page), "max_points": "3", "student_average": "1.25", "reference": "new gold",
            "difficulty": "Hard"}
    r = org.post("/exam/exam-a/q/2/info", data=data, follow_redirects=False)
    assert r.status_code == 303
    page = org.get("/exam/exam-a/q/2/info").text
    assert 'value="3"' in page and "1.25" in page and "new gold" in page and '"hard" selected' in page
    alice = client_for(db, "alice")
    assert "max 3 points" in alice.get("/exam/exam-a/examinee/1/q/2").text
    shown = alice.get("/exam/exam-a/q/2/info").text  # graders see it, without a form
    assert "new gold" in shown and 'name="max_points"' not in shown
    r = org.post("/exam/exam-a/q/2/info", data={**data, "student_average": "9"})
    assert r.status_code == 400
    r = org.post("/exam/exam-a/q/2/info", data={**data, "difficulty": "impossible"})
    assert r.status_code == 400


def test_image_route(db: Path, tmp_path: Path) -> None:
    fig = tmp_path / "fig.png"
    fig.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    path = build_store(tmp_path / "img.db", figure=fig)
    alice = client_for(path, "alice")
    page = alice.get("/exam/exam-a/examinee/1/q/1").text
    assert '<img src="/exam/exam-a/image/1/0"' in page
    r = alice.get("/exam/exam-a/image/1/0")
    assert r.status_code == 200 and r.content.startswith(b"\x89PNG")
    assert alice.get("/exam/exam-a/image/1/1").status_code == 404
    assert alice.get("/exam/exam-a/image/2/0").status_code == 404
    assert client_for(path, "bob").get("/exam/exam-a/image/1/0").status_code == 403


def test_side_by_side_flow_maps_verdicts_back(db: Path) -> None:
    carol = client_for(db, "carol")
    r = carol.get("/pairs/sbs", follow_redirects=False)
    assert r.headers["location"] == "/pairs/sbs/item/1"
    store = Store(db)
    try:
        queue = PairAnnotations(store).queue("sbs", "carol")
    finally:
        store.close()
    assert len(queue) == 6
    page = carol.get("/pairs/sbs/item/1").text
    view = queue[0]
    left, right = (view.pair.answer_b, view.pair.answer_a) if view.swapped else (view.pair.answer_a,
                                                                                  view.pair.answer_b)
    assert page.index(left) < page.index(right)
    r = carol.post("/pairs/sbs/item/1", data={"csrf": csrf_of(page), "choice": "left", "version": "0"},
                   follow_redirects=False)
    assert r.status_code == 303
    assert carol.get("/pairs/sbs", follow_redirects=False).headers["location"] == "/pairs/sbs/item/2"
    r = carol.post("/pairs/sbs/item/1", data={"csrf": csrf_of(page), "choice": "right", "version": "0"})
    assert r.status_code == 409
    r = carol.post("/pairs/sbs/item/2", data={"csrf": csrf_of(page), "choice": "sideways", "version": "0"})
    assert r.status_code == 400
    store = Store(db)
    try:
        v = PairAnnotations(store).verdict("sbs", view.pair.id, "carol")
    finally:
        store.close()
    assert v is not None and v["shown"] == "left" and v["verdict"] == ("B" if view.swapped else "A")
    assert carol.get("/pairs/other").status_code == 403
    assert "Fleiss" in carol.get("/pairs/sbs/agreement").text


def test_overlap_only_for_organizers(db: Path) -> None:
    carol = client_for(db, "carol")
    token = csrf_of(carol.get("/").text)
    assert carol.post("/pairs/sbs/overlap", data={"csrf": token, "overlap": "2"}).status_code == 403
    org = client_for(db, "org")
    token = csrf_of(org.get("/").text)
    r = org.post("/pairs/sbs/overlap", data={"csrf": token, "overlap": "3"}, follow_redirects=False)
    assert r.status_code == 303


def test_removed_user_is_logged_out(tmp_path: Path) -> None:
    path = build_store(tmp_path / "s.db")
    c = client_for(path, "carol")
    store = Store(path)
    Accounts(store).remove_user("carol")
    store.close()
    assert c.get("/", follow_redirects=False).status_code == 303


@pytest.mark.parametrize(
    ("target", "expected"),
    [("/exam/x", "/exam/x"), ("//evil.com/x", "/"), ("https://evil.com", "/"), ("/\\evil", "/"),
     ("javascript:alert(1)", "/"), ("/pairs/a?x=1", "/pairs/a?x=1")],
)
def test_safe_next(target: str, expected: str) -> None:
    assert safe_next(target) == expected
