"""What a grading method is, its typed per-answer results, and the registry methods are found in by name."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SerializerFunctionWrapHandler,
    computed_field,
    model_serializer,
    model_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass

from knockout._bounds import Name, bounded
from knockout._registry import Registry
from knockout.data._records import ItemSet
from knockout.engine import CallTrace
from knockout.errors import ConfigError
from knockout.guard import GuardDetails
from knockout.prompts._builder import PromptBuilder, PromptOptions

if TYPE_CHECKING:
    from knockout.runs import RunContext


@pydantic_dataclass(config=ConfigDict(allow_inf_nan=False))
class MethodOptions(PromptOptions):
    """Prompt options plus method knobs (each method reads the ones it knows)."""

    debias: bool = False
    extra: dict[Name, Any] = field(default_factory=dict)
    #: the persuasion guard of individual grading (knockout.guard, docs/injection.md): auto (on where the verdict
    #: is read from token probabilities), on, off; a run records the mode it used
    guard: Name = "auto"
    #: how a pairwise match is decided (docs/methods.md#soft-preferences): ``letter`` (the grades' verdict: the
    #: higher grade wins) or ``soft`` (the probability that the first answer is better, from the judge's token
    #: probabilities, both orders averaged when debiased; needs the ``expected`` verdict slot)
    preference: Name = "letter"
    #: reference anchors of individual grading (knockout.methods._anchors, docs/methods.md#reference-anchors):
    #: off or on (two judge calls per question: its reference and a null answer graded, each grade read on them)
    anchors: Name = "off"
    #: the readers of an individual grade (knockout.grading, docs/methods.md#the-grade-model): ``auto`` (two where
    #: the encoder is installed and the judge is not a simulation), ``two`` (the judge's and the other readings made
    #: points by the grade model), ``judge`` (the judge alone); a run records the mode it used (and, with two, the
    #: grade model's name and digest)
    readers: Name = "auto"

    def record(self) -> dict[str, Any]:
        """As :meth:`PromptOptions.record`; ``guard`` only when on, ``anchors`` only when not off, ``readers`` only
        when two and ``preference`` only when soft, so that the runs made before they existed (and every run without
        them) keep their ids."""
        d = super().record()
        if d.get("guard") != "on":
            d.pop("guard", None)
        if d.get("anchors") == "off":
            d.pop("anchors", None)
        if d.get("readers") != "two":
            d.pop("readers", None)
        else:  # the grades are the model's: another model, another run
            from knockout.grading import default_model

            d["grade_model"] = f"{default_model().name}@{default_model().digest}"
        if d.get("preference") == "letter":
            d.pop("preference", None)
        return d

    @model_validator(mode="wrap")
    @classmethod
    def _bounds(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return bounded(data, handler)  # a value out of bounds: a ConfigError naming the field


# -- typed per-answer details (stored as JSON in results.details) ---------------------------------
class CriterionVerdict(BaseModel):
    """The judge's verdict on one criterion of a criteria rubric: the points it gave out of the criterion's."""

    model_config = ConfigDict(extra="forbid")

    criterion: str
    points: float
    awarded: float


class AnchoredDetails(BaseModel):
    """An answer graded on its question's reference anchors (:mod:`knockout.methods._anchors`): the judge's own
    grade and the anchors' grades (points), the scale between them; or why the anchors were not used."""

    model_config = ConfigDict(extra="forbid")

    grade_raw: float | None = None
    reference: float | None = None
    null: float | None = None
    scale: float | None = None
    #: points added to the judge's grade (``--anchors shift``: max points minus the reference's grade)
    shift: float | None = None
    error: str | None = None


class ReadersDetails(BaseModel):
    """What an individual grade rests on (:mod:`knockout.grading`): the judge's grade (points), every reading of the
    answer, the grade model (name, digest) and the pattern of readings it read, the model's grade before the cap
    (``full``), the meaning side's grade (``meaning``) and the grade (``combined``, points), and whether the cap bound
    (``disagree``); or why the grade is the judge's alone."""

    model_config = ConfigDict(extra="forbid")

    judge: float | None = None
    similarity: float | None = None
    readings: dict[str, float | None] | None = None
    model: str | None = None
    model_sha: str | None = None
    pattern: str | None = None
    full: float | None = None
    meaning: float | None = None
    combined: float | None = None
    disagree: bool = False
    encoder: str | None = None
    why_not: str | None = None


class IndividualDetails(CallTrace):
    """Individual grading: the prompt used, the few-shot answers shown, and the call trace; graded by a
    criteria rubric, the verdict on each criterion (the grade is their sum)."""

    model_config = ConfigDict(extra="forbid")

    prompt: str
    shots: list[str] = Field(default_factory=list)
    #: ``--samples K``: every draw's grade (None: invalid) and the cache key of its first request; absent
    #: (and left out of the JSON) for a single draw
    draws: list[float | None] | None = None
    draw_keys: list[str | None] | None = None
    criteria: list[CriterionVerdict] | None = None
    #: the persuasion guard's detection and, for a flagged answer, the grade without the parts aimed at the grader
    guard: GuardDetails | None = None
    #: reference anchors (``--anchors``): the grade before anchoring and the question's anchors
    anchored: AnchoredDetails | None = None
    #: the grade model (``--readers two``): the readings and the grade they make
    readers: ReadersDetails | None = None

    @model_serializer(mode="wrap")
    def _drop_single_draw(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for k in ("draws", "draw_keys", "criteria", "guard", "anchored", "readers"):
            if out.get(k, 0) is None:
                del out[k]
        return out


class MatchRef(BaseModel):
    """A match as one of its players sees it; the match itself (both games, raw replies) is stored once."""

    model_config = ConfigDict(extra="forbid")

    match_id: str
    step: int
    opponent: str
    score: float | None
    opponent_score: float | None
    valid: bool
    partial: bool
    #: ``--preference soft``: the probability that this answer is the better one (both orders averaged when
    #: debiased; docs/methods.md#soft-preferences); absent otherwise
    preference: float | None = None

    @model_serializer(mode="wrap")
    def _drop_no_preference(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("preference", 0) is None:  # letters: the details stay as they were before soft preferences
            del out["preference"]
        return out


class PairwiseDetails(BaseModel):
    """Pairwise methods: every grade the answer received (one per valid match) and the matches it played."""

    model_config = ConfigDict(extra="forbid")

    scores: list[float]
    matches: list[MatchRef]
    error: str | None = None


class KnockoutDetails(PairwiseDetails):
    champion: bool
    eliminated_round: int | None
    rounds_played: int
    byes: list[int]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def groups(self) -> dict[str, str]:
        """Breakdown groups this method adds to reports (``knockout report --by round``)."""
        return {"round": "winner" if self.eliminated_round is None else str(self.eliminated_round)}


class RankDetails(PairwiseDetails):
    rank: int


class RatingDetails(PairwiseDetails):
    elo: float | None = None
    elo_std: float | None = None
    rank_elo: int | None = None
    bt: float | None = None
    rank_bt: int | None = None


DETAILS: dict[str, type[BaseModel]] = {
    "individual": IndividualDetails,
    "knockout": KnockoutDetails,
    "pairwise": PairwiseDetails,
    "allpairs": RatingDetails,
    "heapsort": RankDetails,
    "window": RankDetails,
}


@dataclass(slots=True)
class AnswerResult:
    answer_id: str
    question_id: str
    score: float | None  # None when no valid grade was obtained
    valid: bool
    details: dict[str, Any] = field(default_factory=dict)  # the JSON form of the method's details model


@dataclass
class ResultCounts:
    """What a grading run's summary counts of its results' details (the readers, the persuasion guard, the reference
    anchors), added up as the results are made: a run in chunks adds each chunk's results before it lets their
    details go, so the summary keeps counters, not a record per answer (issue 59: 1M answers in 1 GB)."""

    #: answers with a valid grade: their grade the grade model's (``combined``), the judge's alone, and why not
    combined: int = 0
    judge_only: int = 0
    disagree: int = 0
    why_not: dict[str, int] = field(default_factory=dict)
    #: the grade model's ``name@digest`` (the first answer that names one)
    model: str | None = None
    #: the persuasion guard's records (every answer, valid or not)
    checked: int = 0
    flagged: int = 0
    lowered: int = 0
    graded_whole: int = 0
    guard_errors: int = 0
    #: each anchored question's last record: (read on its anchors, its anchor reply unread)
    anchored: dict[str, tuple[bool, bool]] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Iterable[AnswerResult]) -> ResultCounts:
        counts = cls()
        counts.add(results)
        return counts

    def add(self, results: Iterable[AnswerResult]) -> None:
        """Count ``results`` (with their full details)."""
        for r in results:
            d = r.details
            if r.valid:
                rd = d.get("readers") or {}
                if rd.get("combined") is None:
                    self.judge_only += 1
                else:
                    self.combined += 1
                self.disagree += bool(rd.get("disagree"))
                if why := rd.get("why_not"):
                    self.why_not[why] = self.why_not.get(why, 0) + 1
                if self.model is None and rd.get("model"):
                    self.model = f"{rd['model']}@{rd.get('model_sha')}"
            g = d.get("guard") or {}
            self.checked += bool(g)
            self.flagged += bool(g.get("flagged"))
            self.lowered += (g.get("grade_stripped") is not None and g.get("grade_full") is not None
                             and g["grade_stripped"] < g["grade_full"])
            self.graded_whole += bool(g.get("graded_whole"))
            self.guard_errors += bool(g.get("error"))
            if a := d.get("anchored"):
                self.anchored[r.question_id] = ("scale" in a, "error" in a)  # a question's last record counts

    def became_valid(self, n: int) -> None:
        """``n`` answers without a valid grade got one afterwards (a later judge draw, ``--samples``): their grade
        is the judge's alone."""
        self.judge_only += n


@dataclass
class MethodResult:
    #: one per answer (a run in chunks: :class:`knockout.methods._individual.ChunkedResults`, read-only)
    results: Sequence[AnswerResult]
    info: dict[str, Any] = field(default_factory=dict)
    #: the method wrote its results itself (in chunks, as they were done)
    written: bool = False
    #: the summary's counts of the results' details, when the method counted them as it made them (a run in
    #: chunks: its results keep only what the trust marks need); else counted from ``results``
    counts: ResultCounts | None = None


class Method:
    """Base of grading methods: options, validation before a run is written, and ``run``.

    A method asks the engine (``ctx.engine``) and returns one :class:`AnswerResult` per answer; pairwise
    methods also write the matches of each step through ``ctx.write_matches``.
    """

    name: ClassVar[str] = ""
    #: "individual" or "pairwise": which prompt kind the method renders
    prompt_kind: ClassVar[str] = "individual"
    #: the method's options (``--method-opt key=value``) with their defaults, which give their types
    defaults: ClassVar[dict[str, Any]] = {}
    #: the model of its per-answer details
    details_model: ClassVar[type[BaseModel]] = BaseModel

    def options(self, options: MethodOptions) -> dict[str, Any]:
        """``--method-opt`` values checked against :attr:`defaults`, typed like them."""
        opts = method_opts(self.name, options.extra, self.defaults)
        self.check_options(opts)
        return opts

    def check_options(self, opts: dict[str, Any]) -> None:
        """Validate option values (ranges)."""

    def check(self, items: ItemSet, options: MethodOptions) -> None:
        """Everything that can be wrong before a judge is asked: options and one rendered prompt per question."""
        self.options(options)
        from knockout.prompts._slots import check_preference

        check_preference(options.preference, self.prompt_kind == "pairwise", options.verdict)
        builder = PromptBuilder(items, self.prompt_kind, options)
        for qid in items.question_ids():
            first = items.indices_for(qid)[:2]  # only the answers rendered are built
            if self.prompt_kind == "pairwise":
                if len(first) >= 2:
                    builder.pairwise(items.answer_at(first[0]), items.answer_at(first[1]))
            else:
                builder.individual(items.answer_at(first[0]))
        if self.prompt_kind == "individual" and options.shots > 0:
            builder.check_shots(list(items))

    def verdict_reads(self, items: ItemSet, options: MethodOptions) -> dict[str, int]:
        """Per verdict mode, how many questions have their verdicts read that way (the slot mode, ``text``):
        :meth:`knockout.prompts._builder.PromptBuilder.verdict_reads` with this method's prompts."""
        return PromptBuilder(items, self.prompt_kind, options).verdict_reads()

    async def run(self, items: ItemSet, ctx: RunContext, options: MethodOptions) -> MethodResult:
        raise NotImplementedError


def check_method_name(name: str) -> None:
    if name not in methods:
        raise ConfigError(f"unknown method '{name}' (known: {', '.join(methods.names())})")


methods: Registry[type[Method]] = Registry("method", group="knockout.methods")
methods.add("individual", "knockout.methods._individual:Individual", "grade each answer on its own")
methods.add("knockout", "knockout.methods._knockout:Knockout", "knockout tournament of question-level matches")
methods.add("pairwise", "knockout.methods._pairwise:Pairwise", "one round of question-level matches")
methods.add("allpairs", "knockout.methods._allpairs:AllPairs", "every pair once; Elo and Bradley-Terry")
methods.add("heapsort", "knockout.methods._sorting:Heapsort", "PRP heapsort with question-level matches")
methods.add("window", "knockout.methods._sorting:SlidingWindow", "PRP sliding-window bubble passes")


def method_opts(method: str, extra: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Validate ``--method-opt`` values against the method's known options, typed like their defaults."""
    unknown = sorted(set(extra) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        raise ConfigError(f"method '{method}' has no option '{unknown[0]}' (known: {known})")
    out = dict(defaults)
    for k, v in extra.items():
        kind: type = type(defaults[k])
        if isinstance(v, str) and (v != v.strip() or (kind in (int, float) and (not v.isascii() or "_" in v))
                                   or (kind is int and not v.removeprefix("-").isdigit())):
            # Python's int() and float() would take " 5", "5_0" and other scripts' digits: refused as written
            raise ConfigError(f"method '{method}': option {k}={v!r} must be {kind.__name__}, written without "
                              "spaces, in ASCII digits")
        try:
            value = kind(v)
        except (TypeError, ValueError):
            raise ConfigError(f"method '{method}': option {k}={v!r} must be {kind.__name__}") from None
        out[k] = value
    return out
