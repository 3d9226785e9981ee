"""A meta-evaluation run (the ``meta`` run kind): one result per meta-judgement, through the store.

The run id is a hash of the framework, its options, the analysis options, the meta-judge's (and
debater's) identity, the generation parameters and the verdicts, so the same command twice is the
same run and the second one is served from the cache; a killed run resumes.  ``--verdict`` (``MetaConfig.verdict``)
chooses how the meta-judge's verdicts are read: a named slot mode (``expected``, ``constrained``) fills the meta
presets' verdict slots (:mod:`knockout.meta._slots`), ``auto`` fills those whose accuracy gate was run (JDEval's,
JDEval-i's) and reads the others' free text (``slot_auto = false``), ``text`` reads the free text as before; the
mode enters the run's identity only where a slot is read.
The lifecycle is :mod:`knockout.runs`'s; frameworks are found by name in :data:`knockout.meta.frameworks`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from knockout._bounds import MAX_CONCURRENCY, MAX_K, MAX_RETRIES, MAX_SHUFFLES, Name, bounded
from knockout.engine import Observer
from knockout.judges._base import GenParams, Judge
from knockout.meta import _analysis as analysis
from knockout.meta._frameworks import Judgement, MetaOptions, check_data, framework, is_paired, meta_oracle
from knockout.meta._verdicts import VerdictSet
from knockout.runs import Oracle, Run, RunContext, RunSummary, execute, execute_async
from knockout.storage._store import ResultRow, Store


@pydantic_dataclass(config=ConfigDict(arbitrary_types_allowed=True, allow_inf_nan=False))
class MetaConfig:
    """What a meta-evaluation run does (a pydantic dataclass: the bounds are checked however it is made)."""

    options: MetaOptions = field(default_factory=MetaOptions)
    params: GenParams = field(default_factory=GenParams)
    k: float = Field(default=analysis.DEFAULT_K, ge=0, le=MAX_K)
    shuffles: int = Field(default=analysis.DEFAULT_SHUFFLES, ge=1, le=MAX_SHUFFLES)
    self_name: Name | None = None
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    format_retries: int = Field(default=2, ge=0, le=MAX_RETRIES)
    #: how the meta-judge's verdicts are read (knockout.judges._slot.VERDICTS, docs/methods.md#the-verdict-slot):
    #: auto (text for the meta presets, whose slots auto leaves off), expected, constrained (their verdict slots),
    #: text (the free text, read by the meta parsers)
    verdict: Name = "auto"

    @model_validator(mode="wrap")
    @classmethod
    def _bounds(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return bounded(data, handler)  # a value out of bounds: a ConfigError naming the field


class MetaSummary(RunSummary):
    """``knockout meta --json`` (keys in docs/meta-evaluation.md)."""

    model_config = ConfigDict(extra="forbid")

    framework: str
    prompts: str = "own"
    debater: str | None = None
    #: how the meta-judge's verdicts were read: text, or the slot mode (expected, constrained)
    verdict: str = "text"
    verdict_kind: str
    evaluators: list[str]
    items: int
    judgements: int
    valid: int
    invalid: int
    debater_stats: dict[str, Any] | None = None
    metric: str
    ranking: list[dict[str, Any]]
    matches: int | None = None
    win_rates: dict[str, Any] | None = None
    elo: dict[str, Any] | None = None
    position: dict[str, Any] | None = None
    meta_answer_accuracy: dict[str, Any] | None = None
    mean_win_rate: dict[str, float] | None = None
    scores: dict[str, Any] | None = None
    human: dict[str, Any] | None
    kendall_tau: dict[str, Any] | None = None
    kendall_tau_run_items: dict[str, Any] | None = None
    self_preference: dict[str, Any] | None


@dataclass
class MetaReport:
    run_id: str
    framework: str
    judge: str
    debater: str | None
    simulated: bool
    data_source: str
    vs: VerdictSet
    judgements: list[Judgement]
    stats: dict[str, Any]
    analysis: dict[str, Any]
    prompts: str = "own"
    #: how the meta-judge's verdicts were read (``text``, ``expected``, ``constrained``)
    verdict: str = "text"
    #: ``complete``, or ``incomplete`` when judge requests failed for good (set by the lifecycle)
    status: str = "complete"

    def summary(self) -> dict[str, Any]:
        """The ``knockout meta --json`` object (keys documented in docs/meta-evaluation.md)."""
        s = MetaSummary(
            run_id=self.run_id, kind="meta", method=self.framework, framework=self.framework, judge=self.judge,
            prompts=self.prompts, debater=self.debater, simulated_judge=self.simulated, data=self.data_source,
            status=self.status, verdict=self.verdict, verdict_kind=self.vs.kind,
            evaluators=self.vs.evaluators, items=len(self.vs.items), judgements=len(self.judgements),
            valid=sum(j.valid for j in self.judgements), invalid=sum(not j.valid for j in self.judgements),
            **self.stats, **self.analysis,
        )
        keep_none = {"human", "self_preference"}
        return {k: v for k, v in s.model_dump(mode="json").items() if v is not None or k in keep_none}


def analyse(vs_run: VerdictSet, vs_all: VerdictSet, judgements: list[Judgement], cfg: MetaConfig) -> dict[str, Any]:
    """Ranking, human baseline (on all loaded items and on the run's items), Kendall tau, self-preference."""
    out: dict[str, Any] = {}
    table = None
    if is_paired(cfg.options.framework):
        matches = analysis.matches_from(judgements)
        table = analysis.match_table(matches)
        elo = analysis.elo_report(matches, k=cfg.k, shuffles=cfg.shuffles, seed=cfg.options.seed) if matches else None
        meta_values: dict[str, float | None] = dict(elo["ratings"]) if elo else {}
        out.update({"metric": "elo", "matches": len(matches), "win_rates": table, "elo": elo,
                    "position": analysis.position_stats(judgements)})
        if cfg.options.framework == "jdeval":
            out["meta_answer_accuracy"] = analysis.meta_answer_accuracy(judgements, vs_run)
        out["mean_win_rate"] = {e: sum(v["win"] for v in row.values()) / len(row) for e, row in table.items()}
    else:
        scores = analysis.mean_scores(judgements)
        meta_values = {e: s["mean"] for e, s in scores.items()}
        out.update({"metric": "mean_score", "scores": scores})
    out["ranking"] = analysis.ranking(meta_values)
    if vs_all.has_human():
        base_all, base_run = analysis.baseline(vs_all), analysis.baseline(vs_run)
        human_all, human_run = analysis.baseline_values(base_all), analysis.baseline_values(base_run)
        out["human"] = {
            "metric": "accuracy" if vs_all.kind == "pairwise" else "pearson",
            "all_items": {"items": len(vs_all.items), "evaluators": base_all,
                          "ranking": analysis.ranking(dict(human_all))},
            "run_items": {"items": len(vs_run.items), "evaluators": base_run,
                          "ranking": analysis.ranking(dict(human_run))},
        }
        out["kendall_tau"] = analysis.kendall(meta_values, human_all)
        out["kendall_tau_run_items"] = analysis.kendall(meta_values, human_run)
        out["self_preference"] = analysis.self_preference(cfg.self_name, meta_values, human_all, table)
    else:
        out["human"] = None
        out["self_preference"] = analysis.self_preference(cfg.self_name, meta_values, {}, table)
    return out


class MetaRun(Run[MetaReport]):
    """Meta-evaluate the evaluators of ``vs_all`` (its first ``limit`` items) with ``judge``."""

    kind = "meta"

    def __init__(self, vs_all: VerdictSet, judge: Judge, cfg: MetaConfig, *, limit: int | None = None,
                 debater: Judge | None = None) -> None:
        cfg.options.check()
        self.vs_all = vs_all
        self.vs = vs_all.subset(limit)
        super().__init__(method=cfg.options.framework, data_source=self.vs.source, params=cfg.params,
                         concurrency=cfg.concurrency, format_retries=cfg.format_retries)
        self.judge = judge
        self.debater = None if debater is None or debater.identity() == judge.identity() else debater
        self.cfg = cfg
        from knockout.judges._slot import MODES
        from knockout.meta._prompts import presets_used
        from knockout.prompts._slots import resolve_verdict

        mode = resolve_verdict(cfg.verdict, judge)  # an unknown mode, or one the meta-judge lacks: refused here
        #: a slot mode named by --verdict (the presets with slot_auto = false are read in their slot only then)
        self.verdict_named = cfg.verdict in MODES
        used = presets_used(cfg.options.framework, self.vs, cfg.options.prompts)
        reads_slot = mode != "text" and any(t.slot and (t.slot_auto or self.verdict_named) for t in used)
        #: the verdict mode the run reads its meta-judge's verdicts in: recorded in its identity unless it is text
        self.verdict = mode if reads_slot else "text"

    def judges(self) -> dict[str, Judge]:
        return {"judge": self.judge, **({"debater": self.debater} if self.debater else {})}

    def identity(self) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "kind": "meta",
            # the prompt set joined the options later: the default leaves the run ids of earlier runs as they were
            "options": {k: v for k, v in asdict(cfg.options).items() if not (k == "prompts" and v == "own")},
            "analysis": {"k": cfg.k, "shuffles": cfg.shuffles, "self": cfg.self_name},
            "params": cfg.params.model_dump(mode="json"),
            "format_retries": cfg.format_retries,
            "judge": self.judge.identity(),
            "debater": self.debater.identity() if self.debater else None,
            "data": self.vs.fingerprint(),
            # the verdict slot joined later: a run that reads text keeps the id it had
            **({"verdict": self.verdict} if self.verdict != "text" else {}),
        }

    def config(self) -> dict[str, Any]:
        cfg = self.cfg
        return {"options": asdict(cfg.options), "params": cfg.params.model_dump(mode="json"), "k": cfg.k,
                "shuffles": cfg.shuffles, "self": cfg.self_name, "format_retries": cfg.format_retries,
                "debater": self.debater.spec if self.debater else None,
                "verdicts_fingerprint": self.vs.fingerprint(), "evaluators": self.vs.evaluators,
                "items": len(self.vs.items), "verdict": self.verdict}

    def check(self) -> None:
        check_data(self.cfg.options, self.vs)

    def oracle(self) -> Oracle:
        return meta_oracle(self.vs)

    async def execute(self, ctx: RunContext) -> MetaReport:
        second = ctx.engines.get("debater")
        slot_mode = None if self.verdict == "text" else self.verdict
        judgements = await framework(self.cfg.options, ctx.engine, second, slot_mode=slot_mode,
                                     slot_named=self.verdict_named).run(self.vs)
        ctx.write_results(ResultRow(j.id, j.item, j.value, j.valid, {"evaluators": list(j.evaluators), **j.details})
                          for j in judgements)
        debater = self.debater
        return MetaReport(ctx.run_id, self.cfg.options.framework, self.judge.spec, debater.spec if debater else None,
                          self.judge.simulated or bool(debater and debater.simulated), self.vs.source, self.vs,
                          judgements, ctx.stats(), analyse(self.vs, self.vs_all, judgements, self.cfg),
                          self.cfg.options.prompts, self.verdict)


def meta_run_id(vs: VerdictSet, judge: Judge, debater: Judge | None, cfg: MetaConfig) -> str:
    from knockout.runs import run_id_for

    return run_id_for(MetaRun(vs, judge, cfg, debater=debater).identity())


async def run_meta_async(vs_all: VerdictSet, judge: Judge, store: Store, cfg: MetaConfig, *,
                         limit: int | None = None, debater: Judge | None = None,
                         observer: Observer | None = None, executor: str | None = None) -> MetaReport:
    return await execute_async(MetaRun(vs_all, judge, cfg, limit=limit, debater=debater), store, observer=observer,
                               executor=executor)


def run_meta(vs_all: VerdictSet, judge: Judge, store: Store, cfg: MetaConfig, *, limit: int | None = None,
             debater: Judge | None = None, observer: Observer | None = None,
             executor: str | None = None) -> MetaReport:
    """Synchronous :func:`run_meta_async` (also inside a running event loop); closes the judges."""
    return execute(MetaRun(vs_all, judge, cfg, limit=limit, debater=debater), store, observer=observer,
                   executor=executor)
