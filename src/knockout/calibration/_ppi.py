"""Prediction-powered estimates: a figure of the experts' grades (an exam average, an examinee's exam
percentage, a difference between two examinees), estimated from a judge's grades on *every* answer and the
experts' grades on a *subset*, with a confidence interval (PPI++, Angelopoulos, Duchi and Zrnic 2023,
arXiv:2311.01453, through ``ppi-python``, the authors' package: ``pip install 'knockout[calibration]'``).

Every figure here is a weighted sum of the answers' expert grades, ``T = sum_i c_i y_i`` (an examinee's
SciEx grade: ``c_i = 100 / (exams x the exam's maximum points)`` on its answers; a difference: the same with
``-c_i`` on the other examinee's answers).  With ``N`` answers, ``z_i = N c_i y_i`` and its prediction
``ẑ_i = N c_i f_i`` (``f_i`` the judge's grade), ``T`` is the mean of ``z`` over the answers, which
``ppi_py.ppi_mean_ci`` / ``ppi_mean_pointestimate`` estimate from ``z`` and ``ẑ`` on the expert-graded
answers and ``ẑ`` on the others::

    T̂ = λ mean_unlabelled(ẑ) + mean_labelled(z - λ ẑ)

with the power-tuning parameter ``λ`` in [0, 1] chosen by the package to minimise the variance (``λ = 0``:
the experts' grades alone; ``λ = 1``: plain PPI).  The interval is the package's normal interval.  Beside it,
the **expert-only** estimate (``ppi_py.classical_mean_ci``: the mean of ``z`` over the expert-graded answers
alone) and both widths: what the judge's grades bought.

What it assumes: the expert-graded answers are a *random* subset of the answers (each answer equally
likely, independently of its grades); a hand-picked subset (the hard ones, the first exam) breaks the
interval, and nothing here can detect it.  The answers themselves are treated as a sample (the variance of
the judge's grades on the unlabelled answers counts), so for the answers at hand the interval is on the
conservative side.  Few expert grades (fewer than :data:`MIN_LABELLED`) give no interval: the normal
approximation needs a handful.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from knockout.errors import ConfigError

#: fewest expert-graded answers a prediction-powered interval is computed from
MIN_LABELLED = 3
INSTALL = "pip install 'knockout[calibration]'"


def _ppi() -> Any:
    """The ``ppi_py`` package (an optional extra), or a one-line error saying how to install it."""
    try:
        import ppi_py
    except ImportError as exc:
        raise ConfigError(f"prediction-powered estimates need ppi-python: {INSTALL}") from exc
    return ppi_py


@dataclass
class PPIEstimate:
    """A prediction-powered estimate and, beside it, the expert-only one, in the figure's units."""

    estimate: float
    ci: tuple[float, float]
    #: the power-tuning parameter the package chose (0: the experts alone, 1: plain PPI)
    lam: float
    #: the judge-only figure: the judge's grades taken as the experts' (its bias left in)
    judge_only: float
    expert_only: float
    expert_only_ci: tuple[float, float]
    labelled: int
    answers: int
    alpha: float = 0.05

    @property
    def width(self) -> float:
        return self.ci[1] - self.ci[0]

    @property
    def expert_only_width(self) -> float:
        return self.expert_only_ci[1] - self.expert_only_ci[0]

    def covers(self, value: float) -> bool:
        return self.ci[0] <= value <= self.ci[1]

    def to_dict(self, digits: int = 3) -> dict[str, Any]:
        def r(x: float) -> float:
            return round(float(x), digits)

        return {"estimate": r(self.estimate), "ci": [r(self.ci[0]), r(self.ci[1])], "width": r(self.width),
                "lambda": r(self.lam), "judge_only": r(self.judge_only), "expert_only": r(self.expert_only),
                "expert_only_ci": [r(self.expert_only_ci[0]), r(self.expert_only_ci[1])],
                "expert_only_width": r(self.expert_only_width), "labelled": self.labelled,
                "answers": self.answers, "confidence": 1 - self.alpha}


def power_tuning(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray) -> float:
    """The ``λ`` ``ppi_py.ppi_mean_ci`` chooses for a mean (its ``_calc_lam_glm`` for one coordinate, clipped
    to [0, 1]): ``cov(y, ŷ) / ((1 + n/N) var(ŷ over all answers))``; reported beside the estimate (a test
    checks the package's interval with this ``λ`` is the one it tunes itself)."""
    n, big_n = len(y), len(yhat_unlabelled)
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yhat_unlabelled]), ddof=1))
    if var <= 0:
        return 0.0
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(expert: Sequence[float | None] | np.ndarray, judge: Sequence[float] | np.ndarray, *,
             alpha: float = 0.05) -> PPIEstimate | None:
    """The prediction-powered estimate of the mean of ``expert`` over all answers (None or NaN where an answer
    has no expert grade) from ``judge`` (a grade for every answer); None with fewer than :data:`MIN_LABELLED`
    expert grades, none missing (then the experts' mean is the figure itself, with nothing to estimate), or
    every expert grade the same (no spread to make an interval from)."""
    y_all = np.array([np.nan if v is None else float(v) for v in expert], dtype=float)
    f = np.asarray(judge, dtype=float)
    if y_all.shape != f.shape or y_all.ndim != 1:
        raise ValueError("expert and judge grades must be two sequences of the same length")
    if not np.all(np.isfinite(f)):
        raise ValueError("every answer needs a judge grade (a finite number)")
    labelled = ~np.isnan(y_all)
    n, big_n = int(labelled.sum()), int((~labelled).sum())
    if n < MIN_LABELLED or big_n == 0 or np.ptp(y_all[labelled]) == 0:
        return None  # too few, none missing, or every expert grade alike (a normal interval of width 0)
    ppi = _ppi()
    y, yhat, yhat_u = y_all[labelled], f[labelled], f[~labelled]
    point = float(np.asarray(ppi.ppi_mean_pointestimate(y, yhat, yhat_u)).reshape(-1)[0])
    lo, hi = (float(np.asarray(v).reshape(-1)[0]) for v in ppi.ppi_mean_ci(y, yhat, yhat_u, alpha=alpha))
    elo, ehi = (float(np.asarray(v).reshape(-1)[0]) for v in ppi.classical_mean_ci(y, alpha=alpha))
    return PPIEstimate(estimate=point, ci=(lo, hi), lam=power_tuning(y, yhat, yhat_u), judge_only=float(f.mean()),
                       expert_only=float(y.mean()), expert_only_ci=(elo, ehi), labelled=n, answers=n + big_n,
                       alpha=alpha)


def ppi_total(weights: Sequence[float] | np.ndarray, expert: Sequence[float | None] | np.ndarray,
              judge: Sequence[float] | np.ndarray, *, alpha: float = 0.05) -> PPIEstimate | None:
    """The prediction-powered estimate of ``sum_i weights_i * expert_i`` over all answers (module doc): the
    mean of ``N weights_i expert_i``, with the judge's grades in the same units."""
    c = np.asarray(weights, dtype=float)
    y = np.array([np.nan if v is None else float(v) for v in expert], dtype=float)
    f = np.asarray(judge, dtype=float)
    if not (c.shape == y.shape == f.shape):
        raise ValueError("weights, expert and judge grades must have the same length")
    return ppi_mean(len(c) * c * y, len(c) * c * f, alpha=alpha)
