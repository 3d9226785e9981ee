"""Pairwise ranking prompting with sorting (Qin et al. 2024, "Large Language Models are Effective Text
Rankers with Pairwise Ranking Prompting", PRP-Sorting and PRP-Sliding-K).

Both sort the answers to each question with the question-level match as the
comparison: ``a`` beats ``b`` when its grade in the match is strictly higher
(averaged over both orders with ``--debias``, as PRP's order-debiased
comparison).  A tie or an invalid match keeps the current order.  The starting
order is a seeded shuffle of the answers (no first-stage ranker here).

* ``heapsort``: a full heapsort, O(N log N) comparisons.  Comparisons depend on
  earlier ones, so each is a sequential step; each question runs its steps on
  its own, pipelined (``lockstep``: one wave per step across questions).  A pair
  compared again is not asked again.
* ``window``: ``passes`` (option, default 3) bubble-sort passes from the bottom
  of the list to the top, swapping a pair when the lower answer wins; after K
  passes the top K are in order.  K (N - 1) comparisons per question, each a
  sequential step.

Per-answer ``score``: the mean of the grades the answer received in its matches
(so it can be compared with human grades); ``rank`` (1 = best, the sorted
position) is in the result details.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from knockout.data._records import ItemSet
from knockout.methods._base import MethodOptions, RankDetails
from knockout.methods._match import (
    Extra,
    IdPair,
    Match,
    PairwiseMethod,
    Schedule,
    better,
    mean_scores,
    positive,
    seeded_rng,
    within_question_spearman,
)


def heapsort(ids: list[str]) -> Generator[list[IdPair], list[Match], list[str]]:
    """Heapsort with a max-heap on :func:`better`; returns the answers best first."""
    arr = list(ids)

    def sift_down(root: int, end: int) -> Generator[list[IdPair], list[Match], None]:
        while (child := 2 * root + 1) < end:
            top = root
            if (yield from better(arr[child], arr[top])):
                top = child
            if child + 1 < end and (yield from better(arr[child + 1], arr[top])):
                top = child + 1
            if top == root:
                return
            arr[root], arr[top] = arr[top], arr[root]
            root = top

    n = len(arr)
    for start in range(n // 2 - 1, -1, -1):
        yield from sift_down(start, n)
    for end in range(n - 1, 0, -1):
        arr[0], arr[end] = arr[end], arr[0]
        yield from sift_down(0, end)
    return arr[::-1]


def sliding_window(ids: list[str], passes: int) -> Generator[list[IdPair], list[Match], list[str]]:
    """``passes`` bubble passes from the bottom up (the lower answer shown first); returns best first."""
    arr = list(ids)
    for p in range(min(passes, len(arr) - 1)):
        for i in range(len(arr) - 1, p, -1):  # the top p places are settled after p passes
            if (yield from better(arr[i], arr[i - 1])):
                arr[i], arr[i - 1] = arr[i - 1], arr[i]
    return arr


class _Sorting(PairwiseMethod):
    details_model = RankDetails

    def sort(self, ids: list[str], opts: dict[str, Any]) -> Generator[list[IdPair], list[Match], list[str]]:
        raise NotImplementedError

    def schedules(self, items: ItemSet, options: MethodOptions, opts: dict[str, Any]) -> list[Schedule]:
        self.rankings: dict[str, list[str]] = {}

        def schedule(qid: str) -> Schedule:
            ids = [a.id for a in items.answers_for(qid)]
            seeded_rng(options.seed, "initial-order", qid).shuffle(ids)
            self.rankings[qid] = yield from self.sort(ids, opts)

        return [schedule(qid) for qid in items.question_ids()]

    def finish(self, items: ItemSet, matches: Sequence[Match], options: MethodOptions, opts: dict[str, Any]
               ) -> tuple[Extra | None, dict[str, Any]]:
        rank = {aid: i + 1 for ranking in self.rankings.values() for i, aid in enumerate(ranking)}
        return (lambda aid: {"rank": rank[aid]}), {
            **({"options": opts} if opts else {}),
            "within_question_spearman": {
                "mean_grade": within_question_spearman(items, mean_scores(matches)),
                "rank": within_question_spearman(items, {a: -float(r) for a, r in rank.items()}),
            },
        }


class Heapsort(_Sorting):
    name = "heapsort"

    def sort(self, ids: list[str], opts: dict[str, Any]) -> Generator[list[IdPair], list[Match], list[str]]:
        return heapsort(ids)


class SlidingWindow(_Sorting):
    name = "window"
    defaults = {"passes": 3}  # noqa: RUF012

    def check_options(self, opts: dict[str, Any]) -> None:
        positive(self.name, opts, "passes")

    def sort(self, ids: list[str], opts: dict[str, Any]) -> Generator[list[IdPair], list[Match], list[str]]:
        return sliding_window(ids, opts["passes"])
