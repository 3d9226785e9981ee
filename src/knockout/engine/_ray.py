"""The Ray executor: judge requests answered by Ray actors that each hold a judge.

``--executor ray`` (a local Ray instance, or the cluster ``RAY_ADDRESS`` names), ``ray://HOST:10001``
(Ray client) or ``ray:ADDRESS``; options ``workers`` (actors; default: the cluster's CPUs divided by
``cpus``), ``cpus`` (CPUs reserved per actor, default 1), ``per_worker`` (requests in flight per actor;
default: the judge's own concurrency, 1 for the embedded judge), ``gpus`` (GPUs per actor, default 0),
``window`` (seconds a run waits for a worker when none is left, default 60), ``deadline`` (seconds a request
may go unanswered before its actor is asked whether it is alive; default: the judge's own ``timeout``, else
120).

Each actor builds its own judge from the driver's recipe (backend class, model, options): an embedded
GGUF loaded once per worker, or a client of an OpenAI-compatible endpoint (a vLLM server) per worker.
Only completions travel back; the driver's engine stores them, so cache, leases, resume and accounting
are the same as in process.  A simulated judge (scripted) is given, with each request, the facts the
driver's oracle holds about the request's subject (nothing else about the truth leaves the driver).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from knockout.engine._executors import Executor, _settle, judge_recipe, ray_options
from knockout.errors import ConfigError, JudgeError
from knockout.judges._base import Completion, Judge, JudgeRequest


class _JudgeWorker:
    """A Ray actor's body (wrapped with ``ray.remote`` when first used): one judge, async calls."""

    def __init__(self, cls: type[Judge], model: str, options: dict[str, Any]) -> None:
        self.judge = cls(model, options)
        if self.judge.simulated:
            self.judge.bind_simulation(lambda subject: dict(subject.facts["oracle"]))
        self.pid = os.getpid()

    async def complete(self, request: JudgeRequest, facts: dict[str, Any] | None) -> Completion:
        from knockout.judges._base import Subject, current_subject

        token = current_subject.set(Subject("remote", facts={"oracle": facts}) if facts is not None else None)
        try:
            return await self.judge.complete(request)
        finally:
            current_subject.reset(token)

    async def compute(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(*args)`` in this worker's compute pool (one BLAS thread; a concurrency group of its own, one at a
        time: the judge's requests are answered meanwhile)."""
        from knockout.engine._executors import compute_here

        return await compute_here(fn, *args)

    def where(self) -> int:
        """The actor's process id; also its liveness check (a concurrency group of its own: it answers while
        every request slot is busy)."""
        return self.pid

    async def close(self) -> None:
        await self.judge.aclose()


#: the errors that say an actor (its process or its node) is gone, not that its judge failed
def _lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    return (ray.exceptions.RayActorError,)  # ActorDiedError, ActorUnavailableError


class WorkersLost(JudgeError):
    """No Ray actor is left to send a request to, and none could be started: the run stops (``fatal``)."""

    #: the engine stops the run on this error instead of recording the request as failed
    fatal = True


class _Gone(Exception):
    """The actor a request was waiting on was lost or retired (another request found out): send it again."""


@dataclass
class _Slot:
    """One actor and the requests in flight on it."""

    actor: Any
    load: int = 0
    alive: bool = True
    #: the actor has answered once (until then it may still be starting: building its judge, loading a model)
    ready: bool = False
    #: set when the actor is lost or retired: the requests waiting on it are sent again at once
    gone: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    #: the liveness check in flight (one at a time per actor)
    ping: asyncio.Task[bool] | None = None


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 pointed at 2 for the block: what Ray (and the processes it starts) print while it
    starts goes to stderr, so ``--json`` stays one JSON document on stdout."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no real stdout (captured, closed): nothing to protect
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _ray_messages_to_stderr() -> None:
    """What the driver prints for the cluster (``(raylet) The node ... has been marked dead``, worker logs) goes
    to stderr: Ray prints it on stdout, from a thread of its own, whatever ``log_to_driver`` says, and
    ``--json`` must stay one JSON document on stdout.  (Ray's private printers, wrapped where they exist.)"""
    with contextlib.suppress(Exception):
        from ray._private import worker as ray_worker

        original = ray_worker.print_to_stdstream
        if not getattr(original, "knockout_stderr", False):
            def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
                original({**data, "is_err": True}, ignore_prefix=ignore_prefix)

            to_stderr.knockout_stderr = True  # type: ignore[attr-defined]
            ray_worker.print_to_stdstream = to_stderr
    with contextlib.suppress(Exception):
        from ray.util.client import logsclient

        def stdstream(self: Any, level: int, msg: str) -> None:
            print(msg, file=sys.stderr, end="")

        logsclient.LogstreamClient.stdstream = stdstream  # type: ignore[method-assign]


def _entry_point(address: str | None) -> tuple[str, str] | None:
    """The Ray cluster ``address`` names (``ray.init``'s reading: else ``RAY_ADDRESS``) as (``gcs`` | ``client``,
    ``HOST:PORT``); None for a local instance, ``auto`` (found on this machine) or an address of another
    form (left to ``ray.init``)."""
    target = (address or os.environ.get("RAY_ADDRESS") or "").strip()
    if target.startswith("ray://"):
        return "client", target[len("ray://"):]
    if not target or target in ("auto", "local") or "://" in target or ":" not in target:
        return None
    return "gcs", target


#: a ``ray://`` start that failed for one of these reasons is tried again (the Ray Client proxy's server for this
#: client not ready in time: seen on a loaded two-core machine, issue 50 item 5), after these pauses
TRANSIENT = ("Starting Ray client server failed", "Initialization failure from server", "FutureTimeoutError",
             "failed to connect to all addresses")
RETRY_PAUSES_S = (1.0, 2.0, 4.0, 8.0)


def init_ray(ray: Any, address: str | None, pauses: tuple[float, ...] = RETRY_PAUSES_S) -> None:
    """``ray.init`` for the driver; a ``ray://`` start that fails for a transient reason (:data:`TRANSIENT`) is tried
    again after each pause in turn, then reported as ``cannot start or reach Ray`` (a refused token was named before,
    by :func:`check_token`)."""
    for attempt in range(len(pauses) + 1):
        try:
            with _stdout_to_stderr():
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING, ignore_reinit_error=True)
            return
        except Exception as exc:  # connection refused, bad address, the client server not ready, ...
            transient = str(address or "").startswith("ray://") and any(t in f"{type(exc).__name__}: {exc}"
                                                                        for t in TRANSIENT)
            if not transient or attempt == len(pauses):
                raise ConfigError(f"cannot start or reach Ray ({address or 'local'}): {exc}") from None
            with contextlib.suppress(Exception):
                ray.shutdown()
            time.sleep(pauses[attempt])


def check_token(address: str | None, timeout: float = 10.0) -> None:
    """Ask the cluster ``address`` names one question with this driver's credentials (the GCS's cluster id, or
    Ray Client's ping) and raise a :class:`ConfigError` naming the token when the cluster refuses them
    (``UNAUTHENTICATED``: a wrong token, or none where the cluster asks for one).  ``ray.init`` would retry
    the refused call for 20-30 s and then report a connection time-out; anything else (nothing listening,
    no answer) is left to it."""
    entry = _entry_point(address)
    if entry is None:
        return
    kind, target = entry
    try:  # Ray's own modules (untyped): a Ray without token authentication or grpcio has nothing to check
        grpc: Any = importlib.import_module("grpc")
        auth: Any = importlib.import_module("ray._private.authentication.authentication_utils")
        tokens: Any = importlib.import_module("ray._raylet").AuthenticationTokenLoader
        channel: Any = importlib.import_module("ray._private.grpc_utils").init_grpc_channel(target, asynchronous=False)
    except Exception:
        return
    try:
        if kind == "gcs":
            pb: Any = importlib.import_module("ray.core.generated.gcs_service_pb2")
            stub: Any = importlib.import_module("ray.core.generated.gcs_service_pb2_grpc")
            stub.NodeInfoGcsServiceStub(channel).GetClusterId(pb.GetClusterIdRequest(), timeout=timeout)
        else:
            pb = importlib.import_module("ray.core.generated.ray_client_pb2")
            stub = importlib.import_module("ray.core.generated.ray_client_pb2_grpc")
            stub.RayletDriverStub(channel).ClusterInfo(pb.ClusterInfoRequest(type=pb.ClusterInfoType.PING),
                                                       timeout=timeout)
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.UNAUTHENTICATED:
            return
        where = f"{'ray://' if kind == 'client' else 'ray:'}{target}"
        holds = "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
        try:
            sends = bool(auth.is_token_auth_enabled() and tokens.instance().has_token())
        except Exception:
            sends = True
        if sends:
            raise ConfigError(f"the Ray cluster {where} refused this driver's authentication token "
                              f"(InvalidAuthToken): give the driver the cluster's token ({holds})") from None
        raise ConfigError(f"the Ray cluster {where} asks for an authentication token and this driver sends none "
                          f"(InvalidAuthToken): set RAY_AUTH_MODE=token and the cluster's token ({holds})") from None
    except Exception:  # no answer, nothing listening, ...: left to ray.init
        return
    finally:
        with contextlib.suppress(Exception):
            channel.close()


class ClusterLost(JudgeError):
    """The cluster's GCS (its head node) has not answered for the run's GCS limit: no actor can be started or
    replaced and the live ones will not outlast it, so the run stops (``fatal``) and is stored ``interrupted``
    (``interrupted``): running it again against the cluster started again resumes it."""

    fatal = True
    #: the lifecycle stores the run ``interrupted``, not ``failed``: nothing about the run itself went wrong
    interrupted = True
    #: the command ends its process at once once it has said so: Ray's own shutdown (at exit) would wait
    #: for the lost GCS first
    exit_now = True


def _in_thread(fn: Callable[[], Any]) -> asyncio.Future[Any]:
    """``fn()`` run in a daemon thread of its own (a synchronous Ray call, which may block for as long as the GCS
    is gone: it never holds up the event loop, and a call that never returns never holds up the exit); the future
    of its result.  Await it through ``asyncio.wait_for`` for a time-out: the thread is then left to finish."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def body() -> None:
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting task
            ok, value = False, exc
        else:
            ok, value = True, result
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for it
            loop.call_soon_threadsafe(_settle, fut, ok, value)

    threading.Thread(target=body, daemon=True, name="knockout-ray-call").start()
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no "never retrieved" at exit
    return fut


def _gcs_check(ray: Any) -> Callable[[float], Any]:
    """One question to the cluster's GCS that returns or fails within its ``timeout`` argument: a key looked up
    in the GCS's store through this driver's own GCS client; through Ray Client (no GCS client here), the
    cluster's resources, asked through the head."""
    with contextlib.suppress(Exception):
        client = ray._private.worker.global_worker.gcs_client
        if callable(getattr(client, "internal_kv_exists", None)):
            return lambda timeout: client.internal_kv_exists(b"knockout-alive", b"knockout", timeout=timeout)
    return lambda timeout: ray.cluster_resources()


class _HeadWatch:
    """The GCS's (the head node's) answers, asked for and timed in a daemon thread of its own: one question every
    ``period`` seconds (each within ``timeout``), the time of each answer read from ``time.monotonic``.  How long
    the head has been silent is measured by the head's own answers: never by the driver's event loop, which a long
    computation between two awaits may hold for minutes (issue 59: a run called a live head lost after the second
    reader held the loop for 311 s).  A question that hangs past its time-out only leaves the silence growing."""

    def __init__(self, check: Callable[[float], Any], period: float, timeout: float) -> None:
        self._check = check
        self._period = period
        self._timeout = timeout
        #: ``time.monotonic()`` of the last answer (the start counts as one)
        self.answered = time.monotonic()
        self._stopped = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="knockout-gcs-watch").start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._check(self._timeout)
            except Exception:  # no answer in time, or an error: the silence grows
                pass
            else:
                self.answered = time.monotonic()
            self._stopped.wait(self._period)

    def silent_s(self) -> float:
        """Seconds since the GCS last answered."""
        return time.monotonic() - self.answered

    def stop(self) -> None:
        self._stopped.set()


def _keep_driver_through_gcs_loss(address: str | None, seconds: float) -> None:
    """Ray's core worker ends its process (exit 1, "Failed to connect to GCS within 60 seconds") once the GCS has
    been gone for ``gcs_rpc_server_reconnect_timeout_s``: this driver's limit raised to ``seconds`` (unless set),
    so that knockout reports a lost cluster (and stores its run) before Ray ends the process.  Only for a driver
    that joins an existing cluster: a local instance's own processes (started by ``ray.init``, who would inherit
    it) are left as they are, and a Ray Client driver is no core worker."""
    target = (address or os.environ.get("RAY_ADDRESS") or "").strip()
    if not target or target == "local" or target.startswith("ray://"):
        return
    os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", str(int(seconds)))


def _p99(values: Iterable[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0


class RayExecutor(Executor):
    """Sends each request to the least busy of ``workers`` Ray actors holding the judge.

    An actor that is lost (its process or its node died) is not sent anything again; the requests that were
    in flight on it, or sent to it before Ray reported it gone, are sent again to the surviving actors (each
    at most :attr:`max_resends` times) and counted (``resent_after_lost_worker``: they may be paid twice).
    Each actor lost is replaced at once by a new one, which Ray places as soon as a node has room (at once, or
    when a node comes back or joins) and which takes requests once it answers: the run holds ``workers``
    actors again whenever the cluster can hold them.  A replacement that dies before it answers (placed on a
    node that had died before the cluster marked it dead) is started again, after 1, 2, 4 ... up to 10 s; one
    whose judge fails to start is not.  No actor left and none up within the window (``window``, default
    :attr:`replace_timeout_s`): :class:`WorkersLost`, which stops the run.

    A request unanswered after the deadline has its actor checked (a ping in a concurrency group of its own,
    answered within :attr:`ping_timeout_s`, 10 s, whatever the deadline, or within :attr:`ping_multiple` times the
    slowest answer the run's actors gave a ping once up, where longer: a loaded actor, on a loaded machine, is not
    taken for a silent one; within the window while the actor has not answered anything yet: it may still be loading its
    judge); an actor that does not answer (a hung process, a stopped or cut-off
    node) is retired as if lost, and its requests are sent again.  The deadline is
    ``max(deadline option, 3 x the p99 of the run's reply times)`` (:attr:`deadline_floor_s`,
    :attr:`deadline_multiple`): 10 s for a judge that answers in seconds, longer for a slower one.

    The cluster's GCS is asked one question every :attr:`gcs_period_s` (in a thread of its own, with a time-out,
    its answers timed there: a driver whose event loop is held is not a silent head); once it
    has answered nothing for ``max(deadline option, 10 s)`` the run stops with :class:`ClusterLost` (stored
    ``interrupted``).  Until then the live actors keep answering.  No synchronous Ray call runs on the event
    loop: starting, killing and the GCS question each run in a thread of their own."""

    #: times one request is sent again after the actor it was on was lost
    max_resends = 3
    #: how long a run waits for a replacement actor when none is left (the ``window`` option's default)
    replace_timeout_s = 60.0
    #: the most seconds an actor's liveness check waits for its answer (its floor), and the multiple of the
    #: slowest answer to a ping seen once an actor was up (each actor's second ping, sent after its first answer)
    ping_timeout_s = 10.0
    ping_multiple = 3.0
    #: the deadline's floor (the ``deadline`` option's default) and the multiple of the p99 reply time above it
    deadline_floor_s = 10.0
    deadline_multiple = 3.0
    #: reply times the p99 is taken over (the latest)
    reply_sample = 1000
    #: seconds between two questions to the GCS, and the shortest time without an answer that is a lost GCS
    gcs_period_s = 2.0
    gcs_limit_min_s = 10.0
    #: the most seconds a synchronous Ray call (start an actor, the GCS question) is waited for
    ray_call_timeout_s = 5.0
    #: the longest pause between two starts of a replacement that died before it answered
    restart_pause_max_s = 10.0

    def __init__(self, judge: Judge, *, address: str | None = None, options: dict[str, str] | None = None) -> None:
        try:
            import ray as ray_module
        except ImportError:
            raise ConfigError("the ray executor needs Ray: pip install 'knockout[ray]'") from None
        ray: Any = ray_module  # Ray's own annotations do not cover actor options
        self._ray = ray
        opts = ray_options(dict(options or {}))
        self.cpus = opts.get("cpus", 1)
        self.gpus = opts.get("gpus", 0)
        workers = opts.get("workers")
        per_worker = opts.get("per_worker", judge.default_concurrency())
        self.judge = judge
        self.address = address
        self.window = float(opts.get("window", self.replace_timeout_s))
        self.deadline_floor = float(opts.get("deadline", self.deadline_floor_s))
        #: seconds the GCS may go unanswered before the cluster counts as lost
        self.gcs_limit = max(self.deadline_floor, self.gcs_limit_min_s)
        _ray_messages_to_stderr()
        if not ray.is_initialized():
            check_token(address)  # a refused token named at once, not after ray.init's retries
            _keep_driver_through_gcs_loss(address, self.gcs_limit + 120)
            init_ray(ray, address)
        if workers is None:
            cluster = int(ray.cluster_resources().get("CPU", 1))
            workers = max(1, cluster // self.cpus) if self.cpus else max(1, cluster)
        self.workers = workers
        self.per_worker = per_worker
        self.concurrency = self.workers * self.per_worker
        self._recipe = judge_recipe(judge)
        ray.method(concurrency_group="ping")(_JudgeWorker.where)  # the liveness check is never queued
        ray.method(concurrency_group="compute")(_JudgeWorker.compute)  # nor the judge's requests behind a computation
        self._actor_class = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_concurrency=self.per_worker,
                                       concurrency_groups={"ping": 1, "compute": 1}, max_restarts=0,
                                       max_task_retries=0)(_JudgeWorker)
        self._gcs_check = _gcs_check(ray)
        self._slots = [_Slot(self._actor_class.remote(*self._recipe)) for _ in range(self.workers)]
        self._starting: set[asyncio.Task[None]] = set()  # replacements not yet up
        self._background: set[asyncio.Future[Any]] = set()  # kills under way, the GCS watch
        self._watch: asyncio.Task[None] | None = None
        self._greetings: set[asyncio.Task[None]] = set()  # the first ping of each actor
        #: set when an actor becomes ready or is lost, or the cluster is lost (a waiting _pick looks again)
        self._changed = asyncio.Event()
        #: why the last replacement could not start (its judge failed to start: retrying will not help)
        self._start_error: str | None = None
        #: why the cluster is lost (set by the GCS watch): every request stops with :class:`ClusterLost`
        self._cluster_lost: str | None = None
        self._head: _HeadWatch | None = None  # the thread that times the GCS's answers
        self._none_since: float | None = None  # loop time since when no actor has been alive
        self._replies: collections.deque[float] = collections.deque(maxlen=self.reply_sample)
        self._p99_s = 0.0
        self._since_p99 = 0
        self._ping_s = 0.0  # the slowest answer to a ping of an actor already up
        self._t0: float | None = None
        #: (seconds since the first request, live actors) at each change: the run's worker count over time
        self.timeline: list[tuple[float, int]] = []
        #: requests sent again after the actor they were on was lost; actors lost (retired included); actors
        #: retired after a request's deadline; replacements up; replacements started again
        self.resent = 0
        self.lost = 0
        self.retired = 0
        self.replaced = 0
        self.restarted = 0

    # -- the deadline -----------------------------------------------------------------------------------------
    @property
    def deadline(self) -> float:
        """Seconds a request waits before its actor is checked: ``max(deadline option, 3 x p99 reply time)``."""
        return max(self.deadline_floor, self.deadline_multiple * self._p99_s)

    def _replied(self, seconds: float) -> None:
        self._replies.append(seconds)
        self._since_p99 += 1
        if self._since_p99 >= 50 or len(self._replies) <= 50:  # the p99 taken again every 50 replies
            self._p99_s = _p99(self._replies)
            self._since_p99 = 0

    # -- workers ----------------------------------------------------------------------------------------------
    @property
    def _actors(self) -> list[Any]:
        return [s.actor for s in self._slots if s.alive]

    def _live(self) -> int:
        return sum(s.alive for s in self._slots)

    def _note(self, why: str) -> None:
        """Record the live actor count (the timeline, an info event) after a change, and wake waiting picks."""
        loop = asyncio.get_running_loop()
        live = self._live()
        now = loop.time()
        if live == 0 and self._none_since is None:
            self._none_since = now
        elif live:
            self._none_since = None
        at = round(now - (self._t0 if self._t0 is not None else now), 1)
        if not self.timeline or self.timeline[-1][1] != live:
            self.timeline.append((at, live))
            self.emit(f"ray: {live} of {self.workers} workers ({why}; {len(self._starting)} starting, "
                      f"{self.lost} lost, {self.replaced} replaced)")
        self._changed.set()
        self._changed = asyncio.Event()

    def _kill(self, actor: Any) -> None:
        """``ray.kill`` in a thread (it waits for the GCS when the actor is still being registered)."""
        with contextlib.suppress(RuntimeError):
            fut = _in_thread(lambda: self._ray.kill(actor, no_restart=True))
            self._background.add(fut)
            fut.add_done_callback(self._background.discard)

    def _lose(self, slot: _Slot, why: str = "a worker lost") -> None:
        """``slot``'s actor is gone: route nothing more to it, send its requests in flight again, and start its
        replacement."""
        if not slot.alive:
            return
        slot.alive = False
        slot.gone.set()
        self.lost += 1
        self._kill(slot.actor)
        if self._cluster_lost is None:
            task = asyncio.get_running_loop().create_task(self._replace())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)
        self._note(why)

    async def _start(self) -> Any:
        """A new actor (started in a thread, within :attr:`ray_call_timeout_s`)."""
        return await asyncio.wait_for(_in_thread(lambda: self._actor_class.remote(*self._recipe)),
                                      self.ray_call_timeout_s)

    async def _replace(self) -> None:
        """Start a replacement actor and wait, as long as the run lasts, until it answers: Ray places it when a
        node has room (now, or once a node comes back or joins), then it takes requests.  One that dies before
        it answers is started again after a pause (1, 2, 4 ... :attr:`restart_pause_max_s` s); one whose judge
        fails to start is not."""
        lost_errors = _lost_errors(self._ray)
        pause = 1.0
        first = True
        while self._cluster_lost is None:
            try:
                actor = await self._start()
            except asyncio.CancelledError:
                raise
            except Exception:  # the start itself failed or hung (the GCS gone): try again after the pause
                await asyncio.sleep(pause)
                pause = min(2 * pause, self.restart_pause_max_s)
                continue
            if not first:
                self.restarted += 1
            first = False
            try:
                await actor.where.remote()
            except lost_errors as exc:  # died before it answered
                self._kill(actor)
                if getattr(exc, "actor_init_failed", False):
                    self._start_error = str(exc).splitlines()[0]
                    return
                await asyncio.sleep(pause)  # the cluster marks the dead node dead; then it is not chosen again
                pause = min(2 * pause, self.restart_pause_max_s)
                continue
            except BaseException:  # cancelled (the run ended): the actor is killed
                self._kill(actor)
                raise
            self._slots.append(_Slot(actor, ready=True))
            self.replaced += 1
            self._note("a replacement up")
            return

    def _lost_cluster(self, resent: int = 0) -> ClusterLost:
        err = ClusterLost(self._cluster_lost or "the Ray cluster is lost")
        err.resent_after_lost_worker = resent
        return err

    def _workers_lost(self) -> JudgeError:
        if self._cluster_lost is not None:
            return self._lost_cluster()
        why = f": {self._start_error}" if self._start_error else ""
        return WorkersLost(f"no Ray worker is left for judge {self.judge.spec} ({self.lost} lost) and none "
                           f"started within {self.window:g} s ({self.address or 'local Ray'}){why}")

    async def _pick(self) -> _Slot:
        """The least busy live actor; with none left, the first replacement up (WorkersLost once the window
        ends, or at once when no replacement is under way; ClusterLost once the GCS is lost)."""
        loop = asyncio.get_running_loop()
        while True:
            if self._cluster_lost is not None:
                raise self._lost_cluster()
            live = [s for s in self._slots if s.alive]
            if live:
                return min(live, key=lambda s: s.load)
            since = self._none_since if self._none_since is not None else loop.time()
            left = since + self.window - loop.time()
            if not self._starting or left <= 0:
                raise self._workers_lost()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    # -- the GCS ----------------------------------------------------------------------------------------------
    def _start_watch(self) -> None:
        if self._watch is None:
            loop = asyncio.get_running_loop()
            self._t0 = loop.time()
            self._note("started")
            self._watch = loop.create_task(self._watch_gcs())
            for slot in self._slots:  # each actor's first answer says it is up (a ping, answered once it is built)
                self._greetings.add(loop.create_task(self._greet(slot)))

    async def _greet(self, slot: _Slot) -> None:
        """The actor's first ping (answered once it is built: it is up), then a second one, timed: how fast an
        actor that is up answers a ping on this machine now (:attr:`ping_wait`)."""
        with contextlib.suppress(Exception):
            await slot.actor.where.remote()
            slot.ready = True
            loop = asyncio.get_running_loop()
            started = loop.time()
            await slot.actor.where.remote()
            self._ping_s = max(self._ping_s, loop.time() - started)

    @property
    def ping_wait(self) -> float:
        """Seconds a liveness check of an actor that is up waits: ``max(ping_timeout_s, ping_multiple x the slowest
        answer to a ping seen)``."""
        return max(self.ping_timeout_s, self.ping_multiple * self._ping_s)

    async def _watch_gcs(self) -> None:
        """The head node's watch: a :class:`_HeadWatch` thread asks the GCS one question every :attr:`gcs_period_s`
        and times its answers by the clock, not by this event loop; once the GCS has answered nothing for
        :attr:`gcs_limit`, the cluster is lost: every request stops with :class:`ClusterLost`.  A stalled event
        loop (a long computation on the driver) is no silence of the head's: the thread kept asking meanwhile."""
        timeout = min(self.ray_call_timeout_s, self.gcs_limit / 2)
        watch = self._head = _HeadWatch(self._gcs_check, self.gcs_period_s, timeout)
        try:
            while (silent := watch.silent_s()) < self.gcs_limit:
                await asyncio.sleep(min(self.gcs_period_s, self.gcs_limit - silent))
        finally:
            watch.stop()
        self._cluster_lost = (f"the Ray cluster {self.address or '(local)'} is lost: its GCS (the head node) has not "
                              f"answered for {silent:.0f} s; {self._live()} of {self.workers} "
                              f"workers were still answering")
        for s in self._slots:
            s.gone.set()
        for t in list(self._starting):
            t.cancel()
        self._note("the cluster's GCS lost")

    # -- requests ---------------------------------------------------------------------------------------------
    async def _alive(self, slot: _Slot) -> bool:
        """Whether ``slot``'s actor answers its liveness check in time (one check at a time per actor): within
        :attr:`ping_wait` once it has answered before, within the window while it may still be starting."""
        if slot.ping is None or slot.ping.done():
            async def ping() -> bool:
                loop = asyncio.get_running_loop()
                started = loop.time()
                where = asyncio.ensure_future(slot.actor.where.remote())
                try:
                    while True:  # the wait allowed is read again each second: the actor may be found up meanwhile
                        wait = self.ping_wait if slot.ready else self.window
                        left = started + wait - loop.time()
                        if where.done():  # answered, perhaps while the event loop was held: no time-out
                            break
                        if left <= 0:
                            return False
                        await asyncio.wait({where}, timeout=min(left, 1.0))
                    where.result()
                except Exception:
                    return False
                finally:
                    if not where.done():
                        where.cancel()
                slot.ready = True
                return True

            slot.ping = asyncio.get_running_loop().create_task(ping())
        return await asyncio.shield(slot.ping)

    async def _answer(self, slot: _Slot, request: JudgeRequest, facts: dict[str, Any] | None) -> Completion:
        """The actor's completion of ``request``; :class:`_Gone` when the actor is lost or retired meanwhile.
        Each time the deadline passes without the completion, the actor is checked; one that does not answer
        is retired."""
        loop = asyncio.get_running_loop()
        sent = loop.time()
        was_ready = slot.ready  # sent to an actor not yet up: its reply time holds the actor's start
        reply: asyncio.Future[Completion] = asyncio.ensure_future(slot.actor.complete.remote(request, facts))
        gone = asyncio.ensure_future(slot.gone.wait())
        try:
            while True:
                waiting: set[asyncio.Future[Any]] = {reply, gone}
                done, _ = await asyncio.wait(waiting, timeout=self.deadline, return_when=asyncio.FIRST_COMPLETED)
                if reply in done:
                    result = reply.result()
                    if was_ready:
                        self._replied(loop.time() - sent)
                    slot.ready = True
                    return result
                if gone in done or not slot.alive:
                    raise _Gone()
                if not await self._alive(slot) and not reply.done():
                    if self._cluster_lost is not None:
                        raise _Gone()
                    self.retired += 1
                    self._lose(slot, "a silent worker retired")
                    raise _Gone()
        finally:
            gone.cancel()
            if not reply.done():
                reply.cancel()
            else:
                with contextlib.suppress(BaseException):
                    reply.exception()  # retrieved: no "exception never retrieved" at shutdown

    async def complete(self, key: str, request: JudgeRequest) -> Completion:
        self._start_watch()
        facts = self.judge.facts() if self.judge.simulated and hasattr(self.judge, "facts") else None
        lost_errors: tuple[type[BaseException], ...] = (*_lost_errors(self._ray), _Gone)
        resent = 0
        while True:
            try:
                slot = await self._pick()
            except JudgeError as exc:  # WorkersLost, ClusterLost
                exc.resent_after_lost_worker = resent
                raise
            slot.load += 1
            try:
                result = await self._answer(slot, request, facts)
            except lost_errors as exc:
                if self._cluster_lost is not None:
                    raise self._lost_cluster(resent) from None
                self._lose(slot)
                if resent >= self.max_resends:
                    why = "retired or lost" if isinstance(exc, _Gone) else f"lost: {type(exc).__name__}: {exc}"
                    err = JudgeError(f"request sent {resent + 1} times, each time to a Ray worker that was {why}")
                    err.resent_after_lost_worker = resent
                    raise err from exc
                resent += 1
                self.resent += 1
                continue
            finally:
                slot.load -= 1
            if resent:
                result = dataclasses.replace(result, resent_after_lost_worker=resent)
            return result

    async def compute(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the least busy worker (an actor holding the judge: the work goes where the judge runs,
        not to the driver), in its compute pool; sent again to another worker when its worker is lost (at most
        :attr:`max_resends` times), :class:`ClusterLost` once the GCS is.  ``fn`` travels by reference (a
        module-level function the workers import), ``args`` and the result pickled."""
        self._start_watch()
        lost_errors: tuple[type[BaseException], ...] = (*_lost_errors(self._ray), _Gone)
        resent = 0
        while True:
            slot = await self._pick()
            slot.load += 1
            reply: asyncio.Future[Any] = asyncio.ensure_future(slot.actor.compute.remote(fn, args))
            gone = asyncio.ensure_future(slot.gone.wait())
            try:
                done, _ = await asyncio.wait({reply, gone}, return_when=asyncio.FIRST_COMPLETED)
                if reply not in done:
                    raise _Gone()
                result = reply.result()
                slot.ready = True
                return result
            except lost_errors:
                if self._cluster_lost is not None:
                    raise self._lost_cluster(resent) from None
                self._lose(slot)
                if resent >= self.max_resends:
                    raise JudgeError(f"a computation sent {resent + 1} times, each time to a Ray worker that was "
                                     f"lost") from None
                resent += 1
            finally:
                slot.load -= 1
                gone.cancel()
                if not reply.done():
                    reply.cancel()

    def info(self) -> dict[str, Any]:
        return {"workers_over_time": [[t, n] for t, n in self.timeline]} if self.timeline else {}

    async def worker_pids(self) -> list[int]:
        """The process id of each live actor (tests: the requests ran outside the driver)."""
        return list(await asyncio.gather(*(a.where.remote() for a in self._actors)))

    async def aclose(self) -> None:
        """Stop the replacements and the GCS watch, close the live actors' judges (all at once, within
        :attr:`ping_timeout_s`; not at all once the cluster is lost) and kill every actor (in threads, waited for
        within :attr:`ray_call_timeout_s`)."""
        for t in [*self._starting, *self._greetings, *([self._watch] if self._watch is not None else [])]:
            t.cancel()
        live = [s for s in self._slots if s.alive]
        if live and self._cluster_lost is None:  # an actor that died has nothing to close
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*(s.actor.close.remote() for s in live),
                                                      return_exceptions=True), self.ping_timeout_s)
        if self._cluster_lost is None:  # a lost cluster kills nothing: its GCS would have to
            for s in self._slots:
                self._kill(s.actor)
        self._slots = []
        if self._background and self._cluster_lost is None:
            await asyncio.wait(set(self._background), timeout=self.ray_call_timeout_s)
