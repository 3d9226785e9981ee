"""Length and position bias of a judge, measured against the humans on the same answers.

**Length** (every grading run; the length of an answer is its number of whitespace-separated words):

* ``partial_r``: the partial correlation of the judge's normalised score with the length, controlling for
  the human's normalised score: Pearson between the residuals of judge ~ human and of length ~ human
  (ordinary least squares with an intercept, numpy).  0: the judge rewards length no more than the humans'
  grades explain; > 0: longer answers get more than their human grade predicts.
* ``judge_length_r``, ``human_length_r``: the plain Pearson of each with the length, for context.
* ``length_controlled_pearson``: Pearson with the human scores after regressing the length out of the
  judge's score (judge ~ length by OLS; the residuals plus the judge's mean).  Against the report's plain
  Pearson: a large drop means part of the agreement ran through length.  (It also removes whatever part
  of the humans' judgement length carries, so it is a conservative figure.)
* ``pairs``: every two answers to the same question with different lengths (scores normalised): the
  share of the pairs the judge decides (different scores) that go to the longer answer, next to the same
  share for the humans on the pairs they decide.

**Pairwise methods** (from the run's stored matches; a match's grades are the mean of its valid games):
``matches.longer_wins`` vs ``matches.longer_wins_human``: the same two shares on the matches played;
**position**: ``first_win_rate`` = the share of the decided games (one order of a match, both grades
readable, grades different) that the answer shown first wins, next to ``first_win_rate_human`` (of the
valid games whose two answers the humans graded differently, the share whose first answer they graded
higher: what an unbiased judge that agreed with them would give); ``first_minus_second``: the mean
grade of the first-shown answer minus the second's (normalised), next to the humans'; **swap
consistency** (debiased runs): of the matches whose two orders both gave readable grades, the share
whose two orders name the same winner (or both a tie); ``first_wins_both`` the share where the answer
shown first won in both orders (a winner decided by position alone).

Intervals: 95% cluster bootstrap over questions (as every correlation of the report).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from knockout._verdict import Verdict
from knockout.data._records import Answer, ItemSet
from knockout.metrics._agreement import pearson_np
from knockout.metrics._analysis import Aligned, ci_pair, finite_or_none
from knockout.metrics._bootstrap import Interval, sums_bootstrap
from knockout.storage._store import MatchRow


def words(text: str) -> int:
    return len(text.split())


def _length_stats(j: np.ndarray, h: np.ndarray, n: np.ndarray) -> np.ndarray:
    """[partial r (judge, length | human), length-controlled Pearson] of the points."""
    if len(j) < 4:
        return np.full(2, np.nan)
    return np.asarray(_length_from_sums(_moments(j, h, n).sum(0, keepdims=True))[0])


def _moments(j: np.ndarray, h: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Per point: 1, j, h, n and their products (centred on the sample means, for accuracy), whose column
    sums give every figure of :func:`_length_from_sums`."""
    j, h, n = j - j.mean(), h - h.mean(), n - n.mean()
    return np.column_stack([np.ones(len(j)), j, h, n, j * j, h * h, n * n, j * h, j * n, h * n])


def _length_from_sums(s: np.ndarray) -> np.ndarray:
    """[partial r, length-controlled Pearson] per row of moment sums (:func:`_moments`), NaN where undefined.

    The partial correlation of judge and length given the human is the Pearson of the residuals of both on
    the human (OLS with an intercept), (r_jn - r_jh r_hn) / sqrt((1 - r_jh^2)(1 - r_hn^2)); the
    length-controlled Pearson is the Pearson of the judge's residual on the length with the human,
    (C_jh - b C_nh) / sqrt((C_jj - b C_jn) C_hh) with b = C_jn / C_nn."""
    with np.errstate(divide="ignore", invalid="ignore"):
        w = s[:, 0]
        mj, mh, mn = s[:, 1] / w, s[:, 2] / w, s[:, 3] / w
        cjj, chh, cnn = s[:, 4] / w - mj * mj, s[:, 5] / w - mh * mh, s[:, 6] / w - mn * mn
        cjh, cjn, chn = s[:, 7] / w - mj * mh, s[:, 8] / w - mj * mn, s[:, 9] / w - mh * mn
        tiny = 1e-12
        ok = (w >= 4) & (cnn > tiny * np.maximum(1.0, mn * mn))
        rjh = cjh / np.sqrt(cjj * chh)
        rjn = cjn / np.sqrt(cjj * cnn)
        rhn = chn / np.sqrt(chh * cnn)
        den = np.sqrt((1 - rjh * rjh) * (1 - rhn * rhn))
        partial = np.where(ok & (cjj > tiny) & (chh > tiny) & (den > 1e-7), (rjn - rjh * rhn) / den, np.nan)
        b = cjn / cnn
        rest = cjj - b * cjn
        controlled = np.where(ok & (rest > tiny) & (chh > tiny), (cjh - b * chn) / np.sqrt(rest * chh), np.nan)
    return np.asarray(np.clip(np.column_stack([partial, controlled]), -1.0, 1.0))


def _share(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _longer_share(pairs: Sequence[tuple[float, float, int, int]]) -> dict[str, Any]:
    """Of (score_x, score_y, length_x, length_y) pairs with different lengths, the share of the decided
    ones (different scores) the longer wins."""
    won = [float((sx > sy) == (nx > ny)) for sx, sy, nx, ny in pairs if nx != ny and sx != sy]
    return {"share": _share(won), "decided": len(won)}


#: a question with more answers than this has its pairs counted through Kendall's tau instead of one by one
PAIRS_PER_GROUP_MAX = 2000


def _concordance(score: np.ndarray, length: np.ndarray) -> tuple[int, int]:
    """(concordant, discordant) pairs of one large group, ties in either left out, in O(n log n): from
    Kendall's tau-b, S = tau_b sqrt((P - Tx)(P - Ty)) = C - D, and C + D = P - Tx - Ty + Txy."""
    from scipy.stats import kendalltau

    def tied(*cols: np.ndarray) -> int:
        counts = np.unique(np.column_stack(cols), axis=0, return_counts=True)[1]
        return int((counts * (counts - 1) // 2).sum())

    p = len(score) * (len(score) - 1) // 2
    tx, ty, txy = tied(score), tied(length), tied(score, length)
    untied = p - tx - ty + txy
    if untied <= 0:
        return 0, 0
    tau = float(kendalltau(score, length).statistic)
    s = round(tau * math.sqrt((p - tx) * (p - ty)))
    return (untied + s) // 2, (untied - s) // 2


def _longer_share_grouped(score: np.ndarray, length: np.ndarray, group: np.ndarray) -> dict[str, Any]:
    """:func:`_longer_share` of every two points of the same group (vectorised by group size)."""
    conc = disc = 0
    order = np.argsort(group, kind="stable")
    g = group[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, dtype=int)
    sizes = np.diff(np.r_[starts, len(g)])
    for size in np.unique(sizes):
        if size < 2:
            continue
        first = starts[sizes == size]
        if size > PAIRS_PER_GROUP_MAX:
            for st in first:
                c, d = _concordance(score[order[st:st + size]], length[order[st:st + size]])
                conc, disc = conc + c, disc + d
            continue
        a, b = np.triu_indices(int(size), k=1)
        step = max(1, 4_000_000 // len(a))
        for i in range(0, len(first), step):
            members = order[first[i:i + step, None] + np.arange(size)]
            x, y = members[:, a].ravel(), members[:, b].ravel()
            agree = np.sign(score[x] - score[y]) * np.sign(length[x] - length[y])
            conc, disc = conc + int((agree > 0).sum()), disc + int((agree < 0).sum())
    decided = conc + disc
    return {"share": conc / decided if decided else None, "decided": decided}


def length_analysis(al: Aligned, *, resamples: int, seed: int) -> dict[str, Any] | None:
    """The length figures of the module doc over the aligned answers (judge valid, human present)."""
    if len(al) < 4:
        return None
    n = np.array([words(r.text) for r in al.rows], dtype=float)
    j, h = al.judge_norm, al.human_norm
    vals = _length_stats(j, h, n)
    cis = sums_bootstrap(_moments(j, h, n), al.question, _length_from_sums, resamples=resamples, seed=seed) \
        if resamples else [Interval(None, None, 0)] * 2
    jp, hp = _longer_share_grouped(j, n, al.question), _longer_share_grouped(h, n, al.question)
    return {
        "n": len(al), "unit": "words",
        "mean_words": float(n.mean()),
        "partial_r": finite_or_none(vals[0]), "partial_r_ci": ci_pair(cis[0]),
        "judge_length_r": finite_or_none(pearson_np(j, n)),
        "human_length_r": finite_or_none(pearson_np(h, n)),
        "length_controlled_pearson": finite_or_none(vals[1]), "length_controlled_pearson_ci": ci_pair(cis[1]),
        "pearson": finite_or_none(pearson_np(j, h)),
        "pairs": {"longer_wins": jp["share"], "decided": jp["decided"], "longer_wins_human": hp["share"],
                  "decided_human": hp["decided"]},
    }


def _game_scores(game: dict[str, Any]) -> tuple[float, float] | None:
    s = game.get("scores")
    if not isinstance(s, list | tuple) or len(s) != 2 or s[0] is None or s[1] is None:
        return None
    return float(s[0]), float(s[1])


def match_bias(items: ItemSet, matches: Sequence[MatchRow]) -> dict[str, Any] | None:
    """Position and length figures of a pairwise run's matches (module doc); None without matches."""
    if not matches:
        return None
    def ans(aid: str) -> Answer | None:
        i = items.find(aid)
        return None if i is None else items.answer_at(i)

    first_wins: list[float] = []
    first_wins_h: list[float] = []
    diff: list[float] = []
    diff_h: list[float] = []
    games = ties = 0
    consistent: list[float] = []
    first_both: list[float] = []
    longer: list[tuple[float, float, int, int]] = []
    longer_h: list[tuple[float, float, int, int]] = []
    for m in matches:
        got: dict[str, list[float]] = {m.a: [], m.b: []}
        winners: list[int] = []  # per valid game: +1 a won, -1 b won, 0 tie
        firsts: list[bool] = []  # per valid decided game: did the first-shown win
        for g in m.games:
            sc = _game_scores(g)
            first, second = str(g.get("first")), str(g.get("second"))
            if sc is None or first not in got or second not in got:
                continue
            games += 1
            s1, s2 = sc
            got[first].append(s1)
            got[second].append(s2)
            a1, a2 = ans(first), ans(second)
            mp = items.question_of(a1).max_points if a1 is not None else 1.0
            diff.append((s1 - s2) / mp)
            if a1 is not None and a2 is not None and a1.human_score is not None and a2.human_score is not None:
                diff_h.append((a1.human_score - a2.human_score) / mp)
                if a1.human_score != a2.human_score:
                    first_wins_h.append(float(a1.human_score > a2.human_score))
            if s1 == s2:
                ties += 1
            else:
                first_wins.append(float(s1 > s2))
                firsts.append(s1 > s2)
            sa = s1 if first == m.a else s2
            sb = s2 if first == m.a else s1
            winners.append(int(np.sign(sa - sb)))
        if len(m.games) == 2 and len(winners) == 2:
            consistent.append(float(winners[0] == winners[1]))
            first_both.append(float(len(firsts) == 2 and all(firsts)))
        aa, ab = ans(m.a), ans(m.b)
        if got[m.a] and got[m.b] and aa is not None and ab is not None:
            na, nb = words(aa.text), words(ab.text)
            longer.append((float(np.mean(got[m.a])), float(np.mean(got[m.b])), na, nb))
            if aa.human_score is not None and ab.human_score is not None:
                longer_h.append((aa.human_score, ab.human_score, na, nb))
    lj, lh = _longer_share(longer), _longer_share(longer_h)
    return {
        "matches": len(matches), "games": games, "ties": ties,
        "first_win_rate": _share(first_wins), "decided_games": len(first_wins),
        "first_win_rate_human": _share(first_wins_h),
        "first_minus_second": _share(diff), "first_minus_second_human": _share(diff_h),
        "swap_consistency": _share(consistent), "debiased_matches": len(consistent),
        "first_wins_both": _share(first_both),
        "longer_wins": lj["share"], "decided_matches": lj["decided"],
        "longer_wins_human": lh["share"], "decided_matches_human": lh["decided"],
    }


def sbs_length(items: ItemSet, swap0: Sequence[str], swap1: Sequence[str], humans: Sequence[str | None],
               ids: Sequence[str]) -> dict[str, Any] | None:
    """Side-by-side: the share of the judge's A/B verdicts (both orders) that prefer the longer of the two
    answers, next to the humans' share on their A/B verdicts (items whose answers differ in length)."""
    judge: list[float] = []
    human: list[float] = []
    for item, v0, v1, h in zip(ids, swap0, swap1, humans, strict=True):
        c, b = items.find(f"{item}/candidate"), items.find(f"{item}/baseline")
        if c is None or b is None:
            continue
        nc, nb = words(items.text_at(c)), words(items.text_at(b))
        if nc == nb:
            continue
        cand_longer = nc > nb
        for v in (v0, v1):
            if v in (Verdict.A, Verdict.B):
                judge.append(float((v == Verdict.A) == cand_longer))
        if h in (Verdict.A, Verdict.B):
            human.append(float((h == Verdict.A) == cand_longer))
    if not judge and not human:
        return None
    return {"unit": "words", "longer_preferred": _share(judge), "verdicts": len(judge),
            "longer_preferred_human": _share(human), "human_verdicts": len(human)}
