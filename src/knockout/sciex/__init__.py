"""SciEx end to end (Dinh et al. 2024): models solve exams, judges grade them, the leaderboard ranks them.

* :class:`SolveRun` (run kind ``solve``, ``knockout solve``): a model answers every question as an
  examinee; :func:`write_solved` writes the answers as SciEx exam folders and the project's JSONL.
* Figures (:func:`caption`, :func:`stack`, :func:`render_pdf`, :func:`prepare_figures`): as the authors
  hand them to text-only, multimodal and one-image models.
* Exam results (:func:`examinee_result`, :func:`student_result`): per-exam percent, the mean over exams,
  German grades (:class:`Boundaries`), breakdowns, bootstrap CIs.
* The leaderboard (:func:`build_leaderboard` from :func:`gather` of a store), its tables, CSV and HTML.
* SciEx-faithful grading helpers: :func:`copy_rate`, :func:`sciex_grade` (the ``sciex-score`` parser),
  :func:`load_llm_grades` (the authors' released LLM grade files).

See docs/sciex.md.
"""

from typing import TYPE_CHECKING

from knockout._lazy import lazy_exports

_EXPORTS = {
    "ShotGrading": "knockout.sciex._copyrate",
    "copy_rate": "knockout.sciex._copyrate",
    "run_gradings": "knockout.sciex._copyrate",
    "FIGURE_MODES": "knockout.sciex._figures",
    "Prepared": "knockout.sciex._figures",
    "caption": "knockout.sciex._figures",
    "prepare_figures": "knockout.sciex._figures",
    "question_figures": "knockout.sciex._figures",
    "render_pdf": "knockout.sciex._figures",
    "resolve_mode": "knockout.sciex._figures",
    "stack": "knockout.sciex._figures",
    "with_figures": "knockout.sciex._figures",
    "Boundaries": "knockout.sciex._german",
    "DEFAULT": "knockout.sciex._german",
    "DEFAULT_NOTE": "knockout.sciex._german",
    "GERMAN_STEPS": "knockout.sciex._german",
    "boundaries_for": "knockout.sciex._german",
    "parse_boundaries": "knockout.sciex._german",
    "JudgeSource": "knockout.sciex._leaderboard",
    "build_leaderboard": "knockout.sciex._leaderboard",
    "gather": "knockout.sciex._leaderboard",
    "leaderboard_csv": "knockout.sciex._leaderboard",
    "leaderboard_html": "knockout.sciex._leaderboard",
    "leaderboard_tables": "knockout.sciex._leaderboard",
    "merge_items": "knockout.sciex._leaderboard",
    "released_judges": "knockout.sciex._leaderboard",
    "LLMGrade": "knockout.sciex._llm_grades",
    "grades_by_setting": "knockout.sciex._llm_grades",
    "load_llm_grades": "knockout.sciex._llm_grades",
    "answer_file": "knockout.sciex._output",
    "write_sciex": "knockout.sciex._output",
    "write_solved": "knockout.sciex._output",
    "sciex_grade": "knockout.sciex._parse",
    "ExamineeResult": "knockout.sciex._results",
    "examinee_result": "knockout.sciex._results",
    "exams_of": "knockout.sciex._results",
    "expert_grades": "knockout.sciex._results",
    "student_result": "knockout.sciex._results",
    "ExamTotals": "knockout.sciex._totals",
    "ExamineeTotal": "knockout.sciex._totals",
    "exam_totals": "knockout.sciex._totals",
    "SolveConfig": "knockout.sciex._solve",
    "SolveReport": "knockout.sciex._solve",
    "SolveRun": "knockout.sciex._solve",
    "examinee_name": "knockout.sciex._solve",
    "parse_model": "knockout.sciex._solve",
}
__all__ = [
    "DEFAULT",
    "DEFAULT_NOTE",
    "FIGURE_MODES",
    "GERMAN_STEPS",
    "Boundaries",
    "ExamTotals",
    "ExamineeResult",
    "ExamineeTotal",
    "JudgeSource",
    "LLMGrade",
    "Prepared",
    "ShotGrading",
    "SolveConfig",
    "SolveReport",
    "SolveRun",
    "answer_file",
    "boundaries_for",
    "build_leaderboard",
    "caption",
    "copy_rate",
    "exam_totals",
    "examinee_name",
    "examinee_result",
    "exams_of",
    "expert_grades",
    "gather",
    "grades_by_setting",
    "leaderboard_csv",
    "leaderboard_html",
    "leaderboard_tables",
    "load_llm_grades",
    "merge_items",
    "parse_boundaries",
    "parse_model",
    "prepare_figures",
    "question_figures",
    "released_judges",
    "render_pdf",
    "resolve_mode",
    "run_gradings",
    "sciex_grade",
    "stack",
    "student_result",
    "with_figures",
    "write_sciex",
    "write_solved",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from knockout.sciex._copyrate import ShotGrading, copy_rate, run_gradings
    from knockout.sciex._figures import (
        FIGURE_MODES,
        Prepared,
        caption,
        prepare_figures,
        question_figures,
        render_pdf,
        resolve_mode,
        stack,
        with_figures,
    )
    from knockout.sciex._german import DEFAULT, DEFAULT_NOTE, GERMAN_STEPS, Boundaries, boundaries_for, parse_boundaries
    from knockout.sciex._leaderboard import (
        JudgeSource,
        build_leaderboard,
        gather,
        leaderboard_csv,
        leaderboard_html,
        leaderboard_tables,
        merge_items,
        released_judges,
    )
    from knockout.sciex._llm_grades import LLMGrade, grades_by_setting, load_llm_grades
    from knockout.sciex._output import answer_file, write_sciex, write_solved
    from knockout.sciex._parse import sciex_grade
    from knockout.sciex._results import ExamineeResult, examinee_result, exams_of, expert_grades, student_result
    from knockout.sciex._solve import SolveConfig, SolveReport, SolveRun, examinee_name, parse_model
    from knockout.sciex._totals import ExamineeTotal, ExamTotals, exam_totals
