"""The Ray executor: judge requests answered by Ray actors that each hold a judge.

``--executor ray`` (a local Ray instance, or the cluster ``RAY_ADDRESS`` names), ``ray://HOST:10001``
(Ray client) or ``ray:ADDRESS``; options ``workers`` (actors; default: the cluster's CPUs divided by
``cpus``), ``cpus`` (CPUs reserved per actor, default 1), ``per_worker`` (requests in flight per actor;
default: the judge's own concurrency, 1 for the embedded judge), ``gpus`` (GPUs per actor, default 0).

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


@dataclass
class _Slot:
    """One actor and the requests in flight on it."""

    actor: Any
    load: int = 0
    alive: bool = True


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


class RayExecutor(Executor):
    """Sends each request to the least busy of ``workers`` Ray actors holding the judge.

    An actor that is lost (its process or its node died) is not sent anything again; the requests that were
    in flight on it, or sent to it before Ray reported it gone, are sent again to the surviving actors (each
    at most :attr:`max_resends` times) and counted (``resent_after_lost_worker``: they may be paid twice),
    and a replacement actor is started where the cluster has room.  No actor left and none started within
    :attr:`replace_timeout_s`: :class:`WorkersLost`, which stops the run."""

    #: times one request is sent again after the actor it was on was lost
    max_resends = 3
    #: how long a replacement actor may take to start (a request with no actor left waits this long)
    replace_timeout_s = 60.0

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
        _ray_messages_to_stderr()
        if not ray.is_initialized():
            try:
                with _stdout_to_stderr():
                    ray.init(address=address, include_dashboard=False, log_to_driver=False,
                             logging_level=logging.WARNING, ignore_reinit_error=True)
            except Exception as exc:  # connection refused, bad address, ...
                raise ConfigError(f"cannot start or reach Ray ({address or 'local'}): {exc}") from None
        if workers is None:
            cluster = int(ray.cluster_resources().get("CPU", 1))
            workers = max(1, cluster // self.cpus) if self.cpus else max(1, cluster)
        self.workers = workers
        self.per_worker = per_worker
        self.concurrency = self.workers * self.per_worker
        self._recipe = judge_recipe(judge)
        self._actor_class = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_concurrency=self.per_worker,
                                       max_restarts=0, max_task_retries=0)(_JudgeWorker)
        self._slots = [_Slot(self._start_actor()) for _ in range(self.workers)]
        self._starting: set[asyncio.Task[None]] = set()  # replacements not yet up
        #: requests sent again after the actor they were on was lost; actors lost; replacements started
        self.resent = 0
        self.lost = 0
        self.replaced = 0

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
        """``slot``'s actor is gone: route nothing more to it, and start a replacement if there is room."""
        if not slot.alive:
            return
        slot.alive = False
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
        task = asyncio.get_running_loop().create_task(self._await_ready(actor))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _await_ready(self, actor: Any) -> None:
        try:
            await asyncio.wait_for(actor.where.remote(), self.replace_timeout_s)
        except Exception:  # never placed (no room) or died while starting
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)
            return
        self._slots.append(_Slot(actor))
        self.replaced += 1

    async def _pick(self) -> _Slot:
        """The least busy live actor; with none left, a replacement (or WorkersLost)."""
        while True:
            live = [s for s in self._slots if s.alive]
            if live:
                return min(live, key=lambda s: s.load)
            if not self._starting:
                self._replace(always=True)
            if not self._starting:
                raise WorkersLost(f"no Ray worker is left for judge {self.judge.spec} ({self.lost} lost) and "
                                  f"none could be started ({self.address or 'local Ray'})")
            await asyncio.wait(set(self._starting))
            if not any(s.alive for s in self._slots) and not self._starting:
                raise WorkersLost(f"no Ray worker is left for judge {self.judge.spec} ({self.lost} lost) and "
                                  f"none started within {self.replace_timeout_s:g} s "
                                  f"({self.address or 'local Ray'})")

    async def complete(self, key: str, request: JudgeRequest) -> Completion:
        facts = self.judge.facts() if self.judge.simulated and hasattr(self.judge, "facts") else None
        lost_errors = _lost_errors(self._ray)
        resent = 0
        while True:
            try:
                slot = await self._pick()
            except WorkersLost as exc:
                exc.resent_after_lost_worker = resent
                raise
            slot.load += 1
            try:
                result: Completion = await slot.actor.complete.remote(request, facts)
            except lost_errors as exc:
                self._lose(slot)
                if resent >= self.max_resends:
                    err = JudgeError(f"request sent {resent + 1} times, each time to a Ray worker that was "
                                     f"lost: {type(exc).__name__}: {exc}")
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
            if s.alive:
                with contextlib.suppress(Exception):  # an actor that died has nothing to close
                    await s.actor.close.remote()
            with contextlib.suppress(Exception):
                self._ray.kill(s.actor, no_restart=True)
        self._slots = []
