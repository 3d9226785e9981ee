"""Agreement between judge scores and human scores.

Question level, as SciEx (Dinh et al. 2024, section 4.3) defines it: Pearson
correlation on scores normalised by each question's maximum points, and RMSE on
the original scale.  Invalid results are left out of every figure and counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from knockout.data._records import ItemSet

# Pearson and Spearman with numpy alone (the analysis' vectorised forms): every grade run's summary reports
# them, and importing scipy.stats costs a grading process about 0.55 s of CPU (-X importtime; bench/peers.py).
# The figures equal scipy.stats.pearsonr / spearmanr (tests/test_metrics_measures.py, ties included).


def pearson_np(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2:
        return math.nan
    xc, yc = x - x.mean(), y - y.mean()
    sx, sy = float(np.max(np.abs(xc))), float(np.max(np.abs(yc)))
    if not (0 < sx < math.inf and 0 < sy < math.inf):
        return math.nan
    xc, yc = xc / sx, yc / sy  # scaled to at most 1: grades of 1e200 (a fuzzed file) do not overflow the products
    den = math.sqrt(float(xc @ xc) * float(yc @ yc))
    return float(xc @ yc) / den if den > 1e-15 else math.nan


Codes = tuple[np.ndarray, np.ndarray]  # (index of each value among the sorted distinct values, counts)


def codes(a: np.ndarray) -> Codes:
    _, inv, counts = np.unique(a, return_inverse=True, return_counts=True)
    return inv.reshape(-1), counts


def ranks_from(c: Codes) -> np.ndarray:
    inv, counts = c
    top = np.cumsum(counts)
    return np.asarray((top - (counts - 1) / 2.0)[inv], dtype=float)


def rank_average(a: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (as scipy.stats.rankdata, without its overhead)."""
    return ranks_from(codes(a))


def spearman_np(x: np.ndarray, y: np.ndarray) -> float:
    return pearson_np(rank_average(x), rank_average(y)) if len(x) >= 2 else math.nan


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Pearson r, or None when undefined (fewer than 2 points or a constant series)."""
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return None
    return max(-1.0, min(1.0, pearson_np(np.asarray(x, dtype=float), np.asarray(y, dtype=float))))


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Spearman's rho (Pearson of the average ranks), or None when undefined."""
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return None
    return max(-1.0, min(1.0, spearman_np(np.asarray(x, dtype=float), np.asarray(y, dtype=float))))


def rmse(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    if not len(x):
        return None
    # numpy, not sklearn's mean_squared_error: importing sklearn costs a grading process about 90 MB
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    return float(math.sqrt(float(np.mean(d * d))))


@dataclass
class ScorePairs:
    """Aligned judge and human scores (numpy arrays) for the valid, human-graded answers."""

    judge: np.ndarray
    human: np.ndarray
    max_points: np.ndarray
    points_scale: np.ndarray  # bool: human scores on 0..max_points (RMSE applies)
    invalid: int
    unscored: int  # answers without a human score

    @property
    def judge_norm(self) -> np.ndarray:
        return np.asarray(self.judge / self.max_points)

    @property
    def human_norm(self) -> np.ndarray:
        return np.asarray(np.where(self.points_scale, self.human / self.max_points, self.human))


def pair_scores(items: ItemSet, scores: Mapping[str, float | None]) -> ScorePairs:
    """The answers of ``items`` that ``scores`` holds (None: invalid), as arrays (a million answers take a few
    arrays of floats, not lists of Python floats)."""
    n = len(items)
    judge, human, maxp = np.empty(n), np.empty(n), np.empty(n)
    scale = np.empty(n, dtype=bool)
    k = invalid = unscored = 0
    for i in range(n):  # from the item set's columns (no Answer built)
        aid = items.answer_id_at(i)
        if aid not in scores:
            continue
        s = scores[aid]
        if s is None:
            invalid += 1
            continue
        h = items.human_score_at(i)
        if h is None:
            unscored += 1
            continue
        q = items.question_at(i)
        judge[k], human[k], maxp[k], scale[k] = float(s), h, q.max_points, q.human_scale == "points"
        k += 1
    return ScorePairs(judge[:k].copy(), human[:k].copy(), maxp[:k].copy(), scale[:k].copy(), invalid, unscored)


def question_level(items: ItemSet, scores: Mapping[str, float | None]) -> dict[str, Any]:
    """Pearson (normalised), Spearman, RMSE (points scale only), n and invalid count."""
    p = pair_scores(items, scores)
    jn, hn = p.judge_norm, p.human_norm
    pts = p.points_scale
    return {
        "n": len(p.judge),
        "invalid": p.invalid,
        "without_human_score": p.unscored,
        "pearson": pearson(jn, hn),
        "spearman": spearman(jn, hn),
        "rmse": rmse(p.judge[pts], p.human[pts]) if pts.any() else None,
    }
