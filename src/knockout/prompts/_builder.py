"""Turn records into judge messages with a template (preset or user file)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any

from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from knockout._bounds import MAX_SHOTS, Int, Name, Spec, bounded
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.judges._slot import MODES, VERDICTS, Slot
from knockout.prompts._fewshot import select_shots
from knockout.prompts._parsers import Parsed, parsers
from knockout.prompts._render import (
    DEFAULT_QUOTING,
    Rendered,
    get_quoting,
    judge_messages,
    own_verdict,
    takes_criteria,
)
from knockout.prompts._slots import SlotParse, slot_for
from knockout.prompts._templates import FAMILIES, PromptTemplate, auto_preset, fmt_points, get_template, render


@pydantic_dataclass(config=ConfigDict(allow_inf_nan=False))
class PromptOptions:
    """Prompt options (a pydantic dataclass: the bounds are checked however it is made)."""

    prompt: Spec = "auto"  # preset name, template file, or "auto"
    reference: bool = False
    shots: int = Field(default=0, ge=0, le=MAX_SHOTS)
    shot_source: Name = "same-question"
    #: go on when the data has fewer than ``shots`` examples for an answer (each answer's examples are
    #: recorded); without it such a run is refused before it starts
    allow_fewer_shots: bool = False
    seed: Int = 0
    #: how data texts are shown to the judge (knockout.prompts._render.QUOTINGS; docs/injection.md)
    quoting: Name = DEFAULT_QUOTING
    #: read the judge's replies with this registered parser instead of the template's (e.g. sciex-score)
    parser: Spec | None = None
    #: questions' rubrics (:data:`RUBRIC_MODES`, docs/rubrics.md): auto (a text rubric shown in {rubric}, a
    #: criteria rubric graded per criterion by individual grading), text (every rubric shown in {rubric},
    #: one grade), off (rubrics ignored: the prompts of questions without one)
    rubric: Name = "auto"
    #: how the judge's verdict is read (knockout.judges._slot.VERDICTS, docs/methods.md#the-verdict-slot): auto
    #: (the backend's best verdict slot, else free text), expected (token probabilities), constrained (a
    #: grammar or schema of the allowed values), text (the free text, read by the copy-checking parsers); a
    #: run records the mode it used
    verdict: Name = "auto"
    #: the slot mode in ``verdict`` was named by the user (``--verdict expected|constrained``), not taken by
    #: ``auto``: templates whose slot ``auto`` leaves off (``slot_auto = false``) use it too; set by the run
    verdict_named: bool = False

    @model_validator(mode="wrap")
    @classmethod
    def _bounds(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return bounded(data, handler)  # a value out of bounds: a ConfigError naming the field

    def record(self) -> dict[str, Any]:
        """The options as a run records them (its identity and configuration): ``allow_fewer_shots`` only when
        set, so that a run without it keeps the id it had before the option existed."""
        d = asdict(self)
        if not d.get("allow_fewer_shots"):
            d.pop("allow_fewer_shots", None)
        if d.get("verdict") == "text":  # free text, as every run before verdict slots: the run ids made then stand
            d.pop("verdict", None)
        if not d.get("verdict_named") or "verdict" not in d:  # only when a named slot mode changes what is read
            d.pop("verdict_named", None)
        return d


#: what each shot source needs, for the refusal's one line
_SHOT_NEEDS = {
    "same-question": "graded answers to the same question by other examinees",
    "same-exam": "graded answers to other questions of the same exam by distinct other examinees",
    "other-exam": "graded answers in another exam of language '{language}' by distinct other examinees",
}


RUBRIC_MODES = {
    "auto": "a text rubric shown in {rubric}; a criteria rubric graded per criterion (individual grading: "
    "the criteria preset, the grade is the sum), listed in {rubric} by pairwise methods",
    "text": "every rubric shown in {rubric} (criteria listed with their points), one grade as without a rubric",
    "off": "rubrics ignored: every prompt as for a question without one",
}
#: how a criterion is shown, by language: its number, its points, its text
CRITERION_LINES = {"en": ("Criterion {n} ({points} {unit}): {text}", "point", "points"),
                   "de": ("Kriterium {n} ({points} {unit}): {text}", "Punkt", "Punkte")}


def rubric_text(q: Question, language: str = "en") -> str:
    """A question's rubric as shown in ``{rubric}``: a text as written; criteria one per line, numbered, with
    their points (``Criterion 1 (2 points): ...``, the label the criteria parser reads); empty without one."""
    if q.rubric is None:
        return ""
    if isinstance(q.rubric, str):
        return q.rubric
    line, one, many = CRITERION_LINES.get(language[:2].lower(), CRITERION_LINES["en"])
    return "\n".join(line.format(n=i, points=fmt_points(c.points), unit=one if c.points == 1 else many,
                                 text=c.criterion) for i, c in enumerate(q.rubric, 1))


class PromptBuilder:
    """Chooses the template for each question and renders messages."""

    def __init__(self, items: ItemSet, kind: str, options: PromptOptions) -> None:
        self.items = items
        self.kind = kind
        self.options = options
        self._fixed: PromptTemplate | None = None
        get_quoting(options.quoting)  # an unknown name fails here, before any request
        if options.verdict not in VERDICTS:
            raise ConfigError(f"unknown verdict mode '{options.verdict}' (known: {', '.join(VERDICTS)})")
        #: the slot mode this run's requests carry (resolved from ``auto`` by the run: None is free text)
        self.slot_mode = options.verdict if options.verdict in MODES else None
        if options.rubric not in RUBRIC_MODES:
            raise ConfigError(f"unknown rubric mode '{options.rubric}' (known: {', '.join(RUBRIC_MODES)})")
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
            try:
                name = auto_preset(
                    self.kind,
                    language=q.language,
                    task=q.task,
                    reference=self.options.reference and q.reference is not None,
                    shots=self.options.shots,
                    family=self.options.prompt,
                    criteria=self.options.rubric == "auto" and bool(q.criteria) and self.options.parser is None,
                    slot=self.slot_mode is not None and self.options.parser is None,
                )
            except ConfigError as e:
                raise ConfigError(f"question '{q.id}': {e}") from None
            t = get_template(name)
        if self.options.parser is not None:
            t = replace(t, parser=self.options.parser)
        if self.options.shots and not t.uses_examples:
            raise ConfigError(f"prompt '{t.name}' has no {{examples}} placeholder; few-shot needs e.g. sciex-en")
        if takes_criteria(parsers.get(t.parser)) and not self.criteria(q):
            raise ConfigError(f"prompt '{t.name}' grades per criterion (parser '{t.parser}'); question '{q.id}' has "
                              "no criteria rubric" + (" (--rubric off)" if q.criteria else ""))
        return t

    def criteria(self, q: Question) -> list[float]:
        """The points of each criterion of the question's criteria rubric, as this run sees it."""
        return [] if self.options.rubric == "off" else [c.points for c in q.criteria]

    def _values(self, q: Question, t: PromptTemplate) -> dict[str, str]:
        if t.uses_reference and not q.reference:
            raise ConfigError(f"prompt '{t.name}' needs a reference answer; question '{q.id}' has none")
        return {
            "question": q.text,
            "max_points": fmt_points(q.max_points),
            "reference": q.reference or "",
            "rubric": "" if self.options.rubric == "off" else rubric_text(q, t.language),
        }

    def check_shots(self, answers: Sequence[Answer]) -> None:
        """Refuse, in one line, a few-shot run in which some answer would get fewer than ``shots`` examples,
        unless ``allow_fewer_shots`` (then each answer's examples are recorded with its result)."""
        k = self.options.shots
        if k <= 0 or self.options.allow_fewer_shots:
            return
        short = []
        for a in answers:
            n = len(select_shots(self.items, a, k, self.options.shot_source, self.options.seed))
            if n < k:
                short.append((a, n))
        if short:
            a, n = short[0]
            q = self.items.question_of(a)
            need = _SHOT_NEEDS.get(self.options.shot_source, "examples").format(language=q.language)
            raise ConfigError(
                f"--shots {k} --shot-source {self.options.shot_source}: {len(short)} of {len(answers)} answers "
                f"would get fewer examples (first: '{a.id}' gets {n}; it needs {need}); pass --allow-fewer-shots "
                "(experiment files: allow_fewer_shots = true) to grade with fewer, recorded per answer, or lower "
                "--shots")

    def read(self, t: PromptTemplate, q: Question, rendered: Rendered, criteria: Sequence[float] = ()
             ) -> tuple[Callable[[str], Parsed], Slot | None, str | None]:
        """How one request's verdict is read: (parse, slot, slot mode).  A template with a slot, in a run whose
        judge fills one, reads the slot's verdict; any other, the template's parser on the free text."""
        slot = self.slot(t, q, criteria)
        if slot is not None:
            return SlotParse(slot, q.max_points), slot, self.slot_mode
        return parser_for(t, q.max_points, rendered.shown, criteria), None, None

    def slot(self, t: PromptTemplate, q: Question, criteria: Sequence[float] | None = None) -> Slot | None:
        """The verdict slot of ``q``'s requests rendered with ``t`` (None: the verdict is read from free text: no
        slot mode in this run, a parser chosen by ``--parser``, a template without a slot, or one whose slot
        ``--verdict auto`` leaves off, ``slot_auto = false``, in a run whose slot mode was not named)."""
        if self.slot_mode is None or self.options.parser is not None or not (t.slot_auto or self.options.verdict_named):
            return None
        return slot_for(t, q.max_points, self.criteria(q) if criteria is None else criteria)

    def verdict_reads(self) -> dict[str, int]:
        """How many questions (those with answers) have their verdicts read in this run's slot mode and how many
        from free text (``text``): what a run says it read, per question, never the slot for a question whose
        prompt has none."""
        counts: dict[str, int] = {}
        for qid in self.items.question_ids():
            q = self.items.questions[qid]
            mode = self.slot_mode if self.slot(self.template_for(q), q) is not None else "text"
            counts[mode or "text"] = counts.get(mode or "text", 0) + 1
        return counts

    def individual(self, a: Answer) -> tuple[PromptTemplate, Rendered, list[str]]:
        """Template, rendered request and the ids of the few-shot answers used."""
        q = self.items.question_of(a)
        t = self.template_for(q)
        shots = select_shots(self.items, a, self.options.shots, self.options.shot_source, self.options.seed)
        examples = []
        for s in shots:
            sq = self.items.question_of(s.answer)
            examples.append({"question": sq.text, "answer": s.answer.text, "reference": sq.reference or "",
                             "max_points": fmt_points(sq.max_points), "grade": fmt_points(s.grade)})
        values = {**self._values(q, t), "answer": a.text}
        rendered = judge_messages(t, values, examples=examples, images=q.images, quoting=self.options.quoting)
        return t, rendered, [s.answer.id for s in shots]

    def pairwise(self, first: Answer, second: Answer) -> tuple[PromptTemplate, Rendered]:
        q = self.items.question_of(first)
        t = self.template_for(q)
        values = {**self._values(q, t), "answer1": first.text, "answer2": second.text}
        return t, judge_messages(t, values, images=q.images, quoting=self.options.quoting)


def parser_for(t: PromptTemplate, max_points: float, shown: Sequence[str] = (), criteria: Sequence[float] = ()
               ) -> Callable[[str], Parsed]:
    """The template's parser for one request; ``shown``: the data texts it showed (``Rendered.shown``);
    ``criteria``: the points of the question's criteria (:meth:`PromptBuilder.criteria`), for a parser that
    grades per criterion."""
    return own_verdict(parsers.get(t.parser), max_points, shown, criteria)


def reminder_for(t: PromptTemplate, max_points: float) -> Callable[[str], str] | None:
    if not t.reminder:
        return None
    return lambda error: render(t.reminder, {"error": error, "max_points": fmt_points(max_points)})
