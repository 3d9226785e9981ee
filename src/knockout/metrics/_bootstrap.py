"""Seeded cluster bootstrap: confidence intervals and paired comparisons that resample questions.

Answers to the same question are not independent (one question can be easy for every examinee and
for the judge), so the unit of resampling is the question: each bootstrap sample draws as many
questions as there are, with replacement, and keeps all answers of each drawn question (a question
drawn twice counts twice).  Where a group holds a single question, answers are resampled instead.

A statistic is a function of an index array into the caller's aligned data that returns a vector of
floats (NaN where undefined), so several figures share one set of resamples.  Intervals are percentile
intervals over the resamples where the figure is defined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from knockout.metrics._constants import DEFAULT_RESAMPLES as DEFAULT_RESAMPLES

Statistic = Callable[[np.ndarray], np.ndarray]


class ClusterSampler:
    """Draws bootstrap index arrays that resample clusters (questions) with replacement."""

    def __init__(self, clusters: np.ndarray, seed: int = 0) -> None:
        clusters = np.asarray(clusters)
        self.n = len(clusters)
        inverse = np.unique(clusters, return_inverse=True)[1] if self.n else np.array([], dtype=int)
        if self.n and inverse.max() < 1:  # one question: resample its answers
            inverse = np.arange(self.n)
        self.inverse = inverse  # each row's cluster (0..k-1)
        self.order = np.argsort(inverse, kind="stable")  # rows grouped by cluster
        self.sizes = np.bincount(inverse) if self.n else np.array([], dtype=int)
        self.starts = np.cumsum(self.sizes) - self.sizes
        self.rng = np.random.default_rng(seed)

    def draw_weights(self) -> np.ndarray:
        """How often each cluster is drawn in the next resample (the same draw as :meth:`draw`, as counts)."""
        k = len(self.sizes)
        return np.bincount(self.rng.integers(0, k, k), minlength=k).astype(float) if k else np.zeros(0)

    def draw(self) -> np.ndarray:
        k = len(self.sizes)
        if not k:
            return np.array([], dtype=int)
        pick = self.rng.integers(0, k, k)
        sizes = self.sizes[pick]
        offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        return np.asarray(self.order[np.repeat(self.starts[pick], sizes) + offsets], dtype=int)


@dataclass
class Interval:
    low: float | None
    high: float | None
    resamples: int  # resamples in which the figure was defined


def percentile_intervals(samples: np.ndarray, alpha: float = 0.05) -> list[Interval]:
    """One percentile interval per column of ``samples`` (resamples x figures), ignoring NaN."""
    out = []
    for col in samples.T:
        ok = col[np.isfinite(col)]
        # Fewer than half of the resamples defined: an interval would mislead.
        if len(ok) < max(2, len(col) // 2):
            out.append(Interval(None, None, len(ok)))
        else:
            lo, hi = np.quantile(ok, [alpha / 2, 1 - alpha / 2])
            out.append(Interval(float(lo), float(hi), len(ok)))
    return out


def bootstrap(stat: Statistic, clusters: np.ndarray, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
              alpha: float = 0.05) -> list[Interval]:
    """Percentile intervals for each figure ``stat`` returns, resampling clusters."""
    sampler = ClusterSampler(clusters, seed)
    first = stat(np.arange(len(clusters)))
    samples = np.full((resamples, len(first)), np.nan)
    for b in range(resamples):
        samples[b] = stat(sampler.draw())
    return percentile_intervals(samples, alpha)


#: how many cluster weights one block of resamples may hold at once (resamples x clusters)
_BLOCK_CELLS = 4_000_000


def sums_bootstrap(per_row: Any, clusters: np.ndarray, stat: Callable[[np.ndarray], np.ndarray], *,
                   resamples: int = DEFAULT_RESAMPLES, seed: int = 0, alpha: float = 0.05) -> list[Interval]:
    """Percentile intervals of figures that are functions of column sums over the rows.

    ``per_row`` (rows x m, a numpy array or a scipy sparse matrix) is summed once per cluster; a resample's
    column sums are then the clusters' sums weighted by how often each was drawn (the same resamples as
    :func:`bootstrap` with the same seed), so a resample costs O(clusters x m) instead of work per row.
    ``stat`` maps a block of resampled sums (block x m) to the figures (block x f), NaN where undefined."""
    from scipy import sparse

    sampler = ClusterSampler(clusters, seed)
    k, n = len(sampler.sizes), sampler.n
    if not n or not resamples:
        raise ValueError("sums_bootstrap needs rows and resamples")
    owner = sparse.csr_matrix((np.ones(n), (sampler.inverse, np.arange(n))), shape=(k, n))
    sums = owner @ per_row  # clusters x m
    block = max(1, min(resamples, _BLOCK_CELLS // max(k, 1)))
    out = []
    for start in range(0, resamples, block):
        weights = np.empty((min(block, resamples - start), k))  # filled row by row (no list of rows besides)
        for row in weights:
            row[:] = sampler.draw_weights()
        drawn = (sums.T @ weights.T).T if sparse.issparse(sums) else weights @ sums
        out.append(np.asarray(stat(np.asarray(drawn, dtype=float)), dtype=float))
    return percentile_intervals(np.vstack(out), alpha)


@dataclass
class PairedResult:
    delta: float | None  # figure(A) - figure(B) on the full data
    low: float | None
    high: float | None
    p_value: float | None  # two-sided: 2 * min(P(delta* <= 0), P(delta* >= 0)), capped at 1
    resamples: int


def paired_bootstrap(stat_a: Callable[[np.ndarray], float | None], stat_b: Callable[[np.ndarray], float | None],
                     clusters: np.ndarray, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                     alpha: float = 0.05) -> PairedResult:
    """Paired bootstrap of the difference of one figure between two methods on the same items.

    Both statistics see the same resampled questions in every resample (Koehn 2004's paired bootstrap,
    with questions as the unit).
    """
    a, b = stat_a(np.arange(len(clusters))), stat_b(np.arange(len(clusters)))
    delta = None if a is None or b is None else a - b
    sampler = ClusterSampler(clusters, seed)
    deltas = []
    for _ in range(resamples):
        idx = sampler.draw()
        x, y = stat_a(idx), stat_b(idx)
        if x is not None and y is not None:
            deltas.append(x - y)
    if delta is None or len(deltas) < max(2, resamples // 2):
        return PairedResult(delta, None, None, None, len(deltas))
    d = np.asarray(deltas)
    lo, hi = np.quantile(d, [alpha / 2, 1 - alpha / 2])
    p = min(1.0, 2 * min(float(np.mean(d <= 0)), float(np.mean(d >= 0))))
    return PairedResult(float(delta), float(lo), float(hi), p, len(d))
