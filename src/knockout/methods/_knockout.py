"""Knockout assessment (Sandan, Dinh, Niehues 2025, Algorithm 1; Sandan 2025 thesis, section 3.2.2).

Each round the answers still in the tournament are paired at random (seeded by
``--seed``, the question and the round); each pair plays a question-level match
(both orders when ``--debias``); the answer with the higher grade advances, and
when the number is odd the unpaired answer advances with a bye.  Rounds go on
until one answer, the champion, is left.  Every grade an answer received is
kept; its final score is their mean.

Rules the algorithm leaves open, decided here:

* **Tie** (equal grades): the second answer of the pair advances — Algorithm 1,
  line 9 (``if Score1 > Score2`` … ``else`` advance ``r_{k+1}``).  The pairing is a
  seeded shuffle, so which answer is second is a seeded coin flip.
* **Invalid match** (no readable grades after the engine's format retries, or a
  failed backend): neither answer gets a grade from it, and it is counted in
  ``invalid_matches``.  The answer with the higher mean grade so far advances;
  when that does not decide (equal means, or either has no grade yet) the
  second answer advances, as for a tie.
* **Debiased, one order invalid**: the match uses the grades of the valid order
  and is counted in ``partial_matches``.
* **Soft preferences** (``--preference soft``): the answer more probably the better
  one advances (the probability read from the judge's token probabilities, both
  orders averaged when debiased: :attr:`Match.preference`); exactly one half is a tie.
  Scores are still the mean of the grades received.

Each question plays ``ceil(log2 N)`` rounds, pipelined: a question starts its next
round as soon as its own round is played (with ``lockstep``, round ``r`` of every
question is one wave, as in the paper; the matches are the same).  The run's
``waves`` is the deepest question's number of rounds, and each question plays
exactly ``N - 1`` matches (``2(N - 1)`` judge requests when debiased).  A question with a single answer plays no match;
that answer gets no grade (it is reported invalid with the reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from knockout._verdict import Verdict
from knockout.data._records import ItemSet
from knockout.methods._base import KnockoutDetails, MethodOptions
from knockout.methods._match import (
    Extra,
    Match,
    PairwiseMethod,
    Schedule,
    mean_scores,
    random_pairs,
    within_question_spearman,
)


@dataclass
class Bracket:
    """The knockout tournament of one question."""

    question_id: str
    answer_ids: list[str]
    seed: int = 0
    rounds: int = 0
    champion: str | None = None
    eliminated: dict[str, int] = field(default_factory=dict)  # answer -> round in which it lost
    byes: dict[str, list[int]] = field(default_factory=dict)  # answer -> rounds it skipped
    decisions: list[dict[str, Any]] = field(default_factory=list)
    _grades: dict[str, list[float]] = field(default_factory=dict)

    def _mean_so_far(self, aid: str) -> float | None:
        g = self._grades.get(aid)
        return sum(g) / len(g) if g else None

    def decide(self, m: Match, first: str, second: str) -> tuple[str, str]:
        """The answer that advances from match ``m`` (``first`` before ``second`` in the pairing), and why."""
        verdict = m.verdict if first == m.a else m.verdict.swap()  # A: first is better
        if verdict.is_valid:
            better = "more probably better" if m.soft else "higher grade"
            if verdict is Verdict.A:
                return first, better
            if verdict is Verdict.B:
                return second, better
            return second, "tie: second of the pair (Algorithm 1)"
        m1, m2 = self._mean_so_far(first), self._mean_so_far(second)
        if m1 is not None and m2 is not None and m1 != m2:
            return (first if m1 > m2 else second), "invalid match: higher mean grade so far"
        return second, "invalid match: second of the pair"

    def steps(self) -> Schedule:
        alive = list(self.answer_ids)
        r = 0
        while len(alive) > 1:
            r += 1
            pairs, bye = random_pairs(alive, self.seed, self.question_id, r)
            matches = yield pairs
            following: list[str] = []
            for (first, second), m in zip(pairs, matches, strict=True):
                winner, why = self.decide(m, first, second)
                loser = second if winner == first else first
                for aid in (first, second):
                    s = m.score_of(aid)
                    if s is not None:
                        self._grades.setdefault(aid, []).append(s)
                self.eliminated[loser] = r
                soft = {"preference": m.result_for(first)} if m.soft else {}  # P(first is better)
                self.decisions.append({"round": r, "pair": [first, second], "winner": winner, "rule": why,
                                       "valid": m.valid, **soft})
                following.append(winner)
            if bye is not None:
                self.byes.setdefault(bye, []).append(r)
                following.append(bye)
            alive = following
        self.rounds = r
        self.champion = alive[0] if alive else None

    def answer_details(self, aid: str) -> dict[str, Any]:
        return {
            "champion": aid == self.champion,
            "eliminated_round": self.eliminated.get(aid),
            "rounds_played": self.eliminated.get(aid, self.rounds) - len(self.byes.get(aid, [])),
            "byes": self.byes.get(aid, []),
        }


class Knockout(PairwiseMethod):
    name = "knockout"
    details_model = KnockoutDetails

    def schedules(self, items: ItemSet, options: MethodOptions, opts: dict[str, Any]) -> list[Schedule]:
        self.brackets = {qid: Bracket(qid, [a.id for a in items.answers_for(qid)], options.seed)
                         for qid in items.question_ids()}
        return [b.steps() for b in self.brackets.values()]

    def finish(self, items: ItemSet, matches: Sequence[Match], options: MethodOptions, opts: dict[str, Any]
               ) -> tuple[Extra | None, dict[str, Any]]:
        of_answer = {aid: b for b in self.brackets.values() for aid in b.answer_ids}
        return (lambda aid: of_answer[aid].answer_details(aid)), {
            "rounds": max((b.rounds for b in self.brackets.values()), default=0),
            "champions": {qid: b.champion for qid, b in self.brackets.items()},
            "within_question_spearman": within_question_spearman(items, mean_scores(matches)),
        }
