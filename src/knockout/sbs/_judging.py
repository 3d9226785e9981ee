"""Judging one side-by-side order: the job, the prompt, and the plain (one-call) judge."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from knockout._verdict import Verdict
from knockout.engine import Engine, Outcome, Subject, Task
from knockout.errors import ConfigError
from knockout.judges._base import Message
from knockout.judges._slot import Slot
from knockout.prompts._builder import parser_for, reminder_for
from knockout.prompts._render import judge_messages
from knockout.prompts._slots import SlotParse, slot_for
from knockout.prompts._templates import DEFAULT_PARSERS, DEFAULT_REMINDERS, PromptTemplate, get_template
from knockout.sbs._data import SbsItem
from knockout.sbs._verdicts import INVALID, to_candidate

#: ``--prompt`` short names -> presets (Titova et al., Appendix D and Table 3).
PROMPTS = {
    "I": "sbs-I",
    "II": "sbs-II",
    "II-fact": "sbs-II-fact",
    "II-reason": "sbs-II-reason",
    "II-fact-reason": "sbs-II-fact-reason",
    "II-fact+reason": "sbs-II-fact-reason",
}

#: What the scripted (simulated) judge is told about an item, from the human verdict (candidate terms):
#: (candidate quality, baseline quality) on 0..1; unknown without a human verdict.
QUALITY: dict[str | None, tuple[float | None, float | None]] = {
    Verdict.A: (0.8, 0.3),
    Verdict.B: (0.3, 0.8),
    Verdict.C: (0.8, 0.8),
    Verdict.D: (0.25, 0.25),
    None: (None, None),
}


def sbs_oracle(items: list[SbsItem]) -> Callable[[Subject], dict[str, Any]]:
    """The truth a simulated judge may read: each response's quality (display order) from the human verdict."""
    by_id = {it.id: it for it in items}

    def facts(subject: Subject) -> dict[str, Any]:
        quality = QUALITY[by_id[subject.ids[0]].human]
        shown = list(quality if subject.facts.get("swap", 0) == 0 else quality[::-1])
        return {"kind": "sbs", "quality": shown, "disagree_with": subject.facts.get("disagree_with")}

    return facts


def sbs_template(prompt: str) -> PromptTemplate:
    """A side-by-side template: a short name (I, II, ...), a preset name, or a user file.

    A plain ``.txt``/``.md`` body with ``{answer1}`` and ``{answer2}`` is read as a side-by-side
    template (its verdict parsed by the ``sbs`` parser); a TOML file must say ``kind = "sbs"``.
    """
    t = get_template(PROMPTS.get(prompt, prompt))
    if t.kind == "pairwise" and t.source != "preset" and Path(t.source).suffix in (".txt", ".md"):
        t = replace(t, kind="sbs", parser=DEFAULT_PARSERS["sbs"], reminder=DEFAULT_REMINDERS["sbs"])
    if t.kind != "sbs":
        raise ConfigError(f"prompt '{prompt}' is a {t.kind} template; side-by-side needs kind \"sbs\"")
    return t


@dataclass
class Job:
    """One item in one order (swap 0: candidate first; swap 1: baseline first)."""

    item: SbsItem
    swap: int
    messages: list[Message]
    shown: tuple[str, ...] = ()  # the responses, question and reference as shown (for the parser)
    slot: Slot | None = None  # the verdict slot its requests carry (docs/methods.md#the-verdict-slot)
    slot_mode: str | None = None

    @property
    def label(self) -> str:
        return f"{self.item.id}#swap{self.swap}"

    def subject(self, **facts: Any) -> Subject:
        return Subject("sbs", (self.item.id,), {"swap": self.swap, **facts})


@dataclass
class OrderResult:
    """The verdict of one order: ``display`` as the judge said it (E if invalid or failed)."""

    display: Verdict
    failed: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def candidate(self, swap: int) -> Verdict:
        return to_candidate(self.display, swap)

    @property
    def valid(self) -> bool:
        return self.display != INVALID


def make_jobs(items: list[SbsItem], t: PromptTemplate, slot_mode: str | None = None) -> list[Job]:
    """Both orders of every item, with the prompt rendered; checks every item before any call.  ``slot_mode``:
    the verdict slot mode of the run (None: free text), for a template with a choice slot."""
    slot = slot_for(t, 1.0) if slot_mode is not None else None
    jobs = []
    for it in items:
        if t.uses_reference and not (it.reference or "").strip():
            raise ConfigError(f"prompt '{t.name}' needs a factual reference; item '{it.id}' has none")
        for swap, (first, second) in enumerate(((it.candidate, it.baseline), (it.baseline, it.candidate))):
            values = {"question": it.question, "answer1": first, "answer2": second,
                      "reference": it.reference or "", "max_points": "1"}
            rendered = judge_messages(t, values)
            jobs.append(Job(it, swap, rendered.messages, rendered.shown, slot, slot_mode if slot else None))
    return jobs


def task_for(job: Job, t: PromptTemplate, messages: list[Message] | None = None,
             subject: Subject | None = None) -> Task:
    if job.slot is not None and messages is None:  # the verdict slot (a debate's turns are read as text)
        return Task(messages=job.messages, parse=SlotParse(job.slot, 1.0), reminder=reminder_for(t, 1.0),
                    subject=subject or job.subject(), label=job.label, slot=job.slot, slot_mode=job.slot_mode,
                    shown=job.shown)
    return Task(messages=messages or job.messages, parse=parser_for(t, 1.0, job.shown),
                reminder=reminder_for(t, 1.0), subject=subject or job.subject(), label=job.label)


def order_result(o: Outcome, **extra: Any) -> OrderResult:
    return OrderResult(display=Verdict(str(o.value)) if o.valid else INVALID, failed=o.failed,
                       details={**o.details(), **extra})


async def judge_single(engine: Engine, jobs: list[Job], t: PromptTemplate) -> list[OrderResult]:
    """One call per order, all orders of all items in one wave."""
    outcomes = await engine.ask_all([task_for(j, t) for j in jobs])
    return [order_result(o) for o in outcomes]
