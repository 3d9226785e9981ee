"""The command line's progress bar: a rich view of the engine's progress events."""

from __future__ import annotations

import signal
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from knockout.cli._common import note_incomplete, resume_command
from knockout.engine import Done, Event, Observer, Planned, Queued
from knockout.errors import ConfigError

if TYPE_CHECKING:
    from knockout.runs import Report, Run

R = TypeVar("R", bound="Report")


class ProgressBar:
    """Requests done of requests known (planned, or queued so far), invalid replies, tokens, ETA."""

    def __init__(self, description: str, console: Console | None = None) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("invalid {task.fields[invalid]}"),
            TextColumn("tokens {task.fields[tokens]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
            transient=False,
        )
        self.task: TaskID = self.progress.add_task(description, total=0, invalid=0, tokens=0)
        self.planned: int | None = None
        self.queued = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, Planned):
            self.planned = event.requests
            self.progress.update(self.task, total=max(event.requests, self.queued))
        elif isinstance(event, Queued):
            self.queued += event.requests
            total = self.queued if self.planned is None else max(self.planned, self.queued)
            self.progress.update(self.task, total=total)
        elif isinstance(event, Done):
            self.progress.update(self.task, advance=1, invalid=event.invalid_total, tokens=event.tokens_total)


@contextmanager
def progress_bar(description: str, enabled: bool = True) -> Iterator[Observer | None]:
    """A rich progress bar on stderr for the duration of the block (None when disabled)."""
    if not enabled:
        yield None
        return
    bar = ProgressBar(description)
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
                     executor: str | None = None) -> R:
    """Open the store, run ``run`` through the one lifecycle with a progress bar, close the store.

    SIGINT, SIGTERM and SIGHUP stop the run: it is stored ``interrupted``, one line on stderr names it and
    the command that resumes it, and the command exits with 128 + the signal's number (130, 143, 129).  A
    run stored ``incomplete`` (judge requests failed for good) is noted: the command ends with one line and
    exit code 3 after its output (:func:`exit_if_incomplete`)."""
    from knockout._redact import redact
    from knockout.runs import INCOMPLETE, RunStopped, check_run, execute
    from knockout.runs._run import failed_requests
    from knockout.storage import Store

    check_run(run, executor)  # bad options and prompts fail before the store is created or touched
    freeze_heap()
    try:
        with Store(store_path) as store, progress_bar(escape(f"{label} ({redact(run.spec())})"), not quiet) as bar:
            try:
                report = execute(run, store, observer=bar, executor=executor, checked=True,
                                 stop_signals=STOP_SIGNALS)
                record = store.get_run(report.run_id)
                if record is not None and record.status == INCOMPLETE:
                    note_incomplete(store_path, record.id, failed_requests(record.summary or {}))
                return report
            except sqlite3.OperationalError as exc:  # locked by another process past the wait, disk full, ...
                raise ConfigError(f"{store_path}: cannot write the store ({exc})") from None
    except RunStopped as stop:
        name = signal.Signals(stop.signum).name
        what = (f"run {stop.run_id} in {store_path} is stored as interrupted" if stop.run_id
                else "stopped before the run was stored")
        sys.stderr.write(f"knockout: {name}: {what}; resume it with: {resume_command()}\n")
        sys.stderr.flush()
        raise typer.Exit(128 + stop.signum) from None
