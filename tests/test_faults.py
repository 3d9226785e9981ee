"""Fault injection: a real grading run (``knockout grade`` with the openai backend, real SDK, real sockets)
against a loopback OpenAI-compatible server that fails 30% of the attempts (429, 500, 503, a hang past the
client's time-out, a dropped connection, an empty body, a 200 without choices) completes, grades every
answer, and accounts exactly: the valid 200 replies the server sent are the calls in the store, and the
faults it served are the failed attempts in the run's summary."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import shlex
import sqlite3
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from knockout.cli._main import app
from knockout.errors import JudgeError
from knockout.judges import JudgeRequest, Message, make_judge
from tests.fake_server import DROP, HANG, TRICKLE, Reply, chat_body, fake_api, messages_body, write_exam

FAULT_SHARE = 0.3
FAULTS: list[tuple[str, Reply]] = [
    ("429", (429, b'{"error": {"message": "slow down", "type": "rate_limit"}}')),
    ("500", (500, b'{"error": {"message": "internal error"}}')),
    ("503", (503, b'{"error": {"message": "overloaded"}}')),
    ("hang", (HANG, b"")),
    ("drop", (DROP, b"")),
    ("empty body", (200, b"")),
    ("empty choices", (200, json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                        "choices": []}).encode())),
]
MAX_FAULTS_PER_REQUEST = 3  # below the retries the run is given, so every request ends answered


class FaultSchedule:
    """Which attempt of which request fails: seeded by the request's content and its attempt number, so
    the failing attempts do not depend on the order in which concurrent requests arrive; the kinds of
    fault take turns, so that every kind is served whatever the requests' bytes."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()  # served, by kind
        self.ok: list[str] = []  # request keys answered with a valid 200

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        key = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()
        with self.lock:
            attempt = self.attempts[key]
            self.attempts[key] += 1
            rng = random.Random(f"{self.seed}:{key}:{attempt}")
            if attempt < MAX_FAULTS_PER_REQUEST and rng.random() < FAULT_SHARE:
                # which attempts fail is seeded by content; their kinds take turns, so every kind is served
                kind, reply = FAULTS[sum(self.faults.values()) % len(FAULTS)]
                self.faults[kind] += 1
                return reply
            self.ok.append(key)
        text = json.dumps(body.get("messages"))
        points = int(hashlib.sha256(text.encode()).hexdigest(), 16) % 3
        return 200, chat_body(f"Explanation: scripted by the fake server.\nScore: {points}/2")


def test_grading_through_faults(tmp_path: Path) -> None:
    data = write_exam(tmp_path / "exam.jsonl", 6, 6)
    db = tmp_path / "k.db"
    schedule = FaultSchedule(seed=7)
    with fake_api(schedule, hang_s=1.6) as server:
        r = CliRunner().invoke(app, [
            "grade", str(data), "--judge", "openai:fake-model", "--judge-opt", f"base_url={server.url}",
            "--judge-opt", "timeout=1", "--judge-opt", "retries=6", "--judge-opt", "backoff=0.01",
            "--concurrency", "4", "--temperature", "0", "-o", str(db), "--json", "-q",
        ])
    assert r.exit_code == 0, r.output + r.stderr
    summary = json.loads(r.stdout)
    faults = sum(schedule.faults.values())
    served = faults + len(schedule.ok)
    # the schedule really did inject every kind at about the asked share
    assert set(schedule.faults) == {kind for kind, _ in FAULTS}, schedule.faults
    assert 0.2 <= faults / served <= 0.4, (faults, served)
    # the run is complete and every answer graded
    assert summary["answers"] == 36 and summary["valid"] == 36 and summary["invalid"] == 0
    assert summary["failed"] == 0
    con = sqlite3.connect(db)
    try:
        (status,) = con.execute("SELECT status FROM runs").fetchone()
        results = con.execute("SELECT COUNT(*), SUM(valid) FROM results").fetchone()
        calls = con.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        logged = con.execute("SELECT COUNT(*) FROM call_log WHERE error IS NULL").fetchone()[0]
        errors = con.execute("SELECT COUNT(*) FROM call_log WHERE error IS NOT NULL").fetchone()[0]
    finally:
        con.close()
    assert status == "complete"
    assert results == (36, 36)
    # exact accounting: each valid 200 the server sent is one stored call, no more, no less
    assert len(set(schedule.ok)) == len(schedule.ok), "a request was answered twice"
    assert calls == logged == summary["judge_calls"] == len(schedule.ok), (calls, logged, len(schedule.ok))
    assert errors == 0  # every failure was retried within the run
    # ... and each fault the server served is one failed attempt in the summary
    assert summary["failed_attempts"] == faults, (summary["failed_attempts"], dict(schedule.faults))


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_trickling_server_fails_within_the_deadline(backend: str) -> None:
    """A server that sends its reply one byte every 0.2 s never trips the client's read time-out; the
    deadline on each whole attempt ends it, the SDK retries it as configured, and the request fails
    within about timeout x (retries + 1) plus the SDK's backoff instead of hanging."""
    body = chat_body("Score: 1/2") if backend == "openai" else messages_body([{"type": "text", "text": "1"}])
    with fake_api(lambda req, n: (TRICKLE, body), trickle_s=0.2) as server:
        judge = make_judge(f"{backend}:m?base_url={server.url}&api_key=k&timeout=0.5&retries=1&backoff=0.01")

        async def ask() -> None:
            try:
                await asyncio.wait_for(judge.complete(JudgeRequest([Message(role="user", content="hi")])), 20)
            finally:
                await judge.aclose()

        t0 = time.monotonic()
        with pytest.raises(JudgeError) as failed:
            asyncio.run(ask())
        elapsed = time.monotonic() - t0
    # two attempts of 0.5 s and the SDK's first backoff (at most 0.5 s); the whole reply needs ~50 s
    assert elapsed < 0.5 * 2 + 0.5 + 1.0, elapsed
    assert server.hits == 2
    assert failed.value.failed_attempts == 2


def test_trickled_request_is_recorded_failed(tmp_path: Path) -> None:
    """Through a grading run: the trickled answer ends failed (no grade), the others are graded."""
    data = write_exam(tmp_path / "exam.jsonl", 1, 2)
    db = tmp_path / "k.db"

    def answer(body: dict[str, Any], n: int) -> Reply:
        if "Answer 0 to" in json.dumps(body.get("messages")):
            return TRICKLE, chat_body("Score: 2/2")
        return 200, chat_body("Score: 1/2")

    with fake_api(answer, trickle_s=0.2) as server:
        t0 = time.monotonic()
        r = CliRunner().invoke(app, [
            "grade", str(data), "--judge", "openai:fake-model", "--judge-opt", f"base_url={server.url}",
            "--judge-opt", "timeout=0.5", "--judge-opt", "retries=1", "--judge-opt", "backoff=0.01",
            "--temperature", "0", "-o", str(db), "--json", "-q",
        ])
        elapsed = time.monotonic() - t0
    assert r.exit_code == 3, r.output + r.stderr  # a request failed for good: the run is incomplete
    summary = json.loads(r.stdout)
    assert summary["answers"] == 2 and summary["valid"] == 1 and summary["failed"] == 1, summary
    assert summary["status"] == "incomplete", summary
    assert elapsed < 10, elapsed
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT item_id, valid, score FROM results ORDER BY item_id").fetchall()
    finally:
        con.close()
    assert rows[0][0] == "q0/a0" and not rows[0][1] and rows[0][2] is None, rows


def test_a_request_that_fails_for_good_leaves_the_run_incomplete(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The server answers HTTP 500 to every attempt for one answer of three: the run is stored
    ``incomplete``, the command exits 3 with one line naming the failed request and the command that retries
    it (its secret redacted), ``runs`` shows the status, ``export`` and ``calibrate`` refuse it without
    ``--partial``; the printed command, once the server answers, asks that one request only and ends
    ``complete`` with exit 0."""
    data = write_exam(tmp_path / "exam.jsonl", 1, 3)
    db = tmp_path / "k.db"
    broken = [True]

    def answer(body: dict[str, Any], n: int) -> Reply:
        if broken[0] and "Answer 1 to" in json.dumps(body.get("messages")):
            return 500, b'{"error": {"message": "internal error"}}'
        return 200, chat_body("Score: 1/2")

    runner = CliRunner()
    with fake_api(answer) as server:
        args = ["grade", str(data), "--judge", f"openai:fake-model?base_url={server.url}&api_key=sk-secret-1",
                "--judge-opt", "retries=1", "--judge-opt", "backoff=0.01", "--judge-opt", "api_key=tk-secret-2",
                "--temperature", "0", "-o", str(db), "--json", "-q"]
        monkeypatch.setattr(sys, "argv", ["knockout", *args])
        r = runner.invoke(app, args)
        assert r.exit_code == 3, r.output + r.stderr
        summary = json.loads(r.stdout)
        assert summary["status"] == "incomplete" and summary["failed"] == 1 and summary["valid"] == 2, summary
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert "1 judge request failed for good" in lines[0] and summary["run_id"] in lines[0], lines[0]
        assert "sk-secret-1" not in r.stderr and "tk-secret-2" not in r.stderr, r.stderr
        command = lines[0].split("retry only those with: ", 1)[1]
        from knockout.cli._common import knockout_command  # the launcher: its full path when not on PATH

        assert command == " ".join([knockout_command(), shlex.join(
            a.replace("sk-secret-1", "***").replace("tk-secret-2", "***") for a in args)])
        listed = json.loads(runner.invoke(app, ["runs", str(db), "--json"]).stdout)
        assert [x["status"] for x in listed] == ["incomplete"], listed
        table = runner.invoke(app, ["runs", str(db)])
        assert "incomp" in table.stdout, table.stdout  # a narrow terminal cuts the word
        refused = runner.invoke(app, ["export", str(db)])
        assert refused.exit_code == 2 and "is incomplete" in refused.stderr and "--partial" in refused.stderr
        assert runner.invoke(app, ["export", str(db), "--partial"]).exit_code == 0
        from knockout.cli import register_extensions

        register_extensions(app)
        refused = runner.invoke(app, ["calibrate", str(db)])
        assert refused.exit_code == 2 and "is incomplete" in refused.stderr, refused.stderr
        reported = runner.invoke(app, ["report", str(db), "--resamples", "0", "--json"])
        assert reported.exit_code == 0 and json.loads(reported.stdout)["run"]["status"] == "incomplete"
        # the printed command, run again once the server answers: only the failed request is sent
        broken[0] = False
        before = server.hits
        again = shlex.split(command)[1:]
        monkeypatch.setattr(sys, "argv", ["knockout", *again])
        r2 = runner.invoke(app, again)
        assert r2.exit_code == 0, r2.output + r2.stderr
        assert server.hits - before == 1, server.hits - before
    done = json.loads(r2.stdout)
    assert done["run_id"] == summary["run_id"] and done["status"] == "complete" and done["failed"] == 0
    assert done["valid"] == 3 and done["judge_calls"] == 1 and done["cache_hits"] == 2, done
    listed = json.loads(runner.invoke(app, ["runs", str(db), "--json"]).stdout)
    assert [x["status"] for x in listed] == ["complete"], listed


def test_the_python_api_says_incomplete(tmp_path: Path) -> None:
    """Through ``knockout.runs.execute``: the report of a run with a request that failed for good says
    ``incomplete`` (its ``status`` and its summary), as the store does; once the server answers, running it
    again sends that request only and the run is ``complete``."""
    from knockout.data import load_items
    from knockout.methods._run import GradeRun, RunConfig
    from knockout.runs import execute
    from knockout.storage import Store

    items = load_items(write_exam(tmp_path / "exam.jsonl", 1, 3), "jsonl")
    broken = [True]

    def answer(body: dict[str, Any], n: int) -> Reply:
        if broken[0] and "Answer 2 to" in json.dumps(body.get("messages")):
            return 500, b'{"error": {"message": "internal error"}}'
        return 200, chat_body("Score: 2/2")

    with fake_api(answer) as server, Store(tmp_path / "k.db") as store:
        spec = f"openai:fake-model?base_url={server.url}&retries=0&backoff=0"
        report = execute(GradeRun(items, make_judge(spec), RunConfig()), store)
        assert report.status == "incomplete" and report.summary()["status"] == "incomplete"
        assert report.summary()["failed"] == 1
        run = store.get_run(report.run_id)
        assert run is not None and run.status == "incomplete" and not run.complete
        broken[0] = False
        hits = server.hits
        again = execute(GradeRun(items, make_judge(spec), RunConfig()), store)
        assert again.status == "complete" and again.summary()["failed"] == 0 and server.hits - hits == 1
        run = store.get_run(report.run_id)
        assert run is not None and run.status == "complete"


def test_a_run_whose_every_request_failed_is_incomplete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP 500 to every attempt of both requests (fewer than the engine's three failures that stop a run): no
    reply is stored, so the run is ``incomplete`` — exit 3 and the retry line, as with some failed requests —
    not "no valid grade, every reply is stored" (exit 1); once the server answers, the same command completes."""
    data = write_exam(tmp_path / "exam.jsonl", 1, 2)
    db = tmp_path / "k.db"
    broken = [True]

    def answer(body: dict[str, Any], n: int) -> Reply:
        return (500, b'{"error": {"message": "internal error"}}') if broken[0] else (200, chat_body("Score: 1/2"))

    runner = CliRunner()
    with fake_api(answer) as server:
        args = ["grade", str(data), "--judge", f"openai:fake-model?base_url={server.url}&api_key=k&retries=0",
                "-o", str(db), "-q"]
        monkeypatch.setattr(sys, "argv", ["knockout", *args])
        r = runner.invoke(app, args)
        assert r.exit_code == 3, r.output + r.stderr
        assert "every reply is stored" not in r.stderr and "no answer got a valid grade" not in r.stderr, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "2 judge requests failed for good" in lines[0], r.stderr
        assert "stored as incomplete" in lines[0] and "retry only those with: " in lines[0], lines[0]
        listed = json.loads(runner.invoke(app, ["runs", str(db), "--json"]).stdout)
        assert [x["status"] for x in listed] == ["incomplete"], listed
        broken[0] = False
        r2 = runner.invoke(app, args)
        assert r2.exit_code == 0, r2.output + r2.stderr
    listed = json.loads(runner.invoke(app, ["runs", str(db), "--json"]).stdout)
    assert [x["status"] for x in listed] == ["complete"], listed


def test_a_judge_that_fails_every_call_stops_being_asked_and_the_run_is_incomplete(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch
                                                                                  ) -> None:
    """Past the engine's three failures with no reply at all (a dead server, a wrong key) the rest of the requests
    are not sent; the run still ends ``incomplete`` with exit 3 and the one retry line (issue 42), no traceback."""
    data = write_exam(tmp_path / "exam.jsonl", 10, 3)

    def answer(body: dict[str, Any], n: int) -> Reply:
        return 500, b'{"error": {"message": "internal error"}}'

    runner = CliRunner()
    with fake_api(answer) as server:
        args = ["grade", str(data), "--judge", f"openai:fake-model?base_url={server.url}&api_key=k&retries=0",
                "-o", str(tmp_path / "k.db"), "-q"]
        monkeypatch.setattr(sys, "argv", ["knockout", *args])
        r = runner.invoke(app, args)
        hits = server.hits
    assert r.exit_code == 3, r.output + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "30 judge requests failed for good" in lines[0], r.stderr
    assert "retry only those with: " in lines[0] and "Traceback" not in r.stderr
    assert hits < 30  # the requests after the judge was seen failing every call were not sent
