"""A jury (the ``jury`` run kind): several judges grade the same items, and their results are aggregated.

A jury is a composition, not a second lifecycle: each member is an ordinary run of its own kind (a
``GradeRun`` for grading with any method, a ``SbsRun`` for side-by-side), run through
:func:`knockout.runs.execute_async` on the same store, all members concurrently.  A member's run is
therefore exactly the run a solo ``knockout grade --judge X`` (or ``knockout sbs``) makes, with the same
run id, cache and results; running a jury after its members ran alone costs no judge call.  The jury then
writes its aggregate as its own run (kind ``jury``; ``config.of`` says what it aggregates, ``grade`` or
``sbs``, and ``config.members`` lists each member's label and run id), which reports read like a run of
that kind, with the jury section (each member's and the jury's agreement with humans, inter-judge
agreement, the jury's cost) on top.  Aggregates: :mod:`knockout.jury._aggregate`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from knockout._verdict import Verdict
from knockout.data._records import ItemSet
from knockout.engine import Done, Event, Observer, Planned
from knockout.engine._engine import prompt_reuse
from knockout.errors import ConfigError
from knockout.judges._base import GenParams, Judge
from knockout.jury._aggregate import DEFAULT, check_aggregate, score_aggregates, verdict_aggregates
from knockout.runs import Run, RunContext, RunSummary, execute_async, run_id_for
from knockout.storage._store import ResultRow

#: engine counters summed over the members (waves: the deepest member; times: the jury's own)
SUMMED = ("judge_calls", "cache_hits", "prompt_tokens", "completion_tokens", "cached_prompt_tokens",
          "cached_completion_tokens", "reused_prompt_tokens", "invalid_requests", "failed",
          "format_retries", "images_dropped", "waited_for_other_process",
          "resent_after_lost_worker")


class JuryGuard(BaseModel):
    """The persuasion guard's reading of an answer across a jury's members (``details["guard"]`` of a jury's grade,
    read by the trust marks as a member's is): flagged when any member's guard flagged it."""

    model_config = ConfigDict(extra="forbid")

    flagged: bool
    #: the members whose guard flagged the answer
    flagged_by: list[str] = []
    #: the largest score of the answer's parts over the members (how surely some part is aimed at the grader)
    p_address: float | None = None
    #: the parts any member removed before its second grade
    removed: list[str] = []
    #: the jury's grade had no member's guard acted (the aggregate of each member's whole-answer grade)
    grade_full: float | None = None
    graded_whole: bool = False


class JuryDetails(BaseModel):
    """A graded answer's jury result: each member's score (None: invalid), the spread, and the guard's flag
    carried from the members (``guard``: None where no member ran the guard)."""

    model_config = ConfigDict(extra="forbid")

    members: dict[str, float | None]
    valid_members: int
    spread: float | None
    error: str | None = None
    guard: JuryGuard | None = None


def jury_guard(labels: Sequence[str], guards: Sequence[dict[str, Any] | None], scores: Sequence[float | None],
               aggregate: Any) -> JuryGuard | None:
    """The members' guard readings of one answer (each member's ``details["guard"]`` or None) as the jury's: the
    flag travels (any member's), with who flagged it, the largest address score, the removed parts, and the grade
    the jury would have given had no guard acted (``aggregate`` over each valid member's ``grade_full``, else its
    grade)."""
    if not any(isinstance(g, dict) for g in guards):
        return None
    by = [label for label, g in zip(labels, guards, strict=True) if isinstance(g, dict) and g.get("flagged")]
    p = [float(g["p_address"]) for g in guards if isinstance(g, dict) and g.get("p_address") is not None]
    removed = list(dict.fromkeys(r for g in guards if isinstance(g, dict) for r in g.get("removed") or []))
    full = [float(g["grade_full"]) if isinstance(g, dict) and g.get("flagged") and g.get("grade_full") is not None
            else s for g, s in zip(guards, scores, strict=True) if s is not None]
    return JuryGuard(flagged=bool(by), flagged_by=by, p_address=max(p) if p else None, removed=removed,
                     grade_full=aggregate(full) if by and full else None,
                     graded_whole=any(isinstance(g, dict) and g.get("graded_whole") for g in guards))


class JurySbsDetails(BaseModel):
    """A side-by-side item's jury result: the aggregated verdict per order and each member's."""

    model_config = ConfigDict(extra="forbid")

    verdicts: dict[str, Verdict]
    human: Verdict | None
    human_verdicts: dict[str, Verdict]
    members: dict[str, dict[str, Verdict]]
    error: str | None = None


class JurySummary(RunSummary):
    """``knockout grade --judge A --judge B --json`` (and ``knockout sbs`` with several judges)."""

    model_config = ConfigDict(extra="forbid")

    of: str
    aggregate: str
    members: list[dict[str, Any]]
    # grading juries
    questions: int | None = None
    answers: int | None = None
    valid: int | None = None
    invalid: int | None = None
    #: answers any member's persuasion guard flagged (their jury grades are flagged too)
    flagged: int | None = None
    agreement: dict[str, Any] | None = None
    # side-by-side juries
    prompt: str | None = None
    items: int | None = None
    orders_valid: int | None = None
    orders_invalid: int | None = None
    metrics: dict[str, Any] | None = None
    human_agreement: dict[str, Any] | None = None


@dataclass
class JuryReport:
    run_id: str
    of: str
    method: str
    judge: str
    simulated: bool
    data_source: str
    aggregate: str
    labels: list[str]
    member_reports: list[Any]
    stats: dict[str, Any]
    body: dict[str, Any] = field(default_factory=dict)
    #: grading juries: the jury's per-answer results (``AnswerResult``)
    results: list[Any] = field(default_factory=list)
    #: ``complete``, or ``incomplete`` when judge requests failed for good (set by the lifecycle)
    status: str = "complete"

    def summary(self) -> dict[str, Any]:
        members = []
        for label, rep in zip(self.labels, self.member_reports, strict=True):
            s = rep.summary()
            m = {"label": label, "run_id": s["run_id"], "judge": s["judge"], "method": s["method"]}
            if self.of == "grade":
                m["agreement"] = s.get("agreement")
            else:
                m["prompt"] = s.get("prompt")
                met = s.get("metrics") or {}
                m["kappa"] = (met.get("kappa") or {}).get("mean")
                m["mpcc"] = (met.get("mpcc") or {}).get("mean")
            members.append(m)
        return JurySummary(run_id=self.run_id, kind="jury", method=self.method, judge=self.judge,
                           simulated_judge=self.simulated, data=self.data_source, status=self.status, of=self.of,
                           aggregate=self.aggregate, members=members, **self.stats, **self.body,
                           ).model_dump(mode="json", exclude_none=True)


class _MergedProgress:
    """The members' progress events as one run's: planned requests and totals summed over members."""

    def __init__(self, observer: Observer, n: int) -> None:
        self.observer = observer
        self.planned = [0] * n
        self.invalid = [0] * n
        self.tokens = [0] * n

    def member(self, i: int) -> Observer:
        def observe(ev: Event) -> None:
            if isinstance(ev, Planned):
                self.planned[i] = ev.requests
                self.observer(Planned(sum(self.planned)))
            elif isinstance(ev, Done):
                self.invalid[i], self.tokens[i] = ev.invalid_total, ev.tokens_total
                self.observer(replace(ev, invalid_total=sum(self.invalid), tokens_total=sum(self.tokens)))
            else:
                self.observer(ev)

        return observe


def summed_stats(summaries: Sequence[dict[str, Any]], own: dict[str, Any]) -> dict[str, Any]:
    """The members' engine counters added up; waves of the deepest member; wall time the jury's."""
    out: dict[str, Any] = {k: sum(int(s.get(k, 0)) for s in summaries) for k in SUMMED}
    out["waves"] = max((int(s.get("waves", 0)) for s in summaries), default=0)
    wall = float(own.get("wall_s", 0.0))
    out["wall_s"] = wall
    out["calls_per_s"] = round(out["judge_calls"] / wall, 3) if wall > 0 else 0.0
    calls = out["judge_calls"]
    lat = sum(float(s.get("mean_latency_s", 0.0)) * int(s.get("judge_calls", 0)) for s in summaries)
    out["mean_latency_s"] = round(lat / calls, 3) if calls else 0.0
    out.update(prompt_reuse(out["prompt_tokens"], out["reused_prompt_tokens"], calls))
    return out


class JuryRun(Run[JuryReport]):
    """Run ``members`` (runs of one kind on the same items) and aggregate their results."""

    kind = "jury"

    def __init__(self, members: Sequence[Run[Any]], labels: Sequence[str], *, aggregate: str | None = None,
                 trim: int = 1) -> None:
        if len(members) < 2:
            raise ConfigError("a jury needs at least two members")
        if len(labels) != len(members) or len(set(labels)) != len(labels):
            raise ConfigError("each jury member needs its own label")
        kinds = {m.kind for m in members}
        if len(kinds) != 1 or next(iter(kinds)) not in DEFAULT:
            raise ConfigError(f"a jury's members are all grading runs or all side-by-side runs (got "
                              f"{', '.join(sorted(kinds))})")
        self.of = next(iter(kinds))
        self.aggregate = aggregate or DEFAULT[self.of]
        check_aggregate(self.of, self.aggregate)
        if trim < 0:
            raise ConfigError("trim must be >= 0")
        self.trim = trim
        self.members = list(members)
        self.labels = list(labels)
        methods = {m.method for m in members}
        super().__init__(method=methods.pop() if len(methods) == 1 else "mixed", data_source=members[0].data_source,
                         params=GenParams(), format_retries=members[0].format_retries)

    def member_ids(self) -> list[str]:
        return [run_id_for(m.identity()) for m in self.members]

    def judges(self) -> dict[str, Judge]:
        roles = {"judge": self.members[0].judges()["judge"]}
        for i, m in enumerate(self.members[1:], start=2):
            roles[f"member{i}"] = m.judges()["judge"]
        return roles

    def spec(self) -> str:
        return f"jury({', '.join(self.labels)})"

    def identity(self) -> dict[str, Any]:
        return {"kind": "jury", "of": self.of, "aggregate": self.aggregate,
                **({"trim": self.trim} if self.aggregate == "trimmed" else {}),
                "members": [m.identity() for m in self.members]}

    def config(self) -> dict[str, Any]:
        members = []
        for label, rid, m in zip(self.labels, self.member_ids(), self.members, strict=True):
            members.append({"label": label, "run_id": rid, "judge": m.spec(), "method": m.method,
                            "prompt": _prompt_of(m)})
        cfg: dict[str, Any] = {"of": self.of, "aggregate": self.aggregate, "members": members}
        if self.aggregate == "trimmed":
            cfg["trim"] = self.trim
        first = self.members[0].config()
        if self.of == "grade":
            cfg["options"] = first.get("options", {})
            cfg["params"] = first.get("params", {})
        else:
            cfg.update(prompt="jury", debate=first.get("debate", "none"), window=first.get("window", 20),
                       stride=first.get("stride", 5), params=first.get("params", {}))
        return cfg

    def snapshot(self) -> ItemSet | None:
        return self.members[0].snapshot()

    def check(self) -> None:
        for m in self.members:
            m.check()
        prints = {s.fingerprint() if (s := m.snapshot()) is not None else None for m in self.members}
        if len(prints) != 1:
            raise ConfigError("a jury's members must judge the same items")
        ids = self.member_ids()
        for i, rid in enumerate(ids):
            if rid in ids[:i]:
                raise ConfigError(f"jury members '{self.labels[ids.index(rid)]}' and '{self.labels[i]}' are the "
                                  "same judge with the same prompt and parameters")
        if self.of == "sbs":
            shapes = {(m.config().get("window"), m.config().get("stride")) for m in self.members}
            if len(shapes) != 1:
                raise ConfigError("a side-by-side jury's members must use the same MPCC window and stride")

    async def execute(self, ctx: RunContext) -> JuryReport:
        merged = _MergedProgress(ctx.observer, len(self.members)) if ctx.observer is not None else None
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(execute_async(m, ctx.store, observer=merged.member(i) if merged else None,
                                                        executor=ctx.executor))
                         for i, m in enumerate(self.members)]
        except BaseExceptionGroup as eg:  # one member failed: its error, not the group's
            raise eg.exceptions[0] from None
        reports = [t.result() for t in tasks]
        stats = summed_stats([r.summary() for r in reports], ctx.stats())
        report = JuryReport(run_id=ctx.run_id, of=self.of, method=self.method, judge=self.spec(),
                            simulated=any(j.simulated for j in self.judges().values()),
                            data_source=self.data_source, aggregate=self.aggregate, labels=self.labels,
                            member_reports=reports, stats=stats)
        if self.of == "grade":
            self._aggregate_grades(ctx, report)
        else:
            self._aggregate_verdicts(ctx, report)
        return report

    def _aggregate_grades(self, ctx: RunContext, report: JuryReport) -> None:
        from knockout.methods._base import AnswerResult
        from knockout.metrics._agreement import question_level

        items: ItemSet = self.members[0].snapshot()  # type: ignore[assignment]
        by_member = [{r.answer_id: (r.score if r.valid else None) for r in rep.results}
                     for rep in report.member_reports]
        guard_of = [{r.answer_id: r.details.get("guard") for r in rep.results if isinstance(r.details, dict)}
                    for rep in report.member_reports]
        agg = score_aggregates.get(self.aggregate)
        results: list[AnswerResult] = []
        for a in items:
            scores = {label: got.get(a.id) for label, got in zip(self.labels, by_member, strict=True)}
            valid = [s for s in scores.values() if s is not None]
            guard = jury_guard(self.labels, [g.get(a.id) for g in guard_of], list(scores.values()),
                               lambda xs: agg(xs, self.trim))
            details = JuryDetails(members=scores, valid_members=len(valid),
                                  spread=max(valid) - min(valid) if valid else None,
                                  error=None if valid else "no member graded this answer validly", guard=guard)
            results.append(AnswerResult(a.id, a.question_id, agg(valid, self.trim) if valid else None, bool(valid),
                                        details.model_dump(mode="json")))
        ctx.write_results(ResultRow(r.answer_id, r.question_id, r.score, r.valid, r.details) for r in results)
        report.results = results
        report.body = {
            "questions": len(items.question_ids()), "answers": len(items),
            "valid": sum(r.valid for r in results), "invalid": sum(not r.valid for r in results),
            "flagged": sum(bool((r.details.get("guard") or {}).get("flagged")) for r in results),
            "agreement": question_level(items, {r.answer_id: r.score for r in results})
            if items.has_human_scores() else {},
        }

    def _aggregate_verdicts(self, ctx: RunContext, report: JuryReport) -> None:
        from knockout.sbs._metrics import human_agreement, sbs_metrics
        from knockout.sbs._verdicts import INVALID

        agg = verdict_aggregates.get(self.aggregate)
        first = report.member_reports[0]
        rows: list[ResultRow] = []
        orders: dict[str, list[Verdict]] = {"swap0": [], "swap1": []}
        humans: list[Verdict | None] = []
        for i, iv in enumerate(first.items):
            members = {label: {f"swap{s}": rep.items[i].verdict(s) for s in (0, 1)}
                       for label, rep in zip(self.labels, report.member_reports, strict=True)}
            verdicts, errors = {}, []
            for s in ("swap0", "swap1"):
                v = agg([m[s] for m in members.values()])
                if v is None:
                    errors.append(f"{s}: no {self.aggregate} among the members' verdicts")
                verdicts[s] = v or INVALID
                orders[s].append(verdicts[s])
            humans.append(iv.item.human)
            d = JurySbsDetails(verdicts=verdicts, human=iv.item.human, human_verdicts=iv.item.human_verdicts,
                               members=members, error="; ".join(errors) or None)
            rows.append(ResultRow(iv.item.id, iv.item.id, None, not errors, d.model_dump(mode="json")))
        ctx.write_results(rows)
        cfg = self.members[0].config()
        annotations = [iv.item.human_verdicts for iv in first.items if iv.item.human_verdicts]
        report.body = {
            "prompt": "jury", "items": len(rows),
            "orders_valid": sum(v != INVALID for o in orders.values() for v in o),
            "orders_invalid": sum(v == INVALID for o in orders.values() for v in o),
            "metrics": sbs_metrics(orders["swap0"], orders["swap1"],
                                   humans if any(h is not None for h in humans) else None,
                                   window=int(cfg.get("window", 20)), stride=int(cfg.get("stride", 5))),
            "human_agreement": human_agreement(annotations) if annotations else {},
        }


def _prompt_of(run: Run[Any]) -> str | None:
    cfg = run.config()
    if "prompt" in cfg:
        return str(cfg["prompt"])
    opts = cfg.get("options")
    return str(opts.get("prompt")) if isinstance(opts, dict) and opts.get("prompt") is not None else None
