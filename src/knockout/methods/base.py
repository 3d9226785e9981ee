"""What a grading method is, and the registry methods are found in by name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from knockout.data.records import ItemSet
from knockout.prompts.builder import PromptOptions
from knockout.registry import Registry
from knockout.storage.engine import Engine


@dataclass
class MethodOptions(PromptOptions):
    """Prompt options plus method knobs (each method reads the ones it knows)."""

    debias: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AnswerResult:
    answer_id: str
    question_id: str
    score: float | None  # None when no valid grade was obtained
    valid: bool
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class MethodResult:
    results: list[AnswerResult]
    info: dict[str, Any] = field(default_factory=dict)


class Method(Protocol):
    name: str
    #: "individual" or "pairwise": which prompt kind the method renders
    prompt_kind: str

    async def run(self, items: ItemSet, engine: Engine, options: MethodOptions) -> MethodResult: ...


methods: Registry[type[Method]] = Registry("method")
methods.add("individual", "knockout.methods.individual:Individual", "grade each answer on its own")
methods.add("knockout", "knockout.methods.knockout:Knockout", "knockout tournament of question-level matches")
methods.add("pairwise", "knockout.methods.pairwise:Pairwise", "one round of question-level matches")
methods.add("allpairs", "knockout.methods.allpairs:AllPairs", "every pair once; Elo and Bradley-Terry")
methods.add("heapsort", "knockout.methods.sorting:Heapsort", "PRP heapsort with question-level matches")
methods.add("window", "knockout.methods.sorting:SlidingWindow", "PRP sliding-window bubble passes")
