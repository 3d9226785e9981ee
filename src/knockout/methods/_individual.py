"""Individual (pointwise) grading: one judge call per answer, in one wave.

The answers' requests are grouped by question (the engine sends one question's answers one after the other,
whatever their order in the file, on a first run and on a resumed one): their prompts share the
instructions and the question, which the embedded judge then takes from its KV cache instead of evaluating.

A large item set is asked in chunks of :attr:`Individual.chunk` answers (the same wave, in bounded
pieces): each chunk's results are written in one transaction as soon as it is done, so memory stays flat
whatever the size of the run.  When a run has more than one chunk, the results it returns keep the
score, validity and error of each answer; their full details (prompt, every raw reply) are in the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from knockout.data._records import Answer, Criterion, ItemSet, Question
from knockout.engine import Outcome, Subject, Task
from knockout.grading._normalise import normalise
from knockout.guard import WHOLE_AT, detect, removed_share, visible, without
from knockout.methods._anchors import Anchors, anchor_answers, anchor_ends
from knockout.methods._base import (
    AnswerResult,
    IndividualDetails,
    Method,
    MethodOptions,
    MethodResult,
    ResultCounts,
)
from knockout.prompts._builder import PromptBuilder, reminder_for
from knockout.storage._store import ResultRow

if TYPE_CHECKING:
    from knockout.runs import RunContext


def individual_details(o: Outcome, prompt: str, shots: list[str], criteria: Sequence[Criterion] = ()
                       ) -> dict[str, Any]:
    """The JSON of :class:`IndividualDetails` for one outcome, written directly (a large run builds one per
    answer; the model validates the same fields, in the same order, to the same JSON; ``criteria`` only when
    the answer was graded by a criteria rubric)."""
    attempts = [{"key": a.key, "reply": a.reply, "cached": a.cached, "error": a.error,
                 **({"verdict": a.verdict} if a.verdict is not None else {})} for a in o.attempts]
    out: dict[str, Any] = {"valid": o.valid, "error": o.error, "failed": o.failed, "attempts": attempts,
                           "prompt": prompt, "shots": list(shots)}
    if o.valid and isinstance(o.value, dict) and criteria:
        out["criteria"] = [{"criterion": c.criterion, "points": c.points, "awarded": float(x)}
                           for c, x in zip(criteria, o.value["criteria"], strict=True)]
    return out


def grade_task(builder: PromptBuilder, a: Answer, label: str) -> tuple[Task, str, list[str], list[Criterion]]:
    """The grade request of one answer: the task, its template's name, the few-shot answers shown and the
    question's criteria when a criteria rubric grades it."""
    q = builder.items.question_of(a)
    t, rendered, shot_ids = builder.individual(a)
    criteria = builder.criteria(q)
    parse, slot, mode = builder.read(t, q, rendered, criteria)
    task = Task(messages=rendered.messages, parse=parse, reminder=reminder_for(t, q.max_points),
                subject=Subject("individual", (a.id,)), label=label, slot=slot, slot_mode=mode, shown=rendered.shown,
                group=q.id)  # one question's prompts start alike: sent together (the judge's prefix reuse)
    return task, t.name, shot_ids, q.criteria if criteria else []


#: what a run in chunks keeps of an answer's readers record (``details["readers"]``, the rest is in the store): what
#: the trust marks and the answers table read (:func:`kept_readers`)
KEPT_READERS = ("judge", "meaning", "similarity", "combined", "disagree", "why_not")


def kept_readers(rd: dict[str, Any]) -> dict[str, Any]:
    """The part of a readers record a run in chunks keeps with its results (:data:`KEPT_READERS`, and the reading
    ``nothing_beyond`` where it is 1: the answers table says so); the summary's counts are taken before
    (:class:`ResultCounts`)."""
    kept = {k: rd[k] for k in KEPT_READERS if k in rd}
    if (rd.get("readings") or {}).get("nothing_beyond") == 1:
        kept["readings"] = {"nothing_beyond": 1}
    return kept


class ChunkedResults(Sequence[AnswerResult]):
    """The results a run in chunks returns, in columns (issue 59: a million answers in 1 GB): each answer's id,
    question, score and validity, the details it keeps (:meth:`Individual.run`: the prompt's name, one dict shared by
    every answer that keeps only that) and its readers' :func:`kept_readers` record as numbers; an
    :class:`AnswerResult` is made when read (its ``details`` a new dict where it has a readers record: not to be
    changed in place).  The full details are in the store."""

    _NONE = math.nan  # None in a column of floats (a grade, a reading: never NaN)

    def __init__(self) -> None:
        self._answer: list[str] = []
        self._question: list[str] = []
        self._score = array("d")
        self._valid = bytearray()
        self._details: list[dict[str, Any]] = []
        #: the readers records (judge, meaning, similarity, combined; disagree, nothing beyond, why_not), by position
        self._at = array("q")  # each answer's row in the columns below (-1: no readers record)
        self._floats = array("d")
        self._flags = bytearray()  # 1: disagree, 2: nothing beyond the question
        self._why = array("h")  # index into _whys, -1: none
        self._whys: list[str] = []
        self._odd: dict[int, dict[str, Any]] = {}  # a record of another shape, kept as it is

    def add(self, r: AnswerResult, details: dict[str, Any], readers: dict[str, Any] | None) -> None:
        self._answer.append(r.answer_id)
        self._question.append(r.question_id)
        self._score.append(self._NONE if r.score is None else r.score)
        self._valid.append(r.valid)
        self._details.append(details)
        if readers is None:
            self._at.append(-1)
            return
        floats = [readers.get(k) for k in READERS_FLOATS]
        why = readers.get("why_not")
        shape = {*READERS_FLOATS, "disagree", *(("why_not",) if why else ()),
                 *(("readings",) if "readings" in readers else ())}
        if (set(readers) != shape or not all(v is None or type(v) is float for v in floats)
                or type(readers["disagree"]) is not bool or (why is not None and not isinstance(why, str))):
            self._at.append(-1)
            self._odd[len(self._answer) - 1] = readers
            return
        self._at.append(len(self._flags))
        self._floats.extend(self._NONE if v is None else v for v in floats)
        self._flags.append(readers["disagree"] | (2 if "readings" in readers else 0))
        if why and why not in self._whys:
            self._whys.append(why)
        self._why.append(self._whys.index(why) if why else -1)

    def _readers(self, i: int) -> dict[str, Any] | None:
        k = self._at[i]
        if k < 0:
            return self._odd.get(i)
        f = self._floats[4 * k:4 * k + 4]
        out: dict[str, Any] = {n: None if math.isnan(v) else v for n, v in zip(READERS_FLOATS, f, strict=True)}
        out["disagree"] = bool(self._flags[k] & 1)
        if self._why[k] >= 0:
            out["why_not"] = self._whys[self._why[k]]
        if self._flags[k] & 2:
            out["readings"] = {"nothing_beyond": 1}
        return {n: out[n] for n in (*KEPT_READERS, "readings") if n in out}  # kept_readers' order

    def scores(self, items: ItemSet) -> Mapping[str, float | None]:
        """Each answer's score by its id (None: invalid), looked up through ``items``' own index of ids (a dict of a
        million scores is ~70 MB)."""
        return _Scores(self, items)

    def __len__(self) -> int:
        return len(self._answer)

    @overload
    def __getitem__(self, i: int) -> AnswerResult: ...

    @overload
    def __getitem__(self, i: slice) -> list[AnswerResult]: ...

    def __getitem__(self, i: int | slice) -> AnswerResult | list[AnswerResult]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        score = self._score[i]
        rd = self._readers(i)
        details = self._details[i] if rd is None else {**self._details[i], "readers": rd}
        return AnswerResult(self._answer[i], self._question[i], None if math.isnan(score) else score,
                            bool(self._valid[i]), details)


class _Scores(Mapping[str, float | None]):
    """:meth:`ChunkedResults.scores`: the results' scores by answer id, through the item set's index of ids."""

    def __init__(self, results: ChunkedResults, items: ItemSet) -> None:
        self._results, self._items = results, items

    def _at(self, answer_id: object) -> int | None:
        i = self._items.find(answer_id) if isinstance(answer_id, str) else None
        if i is None or i >= len(self._results) or self._results._answer[i] != answer_id:
            return None
        return i

    def __contains__(self, answer_id: object) -> bool:
        return self._at(answer_id) is not None

    def __getitem__(self, answer_id: str) -> float | None:
        i = self._at(answer_id)
        if i is None:
            raise KeyError(answer_id)
        score = self._results._score[i]
        return None if math.isnan(score) else score

    def __iter__(self) -> Iterator[str]:
        return iter(self._results._answer)

    def __len__(self) -> int:
        return len(self._results)


#: the readings a :class:`ChunkedResults` keeps of a readers record as floats
READERS_FLOATS = ("judge", "meaning", "similarity", "combined")


def grade_of(value: Any) -> float:
    """A parsed grade: a number, or the sum of a criteria verdict (``{"grade": ..., "criteria": [...]}``)."""
    return float(value["grade"]) if isinstance(value, dict) else float(value)


class Individual(Method):
    name = "individual"
    prompt_kind = "individual"
    details_model = IndividualDetails

    #: answers per chunk (requests built, asked and written together)
    chunk: int = 5000

    async def run(self, items: ItemSet, ctx: RunContext, options: MethodOptions) -> MethodResult:
        self.options(options)
        builder = PromptBuilder(items, "individual", options)
        n = len(items)
        chunked = n > self.chunk
        results: list[AnswerResult] = []  # one chunk: the results with their details
        kept_results = ChunkedResults()  # several: the results' columns
        counts = ResultCounts()
        prompt_only: dict[str, dict[str, Any]] = {}  # the kept details that hold only a prompt's name, by name
        guard = options.guard == "on"
        for start in range(0, n, self.chunk):  # each chunk's answers built from the item set's columns
            part = items.answers[start:start + self.chunk]
            # every reader reads the normalised text (NFKC, no format characters); with the guard, the judge sees
            # what a person sees: no invisible characters
            part = [a if (v := self._shown(a.text, guard)) == a.text else a.model_copy(update={"text": v})
                    for a in part]
            readings = (asyncio.create_task(self._readings(part, builder, ctx))
                        if options.readers == "two" else None)  # the encoder works while the judge is asked
            tasks: list[Task] = []
            meta: list[tuple[str, list[str], list[Criterion]]] = []
            for a in part:
                task, template, shot_ids, criteria = grade_task(builder, a, a.id)
                tasks.append(task)
                meta.append((template, shot_ids, criteria))
            anchored = self._anchored_questions(part, builder) if options.anchors != "off" else []
            ends = len(anchor_ends(options.anchors))
            for q in anchored:  # asked with the question's answers (the same prompt prefix)
                for end, x in anchor_answers(q, options.anchors):
                    tasks.append(dataclasses.replace(grade_task(builder, x, x.id)[0],
                                                     subject=Subject("anchor", (q.id, end))))
            outcomes = await ctx.engine.ask_all(tasks, wave=1)
            anchor_outcomes = outcomes[len(part):]
            outcomes = outcomes[:len(part)]
            done = [
                AnswerResult(
                    answer_id=a.id,
                    question_id=a.question_id,
                    score=grade_of(o.value) if o.valid else None,
                    valid=o.valid,
                    details=individual_details(o, prompt, shots, crit),
                )
                for a, o, (prompt, shots, crit) in zip(part, outcomes, meta, strict=True)
            ]
            if guard:
                await self._guard(part, done, builder, ctx)
            if anchored:
                self._anchor(done, {q.id: (anchor_outcomes[ends * i], anchor_outcomes[ends * i + 1] if ends > 1
                                           else None, q.max_points) for i, q in enumerate(anchored)})
            if readings is not None:
                self._grade(part, done, builder, await readings)
            ctx.write_results(ResultRow(r.answer_id, r.question_id, r.score, r.valid, r.details) for r in done)
            counts.add(done)  # the summary's counts, before the details go
            if chunked:  # the details are in the store; keep what the trust marks need (the error, the few-shot
                for r in done:  # answers for the copy rate, the last reply for the sciex parser's fallbacks)
                    kept: dict[str, Any] = {} if r.valid else {"error": r.details.get("error")}
                    kept["prompt"] = r.details.get("prompt")
                    if r.details.get("criteria"):
                        kept["criteria"] = r.details["criteria"]
                    if r.details.get("guard"):
                        kept["guard"] = r.details["guard"]
                    if r.details.get("anchored"):
                        kept["anchored"] = r.details["anchored"]
                    if r.details.get("shots"):
                        kept["shots"] = r.details["shots"]
                    if options.parser and r.details.get("attempts"):
                        kept["attempts"] = r.details["attempts"][-1:]
                    if len(kept) == 1 and isinstance(kept["prompt"], str):  # the usual case, one shared dict
                        kept = prompt_only.setdefault(kept["prompt"], kept)  # a prompt's (never changed in place)
                    kept_results.add(r, kept, kept_readers(r.details["readers"]) if r.details.get("readers") else None)
            else:
                results.extend(done)
        return MethodResult(kept_results if chunked else results, written=True, counts=counts)

    @staticmethod
    def _shown(text: str, guard: bool) -> str:
        return visible(normalise(text)) if guard else normalise(text)

    @staticmethod
    async def _readings(part: Sequence[Answer], builder: PromptBuilder, ctx: RunContext) -> list[Any]:
        """Every answer's readings but the judge's (:mod:`knockout.grading`), computed off the event loop by the
        engine (a worker thread; a Ray worker with the Ray executor) beside the judge's requests."""
        from knockout.grading._readings import Readings, read_all

        items = builder.items
        qs = [items.question_of(a) for a in part]
        rubric = [bool(builder.criteria(q)) for q in qs]
        got = await ctx.engine.compute(read_all, [a.text for a in part], [q.text for q in qs],
                                       [q.reference if builder.options.reference else None for q in qs],
                                       [q.language for q in qs])
        return [Readings({}, "a criteria rubric grades it (the grade is a sum of per-criterion verdicts)") if c
                else rd for c, rd in zip(rubric, got, strict=True)]

    @staticmethod
    def _grade(part: Sequence[Answer], done: list[AnswerResult], builder: PromptBuilder, readings: list[Any]) -> None:
        """Each answer's grade from its own readings through the grade model (:mod:`knockout.grading`), stored with
        what it rests on (``details["readers"]``); a criteria grade stays the sum of its criteria."""
        from knockout.grading._grade import grade_all
        from knockout.judges._slot import verdict_spread
        from knockout.meaning import DEFAULT_ENCODER

        qs = [builder.items.question_of(a) for a in part]
        ok = [r.valid and r.score is not None and not (rd.why_not or "").startswith("a criteria rubric")
              for r, rd in zip(done, readings, strict=True)]
        recs = grade_all(readings, [r.score if k else None for r, k in zip(done, ok, strict=True)],
                         [verdict_spread(r.details, q.max_points) if k else None
                          for r, q, k in zip(done, qs, ok, strict=True)],
                         [q.max_points for q in qs], DEFAULT_ENCODER)
        for r, rd, rec in zip(done, readings, recs, strict=True):
            if rec is None:
                if r.valid and rd.why_not:
                    r.details["readers"] = {"judge": r.score, "why_not": rd.why_not}
                continue
            r.score = rec["combined"]
            r.details["readers"] = rec

    @staticmethod
    def _anchored_questions(part: Sequence[Answer], builder: PromptBuilder) -> list[Question]:
        """The questions of ``part`` whose grades are read on reference anchors: those with a reference shown to
        the judge and no criteria rubric (a criteria verdict is a sum of per-criterion grades)."""
        items = builder.items
        qs = {a.question_id: items.questions[a.question_id] for a in part}
        return [q for q in qs.values() if q.reference and builder.options.reference and not builder.criteria(q)]

    @staticmethod
    def _anchor(done: list[AnswerResult], anchors: dict[str, tuple[Outcome, Outcome | None, float]]) -> None:
        """Each valid grade of an anchored question read on its anchors (:mod:`knockout.methods._anchors`).  An
        anchor that got no reply makes its question's answers fail (the run is not complete; running it again
        asks only that); one whose reply could not be read leaves the question's grades as the judge gave them,
        which their details say.  A flagged answer's guard grades are read on the same anchors as its grade."""
        for r in done:
            got = anchors.get(r.question_id)
            if got is None:
                continue
            ref, null, max_points = got
            ends = [ref] if null is None else [ref, null]
            if failed := [o for o in ends if o.failed]:
                r.score, r.valid = None, False
                r.details.update(valid=False, failed=True,
                                 error=f"the question's anchor answer got no reply: {failed[0].error}")
            elif unread := [o for o in ends if not o.valid]:
                r.details["anchored"] = {"error": f"an anchor answer's reply could not be read ({unread[0].error}): "
                                                  "the grade is the judge's own"}
            elif r.score is not None:
                a = Anchors(grade_of(ref.value), None if null is None else grade_of(null.value), max_points)
                r.details["anchored"] = a.record(r.score)
                r.score = a.read(r.score)
                g = r.details.get("guard") or {}
                for k in ("grade_full", "grade_stripped"):  # the guard's grades on the grade's own scale (the
                    if isinstance(g.get(k), int | float):  # grade "it would have had", shown beside it)
                        g[k] = a.read(g[k])

    async def _guard(self, part: Sequence[Any], done: list[AnswerResult], builder: PromptBuilder,
                     ctx: RunContext) -> None:
        """The persuasion guard (:mod:`knockout.guard`): each answer read for parts aimed at the grader; a flagged
        answer graded again without them, and the lower grade kept."""
        guards = [detect(a.text) for a in part]
        tasks, kept = [], []
        for i, g in enumerate(guards):
            if not g["flagged"]:
                continue
            text = without(part[i].text, g["removed"])  # type: ignore[arg-type]
            share = round(removed_share(part[i].text, text), 4)
            g["removed_share"] = share
            if share > WHOLE_AT:  # never graded on less than its content: whole, and the flag asks an
                g["graded_whole"] = True  # expert to look
                continue
            tasks.append(grade_task(builder, part[i].model_copy(update={"text": text}), f"{part[i].id} (guarded)")[0])
            kept.append(i)
        for i, o in zip(kept, await ctx.engine.ask_all(tasks, wave=2), strict=True):
            if o.valid:
                self._lower(done[i], guards[i], grade_of(o.value), o, builder.items.question_of(part[i]).max_points)
            else:
                guards[i]["error"] = f"the answer without the parts aimed at the grader: {o.error}"
        for r, g in zip(done, guards, strict=True):
            r.details["guard"] = g

    @staticmethod
    def _lower(r: AnswerResult, g: dict[str, object], stripped: float, o: Outcome | None, max_points: float) -> None:
        """The lower of the whole answer's grade and the grade without the parts aimed at the grader, but never
        lower than the whole answer's grade less the removed share of max points: taking out a twentieth of an
        answer cannot cost it half its grade (issue 48: an honest answer with one flagged clause lost 0.5 of max)."""
        g["grade_full"] = r.score
        g["grade_stripped"] = stripped
        if r.score is not None and stripped < r.score:
            share = g.get("removed_share")
            floor = r.score - float(share) * max_points if isinstance(share, int | float) else stripped
            r.score = max(stripped, floor)
            if o is not None and isinstance(o.value, dict) and r.details.get("criteria") and r.score == stripped:
                r.details["criteria"] = [{**c, "awarded": float(x)}
                                         for c, x in zip(r.details["criteria"], o.value["criteria"], strict=True)]
