"""All pairs: every pair of answers to a question plays one question-level match (Zheng et al. 2023,
Chatbot Arena; the knockout paper's "Chatbot Arena approach", O(N^2)).

Without ``--debias`` each pair is shown in a seeded random order, so position bias is
spread evenly; with it, both orders.  All matches of the dataset are one wave.

From the outcomes (win 1, tie 0.5, loss 0, by the grades in the match) each question
gets

* **Elo** ratings averaged over ``shuffles`` seeded random orders of its matches
  (:func:`knockout.metrics._elo.elo_shuffled`); options ``k``, ``initial``, ``shuffles``;
* **Bradley-Terry** strengths from the maintained library ``choix``
  (``ilsr_pairwise``, regularised by ``bt_alpha`` so an answer that never lost keeps a
  finite strength; a tie counts as one win each way).

With ``--preference soft`` a match's outcome is the probability that ``a`` is better
(:attr:`Match.preference`, both orders averaged when debiased): Elo takes it as the
result, Bradley-Terry as fractional wins (``p`` for ``a`` over ``b``, ``1 - p`` the other
way; ``choix.ilsr_pairwise_dense`` on the matrix of fractional counts).

The per-answer ``score`` is the mean of the grades the answer received (on the
question's point scale, so it is comparable with human grades and other methods);
``elo``, ``elo_std``, ``bt``, ``rank_elo`` and ``rank_bt`` are in the result details.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from knockout.data._records import ItemSet
from knockout.errors import ConfigError
from knockout.methods._base import MethodOptions, RatingDetails
from knockout.methods._match import (
    Extra,
    IdPair,
    Match,
    PairwiseMethod,
    Schedule,
    competition_ranks,
    mean_scores,
    positive,
    seeded_rng,
    within_question_spearman,
)
from knockout.metrics._elo import elo_shuffled

DEFAULTS: dict[str, Any] = {"k": 4.0, "initial": 1000.0, "shuffles": 100, "bt_alpha": 0.01}


def all_pairs(ids: list[str], seed: int, question_id: str, debias: bool) -> Schedule:
    rng = seeded_rng(seed, "allpairs", question_id)
    pairs: list[IdPair] = []
    for a, b in itertools.combinations(ids, 2):
        flip = rng.random() < 0.5  # drawn for every pair, so the orientation does not depend on --debias
        pairs.append((a, b) if debias or not flip else (b, a))
    if pairs:
        yield pairs


def outcomes(matches: list[Match]) -> list[tuple[str, str, float]]:
    """(a, b, score of a) for the valid matches."""
    return [(m.a, m.b, r) for m in matches if (r := m.result_for(m.a)) is not None]


def bradley_terry(ids: list[str], results: list[tuple[str, str, float]], alpha: float, soft: bool = False
                  ) -> dict[str, float]:
    """Bradley-Terry log-strengths (choix ``ilsr_pairwise``); a tie counts as one win each way.  ``soft``: each
    result is a probability, counted as that fraction of a win for ``a`` and the rest for ``b``
    (``ilsr_pairwise_dense``)."""
    try:
        import choix
    except ImportError:  # pragma: no cover - choix is a declared extra
        raise ConfigError("method 'allpairs' needs choix: pip install 'knockout[ranking]'") from None
    index = {aid: i for i, aid in enumerate(ids)}
    if soft:
        import numpy as np

        if not results:
            return {}
        counts = np.zeros((len(ids), len(ids)))
        for a, b, p in results:
            counts[index[a], index[b]] += p
            counts[index[b], index[a]] += 1.0 - p
        params = choix.ilsr_pairwise_dense(counts, alpha=alpha)
        return {aid: float(params[i]) for aid, i in index.items()}
    data: list[tuple[int, int]] = []
    for a, b, s in results:
        if s >= 0.5:
            data.append((index[a], index[b]))
        if s <= 0.5:
            data.append((index[b], index[a]))
    if not data:
        return {}
    params = choix.ilsr_pairwise(len(ids), data, alpha=alpha)
    return {aid: float(params[i]) for aid, i in index.items()}


class AllPairs(PairwiseMethod):
    name = "allpairs"
    defaults = DEFAULTS
    details_model = RatingDetails

    def check_options(self, opts: dict[str, Any]) -> None:
        positive(self.name, opts, "k", "shuffles")
        if opts["bt_alpha"] < 0:
            raise ConfigError(f"method '{self.name}': option bt_alpha must be >= 0")

    def schedules(self, items: ItemSet, options: MethodOptions, opts: dict[str, Any]) -> list[Schedule]:
        return [all_pairs([a.id for a in items.answers_for(qid)], options.seed, qid, options.debias)
                for qid in items.question_ids()]

    def finish(self, items: ItemSet, matches: Sequence[Match], options: MethodOptions, opts: dict[str, Any]
               ) -> tuple[Extra | None, dict[str, Any]]:
        groups = {qid: [a.id for a in items.answers_for(qid)] for qid in items.question_ids()}
        by_question: dict[str, list[Match]] = {}
        for m in matches:
            by_question.setdefault(items.answer(m.a).question_id, []).append(m)
        extra: dict[str, dict[str, Any]] = {}
        elo_all: dict[str, float] = {}
        bt_all: dict[str, float] = {}
        for qid, ids in groups.items():
            results = outcomes(by_question.get(qid, []))
            if not results:
                continue
            elo = elo_shuffled(results, k=opts["k"], initial=opts["initial"], shuffles=opts["shuffles"],
                               seed=options.seed)
            bt = bradley_terry(ids, results, opts["bt_alpha"], options.preference == "soft")
            elo_all.update(elo.ratings)
            bt_all.update(bt)
            r_elo, r_bt = competition_ranks(elo.ratings), competition_ranks(bt)
            for aid in elo.ratings:
                extra[aid] = {"elo": elo.ratings[aid], "elo_std": elo.std[aid], "rank_elo": r_elo[aid]}
            for aid in bt:
                extra.setdefault(aid, {}).update({"bt": bt[aid], "rank_bt": r_bt[aid]})
        return (lambda aid: extra.get(aid, {})), {
            "elo": {"k": opts["k"], "initial": opts["initial"], "shuffles": opts["shuffles"]},
            "within_question_spearman": {
                "mean_grade": within_question_spearman(items, mean_scores(matches)),
                "elo": within_question_spearman(items, elo_all),
                "bt": within_question_spearman(items, bt_all),
            },
        }
