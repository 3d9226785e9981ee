"""What a grade run adds for SciEx: figures as the judge takes them, copy rate, parser fallbacks."""

from __future__ import annotations

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


def sciex_fallbacks(items: ItemSet, results: list[AnswerResult]) -> dict[str, Any]:
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


def grading_info(items: ItemSet, results: list[AnswerResult], options: MethodOptions, left_out: int) -> dict[str, Any]:
    """``info`` of a grade run's summary: figures left out, the copy rate of few-shot grading, and the
    fallbacks of the ``sciex-score`` parser (each counted)."""
    info: dict[str, Any] = {}
    if left_out:
        info["figures_left_out"] = left_out
    if options.shots > 0:
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


def shots_used(results: list[AnswerResult] | list[dict[str, Any]], requested: int, source: str) -> dict[str, Any]:
    """What a few-shot run used: examples per answer (``{"2": 10, "1": 3}``), how many answers got fewer than
    ``requested``, and the prompts (so the language) they were graded with."""
    per: dict[int, int] = {}
    prompts: dict[str, int] = {}
    for r in results:
        details = (r.get("details") if isinstance(r, dict) else r.details) or {}
        n = len(details.get("shots") or [])
        per[n] = per.get(n, 0) + 1
        if details.get("prompt"):
            prompts[str(details["prompt"])] = prompts.get(str(details["prompt"]), 0) + 1
    out: dict[str, Any] = {"requested": requested, "source": source,
                           "per_answer": {str(n): per[n] for n in sorted(per, reverse=True)},
                           "fewer": sum(c for n, c in per.items() if n < requested)}
    if prompts:
        out["prompts"] = dict(sorted(prompts.items()))
    return out


def shots_label(used: dict[str, Any]) -> str:
    """``2-shot other-exam`` when every answer got its examples, else what they got, e.g.
    ``2-shot other-exam requested: 0 shots for 6 of 12 answers, 2 for 6``."""
    requested, source = used.get("requested", 0), used.get("source", "")
    per: dict[str, int] = used.get("per_answer") or {}
    head = f"{requested}-shot {source}".strip()
    if not used.get("fewer"):
        return head
    total = sum(per.values())
    used_text = ", ".join(f"{n} for {c}" for n, c in per.items())
    return f"{head} requested, used {used_text} of {total} answers"
