"""Agreement measures beyond Pearson/Spearman/RMSE (those live in :mod:`knockout.metrics._agreement`).

* Kendall's tau-b.
* Pairwise ranking accuracy (Kocmi et al. 2021, "To Ship or Not to Ship", used at exam level in the
  knockout thesis, section 4.2.2): the share of pairs whose order (sign of the difference, ties included)
  the judge gets the same as the humans.
* Full-points rate and precision (SciEx, Dinh et al. 2024, appendix G.3).
* Williams' test for the difference of two dependent correlations that share one variable (Williams
  1959, as the WMT metrics tasks use it to compare two metrics' correlations with the same human scores).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

ArrayLike = Sequence[float] | np.ndarray

#: Tolerance when comparing a score with the maximum points or a grid.
EPS = 1e-9


def _defined(x: ArrayLike, y: ArrayLike) -> bool:
    return len(x) >= 2 and float(np.std(x)) > 0 and float(np.std(y)) > 0


def kendall(x: ArrayLike, y: ArrayLike) -> float | None:
    """Kendall's tau-b, or None when undefined (fewer than 2 points or a constant series)."""
    if not _defined(x, y):
        return None
    return float(stats.kendalltau(x, y).statistic)


def pairwise_ranking_accuracy(judge: ArrayLike, human: ArrayLike, groups: ArrayLike | None = None
                              ) -> tuple[float | None, int]:
    """Kocmi et al. accuracy: |sign(d_judge) == sign(d_human)| / |pairs|, d = score(A) - score(B).

    Pairs are all pairs of entries within the same group (e.g. the examinees of one exam); without
    ``groups``, all pairs.  A tie is sign 0: a pair both call a tie counts as agreement, a pair only one
    calls a tie as disagreement.  Returns (accuracy or None without pairs, number of pairs).
    """
    j = np.asarray(judge, dtype=float)
    h = np.asarray(human, dtype=float)
    g = np.zeros(len(j), dtype=int) if groups is None else np.asarray(groups)
    agree = total = 0
    for key in np.unique(g):
        idx = np.flatnonzero(g == key)
        if len(idx) < 2:
            continue
        a, b = np.triu_indices(len(idx), k=1)
        dj = np.sign(np.round(j[idx][a] - j[idx][b], 9))
        dh = np.sign(np.round(h[idx][a] - h[idx][b], 9))
        agree += int(np.sum(dj == dh))
        total += len(a)
    return (agree / total if total else None), total


@dataclass
class FullPoints:
    """SciEx appendix G.3: how often the judge gives full points, and how often it is right to."""

    rate: float | None  # share of answers the judge gives full points
    precision: float | None  # of those, the share the humans also gave full points
    human_rate: float | None  # share of answers the humans gave full points
    n_full: int  # answers the judge gave full points


def full_points(judge: ArrayLike, human: ArrayLike, max_points: ArrayLike) -> FullPoints:
    j = np.asarray(judge, dtype=float)
    h = np.asarray(human, dtype=float)
    m = np.asarray(max_points, dtype=float)
    if not len(j):
        return FullPoints(None, None, None, 0)
    jf = j >= m - EPS
    hf = h >= m - EPS
    n_full = int(jf.sum())
    return FullPoints(float(jf.mean()), float((hf & jf).sum() / n_full) if n_full else None, float(hf.mean()),
                      n_full)


@dataclass
class WilliamsResult:
    t: float
    df: int
    p_one_sided: float  # H1: r12 > r13 (for t > 0; else r13 > r12), as WMT reports it
    p_two_sided: float


#: a correlation this close to +-1 makes Williams' t meaningless (a zero variance term: t runs off to +-100s)
WILLIAMS_UNIT = 1e-6


def williams_undefined(r12: float, r13: float, r23: float, n: int) -> str | None:
    """Why Williams' test says nothing for these correlations (None when it applies): fewer than 4 answers
    (no degree of freedom), a correlation with the humans of +-1 (one run is the humans' ranking exactly),
    or the two runs correlated +-1 with each other (the same grades up to a linear map)."""
    if n <= 3:
        return f"n = {n}, needs n > 3"
    for name, r in (("run A's Pearson", r12), ("run B's Pearson", r13)):
        if abs(r) >= 1 - WILLIAMS_UNIT:
            return f"{name} is {r:+.3f}"
    if abs(r23) >= 1 - WILLIAMS_UNIT:
        return f"the two runs correlate {r23:+.3f}"
    return None


def williams_test(r12: float, r13: float, r23: float, n: int) -> WilliamsResult:
    """Williams' t for H0: rho12 = rho13, where variable 1 (human) is shared by both correlations.

    t = (r12 - r13) sqrt((n-1)(1+r23)) / sqrt(2K(n-1)/(n-3) + (r12+r13)^2/4 (1-r23)^3),
    K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23, with n - 3 degrees of freedom
    (Williams 1959; Steiger 1980 eq. 3; Graham & Baldwin 2014).
    """
    reason = williams_undefined(r12, r13, r23, n)
    if reason:
        raise ValueError(f"Williams' test is undefined: {reason}")
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    denom = 2 * k * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3
    if denom <= 0:
        raise ValueError("Williams' test is undefined: the correlations are not those of one data set (degenerate)")
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(denom)
    df = n - 3
    one = float(stats.t.sf(abs(t), df))
    return WilliamsResult(t=float(t), df=df, p_one_sided=one, p_two_sided=min(1.0, 2 * one))
