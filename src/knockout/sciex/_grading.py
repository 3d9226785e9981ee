"""What a grade run adds for SciEx: figures as the judge takes them, copy rate, parser fallbacks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knockout.data._records import ItemSet

if TYPE_CHECKING:
    from knockout.methods._base import AnswerResult, MethodOptions


def judge_items(items: ItemSet, mode: str, folder: Path | None = None) -> tuple[ItemSet, int]:
    """The item set as the judge sees it: the questions' figures prepared as ``mode`` says (``auto``: as they
    are), and how many figures were left out."""
    if mode == "auto" or not any(q.images for q in items.questions.values()):
        return items, 0
    from knockout.sciex._figures import with_figures

    return with_figures(items, mode, folder)


def sciex_fallbacks(items: ItemSet, results: Sequence[AnswerResult]) -> dict[str, Any]:
    """Valid grades that the ``sciex-score`` parser read with its fallback (the last number in range)."""
    from knockout.sciex._parse import sciex_grade

    ids = []
    for r in results:
        attempts = r.details.get("attempts") or []
        if not r.valid or not attempts:
            continue
        q = items.question_of(items.answer(r.answer_id))
        _, fallback = sciex_grade(str(attempts[-1].get("reply", "")), q.max_points)
        if fallback:
            ids.append(r.answer_id)
    return {"fallbacks": len(ids), "answers": ids}


def grading_info(items: ItemSet, results: Sequence[AnswerResult], options: MethodOptions,
                 left_out: int) -> dict[str, Any]:
    """``info`` of a grade run's summary: figures left out, the copy rate of few-shot grading, and the
    fallbacks of the ``sciex-score`` parser (each counted)."""
    info: dict[str, Any] = {}
    if left_out:
        info["figures_left_out"] = left_out
    if options.shots > 0:
        from knockout.prompts._fewshot import shots_used
        from knockout.sciex._copyrate import copy_rate, run_gradings

        info["shots"] = shots_used(results, options.shots, options.shot_source)
        if options.allow_fewer_shots:
            info["shots"]["allow_fewer"] = True

        rows = [{"item_id": r.answer_id, "score": r.score, "valid": r.valid, "details": r.details} for r in results]
        rate = copy_rate(run_gradings(items, rows))
        if rate is not None:
            info["copy_rate"] = rate
    if options.parser == "sciex-score":
        info["sciex_parser"] = sciex_fallbacks(items, results)
    return info

