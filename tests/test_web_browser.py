"""The web app in a real browser: Playwright driving Debian's headless chromium against a real uvicorn server.

Skipped when /usr/bin/chromium or Playwright is absent.  Screenshots go to /tmp/knockout-web-*.png.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
]
pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")

import uvicorn  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

from knockout.annotations import ExamGrades, PairAnnotations  # noqa: E402
from knockout.storage._store import Store  # noqa: E402
from knockout.web import _auth as auth_mod  # noqa: E402
from knockout.web._app import create_app  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.test_web_app import CHEAP_ARGON2, PASSWORD, build_store  # noqa: E402


@contextmanager
def serve(db: Path) -> Iterator[str]:
    """A real uvicorn server on a free loopback port serving ``db`` (cheap argon2 parameters); yields its URL."""
    saved = dict(auth_mod.ARGON2_PARAMS)
    auth_mod.ARGON2_PARAMS.update(CHEAP_ARGON2)
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(db), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
        auth_mod.ARGON2_PARAMS.clear()
        auth_mod.ARGON2_PARAMS.update(saved)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real uvicorn server on a free loopback port, serving a fresh store."""
    db = build_store(tmp_path_factory.mktemp("browser") / "store.db")
    with serve(db) as url:
        yield url, db


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM),
                              args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()


@pytest.fixture()
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh browser context's page; its default timeout is the test module's ``PAGE_TIMEOUT_MS`` (15 s unless
    the module names another: the answer-group pages cluster on their first visit)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(getattr(request.module, "PAGE_TIMEOUT_MS", 15000))
    yield pg
    context.close()


def log_in(page: Page, base: str, user: str, password: str = PASSWORD) -> None:
    page.goto(base + "/")
    assert "/login" in page.url
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def test_grade_three_answers_and_reload(server: tuple[str, Path], page: Page) -> None:
    base, db = server
    log_in(page, base, "alice", "not the password")
    assert page.locator(".error").inner_text() == "Wrong user name or password."
    assert "/login" in page.url
    log_in(page, base, "alice")
    page.click("text=exam-a")
    page.click("text=Examinee 2")
    assert page.url.endswith("/exam/exam-a/examinee/2/q/1")
    for score in ("3.5", "1", "0.5"):
        page.fill("#score", score)
        page.fill("#comment", f"comment {score}")
        page.click("#save-next")
    # after the third question "save and next" moved on; go back over the three and reload each
    for k, score in ((1, "3.5"), (2, "1"), (3, "0.5")):
        page.goto(f"{base}/exam/exam-a/examinee/2/q/{k}")
        page.reload()
        assert page.input_value("#score") == score
        assert page.input_value("#comment") == f"comment {score}"
    assert "3 / 3 graded" in page.inner_text("nav.side")
    page.screenshot(path="/tmp/knockout-web-grading.png", full_page=True)
    store = Store(db)
    try:
        mine = ExamGrades(store).grades(exam_id="exam-a", grader="alice")
    finally:
        store.close()
    assert sorted(g["score"] for g in mine) == [0.5, 1.0, 3.5]


def test_xss_answer_is_inert(server: tuple[str, Path], page: Page) -> None:
    base, _ = server
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    log_in(page, base, "alice")
    found = False
    for n in (1, 2):
        page.goto(f"{base}/exam/exam-a/examinee/{n}/q/2")
        text = page.inner_text("#answer")
        if "window.__xss" in text:
            found = True
            assert "<script>window.__xss = 1</script>" in text  # shown as text
            assert page.locator("#answer script").count() == 0
            assert page.locator("#answer img").count() == 0
            assert page.locator("#answer strong").inner_text() == "bold"
    assert found
    assert page.evaluate("() => window.__xss") is None
    assert dialogs == []


def test_grader_of_exam_a_gets_403_on_exam_b(server: tuple[str, Path], page: Page) -> None:
    base, _ = server
    log_in(page, base, "alice")
    response = page.goto(f"{base}/exam/exam-b")
    assert response is not None and response.status == 403
    assert "not assigned" in page.inner_text("main")
    response = page.goto(f"{base}/exam/exam-b/examinee/1/q/1")
    assert response is not None and response.status == 403
    assert "Secret question" not in page.content()


def test_annotator_completes_five_items_and_agreement_updates(server: tuple[str, Path], page: Page) -> None:
    base, db = server
    # bob and carol judge the first five pairs the same way: "A better"
    store = Store(db)
    try:
        ann = PairAnnotations(store)
        for name in ("bob", "carol"):
            for view in ann.queue("sbs", name):
                if view.pair.id in {"p0", "p1", "p2", "p3", "p4"}:
                    ann.save_verdict(view, "sbs", name, "left" if not view.swapped else "right", base_version=0)
        before = ann.agreement("sbs")
        order = {v.position: v for v in ann.queue("sbs", "alice")}
    finally:
        store.close()
    assert before["cohen"][0]["kappa"] is None  # only one class so far: undefined

    log_in(page, base, "alice")
    page.goto(f"{base}/pairs/sbs/agreement")
    assert "0 / 6" in page.inner_text("main")
    fleiss_before = page.inner_text("#fleiss")
    page.goto(f"{base}/pairs/sbs")
    for _ in range(5):
        pos = int(page.url.rsplit("/", 1)[1])
        view = order[pos]
        assert page.inner_text("#left").strip() == view.left
        # alice: "A better" on p0..p2, "both bad" otherwise; she clicks by screen position
        a_side = "Right is better" if view.swapped else "Left is better"
        page.click(f"button:has-text('{a_side}')" if view.pair.id in {"p0", "p1", "p2"}
                   else "button:has-text('Both bad')")
    page.goto(f"{base}/pairs/sbs/agreement")
    main = page.inner_text("main")
    assert "5 / 6" in main
    assert page.inner_text("#fleiss") != fleiss_before
    assert page.inner_text("#fleiss-items") == "5"
    rows = page.locator("#cohen tbody tr").all_inner_texts()
    assert any("alice" in r and "bob" in r for r in rows)
    page.screenshot(path="/tmp/knockout-web-agreement.png", full_page=True)
    store = Store(db)
    try:
        ann = PairAnnotations(store)
        got = {v["pair_id"]: v["verdict"] for v in ann.verdicts("sbs") if v["annotator"] == "alice"}
    finally:
        store.close()
    expected = {p: "A" if p in {"p0", "p1", "p2"} else "D" for p in got}
    assert len(got) == 5 and got == expected


@pytest.fixture()
def hostile_site() -> Iterator[Any]:
    """Another origin (another loopback port) serving one page; yields a function html -> its URL."""
    import http.server

    pages: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            body = pages.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()

    def publish(html: str) -> str:
        pages["/attack.html"] = html.encode()
        return f"http://127.0.0.1:{httpd.server_address[1]}/attack.html"

    yield publish
    httpd.shutdown()
    thread.join(timeout=10)


def test_cross_origin_script_post_is_refused(server: tuple[str, Path], page: Page, hostile_site: Any) -> None:
    """A page on another origin whose script posts a form to the app, with the organizer's cookies (the
    same site: only the port differs, so SameSite does not stop them) and even a leaked CSRF token, is
    refused by the Origin check and changes nothing."""
    base, db = server
    log_in(page, base, "org")
    page.goto(f"{base}/pairs/sbs/agreement")
    token = page.locator("input[name=csrf]").first.get_attribute("value")
    url = hostile_site(
        f'<form id="f" method="post" action="{base}/pairs/sbs/overlap">'
        f'<input name="csrf" value="{token}"><input name="overlap" value="1"></form>'
        '<script>document.getElementById("f").submit()</script>')
    page.goto(url)
    page.wait_for_url(f"{base}/pairs/sbs/overlap")
    assert "Origin check" in page.inner_text("main")
    store = Store(db)
    try:
        assert PairAnnotations(store).pairset("sbs")["overlap"] == 3  # type: ignore[index]
    finally:
        store.close()
    # the same form on the app's own page works
    page.goto(f"{base}/pairs/sbs/agreement")
    page.fill("input[name=overlap]", "2")
    page.click("form.inline button:has-text('Set')")
    page.wait_for_url(f"{base}/pairs/sbs/agreement")
    store = Store(db)
    try:
        assert PairAnnotations(store).pairset("sbs")["overlap"] == 2  # type: ignore[index]
    finally:
        store.close()
