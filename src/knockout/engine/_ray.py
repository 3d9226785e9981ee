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
import contextlib
import dataclasses
import importlib
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from knockout.engine._executors import Executor, judge_recipe, ray_options
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
    import time

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


def default_deadline(judge: Judge) -> float:
    """The seconds a request may go unanswered before its actor is asked whether it is alive: the judge's
    own ``timeout`` (seconds per attempt) where it has one, else 120."""
    timeout = getattr(judge.options, "timeout", None)
    return float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else 120.0


class RayExecutor(Executor):
    """Sends each request to the least busy of ``workers`` Ray actors holding the judge.

    An actor that is lost (its process or its node died) is not sent anything again; the requests that were
    in flight on it, or sent to it before Ray reported it gone, are sent again to the surviving actors (each
    at most :attr:`max_resends` times) and counted (``resent_after_lost_worker``: they may be paid twice),
    and a replacement actor is started where the cluster has room.  A replacement that dies before it
    answers (placed on a node that had died before the cluster marked it dead) is started again until the
    window ends.  No actor left and none started within the window (``window``, default
    :attr:`replace_timeout_s`): :class:`WorkersLost`, which stops the run.

    A request unanswered after ``deadline`` seconds has its actor checked (a ping in a concurrency group of
    its own, answered within ``min(deadline, 10 s)``; within the window while the actor has not answered
    anything yet: it may still be loading its judge); an actor that does not answer (a hung process, a
    stopped node Ray has not yet marked dead) is retired as if lost, and its requests are sent again."""

    #: times one request is sent again after the actor it was on was lost
    max_resends = 3
    #: how long a run waits for a replacement actor when none is left (the ``window`` option's default)
    replace_timeout_s = 60.0
    #: the most seconds an actor's liveness check waits for its answer
    ping_timeout_s = 10.0

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
        self.deadline = float(opts["deadline"]) if "deadline" in opts else default_deadline(judge)
        _ray_messages_to_stderr()
        if not ray.is_initialized():
            check_token(address)  # a refused token named at once, not after ray.init's retries
            init_ray(ray, address)
        if workers is None:
            cluster = int(ray.cluster_resources().get("CPU", 1))
            workers = max(1, cluster // self.cpus) if self.cpus else max(1, cluster)
        self.workers = workers
        self.per_worker = per_worker
        self.concurrency = self.workers * self.per_worker
        self._recipe = judge_recipe(judge)
        ray.method(concurrency_group="ping")(_JudgeWorker.where)  # the liveness check is never queued
        self._actor_class = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_concurrency=self.per_worker,
                                       concurrency_groups={"ping": 1}, max_restarts=0,
                                       max_task_retries=0)(_JudgeWorker)
        self._slots = [_Slot(self._start_actor()) for _ in range(self.workers)]
        self._starting: set[asyncio.Task[None]] = set()  # replacements not yet up
        #: why the last replacement could not start (its judge failed to start: retrying will not help)
        self._start_error: str | None = None
        #: requests sent again after the actor they were on was lost; actors lost (retired included); actors
        #: retired after a request's deadline; replacements started; replacements started again
        self.resent = 0
        self.lost = 0
        self.retired = 0
        self.replaced = 0
        self.restarted = 0

    def _start_actor(self) -> Any:
        return self._actor_class.remote(*self._recipe)

    @property
    def _actors(self) -> list[Any]:
        return [s.actor for s in self._slots if s.alive]

    def _room(self) -> bool:
        """The cluster has the resources of one more actor free (as Ray sees them now)."""
        try:
            free = self._ray.available_resources()
        except Exception:
            return False
        return bool(free.get("CPU", 0.0) >= self.cpus and free.get("GPU", 0.0) >= self.gpus)

    def _lose(self, slot: _Slot) -> None:
        """``slot``'s actor is gone: route nothing more to it, send its requests in flight again, and start a
        replacement if there is room."""
        if not slot.alive:
            return
        slot.alive = False
        slot.gone.set()
        self.lost += 1
        with contextlib.suppress(Exception):
            self._ray.kill(slot.actor, no_restart=True)
        self._replace(always=False)

    def _replace(self, *, always: bool) -> None:
        """Start a replacement actor (where the cluster has room, unless ``always``); it takes requests once
        it answers."""
        if not always and not self._room():
            return
        try:
            actor = self._start_actor()
        except Exception:
            return
        until = asyncio.get_running_loop().time() + self.window
        task = asyncio.get_running_loop().create_task(self._await_ready(actor, until))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _await_ready(self, actor: Any, until: float) -> None:
        """``actor`` takes requests once it answers.  One that dies first (Ray placed it on a node that had died
        before the cluster marked it dead) is started again, until ``until``; one that is never placed (no
        room) is given up at ``until``; one whose judge fails to start is not started again."""
        loop = asyncio.get_running_loop()
        lost_errors = _lost_errors(self._ray)
        while True:
            try:
                await asyncio.wait_for(actor.where.remote(), max(0.0, until - loop.time()))
            except lost_errors as exc:  # died before it answered
                with contextlib.suppress(Exception):
                    self._ray.kill(actor, no_restart=True)
                if getattr(exc, "actor_init_failed", False):
                    self._start_error = str(exc).splitlines()[0]
                    return
                if loop.time() + 1.0 >= until:
                    return
                await asyncio.sleep(1.0)  # the cluster marks the dead node dead; then it is not chosen again
                try:
                    actor = self._start_actor()
                except Exception:
                    return
                self.restarted += 1
                continue
            except Exception:  # never placed within the window (no room), or cancelled
                with contextlib.suppress(Exception):
                    self._ray.kill(actor, no_restart=True)
                return
            self._slots.append(_Slot(actor, ready=True))
            self.replaced += 1
            return

    def _workers_lost(self) -> WorkersLost:
        why = f": {self._start_error}" if self._start_error else ""
        return WorkersLost(f"no Ray worker is left for judge {self.judge.spec} ({self.lost} lost) and none "
                           f"started within {self.window:g} s ({self.address or 'local Ray'}){why}")

    async def _pick(self) -> _Slot:
        """The least busy live actor; with none left, a replacement (or WorkersLost once the window ends)."""
        while True:
            live = [s for s in self._slots if s.alive]
            if live:
                return min(live, key=lambda s: s.load)
            if not self._starting:
                self._replace(always=True)
            if not self._starting:
                raise self._workers_lost()
            await asyncio.wait(set(self._starting), return_when=asyncio.FIRST_COMPLETED)
            if not any(s.alive for s in self._slots) and not self._starting:
                raise self._workers_lost()

    async def _alive(self, slot: _Slot) -> bool:
        """Whether ``slot``'s actor answers its liveness check in time (one check at a time per actor): within
        ``min(deadline, ping_timeout_s)`` once it has answered before, within the window while it may still
        be starting."""
        if slot.ping is None or slot.ping.done():
            async def ping() -> bool:
                wait = min(self.deadline, self.ping_timeout_s) if slot.ready else self.window
                try:
                    await asyncio.wait_for(slot.actor.where.remote(), wait)
                except Exception:
                    return False
                slot.ready = True
                return True

            slot.ping = asyncio.get_running_loop().create_task(ping())
        return await asyncio.shield(slot.ping)

    async def _answer(self, slot: _Slot, request: JudgeRequest, facts: dict[str, Any] | None) -> Completion:
        """The actor's completion of ``request``; :class:`_Gone` when the actor is lost or retired meanwhile.
        Each time ``deadline`` passes without the completion, the actor is checked; one that does not answer
        is retired."""
        reply: asyncio.Future[Completion] = asyncio.ensure_future(slot.actor.complete.remote(request, facts))
        gone = asyncio.ensure_future(slot.gone.wait())
        try:
            while True:
                waiting: set[asyncio.Future[Any]] = {reply, gone}
                done, _ = await asyncio.wait(waiting, timeout=self.deadline, return_when=asyncio.FIRST_COMPLETED)
                if reply in done:
                    result = reply.result()
                    slot.ready = True
                    return result
                if gone in done or not slot.alive:
                    raise _Gone()
                if not await self._alive(slot) and not reply.done():
                    self.retired += 1
                    self._lose(slot)
                    raise _Gone()
        finally:
            gone.cancel()
            if not reply.done():
                reply.cancel()
            else:
                with contextlib.suppress(BaseException):
                    reply.exception()  # retrieved: no "exception never retrieved" at shutdown

    async def complete(self, key: str, request: JudgeRequest) -> Completion:
        facts = self.judge.facts() if self.judge.simulated and hasattr(self.judge, "facts") else None
        lost_errors: tuple[type[BaseException], ...] = (*_lost_errors(self._ray), _Gone)
        resent = 0
        while True:
            try:
                slot = await self._pick()
            except WorkersLost as exc:
                exc.resent_after_lost_worker = resent
                raise
            slot.load += 1
            try:
                result = await self._answer(slot, request, facts)
            except lost_errors as exc:
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

    async def worker_pids(self) -> list[int]:
        """The process id of each live actor (tests: the requests ran outside the driver)."""
        return list(await asyncio.gather(*(a.where.remote() for a in self._actors)))

    async def aclose(self) -> None:
        for t in list(self._starting):
            t.cancel()
        for s in self._slots:
            if s.alive:  # an actor that died has nothing to close; one that went silent is not waited for
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(s.actor.close.remote(), self.ping_timeout_s)
            with contextlib.suppress(Exception):
                self._ray.kill(s.actor, no_restart=True)
        self._slots = []
