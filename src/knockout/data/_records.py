"""Records: questions, answers, pairs and the item sets that hold them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from knockout._bounds import JsonObject, Name, NonEmptyText, Number, Selection, Text
from knockout.errors import InputError


class Criterion(BaseModel):
    """One criterion of a criteria rubric: what an answer must do, and the points it is worth."""

    model_config = ConfigDict(extra="forbid")

    criterion: NonEmptyText
    points: Number

    @field_validator("points")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be a number > 0")
        return v


#: A question's rubric: a text (shown to the judge as written) or criteria with points (the judge grades
#: each criterion; the grade is the sum).
Rubric = NonEmptyText | list[Criterion]


class Question(BaseModel):
    """A question (or MT source segment) that several answers respond to."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    text: NonEmptyText
    reference: Text | None = None
    max_points: Number = 1.0
    language: Name = "en"
    difficulty: Name | None = None
    exam_id: Name | None = None
    images: list[Text] = Field(default_factory=list)
    # "points": human scores are on 0..max_points (RMSE is meaningful);
    # anything else (e.g. "mqm") means another scale: only correlations apply.
    human_scale: Name = "points"
    task: Name = "exam"  # "exam" (graded answers) or "mt" (translations)
    meta: JsonObject = Field(default_factory=dict)
    #: a text, or criteria whose points add up to max_points (docs/rubrics.md)
    rubric: Rubric | None = None

    @field_validator("max_points")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be a number > 0")
        return v

    @field_validator("rubric", mode="before")
    @classmethod
    def _rubric_shape(cls, v: Any) -> Any:
        """A text, or a list of criteria, each checked here so that an error names the criterion."""
        if v is None or isinstance(v, str):
            return v
        if not isinstance(v, list):
            raise ValueError("must be a text or a list of {criterion, points} objects")
        out = []
        for i, c in enumerate(v, 1):
            try:
                out.append(c if isinstance(c, Criterion) else Criterion.model_validate(c))
            except ValidationError as e:
                err = e.errors()[0]
                where = ".".join(str(x) for x in err["loc"])
                msg = str(err["msg"]).removeprefix("Value error, ")
                raise ValueError(f"criterion {i}{' ' + where if where else ''}: {msg}") from None
        return out

    @field_validator("rubric")
    @classmethod
    def _criteria_add_up(cls, v: Rubric | None, info: ValidationInfo) -> Rubric | None:
        if isinstance(v, list):
            if not v:
                raise ValueError("a criteria rubric needs at least one criterion")
            total = sum(c.points for c in v)
            max_points = info.data.get("max_points")
            if max_points is not None and abs(total - max_points) > 1e-9:
                raise ValueError(f"the criteria's points add up to {total:g}, not to max_points {max_points:g}")
        return v

    @property
    def criteria(self) -> list[Criterion]:
        """The criteria of a criteria rubric (none for a text rubric or none)."""
        return self.rubric if isinstance(self.rubric, list) else []


class Answer(BaseModel):
    """One examinee's (or system's) answer to a question, with optional human grades."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    question_id: Name
    examinee: Name | None = None
    text: NonEmptyText
    human_scores: dict[Name, Number] = Field(default_factory=dict)
    meta: JsonObject = Field(default_factory=dict)

    @property
    def human_score(self) -> float | None:
        """Mean over graders, or None when no human grade is present."""
        if not self.human_scores:
            return None
        return sum(self.human_scores.values()) / len(self.human_scores)


def _compact(a: Answer, question: Question, shared: dict[Any, Any]) -> None:
    """Share what a million answers repeat (a large item set is held in memory): the question id string of
    the question object, one string per examinee name, and one pydantic fields-set object per distinct
    set of given fields (pydantic gives each instance its own set, about 700 bytes; knockout never dumps
    answers with ``exclude_unset``).  The values are equal, so nothing else changes."""
    d = a.__dict__
    d["question_id"] = question.id
    if a.examinee is not None:
        d["examinee"] = shared.setdefault(("examinee", a.examinee), a.examinee)
    fields = a.__pydantic_fields_set__
    key = ("fields", frozenset(fields))
    if key not in shared:
        shared[key] = set(fields)
    object.__setattr__(a, "__pydantic_fields_set__", shared[key])


class ItemSet:
    """Questions and their answers, validated as a whole."""

    def __init__(
        self,
        questions: Iterable[Question],
        answers: Iterable[Answer],
        *,
        source: str = "<memory>",
    ) -> None:
        self.source = source
        self.questions: dict[str, Question] = {}
        for q in questions:
            if q.id in self.questions:
                raise InputError("duplicate question id", file=source, record=q.id, field="id")
            self.questions[q.id] = q
        self.answers: list[Answer] = []
        seen: set[str] = set()
        shared: dict[Any, Any] = {}
        for a in answers:
            if a.id in seen:
                raise InputError("duplicate answer id", file=source, record=a.id, field="id")
            seen.add(a.id)
            question = self.questions.get(a.question_id)
            if question is None:
                raise InputError(
                    f"answer refers to unknown question '{a.question_id}'",
                    file=source,
                    record=a.id,
                    field="question_id",
                )
            if question.human_scale == "points":
                for grader, s in a.human_scores.items():
                    if s < 0 or s > question.max_points + 1e-9:
                        raise InputError(
                            f"human score {s:g} of grader '{grader}' is outside 0..{question.max_points:g}",
                            file=source,
                            record=a.id,
                            field="human_scores",
                        )
            _compact(a, question, shared)
            self.answers.append(a)
        self._by_question: dict[str, list[Answer]] = {}
        for a in self.answers:
            self._by_question.setdefault(a.question_id, []).append(a)
        self._answers_by_id = {a.id: a for a in self.answers}

    def __len__(self) -> int:
        return len(self.answers)

    def __iter__(self) -> Iterator[Answer]:
        return iter(self.answers)

    def answer(self, answer_id: str) -> Answer:
        return self._answers_by_id[answer_id]

    def question_of(self, answer: Answer) -> Question:
        return self.questions[answer.question_id]

    def answers_for(self, question_id: str) -> list[Answer]:
        return list(self._by_question.get(question_id, []))

    def question_ids(self) -> list[str]:
        """Questions that have at least one answer, in file order."""
        return [qid for qid in self.questions if qid in self._by_question]

    def has_human_scores(self) -> bool:
        return any(a.human_scores for a in self.answers)

    def subset(
        self, *, limit: int | None = None, answers_per_question: int | None = None
    ) -> ItemSet:
        """The first ``limit`` questions, each with its first ``answers_per_question`` answers."""
        Selection(limit=limit, answers_per_question=answers_per_question)  # the bounds: a ValidationError
        qids = self.question_ids()
        if limit is not None:
            qids = qids[:limit]
        answers: list[Answer] = []
        for qid in qids:
            group = self.answers_for(qid)
            if answers_per_question is not None:
                group = group[:answers_per_question]
            answers.extend(group)
        return ItemSet([self.questions[q] for q in qids], answers, source=self.source)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot (stored with every run, so reports need no data file)."""
        return {
            "source": self.source,
            "questions": [q.model_dump(mode="json") for q in self.questions.values()],
            "answers": [a.model_dump(mode="json") for a in self.answers],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemSet:
        return cls(
            [Question(**q) for q in data["questions"]],
            [Answer(**a) for a in data["answers"]],
            source=str(data.get("source", "<store>")),
        )

    def fingerprint(self) -> str:
        """A hash of the content, used in run identities (computed once per item set)."""
        cached: str | None = getattr(self, "_fingerprint", None)
        if cached is not None:
            return cached
        h = hashlib.sha256()
        for q in self.questions.values():
            d = q.model_dump()
            if d["rubric"] is None:  # a question without a rubric hashes as before rubrics existed
                del d["rubric"]
            h.update(json.dumps(d, sort_keys=True).encode())
        for a in self.answers:
            h.update(json.dumps(a.model_dump(), sort_keys=True).encode())
        self._fingerprint: str = h.hexdigest()[:16]
        return self._fingerprint


class PairItem(BaseModel):
    """A side-by-side item: one question, two answers, optional human verdicts.

    ``label`` values are free-form per source; loaders document their mapping.
    """

    model_config = ConfigDict(extra="forbid")

    id: Name
    question: Text
    answer_a: Text
    answer_b: Text
    system_a: Name | None = None
    system_b: Name | None = None
    reference: Text | None = None
    human_verdicts: dict[Name, Name] = Field(default_factory=dict)
    meta: JsonObject = Field(default_factory=dict)


class ScoredText(BaseModel):
    """A single text with a human score (e.g. SummEval, OpenMEVA)."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    text: Text
    human_score: Number | None = None
    meta: JsonObject = Field(default_factory=dict)
