"""The four meta-evaluation frameworks of the meta-evaluation study (its section 3).

Each framework turns a :class:`VerdictSet` into :class:`Judgement` s by asking the meta-judge
through the :class:`~knockout.engine.Engine` (cached, resumable, format retries, invalid
replies counted and never turned into a verdict):

* ``jdeval`` — per item, ``draws`` pairs of evaluators (3, as the study), each pair shown once in a
  seeded random order (the study "randomly selected the evaluation results of two evaluators");
  the meta-judge says which assessment is better (Table 9).  One wave, one call per draw.
* ``mdeval`` — the same draws; the meta-judge moderates a debate between two agents that each
  defend one evaluator's assessment (Tables 10-11).  It may decide at once (round 0) or ask a
  question; each round both debaters answer (simultaneously), then the judge decides or asks
  again; in round ``rounds`` (5) it must decide.  Debates advance in lockstep, one wave per step.
* ``jdeval-i`` — the meta-judge scores every evaluator's assessment of every item from 1 to 5
  (Tables 12-13).  One wave, one call per assessment.
* ``bsmeval`` — branch-solve-merge: per item the meta-judge proposes up to 5 sub-criteria (one
  wave), scores every assessment on every criterion (one wave), and the assessment's score is the
  mean of its valid criterion scores.

With ``--verdict expected|constrained`` (a run whose slot mode was named; :class:`Framework`'s ``slot_mode``) the
requests of the presets that declare a verdict slot carry it, and their verdicts are read from the slot alone
(:mod:`knockout.meta._slots`): JDEval's choice, MDEval's decision (the last round's; an earlier round's decision
written as text is asked again in the slot, its text never read as the verdict), JDEval-i's and BSMEval's solve
scores.  The debaters' arguments and BSMEval's criteria are no verdicts and stay free text.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from knockout._bounds import MAX_DRAWS, MAX_ROUNDS, MAX_TRUNCATE, Name, Seed, bounded
from knockout._registry import Registry
from knockout._verdict import Verdict
from knockout.engine import Engine, Outcome, Subject, Task
from knockout.errors import ConfigError
from knockout.judges._base import Message
from knockout.judges._slot import Slot
from knockout.meta._parsers import MAX_CRITERIA, parse_better, parse_debate, parse_score
from knockout.meta._prompts import (
    AUTHORS_FRAMEWORKS,
    DEFAULT_TRUNCATE,
    PROMPT_SETS,
    item_values,
    preset_for,
    reminder,
    render_assessment,
    truncate,
)
from knockout.meta._verdicts import Assessment, MetaItem, VerdictSet
from knockout.prompts._parsers import Parsed, Parser, parsers
from knockout.prompts._render import Rendered, judge_messages
from knockout.prompts._slots import slot_for
from knockout.prompts._templates import PromptTemplate

FINAL_ROUND = (
    "\n\nThis is the last round of the debate: you must now choose the better assistant, in the "
    "<Better_assistant> format above; do not ask another question."
)
FINAL_REMINDER = (
    "Your reply could not be read ({error}). This is the last round: reply with "
    "<Reasoning_for_choosing_better_assistant>...</Reasoning_for_choosing_better_assistant> and "
    "<Better_assistant>Assistant1 or Assistant2 or equally good</Better_assistant>."
)
#: appended to the judge's prompt when it decided in an earlier round, in text, and a slot mode reads its decision
#: from the slot: the decision asked again, the verdict written in the slot
DECIDE_NOW = (
    "\n\nYou have decided to end the debate: now choose the better assistant, in the <Better_assistant> format "
    "above; do not ask another question."
)
NO_TRANSCRIPT = "(the debate has not started yet)"


@pydantic_dataclass(config=ConfigDict(allow_inf_nan=False, validate_assignment=True))
class MetaOptions:
    """A framework's options (a pydantic dataclass: the bounds are checked however it is made)."""

    framework: Name = "jdeval"
    draws: int = Field(default=3, ge=1, le=MAX_DRAWS)  # jdeval/mdeval: pairs of evaluators per item
    both_orders: bool = False  # jdeval/mdeval: show every drawn pair in both orders (not in the study)
    rounds: int = Field(default=5, ge=1, le=MAX_ROUNDS)  # mdeval: the judge must decide by this round
    max_criteria: int = Field(default=MAX_CRITERIA, ge=1, le=MAX_CRITERIA)  # bsmeval
    #: characters per field (0 = never cut); see knockout.meta._prompts
    truncate: int = Field(default=DEFAULT_TRUNCATE, ge=0, le=MAX_TRUNCATE)
    seed: Seed = 0  # also the seed of Elo's shuffles: not negative
    #: mdeval/bsmeval: "own" (knockout's presets) or "authors" (the prompts of the authors' published code)
    prompts: Name = "own"

    @model_validator(mode="wrap")
    @classmethod
    def _bounds(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return bounded(data, handler)  # a value out of bounds: a ConfigError naming the field

    def check(self) -> None:
        if self.framework not in frameworks:
            raise ConfigError(f"unknown framework '{self.framework}' (known: {', '.join(frameworks.names())})")
        if self.draws < 1 or self.rounds < 1 or not 1 <= self.max_criteria <= MAX_CRITERIA or self.truncate < 0:
            raise ConfigError(f"draws and rounds must be >= 1, max_criteria 1..{MAX_CRITERIA}, truncate >= 0")
        if self.prompts not in PROMPT_SETS:
            raise ConfigError(f"unknown prompt set '{self.prompts}' (known: {', '.join(PROMPT_SETS)})")
        if self.prompts == "authors" and self.framework not in AUTHORS_FRAMEWORKS:
            raise ConfigError(f"the authors' prompts are used by {' and '.join(AUTHORS_FRAMEWORKS)}; "
                              f"{self.framework} uses the paper's own tables (--prompts own)")


@dataclass
class Judgement:
    """One meta-judgement.  Paired frameworks: ``value`` is the first evaluator's match score
    (1 win, 0.5 tie, 0 loss); scoring frameworks: the assessment's score (1..5)."""

    id: str
    item: str
    evaluators: tuple[str, ...]
    value: float | None
    valid: bool
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Draw:
    item: MetaItem
    first: str
    second: str
    swapped: bool  # the first shown evaluator is the later one of the pair in evaluator order

    @property
    def id(self) -> str:
        return f"{self.item.id}/{self.first}~{self.second}"


def draw_pairs(vs: VerdictSet, draws: int, seed: int, both_orders: bool = False) -> list[Draw]:
    """Per item, ``draws`` distinct pairs of evaluators, the least-used pairs first (ties broken at
    random), so that every pair meets about equally often; each pair shown in a seeded random order."""
    rng = random.Random(seed)
    used: dict[tuple[str, str], int] = {}
    out: list[Draw] = []
    for item in vs.items:
        have = [e for e in vs.evaluators if e in item.assessments]
        pairs = list(combinations(have, 2))
        rng.shuffle(pairs)
        pairs.sort(key=lambda p: used.get(p, 0))
        for a, b in pairs[:draws]:
            used[(a, b)] = used.get((a, b), 0) + 1
            swap = rng.random() < 0.5
            first, second = (b, a) if swap else (a, b)
            out.append(Draw(item, first, second, swap))
            if both_orders:
                out.append(Draw(item, second, first, not swap))
    return out


def quality(item: MetaItem, a: Assessment) -> float | None:
    """How right an assessment is by the human label: the scripted (simulated) meta-judge's input."""
    if item.human is None:
        return None
    if item.kind == "pairwise":
        return 1.0 if a.verdict == item.human else 0.0
    if a.score is None:
        return 0.0
    return max(0.0, 1.0 - abs(a.score - float(item.human)) / max(item.max_score - 1.0, 1.0))


def _subject(task: str, item: MetaItem, evaluators: list[str], **facts: Any) -> Subject:
    """A meta request is about ``item`` as assessed by ``evaluators`` (display order)."""
    return Subject("meta", (item.id, *evaluators), {"task": task, **facts})


def meta_oracle(vs: VerdictSet) -> Callable[[Subject], dict[str, Any]]:
    """The truth a simulated meta-judge may read: how right each shown assessment is by the human label."""
    by_id = {it.id: it for it in vs.items}

    def facts(subject: Subject) -> dict[str, Any]:
        item = by_id[subject.ids[0]]
        return {"kind": "meta", **subject.facts,
                "quality": [quality(item, item.assessments[e]) for e in subject.ids[1:]]}

    return facts


def _score(value: str | None) -> float | None:
    """The first assessment's result from the meta-judge's winner (A 1, B 0, TIE 0.5; older stored
    replies' ``1``/``2``/``0`` read the same)."""
    return Verdict.parse(value).score_first() if value else None


class Framework:
    """A meta-evaluation framework: turns a verdict set into judgements through the meta-judge's engine."""

    #: pairwise frameworks compare two evaluators' assessments (win rates, Elo); the others score one
    paired: bool = False

    def __init__(self, opts: MetaOptions, engine: Engine, debater: Engine | None = None, *,
                 slot_mode: str | None = None, slot_named: bool = False) -> None:
        self.opts = opts
        self.engine = engine
        self.debater = debater or engine
        #: the run's verdict slot mode (None: every verdict read from text) and whether ``--verdict`` named it
        self.slot_mode, self.slot_named = slot_mode, slot_named

    def slot(self, t: PromptTemplate, max_points: float = 5) -> Slot | None:
        """The verdict slot of requests rendered with ``t`` (None: read from text): where the run has a slot mode,
        ``t`` declares a slot, and the mode was named or ``t``'s slot is one ``--verdict auto`` uses."""
        if self.slot_mode is None or not (t.slot_auto or self.slot_named):
            return None
        return slot_for(t, max_points)

    def task(self, t: PromptTemplate, r: Rendered, parse: Parser, max_points: float, subject: Subject, label: str,
             messages: list[Message] | None = None, remind: Callable[[str], str] | None = None,
             slot: bool = True) -> Task:
        """The request for a verdict rendered with ``t``: its slot and the slot's parse where :meth:`slot` has one
        (and ``slot``), else ``parse`` on the reply's text, never a verdict copied from the texts shown."""
        remind = remind or reminder(t, max_points)
        s = self.slot(t, max_points) if slot else None
        if s is None:
            return Task(messages or r.messages, r.parse_with(parse, max_points), remind, subject, label)
        from knockout.meta._slots import MetaSlotParse

        return Task(messages or r.messages, MetaSlotParse(s, max_points, r.shown), remind, subject, label, slot=s,
                    slot_mode=self.slot_mode)

    def values(self, item: MetaItem) -> dict[str, str]:
        return item_values(item, self.opts.truncate)

    def assessment(self, item: MetaItem, evaluator: str) -> str:
        return render_assessment(item, item.assessments[evaluator], self.opts.truncate)

    def pair_values(self, d: Draw) -> dict[str, str]:
        return {**self.values(d.item), "result1": self.assessment(d.item, d.first),
                "result2": self.assessment(d.item, d.second)}

    def preset(self, item: MetaItem, role: str = "") -> PromptTemplate:
        return preset_for(self.opts.framework, item, role, self.opts.prompts)

    @property
    def reply_format(self) -> dict[str, str]:
        """What a simulated meta-judge must know to answer in the requested format (not the truth)."""
        return {"format": "authors"} if self.opts.prompts == "authors" else {}

    @staticmethod
    def draw_details(d: Draw) -> dict[str, Any]:
        return {"first": d.first, "second": d.second, "swapped": d.swapped}

    async def run(self, vs: VerdictSet) -> list[Judgement]:
        raise NotImplementedError


class JDEval(Framework):
    paired = True

    async def run(self, vs: VerdictSet) -> list[Judgement]:
        draws = draw_pairs(vs, self.opts.draws, self.opts.seed, self.opts.both_orders)
        tasks = []
        for d in draws:
            t = preset_for("jdeval", d.item)
            r = judge_messages(t, self.pair_values(d))
            tasks.append(self.task(t, r, parse_better, 0, _subject("better", d.item, [d.first, d.second]), d.id))
        outcomes = await self.engine.ask_all(tasks)
        return [
            Judgement(d.id, d.item.id, (d.first, d.second), _score(o.value["winner"]) if o.valid else None, o.valid,
                      {**self.draw_details(d), **(o.value if o.valid else {}), **o.details()})
            for d, o in zip(draws, outcomes, strict=True)
        ]


@dataclass
class _Debate:
    draw: Draw
    turns: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    winner: Verdict | None = None
    done: bool = False
    error: str | None = None


def transcript(turns: list[dict[str, Any]], limit: int) -> str:
    """The debate so far, round by round; each turn cut to half the truncation budget."""
    if not turns:
        return NO_TRANSCRIPT
    lines: list[str] = []
    current = None
    for turn in turns:
        if turn["round"] != current:
            current = turn["round"]
            lines.append(f"Round {current}")
        lines.append(f"{turn['speaker']}: {truncate(str(turn['text']).strip(), limit // 2)}")
    return "\n".join(lines)


class MDEval(Framework):
    paired = True

    def judge_task(self, deb: _Debate, rnd: int, decide: bool = False) -> Task:
        """The judge's request in round ``rnd``: decide or ask (read as text), or, in the last round or with
        ``decide`` (it decided in text and the run reads decisions from the slot), decide (in the slot where the
        run has one)."""
        d = deb.draw
        t = self.preset(d.item, "judge")
        values = {**self.pair_values(d), "transcript": transcript(deb.turns, self.opts.truncate)}
        r = judge_messages(t, values)
        msgs = list(r.messages)
        final = rnd >= self.opts.rounds
        if final or decide:
            msgs[-1] = Message(role="user", content=msgs[-1].content + (FINAL_ROUND if final else DECIDE_NOW))
        subject = _subject("debate", d.item, [d.first, d.second], round=rnd, **({"decide": True} if decide else {}))
        label = f"{d.id}#judge{rnd}" + (".decide" if decide else "")
        if final or decide:
            return self.task(t, r, parse_better, 0, subject, label, msgs, lambda e: FINAL_REMINDER.format(error=e))
        return self.task(t, r, parse_debate, 0, subject, label, msgs, slot=False)

    def decides_in_slot(self, deb: _Debate, rnd: int) -> bool:
        """Whether a decision the judge wrote in text in round ``rnd`` is asked again in the slot (a run that reads
        the judge's decisions from its slot, before the last round, whose request had none)."""
        return rnd < self.opts.rounds and self.slot(self.preset(deb.draw.item, "judge")) is not None

    def debater_task(self, deb: _Debate, rnd: int, side: int) -> Task:
        d = deb.draw
        own, other = (d.first, d.second) if side == 1 else (d.second, d.first)
        t = self.preset(d.item, "debater")
        values = {**self.values(d.item), "result1": self.assessment(d.item, own),
                  "result2": self.assessment(d.item, other), "side": str(side), "round": str(rnd),
                  "transcript": transcript(deb.turns, self.opts.truncate)}
        r = judge_messages(t, values)
        return Task(r.messages, r.parse_with(parsers.get(t.parser), 0), None,
                    _subject("argue", d.item, [own], side=side), f"{d.id}#argue{rnd}.{side}")

    async def run(self, vs: VerdictSet) -> list[Judgement]:
        debates = [_Debate(d) for d in draw_pairs(vs, self.opts.draws, self.opts.seed, self.opts.both_orders)]
        for rnd in range(self.opts.rounds + 1):
            active = [deb for deb in debates if not deb.done]
            if not active:
                break
            if rnd > 0:
                tasks = [self.debater_task(deb, rnd, side) for deb in active for side in (1, 2)]
                args = await self.debater.ask_all(tasks)
                for i, deb in enumerate(active):
                    for side, o in zip((1, 2), args[2 * i: 2 * i + 2], strict=True):
                        deb.outcomes.append(o)
                        text = str(o.value) if o.valid else "(no argument: the debater's reply was invalid)"
                        deb.turns.append({"round": rnd, "speaker": f"assistant{side}", "text": text})
            outs = await self.engine.ask_all([self.judge_task(deb, rnd) for deb in active])
            decided: list[_Debate] = []  # decided in text: the verdict asked in the slot
            for deb, o in zip(active, outs, strict=True):
                deb.outcomes.append(o)
                if not o.valid:
                    deb.done, deb.error = True, o.error
                elif o.value["winner"] is not None and self.decides_in_slot(deb, rnd):
                    decided.append(deb)
                elif o.value["winner"] is not None:
                    deb.done, deb.winner = True, Verdict.parse(o.value["winner"])
                else:
                    deb.turns.append({"round": rnd + 1, "speaker": "Judge", "text": o.value["question"]})
            if decided:
                outs = await self.engine.ask_all([self.judge_task(deb, rnd, decide=True) for deb in decided])
                for deb, o in zip(decided, outs, strict=True):
                    deb.outcomes.append(o)
                    deb.done = True
                    if o.valid:
                        deb.winner = Verdict.parse(o.value["winner"])
                    else:
                        deb.error = o.error
        return [self._judgement(deb) for deb in debates]

    def _judgement(self, deb: _Debate) -> Judgement:
        d = deb.draw
        valid = deb.winner is not None
        return Judgement(
            d.id, d.item.id, (d.first, d.second), _score(deb.winner), valid,
            {**self.draw_details(d), "winner": deb.winner, "valid": valid, "error": deb.error,
             "rounds": max((t["round"] for t in deb.turns), default=0), "transcript": deb.turns,
             "calls": [o.details() for o in deb.outcomes]},
        )


class JDEvalI(Framework):
    def assessments(self, vs: VerdictSet) -> list[tuple[MetaItem, str]]:
        return [(item, e) for item in vs.items for e in vs.evaluators if e in item.assessments]

    async def run(self, vs: VerdictSet) -> list[Judgement]:
        pairs = self.assessments(vs)
        tasks = []
        for item, e in pairs:
            t = preset_for("jdeval-i", item)
            r = judge_messages(t, {**self.values(item), "eval_result": self.assessment(item, e)})
            tasks.append(self.task(t, r, parse_score, 5, _subject("score", item, [e]), f"{item.id}/{e}"))
        outcomes = await self.engine.ask_all(tasks)
        return [
            Judgement(f"{item.id}/{e}", item.id, (e,), float(o.value["score"]) if o.valid else None, o.valid,
                      {**(o.value if o.valid else {}), **o.details()})
            for (item, e), o in zip(pairs, outcomes, strict=True)
        ]


class BSMEval(JDEvalI):
    async def run(self, vs: VerdictSet) -> list[Judgement]:
        tasks = []
        for item in vs.items:
            t = self.preset(item, "branch")
            values = {**self.values(item), "max_criteria": str(self.opts.max_criteria)}
            tasks.append(Task(judge_messages(t, values).messages, self._criteria_parser(t),
                              reminder(t, self.opts.max_criteria), _subject("criteria", item, [], **self.reply_format),
                              f"{item.id}#branch"))
        branches = dict(zip((i.id for i in vs.items), await self.engine.ask_all(tasks), strict=True))
        pairs = self.assessments(vs)
        solve: list[tuple[MetaItem, str, str]] = []
        tasks = []
        for item, e in pairs:
            b = branches[item.id]
            for c in b.value if b.valid else []:
                t = self.preset(item, "solve")
                values = {**self.values(item), "eval_result": self.assessment(item, e), "criterion": c}
                solve.append((item, e, c))
                r = judge_messages(t, values)
                tasks.append(self.task(t, r, parsers.get(t.parser), 5,
                                       _subject("score", item, [e], criterion=c, **self.reply_format),
                                       f"{item.id}/{e}#{c}"))
        scores: dict[tuple[str, str], list[tuple[str, Outcome]]] = {}
        for (item, e, c), o in zip(solve, await self.engine.ask_all(tasks), strict=True):
            scores.setdefault((item.id, e), []).append((c, o))
        out = []
        for item, e in pairs:
            b = branches[item.id]
            per = scores.get((item.id, e), [])
            valid = [float(o.value["score"]) for _, o in per if o.valid]
            mean = sum(valid) / len(valid) if valid else None
            out.append(Judgement(
                f"{item.id}/{e}", item.id, (e,), mean, mean is not None,
                {"criteria": b.value if b.valid else [], "branch": b.details(),
                 "scores": {c: (o.value["score"] if o.valid else None) for c, o in per},
                 "criteria_invalid": sum(not o.valid for _, o in per),
                 "solve": {c: o.details() for c, o in per},
                 "error": None if mean is not None else (b.error if not b.valid else "every criterion invalid")},
            ))
        return out

    def _criteria_parser(self, t: PromptTemplate) -> Callable[[str], Parsed]:
        """The branch preset's parser, keeping at most ``max_criteria`` criteria."""
        parse = parsers.get(t.parser)

        def criteria(text: str) -> Parsed:
            p = parse(text, 0)
            return Parsed(value=p.value[: self.opts.max_criteria]) if p.ok else p

        return criteria


frameworks: Registry[type[Framework]] = Registry("meta-evaluation framework", group="knockout.meta_frameworks")
frameworks.add("jdeval", "knockout.meta._frameworks:JDEval", "a meta-judge picks the better of two assessments")
frameworks.add("mdeval", "knockout.meta._frameworks:MDEval", "a meta-judge moderates a debate of two evaluators")
frameworks.add("jdeval-i", "knockout.meta._frameworks:JDEvalI", "a meta-judge scores each assessment 1-5")
frameworks.add("bsmeval", "knockout.meta._frameworks:BSMEval", "branch-solve-merge: criteria, scores, mean")


def framework(opts: MetaOptions, engine: Engine, debater: Engine | None = None, *, slot_mode: str | None = None,
              slot_named: bool = False) -> Framework:
    """``opts.framework``'s framework over the meta-judge's (and debater's) engine; ``slot_mode``: the run's verdict
    slot mode (None: text), ``slot_named``: ``--verdict`` named it."""
    return frameworks.get(opts.framework)(opts, engine, debater, slot_mode=slot_mode, slot_named=slot_named)


def is_paired(name: str) -> bool:
    """Whether the framework ``name`` compares pairs of assessments."""
    return frameworks.get(name).paired


def check_data(opts: MetaOptions, vs: VerdictSet) -> None:
    if opts.prompts == "authors" and opts.framework == "bsmeval":
        others = sorted({it.task for it in vs.items if it.task != "openmeva"})
        if vs.kind != "pointwise" or others:
            raise ConfigError("the authors published BSMEval prompts for OpenMEVA stories only; these items are "
                              f"{vs.kind if vs.kind != 'pointwise' else ', '.join(others)}: use --prompts own")
    if is_paired(opts.framework) and vs.kind != "pairwise":
        raise ConfigError(
            f"{opts.framework} compares assessments of answer pairs (pairwise verdicts); these verdicts are "
            f"{vs.kind} scores: use jdeval-i or bsmeval"
        )
    if is_paired(opts.framework) and len(vs.evaluators) < 2:
        raise ConfigError(f"{opts.framework} needs at least two evaluators")
