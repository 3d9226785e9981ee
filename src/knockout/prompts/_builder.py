"""Turn records into judge messages with a template (preset or user file)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.judges._base import Message
from knockout.prompts._fewshot import Shot, select_shots
from knockout.prompts._parsers import Parsed, parsers
from knockout.prompts._templates import FAMILIES, PromptTemplate, auto_preset, fmt_points, get_template, render


@dataclass
class PromptOptions:
    prompt: str = "auto"  # preset name, template file, or "auto"
    reference: bool = False
    shots: int = 0
    shot_source: str = "same-question"
    seed: int = 0
    #: read the judge's replies with this registered parser instead of the template's (e.g. sciex-score)
    parser: str | None = None


class PromptBuilder:
    """Chooses the template for each question and renders messages."""

    def __init__(self, items: ItemSet, kind: str, options: PromptOptions) -> None:
        self.items = items
        self.kind = kind
        self.options = options
        self._fixed: PromptTemplate | None = None
        if options.parser is not None:
            if options.parser not in parsers:
                raise ConfigError(f"unknown parser '{options.parser}' (known: {', '.join(parsers.names())})")
            if kind != "individual":
                raise ConfigError("--parser applies to individual grading only")
        if options.prompt != "auto" and options.prompt not in FAMILIES:
            self._fixed = get_template(options.prompt)
            if self._fixed.kind != kind:
                raise ConfigError(
                    f"prompt '{options.prompt}' is a {self._fixed.kind} template; this method needs {kind}"
                )
        if options.shots and kind != "individual":
            raise ConfigError("few-shot examples are supported for individual grading only")

    def template_for(self, q: Question) -> PromptTemplate:
        if self._fixed is not None:
            t = self._fixed
        else:
            t = get_template(
                auto_preset(
                    self.kind,
                    language=q.language,
                    task=q.task,
                    reference=self.options.reference and q.reference is not None,
                    shots=self.options.shots,
                    family=self.options.prompt,
                )
            )
        if self.options.parser is not None:
            t = replace(t, parser=self.options.parser)
        if self.options.shots and not t.uses_examples:
            raise ConfigError(f"prompt '{t.name}' has no {{examples}} placeholder; few-shot needs e.g. sciex-en")
        return t

    def _values(self, q: Question, t: PromptTemplate) -> dict[str, str]:
        if t.uses_reference and not q.reference:
            raise ConfigError(f"prompt '{t.name}' needs a reference answer; question '{q.id}' has none")
        return {
            "question": q.text,
            "max_points": fmt_points(q.max_points),
            "reference": q.reference or "",
            "examples": "",
        }

    def _messages(self, t: PromptTemplate, values: dict[str, str], q: Question) -> list[Message]:
        msgs: list[Message] = []
        if t.system:
            msgs.append(Message(role="system", content=render(t.system, values)))
        msgs.append(Message(role="user", content=render(t.template, values), images=tuple(q.images)))
        return msgs

    def _examples(self, t: PromptTemplate, shots: list[Shot]) -> str:
        if not shots:
            return ""
        blocks = []
        for s in shots:
            sq = self.items.question_of(s.answer)
            blocks.append(
                render(
                    t.example,
                    {
                        "question": sq.text,
                        "answer": s.answer.text,
                        "reference": sq.reference or "",
                        "max_points": fmt_points(sq.max_points),
                        "grade": fmt_points(s.grade),
                    },
                )
            )
        return t.examples_header + "".join(blocks)

    def individual(self, a: Answer) -> tuple[PromptTemplate, list[Message], list[str]]:
        """Template, messages and the ids of the few-shot answers used."""
        q = self.items.question_of(a)
        t = self.template_for(q)
        values = self._values(q, t)
        shots = select_shots(self.items, a, self.options.shots, self.options.shot_source, self.options.seed)
        values["examples"] = self._examples(t, shots)
        values["answer"] = a.text
        return t, self._messages(t, values, q), [s.answer.id for s in shots]

    def pairwise(self, first: Answer, second: Answer) -> tuple[PromptTemplate, list[Message]]:
        q = self.items.question_of(first)
        t = self.template_for(q)
        values = self._values(q, t)
        values["answer1"] = first.text
        values["answer2"] = second.text
        return t, self._messages(t, values, q)


def parser_for(t: PromptTemplate, max_points: float) -> Callable[[str], Parsed]:
    fn = parsers.get(t.parser)
    return lambda text: fn(text, max_points)


def reminder_for(t: PromptTemplate, max_points: float) -> Callable[[str], str] | None:
    if not t.reminder:
        return None
    return lambda error: render(t.reminder, {"error": error, "max_points": fmt_points(max_points)})
