"""``knockout solve``: a model answers exam questions as a SciEx examinee (the ``solve`` run kind).

As the authors do (Dinh et al. 2024, section 3.1; github TuAnh23/SciEx ``llm_solve_exam.py``), the model
gets one question at a time: the answer prompt of the exam's language (presets ``sciex-solve-en`` and
``sciex-solve-de``, paper Figures 5 and 6) as the system message and the question as its JSON (without
``Index``) as the user message, with the question's figures as the model can take them
(:mod:`knockout.sciex._figures`: ``none`` for a text-only model, which gets the text and the run records
the figures left out; ``separate`` captioned images; ``stacked`` into one image, with the
``sciex-solve-*-stacked`` prompt that says so).

One run per examinee model: the run's judge role is the examinee (the engine, cache and store are the
same as for judging), its id hashes the model's identity, the examinee name, prompt, figures mode,
generation parameters and the questions, so a killed ``solve`` resumes from the store with no repeated
call, and adding a model later leaves the other models' runs as they are.  Each answer is one result
(item id ``<question id>/<examinee>``, the id the SciEx loader gives it back); an empty reply is asked
again with the reminder, then recorded as no answer (SciEx's empty answers, graded 0 by the experts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from knockout._bounds import MAX_CONCURRENCY, MAX_RETRIES, Name, Spec, bounded
from knockout.data._io import EMPTY_ANSWER
from knockout.data._records import Answer, ItemSet, Question
from knockout.engine import CallTrace, Subject, Task
from knockout.errors import ConfigError
from knockout.judges._base import GenParams, Judge, Message
from knockout.prompts._builder import parser_for, reminder_for
from knockout.prompts._render import judge_messages
from knockout.prompts._templates import PRESET_LANGUAGES, PromptTemplate, fmt_points, get_template, preset_language
from knockout.runs import Oracle, Run, RunContext, RunSummary
from knockout.sciex._figures import question_figures, resolve_mode
from knockout.storage._store import ResultRow

#: What a solve prompt may show the examinee (never the reference answer, never others' answers).
SOLVE_FIELDS = frozenset({"question", "max_points"})
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def examinee_name(spec: str) -> str:
    """A file-safe examinee name from a model spec: ``llamacpp:qwen2.5-coder-0.5b`` ->
    ``llamacpp-qwen2.5-coder-0.5b`` (options after ``?`` are left out)."""
    head = spec.partition("?")[0]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", head).strip("-.")
    return name or "model"


def parse_model(text: str) -> tuple[str, str]:
    """``NAME=SPEC`` or ``SPEC`` -> (examinee name, spec)."""
    name, sep, spec = text.partition("=")
    if sep and _NAME.match(name) and "?" not in name and ":" not in name:
        return name, spec
    return examinee_name(text), text


def check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ConfigError(f"examinee name '{name}' must start with a letter or digit and use only letters, digits, "
                          "'.', '_' and '-' (it names the answer file)")


def answer_id(q: Question, examinee: str) -> str:
    return f"{q.id}/{examinee}"


class SolveDetails(CallTrace):
    """One answer of a solve run: the prompt, the figures sent and left out, and the call trace."""

    model_config = ConfigDict(extra="forbid")

    prompt: str
    examinee: str
    figures: str
    figures_sent: int = 0
    figures_left_out: list[str] = Field(default_factory=list)


class SolveSummary(RunSummary):
    """``knockout solve --json``: one per examinee model."""

    model_config = ConfigDict(extra="forbid")

    examinee: str
    questions: int
    answered: int
    empty: int
    failed_answers: int
    figures: str
    figures_sent: int
    figures_left_out: int


@pydantic_dataclass(config=ConfigDict(arbitrary_types_allowed=True, allow_inf_nan=False))
class SolveConfig:
    """What a solve run does (a pydantic dataclass: the bounds are checked however it is made)."""

    prompt: Spec = "auto"  # a solve preset or template file; auto: sciex-solve-<language>[-stacked]
    figures: Name = "auto"  # auto | none | separate | stacked
    params: GenParams = field(default_factory=lambda: GenParams(max_tokens=1024))
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    format_retries: int = Field(default=2, ge=0, le=MAX_RETRIES)

    @model_validator(mode="wrap")
    @classmethod
    def _bounds(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return bounded(data, handler)  # a value out of bounds: a ConfigError naming the field


@dataclass
class SolveReport:
    run_id: str
    examinee: str
    model: str
    simulated: bool
    data_source: str
    figure_mode: str
    stats: dict[str, Any]
    answers: list[Answer]  # the answers obtained (empty replies as EMPTY_ANSWER with meta.empty)
    results: list[ResultRow]
    questions: int
    #: ``complete``, or ``incomplete`` when judge requests failed for good (set by the lifecycle)
    status: str = "complete"

    def summary(self) -> dict[str, Any]:
        details = [r.details for r in self.results]
        s = SolveSummary(
            run_id=self.run_id, kind="solve", method="solve", judge=self.model, simulated_judge=self.simulated,
            data=self.data_source, status=self.status, **self.stats, examinee=self.examinee, questions=self.questions,
            answered=sum(1 for a in self.answers if not a.meta.get("empty")),
            empty=sum(1 for a in self.answers if a.meta.get("empty")),
            failed_answers=sum(1 for d in details if d.get("failed")),
            figures=self.figure_mode, figures_sent=sum(int(d.get("figures_sent", 0)) for d in details),
            figures_left_out=sum(len(d.get("figures_left_out") or []) for d in details),
        )
        return s.model_dump(mode="json", exclude_none=True)


def solve_oracle(questions: dict[str, Question]) -> Oracle:
    """What a simulated examinee (the scripted judge) may know: the reference answer of its question."""

    def facts(subject: Subject) -> dict[str, Any]:
        q = questions[subject.ids[0]]
        return {"kind": "solve", "max_points": q.max_points, "reference": q.reference}

    return facts


class SolveRun(Run[SolveReport]):
    """``model`` answers every question of ``exam`` as the examinee ``examinee``."""

    kind = "solve"

    def __init__(self, exam: ItemSet, model: Judge, cfg: SolveConfig | None = None, *, examinee: str | None = None,
                 figure_dir: Path | None = None) -> None:
        cfg = cfg or SolveConfig()
        super().__init__(method="solve", data_source=exam.source, params=cfg.params, concurrency=cfg.concurrency,
                         format_retries=cfg.format_retries)
        self.questions = ItemSet(exam.questions.values(), [], source=exam.source)
        self.model = model
        self.cfg = cfg
        self.examinee = examinee or examinee_name(model.spec)
        self.figure_dir = figure_dir
        self._existing = {a.examinee for a in exam}

    @property
    def figure_mode(self) -> str:
        return resolve_mode(self.cfg.figures, self.model.supports_images)

    def template_for(self, q: Question) -> PromptTemplate:
        if self.cfg.prompt != "auto":
            t = get_template(self.cfg.prompt)
        else:
            lang = preset_language(q.language)
            if lang is None:
                raise ConfigError(f"question '{q.id}' is in language '{q.language}' and the solve prompt has presets "
                                  f"in {', '.join(PRESET_LANGUAGES)} only; choose one with --prompt NAME "
                                  "(e.g. --prompt sciex-solve-en)")
            stacked = "-stacked" if self.figure_mode == "stacked" and q.images else ""
            t = get_template(f"sciex-solve-{lang}{stacked}")
        if t.kind != "solve":
            raise ConfigError(f"prompt '{t.name}' is a {t.kind} template; knockout solve needs a solve template")
        if not t.fields <= SOLVE_FIELDS:
            extra = ", ".join("{" + f + "}" for f in sorted(t.fields - SOLVE_FIELDS))
            raise ConfigError(f"prompt '{t.name}' shows {extra} to the examinee; a solve template may use only "
                              "{question} and {max_points}")
        return t

    def judges(self) -> dict[str, Judge]:
        return {"judge": self.model}

    def identity(self) -> dict[str, Any]:
        return {
            "kind": "solve",
            "examinee": self.examinee,
            "prompt": self.cfg.prompt,
            "figures": self.figure_mode,
            "params": self.cfg.params.model_dump(mode="json"),
            "format_retries": self.cfg.format_retries,
            "model": self.model.identity(),
            "data": self.questions.fingerprint(),
        }

    def config(self) -> dict[str, Any]:
        return {"examinee": self.examinee, "prompt": self.cfg.prompt, "figures": self.figure_mode,
                "params": self.cfg.params.model_dump(mode="json"), "format_retries": self.cfg.format_retries}

    def snapshot(self) -> ItemSet:
        return self.questions

    def check(self) -> None:
        check_name(self.examinee)
        if self.examinee in self._existing:
            raise ConfigError(f"examinee '{self.examinee}' already has answers in the exam data; name the model "
                              "another way: --model NAME=SPEC")
        if not self.questions.questions:
            raise ConfigError(f"{self.questions.source}: no questions to solve")
        for q in self.questions.questions.values():
            self.template_for(q)

    def oracle(self) -> Oracle:
        return solve_oracle({answer_id(q, self.examinee): q for q in self.questions.questions.values()})

    def messages(self, q: Question, t: PromptTemplate, images: tuple[str, ...]) -> list[Message]:
        """The examinee's request; the exam's question is the prompt itself here, not quoted data."""
        values = {"question": q.text, "max_points": fmt_points(q.max_points)}
        return judge_messages(t, values, images=images, quoting="none").messages

    async def execute(self, ctx: RunContext) -> SolveReport:
        mode = self.figure_mode
        tasks: list[Task] = []
        meta: list[tuple[Question, str, dict[str, Any]]] = []
        for q in self.questions.questions.values():
            t = self.template_for(q)
            prepared = question_figures(q, mode, self.figure_dir)
            aid = answer_id(q, self.examinee)
            tasks.append(Task(messages=self.messages(q, t, prepared.images), parse=parser_for(t, q.max_points),
                              reminder=reminder_for(t, q.max_points), subject=Subject("solve", (aid,)), label=aid))
            meta.append((q, aid, {"prompt": t.name, "examinee": self.examinee, "figures": mode,
                                  "figures_sent": len(prepared.images), "figures_left_out": list(prepared.left_out)}))
        ctx.plan(len(tasks))
        outcomes = await ctx.engine.ask_all(tasks)
        rows: list[ResultRow] = []
        answers: list[Answer] = []
        for (q, aid, base), o in zip(meta, outcomes, strict=True):
            details = SolveDetails(**base, **o.trace().model_dump())
            rows.append(ResultRow(aid, q.id, None, o.valid, details.model_dump(mode="json")))
            if o.failed:  # the backend failed: no answer (a rerun asks again)
                continue
            text = str(o.value) if o.valid else ""
            answers.append(Answer(id=aid, question_id=q.id, examinee=self.examinee, text=text or EMPTY_ANSWER,
                                  meta={"model": self.model.spec, **({"empty": True} if not text else {})}))
        ctx.write_results(rows)
        return SolveReport(
            run_id=ctx.run_id, examinee=self.examinee, model=self.model.spec, simulated=self.model.simulated,
            data_source=self.questions.source, figure_mode=mode, stats=ctx.stats(), answers=answers, results=rows,
            questions=len(self.questions.questions),
        )
