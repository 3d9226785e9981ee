"""Progress as events: the engine reports what it does to an observer; it draws nothing itself.

The command line turns these events into a rich progress bar (``knockout.cli._progress``); a notebook or
a service can log them, count them or ignore them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Planned:
    """A run announces how many judge requests it expects in all (when it can tell in advance)."""

    requests: int


@dataclass(frozen=True)
class Queued:
    """A wave of ``requests`` judge requests was handed to the engine."""

    requests: int
    wave: int


@dataclass(frozen=True)
class Done:
    """One request finished: from the cache or a live call, readable or not."""

    label: str
    cached: bool
    valid: bool
    failed: bool
    invalid_total: int
    tokens_total: int


@dataclass(frozen=True)
class Info:
    """Something the run's executor reports as it goes (the Ray executor: its live worker count after each
    change); one line of text."""

    text: str


Event = Planned | Queued | Done | Info
Observer = Callable[[Event], None]
