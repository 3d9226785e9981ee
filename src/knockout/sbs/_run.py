"""A side-by-side run (the ``sbs`` run kind): both orders of every item, through the engine and the store.

The run is stored with ``kind = "sbs"`` (method ``sbs`` or ``sbs-debate-soft|hard``); its id is a hash
of the prompt, judging mode, generation parameters, format retries, metric windows, judge identity and
data, so the same command twice is the same run (every call a cache hit) and a killed run resumes.  The
lifecycle is :mod:`knockout.runs`'s.  Judging modes (``none`` = one call per order; ``soft``/``hard``
debate) are found by name in :data:`modes`.

Per item, ``results.details`` holds (:class:`SbsDetails`, documented in docs/side-by-side.md):
``verdicts`` {swap0, swap1} in candidate terms (A-E), ``display`` {swap0, swap1} as the judge said
them, ``human`` (ensembled verdict or null), ``human_verdicts``, ``prompt``, ``debate``, ``error``
(null or the reasons for E), and ``calls`` {swap0, swap1}: the engine's record of each order
(``valid``, ``error``, ``failed``, ``attempts`` with call keys and raw replies; with a debate also
``debate`` = the agents' records and verdicts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass

from knockout._bounds import MAX_CONCURRENCY, MAX_COUNT, MAX_RETRIES, Name, Spec, bounded
from knockout._registry import Registry
from knockout._verdict import Verdict
from knockout.engine import Engine, Observer
from knockout.errors import ConfigError
from knockout.judges._base import GenParams, Judge
from knockout.judges._slot import Slot, normalised
from knockout.prompts._slots import check_preference
from knockout.prompts._templates import PromptTemplate
from knockout.runs import Oracle, Run, RunContext, RunSummary, execute, execute_async
from knockout.sbs._data import SbsItem, to_itemset
from knockout.sbs._judging import Job, OrderResult, make_jobs, sbs_oracle, sbs_template
from knockout.sbs._metrics import human_agreement, sbs_metrics, soft_metrics
from knockout.sbs._verdicts import CLASSES, INVALID, to_candidate
from knockout.storage._store import ResultRow, Store

#: Paper Table 9: temperature 0.0 and max_tokens 1024 for the judges.
DEFAULT_PARAMS = GenParams(temperature=0.0, max_tokens=1024)

JudgingMode = Callable[[Engine, list[Job], PromptTemplate], Awaitable[list[OrderResult]]]
#: How each order is judged: ``none`` (one call), ``soft`` / ``hard`` (multi-agent debate, 3 calls).
modes: Registry[JudgingMode] = Registry("side-by-side judging mode", group="knockout.sbs_modes")
modes.add("none", "knockout.sbs._judging:judge_single", "one judge call per order")
modes.add("soft", "knockout.sbs._debate:judge_soft", "debate; agent 2 may agree or disagree")
modes.add("hard", "knockout.sbs._debate:judge_hard", "debate; agent 2 always disagrees (Titova et al., D.3)")


@pydantic_dataclass(config=ConfigDict(arbitrary_types_allowed=True, allow_inf_nan=False))
class SbsConfig:
    """What a side-by-side run does (a pydantic dataclass: the bounds are checked however it is made)."""

    prompt: Spec = "I"
    debate: Name = "none"  # a judging mode: none | soft | hard
    params: GenParams = field(default_factory=lambda: DEFAULT_PARAMS)
    # 0: an unreadable verdict is class E at once, as the paper counts it
    format_retries: int = Field(default=0, ge=0, le=MAX_RETRIES)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    window: int = Field(default=20, ge=1, le=MAX_COUNT)  # MPCC sliding window size N
    #: how verdicts are read (docs/methods.md#the-verdict-slot): auto, expected, constrained, text; a prompt
    #: without a choice slot (those with reasoning before the verdict) is read as text
    verdict: Name = "auto"
    #: ``letter`` (each order's most probable letter, today's verdicts) or ``soft``: besides those, each item's
    #: verdict from both orders' token probabilities with the position prior removed (docs/methods.md#soft-
    #: preferences); needs the ``expected`` verdict slot
    preference: Name = "letter"
    stride: int = Field(default=5, ge=1, le=MAX_COUNT)  # and stride K

    @model_validator(mode="wrap")
    @classmethod
    def _bounds(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return bounded(data, handler)  # a value out of bounds: a ConfigError naming the field

    def __post_init__(self) -> None:
        if self.debate not in modes:
            raise ConfigError(f"debate must be one of {', '.join(modes.names())}, got {self.debate!r}")

    @property
    def method(self) -> str:
        return "sbs" if self.debate == "none" else f"sbs-debate-{self.debate}"


class SbsDetails(BaseModel):
    """One item's stored result (see the module doc)."""

    model_config = ConfigDict(extra="forbid")

    verdicts: dict[str, Verdict]
    display: dict[str, Verdict]
    human: Verdict | None
    human_verdicts: dict[str, Verdict]
    prompt: str
    debate: str
    error: str | None
    calls: dict[str, dict[str, Any]]
    #: ``--preference soft``: the probability that the candidate is better, both orders averaged, and the item's
    #: verdict from both orders (:meth:`ItemVerdicts.soft`); absent otherwise
    preference: float | None = None
    soft: Verdict | None = None
    #: per order (swap 0, swap 1), the probability that the response shown first is better (None: invalid)
    first_better: list[float | None] | None = None

    @model_serializer(mode="wrap")
    def _drop_letters(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for k in ("preference", "soft", "first_better"):
            if out.get(k, 0) is None:  # letters: the details stay as they were before soft preferences
                del out[k]
        return out


@dataclass
class Soft:
    """An item's soft verdict: ``verdict`` (A-D in candidate terms, E without a readable order), ``preference``
    (the probability that the candidate is better) and ``first`` (per order, the probability that the response
    shown first is better: what position bias reads)."""

    verdict: Verdict
    preference: float | None
    first: tuple[float | None, float | None]


@dataclass
class ItemVerdicts:
    item: SbsItem
    orders: list[OrderResult]  # swap 0, swap 1
    #: the verdict slot both orders carried (None: read from free text); set for ``--preference soft``
    slot: Slot | None = None

    def verdict(self, swap: int) -> Verdict:
        return self.orders[swap].candidate(swap)

    def soft(self) -> Soft:
        """Both orders read together with the position prior removed: each order's distribution over A-D (the
        judge's token probabilities at the choice slot, normalised over the four letters; a reply without them:
        its letter, all of the probability) put in candidate terms (swap 1's A and B traded) and averaged; the
        verdict is the most probable class of the mean (A, B, C, D in that order on a tie), the preference
        ``P(A) + (P(C) + P(D)) / 2`` of the mean -- the mean of ``P(first better)`` in swap 0 and ``1 - P(first
        better)`` in swap 1 (alpaca_eval reads one random order and flips it back; both orders are played here)."""
        mean = dict.fromkeys(CLASSES, 0.0)
        first: list[float | None] = []
        used = 0
        for swap, o in enumerate(self.orders):
            if not o.valid:
                first.append(None)
                continue
            attempts = o.details.get("attempts") or []
            probs = normalised(self.slot, attempts[-1].get("verdict")) if self.slot and attempts else None
            display: dict[str, float] = (dict(zip(self.slot.values, probs[0], strict=True)) if self.slot and probs
                                         else {str(c): float(c == o.display) for c in CLASSES})
            first.append(display.get("A", 0.0) + (display.get("C", 0.0) + display.get("D", 0.0)) / 2)
            for c, p in display.items():
                mean[to_candidate(c, swap)] += p
            used += 1
        if not used:
            return Soft(INVALID, None, (first[0], first[1]))
        mean = {c: p / used for c, p in mean.items()}
        best = max(CLASSES, key=lambda c: mean[c])
        return Soft(best, mean[Verdict.A] + (mean[Verdict.C] + mean[Verdict.D]) / 2, (first[0], first[1]))

    def typed(self, prompt: str, debate: str) -> SbsDetails:
        errors = [f"swap{s}: {o.details.get('error')}" for s, o in enumerate(self.orders) if not o.valid]
        soft = self.soft() if self.slot is not None else None
        return SbsDetails(
            verdicts={f"swap{s}": self.verdict(s) for s in (0, 1)},
            display={f"swap{s}": o.display for s, o in enumerate(self.orders)},
            human=self.item.human,
            human_verdicts=self.item.human_verdicts,
            prompt=prompt,
            debate=debate,
            error="; ".join(errors) or None,
            calls={f"swap{s}": o.details for s, o in enumerate(self.orders)},
            preference=soft.preference if soft else None,
            soft=soft.verdict if soft else None,
            first_better=list(soft.first) if soft else None,
        )

    def details(self, prompt: str, debate: str) -> dict[str, Any]:
        return self.typed(prompt, debate).model_dump(mode="json")


class SbsSummary(RunSummary):
    """``knockout sbs --json`` (keys in docs/side-by-side.md)."""

    model_config = ConfigDict(extra="forbid")

    prompt: str
    debate: str
    items: int
    orders_valid: int
    orders_invalid: int
    metrics: dict[str, Any]
    human_agreement: dict[str, Any]


@dataclass
class SbsReport:
    run_id: str
    method: str
    judge: str
    simulated: bool
    data_source: str
    prompt: str
    debate: str
    stats: dict[str, Any]
    metrics: dict[str, Any]
    human_agreement: dict[str, Any]
    items: list[ItemVerdicts]
    #: ``complete``, or ``incomplete`` when judge requests failed for good (set by the lifecycle)
    status: str = "complete"

    def summary(self) -> dict[str, Any]:
        """The ``knockout sbs --json`` object (keys in docs/side-by-side.md)."""
        return SbsSummary(
            run_id=self.run_id, kind="sbs", method=self.method, judge=self.judge, simulated_judge=self.simulated,
            data=self.data_source, status=self.status, prompt=self.prompt, debate=self.debate, items=len(self.items),
            orders_valid=sum(o.valid for it in self.items for o in it.orders),
            orders_invalid=sum(not o.valid for it in self.items for o in it.orders),
            **self.stats, metrics=self.metrics, human_agreement=self.human_agreement,
        ).model_dump(mode="json")


class SbsRun(Run[SbsReport]):
    """Side-by-side evaluation of ``items`` (candidate vs baseline) by ``judge``."""

    kind = "sbs"

    def __init__(self, items: list[SbsItem], judge: Judge, cfg: SbsConfig, *, source: str) -> None:
        super().__init__(method=cfg.method, data_source=source, params=cfg.params, concurrency=cfg.concurrency,
                         format_retries=cfg.format_retries)
        self.items = items
        self.judge = judge
        self.cfg = cfg
        self.template = sbs_template(cfg.prompt)
        self.snap = to_itemset(items, source)
        from knockout.prompts._slots import resolve_verdict

        mode = resolve_verdict(cfg.verdict, judge)
        #: the verdict mode the run uses: recorded in its identity and configuration unless it is text
        slot = self.template.slot == "choice" and (self.template.slot_auto or cfg.verdict != "auto")
        self.verdict = mode if mode != "text" and slot else "text"
        check_preference(cfg.preference, True, self.verdict)
        self.soft = cfg.preference == "soft"

    def template_fields(self) -> dict[str, str]:
        t = self.template
        return {"name": t.name, "system": t.system, "template": t.template, "reminder": t.reminder,
                "parser": t.parser}

    def judges(self) -> dict[str, Judge]:
        return {"judge": self.judge}

    def identity(self) -> dict[str, Any]:
        return {
            "kind": "sbs",
            "method": self.cfg.method,
            "template": self.template_fields(),
            "params": self.cfg.params.model_dump(mode="json"),
            "format_retries": self.cfg.format_retries,
            "window": self.cfg.window,
            "stride": self.cfg.stride,
            "judge": self.judge.identity(),
            "data": self.snap.fingerprint(),
            **({"verdict": self.verdict} if self.verdict != "text" else {}),
            **({"preference": "soft"} if self.soft else {}),
        }

    def config(self) -> dict[str, Any]:
        return {
            "prompt": self.template.name,
            "template": self.template_fields(),
            "debate": self.cfg.debate,
            "params": self.cfg.params.model_dump(mode="json"),
            "format_retries": self.cfg.format_retries,
            "window": self.cfg.window,
            "stride": self.cfg.stride,
            "verdict": self.verdict,
            **({"preference": "soft"} if self.soft else {}),
        }

    def snapshot(self) -> Any:
        return self.snap

    def check(self) -> None:
        # validates every item before anything is written
        self.jobs = make_jobs(self.items, self.template, None if self.verdict == "text" else self.verdict)

    def oracle(self) -> Oracle:
        return sbs_oracle(self.items)

    async def execute(self, ctx: RunContext) -> SbsReport:
        t, cfg = self.template, self.cfg
        orders = await modes.get(cfg.debate)(ctx.engine, self.jobs, t)
        slot = self.jobs[0].slot if self.soft and self.jobs else None
        verdicts = [ItemVerdicts(it, orders[2 * i : 2 * i + 2], slot) for i, it in enumerate(self.items)]
        ctx.write_results(ResultRow(v.item.id, v.item.id, None, all(o.valid for o in v.orders),
                                    v.details(t.name, cfg.debate)) for v in verdicts)
        humans = [v.item.human for v in verdicts]
        metrics = sbs_metrics(
            [v.verdict(0) for v in verdicts],
            [v.verdict(1) for v in verdicts],
            humans if any(h is not None for h in humans) else None,
            window=cfg.window,
            stride=cfg.stride,
        )
        if self.soft:
            softs = [v.soft() for v in verdicts]
            metrics["soft"] = soft_metrics([s.verdict for s in softs], [s.first for s in softs],
                                           humans if any(h is not None for h in humans) else None)
        annotations = [it.human_verdicts for it in self.items if it.human_verdicts]
        return SbsReport(
            run_id=ctx.run_id,
            method=cfg.method,
            judge=self.judge.spec,
            simulated=self.judge.simulated,
            data_source=self.data_source,
            prompt=t.name,
            debate=cfg.debate,
            stats=ctx.stats(),
            metrics=metrics,
            human_agreement=human_agreement(annotations) if annotations else {},
            items=verdicts,
        )


def sbs_run_id(items: list[SbsItem], judge: Judge, cfg: SbsConfig, *, source: str) -> str:
    from knockout.runs import run_id_for

    return run_id_for(SbsRun(items, judge, cfg, source=source).identity())


async def run_sbs_async(
    items: list[SbsItem], judge: Judge, store: Store, cfg: SbsConfig, *, source: str,
    observer: Observer | None = None, executor: str | None = None,
) -> SbsReport:
    return await execute_async(SbsRun(items, judge, cfg, source=source), store, observer=observer,
                               executor=executor)


def run_sbs(
    items: list[SbsItem], judge: Judge, store: Store, cfg: SbsConfig, *, source: str,
    observer: Observer | None = None, executor: str | None = None,
) -> SbsReport:
    """Synchronous :func:`run_sbs_async` (also inside a running event loop); closes the judge."""
    return execute(SbsRun(items, judge, cfg, source=source), store, observer=observer, executor=executor)
