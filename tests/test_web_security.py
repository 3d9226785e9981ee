"""Hardening of the web app (issue 14.6), through HTTP: organizer role and out-of-range grades, server-side
sessions, login throttling and bounded hashing, the Origin check, Secure cookies and the root path, ids with
``/``, bounded form values (no 500 on any input) and figures served only from the copies made at import."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("argon2")

import httpx
import uvicorn
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from knockout.annotations import Assignments, ExamGrades, PairAnnotations, export_rows
from knockout.cli import register_extensions
from knockout.cli._main import app as cli_app
from knockout.data._records import Answer, ItemSet, PairItem, Question
from knockout.storage._store import Store
from knockout.web import _auth as auth_mod
from knockout.web._app import create_app
from knockout.web._auth import Accounts, ThrottlePolicy
from knockout.web._deps import SESSION_COOKIE, WebSettings
from tests.conftest import free_port
from tests.test_web_app import CHEAP_ARGON2, ORIGIN, PASSWORD, build_store, client_for, csrf_of, login, version_of

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


@pytest.fixture(autouse=True)
def _cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth_mod, "ARGON2_PARAMS", dict(CHEAP_ARGON2))


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return build_store(tmp_path / "store.db")


def count(db: Path, sql: str, *args: Any) -> int:
    store = Store(db)
    try:
        return int(store.db.execute(sql, args).fetchone()[0])
    finally:
        store.close()


# -- organizer role ------------------------------------------------------------------------------------------
def test_only_organizers_change_question_info(db: Path) -> None:
    alice = client_for(db, "alice")
    page = alice.get("/exam/exam-a/q/1/info").text
    assert 'name="max_points"' not in page and "Only an organizer" in page
    r = alice.post("/exam/exam-a/q/1/info", data={"csrf": csrf_of(page), "max_points": "9", "reference": "mine"})
    assert r.status_code == 403
    assert count(db, "SELECT COUNT(*) FROM question_info") == 0
    org = client_for(db, "org")
    page = org.get("/exam/exam-a/q/1/info").text
    r = org.post("/exam/exam-a/q/1/info", data={"csrf": csrf_of(page), "max_points": "9"}, follow_redirects=False)
    assert r.status_code == 303
    assert count(db, "SELECT COUNT(*) FROM question_info WHERE updated_by = 'org'") == 1


def test_lowered_maximum_flags_grades_and_refuses_them(db: Path) -> None:
    alice = client_for(db, "alice")
    url = "/exam/exam-a/examinee/1/q/1"  # question A/1, max 4
    page = alice.get(url).text
    r = alice.post(url, data={"csrf": csrf_of(page), "score": "3.5", "version": "0"}, follow_redirects=False)
    assert r.status_code == 303
    org = client_for(db, "org")
    page = org.get("/exam/exam-a/q/1/info").text
    r = org.post("/exam/exam-a/q/1/info", data={"csrf": csrf_of(page), "max_points": "2"})
    assert r.status_code == 200 and "1 existing grade is now above the maximum" in r.text
    page = alice.get(url).text
    assert 'id="out-of-range"' in page and "3.5 points is above the current maximum of 2" in " ".join(page.split())
    exam_page = alice.get("/exam/exam-a").text
    assert 'id="flagged"' in exam_page and "1 grade is" in exam_page and "(1 above the maximum)" in exam_page
    assert "(1 above the maximum)" in alice.get("/").text
    assert "alice" in org.get("/exam/exam-a").text  # the organizer sees whose grades are flagged
    store = Store(db)
    try:
        row = next(g for g in export_rows(store, "grades") if g["grader"] == "alice")
    finally:
        store.close()
    assert row["out_of_range"] is True and row["max_points"] == 2
    # no save out of range again ("9 of 4"): refused, the stored grade unchanged
    for bad in ("3.5", "2.5", "9"):
        r = alice.post(url, data={"csrf": csrf_of(page), "score": bad, "version": str(version_of(page))})
        assert r.status_code == 400 and "outside 0..2" in r.text, bad
    r = alice.post(url, data={"csrf": csrf_of(page), "score": "2", "version": str(version_of(page))},
                   follow_redirects=False)
    assert r.status_code == 303
    assert 'id="out-of-range"' not in alice.get(url).text and 'id="flagged"' not in alice.get("/exam/exam-a").text


# -- sessions ------------------------------------------------------------------------------------------------
def reuse(db: Path, cookie: str) -> int:
    """The status of the overview for a new client presenting ``cookie`` as its session."""
    c = TestClient(create_app(db), base_url=ORIGIN, headers={"Origin": ORIGIN})
    c.cookies.set(SESSION_COOKIE, cookie)
    return c.get("/", follow_redirects=False).status_code


def test_sessions_are_server_side_and_end_on_logout(db: Path) -> None:
    alice = client_for(db, "alice")
    cookie = alice.cookies.get(SESSION_COOKIE)
    assert cookie and reuse(db, cookie) == 200
    # the store keeps a hash of the random token, not the token
    ids = [r for (r,) in Store(db).db.execute("SELECT id FROM web_sessions WHERE user = 'alice'")]
    assert len(ids) == 1 and cookie not in ids[0] and len(ids[0]) == 64
    r = alice.post("/logout", data={"csrf": csrf_of(alice.get("/").text)}, follow_redirects=False)
    assert r.status_code == 303
    assert reuse(db, cookie) == 303  # a copied cookie is worthless after logout
    assert count(db, "SELECT COUNT(*) FROM web_sessions WHERE user = 'alice'") == 0


def test_password_change_ends_every_session(db: Path) -> None:
    laptop, phone = client_for(db, "alice"), client_for(db, "alice")
    page = laptop.get("/account").text
    assert "logged in 2 times" in page
    bad = laptop.post("/account/password", data={"csrf": csrf_of(page), "current": "wrong-password",
                                                 "new": "a-new-password", "repeat": "a-new-password"})
    assert bad.status_code == 400 and "current password is wrong" in bad.text
    r = laptop.post("/account/password", data={"csrf": csrf_of(page), "current": PASSWORD, "new": "a-new-password",
                                               "repeat": "a-new-password"}, follow_redirects=False)
    assert r.status_code == 303
    assert phone.get("/", follow_redirects=False).status_code == 303  # the other session ended
    assert laptop.get("/account").status_code == 200 and "Password changed" in laptop.get("/account?changed=1").text
    login(client_for(db), "alice", "a-new-password")
    # the CLI's `users passwd` ends them all too
    other = client_for(db, "bob")
    r = CliRunner().invoke(cli_with_web(), ["users", "passwd", "bob", "--db", str(db), "--password-stdin"],
                           input="bob-new-password\n")
    assert r.exit_code == 0 and "1 session ended" in r.stdout
    assert other.get("/", follow_redirects=False).status_code == 303


def test_user_removal_and_expiry_end_sessions(db: Path) -> None:
    carol = client_for(db, "carol")
    store = Store(db)
    Accounts(store).remove_user("carol")
    store.close()
    assert count(db, "SELECT COUNT(*) FROM web_sessions WHERE user = 'carol'") == 0
    assert carol.get("/", follow_redirects=False).status_code == 303
    bob = client_for(db, "bob")
    store = Store(db)
    store.db.execute("UPDATE web_sessions SET expires = ? WHERE user = 'bob'", (time.time() - 1,))
    store.close()
    assert bob.get("/", follow_redirects=False).status_code == 303


def cli_with_web() -> Any:
    register_extensions(cli_app)
    return cli_app


# -- throttling and bounded hashing ---------------------------------------------------------------------------
def try_login(c: TestClient, user: str, password: str) -> httpx.Response:
    page = c.get("/login")
    return c.post("/login", data={"csrf": csrf_of(page.text), "username": user, "password": password},
                  follow_redirects=False)


def test_login_throttled_per_account_and_per_address(db: Path) -> None:
    settings = WebSettings(throttle=ThrottlePolicy(account_failures=3, address_failures=5, window_s=600))
    app = create_app(db, settings)
    one = TestClient(app, base_url=ORIGIN, headers={"Origin": ORIGIN}, client=("10.0.0.1", 1000))
    two = TestClient(app, base_url=ORIGIN, headers={"Origin": ORIGIN}, client=("10.0.0.2", 1000))
    for _ in range(3):
        assert try_login(one, "alice", "wrong password").status_code == 401
    locked = try_login(one, "alice", PASSWORD)  # even the right password: the account is locked
    assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 500
    assert "Too many failed logins" in locked.text
    assert try_login(two, "alice", PASSWORD).status_code == 429  # from another address too
    # per address: two more failures from 10.0.0.1 (5 in all) lock that address for every account
    assert try_login(one, "bob", "wrong password").status_code == 401
    assert try_login(one, "carol", "wrong password").status_code == 401
    assert try_login(one, "org", PASSWORD).status_code == 429
    assert try_login(two, "org", PASSWORD).status_code == 303  # another address is not locked
    # the lockout ends when the failures leave the window
    store = Store(db)
    store.db.execute("UPDATE web_login_failures SET time = time - 601")
    store.close()
    assert try_login(one, "alice", PASSWORD).status_code == 303


@pytest.fixture()
def slow_hashes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Every password hash takes 0.2 s; ``seen['max']`` is the most that ran at once."""
    real = auth_mod.password_hasher
    seen = {"now": 0, "max": 0}
    lock = threading.Lock()

    class Counted:
        def __init__(self) -> None:
            self.inner = real()

        def _counted(self, fn: Any, *args: Any) -> Any:
            with lock:
                seen["now"] += 1
                seen["max"] = max(seen["max"], seen["now"])
            try:
                time.sleep(0.2)
                return fn(*args)
            finally:
                with lock:
                    seen["now"] -= 1

        def hash(self, password: str) -> str:
            return str(self._counted(self.inner.hash, password))

        def verify(self, hashed: str, password: str) -> bool:
            return bool(self._counted(self.inner.verify, hashed, password))

        def check_needs_rehash(self, hashed: str) -> bool:
            return bool(self.inner.check_needs_rehash(hashed))

    monkeypatch.setattr(auth_mod, "password_hasher", Counted)
    return seen


@pytest.fixture()
def serve() -> Iterator[Any]:
    """Start a real uvicorn server for an app; yields a function app -> base URL."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: Any) -> str:
        port = free_port()
        srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=srv.run, daemon=True)
        thread.start()
        servers.append((srv, thread))
        deadline = time.time() + 30
        while not srv.started:
            assert time.time() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield start
    for srv, thread in servers:
        srv.should_exit = True
        thread.join(timeout=10)


def burst(base: str, n: int) -> list[int]:
    """``n`` bad logins at once, each its own client, with distinct (unknown) user names: every client fetches its
    login form first, then all post together (without the barrier the posts could trickle in one by one)."""
    statuses: list[int] = []
    together = threading.Barrier(n)

    def one(i: int) -> None:
        with httpx.Client(base_url=base, headers={"Origin": base}, timeout=60) as c:
            token = csrf_of(c.get("/login").text)
            together.wait(60)
            r = c.post("/login", data={"csrf": token, "username": f"nobody{i}", "password": "wrong password"})
            statuses.append(r.status_code)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def test_concurrent_password_hashes_are_bounded(db: Path, slow_hashes: dict[str, int], serve: Any) -> None:
    lenient = ThrottlePolicy(address_failures=1000)
    base = serve(create_app(db, WebSettings(hash_slots=2, hash_queue=64, throttle=lenient)))
    assert sorted(burst(base, 8)) == [401] * 8
    assert slow_hashes["max"] == 2
    # beyond the queue: answered 503 at once instead of piling up
    slow_hashes["max"] = 0
    base = serve(create_app(db, WebSettings(hash_slots=1, hash_queue=2, throttle=lenient)))
    statuses = burst(base, 12)
    assert slow_hashes["max"] == 1 and statuses.count(503) >= 1 and set(statuses) <= {401, 503}


# -- Origin check ----------------------------------------------------------------------------------------------
def test_posts_need_the_sites_origin(db: Path) -> None:
    org = client_for(db, "org")
    token = csrf_of(org.get("/").text)
    url, data = "/pairs/sbs/overlap", {"csrf": token, "overlap": "1"}
    for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": "http://127.0.0.1:8001"},
                    {"Origin": "", "Referer": "http://evil.example/page"}):
        r = org.post(url, data=data, headers=headers, follow_redirects=False)
        assert r.status_code == 403 and "Origin check" in r.text, headers
    no_headers = TestClient(org.app, base_url=ORIGIN)  # neither Origin nor Referer
    no_headers.cookies = org.cookies
    assert no_headers.post(url, data=data).status_code == 403
    assert count(db, "SELECT overlap FROM pairsets WHERE id = 'sbs'") == 3  # nothing written
    # a Referer of this site is enough when a browser sends no Origin
    no_headers.headers["Referer"] = ORIGIN + "/pairs/sbs/agreement"
    assert no_headers.post(url, data=data, follow_redirects=False).status_code == 303
    # an origin allowed explicitly (a reverse proxy that rewrites the Host header)
    proxied = client_for(db, "org", WebSettings(allowed_origins=("https://grading.example.org",)))
    r = proxied.post(url, data={"csrf": csrf_of(proxied.get("/").text), "overlap": "2"},
                     headers={"Origin": "https://grading.example.org"}, follow_redirects=False)
    assert r.status_code == 303 and count(db, "SELECT overlap FROM pairsets WHERE id = 'sbs'") == 2
    # the login form too
    anon = client_for(db)
    r = anon.post("/login", data={"csrf": csrf_of(anon.get("/login").text), "username": "alice",
                                  "password": PASSWORD}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403


# -- cookies, proxy ----------------------------------------------------------------------------------------------
def test_secure_cookies_and_root_path(db: Path) -> None:
    plain = client_for(db)
    assert "secure" not in plain.get("/login").headers["set-cookie"].lower()
    secure = TestClient(create_app(db, WebSettings(secure_cookies=True)), base_url="https://grading.example.org",
                        headers={"Origin": "https://grading.example.org"})
    page = secure.get("/login")
    assert "; secure" in page.headers["set-cookie"].lower()
    r = secure.post("/login", data={"csrf": csrf_of(page.text), "username": "alice", "password": PASSWORD},
                    follow_redirects=False)
    cookie = r.headers["set-cookie"].lower()
    assert r.status_code == 303 and cookie.startswith(SESSION_COOKIE) and "; secure" in cookie
    assert "httponly" in cookie and "samesite=strict" in cookie
    # served under /grading by a reverse proxy: links, forms, redirects and cookies carry the prefix
    sub = TestClient(create_app(db), base_url=ORIGIN, headers={"Origin": ORIGIN}, root_path="/grading")
    r = sub.get("/grading/", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/grading/login?next=/"
    page = sub.get("/grading/login")
    assert 'action="/grading/login"' in page.text and 'href="/grading/static/style.css"' in page.text
    assert "path=/grading" in page.headers["set-cookie"].lower()
    r = sub.post("/grading/login", data={"csrf": csrf_of(page.text), "username": "alice", "password": PASSWORD,
                                         "next": "/exam/exam-a"}, follow_redirects=False)
    assert r.headers["location"] == "/grading/exam/exam-a"
    assert 'href="/grading/exam/exam-a/examinee/1"' in sub.get("/grading/exam/exam-a").text


def test_serve_passes_the_proxy_options(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(app=app, **kw))
    r = CliRunner().invoke(cli_with_web(), [
        "serve", "--db", str(db), "--host", "0.0.0.0", "--secure-cookies", "--root-path", "/grading",
        "--forwarded-allow-ips", "10.0.0.5", "--allowed-origin", "https://grading.example.org"])
    assert r.exit_code == 0, r.output
    settings = seen["app"].state.settings
    assert settings.secure_cookies and settings.allowed_origins == ("https://grading.example.org",)
    assert seen["root_path"] == "/grading" and settings.trusted_proxies == ("10.0.0.5",)
    assert seen["proxy_headers"] is False  # uvicorn trusts no one: the app reads the headers of trusted proxies
    assert "Secure" not in r.output  # no warning with --secure-cookies
    r = CliRunner().invoke(cli_with_web(), ["serve", "--db", str(db), "--root-path", "grading/"])
    assert r.exit_code == 2 and "--root-path" in r.output
    r = CliRunner().invoke(cli_with_web(), ["serve", "--db", str(db), "--allowed-origin", "grading.example.org"])
    assert r.exit_code == 2 and "--allowed-origin" in r.output


def serve_as_cli(db: Path, monkeypatch: pytest.MonkeyPatch, serve_threads: list[Any], *options: str) -> str:
    """``knockout serve`` with ``options``, run by a real uvicorn server with the arguments the command gives
    ``uvicorn.run`` (on a free loopback port, in a thread); returns its base URL."""
    port = free_port()

    def run(app: Any, **kw: Any) -> None:
        srv = uvicorn.Server(uvicorn.Config(app, **kw))
        thread = threading.Thread(target=srv.run, daemon=True)
        thread.start()
        serve_threads.append((srv, thread))
        deadline = time.time() + 30
        while not srv.started:
            assert time.time() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)

    monkeypatch.setattr(uvicorn, "run", run)
    r = CliRunner().invoke(cli_with_web(), ["serve", "--db", str(db), "--port", str(port), *options])
    assert r.exit_code == 0, r.output
    return f"http://127.0.0.1:{port}"


@pytest.fixture()
def serve_threads() -> Iterator[list[Any]]:
    threads: list[Any] = []
    yield threads
    for srv, thread in threads:
        srv.should_exit = True
        thread.join(timeout=10)


def failed_logins_with_forwarded_for(base: str, n: int) -> list[int]:
    """``n`` bad logins (distinct unknown users) from this one client, each claiming another address."""
    with httpx.Client(base_url=base, headers={"Origin": base}, timeout=60) as c:
        statuses = []
        for i in range(n):
            forwarded = {"X-Forwarded-For": f"203.0.113.{i + 1}"}
            token = csrf_of(c.get("/login", headers=forwarded).text)
            r = c.post("/login", data={"csrf": token, "username": f"nobody{i}", "password": "wrong password"},
                       headers=forwarded)
            statuses.append(r.status_code)
    return statuses


def test_forwarded_for_is_ignored_unless_a_proxy_is_trusted(
        db: Path, monkeypatch: pytest.MonkeyPatch, serve_threads: list[Any]) -> None:
    """A local client cannot dodge the per-address limit (20 failures) by claiming other addresses in
    X-Forwarded-For: by default the header is ignored; with --trust-proxy it is the client's address."""
    base = serve_as_cli(db, monkeypatch, serve_threads)
    statuses = failed_logins_with_forwarded_for(base, 30)
    assert statuses == [401] * 20 + [429] * 10, statuses
    assert count(db, "SELECT COUNT(DISTINCT key) FROM web_login_failures WHERE scope = 'address'") == 1

    store = Store(db)
    store.db.execute("DELETE FROM web_login_failures")
    store.close()
    base = serve_as_cli(db, monkeypatch, serve_threads, "--trust-proxy")
    assert failed_logins_with_forwarded_for(base, 30) == [401] * 30
    assert count(db, "SELECT COUNT(DISTINCT key) FROM web_login_failures WHERE scope = 'address' "
                 "AND key LIKE '203.0.113.%'") == 30
    # the app factory: off by default, on for the proxies named
    assert not any(m.cls.__name__ == "ProxyHeadersMiddleware" for m in create_app(db).user_middleware)
    trusted = create_app(db, WebSettings(trusted_proxies=("10.0.0.5",)))
    proxied = TestClient(trusted, base_url=ORIGIN, headers={"Origin": ORIGIN, "X-Forwarded-For": "198.51.100.7"},
                         client=("10.0.0.5", 1000))
    assert try_login(proxied, "nobody", "wrong").status_code == 401
    assert count(db, "SELECT COUNT(*) FROM web_login_failures WHERE key = '198.51.100.7'") == 1
    r = CliRunner().invoke(cli_with_web(), ["serve", "--db", str(db), "--forwarded-allow-ips", " , "])
    assert r.exit_code == 2 and "--forwarded-allow-ips" in r.output


# -- ids with '/' ------------------------------------------------------------------------------------------------
def slash_store(path: Path) -> Path:
    qs = [Question(id="nlp/q/1", text="First?", max_points=2, exam_id="nlp/2023"),
          Question(id="nlp/q/2", text="Second?", max_points=2, exam_id="nlp/2023")]
    answers = [Answer(id=f"{q.id}/{s}", question_id=q.id, examinee=s, text=f"answer of {s}")
               for q in qs for s in ("s/1", "s/2")]
    store = Store(path)
    ExamGrades(store).import_items(ItemSet(qs, answers, source="test"))
    PairAnnotations(store).import_pairs([PairItem(id=f"p/{i}", question="q", answer_a="a", answer_b="b")
                                         for i in range(2)], "round/1")
    Accounts(store).add_user("alice", PASSWORD)
    Assignments(store).assign("alice", "exam", "nlp/2023")
    Assignments(store).assign("alice", "pairset", "round/1")
    Accounts(store).add_user("org", PASSWORD, "organizer")
    store.close()
    return path


def test_ids_with_slashes_are_routable(tmp_path: Path) -> None:
    db = slash_store(tmp_path / "s.db")
    alice = client_for(db, "alice")
    home = alice.get("/").text
    assert 'href="/exam/nlp%2F2023"' in home and 'href="/pairs/round%2F1"' in home
    assert "Exam nlp/2023" in alice.get("/exam/nlp%2F2023").text
    r = alice.get("/exam/nlp%2F2023/examinee/1", follow_redirects=False)
    assert r.headers["location"] == "/exam/nlp%2F2023/examinee/1/q/1"
    page = alice.get(r.headers["location"])
    assert page.status_code == 200 and "First?" in page.text
    r = alice.post("/exam/nlp%2F2023/examinee/1/q/2", data={"csrf": csrf_of(page.text), "score": "1.5",
                                                            "version": "0", "action": "next"},
                   follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/exam/nlp%2F2023/examinee/2/q/1"
    assert alice.get("/exam/nlp%2F2023/q/2/info").status_code == 200
    r = alice.get("/pairs/round%2F1", follow_redirects=False)
    assert r.headers["location"] == "/pairs/round%2F1/item/1"
    r = alice.post(r.headers["location"], data={"csrf": csrf_of(page.text), "choice": "left", "version": "0"},
                   follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/pairs/round%2F1"
    assert "Agreement on round/1" in alice.get("/pairs/round%2F1/agreement").text
    org = client_for(db, "org")
    r = org.post("/pairs/round%2F1/overlap", data={"csrf": csrf_of(org.get("/").text), "overlap": "2"},
                 follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/pairs/round%2F1/agreement"
    store = Store(db)
    try:
        assert [g["answer_id"] for g in ExamGrades(store).grades()] == [
            next(e for e in ExamGrades(store).exam("nlp/2023").examinees if e.number == 1)  # type: ignore[union-attr]
            .answers["nlp/q/2"].id]
        assert len(PairAnnotations(store).verdicts("round/1")) == 1
    finally:
        store.close()


# -- bounded form values ----------------------------------------------------------------------------------------
HUGE = "9" * 400
BAD_VALUES = ["", " ", "abc", "-1", "1e309", "-1e309", "nan", "inf", "9" * 30, HUGE, "1" * 200_000, "0x10",
              "\x00", "é" * 3000, "<script>", "../../etc/passwd", "1,5,5", "2147483648", "-0"]


def api_routes(app: Any) -> list[APIRoute]:
    """Every route of the app (FastAPI >= 0.165 keeps included routers nested: they are walked; the app's
    routers have no prefix)."""
    out, todo = [], list(app.routes)
    while todo:
        route = todo.pop(0)
        inner = getattr(route, "original_router", None)
        if inner is not None:
            todo[:0] = inner.routes
        elif isinstance(route, APIRoute):
            out.append(route)
    return out


def post_routes(app: Any) -> list[tuple[str, list[str]]]:
    """Every POST route of the app with its form fields (read from the routes, so new ones are covered)."""
    return [(r.path, [f.alias for f in r.dependant.body_params]) for r in api_routes(app) if "POST" in r.methods]


def concrete(path: str) -> str:
    return (path.replace("{exam_id:path}", "exam-a").replace("{pairset:path}", "sbs").replace("{n}", "1")
            .replace("{k}", "1").replace("{pos}", "1"))


def test_no_500_on_any_input(db: Path) -> None:
    org = client_for(db, "org")
    app = org.app
    routes = post_routes(app)
    assert {p for p, _ in routes} == {
        "/login", "/logout", "/account/password", "/exam/{exam_id:path}/examinee/{n}/q/{k}",
        "/exam/{exam_id:path}/q/{k}/info", "/pairs/{pairset:path}/item/{pos}", "/pairs/{pairset:path}/overlap",
        "/groups/{exam_id:path}/q/{k}"}  # issue 61's answer groups: fuzzed as every other form
    statuses: dict[int, int] = {}

    def check(r: httpx.Response, what: str) -> None:
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code < 500, f"{what}: {r.status_code} {r.text[:300]}"

    token = csrf_of(org.get("/").text)
    for path, fields in routes:
        if path == "/logout":
            continue  # tried last: it ends the session
        url = concrete(path)
        good = {f: "1" for f in fields} | {"csrf": token}
        for field in fields:
            for value in BAD_VALUES:
                check(org.post(url, data={**good, field: value}, follow_redirects=False),
                      f"{url} {field}={value!r:.40}")
            check(org.post(url, data={k: v for k, v in good.items() if k != field}, follow_redirects=False),
                  f"{url} without {field}")
        # malformed bodies: oversized, not a form, broken multipart, wrong lengths
        check(org.post(url, content=b"a=" + b"x" * (2**20 + 10), headers={
            "Content-Type": "application/x-www-form-urlencoded"}), f"{url} 1 MiB body")
        check(org.post(url, content=b"\xff\xfe%%%=&&=", headers={"Content-Type": "application/x-www-form-urlencoded"}),
              f"{url} bytes")
        check(org.post(url, content=b"--x\r\nbroken", headers={"Content-Type": "multipart/form-data; boundary=x"}),
              f"{url} multipart")
        check(org.post(url, json={"csrf": token}), f"{url} json")
        check(org.post(url, content=b"csrf=x", headers={"Content-Type": "application/x-www-form-urlencoded",
                                                         "Content-Length": "99999999999999999999"}), f"{url} length")
        check(org.post(url, files={"csrf": ("x.txt", b"file")}), f"{url} file upload")
    # path parameters out of range or malformed, on every GET route too
    for route in api_routes(app):
        if route.path:
            for n in ("0", "-1", "99999999999999999999999999", "abc", "1.5", "%00"):
                url = route.path.replace("{exam_id:path}", "exam-a").replace("{pairset:path}", "sbs")
                for p in ("{n}", "{k}", "{pos}", "{i}"):
                    url = url.replace(p, n)
                for method in route.methods:
                    data = {"csrf": token} if method == "POST" else None
                    if url != "/logout":
                        check(org.request(method, url, data=data, follow_redirects=False), f"{method} {url}")
    check(org.get("/login?next=" + "/" * 5000), "long next")
    check(org.post("/logout", data={"csrf": token * 100}), "logout with a long token")
    assert statuses.get(200, 0) + statuses.get(303, 0) < sum(statuses.values())  # most were refused
    assert set(statuses) <= {200, 303, 400, 401, 403, 404, 409, 413, 429}


# -- confined figures ------------------------------------------------------------------------------------------
def test_figures_are_served_only_from_copies_made_at_import(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "figs").mkdir(parents=True)
    (data / "figs" / "fig.png").write_bytes(PNG)
    (data / "notes.txt").write_text("not an image")
    (tmp_path / "outside.png").write_bytes(PNG)
    (data / "link.png").symlink_to(tmp_path / "outside.png")
    refs = [str(data / "figs" / "fig.png"), "/etc/passwd", "../outside.png", "../../x", "notes.txt", "link.png",
            "https://example.org/fig.png", "figs/fig.png"]
    q = Question(id="q1", text="See the figures.", max_points=2, exam_id="e", images=refs)
    (data / "e.jsonl").write_text("")  # the data file: its folder is where figures may come from
    items = ItemSet([q], [Answer(id="a1", question_id="q1", examinee="s", text="x")], source=str(data / "e.jsonl"))
    path = tmp_path / "store.db"
    store = Store(path)
    imported = ExamGrades(store).import_items(items)
    Accounts(store).add_user("org", PASSWORD, "organizer")
    store.close()
    assert imported.images.copied == 2
    assert imported.images.skipped == {"outside the data folder": 4, "not an image": 1, "not a local file": 1}
    copies = list((tmp_path / "store.db.files").iterdir())
    assert len(copies) == 1 and copies[0].read_bytes() == PNG  # content-addressed: one copy of the same bytes
    (data / "figs" / "fig.png").write_bytes(b"changed after import")
    org = client_for(path, "org")
    page = org.get("/exam/e/examinee/1/q/1").text
    assert page.count("<img ") == 2 and "not copied into the store" in page
    served = {i: org.get(f"/exam/e/image/1/{i}") for i in range(len(refs))}
    assert {i for i, r in served.items() if r.status_code == 200} == {0, 7}
    assert all(r.content == PNG and r.headers["content-type"] == "image/png" for i, r in served.items() if i in (0, 7))
    assert all(b"root:" not in r.content for r in served.values())
