"""A grading run: a method on an item set with a judge, through the store (the ``grade`` run kind).

A run's id is a hash of everything that determines its results (method, options, judge identity,
generation parameters, format retries, data), so the same command twice is the same run: the second time
every call is a cache hit and no judge is called.  A killed run restarted with the same command resumes.
The lifecycle (validation, start, engines, writing, status) is :mod:`knockout.runs`'s, shared by every
kind of run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from knockout._bounds import MAX_CONCURRENCY, MAX_RETRIES, Name, bounded
from knockout.data._records import ItemSet
from knockout.engine import Observer, Subject
from knockout.errors import ConfigError
from knockout.judges._base import GenParams, Judge
from knockout.judges._slot import MODES, SCHEMA_IGNORED
from knockout.methods._base import AnswerResult, Method, MethodOptions, ResultCounts, methods
from knockout.runs import Oracle, Run, RunContext, RunSummary, execute, execute_async
from knockout.storage._store import ResultRow, Store

#: the most judge draws per answer (``--samples``)
MAX_SAMPLES = 100


@pydantic_dataclass(config=ConfigDict(arbitrary_types_allowed=True, allow_inf_nan=False))
class RunConfig:
    """What a grading run does (a pydantic dataclass: the bounds are checked however it is made)."""

    method: Name = "individual"
    options: MethodOptions = field(default_factory=MethodOptions)
    params: GenParams = field(default_factory=GenParams)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    format_retries: int = Field(default=2, ge=0, le=MAX_RETRIES)
    #: how question figures go to the judge: auto (captioned for a judge that takes images, else as they
    #: are: a text-only backend leaves them out and counts them), separate, stacked, none (knockout.sciex)
    figures: Name = "auto"
    figure_dir: Path | None = None  # where captioned figures are written (default: the user cache)
    #: pairwise methods: play step s of all questions as one wave instead of pipelining each question
    #: (same results; not part of the run's identity)
    lockstep: bool = False
    #: judge draws per answer (``--samples K``, the individual method): draw k asks with seed ``seed + k`` and
    #: is cached under its own key; the answer's grade is the mean of its valid draws, each draw kept in its
    #: details (``draws``).  1 (the default) leaves run ids, requests and cache keys as they always were.
    samples: int = Field(default=1, ge=1, le=MAX_SAMPLES)

    @model_validator(mode="wrap")
    @classmethod
    def _bounds(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return bounded(data, handler)  # a value out of bounds: a ConfigError naming the field


class GradeSummary(RunSummary):
    """``knockout grade --json`` (keys in the README)."""

    model_config = ConfigDict(extra="forbid")

    questions: int
    answers: int
    valid: int
    invalid: int
    agreement: dict[str, Any]
    info: dict[str, Any] | None = None
    #: how the judge's verdicts were read (docs/methods.md#the-verdict-slot): expected, constrained or text; mixed
    #: when some questions' prompts are read from text and others from a slot (no run of presets since issue 51's
    #: gates), counted in ``verdict_questions``
    verdict: str = "text"
    #: the persuasion guard (docs/injection.md), when on: answers checked, flagged (graded again without the parts
    #: aimed at the grader), lowered (the second grade was lower: kept), errors (no valid second grade)
    guard: dict[str, int] | None = None
    #: reference anchors (docs/methods.md#reference-anchors), when on: the ``questions`` whose grades were read
    #: on their anchors, and ``unread`` those whose anchor reply could not be read (their grades are the judge's)
    anchors: dict[str, int] | None = None
    #: the readers of the grades (docs/methods.md#two-readers): ``mode`` two or judge; with two, the answers
    #: ``combined``, graded by the ``judge_only`` (``why_not``: per reason) and whose readers ``disagree``; with the
    #: judge alone, why the second reader is ``off`` where it could have applied
    readers: dict[str, Any] | None = None
    #: the defences of the grades against planting, persuasion and gaming (docs/injection.md#which-defences-apply):
    #: ``slot`` (the verdict read from a constrained slot or token probabilities: on, off, or partly on a mixed
    #: run), ``guard`` (the persuasion guard) and ``second_reader`` (the meaning reader), each on or off
    defences: dict[str, str] | None = None
    #: a mixed run's questions per verdict mode (``{"constrained": 3, "text": 1}``)
    verdict_questions: dict[str, int] | None = None


@dataclass
class RunReport:
    run_id: str
    method: str
    judge: str
    simulated: bool
    data_source: str
    n_questions: int
    n_answers: int
    stats: dict[str, Any]
    agreement: dict[str, Any]
    #: one per answer; a run in chunks keeps of each answer's details what the trust marks read (its results are
    #: read-only columns, :class:`knockout.methods._individual.ChunkedResults`; the full details are in the store)
    results: Sequence[AnswerResult]
    info: dict[str, Any] = field(default_factory=dict)
    verdict: str = "text"
    verdict_questions: dict[str, int] | None = None
    #: ``complete``, or ``incomplete`` when judge requests failed for good (set by the lifecycle)
    status: str = "complete"
    #: ``on`` when the persuasion guard ran
    guard: str = "off"
    #: the reference anchors' mode when they were asked (``on``: the line, ``shift``)
    anchors: str = "off"
    #: ``two`` when the grades were read by the judge and the meaning reader; why the second reader was off
    readers: str = "judge"
    readers_off: str | None = None

    #: the summary's counts of the results' details (:class:`ResultCounts`; None: counted from ``results``)
    counts: ResultCounts | None = None

    def _counts(self) -> ResultCounts:
        if self.counts is None:
            self.counts = ResultCounts.of(self.results)
        return self.counts

    def reader_counts(self) -> dict[str, Any]:
        """The readers of the run's grades: ``mode``; with two, the answers ``combined``, graded by the
        ``judge_only`` (and why, per reason), and those whose readers ``disagree``; else why the second is off."""
        if self.readers != "two":
            return {"mode": "judge", **({"off": self.readers_off} if self.readers_off else {})}
        c = self._counts()
        return {"mode": "two", **({"model": c.model} if c.model else {}), "combined": c.combined,
                "judge_only": c.judge_only, "disagree": c.disagree,
                **({"why_not": dict(c.why_not)} if c.why_not else {})}

    def anchor_counts(self) -> dict[str, int] | None:
        """The questions graded on reference anchors, and those whose anchors could not be read (None when off)."""
        if self.anchors == "off":
            return None
        done = self._counts().anchored.values()
        return {"questions": sum(read for read, _ in done), "unread": sum(unread for _, unread in done)}

    def guard_counts(self) -> dict[str, int] | None:
        """The persuasion guard's counts (None when it was off)."""
        if self.guard != "on":
            return None
        c = self._counts()
        return {"checked": c.checked, "flagged": c.flagged, "lowered": c.lowered, "graded_whole": c.graded_whole,
                "errors": c.guard_errors}

    def summary(self) -> dict[str, Any]:
        """The machine-readable summary printed by ``--json`` (keys documented in the README)."""
        s = GradeSummary(
            run_id=self.run_id, kind="grade", method=self.method, judge=self.judge, simulated_judge=self.simulated,
            data=self.data_source, status=self.status, questions=self.n_questions, answers=self.n_answers,
            valid=sum(r.valid for r in self.results), invalid=sum(not r.valid for r in self.results),
            **self.stats, agreement=self.agreement, info=self.info or None, verdict=self.verdict,
            guard=self.guard_counts(),
            anchors=self.anchor_counts(),
            readers=self.reader_counts(),
            defences={"slot": {"expected": "on", "constrained": "on", "mixed": "partly"}.get(self.verdict, "off"),
                      "guard": "on" if self.guard == "on" else "off",
                      "second_reader": "on" if self.readers == "two" else "off"},
            verdict_questions=self.verdict_questions,
        )
        return s.model_dump(mode="json", exclude_none=True)


def grade_oracle(items: ItemSet) -> Oracle:
    """What the scripted judge (a simulation) may know: the human scores of the answers it is shown."""

    def facts(subject: Subject) -> dict[str, Any]:
        if subject.kind == "anchor":  # a question's reference anchor deserves full points, its null one none
            q = items.questions[subject.ids[0]]
            return {"kind": "individual", "max_points": q.max_points,
                    "humans": [q.max_points if subject.ids[1] == "reference" else 0.0]}
        at = [items.index_of(i) for i in subject.ids]
        q = items.question_at(at[0])
        facts = {"kind": subject.kind, "max_points": q.max_points, "humans": [items.human_score_at(k) for k in at]}
        if q.criteria:  # a criteria rubric: the simulation can answer per criterion too
            facts["criteria"] = [c.points for c in q.criteria]
        return facts

    return facts


class GradeRun(Run[RunReport]):
    """Grade ``items`` with ``judge`` by the method ``cfg.method``."""

    kind = "grade"

    def __init__(self, items: ItemSet, judge: Judge, cfg: RunConfig) -> None:
        super().__init__(method=cfg.method, data_source=items.source, params=cfg.params,
                         concurrency=cfg.concurrency, format_retries=cfg.format_retries)
        from knockout.guard import resolve_guard
        from knockout.methods._anchors import resolve_anchors
        from knockout.prompts._slots import resolve_verdict

        verdict = resolve_verdict(cfg.options.verdict, judge)  # the mode this judge gives: recorded with the run
        guard = resolve_guard(cfg.options.guard, cfg.method, verdict)  # likewise the guard's
        resolve_anchors(cfg.options.anchors, cfg.method)  # an unknown mode, or anchors without individual grading
        from knockout.grading import resolve_readers

        readers, self.readers_off = resolve_readers(cfg.options.readers, cfg.method, judge.simulated)
        named = cfg.options.verdict_named or cfg.options.verdict in MODES  # a slot mode asked for by name
        if (verdict != cfg.options.verdict or guard != cfg.options.guard or readers != cfg.options.readers
                or named != cfg.options.verdict_named):
            cfg = dataclasses.replace(cfg, options=dataclasses.replace(cfg.options, verdict=verdict, guard=guard,
                                                                       readers=readers, verdict_named=named))
        self.items = items
        self.judge = judge
        self.cfg = cfg
        self._method: Method | None = None

    @property
    def grader(self) -> Method:
        if self._method is None:
            self._method = methods.get(self.cfg.method)()
            if hasattr(self._method, "lockstep"):
                self._method.lockstep = self.cfg.lockstep
        return self._method

    def judges(self) -> dict[str, Judge]:
        return {"judge": self.judge}

    def _samples(self) -> dict[str, Any]:
        """``samples`` in the identity and configuration only when it is more than 1 (run ids unchanged)."""
        return {"samples": self.cfg.samples} if self.cfg.samples > 1 else {}

    def identity(self) -> dict[str, Any]:
        options = self.cfg.options.record()
        if options.get("rubric") == "auto":  # the default: the run ids made before rubrics existed stand
            del options["rubric"]
        return {
            "method": self.cfg.method,
            "options": options,
            "params": self.cfg.params.model_dump(mode="json"),
            "format_retries": self.cfg.format_retries,
            "figures": self.figure_mode,
            "judge": self.judge.identity(),
            "data": self.items.fingerprint(),
            **self._samples(),
        }

    def config(self) -> dict[str, Any]:
        return {
            "options": self.cfg.options.record(),
            "params": self.cfg.params.model_dump(mode="json"),
            "format_retries": self.cfg.format_retries,
            "figures": self.figure_mode,
            **self._samples(),
        }

    @property
    def figure_mode(self) -> str:
        """``auto`` for a text-only judge stays ``auto`` (figures sent as they are, dropped by the backend);
        for a judge that takes images it is ``separate`` (:func:`knockout.sciex._figures.resolve_mode`)."""
        if self.cfg.figures == "auto":
            return "separate" if self.judge.supports_images else "auto"
        from knockout.sciex._figures import resolve_mode

        return resolve_mode(self.cfg.figures, self.judge.supports_images)

    def snapshot(self) -> ItemSet:
        return self.items

    def check(self) -> None:
        self.figure_mode  # noqa: B018 - validates the mode
        if self.cfg.figures == "auto" and not self.judge.supports_images:
            with_figures = [q.id for q in self.items.questions.values() if q.images]
            if with_figures:  # the judge would not see them: said, never done silently
                raise ConfigError(
                    f"judge '{self.judge.spec}' takes no images and {len(with_figures)} question(s) have figures "
                    f"(first: '{with_figures[0]}'); pass --figures none (experiment files: [prompt] figures = "
                    "\"none\") to grade without them (the run records how many were left out)")
        self.grader.check(self.items, self.cfg.options)
        if self.cfg.samples > 1 and self.cfg.method != "individual":
            raise ConfigError(f"--samples {self.cfg.samples}: repeated judge draws are for the individual method "
                              f"(one grade per answer and draw), not '{self.cfg.method}'")

    def oracle(self) -> Oracle:
        return grade_oracle(self.items)

    async def execute(self, ctx: RunContext) -> RunReport:
        from knockout.metrics._agreement import question_level

        items, left_out = self.items, 0
        if self.figure_mode != "auto" and any(q.images for q in self.items.questions.values()):
            from knockout.sciex._grading import judge_items  # SciEx figure code: only for questions with figures

            items, left_out = judge_items(self.items, self.figure_mode, self.cfg.figure_dir)
        outcome = await self.grader.run(items, ctx, self.cfg.options)
        counts = outcome.counts or ResultCounts.of(outcome.results)  # before the draws: the first draw's details
        if self.cfg.samples > 1:
            outcome.results = list(outcome.results)  # the draws change the results in place
            counts.became_valid(await self._more_draws(items, ctx, outcome.results))
        if not outcome.written:
            ctx.write_results(ResultRow(r.answer_id, r.question_id, r.score, r.valid, r.details)
                              for r in outcome.results)
        with_reference = sum(q.reference is not None for q in self.items.questions.values())
        if with_reference:  # said, never silent: how many questions the judge saw a reference answer for
            outcome.info["references"] = {"shown": with_reference if self.cfg.options.reference else 0,
                                          "questions": len(self.items.questions),
                                          **({} if self.cfg.options.reference else {"off": True})}
        if left_out or self.cfg.options.shots > 0 or self.cfg.options.parser == "sciex-score":
            from knockout.sciex._grading import grading_info

            outcome.info.update(grading_info(self.items, outcome.results, self.cfg.options, left_out))
        verdict, per_mode = self.verdict_read()
        via = self.judge.verdict_via(self.cfg.options.verdict) if verdict != "text" else None
        if via:  # said with the mode: how this backend read the verdicts (docs/methods.md#the-verdict-slot)
            outcome.info["verdict_via"] = via
        ignored = sum(SCHEMA_IGNORED in str(r.details.get("error") or "") for r in outcome.results if not r.valid)
        if ignored:  # said, never silent: the server wrote free text where the verdict schema was asked for
            outcome.info["verdict_schema_ignored"] = ignored
        from knockout.methods._individual import ChunkedResults

        scores = (outcome.results.scores(items) if isinstance(outcome.results, ChunkedResults)
                  else {r.answer_id: r.score for r in outcome.results})
        return RunReport(
            run_id=ctx.run_id,
            method=self.cfg.method,
            judge=self.judge.spec,
            simulated=self.judge.simulated,
            data_source=self.items.source,
            n_questions=len(self.items.question_ids()),
            n_answers=len(self.items),
            stats=ctx.stats(),
            agreement=question_level(self.items, scores) if self.items.has_human_scores() else {},
            results=outcome.results,
            info=outcome.info,
            guard=self.cfg.options.guard,
            anchors=self.cfg.options.anchors,
            readers=self.cfg.options.readers,
            readers_off=self.readers_off,
            verdict=verdict,
            verdict_questions=per_mode,
            counts=counts,
        )

    def verdict_read(self) -> tuple[str, dict[str, int] | None]:
        """How the run read its verdicts, per question: its slot mode when every question's prompt has a slot,
        ``text`` when none has (or the run reads text), else ``mixed`` with the questions per mode (a question whose
        prompt has no slot, or one ``--verdict auto`` leaves off, is read from free text, and the run says so)."""
        mode = self.cfg.options.verdict
        if mode not in MODES:
            return mode, None
        reads = self.grader.verdict_reads(self.items, self.cfg.options)
        if set(reads) <= {mode}:
            return mode, None
        if set(reads) == {"text"}:
            return "text", None
        return "mixed", reads


    async def _more_draws(self, items: ItemSet, ctx: RunContext, results: list[AnswerResult]) -> int:
        """Draws 1..K-1 of every answer (draw 0 is the method's own run); each answer's grade becomes the mean
        of its valid draws, its details keep every draw's grade (None: invalid) and cache key, and its results
        are written again.  How many answers without a valid first draw got a valid grade."""
        draws: list[Sequence[AnswerResult]] = []
        for k in range(1, self.cfg.samples):
            sub = _DrawContext(ctx.run_id, ctx.store, {"judge": ctx.engine.for_draw(k)}, ctx.observer, ctx.executor)
            draws.append((await self.grader.run(items, sub, self.cfg.options)).results)
        now_valid = 0
        for i, r in enumerate(results):
            got = [r, *(d[i] for d in draws)]
            assert all(g.answer_id == r.answer_id for g in got)
            scores = [g.score if g.valid else None for g in got]
            valid = [s for s in scores if s is not None]
            r.details = {**r.details, "draws": scores,  # a new dict: a chunked run's details may be shared
                         "draw_keys": [(g.details.get("attempts") or [{}])[0].get("key") for g in got]}
            r.score = sum(valid) / len(valid) if valid else None
            now_valid += bool(valid) and not r.valid
            r.valid = bool(valid)
        ctx.write_results(ResultRow(r.answer_id, r.question_id, r.score, r.valid, r.details) for r in results)
        return now_valid


class _DrawContext(RunContext):
    """A repeated draw's context: its results go back to :meth:`GradeRun._more_draws`, not to the store."""

    def write_results(self, rows: Iterable[ResultRow]) -> None:
        pass


def run_id_for(items: ItemSet, judge: Judge, cfg: RunConfig) -> str:
    from knockout.runs import run_id_for as hash_id

    return hash_id(GradeRun(items, judge, cfg).identity())


async def run_async(items: ItemSet, judge: Judge, store: Store, cfg: RunConfig, *,
                    observer: Observer | None = None, executor: str | None = None) -> RunReport:
    """Grade ``items`` (see :class:`GradeRun`) through ``store`` (``executor``: where the judge requests
    run, e.g. ``"ray"``; see :func:`knockout.runs.execute_async`)."""
    return await execute_async(GradeRun(items, judge, cfg), store, observer=observer, executor=executor)


def run(items: ItemSet, judge: Judge, store: Store, cfg: RunConfig, *, observer: Observer | None = None,
        executor: str | None = None) -> RunReport:
    """Synchronous :func:`run_async` (also inside a running event loop); closes the judge afterwards."""
    return execute(GradeRun(items, judge, cfg), store, observer=observer, executor=executor)
