"""Kill soak: a ``knockout grade --method knockout --debias`` run against a loopback OpenAI-compatible
server, SIGKILLed at random moments and resumed until it completes.

    python bench/kill_soak.py [--kills 20] [--questions 8] [--answers 6] [--delay 0.2] [--concurrency 4]
                              [--seed 0] [--quick] [--json]

The judge is a loopback fake server (tests/fake_server.py, TCP_NODELAY) that answers every request after
``--delay`` seconds with a reply derived from the request's content (the same request always gets the same
reply), so calls are in flight when the process is killed and an uninterrupted run is reproducible.  Each
kill comes at a random moment (seeded) after the process has sent its first request.

Per kill it prints: the requests in flight at the kill (leases left in the store; the server's open
requests), the repeated calls (requests the server received again after the kill, for a request it had
already received before), and the lost results (result or match rows present before the kill and gone
after).  At the end: the killed-and-resumed run's results against an uninterrupted run's (identical?), and
``PRAGMA integrity_check``.  Then two processes start the same run on one fresh store at once; the share
of repeated calls is the requests the server received twice over the distinct requests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.fake_server import FakeAPI, chat_body, fake_api, write_exam  # noqa: E402


def request_key(body: dict[str, Any]) -> str:
    fields = {k: body.get(k) for k in ("model", "messages", "temperature", "max_tokens", "seed")}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


class Judge:
    """The fake server's answers: after ``delay`` seconds, a reply fixed by the request's content."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.log: list[str] = []  # request keys, in the order received

    def __call__(self, body: dict[str, Any], n: int) -> tuple[int, bytes]:
        key = request_key(body)
        with self.lock:
            self.log.append(key)
        time.sleep(self.delay)
        prompt = json.dumps(body.get("messages"))
        h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
        if "Answer 2" in prompt:
            text = f"Explanation: compared by the fake server. Answer 1: {h % 3}/2 Answer 2: {(h // 3) % 3}/2"
        else:
            text = f"Explanation: graded by the fake server.\nScore: {h % 3}/2"
        return 200, chat_body(text)


def grade_cmd(data: Path, db: Path, url: str, concurrency: int) -> list[str]:
    return [sys.executable, "-m", "knockout.cli", "grade", str(data), "--method", "knockout", "--debias",
            "--judge", "openai:fake-judge", "--judge-opt", f"base_url={url}", "--judge-opt", "retries=0",
            "--concurrency", str(concurrency), "--temperature", "0", "-o", str(db), "--json", "-q"]


ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def start(cmd: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def rows(db: Path, sql: str) -> set[tuple[Any, ...]]:
    if not db.exists():
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return set(con.execute(sql).fetchall())
    except sqlite3.OperationalError:
        return set()
    finally:
        con.close()


RESULTS = "SELECT item_id, score, valid FROM results"
MATCHES = "SELECT run_id, match_id, valid FROM matches"
LEASES = "SELECT key FROM inflight"


@dataclass
class Kill:
    after_first_request_s: float
    leases: int = 0
    server_open: int = 0
    sent_before: int = 0
    repeated: int = 0
    lost: int = 0


@dataclass
class Soak:
    kills: list[Kill] = field(default_factory=list)
    resumes: int = 0
    lost_at_end: int = 0
    finished_early: bool = False
    identical: bool = False
    results: int = 0
    integrity: str = ""
    requests: int = 0
    distinct: int = 0
    two_process: dict[str, Any] = field(default_factory=dict)
    reference: dict[str, Any] = field(default_factory=dict)


@contextmanager
def server(delay: float) -> Iterator[tuple[FakeAPI, Judge]]:
    judge = Judge(delay)
    with fake_api(judge) as fake:
        yield fake, judge


def run_to_end(cmd: list[str]) -> dict[str, Any]:
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"run failed ({p.returncode}): {p.stderr.strip()}")
    return dict(json.loads(p.stdout))


def soak(args: argparse.Namespace, work: Path) -> Soak:
    out = Soak()
    data = write_exam(work / "exam.jsonl", args.questions, args.answers)
    rng = random.Random(args.seed)

    # an uninterrupted run: its results, its length, and how long a process takes to send its first request
    with server(args.delay) as (fake, judge):
        t0 = time.perf_counter()
        p = start(grade_cmd(data, work / "ref.db", fake.url, args.concurrency))
        while not judge.log and p.poll() is None:
            time.sleep(0.01)
        first = time.perf_counter() - t0
        stdout, stderr = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"reference run failed: {stderr.decode().strip()}")
        total = time.perf_counter() - t0
        ref = json.loads(stdout)
        out.reference = {"calls": ref["judge_calls"], "wall_s": round(total, 2), "first_request_s": round(first, 2)}
    reference = rows(work / "ref.db", RESULTS)
    # a kill comes up to 1/kills of the judging time after the first request: the kills span about half a run
    window = max(total - first, 0.2) / max(args.kills, 1)

    db = work / "soak.db"
    with server(args.delay) as (fake, judge):
        cmd = grade_cmd(data, db, fake.url, args.concurrency)
        seen_results: set[tuple[Any, ...]] = set()
        seen_matches: set[tuple[Any, ...]] = set()
        boundaries: list[int] = []  # server log length at each kill
        for _ in range(args.kills):
            before = len(judge.log)
            p = start(cmd)
            while len(judge.log) == before and p.poll() is None:
                time.sleep(0.005)
            wait = rng.uniform(0, window)
            time.sleep(wait)
            if p.poll() is not None:  # it finished before the kill
                out.finished_early = True
                p.communicate()
                break
            kill = Kill(after_first_request_s=round(wait, 3))
            kill.server_open = fake.open_requests
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            p.communicate()
            boundaries.append(len(judge.log))
            kill.sent_before = len(judge.log)
            kill.leases = len(rows(db, LEASES))
            results, matches = rows(db, RESULTS), rows(db, MATCHES)
            kill.lost = len(seen_results - results) + len(seen_matches - matches)
            seen_results |= results
            seen_matches |= matches
            out.kills.append(kill)
        while True:  # resume until complete
            out.resumes += 1
            p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
            if p.returncode == 0:
                break
            if out.resumes > 5:
                raise SystemExit(f"resume failed: {p.stderr.strip()}")
        final = rows(db, RESULTS)
        out.lost_at_end = len(seen_results - final) + len(seen_matches - rows(db, MATCHES))
        # repeated calls after each kill: requests sent after it for a key already sent before it
        log = judge.log
        for i, k in enumerate(out.kills):
            end = boundaries[i + 1] if i + 1 < len(boundaries) else len(log)
            earlier = set(log[: boundaries[i]])
            k.repeated = sum(1 for key in log[boundaries[i]:end] if key in earlier)
        out.requests, out.distinct = len(log), len(set(log))
    out.results = len(final)
    out.identical = final == reference
    con = sqlite3.connect(db)
    try:
        out.integrity = str(con.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        con.close()

    # two processes on one fresh store at once
    with server(args.delay) as (fake, judge):
        cmd = grade_cmd(data, work / "two.db", fake.url, args.concurrency)
        procs = [start(cmd) for _ in range(2)]
        codes = []
        for p in procs:
            p.communicate(timeout=600)
            codes.append(p.returncode)
        repeated = len(judge.log) - len(set(judge.log))
        out.two_process = {"exit_codes": codes, "requests": len(judge.log), "distinct": len(set(judge.log)),
                           "repeated": repeated, "share": repeated / max(len(set(judge.log)), 1),
                           "identical": rows(work / "two.db", RESULTS) == reference}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--answers", type=int, default=6, help="answers per question")
    ap.add_argument("--delay", type=float, default=0.2, help="seconds the server takes per reply")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke test: 3 kills, 3 questions x 4 answers")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.kills, args.questions, args.answers = 3, 3, 4
    with TemporaryDirectory(prefix="kill-soak-") as tmp:
        s = soak(args, Path(tmp))
    ok = (all(k.lost == 0 and k.repeated <= max(k.leases, k.server_open) for k in s.kills) and s.lost_at_end == 0
          and s.identical and s.integrity == "ok")
    if args.json:
        print(json.dumps({"ok": ok, "kills": [k.__dict__ for k in s.kills], "resumes": s.resumes,
                          "lost_at_end": s.lost_at_end,
                          "finished_early": s.finished_early, "identical": s.identical, "results": s.results,
                          "integrity_check": s.integrity, "requests": s.requests, "distinct": s.distinct,
                          "reference": s.reference, "two_process": s.two_process}))
        return
    console = Console(width=120)
    t = Table(title=f"kill soak: knockout --debias, {args.questions} questions x {args.answers} answers, "
                    f"concurrency {args.concurrency}, server delay {args.delay:g} s", box=box.MARKDOWN)
    for col in ("kill", "in flight (leases)", "in flight (server)", "repeated after resume", "lost results"):
        t.add_column(col, justify="right")
    for i, k in enumerate(s.kills, 1):
        t.add_row(f"{i} (+{k.after_first_request_s:.2f} s)", str(k.leases), str(k.server_open), str(k.repeated),
                  str(k.lost))
    t.add_row("total", str(sum(k.leases for k in s.kills)), str(sum(k.server_open for k in s.kills)),
              str(sum(k.repeated for k in s.kills)), str(sum(k.lost for k in s.kills) + s.lost_at_end))
    console.print(t)
    tp = s.two_process
    console.print(f"uninterrupted run: {s.reference['calls']} calls in {s.reference['wall_s']} s; killed run: "
                  f"{len(s.kills)} kills{' (then it finished)' if s.finished_early else ''}, {s.requests} requests "
                  f"for {s.distinct} distinct calls; results identical to the uninterrupted run: "
                  f"{'yes' if s.identical else 'NO'} ({s.results} answers); integrity_check: {s.integrity}")
    console.print(f"two processes on one store: {tp['requests']} requests for {tp['distinct']} distinct calls, "
                  f"{tp['repeated']} repeated ({100 * tp['share']:.1f}%), exit codes {tp['exit_codes']}, "
                  f"results identical: {'yes' if tp['identical'] else 'NO'}")
    console.print("OK" if ok else "FAILED: a result was lost, a call repeated beyond those in flight, or results "
                  "differ")


if __name__ == "__main__":
    main()
