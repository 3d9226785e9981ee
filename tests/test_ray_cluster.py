"""A real two-node Ray cluster (``ray start`` head + worker, on loopback inside a network namespace): a
grade against the loopback fake judge (several hundred answers, 100 ms replies, several requests in flight
per actor) loses its worker node mid-run (the node's raylet and its processes killed), and the run still
fails nothing, loses nothing, grades as a local run does and reports the re-sent requests.  Both ways a
driver reaches a cluster: its address (``ray:127.0.0.1:PORT``) and the Ray Client (``ray://127.0.0.1:PORT``,
where grpcio is installed: ``knockout[ray]``).

The gate re-executes this file in a loopback-only network namespace (``tests/_netns.py``); the cluster
is started there and every process of it is killed by id at the end (never ``ray stop``: it stops every
Ray process of the machine)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._netns import (
    in_this_netns,
    loopback_only,
    non_loopback_listeners,
    outside_netns,
    pace,
    rerun_in_loopback_netns,
)
from tests.conftest import ROOT, free_port
from tests.fake_server import chat_body, fake_api, write_exam

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs ray (knockout[ray])")]

QUESTIONS, ANSWERS = 25, 12  # 300 answers
KILL_AT = 90  # the worker node dies when the fake judge has been asked this many times
RAY = [str(Path(sys.executable).parent / "ray")]
HAS_CLIENT = importlib.util.find_spec("grpc") is not None


def reply(req: dict[str, Any], n: int) -> tuple[int, bytes]:
    """The fake judge: a grade that depends on the request only, after 100 ms."""
    time.sleep(0.1)
    return 200, chat_body(f"Score: {sum(map(ord, json.dumps(req.get('messages')))) % 3}/2")


def is_actor(p: Any) -> bool:
    """``p`` is a knockout actor's process (Ray names it after the actor's class)."""
    import psutil

    try:
        return "_JudgeWorker" in " ".join(p.cmdline()[:1])
    except psutil.Error:
        return False


class Cluster:
    """A head and a worker node started with ``ray start`` on 127.0.0.1; every process killed by id."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {**os.environ, "RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
                    "RAY_health_check_failure_threshold": "3", "RAY_health_check_initial_delay_ms": "0",
                    "RAY_USAGE_STATS_ENABLED": "0",
                    # token authentication (Ray >= 2.52): every node and driver holds the cluster's token
                    "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.port = free_port()
        self.client_port = free_port()
        self.worker_manager_port = 0
        self.worker_up = False
        #: how many times slower than idle this machine runs a process (measured now), and each ``ray start``'s
        #: seconds: the time limits below are derived from them (issue 59: constants failed under load)
        self.pace = pace()
        self.starts: list[float] = []
        #: every process each ``ray start`` left running (pid -> its start time): killed by id in :meth:`stop`
        self.started: dict[int, float] = {}

    def limit(self, idle_s: float) -> float:
        """A time limit for what takes at most ``idle_s`` on an idle machine: times the pace measured when the
        cluster was made, and never less than 3 times the slowest ``ray start`` measured so far."""
        return max(idle_s * self.pace, 3 * max(self.starts, default=0.0))

    def ensure_worker(self) -> None:
        """The worker node up (an earlier test may have killed it)."""
        if not self.worker_up:
            self.start_worker()

    def ray(self, *args: str) -> None:
        t0 = time.perf_counter()
        done = subprocess.run([*RAY, *args], env=self.env, capture_output=True, text=True,
                              timeout=self.limit(120), check=False)
        self.starts.append(time.perf_counter() - t0)
        self.note_started()
        assert done.returncode == 0, f"ray {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    def start_head(self) -> None:
        # the Ray Client server needs grpcio (ray[client], which knockout[ray] brings): without it, no flag
        client = ["--ray-client-server-port", str(self.client_port)] if HAS_CLIENT else []
        self.ray("start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(self.port), *client,
                 "--num-cpus", "1",
                 "--include-dashboard", "false", "--temp-dir", str(self.root), "--disable-usage-stats",
                 "--object-store-memory", str(80 * 2**20))

    def start_worker(self) -> None:
        self.worker_manager_port = free_port()
        self.worker_up = True
        ports = {"--node-manager-port": self.worker_manager_port, "--object-manager-port": free_port(),
                 "--dashboard-agent-listen-port": free_port(), "--dashboard-agent-grpc-port": free_port(),
                 "--metrics-export-port": free_port(), "--runtime-env-agent-port": free_port()}
        self.ray("start", "--address", f"127.0.0.1:{self.port}", "--node-ip-address", "127.0.0.1",
                 "--num-cpus", "2", "--disable-usage-stats", "--object-store-memory", str(80 * 2**20),
                 *(x for k, v in ports.items() for x in (k, str(v))))

    def note_started(self) -> None:
        """Record the processes of this namespace that this process did not start itself and that are not its
        ancestors: ``ray start``'s daemons (in the gate's PID namespace, nothing else runs)."""
        import psutil

        mine = {os.getpid(), *(p.pid for p in psutil.Process().parents()),
                *(p.pid for p in psutil.Process().children(recursive=True))}
        for p in psutil.process_iter(["create_time"]):
            if p.pid not in mine and in_this_netns(p.pid) and p.info["create_time"] is not None:
                self.started.setdefault(p.pid, p.info["create_time"])

    def processes(self) -> list[Any]:
        """This cluster's processes: those whose command line names its temp dir, and their children."""
        import psutil

        found: dict[int, Any] = {}
        for p in psutil.process_iter(["cmdline"]):
            if any(str(self.root) in part for part in p.info["cmdline"] or []) and in_this_netns(p.pid):
                found[p.pid] = p
                for c in p.children(recursive=True):
                    found[c.pid] = c
        found.pop(os.getpid(), None)
        return list(found.values())

    def worker_raylet(self) -> Any:
        import psutil

        raylets = [p for p in psutil.process_iter(["cmdline"])
                   if any(f"--node_manager_port={self.worker_manager_port}" == part
                          for part in p.info["cmdline"] or []) and in_this_netns(p.pid)]
        assert len(raylets) == 1, "the worker node's raylet was not found"
        return raylets[0]

    def kill_worker_node(self, actors_first_s: float = 0.0) -> int:
        """SIGKILL the worker node's raylet and every process under it (a machine lost); the count killed.
        ``actors_first_s``: its actors die that long before the rest (the raylet reports their CPUs free:
        the cluster holds a node with room that is about to die, and places a replacement there)."""
        import psutil

        self.worker_up = False
        if actors_first_s:
            for p in [p for p in self.worker_raylet().children(recursive=True) if is_actor(p)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.send_signal(signal.SIGKILL)
            time.sleep(actors_first_s)
        raylet = self.worker_raylet()
        victims = [*raylet.children(recursive=True), raylet]
        for p in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGKILL)
        return len(victims)

    def stop_worker_actors(self) -> list[Any]:
        """SIGSTOP the worker node's actors (hung workers: they hold their connections open and answer nothing,
        while the node's raylet still answers Ray's health check); the processes stopped."""
        import psutil

        stopped = [p for p in self.worker_raylet().children(recursive=True) if is_actor(p)]
        for p in stopped:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGSTOP)
        return list(stopped)

    def kill_head(self) -> int:
        """SIGKILL the head node: every process of the cluster but the worker node's raylet and what runs under it
        (the GCS, the head's raylet and its actors, the Ray Client server, ...); the count killed."""
        import psutil

        worker = self.worker_raylet()
        keep = {worker.pid, *(c.pid for c in worker.children(recursive=True))}
        victims = [p for p in self.processes() if p.pid not in keep]
        for p in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGKILL)
        return len(victims)

    def restart(self) -> None:
        """A new cluster in place of this one (every process killed, a head and a worker node started again on
        new ports)."""
        self.stop()
        time.sleep(1.0)
        self.port, self.client_port = free_port(), free_port()
        self.start_head()
        self.start_worker()

    def worker_actors(self) -> int:
        """knockout actors running on the worker node now."""
        try:
            return sum(is_actor(p) for p in self.worker_raylet().children(recursive=True))
        except Exception:  # no worker node (killed, not yet back)
            return 0

    def stop(self) -> None:
        """SIGKILL every process of the cluster: those its temp dir names, and every one a ``ray start`` left,
        by id (the same process: its start time checked)."""
        import psutil

        victims = {p.pid: p for p in self.processes()}
        for pid, created in self.started.items():
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if abs(p.create_time() - created) < 0.01:
                    victims.setdefault(pid, p)
        for p in victims.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """One cluster for the file's tests (each starts the worker node again where an earlier one killed it)."""
    root = Path(tempfile.mkdtemp(prefix="kr", dir="/tmp"))  # short: Ray's socket paths live under it
    c = Cluster(root)
    try:
        c.start_head()
        c.start_worker()
        yield c
    finally:
        c.stop()


def grade(exam: Path, db: Path, judge: str, executor: str | None, env: dict[str, str], timeout: float,
          logs: Path | None = None) -> dict[str, Any]:
    """``knockout grade --json`` in a process of its own (the driver); its summary and its grades.  ``logs``: a
    cluster's temp dir, whose Ray Client server logs a failure message ends with (Ray's own "Starting Ray client
    server failed" names only the file, which is gone with the cluster)."""
    code = ("import json, sys\n"
            "from knockout.data import load_items\n"
            "from knockout.judges import make_judge\n"
            "from knockout.methods import RunConfig, run\n"
            "from knockout.storage import Store\n"
            "exam, db, judge, executor = sys.argv[1:5]\n"
            "with Store(db) as s:\n"
            "    rep = run(load_items(exam), make_judge(judge), s, RunConfig(format_retries=0, concurrency=12),\n"
            "              executor=executor or None)\n"
            "json.dump({'stats': rep.stats, 'grades': {r.answer_id: r.score for r in rep.results}}, sys.stdout)\n")
    done = subprocess.run([sys.executable, "-c", code, str(exam), str(db), judge, executor or ""], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0 and logs is not None:
        tails = "".join(f"\n--- {f.name}:\n{f.read_text(errors='replace')[-1500:]}"
                        for f in sorted(logs.glob("session_latest/logs/ray_client_server*.err")))
        raise AssertionError(done.stderr[-4000:] + tails)
    assert done.returncode == 0, done.stderr[-4000:]
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def knockout(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The ``knockout`` command in a process of its own."""
    return subprocess.run([sys.executable, "-m", "knockout.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@outside_netns
def test_ray_cluster_tests_run_in_a_loopback_only_netns(request: pytest.FixtureRequest) -> None:
    # the inner run takes ~180 s on an idle machine; beside a two-core busy loop 880-1,130 s, where the pace measured
    # at the start said 1.6-1.9: 900 s x the pace leaves room for that (600 s did not: issue 59's loaded runs)
    counts = rerun_in_loopback_netns(request.config, str(Path(__file__).relative_to(ROOT)), timeout=900)
    assert counts.get("passed", 0) >= 4, counts


@outside_netns
def test_a_killed_gate_leaves_no_process_behind() -> None:
    """Issue 59 item 4: the gate's namespace is a PID namespace that dies with the gate.  A process detached
    there (``setsid``, as ``ray start``'s daemons are) is gone within seconds of the gate's ``unshare`` being
    SIGKILLed (what a time-out does); before, 9 Ray heads were still running 26 minutes after a gate timed out."""
    import psutil

    from tests._netns import loopback_command, unshare_refused

    reason = unshare_refused()
    if reason is not None:
        pytest.skip(reason)
    mark = f"600.{secrets.randbelow(10**6)}"  # sleep's argument, unique to this test

    def detached() -> list[Any]:
        return [p for p in psutil.process_iter(["cmdline", "status"])
                if p.info["cmdline"] == ["sleep", mark] and p.info["status"] != psutil.STATUS_ZOMBIE]

    gate = subprocess.Popen(loopback_command(["sh", "-c", f"setsid sleep {mark} & sleep 600"]))
    try:
        limit = time.monotonic() + 60
        while not detached() and time.monotonic() < limit:
            time.sleep(0.1)
        assert detached(), "the detached process did not start"
    finally:
        gate.kill()
        gate.wait()
    limit = time.monotonic() + 10
    while detached() and time.monotonic() < limit:
        time.sleep(0.1)
    left = detached()
    for p in left:  # the old namespace's leftovers, killed by id
        p.kill()
    assert not left, "a process of the killed gate's namespace outlived it"


@loopback_only
def test_losing_a_worker_node_mid_run_fails_nothing(cluster: Cluster, tmp_path: Path) -> None:
    exam = write_exam(tmp_path / "exam.jsonl", QUESTIONS, ANSWERS)
    figures: dict[str, Any] = {}
    with fake_api(reply) as server:
        judge = f"openai:m?base_url={server.url}"
        local = grade(exam, tmp_path / "local.db", judge, None, cluster.env, cluster.limit(150))
    paths = [("address", f"ray:127.0.0.1:{cluster.port}")]
    if HAS_CLIENT:  # the Ray Client (knockout[ray] brings grpcio)
        paths.append(("client", f"ray://127.0.0.1:{cluster.client_port}"))
    for name, address in paths:
        cluster.ensure_worker()  # the lost node back for the next driver
        killed: list[int] = []

        def answer(req: dict[str, Any], hit: int, killed: list[int] = killed) -> tuple[int, bytes]:
            if hit == KILL_AT:  # in a thread of its own: this reply is not held up
                threading.Thread(target=lambda: killed.append(cluster.kill_worker_node()), daemon=True).start()
            return reply(req, hit)

        with fake_api(answer) as server:
            assert non_loopback_listeners() == []
            t0 = time.perf_counter()
            got = grade(exam, tmp_path / f"{name}.db", f"openai:m?base_url={server.url}",
                        f"{address}?workers=3&cpus=1&per_worker=4", cluster.env, cluster.limit(150),
                        logs=cluster.root)
            seconds = time.perf_counter() - t0
        stats = got["stats"]
        figures[name] = {"answers": len(local["grades"]), "failed": stats["failed"],
                         "lost": len(local["grades"]) - len(got["grades"]),
                         "resent": stats.get("resent_after_lost_worker"),
                         "grades_equal": got["grades"] == local["grades"], "seconds": round(seconds, 1),
                         "judge_calls": stats["judge_calls"], "fake_judge_hits": server.hits}
        print(f"KILL-TEST {name}: {json.dumps(figures[name])}")
        if os.environ.get("KNOCKOUT_RAY_KILL_FIGURES"):  # a file to append the figures to (docs/scale-out.md)
            with open(os.environ["KNOCKOUT_RAY_KILL_FIGURES"], "a") as f:
                f.write(json.dumps({"driver": name, **figures[name]}) + "\n")
        assert killed and killed[0] > 0, "the worker node was not killed"
        assert stats["failed"] == 0 and stats["invalid_requests"] == 0
        assert got["grades"] == local["grades"]  # none lost, each the grade of a local run
        assert all(g is not None for g in local["grades"].values())
        assert stats["resent_after_lost_worker"] >= 1
        assert stats["judge_calls"] == len(local["grades"])


@loopback_only
def test_every_worker_lost_and_the_node_back_within_the_window(cluster: Cluster, tmp_path: Path) -> None:
    """The only actor (2 CPUs: only the worker node holds them) dies, then its node a second later, and the
    node is started again at once (``ray start``: a new node, up in about 5 s).  A replacement placed on the
    dying node and lost with it is started again until a node the cluster holds alive takes it, within the
    window: nothing fails.  (Before, the run could stop with WorkersLost seconds after the kill: it did in one
    of two tries here; tests/test_ray.py holds the deterministic case.)"""
    cluster.ensure_worker()
    exam = write_exam(tmp_path / "exam.jsonl", 10, 12)  # 120 answers
    times: dict[str, float] = {}
    hits: list[float] = []

    def answer(req: dict[str, Any], hit: int) -> tuple[int, bytes]:
        hits.append(time.perf_counter())
        if hit == 30:
            def lose_and_start_again() -> None:
                times["killed"] = time.perf_counter()
                cluster.kill_worker_node(actors_first_s=1.0)
                cluster.start_worker()
                times["back"] = time.perf_counter()

            threading.Thread(target=lose_and_start_again, daemon=True).start()
        return reply(req, hit)

    with fake_api(answer) as server:
        t0 = time.perf_counter()
        got = grade(exam, tmp_path / "lost.db", f"openai:m?base_url={server.url}",
                    f"ray:127.0.0.1:{cluster.port}?workers=1&cpus=2&per_worker=4&window=45", cluster.env,
                    cluster.limit(150))
        end = time.perf_counter()
    stats = got["stats"]
    killed = times["killed"]
    resumed = next(t for t in hits if t > killed + 1.0)  # the judge asked again: a new actor took requests
    figures = {"node_back_s": round(times["back"] - killed, 1), "first_request_after_s": round(resumed - killed, 1),
               "run_s": round(end - t0, 1), "failed": stats["failed"], "resent": stats["resent_after_lost_worker"],
               "graded": len(got["grades"])}
    print(f"ALL-LOST-TEST: {json.dumps(figures)}")
    assert stats["failed"] == 0 and len(got["grades"]) == 120
    assert all(g is not None for g in got["grades"].values())
    assert stats["resent_after_lost_worker"] >= 1


@loopback_only
def test_a_silent_worker_is_retired_after_the_deadline(cluster: Cluster, tmp_path: Path) -> None:
    """The worker node's actors stop answering (SIGSTOP: their connections stay open, and the raylet still
    answers Ray's health check, so Ray never calls them dead).  With the default deadline (10 s for this 100 ms
    judge, then a 10 s ping) the driver finds them silent within 30 s (issue 50 item 3), retires them and sends
    their requests to the head's actor: the run ends, nothing fails."""
    import psutil

    cluster.ensure_worker()
    exam = write_exam(tmp_path / "exam.jsonl", 10, 12)  # 120 answers
    stopped: list[Any] = []
    times: dict[str, float] = {}

    def sending(p: Any) -> bool:
        """Actor process ``p`` holds a connection to the judge: it is built and sending (no longer starting,
        where the window, not the deadline, applies)."""
        with contextlib.suppress(psutil.Error):
            return any(c.raddr and c.raddr.port == port[0] for c in p.net_connections("tcp"))
        return False

    seen: set[str] = set()

    def answer(req: dict[str, Any], hit: int) -> tuple[int, bytes]:
        key = json.dumps(req.get("messages") or req.get("prompt"), sort_keys=True)
        if key in seen:  # a request sent again: a stopped actor's, once the driver retired it
            times.setdefault("resent", time.perf_counter())
        seen.add(key)
        if hit == 30:
            def stop() -> None:
                limit = time.perf_counter() + cluster.limit(60)  # on a loaded machine an actor starts slowly
                while time.perf_counter() < limit and not (
                        len(actors := [p for p in cluster.worker_raylet().children(recursive=True) if is_actor(p)])
                        == 2 and all(sending(p) for p in actors)):
                    time.sleep(0.2)
                time.sleep(1.0)
                times["stopped"] = time.perf_counter()
                stopped.extend(cluster.stop_worker_actors())
                held.set()

            threading.Thread(target=stop, daemon=True).start()
        if hit > 30:  # held until the stop: the run does not end before it
            held.wait(cluster.limit(90))
        return reply(req, hit)

    held = threading.Event()
    port: list[int] = []
    try:
        with fake_api(answer) as server:
            port.append(int(server.url.rsplit(":", 1)[1].split("/")[0]))
            t0 = time.perf_counter()
            got = grade(exam, tmp_path / "silent.db", f"openai:m?base_url={server.url}",
                        f"ray:127.0.0.1:{cluster.port}?workers=3&cpus=1&per_worker=4", cluster.env,
                        cluster.limit(150))
            end = time.perf_counter()
    finally:
        for p in stopped:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGCONT)
    stats = got["stats"]
    assert stopped, "no actor of the worker node was stopped"
    resent = times.get("resent")
    figures = {"run_s": round(end - t0, 1), "after_stop_s": round(end - times["stopped"], 1),
               "resent_after_stop_s": None if resent is None else round(resent - times["stopped"], 1),
               "failed": stats["failed"],
               "resent": stats["resent_after_lost_worker"], "graded": len(got["grades"]),
               "workers_over_time": stats["workers_over_time"]}
    print(f"SILENT-TEST: {json.dumps(figures)}")
    assert stats["failed"] == 0 and len(got["grades"]) == 120
    assert stats["resent_after_lost_worker"] >= 1
    # retired within 30 s of the stop on an idle machine (the deadline, then the ping), times the pace under load:
    # measured when the judge first sees a stopped actor's request again, not at the run's end (the rest of the
    # run, on the head's one actor until replacements start, and the command's own ending took a busy two-core
    # machine 66-109 s after the stop: issue 59)
    assert resent is not None and resent - times["stopped"] <= cluster.limit(30.0), figures


@loopback_only
def test_a_wrong_or_missing_token_is_named_at_once_and_leaves_no_run(cluster: Cluster, tmp_path: Path) -> None:
    """A driver with the wrong token, or none, is refused: one line that names the token, exit 2, and no run in
    the store (the connection is checked before the run is written)."""
    from knockout.storage import Store

    exam = write_exam(tmp_path / "exam.jsonl", 2, 3)
    home = tmp_path / "home"  # no ~/.ray/auth_token
    home.mkdir()
    wrong = {**cluster.env, "RAY_AUTH_TOKEN": "0" * 64}
    none = {k: v for k, v in cluster.env.items() if k not in ("RAY_AUTH_TOKEN", "RAY_AUTH_MODE")} | {"HOME": str(home)}
    cases = [("wrong", wrong, f"ray:127.0.0.1:{cluster.port}"), ("none", none, f"ray:127.0.0.1:{cluster.port}")]
    if HAS_CLIENT:
        cases.append(("wrong-client", wrong, f"ray://127.0.0.1:{cluster.client_port}"))
    for name, env, address in cases:
        db = tmp_path / f"{name}.db"
        t0 = time.perf_counter()
        done = knockout("grade", str(exam), "--judge", "scripted", "--executor", f"{address}?workers=1&cpus=0",
                        "-o", str(db), "--json", "-q", env=env, timeout=cluster.limit(120))
        seconds = time.perf_counter() - t0
        print(f"TOKEN-TEST {name}: exit {done.returncode}, {seconds:.1f} s: {done.stderr.strip()[-300:]}")
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, done.stderr[-3000:]
        assert len(lines) == 1 and "token" in lines[0], done.stderr[-3000:]
        assert done.stdout == ""
        if db.exists():
            with Store(db) as s:
                assert s.runs() == []


@loopback_only
def test_a_slow_judge_keeps_every_actor_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    """A judge that takes 4 s a reply against a deadline floor of 2 s (the default rule scaled down: a 30 s judge
    against the 10 s default floor): its actors answer their liveness checks, so none is retired and nothing is
    sent twice; once replies are seen the deadline is 3 x their p99 (12 s)."""
    cluster.ensure_worker()
    exam = write_exam(tmp_path / "exam.jsonl", 2, 6)  # 12 answers: two rounds of 6 (3 actors x 2)

    def slow(req: dict[str, Any], hit: int) -> tuple[int, bytes]:
        time.sleep(4.0)
        return reply(req, hit)

    with fake_api(slow) as server:
        got = grade(exam, tmp_path / "slow.db", f"openai:m?base_url={server.url}",
                    f"ray:127.0.0.1:{cluster.port}?workers=3&cpus=1&per_worker=2&deadline=2", cluster.env,
                    cluster.limit(150))
    stats = got["stats"]
    shown = ("wall_s", "resent_after_lost_worker", "workers_over_time")
    print(f"SLOW-TEST: {json.dumps({k: stats[k] for k in shown})}")
    assert stats["failed"] == 0 and stats["judge_calls"] == 12 and server.hits == 12
    assert stats["resent_after_lost_worker"] == 0 and stats["workers_over_time"] == [[0.0, 3]]


@loopback_only
def test_a_lost_node_back_restores_the_worker_count(cluster: Cluster, tmp_path: Path) -> None:
    """The worker node (2 of the 3 actors) is killed and started again at once: while it is away the head holds
    one actor and no room; the two replacements wait, Ray places them on the node when it is back, and the run
    holds 3 workers again (``workers_over_time``: 3, 1, ..., 3).  From the kill until the replacements run the
    judge holds its replies (the run lasts that long, however long ``ray start`` takes on a loaded machine), and
    30 s more once the replacements' processes are up: a process is up before its judge is built, and on a loaded
    two-core machine the driver counted them more than 18 s later (1 s was too short there).  The driver sends a
    replacement nothing while the head's requests are held (measured: no request arrives between the replacements'
    start and the release), so no request can tell the test they are up sooner."""
    cluster.ensure_worker()
    exam = write_exam(tmp_path / "exam.jsonl", 10, 12)  # 120 answers
    times: dict[str, float] = {}
    back = threading.Event()
    killed_at = 30

    def lose_and_start_again() -> None:
        times["killed"] = time.perf_counter()
        cluster.kill_worker_node()
        cluster.start_worker()
        times["node_back"] = time.perf_counter()
        limit = time.perf_counter() + cluster.limit(60)
        while cluster.worker_actors() < 2 and time.perf_counter() < limit:
            time.sleep(0.2)
        times["actors_back"] = time.perf_counter()  # their processes: an actor answers once its judge is built
        time.sleep(30.0)
        back.set()

    def answer(req: dict[str, Any], hit: int) -> tuple[int, bytes]:
        if hit == killed_at:
            threading.Thread(target=lose_and_start_again, daemon=True).start()
        if hit > killed_at:
            back.wait(cluster.limit(90))
        return reply(req, hit)

    with fake_api(answer) as server:
        t0 = time.perf_counter()
        got = grade(exam, tmp_path / "back.db", f"openai:m?base_url={server.url}",
                    f"ray:127.0.0.1:{cluster.port}?workers=3&cpus=1&per_worker=4", cluster.env,
                    cluster.limit(150))
        end = time.perf_counter()
    stats = got["stats"]
    counts = [n for _, n in stats["workers_over_time"]]
    figures = {"run_s": round(end - t0, 1), "node_back_s": round(times["node_back"] - times["killed"], 1),
               "actors_back_s": round(times["actors_back"] - times["killed"], 1), "failed": stats["failed"],
               "resent": stats["resent_after_lost_worker"], "workers_over_time": stats["workers_over_time"]}
    print(f"NODE-BACK-TEST: {json.dumps(figures)}")
    assert stats["failed"] == 0 and len(got["grades"]) == 120
    assert counts[0] == 3 and min(counts) == 1 and counts[-1] == 3, figures


@loopback_only
def test_the_head_node_lost_mid_run_ends_interrupted_and_a_rerun_pays_only_what_is_missing(
        cluster: Cluster, tmp_path: Path) -> None:
    """The head node (its GCS, its raylet and its actor) is SIGKILLed mid-run.  The driver's event loop is never
    held by a Ray call: the two actors of the worker node keep answering, the GCS's silence is noticed at the
    limit (10 s by default), and the command ends ``interrupted`` within deadline + 10 s: one JSON document on
    stdout, one line naming the run and the command that resumes it (before: 58.8 s with nothing sent, then
    Ray's core worker ended the process, exit 1, no line and no JSON).  The same command against the cluster
    started again completes, paying only what was missing: the judge is asked again at most for the requests
    that were in flight.  Last in this file: it replaces the cluster."""
    cluster.ensure_worker()
    answers = 240
    exam = write_exam(tmp_path / "exam.jsonl", 20, 12)
    db = tmp_path / "head.db"
    times: dict[str, float] = {}
    hits: list[float] = []

    def answer(req: dict[str, Any], hit: int) -> tuple[int, bytes]:
        hits.append(time.perf_counter())
        if hit == 60:
            def kill() -> None:
                times["killed"] = time.perf_counter()
                times["victims"] = cluster.kill_head()

            threading.Thread(target=kill, daemon=True).start()
        if "killed" in times:  # slower after the kill: the run outlasts the GCS limit
            time.sleep(0.5)
        return reply(req, hit)

    def command(port: int) -> list[str]:
        return ["grade", str(exam), "--judge", f"openai:m?base_url={server.url}", "--executor",
                f"ray:127.0.0.1:{port}?workers=3&cpus=1&per_worker=4", "--concurrency", "12", "-o", str(db),
                "--json", "-q"]

    with fake_api(answer) as server:
        done = knockout(*command(cluster.port), env=cluster.env, timeout=cluster.limit(150))
        end = time.perf_counter()
        first_hits = server.hits
        assert "killed" in times, "the head node was not killed"
        after_kill = sum(t > times["killed"] + 1.0 for t in hits)  # the worker node's actors kept answering
        doc = json.loads(done.stdout)
        lines = done.stderr.strip().splitlines()
        figures: dict[str, Any] = {"exit": done.returncode, "ended_after_kill_s": round(end - times["killed"], 1),
                                   "hits_after_kill": after_kill, "status": doc.get("status"),
                                   "first_hits": first_hits}
        print(f"HEAD-TEST first: {json.dumps(figures)}\n{done.stderr[-1500:]}")
        assert done.returncode == 1, done.stderr[-3000:]
        assert doc["status"] == "interrupted" and "GCS" in doc["error"], doc
        assert "stored as interrupted; resume it with:" in lines[-1], done.stderr[-3000:]
        assert end - times["killed"] <= 10 + 10, figures
        assert after_kill > 0, figures
        times.clear()
        cluster.restart()
        # Counted once every process of the old cluster is gone: a task already queued on the surviving node's
        # actor may still reach the judge after the driver has ended (2 calls, once in 9 runs), until its node ends
        # (paid in the first run, so within paid_twice's bound).
        before_rerun = server.hits
        again = knockout(*command(cluster.port), env=cluster.env, timeout=cluster.limit(150))
        assert again.returncode == 0, again.stderr[-3000:]
        summary = json.loads(again.stdout)
        figures.update(rerun_calls=summary["judge_calls"], cache_hits=summary["cache_hits"],
                       after_end=before_rerun - first_hits, paid_twice=before_rerun + summary["judge_calls"] - answers)
        print(f"HEAD-TEST rerun: {json.dumps(figures)}")
        assert summary["status"] == "complete" and summary["failed"] == 0 and summary["valid"] == answers
        assert summary["judge_calls"] == server.hits - before_rerun
        assert 0 <= figures["paid_twice"] <= 12 + 4  # in flight at the end, and on the head's actor when it died
