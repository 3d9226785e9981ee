"""Runs: the one lifecycle every kind of run goes through, and the registry of kinds.

A kind is a :class:`Run` subclass registered by name in :data:`run_kinds` (``grade``, ``sbs``, ``meta``, ``solve``;
third-party kinds through the ``knockout.run_kinds`` entry-point group).  :func:`execute` and
:func:`execute_async` run one.
"""

from knockout._registry import Registry
from knockout.runs._models import CostStats, RunSummary
from knockout.runs._run import (
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

run_kinds: Registry[type[Run]] = Registry("run kind", group="knockout.run_kinds")  # type: ignore[type-arg]
run_kinds.add("grade", "knockout.methods._run:GradeRun", "grade answers with a method (individual, knockout, ...)")
run_kinds.add("sbs", "knockout.sbs._run:SbsRun", "side-by-side: candidate vs baseline in both orders")
run_kinds.add("meta", "knockout.meta._run:MetaRun", "meta-evaluation: a meta-judge ranks judges")
run_kinds.add("solve", "knockout.sciex._solve:SolveRun", "SciEx: a model answers exam questions as an examinee")
run_kinds.add("jury", "knockout.jury._run:JuryRun", "several judges (grade or sbs runs) and their aggregate")

__all__ = [
    "CostStats",
    "Oracle",
    "Report",
    "Run",
    "RunContext",
    "RunStopped",
    "RunSummary",
    "check_run",
    "execute",
    "execute_async",
    "run_id_for",
    "run_kinds",
    "run_sync",
]
