"""Render meta-evaluation prompts: items, assessments, the truncation rule, the preset per framework.

Truncation rule (so that prompts fit a small model's context, n_ctx 4096): every long field put into
a prompt — the question, each answer, the text, each evaluator's explanation, each debate turn — is
cut to ``truncate`` characters (default 2000; 0 = never cut).  A cut keeps the first two thirds and
the last third of the budget and puts ``[... N characters cut ...]`` in between, so the verdict an
explanation ends with stays visible.  Debate turns get half the budget.  Measured with the Qwen2.5
tokenizer on the study's 491 pairwise items (1473 JDEval prompts): the longest prompt is 2,196 tokens
with the default (2,483 without any cut; 162 prompts have a cut field), leaving room for a 512-token
reply in 4096.
"""

from __future__ import annotations

from collections.abc import Callable

from knockout._verdict import Verdict
from knockout.data._io import EMPTY_ANSWER
from knockout.meta._verdicts import Assessment, MetaItem, VerdictSet
from knockout.prompts._templates import PromptTemplate, fmt_points, get_template, render

DEFAULT_TRUNCATE = 2000
_VERDICT_TEXT = {Verdict.A: "AnswerA", Verdict.B: "AnswerB", Verdict.TIE: "equally good"}


def truncate(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: head (2/3) + marker + tail (1/3); 0 = no cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    head, tail = (2 * limit) // 3, limit // 3
    cut = len(text) - head - tail
    return f"{text[:head].rstrip()}\n[... {cut} characters cut ...]\n{text[len(text) - tail :].lstrip()}"


def render_assessment(item: MetaItem, a: Assessment, limit: int) -> str:
    """An evaluator's assessment as the meta-judge sees it."""
    explanation = truncate(a.explanation.strip(), limit) or "(no explanation)"
    if item.kind == "pairwise":
        verdict = _VERDICT_TEXT[a.verdict] if a.verdict else "none (the assistant gave no valid verdict)"
        return (
            f"Better answer: {verdict}\n"
            f'Explanation (in it, "assistant 1" and "assistant 2" mean the authors of AnswerA and AnswerB):\n'
            f"{explanation}"
        )
    score = f"{a.score:g} (on a scale of 1 to {item.max_score:g})" if a.score is not None else (
        "none (the assistant gave no valid score)"
    )
    return f"Score: {score}\nExplanation:\n{explanation}"


def item_values(item: MetaItem, limit: int) -> dict[str, str]:
    if item.kind == "pairwise":
        return {
            "question": truncate(item.question, limit),
            "answer1": truncate(item.answer1, limit) if item.answer1.strip() else EMPTY_ANSWER,
            "answer2": truncate(item.answer2, limit) if item.answer2.strip() else EMPTY_ANSWER,
        }
    return {"text": truncate(item.text, limit)}


def reminder(t: PromptTemplate, max_points: float = 5) -> Callable[[str], str]:
    """A callable for :class:`~knockout.engine.Task`: the preset's format reminder."""
    return lambda error: render(t.reminder, {"error": error, "max_points": fmt_points(max_points)})


#: ``--prompts``: ``own`` = knockout's presets (the paper's tables where it prints them, written for this project
#: where it does not); ``authors`` = the prompts in the authors' published code (MDEval; BSMEval for OpenMEVA
#: stories), presets named ``...-authors``.
PROMPT_SETS = ("own", "authors")
AUTHORS_FRAMEWORKS = ("mdeval", "bsmeval")


def preset_for(framework: str, item: MetaItem, role: str = "", prompts: str = "own") -> PromptTemplate:
    """The preset a framework uses for an item (``role``: judge/debater, branch/solve; ``prompts``: own or
    authors)."""
    if prompts == "authors" and framework in AUTHORS_FRAMEWORKS:
        default = "judge" if framework == "mdeval" else "solve"
        return get_template(f"meta-{framework}-{role or default}-authors")
    if framework == "jdeval":
        return get_template("meta-jdeval")
    if framework == "mdeval":
        return get_template(f"meta-mdeval-{role or 'judge'}")
    suffix = "pairwise" if item.kind == "pairwise" else "text"
    if framework == "jdeval-i":
        return get_template(f"meta-jdeval-i-{suffix if item.kind == 'pairwise' else item.task}")
    return get_template(f"meta-bsmeval-{role or 'solve'}-{suffix}")


#: the roles of the frameworks' presets (:func:`preset_for`)
ROLES = {"jdeval": ("",), "mdeval": ("judge", "debater"), "jdeval-i": ("",), "bsmeval": ("branch", "solve")}


def presets_used(framework: str, vs: VerdictSet, prompts: str = "own") -> list[PromptTemplate]:
    """The presets a framework renders for the items of ``vs`` (none for a framework whose presets are its own: a
    plugin's)."""
    found: dict[str, PromptTemplate] = {}
    for item in vs.items:
        for role in ROLES.get(framework, ()):
            t = preset_for(framework, item, role, prompts)
            found.setdefault(t.name, t)
    return list(found.values())
