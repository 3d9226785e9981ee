"""The engine: judge requests through a cache, with bounded concurrency, format retries and accounting.

It depends on a :class:`Cache` protocol (the SQLite :class:`knockout.storage.Store` implements it) and
reports progress as events to an observer; it draws nothing and writes no results.
"""

from knockout.engine._cache import Cache, CallRecord, call_key
from knockout.engine._engine import Attempt, CallTrace, Engine, Outcome, Stats, Task
from knockout.engine._events import Done, Event, Info, Observer, Planned, Queued
from knockout.judges._base import Subject, current_subject

__all__ = [
    "Attempt",
    "Cache",
    "CallRecord",
    "CallTrace",
    "Done",
    "Engine",
    "Event",
    "Info",
    "Observer",
    "Outcome",
    "Planned",
    "Queued",
    "Stats",
    "Subject",
    "Task",
    "call_key",
    "current_subject",
]
