"""The one run lifecycle that every kind of run (grading, side-by-side, meta-evaluation, ...) goes through.

A kind describes *what* to run as a :class:`Run`: its judges by role, the identity that determines its
outputs (hashed into the run id), its stored configuration and data snapshot, a validation step, and an
``execute`` coroutine that plans the work, asks the engine(s) (pipelined, or in waves where a kind's steps
must wait for each other) and writes its typed results
through the :class:`RunContext`.  :func:`execute_async` does the rest, the same way for every kind:

1. validate everything (``check``) before anything is written;
2. hash the identity into the run id; build each judge role's executor (a Ray cluster is reached here: one
   that refuses the connection leaves nothing in the store); snapshot the data; ``start_run`` (status
   ``running``);
3. build one engine per judge role over the store (the cache), with the observer for progress;
4. ``execute``: the kind asks the engines and writes results (one transaction per batch);
5. ``finish_run`` with the kind's typed summary (status ``complete``; ``incomplete`` when judge requests
   failed for good — no reply after the backend's retries —, which running it again asks, and only those)
   — or, when the run stops early, ``interrupted`` (Ctrl-C, cancelled) or ``failed`` (with the error, whose
   ``run_id`` then names the run), never ``complete``.

:func:`execute` is the synchronous entry; it also works inside a running event loop (Jupyter) by running
the run on a fresh loop in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from knockout.data._records import ItemSet
from knockout.engine import Engine, Observer, Planned, Subject
from knockout.engine._choose import make_executor
from knockout.engine._executors import Executor, parse_executor
from knockout.errors import ConfigError, KnockoutError
from knockout.judges._base import GenParams, Judge
from knockout.storage._store import MatchRow, ResultRow, Store

T = TypeVar("T")

#: A simulation's view of the truth: the facts a simulated judge needs about a request's subject.
Oracle = Callable[[Subject], dict[str, Any]]


class Report(Protocol):
    run_id: str

    def summary(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Report)

#: The status of a run that ran to its end with judge requests that failed for good (:func:`failed_requests`).
INCOMPLETE = "incomplete"


def failed_requests(summary: dict[str, Any], engines: Iterable[Engine] = ()) -> int:
    """The judge requests of a finished run that got no reply (the backend failed after its retries): the
    summary's ``failed`` (a jury's adds up its members'), else its engines' count."""
    counted = summary.get("failed")
    if isinstance(counted, int) and not isinstance(counted, bool):
        return counted
    return sum(e.stats.failed for e in engines)


def live_calls(summary: dict[str, Any], engines: Iterable[Engine] = ()) -> int:
    """The judge calls a finished invocation sent (not answered by the store): the summary's ``judge_calls``
    (a jury's adds up its members'), else its engines' count."""
    counted = summary.get("judge_calls")
    if isinstance(counted, int) and not isinstance(counted, bool):
        return counted
    return sum(e.stats.live_calls for e in engines)


def keep_work_time(summary: dict[str, Any], before: dict[str, Any] | None, engines: Iterable[Engine] = ()) -> None:
    """A rerun answered wholly from the store (no live call) keeps, as ``wall_s``, the wall time of the
    invocation that did the work (the summary stored before), and stores its own as ``last_wall_s``: a
    cached rerun of a 10-minute run does not make it a 0.01-second one in ``report``."""
    kept = (before or {}).get("wall_s")
    own = summary.get("wall_s")
    if isinstance(kept, (int, float)) and isinstance(own, (int, float)) and not live_calls(summary, engines):
        summary["wall_s"] = kept
        summary["last_wall_s"] = own
        if "calls_per_s" in summary and "calls_per_s" in (before or {}):
            summary["calls_per_s"] = (before or {})["calls_per_s"]


def run_id_for(payload: dict[str, Any]) -> str:
    """The run id: a hash of everything that determines a run's outputs."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass
class RunContext:
    """What a running kind sees: its id, the store, one engine per judge role, the writers."""

    run_id: str
    store: Store
    engines: dict[str, Engine]
    observer: Observer | None = None
    #: where the engines send their misses (``execute_async``'s executor; runs a kind runs use it too)
    executor: str | None = None

    @property
    def engine(self) -> Engine:
        """The engine of the main judge (role ``judge``)."""
        return self.engines["judge"]

    def write_results(self, rows: Iterable[ResultRow]) -> None:
        """Write a batch of item results in one transaction."""
        self.store.put_results(self.run_id, rows)

    def write_matches(self, rows: Iterable[MatchRow]) -> None:
        """Write the matches a wave played, in one transaction."""
        self.store.put_matches(self.run_id, rows)

    def plan(self, requests: int) -> None:
        """Announce the number of judge requests the run expects (progress only)."""
        if self.observer is not None:
            self.observer(Planned(requests))

    def stats(self) -> dict[str, Any]:
        """The main engine's counters, and each other role's under ``ROLE_stats``."""
        out = self.engine.stats.as_dict()
        for role, e in self.engines.items():
            if role != "judge":
                out[f"{role}_stats"] = e.stats.as_dict()
        return out


class Run(ABC, Generic[R]):
    """A configured run of one kind.  Subclasses set :attr:`kind` and implement the abstract methods."""

    kind: ClassVar[str]

    def __init__(self, *, method: str, data_source: str, params: GenParams, concurrency: int | None = None,
                 format_retries: int = 2) -> None:
        self.method = method
        self.data_source = data_source
        self.params = params
        self.concurrency = concurrency
        self.format_retries = format_retries

    @abstractmethod
    def judges(self) -> dict[str, Judge]:
        """The judges by role; role ``judge`` is the main one (its spec names the run)."""

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that determines the outputs (data fingerprint, options, parameters, judge identities)."""

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """The configuration stored with the run (what reports and exports need to know)."""

    def spec(self) -> str:
        """The judge column of the run's row: the main judge's spec (a jury names its members)."""
        return self.judges()["judge"].spec

    def snapshot(self) -> ItemSet | None:
        """The item set to store with the run (so reports need no data file), if the kind has one."""
        return None

    def check(self) -> None:
        """Validate options, prompts and data; raise before anything is written."""

    def oracle(self) -> Oracle | None:
        """The truth a simulated judge may read (the scripted judge); None when the kind has none."""
        return None

    @abstractmethod
    async def execute(self, ctx: RunContext) -> R:
        """Plan, ask the engine(s), write results through ``ctx``, return the report."""


def check_run(run: Run[Any], executor: str | None = None) -> None:
    """Step 1 of the lifecycle: every check that needs no store (callers may run it before opening one)."""
    run.check()
    judges = run.judges()
    if "judge" not in judges:
        raise ConfigError(f"{run.kind} run has no main judge")
    if run.format_retries < 0:
        raise ConfigError(f"format retries must be >= 0 (got {run.format_retries})")
    if run.concurrency is not None and run.concurrency < 1:
        raise ConfigError(f"concurrency must be >= 1 (got {run.concurrency})")
    for j in judges.values():
        j.check_params(run.params)
    parse_executor(executor or "local")  # a bad executor spec fails here, before the run is written


async def execute_async(run: Run[R], store: Store, *, observer: Observer | None = None,
                        executor: str | None = None, checked: bool = False, command: str | None = None) -> R:
    """Run ``run`` through the store: the one lifecycle (module doc).

    ``executor`` says where the engines send the requests the store does not hold (``local``, the
    default; ``ray``, ``ray://HOST:PORT``: Ray actors holding the judge); the store is written here
    alone, whatever the executor.  ``checked``: the caller has just passed ``run`` and ``executor`` through
    :func:`check_run` (the CLI does, before it opens the store), so it is not checked again.  ``command``: the
    command line that runs it (the CLI's), stored with the run with the folder it ran in, so that a command
    that finds the run unfinished can say how to resume it (:func:`knockout.reports.resume_hint`)."""
    if not checked:
        check_run(run, executor)
    judges = run.judges()
    run_id = run_id_for(run.identity())
    oracle = run.oracle()
    for j in judges.values():
        if j.simulated and oracle is not None:
            j.bind_simulation(oracle)
    snapshot = run.snapshot()
    main = judges["judge"]
    config = {
        **run.config(),
        "judge_identity": main.identity(),
        "simulated_judge": any(j.simulated for j in judges.values()),
    }
    if command is not None:
        config["command"] = {"argv": command, "cwd": os.getcwd()}  # the store redacts what it writes
    stored = store.get_run(run_id)
    before = stored.summary if stored is not None else None
    executors: dict[str, Executor] = {}
    try:
        for role, j in judges.items():  # a Ray cluster reached (or refused) before the run is written
            executors[role] = make_executor(executor, j, store, run_id)
        store.start_run(run_id, kind=run.kind, method=run.method, judge=run.spec(), config=config,
                        data_source=run.data_source,
                        data_fingerprint=store.save_items(snapshot) if snapshot is not None else None)
        try:
            engines = {role: Engine(j, store, params=run.params, concurrency=run.concurrency,
                                    format_retries=run.format_retries, run_id=run_id, observer=observer,
                                    executor=executors[role]) for role, j in judges.items()}
            ctx = RunContext(run_id, store, engines, observer, executor)
            report = await run.execute(ctx)
            summary = report.summary()
            keep_work_time(summary, before, engines.values())
            status = INCOMPLETE if failed_requests(summary, engines.values()) else "complete"
            if status == INCOMPLETE:
                if hasattr(report, "status"):  # every kind's own report: its summary() says so too
                    report.status = INCOMPLETE
                summary["status"] = INCOMPLETE
            stopped = next((e.stopped for e in engines.values() if e.stopped), None)
            store.finish_run(run_id, summary, status, error=stopped)
        except (KeyboardInterrupt, asyncio.CancelledError):
            store.end_run(run_id, "interrupted", "stopped by the user")
            raise
        except BaseException as exc:  # stored failed; interrupted where the error says so (a lost Ray cluster)
            store.end_run(run_id, "interrupted" if getattr(exc, "interrupted", False) else "failed",
                          f"{type(exc).__name__}: {exc}")
            if isinstance(exc, KnockoutError):
                exc.run_id = run_id
            raise
    finally:
        for ex in executors.values():
            await ex.aclose()
    return report


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from synchronous code, also inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if not running:  # run outside the except clause: a run's own error is not chained to "no running loop"
        return asyncio.run(_as_coroutine(factory))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="knockout-run") as pool:
        return pool.submit(lambda: asyncio.run(_as_coroutine(factory))).result()


async def _as_coroutine(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


class RunStopped(KeyboardInterrupt):
    """A run :func:`execute` stopped on one of its ``stop_signals``: it is stored ``interrupted`` (as after
    Ctrl-C) and running it again resumes it.  ``signum`` is the signal; ``run_id`` the run, or None when
    the signal came before the run was written."""

    def __init__(self, signum: int, run_id: str | None) -> None:
        self.signum = signum
        self.run_id = run_id
        super().__init__(f"stopped by {signal.Signals(signum).name}")


@contextmanager
def _cancel_on(signals: Iterable[int], received: list[int]) -> Iterator[None]:
    """While the block runs in the main thread's event loop, each of ``signals`` is recorded in ``received``
    and cancels the current task (the lifecycle then stores the run ``interrupted``).  A signal ignored
    when the block starts (``nohup``'s SIGHUP, a background job's SIGINT) stays ignored; the previous
    handlers are put back afterwards.  Elsewhere (a worker thread) nothing is installed."""
    task = asyncio.current_task()
    installed: dict[int, Any] = {}
    if task is not None and threading.current_thread() is threading.main_thread():
        loop = asyncio.get_running_loop()

        def stop(signum: int) -> None:
            received.append(signum)
            task.cancel()

        for signum in signals:
            previous = signal.getsignal(signum)
            if previous == signal.SIG_IGN:
                continue
            loop.add_signal_handler(signum, stop, signum)
            installed[signum] = previous
    try:
        yield
    finally:
        for signum, previous in installed.items():
            asyncio.get_running_loop().remove_signal_handler(signum)
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)


def execute(run: Run[R], store: Store, *, observer: Observer | None = None, close_judges: bool = True,
            executor: str | None = None, checked: bool = False, stop_signals: Iterable[int] = (),
            command: str | None = None) -> R:
    """Synchronous :func:`execute_async`; closes the run's judges afterwards unless told not to.

    ``stop_signals`` (e.g. SIGINT, SIGTERM, SIGHUP; honoured in the main thread): each stops the run the
    way Ctrl-C does — it is stored ``interrupted`` — and raises :class:`RunStopped` naming the signal."""
    received: list[int] = []

    async def main() -> R:
        with _cancel_on(stop_signals, received):
            try:
                return await execute_async(run, store, observer=observer, executor=executor, checked=checked,
                                           command=command)
            finally:
                if close_judges:
                    for j in {id(j): j for j in run.judges().values()}.values():
                        await j.aclose()

    try:
        return run_sync(main)
    except (asyncio.CancelledError, KeyboardInterrupt):
        if not received:
            raise
        run_id = run_id_for(run.identity())
        raise RunStopped(received[0], run_id if store.get_run(run_id) is not None else None) from None
