"""Probe a running ``knockout serve`` the way a hostile grader or a careless set-up would (issue 14.6).

    python bench/web_probe.py [--json]

Builds a store with the CLI only (``knockout import``, ``knockout users add``), starts the real server
(``knockout serve``, argon2 at its default cost) and tries each attack over HTTP.  Every probe prints what
happened; the last column says whether the server held.  It uses nothing but the CLI and HTTP, so the same
script runs against an older checkout (``PYTHONPATH=/path/to/old/src python bench/web_probe.py``) to show
what each hardening step changed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

SRC = Path(__file__).resolve().parents[1] / "src"
PASSWORD = "correct horse battery"
ENV = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(SRC)}


def knockout(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "knockout.cli", *args], input=stdin, text=True, env=ENV,
                          capture_output=True, timeout=120)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(db: Path, *extra: str) -> Iterator[str | None]:
    """The base URL of ``knockout serve`` on ``db`` (None when the command refuses the options)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "knockout.cli", "serve", "--db", str(db), "--port", str(port),
                             *extra], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            if proc.poll() is not None:
                yield None
                return
            try:
                httpx.get(base + "/login", timeout=2)
                break
            except httpx.TransportError:
                if time.time() > deadline:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def client(base: str, origin: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Origin": origin or base}, timeout=60)


def csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    return m.group(1) if m else ""


def login(c: httpx.Client, user: str, password: str = PASSWORD) -> int:
    token = csrf(c.get("/login").text)
    return c.post("/login", data={"csrf": token, "username": user, "password": password}).status_code


def session_cookie(c: httpx.Client) -> dict[str, str]:
    return {k: v for k, v in c.cookies.items() if "session" in k}


def build(tmp: Path) -> Path:
    data = tmp / "exam.jsonl"
    records = [
        {"type": "question", "id": "q1", "text": "Question one?", "max_points": 4, "exam_id": "exam-a"},
        {"type": "answer", "id": "q1/s1", "question_id": "q1", "examinee": "s1", "text": "an answer"},
        {"type": "question", "id": "q2", "text": "Figure?", "max_points": 2, "exam_id": "exam-a",
         "images": ["/etc/passwd"]},
        {"type": "answer", "id": "q2/s1", "question_id": "q2", "examinee": "s1", "text": "another answer"},
        {"type": "question", "id": "n1", "text": "Slash?", "max_points": 2, "exam_id": "nlp/2023"},
        {"type": "answer", "id": "n1/s1", "question_id": "n1", "examinee": "s1", "text": "slash answer"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    db = tmp / "store.db"
    done = knockout("import", str(data), "--db", str(db))
    if done.returncode != 0:
        raise SystemExit(f"import failed: {done.stderr.strip()}")
    for name, extra in (("alice", ["--exam", "exam-a", "--exam", "nlp/2023"]), ("bob", ["--exam", "exam-a"]),
                        ("org", ["--role", "organizer"])):
        done = knockout("users", "add", name, "--db", str(db), "--password-stdin", *extra, stdin=PASSWORD + "\n")
        if done.returncode != 0:
            raise SystemExit(f"users add failed: {done.stderr.strip()}")
    return db


Probe = Callable[[str, Path], tuple[str, bool]]


def grader_sets_max_points(base: str, db: Path) -> tuple[str, bool]:
    with client(base) as c:
        login(c, "alice")
        page = c.get("/exam/exam-a/q/1/info").text
        r = c.post("/exam/exam-a/q/1/info", data={"csrf": csrf(page), "max_points": "9"})
        saved = 'value="9"' in c.get("/exam/exam-a/q/1/info").text
        return f"HTTP {r.status_code}, max points {'now 9' if saved else 'unchanged'}", not saved


def grade_out_of_range(base: str, db: Path) -> tuple[str, bool]:
    """A grader raises the maximum to 9 (when allowed), saves 9, and the maximum goes back to 4."""
    with client(base) as c, client(base) as org:
        login(c, "bob")
        login(org, "org")
        page = c.get("/exam/exam-a/q/1/info").text
        c.post("/exam/exam-a/q/1/info", data={"csrf": csrf(page), "max_points": "9"})
        page = c.get("/exam/exam-a/examinee/1/q/1").text
        version = re.search(r'name="version" value="(\d+)"', page)
        r = c.post("/exam/exam-a/examinee/1/q/1", data={"csrf": csrf(page), "score": "9",
                                                         "version": version.group(1) if version else "0"})
        page = org.get("/exam/exam-a/q/1/info").text
        org.post("/exam/exam-a/q/1/info", data={"csrf": csrf(page), "max_points": "4"})
    rows = knockout("annotations", "export", "--db", str(db), "--format", "jsonl").stdout.splitlines()
    nine = [json.loads(x) for x in rows if json.loads(x)["score"] == 9]
    if not nine:
        return f"save of 9 points: HTTP {r.status_code}, not stored", True
    flagged = nine[0].get("out_of_range")
    return f"9 of 4 points stored{', flagged out of range' if flagged else ', not flagged'}", bool(flagged)


def logout_ends_session(base: str, db: Path) -> tuple[str, bool]:
    with client(base) as c:
        login(c, "alice")
        stolen = session_cookie(c)
        c.post("/logout", data={"csrf": csrf(c.get("/").text)})
    with client(base) as thief:
        thief.cookies.update(stolen)
        r = thief.get("/", follow_redirects=False)
    return f"old cookie after logout: HTTP {r.status_code}", r.status_code != 200


def password_change_ends_sessions(base: str, db: Path) -> tuple[str, bool]:
    with client(base) as c:
        login(c, "bob")
        knockout("users", "passwd", "bob", "--db", str(db), "--password-stdin", stdin="a-new-password\n")
        r = c.get("/", follow_redirects=False)
        knockout("users", "passwd", "bob", "--db", str(db), "--password-stdin", stdin=PASSWORD + "\n")
    return f"other session after `users passwd`: HTTP {r.status_code}", r.status_code != 200


def login_throttled(base: str, db: Path) -> tuple[str, bool]:
    statuses = []
    with client(base) as c:
        for _ in range(8):
            statuses.append(login(c, "ghost", "wrong password"))
    locked = statuses.count(429)
    return f"8 bad logins: {', '.join(str(s) for s in statuses)}", locked > 0


def foreign_origin(base: str, db: Path) -> tuple[str, bool]:
    with client(base) as c:
        login(c, "org")
        token = csrf(c.get("/").text)
        r = c.post("/logout", data={"csrf": token}, headers={"Origin": "http://evil.example"}, follow_redirects=False)
        still = c.get("/", follow_redirects=False).status_code == 200
    return f"POST with a valid token from http://evil.example: HTTP {r.status_code}", r.status_code == 403 and still


def secure_cookies(base: str, db: Path) -> tuple[str, bool]:
    with server(db, "--secure-cookies") as secure:
        if secure is None:
            return "`knockout serve --secure-cookies`: no such option", False
        cookie = httpx.get(secure + "/login").headers.get("set-cookie", "")
    return f"Set-Cookie: {'Secure' if 'secure' in cookie.lower() else 'not Secure'}", "secure" in cookie.lower()


def slash_ids(base: str, db: Path) -> tuple[str, bool]:
    with client(base) as c:
        login(c, "alice")
        r = c.get("/exam/nlp%2F2023")
    return f"exam 'nlp/2023': HTTP {r.status_code}", r.status_code == 200


def huge_version(base: str, db: Path) -> tuple[str, bool]:
    with client(base) as c:
        login(c, "alice")
        page = c.get("/exam/exam-a/examinee/1/q/1").text
        r = c.post("/exam/exam-a/examinee/1/q/1", data={"csrf": csrf(page), "score": "1", "version": "9" * 30})
    return f"version=9…9 (30 digits): HTTP {r.status_code}", r.status_code < 500


def image_path_from_data(base: str, db: Path) -> tuple[str, bool]:
    with client(base) as c:
        login(c, "alice")
        r = c.get("/exam/exam-a/image/2/0")
    leaked = r.status_code == 200 and b"root:" in r.content
    return f"figure '/etc/passwd': HTTP {r.status_code}{', file served' if leaked else ''}", not leaked


PROBES: list[tuple[str, Probe]] = [
    ("a grader changes max points", grader_sets_max_points),
    ("9 of 4 points", grade_out_of_range),
    ("logout ends the session", logout_ends_session),
    ("password change ends sessions", password_change_ends_sessions),
    ("login throttling", login_throttled),
    ("Origin check", foreign_origin),
    ("--secure-cookies", secure_cookies),
    ("ids with '/'", slash_ids),
    ("huge form value", huge_version),
    ("image path from the data", image_path_from_data),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = build(Path(tmp))
        with server(db) as base:
            assert base is not None
            for name, probe in PROBES:
                what, held = probe(base, db)
                results.append({"probe": name, "result": what, "held": held})
    if args.json:
        print(json.dumps(results))
        return
    t = Table(title=f"knockout serve under attack ({ENV['PYTHONPATH']})")
    for col in ("probe", "what happened", "held"):
        t.add_column(col)
    for r in results:
        t.add_row(r["probe"], r["result"], "yes" if r["held"] else "NO")
    Console().print(t)


if __name__ == "__main__":
    main()
