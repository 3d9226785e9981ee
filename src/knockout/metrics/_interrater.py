"""Agreement among several judges (a jury): Krippendorff's alpha and intraclass correlations.

* **Krippendorff's alpha** through the maintained ``krippendorff`` package (PyPI, numpy only): interval
  level for scores, nominal level for side-by-side verdicts; missing ratings (an invalid result) are
  allowed, units rated by fewer than two judges do not count.
* **ICC(2,1)** (two-way random effects, absolute agreement, single rater) and **ICC(3,1)** (two-way mixed
  effects, consistency, single rater), Shrout & Fleiss (1979) / McGraw & Wong (1996), computed here with
  numpy from the two-way ANOVA mean squares over the units every judge rated (no maintained package fits
  without pandas: pingouin needs pandas and statsmodels)::

      MSR = k * sum_i (mean_i. - mean)^2 / (n - 1)         (between units)
      MSC = n * sum_j (mean_.j - mean)^2 / (k - 1)         (between judges)
      MSE = sum_ij (y_ij - mean_i. - mean_.j + mean)^2 / ((n - 1)(k - 1))
      ICC(2,1) = (MSR - MSE) / (MSR + (k - 1) MSE + k (MSC - MSE) / n)
      ICC(3,1) = (MSR - MSE) / (MSR + (k - 1) MSE)

  ICC(3,1) ignores a constant offset between judges (one judge always a point higher), ICC(2,1) counts it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from knockout.errors import ConfigError


def krippendorff_alpha(ratings: np.ndarray, level: str = "interval") -> float | None:
    """Alpha over ``ratings`` (judges x units; NaN = missing) at ``level`` (``interval`` or ``nominal``:
    nominal values are any hashable labels, given as an object array with None for missing)."""
    try:
        import krippendorff
    except ImportError:
        raise ConfigError("Krippendorff's alpha needs the krippendorff package: pip install 'knockout[jury]'") from None

    data = np.asarray(ratings)
    if level == "nominal":
        labels = sorted({v for v in data.ravel() if v is not None and not (isinstance(v, float) and math.isnan(v))})
        code = {v: i for i, v in enumerate(labels)}
        data = np.array([[code.get(v, np.nan) if v is not None else np.nan for v in row] for row in data], dtype=float)
        if len(labels) < 2:
            return None
    data = data.astype(float)
    pairable = np.sum(np.isfinite(data), axis=0) >= 2
    if data.shape[0] < 2 or pairable.sum() < 2:
        return None
    values = np.unique(data[:, pairable][np.isfinite(data[:, pairable])])
    if len(values) < 2:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        a = float(krippendorff.alpha(reliability_data=data[:, pairable],
                                     level_of_measurement="nominal" if level == "nominal" else "interval"))
    return a if math.isfinite(a) else None


def icc(scores: np.ndarray) -> dict[str, float | None]:
    """ICC(2,1) and ICC(3,1) of ``scores`` (units x judges, complete rows only)."""
    y = np.asarray(scores, dtype=float)
    if y.ndim != 2:
        raise ValueError("ICC needs a units x judges matrix")
    y = y[np.all(np.isfinite(y), axis=1)]
    n, k = y.shape
    if n < 2 or k < 2:
        return {"icc2_1": None, "icc3_1": None}
    mean = y.mean()
    row, col = y.mean(axis=1), y.mean(axis=0)
    msr = k * float(((row - mean) ** 2).sum()) / (n - 1)
    msc = n * float(((col - mean) ** 2).sum()) / (k - 1)
    mse = float(((y - row[:, None] - col[None, :] + mean) ** 2).sum()) / ((n - 1) * (k - 1))
    den2 = msr + (k - 1) * mse + k * (msc - mse) / n
    den3 = msr + (k - 1) * mse
    return {"icc2_1": (msr - mse) / den2 if den2 > 1e-15 else None,
            "icc3_1": (msr - mse) / den3 if den3 > 1e-15 else None}


def pairwise_pearson(scores: np.ndarray, names: Sequence[str]) -> list[dict[str, object]]:
    """Pearson between every two judges on the units both rated (``scores``: units x judges, NaN missing)."""
    from knockout.metrics._agreement import pearson_np
    from knockout.metrics._analysis import finite_or_none

    out: list[dict[str, object]] = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            ok = np.isfinite(scores[:, i]) & np.isfinite(scores[:, j])
            out.append({"a": names[i], "b": names[j], "n": int(ok.sum()),
                        "pearson": finite_or_none(pearson_np(scores[ok, i], scores[ok, j]))})
    return out
