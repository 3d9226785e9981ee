"""A default two-reader grade on a real two-node Ray cluster, in one command (issue 59's first done-when).

    python bench/ray_grade.py [--answers 10000] [--latency-ms 1] [--texts distinct] [--json FILE]

Inside a new network namespace whose one interface is loopback and a PID namespace of its own (the bench
re-executes itself under ``unshare -n -p -f --mount-proc --kill-child``, ``tests/_netns.py``: everything it starts
dies with it), it starts a real two-node Ray cluster with ``ray start`` (a head with 1 CPU and a worker node with
2, on 127.0.0.1, token authentication; ``tests/test_ray_cluster.py``'s :class:`Cluster`), a real
OpenAI-compatible judge on 127.0.0.1 (``bench/loopback.py``: every request answered after ``--latency-ms``,
TCP_NODELAY) and writes an exam of ``--answers`` English answers, each question with a reference answer
(``bench/scale.py``'s exam; ``--texts distinct``, the default here, gives every answer a text of its own).  Then
one command, every option but the judge, the executor and the store at its default (so both readers, the judge
and the sentence encoder)::

    knockout grade exam.jsonl --judge openai:loopback?base_url=... --executor ray:127.0.0.1:PORT -o grade.db --json

Printed: the command's wall time, exit status and peak RSS, the stored run's status (``complete``), its judge
calls and readers, and where the CPU went: the driver (the command's own process) against the knockout actors of
each node (sampled every half second from ``/proc``), beside what the encoder costs in process for the same
texts (``--readers judge`` needs none of it): with the encoder's work on the workers, the driver's CPU stays near
the judge-only figure and the actors' holds the encoder's.  The cluster is torn down in a ``finally``: every
process each ``ray start`` left, killed by id, and the PID namespace with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "bench")]

#: the driver: the knockout command with its own peak RSS and CPU printed to stderr at its end (scale.py's)
from scale import DRIVER  # noqa: E402


def into_namespaces() -> None:
    """Re-execute this bench in a loopback-only network namespace and a PID namespace of its own, or refuse."""
    from tests._netns import ENV, loopback_command, unshare_refused

    if os.environ.get(ENV) == "1":
        return
    reason = unshare_refused()
    if reason is not None:
        raise SystemExit(f"ray_grade: Ray would listen on this host's address; {reason}")
    env = {**os.environ, ENV: "1"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(loopback_command([sys.executable, *sys.argv]), env=env, check=False)
    raise SystemExit(done.returncode)


class Sampler(threading.Thread):
    """Every ``period`` s, the CPU seconds of each knockout actor (by node) and of the driver, from /proc: the
    last figure seen of each process (an actor ends with the driver)."""

    def __init__(self, cluster: Any, driver: int, period: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.cluster, self.driver, self.period = cluster, driver, period
        self.cpu: dict[int, tuple[str, float]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil
        from tests.test_ray_cluster import is_actor

        while not self.stop.wait(self.period):
            try:
                worker = {p.pid for p in self.cluster.worker_raylet().children(recursive=True)}
            except Exception:
                worker = set()
            for p in psutil.process_iter():
                try:
                    if p.pid == self.driver:
                        kind = "driver"
                    elif is_actor(p):
                        kind = "actors, worker node" if p.pid in worker else "actors, head node"
                    else:
                        continue
                    t = p.cpu_times()
                    self.cpu[p.pid] = (kind, t.user + t.system)
                except psutil.Error:
                    continue

    def totals(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for kind, seconds in self.cpu.values():
            row = out.setdefault(kind, {"processes": 0, "cpu_s": 0.0})
            row["processes"] += 1
            row["cpu_s"] = round(row["cpu_s"] + seconds, 1)
        return out


def encoder_in_process(exam: Path) -> dict[str, Any]:
    """The readings (both encoder passes, the guard) of the exam's answers in this process, one BLAS thread: the
    CPU the encoder's work costs wherever it runs (the texts the grade sends to ``Engine.compute``)."""
    from threadpoolctl import threadpool_limits

    from knockout.data import load_items
    from knockout.grading._readings import read_all

    items = load_items(exam)
    qs = [items.question_of(a) for a in items.answers]
    with threadpool_limits(1):
        read_all(["warm up"], ["q"], ["r"], ["en"])
        c0 = time.process_time()
        read_all([a.text for a in items.answers], [q.text for q in qs], [q.reference for q in qs],
                 [q.language for q in qs])
        cpu = time.process_time() - c0
    return {"cpu_s": round(cpu, 1), "ms_per_answer": round(1000 * cpu / len(items.answers), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--answers", type=int, default=10000)
    ap.add_argument("--per-question", type=int, default=10)
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--texts", choices=("bench", "distinct"), default="distinct")
    ap.add_argument("--timeout", type=float, default=3600.0, help="the grade's limit in seconds")
    ap.add_argument("--no-baseline", action="store_true", help="skip the encoder's in-process CPU figure")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    a = ap.parse_args()
    into_namespaces()

    from scale import write_exam
    from tests.test_ray_cluster import Cluster

    from knockout.storage import Store

    work = Path(tempfile.mkdtemp(prefix="kg", dir="/tmp"))  # short: Ray's socket paths live under it
    exam, db = work / "exam.jsonl", work / "grade.db"
    write_exam(exam, a.answers, a.per_question, "typed", references=True, texts=a.texts)
    cluster = Cluster(work / "ray")
    server = driver = None
    figures: dict[str, Any] = {"answers": a.answers, "texts": a.texts, "latency_ms": a.latency_ms,
                               "pace": round(cluster.pace, 2), "load_before": os.getloadavg()}
    try:
        t0 = time.perf_counter()
        cluster.start_head()
        cluster.start_worker()
        figures["cluster_start_s"] = round(time.perf_counter() - t0, 1)
        server = subprocess.Popen([sys.executable, str(ROOT / "bench/loopback.py"), "--latency-ms",
                                   str(a.latency_ms), "--reply", "The answer is partly right.\nScore: 3/4"],
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None
        port = int(server.stdout.readline())
        judge = f"openai:loopback?base_url=http://127.0.0.1:{port}/v1&api_key=x"
        args = ["grade", str(exam), "--judge", judge, "--executor", f"ray:127.0.0.1:{cluster.port}", "-o", str(db),
                "--json"]
        print(f"[{time.strftime('%H:%M:%S')}] cluster up in {figures['cluster_start_s']} s (pace "
              f"{cluster.pace:.2f}); knockout {' '.join(args)}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, *args], env=cluster.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        sampler = Sampler(cluster, driver.pid)
        sampler.start()
        out, err = driver.communicate(timeout=a.timeout)
        figures["wall_s"] = round(time.perf_counter() - t0, 1)
        sampler.stop.set()
        sampler.join()
        figures["exit"] = driver.returncode
        figures["load_after"] = os.getloadavg()
        rss = [line.split() for line in err.splitlines() if line.startswith("RSS_KB")]
        if rss:
            figures["driver_peak_rss_mb"] = round(int(rss[-1][1]) / 1024)
            figures["driver_cpu_s"] = round(float(rss[-1][2]), 1)
        figures["cpu_by_process"] = sampler.totals()
        if driver.returncode != 0:
            figures["stderr"] = err[-3000:]
        else:
            summary = json.loads(out.strip().splitlines()[-1])
            figures["judge_calls"] = summary.get("judge_calls")
            figures["failed"] = summary.get("failed")
            figures["readers"] = summary.get("readers")
        with Store(db) as s:
            figures["runs"] = [{"status": r.status, "method": r.method} for r in s.runs()]
    finally:
        for proc in (driver, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        cluster.stop()
    if not a.no_baseline:
        figures["encoder_in_process"] = encoder_in_process(exam)
    print(json.dumps(figures, indent=1))
    if a.json:
        a.json.write_text(json.dumps(figures) + "\n")
    raise SystemExit(0 if figures.get("exit") == 0 and [r["status"] for r in figures["runs"]] == ["complete"]
                     else 1)


if __name__ == "__main__":
    main()
