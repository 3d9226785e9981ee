"""No API key of a judge in a store or in anything that reads one (issue 42).

A jury of two ``openai:`` judges with ``api_key`` in their specs, and an experiment judge without ``name``,
answer through the loopback fake server (tests/fake_server.py): the keys reach the server (each request's
``Authorization`` header), and none is found in any table of the store (every text and blob column, compressed
blobs and snapshots decompressed) nor in what any reader prints or writes: the grade summary, ``runs`` (table
and ``--json``), ``export`` (csv, jsonl, parquet), ``report --json`` and ``--html``, ``gradebook --json``, the
experiment's comparison, and every page of the web app for every role (the viewer's /runs transcript pages
included).  A store written before the redaction is redacted when it is opened (schema steps 43 and 44): one
hand-edited, and one written by the code of an older commit (``git archive``), its jury results keyed by the raw
member specs.  The spellings of a key the spec parser accepts: tests/test_redact_spellings.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app
from knockout.storage import Store
from tests.fake_server import FakeAPI, chat_body, fake_api, write_exam

register_extensions(app)

KEY1, KEY2, KEY3 = "sk-planted-secret-one", "sk-planted-secret-two", "sk-planted-secret-exp"
PLANTED = "planted-secret"
ENV = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "COLUMNS": "400"}


def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
    """A grade of 0, 1 or 2 fixed by the request's content (so that the grades vary and correlate)."""
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
    return 200, chat_body(f"Explanation: read.\nScore: {digest[0] % 3}/2")


def cli(*args: str, code: int = 0) -> str:
    """The command's stdout and stderr together."""
    res = CliRunner().invoke(app, list(args), env=ENV)
    text = res.output + (res.stderr if res.stderr_bytes is not None else "")
    assert res.exit_code == code, (args, text, res.exception)
    return text


def no_key(text: str, where: str) -> None:
    """No planted key in ``text``, also where a table wrapped it (white space and box lines taken out)."""
    squeezed = re.sub(r"[\s│┃|─━]", "", text)
    assert PLANTED not in text and PLANTED not in squeezed, f"{where}: {text[:3000]}"


def texts_of_store(path: Path) -> Iterator[tuple[str, str]]:
    """(table.column, text) of every text and blob value of every table of the store, compressed values
    decompressed (request blobs through the store's own reader: its preset dictionaries)."""
    with Store(path) as store:
        blobs = {bytes(h): store.get_blob(bytes(h).hex()) for (h,) in store.db.execute("SELECT hash FROM blobs")}
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            for row in db.execute(f"SELECT * FROM {table}"):
                for col, value in zip(cols, row, strict=True):
                    if isinstance(value, str):
                        yield f"{table}.{col}", value
                    elif isinstance(value, bytes):
                        yield f"{table}.{col}", _bytes_text(value)
    finally:
        db.close()
    for h, data in blobs.items():
        yield f"blobs[{h.hex()[:8]}]", data.decode("utf-8", "replace")


def _bytes_text(value: bytes) -> str:
    with contextlib.suppress(zlib.error):
        value = zlib.decompress(value)
    return value.decode("utf-8", "replace")


def store_has_no_key(path: Path) -> int:
    n = 0
    for where, text in texts_of_store(path):
        no_key(text, where)
        n += 1
    return n


@pytest.fixture(scope="module")
def jury_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, FakeAPI, str, str]]:
    """A store with a jury of two ``openai:`` judges whose specs hold their keys (graded through the CLI);
    (store, folder, server, the summary printed, the summary printed as JSON)."""
    d = tmp_path_factory.mktemp("secrets")
    data = write_exam(d / "exam.jsonl", questions=2, answers=4)
    with fake_api(answer) as server:
        judges = [f"openai:m1?base_url={server.url}&api_key={KEY1}", f"openai:m2?api_key={KEY2}&base_url={server.url}"]
        args = ["grade", str(data), "--judge", judges[0], "--judge", judges[1], "-o", str(d / "s.db"), "-q"]
        res = subprocess.run([sys.executable, "-m", "knockout.cli", *args], capture_output=True, text=True,
                             timeout=300, env={**os.environ, **ENV})  # a process: its command line is stored
        assert res.returncode == 0, res.stderr
        printed = res.stdout + res.stderr
        as_json = cli(*args, "--json")
        yield d / "s.db", d, server, printed, as_json


def test_the_keys_reach_the_server_not_the_store(jury_store: tuple[Path, Path, FakeAPI, str, str]) -> None:
    store, _, server, printed, as_json = jury_store
    sent = {a for a in server.authorizations}
    assert sent == {f"Bearer {KEY1}", f"Bearer {KEY2}"}, sent  # each judge sent its own key
    assert server.hits == 2 * 2 * 4  # two members x 8 answers; the --json rerun came from the store
    no_key(printed, "grade summary")
    no_key(as_json, "grade --json")
    summary = json.loads(as_json)
    assert summary["judge_calls"] == 0 and "api_key=***" in summary["judge"], summary["judge"]
    assert store_has_no_key(store) > 50
    with Store(store) as st:
        jury = next(r for r in st.runs() if r.kind == "jury")
    labels = [m["label"] for m in jury.config["members"]]
    assert labels == [f"openai:m1?base_url={server.url}&api_key=***", f"openai:m2?api_key=***&base_url={server.url}"]
    assert "api_key=***" in jury.config["command"]["argv"]  # the command line that resumes it


def test_the_key_is_no_part_of_the_cache_identity(jury_store: tuple[Path, Path, FakeAPI, str, str],
                                                  tmp_path: Path) -> None:
    """Another key for the same server and model: the same run, every reply from the store."""
    store, d, server, _, _ = jury_store
    copy = tmp_path / "copy.db"
    copy.write_bytes(store.read_bytes())
    before = server.hits
    out = cli("grade", str(d / "exam.jsonl"), "--judge", f"openai:m1?base_url={server.url}&api_key=sk-planted-secret-3",
              "--judge", f"openai:m2?base_url={server.url}&api_key=sk-planted-secret-4", "-o", str(copy), "-q",
              "--json")
    assert json.loads(out)["judge_calls"] == 0 and server.hits == before
    no_key(out, "rerun with other keys")
    store_has_no_key(copy)


def test_every_reader_shows_no_key(jury_store: tuple[Path, Path, FakeAPI, str, str]) -> None:
    store, d, _, _, _ = jury_store
    s = str(store)
    outputs = {
        "runs": cli("runs", s),
        "runs --json": cli("runs", s, "--json"),
        "export csv": cli("export", s),
        "export jsonl": cli("export", s, "--format", "jsonl"),
        "export csv answers": cli("export", s, "--table", "answers", "--format", "csv", "-O", str(d / "a.csv")),
        "report": cli("report", s, "--resamples", "0"),
        "report --json": cli("report", s, "--json", "--resamples", "0"),
        "compare": cli("compare", s, s, "--resamples", "0"),
        "gradebook": cli("gradebook", s),
        "gradebook --json": cli("gradebook", s, "--json", "-o", str(d / "book.csv")),
    }
    assert "api_key=***" in outputs["runs --json"]
    for where, text in outputs.items():
        no_key(text, where)
    no_key((d / "a.csv").read_text(), "export --table answers")
    no_key((d / "book.csv").read_text(), "gradebook file")
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    for table in ("answers", None):
        out = d / f"{table}.parquet"
        cli("export", s, "--format", "parquet", *(["--table", table] if table else []), "-O", str(out))
        no_key(json.dumps(pq.read_table(out).to_pylist(), default=str), f"export parquet {table}")
        no_key(json.dumps({k.decode(): v.decode("utf-8", "replace")
                           for k, v in (pq.read_schema(out).metadata or {}).items()}), "parquet metadata")
    pytest.importorskip("matplotlib")
    cli("report", s, "--resamples", "0", "--html", str(d / "r.html"))
    html = (d / "r.html").read_text()
    assert "api_key=***" in html
    no_key(html, "report --html")


def test_every_web_page_shows_no_key(jury_store: tuple[Path, Path, FakeAPI, str, str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("argon2")
    from knockout.web import _auth as auth_mod
    from knockout.web._auth import Accounts
    from tests.test_web_app import CHEAP_ARGON2, PASSWORD, client_for

    store, d, _, _, _ = jury_store
    web = d / "web.db"
    web.write_bytes(store.read_bytes())
    monkeypatch.setattr(auth_mod, "ARGON2_PARAMS", {**auth_mod.ARGON2_PARAMS, **CHEAP_ARGON2})
    cli("import", str(d / "exam.jsonl"), "--db", str(web), "--exam", "exam")
    with Store(web) as st:
        accounts = Accounts(st)
        for user, role in (("vic", "viewer"), ("org", "organizer"), ("gus", "grader")):
            accounts.add_user(user, PASSWORD, role)
        run_ids = [r.id for r in st.runs()]
    for user in ("vic", "org", "gus"):
        c = client_for(web, user)
        seen: set[str] = set()
        todo = ["/", "/runs", "/account", *(f"/runs/{r}" for r in run_ids)]
        while todo and len(seen) < 400:
            url = todo.pop()
            if url in seen:
                continue
            seen.add(url)
            r = c.get(url)
            no_key(r.text, f"{user} {url}")
            if "text/html" in r.headers.get("content-type", ""):
                todo += [u for u in re.findall(r'href="(/[^"#?]*)', r.text)
                         if not u.startswith(("/logout", "/static")) and u not in seen]
        if user != "gus":  # the viewer and organizer read the runs, the jury's transcripts among them
            assert any(u.startswith("/runs/") and "/item/" in u for u in seen), sorted(seen)


def test_an_experiment_judge_without_a_name(tmp_path: Path) -> None:
    data = write_exam(tmp_path / "exam.jsonl", questions=2, answers=4)
    with fake_api(answer) as server:
        (tmp_path / "e.toml").write_text(
            f'[data]\npath = "{data.name}"\n'
            f'[[judges]]\njudge = "openai:m3?base_url={server.url}&api_key={KEY3}"\n'
            f'[[judges]]\njudge = "openai:m4?base_url={server.url}"\n'
            'options = { api_key = "sk-planted-secret-opt" }\n'
            '[[methods]]\nname = "ind"\n[compare]\nresamples = 0\n')
        printed = cli("run", str(tmp_path / "e.toml"), "-q")
        as_json = cli("run", str(tmp_path / "e.toml"), "-q", "--json")
        assert set(server.authorizations) == {f"Bearer {KEY3}", "Bearer sk-planted-secret-opt"}
    no_key(printed, "experiment tables")
    no_key(as_json, "experiment --json")
    assert f"openai:m3?base_url={server.url}&api_key=***" in json.loads(as_json)["columns"]
    store_has_no_key(tmp_path / "e.db")


def test_a_store_written_before_is_redacted_when_opened(tmp_path: Path) -> None:
    """What an older version stored (a jury's labels with their keys) is redacted by schema step 43."""
    data = write_exam(tmp_path / "exam.jsonl", questions=1, answers=2)
    db = tmp_path / "old.db"
    cli("grade", str(data), "--judge", "scripted", "--judge", "scripted?noise=0.5", "-o", str(db), "-q")
    spec = f"openai:m?base_url=https://u:pw-{PLANTED}@h.example/v1&api_key={KEY1}"
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE runs SET judge = ?, config = json_set(config, '$.members[0].label', ?), "
                    "summary = json_set(summary, '$.judge', ?), error = ?", (f"jury({spec})", spec, spec, spec))
        con.execute("UPDATE call_log SET error = ?", (f"APIConnectionError: https://u:{KEY2}@h.example/v1",))
        con.execute("DELETE FROM schema_migrations WHERE version = 43")
        con.execute("PRAGMA user_version = 42")
        assert con.execute("SELECT count(*) FROM runs WHERE judge LIKE ?", (f"%{PLANTED}%",)).fetchone()[0] > 0
    con.close()
    with Store(db) as st:
        labels = [m["label"] for r in st.runs() if r.kind == "jury" for m in r.config["members"]]
    assert labels[0] == "openai:m?base_url=https://***@h.example/v1&api_key=***"
    store_has_no_key(db)


#: a version before schema step 43 (no redaction at all): it stores a jury's member specs as they were given
OLD_VERSION = "257c74f57e622cf72ad7b95a902b983b1f4bb5d1"


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The source of :data:`OLD_VERSION`, from this repository's history (skipped where it has none)."""
    import shutil
    import tarfile

    root = Path(__file__).resolve().parents[1]
    git = shutil.which("git")
    if git is None:
        pytest.skip("no git")
    have = subprocess.run([git, "-C", str(root), "cat-file", "-e", f"{OLD_VERSION}^{{commit}}"], capture_output=True)
    if have.returncode != 0:
        pytest.skip(f"commit {OLD_VERSION[:7]} not in this checkout's history")
    d = tmp_path_factory.mktemp("old-version")
    archive = subprocess.run([git, "-C", str(root), "archive", "--format=tar", OLD_VERSION, "src"],
                             capture_output=True, check=True)
    (d / "src.tar").write_bytes(archive.stdout)
    with tarfile.open(d / "src.tar") as tar:
        tar.extractall(d, filter="data")
    return d / "src"


def test_a_store_written_by_an_older_version_keeps_no_key(old_code: Path, tmp_path: Path) -> None:
    """A jury store written by the code of :data:`OLD_VERSION` (keys in its member specs, in spellings the
    pattern of step 43 missed: a percent-encoded option name, a value holding ``)``, a signed query inside
    ``base_url``) holds the keys in ``runs``, ``results.details.members`` and the call log; opened with today's
    code (schema steps 43 and 44) it holds none, and ``export``, ``runs`` and ``report`` print none."""
    data = write_exam(tmp_path / "exam.jsonl", questions=2, answers=3)
    db = tmp_path / "old.db"
    sig = "sk-planted-secret-sig"
    with fake_api(answer) as server:
        judges = [f"openai:m1?base_url={server.url}&api_key={KEY1}",
                  f"openai:m2?api%5Fkey={KEY2}%29x&base_url={server.url}%3Fsig%3D{sig}"]
        env = {**os.environ, **ENV, "PYTHONPATH": str(old_code)}
        which = subprocess.run([sys.executable, "-c", "import knockout; print(knockout.__file__)"],
                               capture_output=True, text=True, env=env, check=True)
        assert Path(which.stdout.strip()).is_relative_to(old_code), which.stdout  # the old code runs
        res = subprocess.run([sys.executable, "-m", "knockout.cli", "grade", str(data), "--judge", judges[0],
                              "--judge", judges[1], "-o", str(db), "-q"],
                             capture_output=True, text=True, timeout=300, env=env)
        assert res.returncode == 0, res.stderr
        assert {f"Bearer {KEY1}", f"Bearer {KEY2})x"} <= set(server.authorizations)
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == 42
        old_keys = con.execute("SELECT details FROM results WHERE details LIKE ?", (f"%{KEY2}%",)).fetchall()
        assert len(old_keys) == 6, "the old version keyed each jury result by the raw member specs"
    finally:
        con.close()
    assert store_has_no_key(db) > 50  # opened (and migrated) by today's code
    with Store(db) as st:
        jury = next(r for r in st.runs() if r.kind == "jury")
        members = {k for row in st.results(jury.id) for k in row["details"]["members"]}
    assert members == {f"openai:m1?base_url={server.url}&api_key=***",
                       f"openai:m2?api%5Fkey=***&base_url={server.url}?sig=***"}, members
    for args in (["export", str(db)], ["export", str(db), "--format", "jsonl"], ["runs", str(db), "--json"],
                 ["report", str(db), "--json", "--resamples", "0"]):
        no_key(cli(*args), " ".join(args))
