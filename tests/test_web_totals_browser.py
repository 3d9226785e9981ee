"""Exam totals in a real browser: Playwright driving Debian's headless chromium against a real uvicorn
server; the totals appear on the grading page of the SciEx example exam and change when a grade is saved.

Skipped when /usr/bin/chromium or Playwright is absent.  Screenshot: /tmp/knockout-web-totals.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_web_browser import CHROMIUM, browser, log_in, page, serve  # noqa: F401

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
]

from playwright.sync_api import Page  # noqa: E402

from tests.test_web_totals import numbers, sciex_store  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    db = sciex_store(tmp_path_factory.mktemp("totals") / "store.db")
    with serve(db) as url:
        yield url, db


def test_totals_appear_and_update_after_a_save(server: tuple[str, Path], page: Page) -> None:  # noqa: F811
    base, db = server
    n = numbers(db, "cs-basics-de")["sample-a"]
    log_in(page, base, "prof")
    page.goto(f"{base}/exam/cs-basics-de/examinee/{n}/q/1")
    totals = page.locator("#totals")
    assert totals.is_visible()
    assert page.inner_text("#total-points") == "0 of 0 graded points"
    assert page.inner_text("#total-ungraded").startswith("0 graded, 6 still ungraded")
    assert page.inner_text("#max-total") == "16"
    assert page.inner_text("#student-total") == "9.9 points (61.9%)"
    assert page.inner_text("#student-german") == "2.7"
    assert page.inner_text("#gold").startswith("Gold answer (Deutsch)")

    page.fill("#score", "2")
    page.click("#save-next")  # on to question 2, totals already counting question 1
    assert page.url.endswith(f"/examinee/{n}/q/2")
    assert page.inner_text("#total-points") == "2 of 2 graded points (100.0%)"
    assert page.inner_text("#total-german") == "1.0 (provisional: from the graded questions)"
    page.fill("#score", "0.5")
    page.click("button[value=save]")
    assert page.locator(".saved").is_visible()
    assert page.inner_text("#total-points") == "2.5 of 5 graded points (50.0%)"
    assert page.inner_text("#total-ungraded").startswith("2 graded, 4 still ungraded")
    assert page.inner_text("#total-german") == "4.0 (provisional: from the graded questions)"
    page.screenshot(path="/tmp/knockout-web-totals.png", full_page=True)
    page.goto(f"{base}/exam/cs-basics-de")
    assert page.locator("#examinees td.total").filter(has_text="2.5 / 5").count() == 1
