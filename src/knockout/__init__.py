"""knockout: grade and rank free-form answers with LLM judges, and measure agreement with humans.

The public API (imported lazily: ``import knockout`` is cheap, each name loads its module on first use)::

    import knockout

    # df: one row per answer (columns question_id, question, max_points, response); a DataFrame back
    graded = knockout.grade(df, judge="llamacpp", columns={"answer": "response"}, language="en")

    from knockout import load_items, make_judge, Store, RunConfig, run

    items = load_items("exam.jsonl")
    judge = make_judge("llamacpp")            # or "openai:MODEL", "anthropic:MODEL"
    with Store("runs.db") as store:
        report = run(items, judge, store, RunConfig(method="knockout", options=MethodOptions(debias=True)))
    print(report.agreement["pearson"])

:func:`grade` (:func:`grade_async`) grades a table of answers in one call and gives it back with the
grades, the judge's explanations and validity added.  Run entry points of every kind: :func:`run`
(grading), :func:`run_sbs` (side-by-side), :func:`run_meta` (meta-evaluation), their ``_async`` forms, and
:func:`execute` for any :class:`Run` (e.g. a :class:`SolveRun`: a model answers an exam as a SciEx examinee;
:func:`write_solved`, :func:`build_leaderboard`, more in :mod:`knockout.sciex`).  Analysis:
:func:`load_run`, :func:`analyse`, :func:`build_report`, :func:`build_comparison` (:func:`comparison_df`: as a
DataFrame), :func:`paired_comparison`, :func:`sbs_metrics`, :func:`question_level`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knockout._lazy import lazy_exports

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # data
    "Answer": "knockout.data._records",
    "ItemSet": "knockout.data._records",
    "PairItem": "knockout.data._records",
    "Question": "knockout.data._records",
    "load_items": "knockout.data._loaders",
    "from_dataframe": "knockout.data._loaders",
    "from_dataset": "knockout.data._loaders",
    "write_jsonl": "knockout.data._writer",
    "Verdict": "knockout._verdict",
    # errors
    "ConfigError": "knockout.errors",
    "InputError": "knockout.errors",
    "JudgeError": "knockout.errors",
    "KnockoutError": "knockout.errors",
    # judges
    "GenParams": "knockout.judges._base",
    "Judge": "knockout.judges._base",
    "Message": "knockout.judges._base",
    "make_judge": "knockout.judges._registry",
    # prompts
    "get_template": "knockout.prompts._templates",
    "presets": "knockout.prompts._templates",
    # storage and runs
    "Store": "knockout.storage._store",
    "Run": "knockout.runs._run",
    "execute": "knockout.runs._run",
    "execute_async": "knockout.runs._run",
    # grading
    "MethodOptions": "knockout.methods._base",
    "methods": "knockout.methods._base",
    "RunConfig": "knockout.methods._run",
    "RunReport": "knockout.methods._run",
    "run": "knockout.methods._run",
    "run_async": "knockout.methods._run",
    # the one-call notebook API
    "grade": "knockout.notebook._grade",
    "grade_async": "knockout.notebook._grade",
    # side-by-side
    "SbsConfig": "knockout.sbs._run",
    "SbsItem": "knockout.sbs._data",
    "load_sbs": "knockout.sbs._data",
    "run_sbs": "knockout.sbs._run",
    "run_sbs_async": "knockout.sbs._run",
    "sbs_metrics": "knockout.sbs._metrics",
    # meta-evaluation
    "MetaConfig": "knockout.meta._run",
    "MetaOptions": "knockout.meta._frameworks",
    "load_verdicts": "knockout.meta._verdicts",
    "run_meta": "knockout.meta._run",
    "run_meta_async": "knockout.meta._run",
    # SciEx: models solve exams, the leaderboard
    "SolveConfig": "knockout.sciex._solve",
    "SolveRun": "knockout.sciex._solve",
    "write_solved": "knockout.sciex._output",
    "build_leaderboard": "knockout.sciex._leaderboard",
    # analysis
    "question_level": "knockout.metrics._agreement",
    "analyse": "knockout.metrics._analysis",
    "load_run": "knockout.reports._runs",
    "build_report": "knockout.reports._report",
    "build_comparison": "knockout.reports._report",
    "comparison_df": "knockout.reports._report",
    "results_df": "knockout.reports._tidy",
    "gradebook": "knockout.reports._gradebook",
    "paired_comparison": "knockout.metrics._comparison",
}

__all__ = [
    "Answer",
    "ConfigError",
    "GenParams",
    "InputError",
    "ItemSet",
    "Judge",
    "JudgeError",
    "KnockoutError",
    "Message",
    "MetaConfig",
    "MetaOptions",
    "MethodOptions",
    "PairItem",
    "Question",
    "Run",
    "RunConfig",
    "RunReport",
    "SbsConfig",
    "SbsItem",
    "SolveConfig",
    "SolveRun",
    "Store",
    "Verdict",
    "__version__",
    "analyse",
    "build_comparison",
    "build_leaderboard",
    "build_report",
    "comparison_df",
    "execute",
    "execute_async",
    "from_dataframe",
    "from_dataset",
    "get_template",
    "grade",
    "grade_async",
    "gradebook",
    "load_items",
    "load_run",
    "load_sbs",
    "load_verdicts",
    "make_judge",
    "methods",
    "paired_comparison",
    "presets",
    "question_level",
    "results_df",
    "run",
    "run_async",
    "run_meta",
    "run_meta_async",
    "run_sbs",
    "run_sbs_async",
    "sbs_metrics",
    "write_jsonl",
    "write_solved",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from knockout._verdict import Verdict
    from knockout.data._loaders import from_dataframe, from_dataset, load_items
    from knockout.data._records import Answer, ItemSet, PairItem, Question
    from knockout.data._writer import write_jsonl
    from knockout.errors import ConfigError, InputError, JudgeError, KnockoutError
    from knockout.judges._base import GenParams, Judge, Message
    from knockout.judges._registry import make_judge
    from knockout.meta._frameworks import MetaOptions
    from knockout.meta._run import MetaConfig, run_meta, run_meta_async
    from knockout.meta._verdicts import load_verdicts
    from knockout.methods._base import MethodOptions, methods
    from knockout.methods._run import RunConfig, RunReport, run, run_async
    from knockout.metrics._agreement import question_level
    from knockout.metrics._analysis import analyse
    from knockout.metrics._comparison import paired_comparison
    from knockout.notebook._grade import grade, grade_async
    from knockout.prompts._templates import get_template, presets
    from knockout.reports._gradebook import gradebook
    from knockout.reports._report import build_comparison, build_report, comparison_df
    from knockout.reports._runs import load_run
    from knockout.reports._tidy import results_df
    from knockout.runs._run import Run, execute, execute_async
    from knockout.sbs._data import SbsItem, load_sbs
    from knockout.sbs._metrics import sbs_metrics
    from knockout.sbs._run import SbsConfig, run_sbs, run_sbs_async
    from knockout.sciex._leaderboard import build_leaderboard
    from knockout.sciex._output import write_solved
    from knockout.sciex._solve import SolveConfig, SolveRun
    from knockout.storage._store import Store
