"""The command line's progress bar: a rich view of the engine's progress events."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from knockout.cli._common import note_incomplete, print_json, resume_command
from knockout.engine import Done, Event, Info, Observer, Planned, Queued
from knockout.errors import ConfigError, KnockoutError

if TYPE_CHECKING:
    from knockout.runs import Report, Run

R = TypeVar("R", bound="Report")


#: a live judge call slower than this (seconds per call, wall time over the calls made so far) gets a hint
SLOW_CALL_S = 5.0
#: live calls done before the hint is given (the first calls load the model)
SLOW_AFTER = 3


class Pace:
    """The time left, from live calls only: the wall time per live call (since the live calls began) times the
    requests left.  Cache hits count for nothing: they are answered from the store at once, when their batch
    is queued, so they take no time and leave the requests left as soon as they come; and how many of them
    came since the live calls began says nothing of the requests still to come (a resumed run is answered
    from the store first, in the order the work was done before, then calls live: an ETA discounted by the
    share of hits seen so far showed 15 s a call where the calls took 77 s)."""

    def __init__(self, now: float) -> None:
        self.start = now
        self.last = now  # when the last request finished
        self.live = 0
        self.live_since: float | None = None  # when the live calls began: the end of the last one before them

    def queued(self, now: float) -> None:
        """Requests were handed to the engine: before the first one is done, the clock starts here (the time
        spent loading the data and opening the store is no call's)."""
        if self.live_since is None and self.last == self.start:
            self.start = self.last = now

    def done(self, cached: bool, now: float) -> None:
        if not cached and self.live_since is None:
            self.live_since = self.last
        self.live += not cached
        self.last = now

    def per_call(self, now: float) -> float | None:
        """Seconds of wall time per live call so far (with calls in flight together, less than one call's
        latency), or None before the first live call."""
        if not self.live or self.live_since is None:
            return None
        return max(now - self.live_since, 0.0) / self.live

    def eta(self, remaining: float, now: float) -> float | None:
        """Seconds left for ``remaining`` requests, each at the wall time of a live call so far."""
        per = self.per_call(now)
        if per is None:
            return None if remaining > 0 else 0.0
        return max(remaining, 0.0) * per


class EtaColumn(ProgressColumn):
    """``ETA 0:12:34`` from the task's :class:`Pace` (rich's own estimate needs several completions within
    its 30 s window, so it shows ``-:--:--`` when calls take minutes)."""

    def render(self, task: Task) -> Text:
        pace = task.fields.get("pace")
        if not isinstance(pace, Pace):
            return Text("ETA -:--:--", style="progress.remaining")
        remaining = (task.total or 0) - task.completed
        eta = pace.eta(remaining, task.get_time())
        if eta is None:
            return Text("ETA -:--:--", style="progress.remaining")
        return Text(f"ETA {timedelta(seconds=round(eta))}", style="progress.remaining")


#: when stderr is not a terminal (piped, a log file), a plain progress line at most this often (seconds)
LINE_EVERY_S = 30.0


class ProgressBar:
    """Requests done of requests known (planned, or queued so far), invalid replies, tokens, ETA; and one
    line of advice when the judge's calls are slow (``slow_hint``).  When the console is not a terminal, where
    rich draws no live bar, a plain line says the same at most every :data:`LINE_EVERY_S` seconds and at the
    end (a piped ``make demo`` printed nothing for 50 minutes)."""

    def __init__(self, description: str, console: Console | None = None, slow_hint: str | None = None) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("invalid {task.fields[invalid]}"),
            TextColumn("tokens {task.fields[tokens]}"),
            TimeElapsedColumn(),
            EtaColumn(),
            console=console or Console(stderr=True),
            transient=False,
        )
        self.pace = Pace(self.progress.get_time())
        self.task: TaskID = self.progress.add_task(description, total=0, invalid=0, tokens=0, pace=self.pace)
        self.planned: int | None = None
        self.queued = 0
        self.slow_hint = slow_hint
        self.hinted = False
        self.description = description
        self.plain = not self.progress.console.is_terminal
        self.last_line: float | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, Planned):
            self.planned = event.requests
            self.progress.update(self.task, total=max(event.requests, self.queued))
        elif isinstance(event, Queued):
            self.queued += event.requests
            self.pace.queued(self.progress.get_time())
            total = self.queued if self.planned is None else max(self.planned, self.queued)
            self.progress.update(self.task, total=total)
        elif isinstance(event, Done):
            now = self.progress.get_time()
            self.pace.done(event.cached, now)
            self.progress.update(self.task, advance=1, invalid=event.invalid_total, tokens=event.tokens_total)
            self._maybe_hint(now)
            self._maybe_line(now)
        elif isinstance(event, Info):  # the executor's news (a Ray worker lost, a replacement up): one line
            self.progress.console.print(event.text, markup=False, highlight=False, soft_wrap=True)

    def _maybe_line(self, now: float) -> None:
        """Where no live bar is drawn: the first request done, then a line every :data:`LINE_EVERY_S` seconds,
        and the last."""
        if not self.plain:
            return
        task = self.progress.tasks[0]
        last = task.total is not None and task.completed >= task.total
        if not last and self.last_line is not None and now - self.last_line < LINE_EVERY_S:
            return
        self.last_line = now
        eta = self.pace.eta((task.total or 0) - task.completed, now)
        elapsed = timedelta(seconds=round(task.elapsed or 0.0))
        self.progress.console.print(
            f"{Text.from_markup(self.description).plain}: {task.completed:g}/{task.total or 0:g} requests, invalid "
            f"{task.fields['invalid']}, elapsed {elapsed}" + ("" if eta is None or last else
                                                              f", ETA {timedelta(seconds=round(eta))}"),
            markup=False, highlight=False, soft_wrap=True)

    def _maybe_hint(self, now: float) -> None:
        if self.hinted or self.slow_hint is None or self.pace.live < SLOW_AFTER:
            return
        per = self.pace.per_call(now)
        if per is not None and per > SLOW_CALL_S:
            self.hinted = True
            self.progress.console.print(f"hint: judge calls take {per:.1f} s each; {self.slow_hint}",
                                        markup=False, highlight=False, soft_wrap=True)


def slow_hint(spec: str) -> str:
    """What to try when this judge's calls are slow (one line)."""
    if spec.startswith("llamacpp"):
        return ("for plumbing try the 0.5B model (--judge llamacpp:qwen2.5-coder-0.5b), or decode several answers "
                "together and set the threads: --judge 'llamacpp?parallel=4&threads=N' (docs/scale-out.md)")
    return "more calls in flight (--concurrency N, or the backend's concurrency option) may help"


@contextmanager
def progress_bar(description: str, enabled: bool = True, hint: str | None = None) -> Iterator[Observer | None]:
    """A rich progress bar on stderr for the duration of the block (None when disabled); ``hint``: the advice
    printed once when the judge's calls are slow."""
    if not enabled:
        yield None
        return
    bar = ProgressBar(description, slow_hint=hint)
    bar.progress.start()
    try:
        yield bar
    finally:
        bar.progress.stop()


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a command builds what it keeps (loading a large item set
    allocates millions of objects that all survive, and each full collection would scan them again);
    :func:`freeze_heap` then keeps the collector off them."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def freeze_heap() -> None:
    """Move every object alive now (the loaded item set, the imported modules) out of the cyclic garbage
    collector's reach for the rest of this command (``gc.freeze``).  They live until the process ends
    anyway, and a collector that re-scans a million loaded answers on every full collection took half the
    time of a cache-hit rerun of 100k answers (15.9 s vs 8.0 s measured).  Only the CLI does this: the
    process is its own, so no caller's objects are frozen."""
    import gc

    gc.collect()
    gc.freeze()


#: Signals that stop a run from the command line the way Ctrl-C does (stored ``interrupted``, resumable).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def execute_in_store(store_path: Path, run: Run[R], *, quiet: bool = False, label: str = "judging",
                     executor: str | None = None, as_json: bool = False) -> R:
    """Open the store, run ``run`` through the one lifecycle with a progress bar, close the store.

    SIGINT, SIGTERM and SIGHUP stop the run: it is stored ``interrupted``, one line on stderr names it and
    the command that resumes it, and the command exits with 128 + the signal's number (130, 143, 129).  A
    run stored ``incomplete`` (judge requests failed for good) is noted: the command ends with one line and
    exit code 3 after its output (:func:`exit_if_incomplete`).  ``as_json``: a run that stops with an error
    (stored ``failed``: e.g. every Ray worker lost; or ``interrupted``: the Ray cluster lost) is printed as one
    JSON document on stdout (its id, status and error) before the error goes up to the command's one line; an
    error that leaves the run ``interrupted`` ends the command with one line that names the run and the command
    that resumes it, and exit code 1."""
    from knockout.runs import INCOMPLETE, RunStopped, check_run, execute
    from knockout.runs._run import failed_requests
    from knockout.storage import Store

    check_run(run, executor)  # bad options and prompts fail before the store is created or touched
    freeze_heap()
    try:
        with Store(store_path) as store, progress_bar(escape(f"{label} ({run.spec()})"), not quiet,
                                                    slow_hint(run.spec())) as bar:
            try:
                report = execute(run, store, observer=bar, executor=executor, checked=True,
                                 stop_signals=STOP_SIGNALS, command=resume_command())
                record = store.get_run(report.run_id)
                if record is not None and record.status == INCOMPLETE:
                    note_incomplete(store_path, record.id, failed_requests(record.summary or {}))
                return report
            except sqlite3.OperationalError as exc:  # locked by another process past the wait, disk full, ...
                raise ConfigError(f"{store_path}: cannot write the store ({exc})") from None
            except KnockoutError as exc:
                failed = store.get_run(exc.run_id) if as_json and exc.run_id is not None else None
                if failed is not None:
                    print_json({"run_id": failed.id, "kind": failed.kind, "method": failed.method,
                                "judge": failed.judge, "status": failed.status, "error": failed.error,
                                "store": str(store_path)})
                raise
    except KnockoutError as exc:
        if not getattr(exc, "interrupted", False) or exc.run_id is None:
            raise
        from knockout._redact import redact

        why = "".join(c if c.isprintable() else " " for c in redact(str(exc)))
        sys.stdout.flush()
        sys.stderr.write(f"knockout: {why}: run {exc.run_id} in {store_path} is stored as interrupted; "
                         f"resume it with: {resume_command()}\n")
        sys.stderr.flush()
        if getattr(exc, "exit_now", False):  # the store is closed: no teardown that waits on what is lost
            os._exit(exc.exit_code)
        raise typer.Exit(exc.exit_code) from None
    except RunStopped as stop:
        name = signal.Signals(stop.signum).name
        what = (f"run {stop.run_id} in {store_path} is stored as interrupted" if stop.run_id
                else "stopped before the run was stored")
        sys.stderr.write(f"knockout: {name}: {what}; resume it with: {resume_command()}\n")
        sys.stderr.flush()
        llama = sys.modules.get("knockout.judges._llamacpp")
        from knockout.engine._executors import computations_in_flight

        if (llama is not None and llama.calls_in_flight()) or computations_in_flight():
            # the store is closed and the run stored interrupted: exit now, never tear the interpreter down under
            # a llama.cpp call or a computation (the second reader's encoding) in progress
            sys.stdout.flush()
            os._exit(128 + stop.signum)
        raise typer.Exit(128 + stop.signum) from None
