"""A quiet test run (``make test``: ``pytest -p tests.progress_lines``): no dot per passing test, one line per
test file when it is done (its counts and seconds), failures and errors as usual.

With the suite's thousands of tests, a screen of dots said nothing about where a run was or what was slow;
``--durations=15`` in the Makefile adds the slowest tests at the end.
"""

from __future__ import annotations

import time
from typing import Any

import pytest


class FileLines:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.file: str | None = None
        self.counts: dict[str, int] = {}
        self.marked = False
        self.started = time.perf_counter()

    def _flush(self) -> None:
        if self.file is None:
            return
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            counts = ", ".join(f"{n} {what}" for what, n in self.counts.items())
            if self.marked:  # a letter (F, E, x) was written on this line
                reporter.write("\n")
            reporter.write_line(f"{self.file}: {counts} ({time.perf_counter() - self.started:.1f} s)")
        self.file, self.counts, self.marked = None, {}, False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        file = nodeid.split("::", 1)[0]
        if file != self.file:
            self._flush()
            self.file, self.started = file, time.perf_counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            outcome = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
            if report.when != "call" and report.failed:
                outcome = "errors"
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            self.marked = self.marked or outcome not in ("passed", "skipped")

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config
                                 ) -> tuple[str, str, str] | None:
        if report.passed and report.when == "call":
            return "passed", "", "PASSED"
        if report.skipped and not hasattr(report, "wasxfail"):
            return "skipped", "", "SKIPPED"
        return None

    def pytest_sessionfinish(self) -> None:
        self._flush()


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(FileLines(config), "knockout-file-lines")
