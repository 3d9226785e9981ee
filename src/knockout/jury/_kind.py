"""The ``jury`` run kind: several judges' runs of one kind and their aggregate.

A jury is read as the kind its members are (``config.of``: ``grade`` or ``sbs``): its report, comparison,
tidy tables and viewer rows are that kind's, with the jury section added to the report (each member's and
the jury's agreement with humans, inter-judge agreement; :mod:`knockout.jury._report`) and its cost the sum
of its members'.
"""

from __future__ import annotations

from typing import Any

from knockout.jury._run import JuryRun, JurySummary
from knockout.runs import Column, ReportOptions, RunKind, kind_of
from knockout.storage._store import RunRecord, Store


class JuryKind(RunKind):
    name = "jury"
    title = "jury"
    run = JuryRun
    summary_model = JurySummary

    def reads_as(self, record: RunRecord) -> str:
        return str(record.config.get("of", "grade"))

    def _of(self, record: RunRecord) -> RunKind:
        return kind_of(self.reads_as(record))

    def cost(self, store: Store, record: RunRecord) -> dict[str, Any]:
        from knockout.jury._report import jury_cost, load_members

        return jury_cost(load_members(store, record), super().cost(store, record))

    def load_extra(self, store: Store, record: RunRecord) -> dict[str, Any]:
        from knockout.jury._report import load_members

        return {"members": load_members(store, record)}

    def report_sections(self, loaded: Any, options: ReportOptions) -> dict[str, Any]:
        from knockout.jury._report import grade_jury_section, sbs_jury_section

        run, members = loaded.run, loaded.extra["members"]
        if self.reads_as(run) == "sbs":
            return {"jury": sbs_jury_section(members, run, loaded.results, loaded.store_path,
                                             resamples=options.resamples, seed=options.seed)}
        from knockout.methods._kind import calibration_section

        return {"jury": grade_jury_section(members, run, loaded.items, loaded.results, resamples=options.resamples,
                                           seed=options.seed), **calibration_section(loaded, options)}

    def section_tables(self, report: dict[str, Any]) -> list[Any]:
        from knockout.calibration._run import section_tables
        from knockout.jury._report import jury_tables

        return (jury_tables(report["jury"], report["cost"]) if report.get("jury") else []) + section_tables(report)

    def after_run_tables(self, store: Store, record: RunRecord) -> list[Any]:
        """A grading jury's table after ``knockout grade``: each member's and the jury's agreement,
        inter-judge agreement, cost."""
        from knockout.reports._runs import read_run

        loaded = read_run(store, record, web_grades=True)
        return self.section_tables({"jury": self.report_sections(loaded, ReportOptions())["jury"],
                                    "cost": loaded.cost})

    def table_names(self, record: RunRecord) -> tuple[str, ...]:
        return self._of(record).table_names(record)

    def tidy(self, store: Store, record: RunRecord, table: str) -> list[dict[str, Any]]:
        return self._of(record).tidy(store, record, table)

    def columns(self, store: Store, record: RunRecord) -> list[Column]:
        return self._of(record).columns(store, record)

    def listing(self, store: Store, record: RunRecord, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._of(record).listing(store, record, results)

    def item_view(self, store: Store, record: RunRecord, row: dict[str, Any], view: dict[str, Any]) -> None:
        self._of(record).item_view(store, record, row, view)

    def bracket(self, store: Store, record: RunRecord, question_id: str) -> dict[str, Any]:
        return self._of(record).bracket(store, record, question_id)
