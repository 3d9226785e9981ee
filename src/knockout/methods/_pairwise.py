"""One-round (naive) pairwise assessment: the knockout papers' baseline (Sandan, Dinh, Niehues 2025, section 4).

The answers to each question are paired once, with exactly the random pairing of
the knockout's first round (same seed, same pairs, same order: those matches are
shared through the store).  When the number of answers is odd, the odd one out
plays one extra match against an answer drawn at random (seeded) from the paired
ones, shown first; that answer then has two grades and its score is their mean.
Every answer's score is the mean of the grades it received.  One step for the
whole dataset (its matches are independent); ``ceil(N/2)`` matches per question (twice the requests when
``--debias``).
"""

from __future__ import annotations

from typing import Any

from knockout.data._records import ItemSet
from knockout.methods._base import MethodOptions
from knockout.methods._match import (
    IdPair,
    PairwiseMethod,
    Schedule,
    random_pairs,
    seeded_rng,
)


def one_round_pairs(ids: list[str], seed: int, question_id: str) -> list[IdPair]:
    pairs, odd = random_pairs(ids, seed, question_id, 1)
    if odd is not None and pairs:
        partner = seeded_rng(seed, "odd-one-out", question_id).choice([x for p in pairs for x in p])
        pairs.append((odd, partner))
    return pairs


def one_round(ids: list[str], seed: int, question_id: str) -> Schedule:
    pairs = one_round_pairs(ids, seed, question_id)
    if pairs:
        yield pairs


class Pairwise(PairwiseMethod):
    name = "pairwise"

    def schedules(self, items: ItemSet, options: MethodOptions, opts: dict[str, Any]) -> list[Schedule]:
        return [one_round([a.id for a in items.answers_for(qid)], options.seed, qid) for qid in items.question_ids()]
