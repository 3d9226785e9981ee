"""The batch executor: the requests of a wave become one provider batch job.

Requests arrive one by one from the engine (each after its cache look-up and lease, as for any
executor); the executor gathers those that arrive together (until no new one has come for
``gather_s``, or ``batch_size`` are waiting), then for each of them:

* if the store records it in a batch that has not ended (a killed run submitted it), it waits for that
  batch: the run resumes by polling the same batch and never submits it again;
* the others are submitted as one new batch, whose id and request keys are recorded in the store
  *before* any waiting.

Polling every ``poll`` seconds, the executor reads a finished batch's results and hands each request its
completion (stored by the engine the moment it arrives), or raises the provider's error for it (a failed
request, counted like a failed live call and asked again by the next run).  A batch that failed as a whole
(expired, cancelled) fails its requests the same way.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from knockout.engine._executors import Executor
from knockout.errors import ConfigError, JudgeError
from knockout.judges._base import Completion, Judge, JudgeRequest

if TYPE_CHECKING:
    from knockout.judges._batch import BatchJudge


class BatchLedger(Protocol):
    """Where batch ids are recorded before waiting (the store implements it)."""

    def open_batches(self, keys: list[str]) -> dict[str, str]:
        """For each of ``keys`` that is part of a batch that has not failed (submitted, or completed but its
        reply for the key not stored yet: a kill between reading the results and storing them): its id."""

    def put_batch(self, batch_id: str, run_id: str | None, judge: str, keys: list[str]) -> None:
        """Record a submitted batch and its request keys (before waiting for it)."""

    def end_batch(self, batch_id: str, status: str, error: str | None = None) -> None:
        """The batch ended (``completed`` or ``failed``)."""

    def drop_batch_requests(self, batch_id: str, keys: list[str]) -> None:
        """``keys`` will not be answered by ``batch_id`` (no result for them): submit them anew next time."""


class BatchExecutor(Executor):
    def __init__(self, judge: Judge, ledger: Any, run_id: str | None, *, gather_s: float = 0.2) -> None:
        for name in ("open_batches", "put_batch", "end_batch", "drop_batch_requests"):
            if not hasattr(ledger, name):
                raise ConfigError(f"judge {judge.spec} needs a store that records batch jobs")
        self.judge: BatchJudge = judge  # type: ignore[assignment]
        self.ledger: BatchLedger = ledger
        self.run_id = run_id
        self.gather_s = gather_s
        self.batch_size = judge.default_concurrency()
        self.concurrency = self.batch_size
        self._waiting: dict[str, tuple[JudgeRequest, asyncio.Future[Completion]]] = {}
        self._arrived = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        #: batch ids this executor submitted, and those it resumed (tests and benchmarks read them)
        self.submitted: list[str] = []
        self.resumed: list[str] = []

    async def complete(self, key: str, request: JudgeRequest) -> Completion:
        fut: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._waiting[key] = (request, fut)
        self._arrived.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._gather())
        return await fut

    async def _gather(self) -> None:
        """Wait until the wave is in (quiet for ``gather_s``, or a full batch), then send what is waiting."""
        while self._waiting:
            while len(self._waiting) < self.batch_size:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), self.gather_s)
                except TimeoutError:
                    break
            batch = dict(list(self._waiting.items())[: self.batch_size])
            for k in batch:
                del self._waiting[k]
            self._start(self._send(batch))

    def _start(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def _send(self, batch: dict[str, tuple[JudgeRequest, asyncio.Future[Completion]]]) -> None:
        try:
            known = self.ledger.open_batches(list(batch))
            by_batch: dict[str, list[str]] = {}
            for k, bid in known.items():
                by_batch.setdefault(bid, []).append(k)
            for bid, keys in by_batch.items():
                self.resumed.append(bid)
                self._start(self._wait({k: batch[k] for k in keys}, bid))
            new = {k: v for k, v in batch.items() if k not in known}
            if new:
                bid = await self.judge.submit_batch([(k, req) for k, (req, _) in new.items()])
                self.ledger.put_batch(bid, self.run_id, self.judge.spec, list(new))
                self.submitted.append(bid)
                await self._wait(new, bid)
        except BaseException as exc:
            _fail_all(batch, exc)

    async def _wait(self, part: dict[str, tuple[JudgeRequest, asyncio.Future[Completion]]], bid: str) -> None:
        try:
            while True:
                state = await self.judge.poll_batch(bid)
                if state.done or state.failed:
                    break
                await asyncio.sleep(self.judge.poll_s)
            if state.failed:
                self.ledger.end_batch(bid, "failed", state.error)
                raise JudgeError(f"batch {bid} failed: {state.error}")
            results = await self.judge.batch_results(bid)
            self.ledger.end_batch(bid, "completed")
        except BaseException as exc:
            _fail_all(part, exc)
            return
        unanswered = [k for k in part if not isinstance(results.get(k), Completion)]
        if unanswered:  # errors and missing results: submitted anew by the next run
            self.ledger.drop_batch_requests(bid, unanswered)
        for key, (_, fut) in part.items():
            got = results.get(key, f"no result for request {key[:12]} in batch {bid}")
            if fut.done():
                continue
            if isinstance(got, str):
                fut.set_exception(JudgeError(f"{self.judge.spec}: {got}"))
            else:
                fut.set_result(got)

    async def aclose(self) -> None:
        for task in [*self._jobs, *([self._flusher] if self._flusher else [])]:
            task.cancel()


def _fail_all(part: dict[str, tuple[JudgeRequest, asyncio.Future[Completion]]], exc: BaseException) -> None:
    """Every request of ``part`` fails with ``exc``; a cancellation goes on up once they are failed."""
    for _, fut in part.values():
        if not fut.done():
            fut.set_exception(exc if isinstance(exc, Exception) else JudgeError(str(exc)))
    if not isinstance(exc, Exception):
        raise exc
