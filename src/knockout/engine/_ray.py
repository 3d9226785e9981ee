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
import os
from typing import Any

from knockout.engine._executors import Executor, judge_recipe, ray_options
from knockout.errors import ConfigError
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


class RayExecutor(Executor):
    """Sends each request to the least busy of ``workers`` Ray actors holding the judge."""

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
        if not ray.is_initialized():
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         ignore_reinit_error=True)
            except Exception as exc:  # connection refused, bad address, ...
                raise ConfigError(f"cannot start or reach Ray ({address or 'local'}): {exc}") from None
        if workers is None:
            cluster = int(ray.cluster_resources().get("CPU", 1))
            workers = max(1, cluster // self.cpus) if self.cpus else max(1, cluster)
        self.workers = workers
        self.per_worker = per_worker
        self.concurrency = self.workers * self.per_worker
        cls, model, judge_opts = judge_recipe(judge)
        actor = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus,
                           max_concurrency=self.per_worker)(_JudgeWorker)
        self._actors = [actor.remote(cls, model, judge_opts) for _ in range(self.workers)]
        self._load = [0] * self.workers

    async def complete(self, key: str, request: JudgeRequest) -> Completion:
        facts = self.judge.facts() if self.judge.simulated and hasattr(self.judge, "facts") else None
        i = min(range(self.workers), key=self._load.__getitem__)
        self._load[i] += 1
        try:
            result: Completion = await self._actors[i].complete.remote(request, facts)
            return result
        finally:
            self._load[i] -= 1

    async def worker_pids(self) -> list[int]:
        """The process id of each actor (tests: the requests ran outside the driver)."""
        return list(await asyncio.gather(*(a.where.remote() for a in self._actors)))

    async def aclose(self) -> None:
        for a in self._actors:
            with contextlib.suppress(Exception):  # an actor that died has nothing to close
                await a.close.remote()
            self._ray.kill(a)
        self._actors = []
