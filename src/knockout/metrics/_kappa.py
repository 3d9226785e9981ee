"""Chance-corrected agreement: the one Cohen's kappa and the one Fleiss' kappa of knockout.

* :func:`cohen_kappa` wraps ``sklearn.metrics.cohen_kappa_score`` (plain, linear or quadratic weights)
  for two aligned lists of labels and returns None where kappa is undefined: fewer than two items,
  fewer than two distinct labels used, or a non-finite value.
* :func:`grid_kappa` treats scores on a grid (half points by default) as categories and hands them to
  :func:`cohen_kappa`, with every grid point between the lowest and highest score as a label so that
  weighted kappa weighs disagreements by their distance in points.
* :func:`fleiss_kappa` (Fleiss 1971) over items rated by two or more raters:
  ``P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1))``, ``P_bar`` their mean, ``p_j`` the share of all
  ratings in class ``j``, ``P_e = sum_j p_j^2``, ``kappa = (P_bar - P_e) / (1 - P_e)``.  Items may have
  different numbers of raters (the usual generalisation: ``p_j`` pools every rating); with the same
  number everywhere this is Fleiss' original statistic.
* :func:`rater_agreement`: Cohen's kappa and raw agreement for every pair of raters on the items both
  rated, and Fleiss' kappa, from ``item -> {rater: label}``.  Used by the side-by-side metrics and the
  annotation agreement page alike.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from sklearn.metrics import cohen_kappa_score

Weights = Literal["linear", "quadratic"] | None


def cohen_kappa(
    x: Sequence[Any] | np.ndarray, y: Sequence[Any] | np.ndarray, *, labels: Sequence[Any] | None = None,
    weights: Weights = None,
) -> float | None:
    """Cohen's kappa of two aligned label lists (``sklearn.metrics.cohen_kappa_score``); None if undefined."""
    if len(x) != len(y):
        raise ValueError(f"Cohen's kappa needs aligned lists (got {len(x)} and {len(y)} labels)")
    arrays = isinstance(x, np.ndarray) and isinstance(y, np.ndarray)  # a million grades: no Python lists
    if len(x) < 2 or (len(np.union1d(x, y)) if arrays else len(set(x) | set(y))) < 2:
        return None
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # undefined (0/0): nan, reported as None
        value = float(cohen_kappa_score(x if arrays else list(x), y if arrays else list(y),
                                        labels=None if labels is None else list(labels), weights=weights))
    return value if math.isfinite(value) else None


def on_grid(values: Sequence[float] | np.ndarray, step: float = 0.5) -> bool:
    """True when every value lies on the grid ``0, step, 2*step, ...`` (e.g. integer or half-point grades)."""
    v = np.asarray(values, dtype=float) / step
    return bool(len(v)) and bool(np.all(np.abs(v - np.round(v)) < 1e-6))


def grid_kappa(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, weights: Weights = None, step: float = 0.5,
) -> float | None:
    """Cohen's kappa between two graders' scores, each grid value a category; None when a score is off
    the grid (e.g. the mean of two graders, 2.75) or kappa is undefined."""
    if len(x) < 2 or not (on_grid(x, step) and on_grid(y, step)):
        return None
    cx = np.rint(np.asarray(x, dtype=float) / step).astype(int)
    cy = np.rint(np.asarray(y, dtype=float) / step).astype(int)
    lo, hi = int(min(cx.min(), cy.min())), int(max(cx.max(), cy.max()))
    return cohen_kappa(cx, cy, labels=list(range(lo, hi + 1)), weights=weights)


def fleiss_kappa(ratings: Iterable[Sequence[Any]], categories: Sequence[Any] | None = None) -> float | None:
    """Fleiss' kappa over the items with two or more ratings; None when there is none or ``P_e = 1``
    (every rating in one class).  ``categories`` default to the classes that occur."""
    rows = [list(r) for r in ratings if len(r) >= 2]
    if not rows:
        return None
    cats = list(categories) if categories is not None else sorted({v for r in rows for v in r}, key=str)
    index = {c: i for i, c in enumerate(cats)}
    counts = np.zeros((len(rows), len(cats)))
    for i, row in enumerate(rows):
        for v in row:
            if v not in index:
                raise ValueError(f"rating {v!r} is not one of the categories {cats}")
            counts[i, index[v]] += 1
    n_i = counts.sum(axis=1)
    p_item = ((counts**2).sum(axis=1) - n_i) / (n_i * (n_i - 1))
    p_cat = counts.sum(axis=0) / counts.sum()
    p_e = float((p_cat**2).sum())
    if math.isclose(p_e, 1.0):
        return None
    return (float(p_item.mean()) - p_e) / (1 - p_e)


def rater_agreement(
    by_item: Mapping[str, Mapping[str, Any]],
    labels: Sequence[Any] | None = None,
    *,
    fleiss_over: Literal["two-or-more", "all-raters"] = "two-or-more",
) -> dict[str, Any]:
    """``by_item``: item -> {rater: label}.  Returns ``raters`` (rater -> items rated), ``cohen`` (one entry
    per rater pair: ``a``, ``b``, ``n`` common items, ``agreement`` (raw share, None under two items) and
    ``kappa``), ``fleiss`` and ``fleiss_items`` (over the items with two or more ratings, or with
    ``fleiss_over="all-raters"`` only those every rater rated) and ``items_rated``."""
    raters = sorted({r for v in by_item.values() for r in v})
    cohen = []
    for a, b in itertools.combinations(raters, 2):
        common = [v for v in by_item.values() if a in v and b in v]
        x, y = [v[a] for v in common], [v[b] for v in common]
        agree = sum(i == j for i, j in zip(x, y, strict=True)) / len(common) if len(common) >= 2 else None
        cohen.append({"a": a, "b": b, "n": len(common), "agreement": agree,
                      "kappa": cohen_kappa(x, y, labels=labels)})
    if fleiss_over == "all-raters":
        items = [[v[r] for r in raters] for v in by_item.values() if all(r in v for r in raters)]
        items = items if len(raters) >= 2 else []
    else:
        items = [list(v.values()) for v in by_item.values() if len(v) >= 2]
    return {
        "raters": {r: sum(r in v for v in by_item.values()) for r in raters},
        "cohen": cohen,
        "fleiss": fleiss_kappa(items, labels),
        "fleiss_items": len(items),
        "items_rated": sum(bool(v) for v in by_item.values()),
    }
