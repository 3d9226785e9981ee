"""Reports of stored runs: agreement with humans (``knockout report``), method comparison (``compare``),
verdicts produced elsewhere (``agreement``), exports, the gradebook (``gradebook``), HTML pages and plots."""

from typing import TYPE_CHECKING

from knockout._lazy import lazy_exports

_EXPORTS = {
    "LoadedRun": "knockout.reports._runs",
    "load_run": "knockout.reports._runs",
    "pick_run": "knockout.reports._runs",
    "run_cost": "knockout.reports._runs",
    "build_report": "knockout.reports._report",
    "build_comparison": "knockout.reports._report",
    "comparison_df": "knockout.reports._report",
    "Table": "knockout.reports._tables",
    "analyse_verdicts": "knockout.reports._verdicts",
    "export_run": "knockout.reports._export",
    "export_rows": "knockout.reports._export",
    "results_df": "knockout.reports._tidy",
    "gradebook": "knockout.reports._gradebook",
    "resume_hint": "knockout.reports._runs",
    "tidy_rows": "knockout.reports._tidy",
}
__all__ = [
    "LoadedRun",
    "Table",
    "analyse_verdicts",
    "build_comparison",
    "build_report",
    "comparison_df",
    "export_rows",
    "export_run",
    "gradebook",
    "load_run",
    "pick_run",
    "results_df",
    "resume_hint",
    "run_cost",
    "tidy_rows",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from knockout.reports._export import export_rows, export_run
    from knockout.reports._gradebook import gradebook
    from knockout.reports._report import build_comparison, build_report, comparison_df
    from knockout.reports._runs import LoadedRun, load_run, pick_run, resume_hint, run_cost
    from knockout.reports._tables import Table
    from knockout.reports._tidy import results_df, tidy_rows
    from knockout.reports._verdicts import analyse_verdicts
