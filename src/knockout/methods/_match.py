"""The question-level match and the machinery every pairwise method shares.

A *question-level match* (Sandan, Dinh, Niehues 2025, section 3) is one
pairwise prompt in which the judge grades both answers to the same question
(``Answer 1: X/max Answer 2: Y/max``).  A *debiased* match asks both orders and
gives each answer the mean of its two grades.  Every pairwise method here —
knockout, one-round pairwise, all-pairs, heapsort, sliding window — plays its
matches through :class:`MatchPlayer`, so the same pair in the same order with
the same prompt and judge renders the same messages, has the same cache key,
and is never asked twice, whichever method asks for it.

Methods describe their comparisons as *schedules*: generators that yield the
list of pairs they need next and receive the played matches back.
:func:`play_schedules` runs the schedules of all questions pipelined by default:
each question asks its next step as soon as its own matches of this step are
played.  With ``lockstep`` (``RunConfig.lockstep``), step ``s`` of every question
is one wave (one :meth:`Engine.ask_all`), as the papers describe it; the
matches and results are the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from knockout._verdict import Verdict
from knockout.data._records import ItemSet
from knockout.engine import Outcome, Subject, Task
from knockout.errors import ConfigError
from knockout.judges._slot import Slot, first_better
from knockout.methods._base import AnswerResult, MatchRef, Method, MethodOptions, MethodResult, PairwiseDetails
from knockout.metrics._agreement import spearman
from knockout.prompts._builder import PromptBuilder, reminder_for
from knockout.storage._store import MatchRow

if TYPE_CHECKING:
    from knockout.runs import RunContext

IdPair = tuple[str, str]
#: A method's plan for one question: yields the pairs it needs next, receives their matches.
Schedule = Generator[list[IdPair], list["Match"], None]

SINGLE_ANSWER = "only answer to its question: no pairwise match possible"


def seeded_rng(seed: int, *key: object) -> random.Random:
    """A random generator determined by the seed and a key (stable across processes and platforms)."""
    payload = json.dumps([seed, *key], ensure_ascii=False, default=str).encode()
    return random.Random(int.from_bytes(hashlib.sha256(payload).digest()[:8], "big"))


def random_pairs(ids: Sequence[str], seed: int, question_id: str, round_no: int) -> tuple[list[IdPair], str | None]:
    """Random pairing of one knockout round: consecutive pairs of a seeded shuffle, and the bye (odd one out).

    One-round pairwise uses round 1 of this pairing, so its matches are the knockout's first round.
    """
    order = list(ids)
    seeded_rng(seed, "pairing", question_id, round_no).shuffle(order)
    pairs = [(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)]
    return pairs, (order[-1] if len(order) % 2 else None)


@dataclass
class Game:
    """One order of a match: ``first`` is shown as Answer 1; ``slot``: the verdict slot its request carried."""

    first: str
    second: str
    outcome: Outcome
    slot: Slot | None = None

    @property
    def scores(self) -> tuple[float, float] | None:
        if not self.outcome.valid:
            return None
        s1, s2 = self.outcome.value
        return float(s1), float(s2)

    def score_of(self, answer_id: str) -> float | None:
        s = self.scores
        if s is None:
            return None
        return s[0] if answer_id == self.first else s[1]

    @property
    def verdict(self) -> Verdict:
        """A (the answer shown first got the higher grade), B, TIE (equal grades) or E (no readable grades)."""
        s = self.scores
        return Verdict.E if s is None else Verdict.from_scores(*s)

    @property
    def p_first(self) -> float | None:
        """The probability that ``first`` is the better answer: read from the judge's token probabilities at the
        verdict slot (:func:`knockout.judges._slot.first_better`) where the reply has them, else the grades'
        verdict as 1, 0.5 or 0; None for a game without readable grades."""
        if not self.outcome.valid:
            return None
        attempts = self.outcome.attempts
        p = first_better(self.slot, attempts[-1].verdict) if self.slot is not None and attempts else None
        return p if p is not None else self.verdict.score_first()

    def details(self) -> dict[str, Any]:
        """Order, grades and the raw replies (every attempt) of this game."""
        return {"first": self.first, "second": self.second, "scores": self.scores, **self.outcome.details()}


@dataclass
class Match:
    """A question-level match between ``a`` and ``b`` (``a`` shown first in the first game).

    ``games`` holds one game, or two (both orders) when debiased.  ``step`` is the
    method's sequential step (wave) in which the match was played: the round, for
    the knockout.  ``soft`` (``--preference soft``): the match is decided by :attr:`preference`, the probability
    that ``a`` is better, instead of by the grades.
    """

    a: str
    b: str
    games: list[Game]
    step: int
    soft: bool = False

    @property
    def id(self) -> str:
        """``FIRST|SECOND`` of the first game: unique within a run (a match is played once)."""
        return f"{self.a}|{self.b}"

    @property
    def valid(self) -> bool:
        return any(g.scores is not None for g in self.games)

    @property
    def partial(self) -> bool:
        """Debiased, but only one of the two orders gave readable grades."""
        return len(self.games) > 1 and sum(g.scores is not None for g in self.games) == 1

    def score_of(self, answer_id: str) -> float | None:
        """The answer's grade in this match: the mean over the valid games (both orders when debiased)."""
        got = [s for g in self.games if (s := g.score_of(answer_id)) is not None]
        return sum(got) / len(got) if got else None

    @property
    def preference(self) -> float | None:
        """The probability that ``a`` is the better answer: the mean over the valid games of ``P(first better)``
        in the order ``a, b`` and ``1 - P(first better)`` in the order ``b, a`` (:attr:`Game.p_first`), so that the
        judge's preference for a position cancels when both orders are played (``--debias``); None for an
        invalid match."""
        got = [p if g.first == self.a else 1.0 - p for g in self.games if (p := g.p_first) is not None]
        return sum(got) / len(got) if got else None

    @property
    def verdict(self) -> Verdict:
        """A (``a`` is better), B (``b``), TIE or E (an invalid match): by the mean grades (letters: the higher one
        wins, equal grades tie) or, when ``soft``, by :attr:`preference` (above one half, below, exactly half)."""
        if self.soft:
            p = self.preference
            return Verdict.E if p is None else Verdict.from_scores(p, 0.5)
        return Verdict.from_scores(self.score_of(self.a), self.score_of(self.b))

    def result_for(self, answer_id: str) -> float | None:
        """1 (won), 0.5 (tie) or 0 (lost) for ``answer_id`` -- when ``soft``, the probability that it is the better
        answer (:attr:`preference`); None for an invalid match."""
        if self.soft:
            p = self.preference
            return None if p is None else (p if answer_id == self.a else 1.0 - p)
        v = self.verdict
        return (v if answer_id == self.a else v.swap()).score_first()

    def ref_for(self, answer_id: str) -> MatchRef:
        """What ``answer_id``'s result keeps of this match (the match is stored once, in ``matches``)."""
        opponent = self.b if answer_id == self.a else self.a
        return MatchRef(match_id=self.id, step=self.step, opponent=opponent, score=self.score_of(answer_id),
                        opponent_score=self.score_of(opponent), valid=self.valid, partial=self.partial,
                        preference=self.result_for(answer_id) if self.soft else None)

    def row(self, question_id: str | None) -> MatchRow:
        """The stored form: both games with their grades and every raw reply."""
        return MatchRow(self.id, question_id, self.a, self.b, self.step, self.valid, self.partial,
                        [g.details() for g in self.games])


class MatchPlayer:
    """Plays question-level matches through the engine, one wave per call of :meth:`play`.

    Within one method run a match is played once: asking for it again (a sort that
    compares the same pair twice) returns the match already played, without a call.
    When debiased, ``(a, b)`` and ``(b, a)`` are the same match.
    """

    def __init__(self, items: ItemSet, ctx: RunContext, options: MethodOptions) -> None:
        self.items = items
        self.ctx = ctx
        self.engine = ctx.engine
        self.debias = options.debias
        self.soft = options.preference == "soft"
        self.builder = PromptBuilder(items, "pairwise", options)
        self.matches: list[Match] = []
        self._played: dict[tuple[str, ...], Match] = {}

    def task(self, first: str, second: str) -> Task:
        """The judge request for ``first`` shown as Answer 1 and ``second`` as Answer 2."""
        a1, a2 = self.items.answer(first), self.items.answer(second)
        if a1.question_id != a2.question_id:
            raise ValueError(f"a match needs two answers to one question ({first}, {second})")
        q = self.items.question_of(a1)
        t, rendered = self.builder.pairwise(a1, a2)
        parse, slot, mode = self.builder.read(t, q, rendered)
        return Task(
            messages=rendered.messages,
            parse=parse,
            reminder=reminder_for(t, q.max_points),
            subject=Subject("pairwise", (first, second)),
            label=f"{first}|{second}",
            slot=slot,
            slot_mode=mode,
            shown=rendered.shown,
        )

    def _key(self, a: str, b: str) -> tuple[str, ...]:
        return tuple(sorted((a, b))) if self.debias else (a, b)

    async def play(self, pairs: Sequence[IdPair], step: int) -> list[Match]:
        """Play all ``pairs`` in one wave (both orders of each when debiased)."""
        new: list[IdPair] = []
        asked: set[tuple[str, ...]] = set()
        for a, b in pairs:
            key = self._key(a, b)
            if key not in self._played and key not in asked:
                asked.add(key)
                new.append((a, b))
        orders = [o for a, b in new for o in ([(a, b), (b, a)] if self.debias else [(a, b)])]
        if orders:
            tasks = [self.task(f, s) for f, s in orders]
            outcomes = await self.engine.ask_all(tasks, wave=step)
            per = 2 if self.debias else 1
            played: list[Match] = []
            for i, (a, b) in enumerate(new):
                games = [Game(f, s, o, t.slot) for (f, s), o, t in zip(
                    orders[i * per:(i + 1) * per], outcomes[i * per:(i + 1) * per], tasks[i * per:(i + 1) * per],
                    strict=True)]
                match = Match(a, b, games, step, self.soft)
                self._played[self._key(a, b)] = match
                played.append(match)
            self.matches.extend(played)
            self.ctx.write_matches(m.row(self.items.answer(m.a).question_id) for m in played)
        return [self._played[self._key(a, b)] for a, b in pairs]


async def play_schedules(player: MatchPlayer, schedules: Sequence[Schedule], *, lockstep: bool = False) -> int:
    """Run the schedules of all questions.

    Pipelined (default): each question advances on its own — its next step is asked as soon as its own
    matches of this step are played, so one slow request holds back only its question.  With ``lockstep``,
    step ``s`` of every question is one wave (the next waits for the slowest request of all questions).
    The matches and results are the same either way.  Returns the number of steps (the sequential depth of
    the method on this data: the run's ``waves``).
    """
    if not lockstep:
        depths = await asyncio.gather(*(_drive(player, s) for s in schedules))
        return max(depths, default=0)
    active: list[tuple[Schedule, list[IdPair]]] = []
    for s in schedules:
        with contextlib.suppress(StopIteration):
            active.append((s, next(s)))
    step = 0
    while active:
        step += 1
        played = await player.play([p for _, req in active for p in req], step)
        following: list[tuple[Schedule, list[IdPair]]] = []
        i = 0
        for s, req in active:
            got, i = played[i:i + len(req)], i + len(req)
            with contextlib.suppress(StopIteration):
                following.append((s, s.send(got)))
        active = following
    return step


async def _drive(player: MatchPlayer, schedule: Schedule) -> int:
    """One question's schedule, step after step, on its own; returns its number of steps."""
    try:
        request = next(schedule)
    except StopIteration:
        return 0
    step = 0
    while True:
        step += 1
        played = await player.play(request, step)
        try:
            request = schedule.send(played)
        except StopIteration:
            return step


def better(a: str, b: str) -> Generator[list[IdPair], list[Match], bool]:
    """Sub-schedule for a sort: does ``a`` (shown first) beat ``b``?

    Only a strict win counts: a tie or an invalid match keeps the current order.
    """
    (m,) = yield [(a, b)]
    return m.verdict is Verdict.A


# -- per-answer results -----------------------------------------------------------------
def received_scores(matches: Sequence[Match]) -> dict[str, list[float]]:
    """Every grade each answer received, one per valid match, in the order played."""
    got: dict[str, list[float]] = {}
    for m in matches:
        for aid in (m.a, m.b):
            s = m.score_of(aid)
            if s is not None:
                got.setdefault(aid, []).append(s)
    return got


def mean_scores(matches: Sequence[Match]) -> dict[str, float]:
    return {aid: sum(v) / len(v) for aid, v in received_scores(matches).items()}


def competition_ranks(values: dict[str, float]) -> dict[str, int]:
    """1 + the number of answers with a strictly higher value ("1224" ranking)."""
    return {k: 1 + sum(o > v for o in values.values()) for k, v in values.items()}


def answer_results(
    items: ItemSet,
    matches: Sequence[Match],
    extra: Callable[[str], dict[str, Any]] | None = None,
    model: type[BaseModel] = PairwiseDetails,
) -> list[AnswerResult]:
    """Per-answer results: score = mean of every grade the answer received (None when it has none).

    ``details`` (``model``) holds the grades, a reference to every match the answer played (the matches
    with their raw replies are stored once, in the run's ``matches``), and what ``extra(answer_id)``
    adds (rank, elimination round, ratings).
    """
    played: dict[str, list[Match]] = {}
    for m in matches:
        played.setdefault(m.a, []).append(m)
        played.setdefault(m.b, []).append(m)
    got = received_scores(matches)
    results: list[AnswerResult] = []
    for a in items:
        scores = got.get(a.id, [])
        mine = played.get(a.id, [])
        error = None if scores else ("no valid match" if mine else SINGLE_ANSWER)
        details = model.model_validate({"scores": scores, "matches": [m.ref_for(a.id) for m in mine],
                                        "error": error, **(extra(a.id) if extra else {})})
        results.append(
            AnswerResult(
                answer_id=a.id,
                question_id=a.question_id,
                score=sum(scores) / len(scores) if scores else None,
                valid=bool(scores),
                details=details.model_dump(mode="json"),
            )
        )
    return results


def match_info(matches: Sequence[Match], debias: bool, soft: bool = False) -> dict[str, Any]:
    """Method info shared by the pairwise methods (kept small: per-answer data go in details)."""
    return {
        "debias": debias,
        **({"preference": "soft"} if soft else {}),
        "matches": len(matches),
        "invalid_matches": sum(not m.valid for m in matches),
        **({"partial_matches": sum(m.partial for m in matches)} if debias else {}),
    }


def within_question_spearman(items: ItemSet, values: dict[str, float]) -> dict[str, Any]:
    """Mean over questions of Spearman between ``values`` and the human scores of that question's answers.

    What a ranking method is for: ordering the answers to one question.  Questions where
    it is undefined (fewer than 2 graded answers, or constant values) are left out.
    """
    rhos: list[float] = []
    for qid in items.question_ids():
        judged, human = [], []
        for a in items.answers_for(qid):
            if a.id in values and a.human_score is not None:
                judged.append(values[a.id])
                human.append(a.human_score)
        rho = spearman(judged, human)
        if rho is not None:
            rhos.append(rho)
    return {"mean": sum(rhos) / len(rhos) if rhos else None, "questions": len(rhos)}


# -- method options (--method-opt key=value) --------------------------------------------
def positive(method: str, opts: dict[str, Any], *names: str) -> None:
    for n in names:
        if not opts[n] > 0:
            raise ConfigError(f"method '{method}': option {n} must be > 0 (got {opts[n]})")



# -- the skeleton every pairwise method shares ------------------------------------------------------
Extra = Callable[[str], dict[str, Any]]


class PairwiseMethod(Method):
    """A method made of question-level matches: it gives each question a :data:`Schedule`; the matches are
    played through :func:`play_schedules` (pipelined per question by default; each step's matches written
    at once), then every answer's score is the mean of the grades it received, with what :meth:`finish`
    adds per answer and to the run's info."""

    prompt_kind = "pairwise"
    details_model: ClassVar[type[BaseModel]] = PairwiseDetails

    def schedules(self, items: ItemSet, options: MethodOptions, opts: dict[str, Any]) -> list[Schedule]:
        raise NotImplementedError

    def finish(self, items: ItemSet, matches: Sequence[Match], options: MethodOptions, opts: dict[str, Any]
               ) -> tuple[Extra | None, dict[str, Any]]:
        """Per-answer additions to the details, and the method's info (after the shared match counts)."""
        return None, {"within_question_spearman": within_question_spearman(items, mean_scores(matches))}

    #: play all questions' step s as one wave (the papers' description) instead of pipelining each question
    lockstep: bool = False

    async def run(self, items: ItemSet, ctx: RunContext, options: MethodOptions) -> MethodResult:
        opts = self.options(options)
        player = MatchPlayer(items, ctx, options)
        await play_schedules(player, self.schedules(items, options, opts), lockstep=self.lockstep)
        extra, info = self.finish(items, player.matches, options, opts)
        results = answer_results(items, player.matches, extra, self.details_model)
        return MethodResult(results, {**match_info(player.matches, options.debias, player.soft), **info})
