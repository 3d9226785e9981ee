"""The Ray executor: a local Ray instance (2 CPUs) whose actors hold the judge; the driver alone writes the
store (cache, resume and accounting as in process).  The real-judge test uses the 0.5B GGUF, a handful of
calls; the others use the scripted judge (a simulation) for the run kinds' plumbing, or an OpenAI-compatible
judge on a loopback fake server.

Every test that starts Ray runs inside a network namespace with only loopback (``tests/_netns.py``): the
gate test below re-executes this file there (Ray binds the host's own address even when told 127.0.0.1)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.engine import Done, Event
from knockout.engine._executors import parse_executor
from knockout.errors import ConfigError
from knockout.judges import GenParams, make_judge
from knockout.methods import MethodOptions, RunConfig, run
from knockout.sbs import SbsConfig, SbsItem, run_sbs
from knockout.storage import Store
from tests._netns import in_this_netns, loopback_only, non_loopback_listeners, outside_netns, rerun_in_loopback_netns
from tests.conftest import ROOT, SMALL_MODEL, needs_model
from tests.fake_server import chat_body, fake_api

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs ray (knockout[ray])")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    import ray

    # workers import knockout from this checkout
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), before or ""])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    if before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = before


def items(n_q: int = 2, n_a: int = 4) -> ItemSet:
    qs = [Question(id=f"q{i}", text=f"What is {i} + {i}?", max_points=2) for i in range(n_q)]
    answers = [Answer(id=f"q{i}a{j}", question_id=f"q{i}", examinee=f"e{j}", text=f"{2 * i + j % 2} (answer {j})",
                      human_scores={"h": float(2 if j % 2 == 0 else 0)}) for i in range(n_q) for j in range(n_a)]
    return ItemSet(qs, answers, source="ray-test")


def test_executor_specs() -> None:
    assert parse_executor("local") == ("local", None, {})
    assert parse_executor("ray") == ("ray", None, {})
    assert parse_executor("ray://head:10001?workers=4") == ("ray", "ray://head:10001", {"workers": "4"})
    assert parse_executor("ray:auto") == ("ray", "auto", {})
    with pytest.raises(ConfigError, match="unknown executor"):
        parse_executor("dask")


@outside_netns
def test_ray_tests_run_in_a_loopback_only_netns(request: pytest.FixtureRequest) -> None:
    """The gate: this file's tests that start Ray, re-executed in a network namespace with only ``lo``."""
    counts = rerun_in_loopback_netns(request.config, str(Path(__file__).relative_to(ROOT)), timeout=420)
    assert counts.get("passed", 0) >= 5, counts


@loopback_only
def test_ray_listens_on_loopback_only(ray_local: None) -> None:
    """While a Ray instance runs, nothing listens on a non-loopback address (the namespace has only lo)."""
    import psutil
    import ray

    assert ray.is_initialized()
    assert set(psutil.net_if_addrs()) == {"lo"}
    assert non_loopback_listeners() == []


@loopback_only
def test_scripted_knockout_and_sbs_on_ray_same_as_in_process(ray_local: None, tmp_path: Path) -> None:
    """Every method and run kind works unchanged: the same results as in process, the store written by the
    driver only, and a rerun is all cache hits."""
    data = items(3, 5)
    cfg = RunConfig(method="knockout", options=MethodOptions(debias=True), concurrency=4)
    with Store(tmp_path / "local.db") as s:
        local = run(data, make_judge("scripted?noise=0.2"), s, cfg)
    with Store(tmp_path / "ray.db") as s:
        remote = run(data, make_judge("scripted?noise=0.2"), s, cfg, executor="ray?workers=2&cpus=0")
        assert remote.stats["judge_calls"] == local.stats["judge_calls"] > 0
        assert [r.score for r in remote.results] == [r.score for r in local.results]
        assert s.live_calls(remote.run_id) == remote.stats["judge_calls"]
        again = run(data, make_judge("scripted?noise=0.2"), s, cfg, executor="ray?workers=2&cpus=0")
        assert again.stats["judge_calls"] == 0
        assert again.stats["cache_hits"] == remote.stats["judge_calls"] + remote.stats["cache_hits"]
    pairs = [SbsItem(id=f"i{k}", question=f"q{k}", candidate=f"c{k}", baseline=f"b{k}",
                     human_verdicts={"h": "A"}) for k in range(3)]
    with Store(tmp_path / "sbs.db") as s:
        rep = run_sbs(pairs, make_judge("scripted"), s, SbsConfig(), source="t", executor="ray?workers=2&cpus=0")
        assert rep.summary()["judge_calls"] == 6


def test_bad_executor_specs_fail_before_the_run_is_written(tmp_path: Path) -> None:
    for spec, message in (("ray?wrokers=2", "unknown executor option"), ("ray?workers=0", "must be >= 1"),
                          ("ray?cpus=x", "must be an integer"), ("spark", "unknown executor")):
        with Store(tmp_path / "x.db") as s, pytest.raises(ConfigError, match=message):
            run(items(1, 2), make_judge("scripted"), s, RunConfig(), executor=spec)
        with Store(tmp_path / "x.db") as s:
            assert s.runs() == []


def graded_reply(req: dict[str, object], n: int) -> tuple[int, bytes]:
    """The fake judge: a grade that depends on the request only (the same on any worker), after 100 ms."""
    time.sleep(0.1)
    text = json.dumps(req.get("messages"))
    return 200, chat_body(f"Score: {sum(map(ord, text)) % 3}/2")


def judge_worker_pids() -> list[int]:
    import psutil

    return [p.pid for p in psutil.process_iter(["cmdline"])
            if any("_JudgeWorker" in part for part in (p.info["cmdline"] or [])[:1]) and in_this_netns(p.pid)]


@loopback_only
def test_a_killed_actor_loses_and_fails_nothing(ray_local: None, tmp_path: Path) -> None:
    """An actor's process killed mid-run (SIGKILL): its requests in flight, and those sent to it before Ray
    reported it gone, are sent again to the others; none is failed, the grades are those of a local run,
    and the re-sent requests are counted in the summary."""
    data = items(10, 12)
    cfg = RunConfig(format_retries=0)
    killed: list[int] = []

    def answer(req: dict[str, object], n: int) -> tuple[int, bytes]:
        if n == 40 and not killed:  # mid-run: one actor's process dies
            pids = judge_worker_pids()
            assert pids, "no actor process found"
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])
        return graded_reply(req, n)

    with fake_api(answer) as server, Store(tmp_path / "ray.db") as s:
        spec = f"openai:m?base_url={server.url}"
        remote = run(data, make_judge(spec), s, cfg, executor="ray?workers=2&cpus=0&per_worker=4")
    with fake_api(graded_reply) as server, Store(tmp_path / "local.db") as s:
        local = run(data, make_judge(f"openai:m?base_url={server.url}"), s, RunConfig(format_retries=0,
                    concurrency=8))
    assert killed
    assert remote.stats["failed"] == 0 and remote.stats["judge_calls"] == len(data.answers)
    assert remote.stats["resent_after_lost_worker"] >= 1
    assert [(r.answer_id, r.score) for r in remote.results] == [(r.answer_id, r.score) for r in local.results]


@loopback_only
def test_a_slow_judge_is_not_taken_for_a_silent_actor(ray_local: None, tmp_path: Path) -> None:
    """Once the actors have answered, replies take 3 s against a 1 s deadline with every request slot of each
    actor busy: the actors still answer their liveness check at once (a concurrency group of its own), so
    none is retired and nothing is sent twice."""
    def slow(req: dict[str, object], n: int) -> tuple[int, bytes]:
        time.sleep(3.0 if n > 4 else 0.1)
        return graded_reply(req, n)

    data = items(2, 4)
    with fake_api(slow) as server, Store(tmp_path / "slow.db") as s:
        rep = run(data, make_judge(f"openai:m?base_url={server.url}"), s, RunConfig(format_retries=0),
                  executor="ray?workers=2&cpus=0&per_worker=2&deadline=1")
        assert server.hits == len(data.answers)
    assert rep.stats["failed"] == 0 and rep.stats["judge_calls"] == len(data.answers)
    assert rep.stats["resent_after_lost_worker"] == 0


@loopback_only
def test_json_summary_stays_one_document_with_ray(tmp_path: Path) -> None:
    """``--json --executor ray``: stdout is one JSON document (Ray's own output goes to stderr)."""
    from tests.fake_server import write_exam

    exam = write_exam(tmp_path / "exam.jsonl", 2, 3)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "knockout.cli", "grade", str(exam), "--judge", "scripted",
                           "--executor", "ray?workers=1&cpus=0", "-o", str(tmp_path / "j.db"), "--json", "-q"],
                          capture_output=True, text=True, env=env, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["judge_calls"] == 6 and summary["resent_after_lost_worker"] == 0


@loopback_only
@needs_model
@pytest.mark.model
def test_gguf_judge_on_two_ray_workers(ray_local: None, small_gguf: Path, tmp_path: Path) -> None:
    """The 0.5B GGUF loaded in each of 2 Ray actors (not in the driver): 4 calls, stored by the driver."""
    from knockout.judges import _llamacpp

    data = items(2, 2)
    loaded_before = set(_llamacpp._LOADED)  # models other tests of this process loaded
    judge = make_judge(f"llamacpp:{SMALL_MODEL}?threads=1")
    cfg = RunConfig(params=GenParams(max_tokens=24, temperature=0.0), format_retries=0)
    with Store(tmp_path / "g.db") as s:
        rep = run(data, judge, s, cfg, executor="ray?workers=2&cpus=1")
        assert rep.stats["judge_calls"] == 4 and rep.stats["failed"] == 0
        assert s.live_calls(rep.run_id) == 4 and s.repeated_calls() == 0
        assert set(_llamacpp._LOADED) == loaded_before  # the model was loaded by the workers, not here
        again = run(data, make_judge(f"llamacpp:{SMALL_MODEL}?threads=1"), s, cfg, executor="ray?workers=2&cpus=1")
        assert again.stats["judge_calls"] == 0


# -- a lost actor, with a stand-in for Ray (no Ray started: the executor's own bookkeeping) ----------------
class FakeActorError(Exception):
    """Stands for ray.exceptions.RayActorError."""


class FakeActor:
    """A stand-in for an actor handle: ``method.remote(...)`` is an awaitable; a dead actor raises, an actor
    that never starts (no room) never answers."""

    def __init__(self, ray: FakeRay, recipe: tuple[object, ...]) -> None:
        from knockout.engine._ray import _JudgeWorker

        self.ray = ray
        self.index = len(ray.actors)
        self.dead = self.index in ray.doomed
        self.calls = 0
        self.body = _JudgeWorker(*recipe)  # type: ignore[arg-type]
        ray.actors.append(self)

    @property
    def starts(self) -> bool:
        """The cluster has room for this actor (now: room that comes back places a pending actor)."""
        return self.index < self.ray.startable

    def __getattr__(self, name: str) -> object:
        actor = self

        class Method:
            @staticmethod
            async def remote(*args: object) -> object:
                actor.calls += 1
                while not actor.starts:  # pending: placed once the cluster has room
                    await asyncio.sleep(0.01)
                if actor.index in actor.ray.silent and actor.calls > 1:
                    await asyncio.sleep(3600)
                await asyncio.sleep(actor.ray.delay if name == "complete" else actor.ray.ping_delay)
                if actor.dead:
                    raise FakeActorError(f"actor {actor.index} died")
                return await getattr(actor.body, name)(*args) if name != "where" else actor.index

        return Method


class FakeRay:
    def __init__(self, doomed: set[int], startable: int, silent: set[int] | None = None, delay: float = 0.01,
                 ping_delay: float = 0.01) -> None:
        self.actors: list[FakeActor] = []
        self.delay = delay  # seconds a request takes
        self.ping_delay = ping_delay  # seconds any other call (a liveness check) takes: a loaded machine's
        self.gcs_down = False  # the GCS answers nothing (the head node lost)
        self.doomed = doomed  # actors (by creation order) that die
        self.startable = startable  # actors that can be started at all (the cluster's room)
        self.silent = silent or set()  # actors that answer their first call, then nothing (a node that hangs)
        self.exceptions = types.SimpleNamespace(RayActorError=FakeActorError)
        self.killed: list[int] = []

    def is_initialized(self) -> bool:
        return True

    def cluster_resources(self) -> dict[str, float]:
        if self.gcs_down:
            raise ConnectionError("GCS unreachable")
        return {"CPU": 2.0}

    def remote(self, **options: object) -> object:
        ray = self

        def wrap(cls: object) -> object:
            return types.SimpleNamespace(remote=lambda *recipe: FakeActor(ray, recipe))

        return wrap

    def method(self, **options: object) -> object:
        return lambda f: f

    def kill(self, actor: FakeActor, no_restart: bool = True) -> None:
        self.killed.append(actor.index)


def resent_without_loss(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake: FakeRay, data: ItemSet,
                        executor: str) -> None:
    """Grade ``data`` locally and through ``fake``: every request answered once in the end (none failed, some
    re-sent after a lost actor), with the local run's grades."""
    cfg = RunConfig(method="individual", concurrency=4, format_retries=0)
    with Store(tmp_path / "local.db") as s:
        local = run(data, make_judge("scripted"), s, cfg)
    monkeypatch.setitem(sys.modules, "ray", fake)
    with Store(tmp_path / "fake.db") as s:
        remote = run(data, make_judge("scripted"), s, cfg, executor=executor)
    assert remote.stats["failed"] == 0 and remote.stats["judge_calls"] == len(data.answers)
    assert remote.stats["resent_after_lost_worker"] >= 1
    assert [r.score for r in remote.results] == [r.score for r in local.results]


def test_requests_of_a_lost_actor_go_to_the_others_and_a_replacement(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """Actor 0 dies: its requests are sent again (counted), none fails, the scores are those of a local run;
    with room in the cluster a replacement is started and takes requests."""
    fake = FakeRay(doomed={0}, startable=3)
    resent_without_loss(monkeypatch, tmp_path, fake, items(4, 6), "ray?workers=2&cpus=1&per_worker=2")
    assert len(fake.actors) == 3 and 0 in fake.killed  # the lost one killed, a replacement started


def test_no_actor_left_stops_the_run_with_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every actor lost and none can be started: WorkersLost stops the run (stored failed; a rerun resumes)
    instead of failing its requests one by one, and the message says why."""
    from knockout.engine._ray import RayExecutor, WorkersLost

    monkeypatch.setattr(RayExecutor, "replace_timeout_s", 0.3)
    fake = FakeRay(doomed={0, 1}, startable=2)
    monkeypatch.setitem(sys.modules, "ray", fake)
    with Store(tmp_path / "fake.db") as s:
        with pytest.raises(WorkersLost, match="no Ray worker is left"):
            run(items(2, 3), make_judge("scripted"), s, RunConfig(format_retries=0),
                executor="ray?workers=2&cpus=1&per_worker=2")
        assert [r.status for r in s.runs()] == ["failed"]


def test_a_replacement_that_dies_before_it_answers_is_started_again(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """Every actor lost, and the first replacement dies before it answers (Ray placed it on a node that had
    died before the cluster marked it dead): it is started again within the window, and the run fails
    nothing (before: WorkersLost at the first replacement's death)."""
    fake = FakeRay(doomed={0, 1}, startable=3)  # the one actor dies; so does its first replacement
    resent_without_loss(monkeypatch, tmp_path, fake, items(3, 4), "ray?workers=1&cpus=1&per_worker=2")
    assert len(fake.actors) == 3 and {0, 1} <= set(fake.killed)


def test_a_silent_actor_is_retired_after_the_deadline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Actor 0 answers once, then nothing more (neither its requests nor its liveness check): after the
    per-request deadline it is retired and its requests are sent to the others; the run fails nothing and
    counts the re-sends."""
    from knockout.engine._ray import RayExecutor

    monkeypatch.setattr(RayExecutor, "ping_timeout_s", 0.2)
    data = items(3, 4)
    cfg = RunConfig(method="individual", concurrency=4, format_retries=0)
    fake = FakeRay(doomed=set(), startable=3, silent={0})
    monkeypatch.setitem(sys.modules, "ray", fake)
    with Store(tmp_path / "fake.db") as s:
        remote = run(data, make_judge("scripted"), s, cfg, executor="ray?workers=2&cpus=1&per_worker=2&deadline=1")
    assert remote.stats["failed"] == 0 and remote.stats["judge_calls"] == len(data.answers)
    assert remote.stats["resent_after_lost_worker"] >= 1
    assert fake.killed.count(0) == 2  # retired mid-run, and killed again with the others at the end


def test_a_loaded_machines_slow_pings_retire_no_actor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On a loaded machine every answer to a ping takes 0.5 s, longer than the ping's floor (0.2 s here, 10 s in
    earnest): the liveness check waits 3 x the slowest answer an actor that is up gave (its second ping, timed at
    the start), so the actors of a judge slower than the deadline are checked and kept, none retired, nothing sent
    twice (before: every check timed out and every actor was retired)."""
    from knockout.engine._ray import RayExecutor

    monkeypatch.setattr(RayExecutor, "ping_timeout_s", 0.2)
    data = items(2, 3)
    cfg = RunConfig(method="individual", concurrency=4, format_retries=0)
    fake = FakeRay(doomed=set(), startable=2, delay=2.5, ping_delay=0.5)
    monkeypatch.setitem(sys.modules, "ray", fake)
    with Store(tmp_path / "slow.db") as s:
        got = run(data, make_judge("scripted"), s, cfg, executor="ray?workers=2&cpus=1&per_worker=2&deadline=1")
    assert got.stats["failed"] == 0 and got.stats["judge_calls"] == len(data.answers)
    assert got.stats["resent_after_lost_worker"] == 0 and fake.killed.count(0) == 1  # killed once: at the end


def test_a_run_that_loses_every_worker_prints_its_status_as_json(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """``--json`` on a run that stops with WorkersLost: one JSON document on stdout with the run's status
    (``failed``) and error, the one error line on stderr, exit 1."""
    from typer.testing import CliRunner

    from knockout.cli._main import app
    from knockout.engine._ray import RayExecutor
    from tests.fake_server import write_exam

    monkeypatch.setattr(RayExecutor, "replace_timeout_s", 0.3)
    monkeypatch.setitem(sys.modules, "ray", FakeRay(doomed={0, 1}, startable=2))
    exam = write_exam(tmp_path / "exam.jsonl", 2, 3)
    r = CliRunner().invoke(app, ["grade", str(exam), "--judge", "scripted", "--executor",
                                 "ray?workers=2&cpus=1&per_worker=2", "-o", str(tmp_path / "s.db"), "--json", "-q"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] == "failed" and "no Ray worker is left" in doc["error"]
    with Store(tmp_path / "s.db") as s:
        assert [(x.id, x.status) for x in s.runs()] == [(doc["run_id"], "failed")]
    assert "no Ray worker is left" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_every_actor_lost_is_replaced_and_capacity_that_returns_restores_the_count(monkeypatch: pytest.MonkeyPatch,
                                                                                tmp_path: Path) -> None:
    """Issue 50 item 2: both actors die with no room left; both are replaced (not one), the replacements wait
    for room, and once the cluster has room again (a node back) the run holds 2 workers again: the count over
    time says so (``workers_over_time``, and one info event per change)."""
    import threading

    from knockout.engine import Info

    fake = FakeRay(doomed={0, 1}, startable=2, delay=0.05)
    threading.Timer(0.5, lambda: setattr(fake, "startable", 4)).start()  # the node back after 0.5 s
    monkeypatch.setitem(sys.modules, "ray", fake)
    infos: list[str] = []
    cfg = RunConfig(method="individual", concurrency=4, format_retries=0)
    with Store(tmp_path / "fake.db") as s:
        rep = run(items(4, 6), make_judge("scripted"), s, cfg, executor="ray?workers=2&cpus=1&per_worker=2",
                  observer=lambda e: infos.append(e.text) if isinstance(e, Info) else None)
    assert rep.stats["failed"] == 0 and rep.stats["judge_calls"] == 24
    counts = [n for _, n in rep.stats["workers_over_time"]]
    assert counts[0] == 2 and 0 in counts and counts[-1] == 2, counts
    assert len(fake.actors) == 4  # both replaced, each once
    assert infos[-1].startswith("ray: 2 of 2 workers") and len(infos) == len(counts)


def test_the_deadline_follows_the_reply_times() -> None:
    """Issue 50 item 3: the deadline is max(the deadline option, 3 x the p99 of the run's reply times)."""
    from knockout.engine._ray import RayExecutor

    ex = RayExecutor.__new__(RayExecutor)
    ex.deadline_floor = 10.0
    ex._replies, ex._p99_s, ex._since_p99 = __import__("collections").deque(maxlen=1000), 0.0, 0
    assert ex.deadline == 10.0  # no reply yet: the floor
    for _ in range(100):
        ex._replied(0.1)
    assert ex.deadline == 10.0  # fast replies: the floor
    for _ in range(100):
        ex._replied(30.0)
    assert ex.deadline == 90.0  # a 30 s judge: 3 x 30 s


def test_a_lost_gcs_ends_the_run_interrupted_with_its_resume_line(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """Issue 50 item 1: the cluster's GCS stops answering (the head node lost) while the actors still answer:
    they keep answering until the GCS limit, then the run stops, stored ``interrupted``: one JSON document on
    stdout (``"status": "interrupted"``), one line on stderr with the command that resumes it, exit 1."""
    from typer.testing import CliRunner

    from knockout.cli._main import app
    from knockout.engine._ray import ClusterLost, RayExecutor
    from tests.fake_server import write_exam

    monkeypatch.setattr(ClusterLost, "exit_now", False)  # the CLI would end this process (pytest's) at once
    monkeypatch.setattr(RayExecutor, "gcs_limit_min_s", 0.5)
    monkeypatch.setattr(RayExecutor, "gcs_period_s", 0.1)
    fake = FakeRay(doomed=set(), startable=2, delay=0.1)
    fake.gcs_down = True
    monkeypatch.setitem(sys.modules, "ray", fake)
    exam = write_exam(tmp_path / "exam.jsonl", 10, 10)  # 100 answers: 2.5 s at 4 in flight
    t0 = time.perf_counter()
    r = CliRunner().invoke(app, ["grade", str(exam), "--judge", "scripted", "--executor",
                                 "ray?workers=2&cpus=1&per_worker=2&deadline=1", "-o", str(tmp_path / "s.db"),
                                 "--json", "-q"])
    seconds = time.perf_counter() - t0
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] == "interrupted" and "GCS" in doc["error"]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "stored as interrupted; resume it with:" in lines[0], r.stderr
    assert seconds < 2.5  # stopped at the GCS limit (1 s), not at the end of the run
    with Store(tmp_path / "s.db") as s:
        assert [(x.id, x.status) for x in s.runs()] == [(doc["run_id"], "interrupted")]
        assert 0 < s.live_calls(doc["run_id"]) < 100  # the actors answered until the limit


def test_a_transient_ray_client_start_is_tried_again_and_a_lasting_one_reported() -> None:
    """Issue 50 item 5: 'Starting Ray client server failed' (the proxy's server not ready in time) is retried with
    pauses; another failure, or a local address, is reported at once; a lasting one after the last pause."""
    from knockout.engine._ray import init_ray
    from knockout.errors import ConfigError

    class FakeRay:  # stands in for the ray module's init/shutdown: records calls, fails as told
        def __init__(self, failures: list[Exception]) -> None:
            self.failures, self.inits, self.shutdowns = failures, 0, 0

        def init(self, **_: object) -> None:
            self.inits += 1
            if self.failures:
                raise self.failures.pop(0)

        def shutdown(self) -> None:
            self.shutdowns += 1

    flaky = FakeRay([RuntimeError("Starting Ray client server failed. See ray_client_server_23000.err"),
                     ConnectionError("Initialization failure from server:\nTraceback ...")])
    init_ray(flaky, "ray://127.0.0.1:10001", pauses=(0.0, 0.0, 0.0))
    assert flaky.inits == 3 and flaky.shutdowns == 2
    lasting = FakeRay([RuntimeError("Starting Ray client server failed")] * 4)
    with pytest.raises(ConfigError, match="cannot start or reach Ray"):
        init_ray(lasting, "ray://127.0.0.1:10001", pauses=(0.0, 0.0))
    assert lasting.inits == 3
    for address, exc in (("ray://127.0.0.1:10001", ValueError("bad address")),
                         (None, RuntimeError("Starting Ray client server failed"))):
        once = FakeRay([exc])
        with pytest.raises(ConfigError, match="cannot start or reach Ray"):
            init_ray(once, address, pauses=(0.0, 0.0))
        assert once.inits == 1


def held_loop_observer(after: int, seconds: float) -> tuple[list[float], Callable[[Event], None]]:
    """An observer that holds the event loop (``time.sleep`` on it, as a long computation between two awaits
    does) for ``seconds`` at the ``after``-th answer; the list gets the time it held it."""
    held: list[float] = []
    seen = [0]

    def observe(event: Event) -> None:
        if isinstance(event, Done):
            seen[0] += 1
            if seen[0] == after and not held:
                t0 = time.perf_counter()
                time.sleep(seconds)
                held.append(time.perf_counter() - t0)

    return held, observe


def graded_with_a_held_loop(db: Path, exam: ItemSet, concurrency: int, executor: str, after: int,
                            seconds: float) -> None:
    """``exam`` graded by the scripted judge through ``executor`` while the driver's event loop is held for
    ``seconds`` after ``after`` results: the run is stored complete, every answer graded, the loop held as asked."""
    held, observe = held_loop_observer(after=after, seconds=seconds)
    with Store(db) as s:
        rep = run(exam, make_judge("scripted"), s, RunConfig(format_retries=0, concurrency=concurrency),
                  executor=executor, observer=observe)
        assert [r.status for r in s.runs()] == ["complete"]
    assert held and held[0] >= seconds
    assert rep.stats["failed"] == 0 and rep.stats["judge_calls"] == len(exam)


def test_a_held_event_loop_is_not_a_silent_head(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 59 item 1: the driver's event loop held for 3 times the GCS limit while the GCS answers all along
    (the second reader's encoding between two chunks did this for 311 s): the head is not called lost (before:
    ClusterLost, the run stored interrupted), the run completes."""
    from knockout.engine._ray import RayExecutor

    monkeypatch.setattr(RayExecutor, "gcs_limit_min_s", 0.5)
    monkeypatch.setattr(RayExecutor, "gcs_period_s", 0.1)
    fake = FakeRay(doomed=set(), startable=2, delay=0.02)
    monkeypatch.setitem(sys.modules, "ray", fake)
    # the limit is 1 s (deadline=1)
    graded_with_a_held_loop(tmp_path / "fake.db", items(3, 4), 4, "ray?workers=2&cpus=1&per_worker=2&deadline=1",
                            after=3, seconds=3.0)


@loopback_only
def test_a_held_event_loop_is_not_a_silent_head_on_real_ray(ray_local: None, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    """The same on a real (local) Ray instance: the driver's loop held for 12 s against a 4 s GCS limit; the GCS
    answers the watch's thread meanwhile, so the run completes with every answer graded."""
    from knockout.engine._ray import RayExecutor

    monkeypatch.setattr(RayExecutor, "gcs_period_s", 0.5)
    graded_with_a_held_loop(tmp_path / "held.db", items(2, 4), 2, "ray?workers=2&cpus=0&deadline=4",
                            after=2, seconds=12.0)


@loopback_only
def test_compute_runs_on_a_ray_worker_not_on_the_driver(ray_local: None, tmp_path: Path) -> None:
    """Issue 59: ``Engine.compute(fn, *args)`` with the Ray executor runs ``fn`` on a worker (an actor holding the
    judge), in its compute pool with one BLAS thread, and hands back its result; the judge's requests are answered
    meanwhile."""
    from knockout.engine import Engine
    from knockout.engine._ray import RayExecutor
    from tests._compute import probe

    judge = make_judge("scripted")

    async def main() -> tuple[list[tuple[int, str, int, int]], list[int]]:
        executor = RayExecutor(judge, options={"workers": "2", "cpus": "0"})
        try:
            with Store(tmp_path / "c.db") as store:
                engine = Engine(judge, store, executor=executor)
                results = await asyncio.gather(*(engine.compute(probe, n) for n in range(4)))
                return list(results), await executor.worker_pids()
        finally:
            await executor.aclose()

    results, workers = asyncio.run(main())
    assert [r[3] for r in results] == [0, 1, 4, 9]
    assert {r[0] for r in results} <= set(workers) and os.getpid() not in {r[0] for r in results}
    assert all(r[1].startswith("knockout-compute") and r[2] == 1 for r in results)
