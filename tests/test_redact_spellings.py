"""Redaction by structure (issue 49): a key given in any spelling the judge's spec parser accepts is never stored
nor shown.

The spellings: the option name percent-encoded (``api%5Fkey``, ``api_ke%79``), the value percent-encoded, the key
as a server URL's user name or in a password holding ``@``, in ``base_url``'s own query (given plainly with its
``&`` encoded, or percent-encoded: ``%3Fkey%3D``, ``%3Fsig%3D``), and keys holding ``)``, ``@``, ``&``, ``%``,
``+``, quotes.  A fast property test reads each spec as the judge reads it (``parse_spec``) and checks that the
judge gets the key and the redacted spec, the command-line argument and the free-text redaction hide it; the
end-to-end property test grades juries of such members through the loopback fake server, which echoes each
request's key (``Bearer KEY`` in a 401 error, and in replies), and looks for every key in every table of the
store (compressed columns and blobs decompressed), in what the readers print and write (runs, report, export,
report HTML) and in the web pages of every role.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knockout._redact import redact, redact_arg, redact_spec, spec_secrets
from knockout.judges import parse_spec
from tests.fake_server import FakeAPI, chat_body, fake_api, write_exam
from tests.test_secrets import cli, texts_of_store

#: every key is two marked parts around an odd character: a redaction that stops at the odd character leaves
#: the second part, which the checks find
MARK = "zqk"
ODD = ")@&%+=#?/:;,!$'*~\"( "
HOST = "127.0.0.1:9"  # the fast test's server (never reached)


@st.composite
def keys(draw: st.DrawFn) -> str:
    part = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=6, max_size=10)
    return f"{MARK}{draw(part)}{draw(st.sampled_from(ODD))}{MARK}{draw(part)}"


def parts(key: str) -> list[str]:
    return re.findall(MARK + r"[a-z0-9]+", key)


def enc(text: str, draw: st.DrawFn, *, must: str = "&%+#") -> str:
    """``text`` percent-encoded for a spec's option value: the characters that would split or change it always,
    and each other character maybe."""
    out = []
    for ch in text:
        if ch in must or draw(st.integers(0, 3)) == 0:
            out.append(quote(ch, safe=""))
        else:
            out.append(ch)
    return "".join(out)


def enc_name(name: str, draw: st.DrawFn) -> str:
    """An option name with some of its characters percent-encoded (``api%5Fkey``, ``api_ke%79``)."""
    return "".join(f"%{ord(ch):02X}" if draw(st.booleans()) else ch for ch in name)


@dataclass
class Member:
    spec: str
    keys: list[str]
    api_key: str | None  # the key the judge sends as its bearer token


@st.composite
def members(draw: st.DrawFn, host: str = HOST, model: str = "m") -> Member:
    """A judge spec holding keys in the spellings the spec parser accepts."""
    planted: list[str] = []
    options: list[str] = []
    how = draw(st.sampled_from(["plain", "user", "password", "query", "encoded-query", "fragment"]))
    url = f"http://{host}/v1"
    if how != "plain":
        k = draw(keys())
        planted.append(k)
        ku = quote(k, safe="")  # as it stands in a URL
        if how == "user":
            url = f"http://{ku}@{host}/v1"
        elif how == "password":
            url = f"http://u:{quote(k, safe='@')}@{host}/v1"  # an ``@`` of the password as written
        elif how == "query":
            name = draw(st.sampled_from(["key", "sig", "code", "api-version2", "token"]))
            url = f"http://{host}/v1?api-version=2024&{name}={ku}"
        elif how == "fragment":
            url = f"http://{host}/v1#{ku}"
        else:  # the query percent-encoded into base_url (decoded once by the spec parser)
            name = draw(st.sampled_from(["key", "sig"]))
            url = f"http://{host}/v1%3F{name}%3D{quote(ku, safe='')}"
            options.append(f"base_url={url}")
            url = ""
    if url:
        options.append(f"base_url={enc(url, draw, must='&%+#' if how != 'encoded-query' else '&+#')}")
    api_key = None
    if how == "plain" or draw(st.booleans()):
        api_key = draw(keys())
        planted.append(api_key)
        name = enc_name("api_key", draw)
        options.append(f"{name}={enc(api_key, draw)}")
    options.append("retries=0")
    order = draw(st.permutations(options))
    return Member(f"openai:{model}?{'&'.join(order)}", planted, api_key)


def hidden(text: str, planted: list[str], where: str) -> None:
    squeezed = re.sub(r"[\s│┃|─━]", "", text)
    for k in planted:
        for p in parts(k):
            assert p not in text and p not in squeezed, f"{where}: {p} of {k!r} in {text[:3000]}"


@settings(max_examples=300, deadline=None)
@given(members())
def test_a_key_in_any_spelling_is_read_by_the_judge_and_hidden(m: Member) -> None:
    backend, model, options = parse_spec(m.spec)
    assert backend == "openai" and model == "m"
    if m.api_key is not None:  # the judge reads the key as planted, whatever its spelling
        assert options["api_key"] == m.api_key, (m.spec, options)
    secrets = spec_secrets(m.spec)
    for k in m.keys:
        assert any(k == s or k in s for s in secrets), (m.spec, k, secrets)
    shown = redact_spec(m.spec)
    hidden(shown, m.keys, f"redact_spec({m.spec!r})")
    assert shown.startswith("openai:m?") and "retries=0" in shown
    hidden(redact_arg(m.spec), m.keys, "argument")
    hidden(redact_arg(f"--judge={m.spec}"), m.keys, "--judge= argument")
    hidden(redact(f"error: judge spec '{m.spec}': bad"), m.keys, "free text")
    # what is shown is itself a spec the judge reads, its secrets as ``***``
    _, _, shown_options = parse_spec(shown)
    if "api_key" in options:
        assert shown_options["api_key"] == "***"


def answer_echoing(server: list[FakeAPI]) -> Any:
    """A reply that echoes the request's key: a 401 error for every fifth request, else a grade whose
    explanation quotes the key."""
    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        auth = server[0].authorizations[n - 1] or ""
        if n % 5 == 0:
            return 401, json.dumps({"error": {"message": f"Incorrect API key provided: {auth}",
                                              "type": "invalid_request_error", "code": "invalid_api_key"}}).encode()
        return 200, chat_body(f"Explanation: you sent {auth}.\nScore: {n % 3}/2")
    return answer


@contextmanager
def echoing_server() -> Iterator[FakeAPI]:
    box: list[FakeAPI] = []
    with fake_api(answer_echoing(box)) as server:
        box.append(server)
        yield server


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAPI]:
    with echoing_server() as s:
        yield s


@pytest.fixture(scope="module")
def exam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_exam(tmp_path_factory.mktemp("exam") / "exam.jsonl", questions=1, answers=3)


def _pages(db: Path, user: str, run_ids: list[str]) -> dict[str, str]:
    from tests.test_web_app import client_for

    c = client_for(db, user)
    seen: dict[str, str] = {}
    todo = ["/", "/runs", *(f"/runs/{r}" for r in run_ids)]
    while todo and len(seen) < 40:
        url = todo.pop(0)
        if url in seen:
            continue
        r = c.get(url)
        seen[url] = r.text
        if "text/html" in r.headers.get("content-type", ""):
            todo += [u for u in re.findall(r'href="(/[^"#?]*)', r.text)
                     if not u.startswith(("/logout", "/static")) and u not in seen]
    return seen


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_key_in_any_spelling_is_stored_or_shown(server: FakeAPI, exam: Path, data: st.DataObject,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("argon2")
    from knockout.storage import Store
    from knockout.web import _auth as auth_mod
    from knockout.web._auth import Accounts
    from tests.test_web_app import CHEAP_ARGON2, PASSWORD

    monkeypatch.setattr(auth_mod, "ARGON2_PARAMS", {**auth_mod.ARGON2_PARAMS, **CHEAP_ARGON2})
    host = server.url.removeprefix("http://").removesuffix("/v1")
    jury = [data.draw(members(host=host, model=f"m{i}"), label=f"member {i}") for i in range(3)]
    planted = [k for m in jury for k in m.keys]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        db = d / "s.db"
        args = ["grade", str(exam), *(x for m in jury for x in ("--judge", m.spec)), "-o", str(db), "-q"]
        out = cli(*args, "--json", code=3)  # every fifth request refused: the run is incomplete
        hidden(out, planted, "grade --json")
        assert any(a and "zqk" in a for a in server.authorizations)  # the keys did reach the server
        for where, text in texts_of_store(db):
            hidden(text, planted, where)
        s = str(db)
        for what in (["runs", s], ["runs", s, "--json"], ["report", s, "--json", "--resamples", "0"],
                     ["report", s, "--resamples", "0"], ["export", s, "--partial"],
                     ["export", s, "--partial", "--format", "jsonl"]):
            hidden(cli(*what), planted, " ".join(what[:1] + what[2:]))
        cli("report", s, "--resamples", "0", "--html", str(d / "r.html"))
        hidden((d / "r.html").read_text(), planted, "report --html")
        with Store(db) as st_:
            Accounts(st_).add_user("vic", PASSWORD, "viewer")
            Accounts(st_).add_user("org", PASSWORD, "organizer")
            run_ids = [r.id for r in st_.runs()]
        for user in ("vic", "org"):
            pages = _pages(db, user, run_ids)
            assert any("/item/" in u for u in pages), sorted(pages)
            for url, text in pages.items():
                hidden(text, planted, f"{user} {url}")
