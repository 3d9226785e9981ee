"""Fault injection: a real grading run (``knockout grade`` with the openai backend, real SDK, real sockets)
against a loopback OpenAI-compatible server that fails 30% of the attempts (429, 500, 503, a hang past the
client's time-out, a dropped connection, an empty body, a 200 without choices) completes, grades every
answer, and accounts exactly: the valid 200 replies the server sent are the calls in the store, and the
faults it served are the failed attempts in the run's summary."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from knockout.cli._main import app
from tests.fake_server import DROP, HANG, Reply, chat_body, fake_api, write_exam

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
