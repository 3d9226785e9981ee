"""Runs: the one lifecycle every kind of run goes through, and the registry of kinds.

A kind is a :class:`RunKind` registered by name in :data:`run_kinds` (``grade``, ``sbs``, ``meta``, ``solve``,
``jury``; third-party kinds through the ``knockout.run_kinds`` entry-point group): its :class:`Run` class
(written through :func:`execute` / :func:`execute_async`), its summary model and its read hooks (report,
compare, tidy tables, viewer, cost), found with :func:`kind_of`.
"""

from knockout._registry import Registry
from knockout.runs._kind import Column, ReportOptions, ReportPage, RunKind, kind_of, kinds_with
from knockout.runs._models import CostStats, RunSummary
from knockout.runs._run import (
    INCOMPLETE,
    Oracle,
    Report,
    Run,
    RunContext,
    RunStopped,
    check_run,
    execute,
    execute_async,
    run_id_for,
    run_sync,
)

#: The kinds of run by name: :class:`RunKind` objects (a plugin may also register a bare :class:`Run` subclass).
run_kinds: Registry[RunKind | type[Run]] = Registry("run kind", group="knockout.run_kinds")  # type: ignore[type-arg]
run_kinds.add("grade", "knockout.methods._kind:GradeKind", "grade answers with a method (individual, knockout, ...)")
run_kinds.add("sbs", "knockout.sbs._kind:SbsKind", "side-by-side: candidate vs baseline in both orders")
run_kinds.add("meta", "knockout.meta._kind:MetaKind", "meta-evaluation: a meta-judge ranks judges")
run_kinds.add("solve", "knockout.sciex._kind:SolveKind", "SciEx: a model answers exam questions as an examinee")
run_kinds.add("jury", "knockout.jury._kind:JuryKind", "several judges (grade or sbs runs) and their aggregate")

__all__ = [
    "INCOMPLETE",
    "Column",
    "CostStats",
    "Oracle",
    "Report",
    "ReportOptions",
    "ReportPage",
    "Run",
    "RunContext",
    "RunKind",
    "RunStopped",
    "RunSummary",
    "check_run",
    "execute",
    "execute_async",
    "kind_of",
    "kinds_with",
    "run_id_for",
    "run_kinds",
    "run_sync",
]
