"""Records: questions, answers, pairs and the item sets that hold them."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Annotated, Any, NamedTuple, overload

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from knockout._bounds import ExamName, JsonObject, Name, NonEmptyText, Number, Selection, Text, max_points_ok
from knockout.errors import ConfigError, InputError


def _positive(v: float) -> float:
    if v <= 0:
        raise ValueError("must be a number > 0")
    return v


#: a number > 0 (a criterion's points)
Positive = Annotated[Number, AfterValidator(_positive)]
#: a question's maximum points: > 0 and at most :data:`knockout._bounds.MAX_POINTS`
MaxPoints = Annotated[Number, AfterValidator(max_points_ok)]


class Criterion(BaseModel):
    """One criterion of a criteria rubric: what an answer must do, and the points it is worth."""

    model_config = ConfigDict(extra="forbid")

    criterion: NonEmptyText
    points: Positive


#: A question's rubric: a text (shown to the judge as written) or criteria with points (the judge grades
#: each criterion; the grade is the sum).
Rubric = NonEmptyText | list[Criterion]


class Question(BaseModel):
    """A question (or MT source segment) that several answers respond to."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    text: NonEmptyText
    reference: Text | None = None
    max_points: MaxPoints = 1.0
    language: Name = "en"
    difficulty: Name | None = None
    exam_id: ExamName | None = None
    images: list[Text] = Field(default_factory=list)
    # "points": human scores are on 0..max_points (RMSE is meaningful);
    # anything else (e.g. "mqm") means another scale: only correlations apply.
    human_scale: Name = "points"
    task: Name = "exam"  # "exam" (graded answers) or "mt" (translations)
    meta: JsonObject = Field(default_factory=dict)
    #: a text, or criteria whose points add up to max_points (docs/rubrics.md)
    rubric: Rubric | None = None

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


class AnswerFields(NamedTuple):
    """One answer given field by field, each field already checked as :class:`Answer` checks it (a table
    loader's row, :mod:`knockout.data._formats.table`): :meth:`ItemSet.from_records` stores it in its columns
    with no :class:`Answer` built.  ``fields`` is the fields-set the equal :class:`Answer` would have."""

    id: str
    question_id: str
    examinee: str | None
    text: str
    human_scores: dict[str, float]
    fields: frozenset[str]


_new = object.__new__
_set = object.__setattr__
_NAN = float("nan")
_SCALARS = (str, int, float, bool, type(None))


@dataclass
class AnswerColumns:
    """An item set's answers as columns (what a snapshot stores: :meth:`ItemSet.columns`,
    :meth:`ItemSet.from_columns`).  Per answer: ``ids``, ``text``, ``question`` (index into the set's
    questions), ``examinee`` (index into ``names``, -1: none), ``layout`` (index into ``layouts``: the graders
    of its human grades, in order), ``fields`` (index into ``fields_sets``: the fields the answer was given
    with); ``grades`` holds the human grades of every answer one after the other (as many as its layout has
    graders); ``meta`` the answers whose meta is not empty, by index."""

    ids: list[str]
    text: list[str]
    question: array[int]
    examinee: array[int]
    names: list[str]
    layout: array[int]
    layouts: list[tuple[str, ...]]
    grades: array[float]
    meta: dict[int, dict[str, Any]]
    fields: array[int]
    fields_sets: list[set[str]]


def _grade_top(question: Question) -> float | None:
    """The highest human grade a question admits (its max points, with a rounding margin), or None when its
    grades are on another scale (MQM, ranks) and not checked against a range."""
    return question.max_points + 1e-9 if question.human_scale == "points" else None


class _AnswerView(Sequence[Answer]):
    """An item set's answers as a read-only sequence: each :class:`Answer` is built when it is asked for
    (from the set's columns) and not kept; two views are equal when they hold equal answers."""

    __slots__ = ("_items",)

    def __init__(self, items: ItemSet) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items._ids)

    @overload
    def __getitem__(self, i: int) -> Answer: ...

    @overload
    def __getitem__(self, i: slice) -> list[Answer]: ...

    def __getitem__(self, i: int | slice) -> Answer | list[Answer]:
        if isinstance(i, slice):
            return [self._items.answer_at(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("answer index out of range")
        return self._items.answer_at(i % n if i < 0 else i)

    def __iter__(self) -> Iterator[Answer]:
        at = self._items.answer_at
        return (at(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self)} answers of {self._items.source}>"


class ItemSet:
    """Questions and their answers, validated as a whole.

    The questions are :class:`Question` objects (``questions``, by id).  The answers are held as columns
    (a million answers are read, judged and reported on without a million pydantic objects): ids, the
    question and examinee of each as an index, the texts, the human grades as numbers with one tuple of
    grader names per distinct layout, and ``meta`` only where it is not empty.  ``answers``, iteration,
    :meth:`answer`, :meth:`answers_for` and :meth:`answer_at` build an :class:`Answer` each time one is asked
    for, equal to the one given (same fields, same order of ``human_scores``), and keep none; the ``*_at``
    accessors read one field of the answer at an index without building it.
    """

    questions: dict[str, Question]
    answers: Sequence[Answer]

    def __init__(
        self,
        questions: Iterable[Question],
        answers: Iterable[Answer],
        *,
        source: str = "<memory>",
    ) -> None:
        self.source = source
        qlist = list(questions)
        self._start()
        for a in answers:
            self._add(a)
        self._finish(qlist)

    @classmethod
    def from_records(cls, records: Iterable[Question | Answer | AnswerFields], *,
                     source: str = "<memory>") -> ItemSet:
        """An item set from questions and answers in any order, read one by one (a loader streams its file
        through this: no list of answers is held; a table loader gives each answer as checked
        :class:`AnswerFields`, so no :class:`Answer` is built either).  The checks are those of the
        constructor, made when the records are all read, in the same order (questions first, then each
        answer)."""
        new = cls.__new__(cls)
        new.source = source
        qlist: list[Question] = []
        new._start()
        add, add_fields = new._add, new._add_fields
        for r in records:
            if type(r) is AnswerFields:
                add_fields(*r)
            elif isinstance(r, Answer):
                add(r)
            else:
                qlist.append(r)  # type: ignore[arg-type]
        new._finish(qlist)
        return new

    @classmethod
    def concat(cls, sets: Sequence[ItemSet], *, source: str) -> ItemSet:
        """The questions and answers of ``sets``, one after the other, as one set (checked as one: an id in two
        sets is an error), each answer read from its set's columns one at a time."""
        return cls.from_records(itertools.chain((q for s in sets for q in s.questions.values()),
                                                (a for s in sets for a in s)), source=source)

    def columns(self) -> AnswerColumns:
        """The answers as columns (the set's own: read them, do not change them)."""
        return AnswerColumns(self._ids, self._text, self._qi, self._ex, self._names, self._layout, self._layouts,
                             self._hvalues, self._meta, self._fset, self._fsets)

    @classmethod
    def from_columns(cls, questions: Iterable[Question], cols: AnswerColumns, *, source: str = "<memory>") -> ItemSet:
        """An item set from its questions and :meth:`columns` (as a snapshot stores them), taken over, not
        copied.  The checks are the constructor's (ids, questions, human grades in range), and the columns
        must agree in length: anything else is an error naming ``source``."""
        new = cls.__new__(cls)
        new.source = source
        qlist = list(questions)
        n = len(cols.ids)
        if not (len(cols.text) == len(cols.question) == len(cols.examinee) == len(cols.layout) == len(cols.fields)
                == n):
            raise InputError("answer columns of different lengths", file=source, field="answers")
        qids = [q.id for q in qlist]
        new._start()
        try:
            new._qid_of = [qids[k] for k in cols.question]
            widths = [len(g) for g in cols.layouts]
            hstart, at = array("q", bytes(8 * n)), 0
            hmean = array("d", bytes(8 * n))
            grades = cols.grades
            for i, k in enumerate(cols.layout):
                w = widths[k]
                hstart[i] = at
                hmean[i] = sum(grades[at:at + w]) / w if w else _NAN
                at += w
            names, fsets = cols.names, cols.fields_sets
            if at != len(grades) or min(cols.question, default=0) < 0 or min(cols.layout, default=0) < 0 or \
                    not -1 <= min(cols.examinee, default=-1) <= max(cols.examinee, default=-1) < max(len(names), 1) or \
                    max(cols.fields, default=0) >= max(len(fsets), 1):
                raise IndexError
        except IndexError:
            raise InputError("answer columns that do not fit together", file=source, field="answers") from None
        new._ids, new._text, new._ex, new._names = cols.ids, cols.text, cols.examinee, names
        new._layout, new._layouts, new._hstart = cols.layout, cols.layouts, hstart
        new._hvalues, new._hmean = grades, hmean
        new._meta, new._fset, new._fsets = cols.meta, cols.fields, fsets
        new._finish(qlist)
        return new

    # -- building ---------------------------------------------------------------------------------------
    def _start(self) -> None:
        self._ids: list[str] = []
        self._qid_of: list[str] = []  # while building: each answer's question id (one string per question)
        self._qi = array("i")  # each answer's question (index into _questions)
        self._ex = array("i")  # each answer's examinee (index into _names, -1: none)
        self._names: list[str] = []
        self._text: list[str] = []
        self._layout = array("i")  # each answer's human grade layout (index into _layouts)
        self._layouts: list[tuple[str, ...]] = []
        self._hstart = array("q")  # where each answer's human grades start in _hvalues
        self._hvalues = array("d")
        self._hmean = array("d")  # the mean human grade (NaN: none)
        self._meta: dict[int, dict[str, Any]] = {}  # the answers whose meta is not empty
        self._fset = array("B")  # each answer's pydantic fields-set (index into _fsets)
        self._fsets: list[set[str]] = []
        self._pos: dict[Any, int] = {}  # while building: examinee names, layouts, fields-sets, question ids

    def _intern(self, kind: str, value: Any, table: list[Any], make: Callable[[Any], Any] | None = None) -> int:
        key = (kind, value)
        k = self._pos.get(key)
        if k is None:
            k = self._pos[key] = len(table)
            table.append(value if make is None else make(value))
        return k

    def _add(self, a: Answer) -> None:
        d = a.__dict__
        if d["meta"]:
            self._meta[len(self._ids)] = d["meta"]
        self._add_fields(d["id"], d["question_id"], d["examinee"], d["text"], d["human_scores"],
                         frozenset(a.__pydantic_fields_set__))

    def _add_fields(self, aid: str, qid: str, ex: str | None, text: str, scores: dict[str, float],
                    fields: frozenset[str]) -> None:
        self._ids.append(aid)
        self._qid_of.append(self._pos.setdefault(("qid", qid), qid))  # type: ignore[arg-type]
        self._ex.append(-1 if ex is None else self._intern("examinee", ex, self._names))
        self._text.append(text)
        self._layout.append(self._intern("layout", tuple(scores), self._layouts))
        self._hstart.append(len(self._hvalues))
        self._hvalues.extend(scores.values())
        self._hmean.append(sum(scores.values()) / len(scores) if scores else _NAN)
        self._fset.append(self._intern("fields", fields, self._fsets, set))

    def _finish(self, qlist: list[Question]) -> None:
        source = self.source
        self.questions = {}
        for q in qlist:
            if q.id in self.questions:
                raise InputError("duplicate question id", file=source, record=q.id, field="id")
            self.questions[q.id] = q
        self._questions = list(self.questions.values())
        qpos = {q.id: k for k, q in enumerate(self._questions)}
        ids = self._ids
        self._index: dict[str, int] = dict(zip(ids, range(len(ids)), strict=True))
        try:
            self._qi = array("i", [qpos[qid] for qid in self._qid_of])
        except KeyError:
            self._qi = array("i")
        if len(self._qi) != len(ids) or len(self._index) != len(ids) or self._grade_out_of_range():
            self._check_answers(qpos)  # raises the error the answer-by-answer check meets first
        del self._qid_of, self._pos
        self._group()

    def _grade_out_of_range(self) -> bool:
        """Whether a human grade on the points scale lies outside its question's 0..max_points."""
        top = [_grade_top(q) for q in self._questions]
        if all(t is None for t in top) or not any(self._layouts):
            return False
        widths = [len(g) for g in self._layouts]
        hv, hs, layout = self._hvalues, self._hstart, self._layout
        for i, k in enumerate(self._qi):
            t, w = top[k], widths[layout[i]]
            if t is not None and w:
                s = hs[i]
                if w == 1:
                    if not 0 <= hv[s] <= t:
                        return True
                elif not 0 <= min(hv[s:s + w]) <= max(hv[s:s + w]) <= t:
                    return True
        return False

    def _check_answers(self, qpos: dict[str, int]) -> None:
        """The answers checked one by one, in file order (ids, then the question, then the human grades), for
        the first error's message."""
        source, seen = self.source, set()
        for i, aid in enumerate(self._ids):
            if aid in seen:
                raise InputError("duplicate answer id", file=source, record=aid, field="id")
            seen.add(aid)
            qid = self._qid_of[i]
            k = qpos.get(qid)
            if k is None:
                raise InputError(f"answer refers to unknown question '{qid}'", file=source, record=aid,
                                 field="question_id")
            question = self._questions[k]
            top = _grade_top(question)
            if top is not None and self._layouts[self._layout[i]]:
                s, graders = self._hstart[i], self._layouts[self._layout[i]]
                for grader, v in zip(graders, self._hvalues[s:s + len(graders)], strict=True):
                    if v < 0 or v > top:
                        raise InputError(
                            f"human score {v:g} of grader '{grader}' is outside 0..{question.max_points:g}",
                            file=source, record=aid, field="human_scores")
        raise AssertionError("an answer check failed without an error")  # pragma: no cover

    def _group(self) -> None:
        """Each question's answers, in file order: the answer indices ordered by question (``_order``) and
        where each question's run of them starts (``_qstart``)."""
        counts = [0] * (len(self._questions) + 1)
        for k in self._qi:
            counts[k + 1] += 1
        for k in range(len(self._questions)):
            counts[k + 1] += counts[k]
        self._qstart = array("i", counts)
        fill = counts[:-1]
        order = array("i", bytes(4 * len(self._qi)))
        for i, k in enumerate(self._qi):
            order[fill[k]] = i
            fill[k] += 1
        self._order = order
        self._qpos = {q.id: k for k, q in enumerate(self._questions)}
        self.answers = _AnswerView(self)

    def _select(self, questions: list[Question], indices: Iterable[int]) -> ItemSet:
        """A new set of these questions and the answers at ``indices`` (in that order), copied column by
        column (every answer of the selection refers to one of ``questions``)."""
        new = ItemSet.__new__(ItemSet)
        new.source = self.source
        new._start()
        new._names, new._layouts, new._fsets = self._names, self._layouts, self._fsets
        new.questions = {q.id: q for q in questions}
        new._questions = list(questions)
        qpos = {q.id: k for k, q in enumerate(new._questions)}
        remap = [qpos.get(q.id, -1) for q in self._questions]
        new._index = {}
        for i in indices:
            j = len(new._ids)
            aid = self._ids[i]
            new._ids.append(aid)
            new._index[aid] = j
            new._qi.append(remap[self._qi[i]])
            new._ex.append(self._ex[i])
            new._text.append(self._text[i])
            new._layout.append(self._layout[i])
            new._hstart.append(len(new._hvalues))
            s = self._hstart[i]
            new._hvalues.extend(self._hvalues[s:s + len(self._layouts[self._layout[i]])])
            new._hmean.append(self._hmean[i])
            if i in self._meta:
                new._meta[j] = self._meta[i]
            new._fset.append(self._fset[i])
        del new._qid_of, new._pos
        new._group()
        return new

    # -- answers by index (no Answer built) ----------------------------------------------------------
    def answer_at(self, i: int) -> Answer:
        """The answer at index ``i`` (0 .. len - 1, file order), built from the columns."""
        a = _new(Answer)
        ex = self._ex[i]
        _set(a, "__dict__", {"id": self._ids[i], "question_id": self._questions[self._qi[i]].id,
                             "examinee": None if ex < 0 else self._names[ex], "text": self._text[i],
                             "human_scores": self.human_scores_at(i), "meta": self.meta_at(i)})
        _set(a, "__pydantic_fields_set__", self._fsets[self._fset[i]])
        _set(a, "__pydantic_extra__", None)
        _set(a, "__pydantic_private__", None)
        return a

    def index_of(self, answer_id: str) -> int:
        """The index of the answer ``answer_id`` (KeyError when there is none)."""
        return self._index[answer_id]

    def find(self, answer_id: str) -> int | None:
        """The index of the answer ``answer_id``, or None."""
        return self._index.get(answer_id)

    def answer_id_at(self, i: int) -> str:
        return self._ids[i]

    def question_at(self, i: int) -> Question:
        return self._questions[self._qi[i]]

    def examinee_at(self, i: int) -> str | None:
        ex = self._ex[i]
        return None if ex < 0 else self._names[ex]

    def text_at(self, i: int) -> str:
        return self._text[i]

    def human_score_at(self, i: int) -> float | None:
        """:attr:`Answer.human_score` of the answer at ``i``."""
        m = self._hmean[i]
        return None if m != m else m

    def human_scores_at(self, i: int) -> dict[str, float]:
        """A new dict of the human grades of the answer at ``i``, in the order given."""
        graders = self._layouts[self._layout[i]]
        if not graders:
            return {}
        s = self._hstart[i]
        return dict(zip(graders, self._hvalues[s:s + len(graders)], strict=True))

    def meta_at(self, i: int) -> dict[str, Any]:
        """The ``meta`` of the answer at ``i`` (a copy: the set's own is never handed out)."""
        m = self._meta.get(i)
        if m is None:
            return {}
        return dict(m) if all(isinstance(v, _SCALARS) for v in m.values()) else copy.deepcopy(m)

    def indices_for(self, question_id: str) -> Sequence[int]:
        """The indices of the question's answers, in file order (empty for an unknown question)."""
        k = self._qpos.get(question_id)
        if k is None:
            return array("i")
        return self._order[self._qstart[k]:self._qstart[k + 1]]

    def graders(self) -> list[str]:
        """The graders of the human grades (each once, in the order first met)."""
        seen: dict[str, None] = {}
        used = set(self._layout)
        for k, layout in enumerate(self._layouts):
            if k in used:
                seen.update(dict.fromkeys(layout))
        return list(seen)

    # -- the set --------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[Answer]:
        return iter(self.answers)

    def answer(self, answer_id: str) -> Answer:
        return self.answer_at(self._index[answer_id])

    def question_of(self, answer: Answer) -> Question:
        return self.questions[answer.question_id]

    def answers_for(self, question_id: str) -> list[Answer]:
        if question_id not in self.questions:
            return []
        return [self.answer_at(i) for i in self.indices_for(question_id)]

    def question_ids(self) -> list[str]:
        """Questions that have at least one answer, in file order."""
        s = self._qstart
        return [q.id for k, q in enumerate(self._questions) if s[k + 1] > s[k]]

    def has_human_scores(self) -> bool:
        used = set(self._layout)
        return any(self._layouts[k] for k in used)

    def subset(
        self, *, limit: int | None = None, answers_per_question: int | None = None
    ) -> ItemSet:
        """The first ``limit`` questions, each with its first ``answers_per_question`` answers (answers grouped
        by question, questions without answers left out; the set itself when that changes nothing)."""
        Selection(limit=limit, answers_per_question=answers_per_question)  # the bounds: a ValidationError
        qids = self.question_ids()
        if limit is not None:
            qids = qids[:limit]
        picked: list[int] = []
        for qid in qids:
            group = self.indices_for(qid)
            if answers_per_question is not None:
                group = group[:answers_per_question]
            picked.extend(group)
        if len(qids) == len(self.questions) and picked == list(range(len(self))):
            return self
        return self._select([self.questions[q] for q in qids], picked)

    def to_dataframe(self) -> Any:
        """A pandas DataFrame with one row per answer and its question's fields, under the table fields'
        names (docs/data-formats.md): ``question_id``, ``question``, ``reference``, ``max_points``,
        ``language``, ``difficulty``, ``exam_id``, ``task``, ``answer_id``, ``examinee``, ``answer``,
        ``human_score`` (the mean of the answer's human grades; None without any) and one ``human_score:<grader>``
        column per grader when there are several graders or one not named ``human``.  Needs pandas
        (``pip install 'knockout[dataframes]'``)."""
        try:
            import pandas as pd
        except ImportError:
            raise ConfigError("ItemSet.to_dataframe needs pandas: pip install 'knockout[dataframes]'") from None
        graders = list(dict.fromkeys(g for k in set(self._layout) for g in self._layouts[k]))
        per_grader = graders != ["human"] and bool(graders)
        rows = []
        for a in self.answers:
            q = self.questions[a.question_id]
            row: dict[str, Any] = {"question_id": q.id, "question": q.text, "reference": q.reference,
                                   "max_points": q.max_points, "language": q.language, "difficulty": q.difficulty,
                                   "exam_id": q.exam_id, "task": q.task, "answer_id": a.id, "examinee": a.examinee,
                                   "answer": a.text, "human_score": a.human_score}
            if per_grader:
                row |= {f"human_score:{g}": a.human_scores.get(g) for g in graders}
            rows.append(row)
        columns = ["question_id", "question", "reference", "max_points", "language", "difficulty", "exam_id", "task",
                   "answer_id", "examinee", "answer", "human_score", *(f"human_score:{g}" for g in graders
                                                                       if per_grader)]
        return pd.DataFrame(rows, columns=columns)

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
            (Answer(**a) for a in data["answers"]),
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
        for part in self._answer_dumps():
            h.update(part.encode())
        self._fingerprint: str = h.hexdigest()[:16]
        return self._fingerprint

    def _answer_dumps(self, chunk: int = 4096) -> Iterator[str]:
        """Each answer's ``json.dumps(model_dump(), sort_keys=True)``, written from the columns, joined a chunk
        at a time: the strings, names and grader keys are JSON-encoded once each, with the encoder json.dumps
        uses (ASCII, the same separators, floats as their repr), keys in sorted order."""
        enc = encode_basestring_ascii
        qids = [enc(q.id) for q in self._questions]
        names = [enc(n) for n in self._names]
        layouts = []  # per layout: (position, encoded grader) in the graders' sorted order
        for graders in self._layouts:
            layouts.append([(j, enc(graders[j])) for j in sorted(range(len(graders)), key=graders.__getitem__)])
        ids, text, qi, ex, layout, hstart, hv, meta = (self._ids, self._text, self._qi, self._ex, self._layout,
                                                       self._hstart, self._hvalues, self._meta)
        lines: list[str] = []
        for i in range(len(ids)):
            keys = layouts[layout[i]]
            if keys:
                s = hstart[i]
                scores = "{" + ", ".join(f"{key}: {hv[s + j]!r}" for j, key in keys) + "}"
            else:
                scores = "{}"
            m = meta.get(i)
            e = ex[i]
            lines.append(f'{{"examinee": {"null" if e < 0 else names[e]}, "human_scores": {scores}, '
                         f'"id": {enc(ids[i])}, "meta": {json.dumps(m, sort_keys=True) if m else "{}"}, '
                         f'"question_id": {qids[qi[i]]}, "text": {enc(text[i])}}}')
            if len(lines) == chunk:
                yield "".join(lines)
                lines = []
        if lines:
            yield "".join(lines)


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


def with_rubrics(items: ItemSet, rubrics: dict[str, Any], *, file: str | None = None) -> ItemSet:
    """The item set with rubrics given apart from its data (question id -> a text, or a list of
    ``{"criterion", "points"}``), each checked as a data file's ``rubric`` field; e.g. the rubrics written for
    the demo exam (``knockout/examples/demo_exam_rubrics.json``)."""
    from pydantic import ValidationError

    questions = []
    for qid in rubrics:
        if qid not in items.questions:
            raise InputError("no such question in the data", file=file, record=qid, field="rubric")
    for q in items.questions.values():
        if q.id not in rubrics:
            questions.append(q)
            continue
        try:
            questions.append(Question.model_validate({**q.model_dump(), "rubric": rubrics[q.id]}))
        except ValidationError as exc:
            raise InputError(str(exc.errors()[0]["msg"]), file=file, record=q.id, field="rubric") from None
    return ItemSet(questions, list(items), source=items.source)

