"""The engine: sends judge requests through the cache, parses, retries, counts.

Run kinds and methods describe *what* to ask as :class:`Task` objects and hand them to
:meth:`Engine.ask_all` (a method's independent pipelines call it concurrently: pairwise methods advance
each question on its own); the engine does the rest:

* looks each request up in the cache (a hit costs no judge call); an identical request already in
  flight is asked once; a request another process on the same store is sending (it
  holds the request's lease in the cache) is waited for, not sent again;
* sends misses to the judge with at most ``concurrency`` in flight, through an executor
  (:mod:`knockout.engine._choose`: in process by default, Ray workers, or a provider's batch job), the
  tasks of one ``group`` (one question's answers, whose prompts start alike) one after the other, so a
  judge that keeps the start of the last prompt in its KV cache (the embedded one) reuses it;
* stores every reply the moment it arrives (so a killed run loses nothing);
* parses the reply; when it cannot, asks again with the format reminder appended (``format_retries``
  times), then records the result as invalid with the raw replies; an invalid result never becomes a
  grade;
* counts live calls, cache hits, tokens, invalid and failed requests and images left out, and reports
  progress as events to an observer (it draws nothing).

What a request is *about* (:class:`Subject`: the kind of judgement and the ids of the answers or items,
in display order) travels with the task, not in the request sent to the backend; the engine exposes it
during the call through :data:`current_subject`, which only a simulation (the scripted judge) reads.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from knockout._bounds import MAX_INT
from knockout.engine._cache import Cache, CallRecord, KeyMaker, slot_key
from knockout.engine._events import Done, Observer, Queued
from knockout.engine._executors import Executor, LocalExecutor
from knockout.errors import JudgeError
from knockout.judges._base import GenParams, Judge, JudgeRequest, Message, Subject, current_subject
from knockout.judges._slot import MIN_MASS, Slot
from knockout.prompts._parsers import Parsed

T = TypeVar("T")


@dataclass
class Task:
    """One thing to ask the judge, with how to read and re-ask it.  With a ``slot`` (and its ``slot_mode``, one
    the judge offers) the backend fills the verdict itself, and ``parse`` reads that verdict
    (``parse.read_verdict``, :mod:`knockout.prompts._slots`) instead of the reply's text."""

    messages: list[Message]
    parse: Callable[[str], Parsed]
    reminder: Callable[[str], str] | None = None
    subject: Subject | None = None
    label: str = ""
    slot: Slot | None = None
    slot_mode: str | None = None
    #: the data texts shown in the messages (a slot request's, for its backend: :attr:`JudgeRequest.shown`)
    shown: tuple[str, ...] = ()
    #: what the request's prompt shares its start with (the question of an answer graded alone): a batch's
    #: tasks of one group are sent one after the other, in the batch's order (empty: a group of its own)
    group: str = ""


class Attempt(BaseModel):
    """One request of a task (the first, or a format retry): its cache key and raw reply."""

    key: str
    reply: str
    cached: bool
    error: str | None
    #: the slot verdict the backend returned (the allowed values' probabilities); absent for free text
    verdict: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _drop_no_verdict(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("verdict", 0) is None:
            del out["verdict"]
        return out


class CallTrace(BaseModel):
    """Everything asked and answered for one task: stored with each result (typed, JSON in the store)."""

    valid: bool
    error: str | None = None
    failed: bool = False
    attempts: list[Attempt] = Field(default_factory=list)


@dataclass
class Outcome:
    value: Any
    valid: bool
    attempts: list[Attempt]
    error: str | None = None
    failed: bool = False  # the backend failed (no reply), as opposed to an unparseable reply

    @property
    def replies(self) -> list[str]:
        return [a.reply for a in self.attempts]

    def trace(self) -> CallTrace:
        return CallTrace(valid=self.valid, error=self.error, failed=self.failed, attempts=list(self.attempts))

    def details(self) -> dict[str, Any]:
        return self.trace().model_dump(mode="json")


@dataclass
class Stats:
    live_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: tokens of the stored replies this run used without calling the judge: with the live ones, what the
    #: run would have cost from scratch (a request asked twice within the run counts once)
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    #: prompt tokens of the live calls that the backend took from its KV cache instead of evaluating them
    #: (the embedded judge's prompt-prefix reuse; 0 from a backend that reports none)
    reused_prompt_tokens: int = 0
    invalid: int = 0
    failed: int = 0
    failed_attempts: int = 0  # attempts the backend retried (HTTP errors, time-outs, malformed replies)
    format_retries: int = 0
    #: slot verdicts whose allowed values carried too little probability (graded by the most probable one)
    slot_fallbacks: int = 0
    images_dropped: int = 0
    latency_s: float = 0.0
    waves: int = 0
    waited: int = 0  # requests answered by another process that was sending them
    #: requests sent again because the executor's worker they were on was lost (possibly paid twice)
    resent_after_lost_worker: int = 0
    started: float = field(default_factory=time.perf_counter)
    #: what the executor adds to the summary (the Ray executor's ``workers_over_time``)
    executor_info: Callable[[], dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self.started

    def as_dict(self) -> dict[str, Any]:
        wall = self.wall_s
        return {
            "judge_calls": self.live_calls,
            "cache_hits": self.cached_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "cached_completion_tokens": self.cached_completion_tokens,
            "reused_prompt_tokens": self.reused_prompt_tokens,
            **prompt_reuse(self.prompt_tokens, self.reused_prompt_tokens, self.live_calls),
            "invalid_requests": self.invalid,
            "failed": self.failed,
            "failed_attempts": self.failed_attempts,
            "format_retries": self.format_retries,
            "slot_fallbacks": self.slot_fallbacks,
            "images_dropped": self.images_dropped,
            "waves": self.waves,
            "waited_for_other_process": self.waited,
            "resent_after_lost_worker": self.resent_after_lost_worker,
            "wall_s": round(wall, 3),
            "calls_per_s": round(self.live_calls / wall, 3) if wall > 0 else 0.0,
            "mean_latency_s": round(self.latency_s / self.live_calls, 3) if self.live_calls else 0.0,
            **(self.executor_info() if self.executor_info is not None else {}),
        }


def prompt_reuse(prompt_tokens: int, reused: int, calls: int) -> dict[str, float]:
    """The prompt tokens the judge evaluated per live call (those it did not take from its KV cache) and the
    share of the prompt tokens it reused: ``evaluated_prompt_tokens_per_call`` and ``prompt_reuse``."""
    return {"evaluated_prompt_tokens_per_call": round((prompt_tokens - reused) / calls, 1) if calls else 0.0,
            "prompt_reuse": round(reused / prompt_tokens, 3) if prompt_tokens else 0.0}


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def stored_parse_id(identity: bytes | None, reply: str) -> bytes | None:
    """What a reply's parse is stored under: the parse's identity bound to the reply's own text (16 bytes of
    SHA-256 over both), so a reply edited in the store is read again instead of standing for its old parse."""
    if identity is None:
        return None
    return hashlib.sha256(identity + reply.encode("utf-8", "surrogatepass")).digest()[:16]


def parse_identity(parse: Callable[[str], Parsed]) -> bytes | None:
    """What made a parse (``parse_identity`` of :func:`knockout.prompts._render.own_verdict`'s parses: the
    parser's code and arguments), or None for a parse without one (it is always called)."""
    ident = getattr(parse, "parse_identity", None)
    return ident if isinstance(ident, bytes) else None


def _plain(value: Any) -> bool:
    """``value`` is JSON that reads back as itself: dicts with string keys, lists, strings, finite numbers,
    booleans and None, each of exactly its type (an enum member, a tuple or a subclass is not)."""
    t = type(value)
    if t is float:
        return math.isfinite(value)
    if t is int or t is str or t is bool or value is None:
        return True
    if t is list:
        return all(_plain(v) for v in value)
    if t is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


def read_reply(parse: Callable[[str], Parsed], text: str, verdict: dict[str, Any] | None) -> Parsed:
    """What ``parse`` makes of a reply: its slot verdict when it has one and the parse reads slots
    (``read_verdict``), else its text."""
    reader = getattr(parse, "read_verdict", None)
    if reader is not None:
        done: Parsed = reader(verdict, text)
        return done
    return parse(text)


def _stored_parse(record: CallRecord, parse: Callable[[str], Parsed]) -> Parsed:
    """``parse`` of a stored reply: the parse stored with it when the same parse made it (a valid one) and it is a
    value that parse could have made (``stored_value_ok``: exact types, shape, ranges; a store edited to ``99``,
    ``-5``, ``"2"`` or ``{"grade": 2}`` is not), else the reply read again."""
    from knockout.prompts._stored import stored_value_ok

    if record.parse_id is not None and record.parse_id == stored_parse_id(parse_identity(parse), record.reply):
        value = record.parsed
        if _plain(value) and stored_value_ok(parse, value):
            # a list or dict is copied: the tasks that share a record own their values
            return Parsed(value=copy.deepcopy(value) if isinstance(value, list | dict) else value)
    return read_reply(parse, record.reply, record.verdict)


class Engine:
    def __init__(
        self,
        judge: Judge,
        cache: Cache,
        *,
        params: GenParams | None = None,
        concurrency: int | None = None,
        format_retries: int = 2,
        run_id: str | None = None,
        observer: Observer | None = None,
        lease_s: float = 900.0,
        executor: Executor | None = None,
    ) -> None:
        self.judge = judge
        self.cache = cache
        #: why requests are no longer sent (the judge failed its first calls, every one of them); see `stopped`
        self._dead: str | None = None
        self.params = params or GenParams()
        self.executor = executor or LocalExecutor(judge)
        self.concurrency = concurrency or self.executor.concurrency or judge.default_concurrency()
        if isinstance(self.executor, LocalExecutor):
            judge.expect_concurrency(self.concurrency)
        self.format_retries = format_retries
        self.run_id = run_id
        self.identity = judge.identity()
        self._key = KeyMaker(self.identity, self.params)
        self.observer = observer
        self.lease_s = lease_s
        self.stats = Stats(executor_info=self.executor.info)
        if self.executor.observer is None:
            self.executor.observer = observer
        self._sem = asyncio.Semaphore(self.concurrency)
        self._in_flight: dict[str, asyncio.Future[CallRecord]] = {}
        #: replies received and not yet written: written together at the next turn of the event loop
        self._unwritten: list[tuple[str, dict[str, Any], CallRecord, float, asyncio.Future[None]]] = []
        #: leases asked for and not yet taken: taken together at the next turn of the event loop
        self._unclaimed: list[tuple[str, asyncio.Future[bool]]] = []

    async def compute(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` off the event loop, where the judge runs: in process, in a worker thread with one BLAS
        thread; on Ray, on a worker (an actor holding the judge), not on the driver.  ``fn`` must be a
        module-level function and ``args`` picklable (the second reader's
        ``knockout.meaning._encoder.encode_texts(encoder, texts)``).  The requests in flight go on meanwhile."""
        return await self.executor.compute(fn, *args)

    @property
    def stopped(self) -> str | None:
        """Why this engine sent no more requests (the judge failed its first three calls, with no reply), or
        None while it sends them."""
        return self._dead

    def for_draw(self, draw: int) -> Engine:
        """This engine for draw ``draw`` of repeated judge draws (``--samples K``): the same judge, store,
        executor, concurrency limit and counters; the seed ``seed + draw`` (no seed stays none) and the
        draw index in every cache key, so each draw is its own call, stored and found again on a rerun.
        Draw 0 is this engine's own requests, byte for byte."""
        if draw == 0:
            return self
        other = copy.copy(self)
        seed = self.params.seed
        if seed is not None:  # seed + draw, kept within the bounds of a seed (the largest seeds count down)
            seed = seed + draw if seed + draw <= MAX_INT else seed - draw
        other.params = self.params.model_copy(update={"seed": seed})
        other._key = KeyMaker(self.identity, other.params, draw)
        other._in_flight = {}
        other._unwritten = []  # its own queues: a shared list would be swapped out by one engine's flush only
        other._unclaimed = []
        return other

    def _write_reply(self, key: str, request: dict[str, Any], record: CallRecord, started: float
                     ) -> asyncio.Future[None]:
        """Store a reply (with its lease released and its call logged); done once it is committed.  The
        replies that arrive in one turn of the event loop are written in one transaction (group commit):
        each caller still waits for its own reply to be stored before it uses it."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._unwritten.append((key, request, record, started, fut))
        if len(self._unwritten) == 1:
            asyncio.get_running_loop().call_soon(self._flush_replies)
        return fut

    def _flush_replies(self) -> None:
        batch, self._unwritten = self._unwritten, []
        try:
            self.cache.record_replies([(key, self.identity, request, record, self.run_id, started)
                                       for key, request, record, started, _ in batch])
        except BaseException as exc:
            _fail_all([b[-1] for b in batch], exc)
            return
        for *_, fut in batch:
            if not fut.done():
                fut.set_result(None)

    def _emit_done(self, task: Task, *, cached: bool, valid: bool, failed: bool) -> None:
        if self.observer is not None:
            s = self.stats
            self.observer(Done(task.label, cached, valid, failed, s.invalid, s.prompt_tokens + s.completion_tokens))

    # -- calls -------------------------------------------------------------------------
    def _count_cached(self, record: CallRecord) -> None:
        """A stored reply used instead of a call: a cache hit, and its tokens in the from-scratch cost."""
        s = self.stats
        s.cached_calls += 1
        s.cached_prompt_tokens += record.prompt_tokens or 0
        s.cached_completion_tokens += record.completion_tokens or 0

    def _claim(self, key: str) -> asyncio.Future[bool]:
        """Lease ``key`` for this process before it is sent (done with whether it was taken).  The leases
        asked for in one turn of the event loop are taken in one transaction (one commit for a group)."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._unclaimed.append((key, fut))
        if len(self._unclaimed) == 1:
            asyncio.get_running_loop().call_soon(self._flush_claims)
        return fut

    def _flush_claims(self) -> None:
        batch, self._unclaimed = self._unclaimed, []
        try:
            taken = self.cache.claim_many([key for key, _ in batch], self.run_id, self.lease_s)
        except BaseException as exc:
            _fail_all([fut for _, fut in batch], exc)
            return
        for (key, fut), took in zip(batch, taken, strict=True):
            if fut.done():  # its caller was cancelled meanwhile: nothing will be sent under this lease
                if took:
                    self.cache.release(key)
            else:
                fut.set_result(took)

    def key_of(self, task: Task, messages: list[Message] | None = None) -> str:
        """The cache key of a task's request (``messages``: a format retry's)."""
        return self._key(task.messages if messages is None else messages, task.slot, task.slot_mode, task.shown)

    async def _call(self, messages: list[Message], subject: Subject | None,
                    known: tuple[str, CallRecord | None] | None = None,
                    parse: Callable[[str], Parsed] | None = None, task: Task | None = None
                    ) -> tuple[str, CallRecord, bool, Parsed | None]:
        """The reply to ``messages``: (key, record, from the cache, what ``parse`` made of a live reply, which
        is stored with it; None for a stored reply, which the caller parses)."""
        slot, mode = (task.slot, task.slot_mode) if task is not None else (None, None)
        shown = task.shown if task is not None and slot is not None else ()
        key, cached = known if known is not None else (self._key(messages, slot, mode, shown), None)
        if known is None:
            cached = self.cache.get_call(key)
        if cached is not None:
            self._count_cached(cached)
            return key, cached, True, None
        if key in self._in_flight:  # the same request already in flight: ask once, count the rest as hits
            self.stats.cached_calls += 1
            return key, await asyncio.shield(self._in_flight[key]), True, None
        fut: asyncio.Future[CallRecord] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = fut
        claimed = False
        try:
            while True:
                stored: CallRecord | None = None
                async with self._sem:
                    if self._dead is not None:  # the judge failed every call while this one waited: not sent
                        raise JudgeError(f"not sent, {self._dead}")
                    # lease the request only when it is about to be sent: what a kill leaves leased is what
                    # was really in flight
                    if await self._claim(key):  # not shielded: a cancelled caller's lease is released
                        claimed = True
                        stored = self.cache.get_call(key)  # stored by another process between miss and claim
                        if stored is None:
                            started = time.time()
                            token = current_subject.set(subject)
                            try:
                                comp = await self.executor.complete(
                                    key, JudgeRequest(messages, self.params, slot, mode if slot else None, shown))
                            except Exception as exc:
                                self.stats.failed_attempts += getattr(exc, "failed_attempts", 0)
                                self.stats.resent_after_lost_worker += getattr(exc, "resent_after_lost_worker", 0)
                                self.cache.log_call(key, self.run_id, started,
                                                    error=f"{type(exc).__name__}: {exc}")
                                raise
                            finally:
                                current_subject.reset(token)
                            break
                if stored is not None or (stored := await self._wait_for_other(key)) is not None:
                    self._count_cached(stored)
                    fut.set_result(stored)
                    return key, stored, True, None
            parsed = read_reply(parse, comp.text, comp.verdict) if parse is not None else None
            value = None if parsed is None else _jsonable(parsed.value) if parsed.ok else {"error": parsed.error}
            record = CallRecord(
                key=key,
                reply=comp.text,
                parsed=value,
                prompt_tokens=comp.prompt_tokens,
                completion_tokens=comp.completion_tokens,
                latency_s=comp.latency_s,
                finish_reason=comp.finish_reason,
                images_dropped=comp.images_dropped,
                verdict=comp.verdict,
                parse_id=stored_parse_id(parse_identity(parse), comp.text) if parse is not None
                and parsed is not None and parsed.ok and _plain(value) else None,
            )
            request: dict[str, Any] = {
                "messages": [m.model_dump(mode="json") for m in messages],
                "params": self.params.model_dump(mode="json"),
            }
            if slot is not None:
                request["slot"] = {**slot_key(slot, shown), "mode": mode}
            await asyncio.shield(self._write_reply(key, request, record, started))
            claimed = False
            s = self.stats
            s.live_calls += 1
            s.prompt_tokens += comp.prompt_tokens
            s.reused_prompt_tokens += comp.reused_prompt_tokens
            s.completion_tokens += comp.completion_tokens
            s.latency_s += comp.latency_s
            s.images_dropped += comp.images_dropped
            s.failed_attempts += comp.failed_attempts
            s.resent_after_lost_worker += comp.resent_after_lost_worker
            fut.set_result(record)
            return key, record, False, parsed
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved
            raise
        finally:
            if claimed:
                self.cache.release(key)
            self._in_flight.pop(key, None)

    async def _wait_for_other(self, key: str) -> CallRecord | None:
        """Another process holds ``key``'s lease: wait (outside the concurrency limit) until its reply is
        stored, or until the lease can be taken over (its process gone, or its time run out: None)."""
        self.stats.waited += 1
        delay = 0.05
        while True:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
            record = self.cache.get_call(key)
            if record is not None:
                return record
            if self.cache.claim(key, self.run_id, self.lease_s):
                self.cache.release(key)  # free now: the caller leases it again when it sends
                return None

    def _from_cache(self, task: Task, key: str, record: CallRecord | None
                    ) -> tuple[Outcome | None, tuple[str, CallRecord | None]]:
        """A task whose first request is stored (``record``, looked up with the batch's) with a readable reply,
        answered without a coroutine (a cache-hit rerun is mostly these); else None, with the key and look-up
        for :meth:`ask`."""
        if record is None:
            return None, (key, None)
        parsed = _stored_parse(record, task.parse)
        if not parsed.ok:
            return None, (key, record)
        self._count_cached(record)
        self._count_fallback(record)
        self._emit_done(task, cached=True, valid=True, failed=False)
        return Outcome(_jsonable(parsed.value), True, [Attempt(key=key, reply=record.reply, cached=True,
                                                                error=None, verdict=record.verdict)]), (key, record)

    def _count_fallback(self, record: CallRecord) -> None:
        v = record.verdict
        if isinstance(v, dict) and v.get("mode") == "expected":
            probs = v.get("probs")
            if isinstance(probs, list) and any(isinstance(ps, list) and sum(ps) < MIN_MASS for ps in probs):
                self.stats.slot_fallbacks += 1

    async def ask(self, task: Task, known: tuple[str, CallRecord | None] | None = None) -> Outcome:
        messages = list(task.messages)
        attempts: list[Attempt] = []
        parsed = Parsed(error="not asked")
        any_cached = False
        for n in range(1 + self.format_retries):
            try:
                key, record, cached, live = await self._call(messages, task.subject, known if n == 0 else None,
                                                             task.parse, task)
            except Exception as exc:
                if getattr(exc, "fatal", False):  # the executor can send nothing more (no worker left)
                    raise
                self.stats.failed += 1
                self._emit_done(task, cached=False, valid=False, failed=True)
                if (self._dead is None and self.stats.failed >= 3 and self.stats.live_calls == 0
                        and self.stats.cached_calls == 0):
                    # a dead server or a wrong key: stop sending; the run ends incomplete (exit 3, the retry line)
                    self._dead = f"the judge {self.judge.spec} failed on every call so far: {exc}"
                return Outcome(None, False, attempts, error=f"judge error: {exc}", failed=True)
            any_cached = any_cached or cached
            parsed = live if live is not None else _stored_parse(record, task.parse)
            attempts.append(Attempt(key=key, reply=record.reply, cached=cached, error=parsed.error,
                                    verdict=record.verdict))
            if parsed.ok:
                self._count_fallback(record)
                self._emit_done(task, cached=any_cached, valid=True, failed=False)
                return Outcome(_jsonable(parsed.value), True, attempts)
            if n < self.format_retries and task.reminder is not None:
                self.stats.format_retries += 1
                messages = [
                    *messages,
                    Message(role="assistant", content=record.reply),
                    Message(role="user", content=task.reminder(parsed.error or "unreadable")),
                ]
            else:
                break
        self.stats.invalid += 1
        self._emit_done(task, cached=any_cached, valid=False, failed=False)
        return Outcome(None, False, attempts, error=parsed.error)

    async def ask_all(self, tasks: Iterable[Task], *, wave: int | None = None) -> list[Outcome]:
        """One batch: all tasks concurrently (up to ``concurrency`` calls in flight), those not answered by the
        store sent in the batch's order with the tasks of one ``group`` together (where the group first comes),
        so that the prompts sent one after the other start alike, on a first run and on a resumed one.  The
        outcomes are in the batch's order.

        ``waves`` counts the run's sequential steps: each call is one, unless the caller numbers its step
        (``wave``: batches of independent pipelines at the same depth share a number)."""
        tasks = list(tasks)
        if not tasks:
            return []
        self.stats.waves = max(self.stats.waves, wave) if wave is not None else self.stats.waves + 1
        if self.observer is not None:
            self.observer(Queued(len(tasks), self.stats.waves))
        outcomes: list[Outcome | None] = []
        later: list[tuple[int, Task, tuple[str, CallRecord | None]]] = []
        keys = [self.key_of(t) for t in tasks]
        stored = self.cache.get_calls(keys)  # one look-up for the batch
        for i, t in enumerate(tasks):
            got, known = self._from_cache(t, keys[i], stored.get(keys[i]))
            outcomes.append(got)
            if got is None:
                later.append((i, t, known))
        if later:
            first: dict[str, int] = {}  # each group sent where its first task comes, its tasks in order
            rank = [first.setdefault(t.group, n) if t.group else n for n, (_, t, _) in enumerate(later)]
            later = [x for _, x in sorted(zip(rank, later, strict=True), key=lambda p: p[0])]
            done = await asyncio.gather(*(self.ask(t, known) for _, t, known in later))
            for (i, _, _), o in zip(later, done, strict=True):
                outcomes[i] = o
        return [o for o in outcomes if o is not None]


def _fail_all(futures: list[asyncio.Future[Any]], exc: BaseException) -> None:
    """A group write failed: every caller still waiting on it gets the error."""
    for fut in futures:
        if not fut.done():
            fut.set_exception(exc)
