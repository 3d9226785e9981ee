"""``knockout.grade(..., progress=)``: a progress bar in a notebook or a terminal.

``progress=True`` shows one, ``False`` none, ``None`` (the default) one when someone is watching: inside an
IPython/Jupyter session or when stderr is a terminal (not in a script whose output goes to a file, nor in the
tests).  The bar is tqdm's (``tqdm.auto``: a widget in Jupyter when ipywidgets is installed, else text) when
tqdm is installed, else rich's (knockout's own dependency, which Jupyter also renders).  Either one observes
the engine's events (:mod:`knockout.engine`); rich's shows the command line's ETA (the wall time per live
call times the requests left, cache hits taking none), and both print one hint when the judge's calls are
slow (as ``knockout grade`` does).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from knockout.cli._progress import SLOW_AFTER, SLOW_CALL_S, Pace
from knockout.engine import Done, Event, Observer, Planned, Queued
from knockout.errors import ConfigError


def watched() -> bool:
    """Whether a person is likely looking: an IPython/Jupyter session, or stderr on a terminal."""
    ipython = sys.modules.get("IPython")
    if ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None:
        return True
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def backend() -> str:
    """``tqdm`` when it is installed, else ``rich``."""
    return "tqdm" if importlib.util.find_spec("tqdm") is not None else "rich"


class TqdmBar:
    """The engine's events as a tqdm bar: requests done of requests known, invalid replies in the postfix."""

    def __init__(self, description: str, hint: str | None = None) -> None:
        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.auto import tqdm  # type: ignore[import-untyped,unused-ignore]
        else:  # tqdm.auto without ipywidgets warns in Jupyter and falls back to text anyway
            from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]
        self.bar: Any = tqdm(total=0, desc=description, unit="req", dynamic_ncols=True, file=sys.stderr)
        self.planned: int | None = None
        self.queued = 0
        self.pace = Pace(time.monotonic())
        self.hint = hint
        self.hinted = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, Planned):
            self.planned = event.requests
            self._total(max(event.requests, self.queued))
        elif isinstance(event, Queued):
            self.queued += event.requests
            self.pace.queued(time.monotonic())
            self._total(self.queued if self.planned is None else max(self.planned, self.queued))
        elif isinstance(event, Done):
            now = time.monotonic()
            self.pace.done(event.cached, now)
            self.bar.set_postfix(invalid=event.invalid_total, refresh=False)
            self.bar.update(1)
            per = self.pace.per_call(now)
            if (self.hint and not self.hinted and self.pace.live >= SLOW_AFTER and per is not None
                    and per > SLOW_CALL_S):
                self.hinted = True
                self.bar.write(f"hint: judge calls take {per:.1f} s each; {self.hint}", file=sys.stderr)

    def _total(self, n: int) -> None:
        self.bar.total = n
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


@contextmanager
def grade_progress(progress: bool | str | None, spec: str) -> Iterator[Observer | None]:
    """The observer for ``grade(..., progress=)`` for the duration of the block (None: no bar).  ``progress``
    may also name the bar: ``"tqdm"`` or ``"rich"``."""
    from knockout.cli._progress import progress_bar, slow_hint

    description = f"grading ({spec})"
    if progress is None:
        progress = watched()
    if progress is False:
        yield None
        return
    kind = backend() if progress is True else progress
    if kind == "tqdm":
        bar = TqdmBar(description, slow_hint(spec))
        try:
            yield bar
        finally:
            bar.close()
        return
    if kind != "rich":
        raise ConfigError(f"progress={progress!r}: True, False, None (a bar when watched), 'tqdm' or 'rich'")
    with progress_bar(description, True, slow_hint(spec)) as observer:
        yield observer
