"""Calibration: a map from a judge's grades to the experts' grades, fitted on the answers experts graded.

Every grade is put on the share-of-max scale (points / max points) before it is mapped, so that questions
worth 1 and worth 10 points share one map; the mapped share is clipped to 0..1 and multiplied back.

The maps (:data:`MAPS`), each fitted per exam (``Question.exam_id``; one exam when the data names none):

* ``raw``: no map (the judge's grade): the baseline every map must beat;
* ``shift``: the judge's grade plus one offset per exam (the experts' mean minus the judge's on the ``n`` graded
  answers, shrunk by ``n / (n + 2)``: :data:`SHIFT_PRIOR`): the judge's level corrected, its scale and order
  kept -- one number to estimate, the map a handful of expert grades can afford;
* ``linear``: ``sklearn.linear_model.LinearRegression(positive=True)`` of the expert share on the judge share
  (the slope is never negative: a map never reverses the judge's order);
* ``isotonic``: ``sklearn.isotonic.IsotonicRegression`` (increasing, clipped to 0..1);
* ``linear+offset``: ``linear``, plus a per-question offset (the mean residual of the question's graded
  answers, shrunk towards 0 by ``n / (n + 1)``) on questions with at least :data:`MIN_PER_QUESTION` graded
  answers in the fit;
* ``per-question``: a level and a slope per question around the shared linear map (partial pooling): the
  question's level is the shared map at its graded answers' mean judge grade plus their mean residual shrunk by
  ``n / (n + k_level)``, its slope (never negative) the question's own least-squares slope shrunk towards the
  exam's pooled within-question slope with a prior worth ``k_slope`` answers; ``k_level`` and ``k_slope`` are
  chosen by leave-one-out within questions (:data:`LEVEL_PRIOR`, :data:`SLOPE_PRIOR`).  It keeps the judge's
  order inside a question where the judge's level across questions is off.

A map that gives every answer of an exam the same grade (slope 0, isotonic with one level, a constant judge) is
*constant*: the judge does not rank these answers, and the map gives the experts' mean.  It may still win
(it lowers the RMSE), so every calibrated grade is labelled with it (:func:`label_for`).

The map is *chosen by cross-validation* (``sklearn.model_selection.KFold`` over the graded answers,
:func:`choose`): the simplest parametric map whose cross-validated error is within one standard error of the
lowest (the one-standard-error rule; clustered by question), ``isotonic`` only on 20 expert grades or more and
when it beats that one by more than one standard error, and the choice replaces the judge's grades (``raw``)
when its cross-validated error is lower: a small sample's lucky fold picks the simplest map that fits, not the
most flexible one.
The figures before and after are computed on held-out answers only, never on the answers a map was fitted
on: with a holdout (answers with expert grades that the fit was not given: ``fit_ids``), on those; otherwise
by *nested* cross-validation (each outer fold's map is chosen and fitted on the other folds and predicts the
fold).  CIs: cluster bootstrap over questions
(:mod:`knockout.metrics._bootstrap`).  Each calibrated grade's uncertainty is the spread of its prediction
over bootstrap refits (answers resampled).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knockout.errors import ConfigError

#: the maps cross-validation chooses from
MAPS = ("raw", "shift", "linear", "isotonic", "linear+offset", "per-question")
#: the maps from the simplest to the most complex (ties keep the simpler; isotonic, a step function with a knot
#: per distinct grade, must beat the parametric maps by a standard error)
COMPLEXITY = ("raw", "shift", "linear", "linear+offset", "per-question", "isotonic")
#: the per-question map's level prior (worth this many answers: the question's mean residual is shrunk by
#: ``n / (n + k)``), tried from the most shrunk; ``inf``: the shared map's level
LEVEL_PRIOR = (math.inf, 8.0, 4.0, 2.0, 1.0, 0.5, 0.0)
#: the per-question map's slope prior (worth this many answers' within-question spread of the judge's grades),
#: tried from the most shrunk; ``inf``: the exam's pooled within-question slope on every question
SLOPE_PRIOR = (math.inf, 10.0, 3.0, 1.0, 0.0)
#: how many standard errors the chosen map's cross-validated error must be below the judge's own (``raw``) to
#: replace it
RAW_SE = 0.0
#: the ``shift`` map's prior that the judge's level is right, worth this many graded answers (its offset, the mean
#: difference of the experts' and the judge's grades, is shrunk by ``n / (n + SHIFT_PRIOR)``)
SHIFT_PRIOR = 2.0
#: fewest expert grades on which ``isotonic`` (a step per distinct grade) may be chosen
ISOTONIC_MIN = 20
#: fewest expert grades a calibration is fitted on (and the fewest distinct judge grades among them: 2)
MIN_GRADES = 6
#: fewest graded answers a question needs in the fit for its own offset (``linear+offset``)
MIN_PER_QUESTION = 2
#: cross-validation folds (fewer when there are fewer graded answers)
FOLDS = 5
#: how a constant map is labelled wherever its grades appear
CONSTANT = "the judge does not rank these answers: the experts' mean"


@dataclass(frozen=True)
class Graded:
    """One answer as calibration sees it: the judge's grade and (when an expert graded it) the expert's."""

    id: str
    question_id: str
    max_points: float
    judge: float | None
    expert: float | None = None
    exam: str = ""


class Fitted:
    """One map fitted on share-of-max grades (``x`` judge, ``y`` expert, ``q`` questions, ``e`` exams).

    ``monotone=False``: an unconstrained linear fit (its slope may be negative); only ``bench/review.py`` asks for
    it, to show what the constraint changes."""

    def __init__(self, name: str, x: np.ndarray, y: np.ndarray, q: np.ndarray, e: np.ndarray, *,
                 monotone: bool = True) -> None:
        from sklearn.isotonic import IsotonicRegression
        from sklearn.linear_model import LinearRegression

        self.name = name
        self.models: dict[str, Any] = {}
        self.offsets: dict[str, float] = {}
        #: ``per-question``: question -> (level at its centre, centre, slope), share of max points
        self.lines: dict[str, tuple[float, float, float]] = {}
        #: ``per-question``: the priors chosen (``k_level``, ``k_slope``) and each exam's pooled within slope
        self.priors: dict[str, float] = {}
        self.within: dict[str, float] = {}
        self.exam_of: dict[str, str] = {}
        if name == "raw":
            return
        for exam in np.unique(e):
            m = e == exam
            if name == "shift":  # the mean difference, shrunk towards none by n / (n + SHIFT_PRIOR)
                n = int(m.sum())
                self.models[str(exam)] = _Shift(float(np.mean(y[m] - x[m])) * n / (n + SHIFT_PRIOR))
            elif len(np.unique(x[m])) < 2:  # a constant judge: a constant map (the experts' mean)
                self.models[str(exam)] = float(np.mean(y[m]))
            elif name == "isotonic":
                self.models[str(exam)] = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(
                    x[m], y[m])
            else:
                self.models[str(exam)] = LinearRegression(positive=monotone).fit(x[m].reshape(-1, 1), y[m])
        if name == "linear+offset":
            resid = y - self._base(x, e)
            for qid in np.unique(q):
                r = resid[q == qid]
                if len(r) >= MIN_PER_QUESTION:
                    self.offsets[str(qid)] = float(np.mean(r)) * len(r) / (len(r) + 1)
        if name == "per-question":
            self._fit_questions(x, y, q, e)

    def _fit_questions(self, x: np.ndarray, y: np.ndarray, q: np.ndarray, e: np.ndarray) -> None:
        """Each question's level and slope around the shared map (partial pooling), the priors chosen by
        leave-one-out within questions."""
        base = self._base(x, e)
        qs, inv = np.unique(q, return_inverse=True)
        self.exam_of = {str(qid): str(e[inv == i][0]) for i, qid in enumerate(qs)}
        qe = np.array([self.exam_of[str(qid)] for qid in qs])
        n = np.bincount(inv).astype(float)
        sx, sy = np.bincount(inv, x), np.bincount(inv, y)
        sxx, sxy = np.bincount(inv, x * x), np.bincount(inv, x * y)
        sb, sr = np.bincount(inv, base), np.bincount(inv, y - base)
        cxx = np.maximum(sxx - sx * sx / n, 0.0)
        cxy = sxy - sx * sy / n
        b0 = np.zeros(len(qs))
        var = np.zeros(len(qs))
        for exam in np.unique(qe):
            m = qe == exam
            shared = self.shapes().get(str(exam)) == "increasing"
            model: Any = self.models.get(str(exam))
            slope = float(model.coef_[0]) if shared and hasattr(model, "coef_") else 0.0
            tot = float(cxx[m].sum())
            self.within[str(exam)] = w = max(0.0, float(cxy[m].sum()) / tot) if tot > 1e-12 else slope
            b0[m] = w
            dof = float((n[m] - 1).sum())
            var[m] = tot / dof if dof > 0 else 0.0

        def slopes(cxx_: np.ndarray, cxy_: np.ndarray, t: float, b0_: np.ndarray, var_: np.ndarray) -> np.ndarray:
            if math.isinf(t):
                return b0_.copy()
            kb = t * var_
            den = cxx_ + kb
            ok = den > 1e-12
            own = np.where(ok, (cxy_ + kb * b0_) / np.where(ok, den, 1.0), b0_)
            return np.asarray(np.maximum(own, 0.0), dtype=float)

        # leave-one-out within questions (the shared map and pooled slope kept: an approximation)
        loo = n[inv] >= 2
        best = (math.inf, 8.0, math.inf)
        if loo.any():
            n1 = n[inv] - 1
            safe = np.where(n1 > 0, n1, 1.0)
            sx1, sy1 = sx[inv] - x, sy[inv] - y
            cxx1 = np.maximum(sxx[inv] - x * x - sx1 * sx1 / safe, 0.0)
            cxy1 = sxy[inv] - x * y - sx1 * sy1 / safe
            xbar1, mbase1, r1 = sx1 / safe, (sb[inv] - base) / safe, sr[inv] - (y - base)
            for kl in LEVEL_PRIOR:
                den = n1 + (0.0 if math.isinf(kl) else kl)
                level = mbase1 + (0.0 if math.isinf(kl) else 1.0) * r1 / np.where(den > 0, den, 1.0)
                for t in SLOPE_PRIOR:
                    pred = np.clip(level + slopes(cxx1, cxy1, t, b0[inv], var[inv]) * (x - xbar1), 0.0, 1.0)
                    err = float(np.sum(((pred - y) ** 2)[loo]))
                    if err < best[0] - 1e-12:
                        best = (err, kl, t)
        _, kl, t = best
        self.priors = {"k_level": kl, "k_slope": t}
        b = slopes(cxx, cxy, t, b0, var)
        shrink = np.zeros(len(qs)) if math.isinf(kl) else 1.0 / (n + kl)
        for i, qid in enumerate(qs):
            self.lines[str(qid)] = (float(sb[i] / n[i] + sr[i] * shrink[i]), float(sx[i] / n[i]), float(b[i]))

    def _base(self, x: np.ndarray, e: np.ndarray) -> np.ndarray:
        out = x.astype(float).copy()
        for exam, model in self.models.items():
            m = e == exam
            if not m.any():
                continue
            if isinstance(model, float):
                out[m] = model
            elif hasattr(model, "coef_"):
                out[m] = model.predict(x[m].reshape(-1, 1))
            else:
                out[m] = model.predict(x[m])
        return out

    def predict(self, x: np.ndarray, q: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Share-of-max grades, clipped to 0..1 (an exam the fit never saw keeps the judge's grade)."""
        if self.name == "raw":
            return np.asarray(np.clip(x.astype(float), 0.0, 1.0), dtype=float)
        out = self._base(x, e) + np.array([self.offsets.get(str(qid), 0.0) for qid in q])
        for i, qid in enumerate(q):
            line = self.lines.get(str(qid))
            if line is not None:
                out[i] = line[0] + line[2] * (float(x[i]) - line[1])
        return np.asarray(np.clip(out, 0.0, 1.0), dtype=float)

    def shapes(self) -> dict[str, str]:
        """Each exam's map: ``increasing``, ``constant`` (every answer the same grade, before per-question
        offsets) or ``decreasing`` (only with ``monotone=False``).  A per-question map is increasing where a
        question's slope is above 0 (the judge's order inside the question kept)."""
        if self.lines:
            rising = {ex for ex, w in self.within.items() if w > 1e-12}
            rising |= {self.exam_of[qid] for qid, line in self.lines.items() if line[2] > 1e-12}
            return {ex: "increasing" if ex in rising else "constant" for ex in self.models}
        out = {}
        for exam, model in self.models.items():
            if isinstance(model, float):
                out[exam] = "constant"
            elif hasattr(model, "coef_"):
                slope = float(model.coef_[0])
                out[exam] = "constant" if abs(slope) < 1e-12 else "increasing" if slope > 0 else "decreasing"
            else:
                out[exam] = "constant" if len(np.unique(model.y_thresholds_)) < 2 else "increasing"
        return out

    def describe(self) -> str:
        if self.name == "raw":
            return "no map (the judge's grades)"
        parts = []
        shapes = self.shapes()
        for exam, model in self.models.items():
            label = f"{exam}: " if len(self.models) > 1 else ""
            if shapes[exam] == "constant":
                mean = model if isinstance(model, float) else float(self._base(np.array([0.5]),
                                                                               np.array([exam]))[0])
                parts.append(f"{label}constant {mean:.3f} ({CONSTANT})")
            elif hasattr(model, "coef_"):
                parts.append(f"{label}expert = {float(model.intercept_):.3f} + {float(model.coef_[0]):.3f} x judge")
            else:
                parts.append(f"{label}isotonic, {len(model.X_thresholds_)} knots")
        if self.offsets:
            parts.append(f"offsets on {len(self.offsets)} questions")
        if self.lines:
            kl, ks = self.priors.get("k_level", math.inf), self.priors.get("k_slope", math.inf)
            within = ", ".join(f"{w:.2f}" for w in self.within.values())
            rising = sum(1 for line in self.lines.values() if line[2] > 1e-12)
            parts.append(f"per question on {len(self.lines)} questions ({rising} with a rising slope): level = "
                         "shared map + mean residual" + (" left out" if math.isinf(kl) else f" x n / (n + {kl:g})") +
                         ", slope " + (f"the pooled within-question slope {within}" if math.isinf(ks) else
                                       f"shrunk to the pooled within-question slope {within} (prior of {ks:g} "
                                       "answers' spread)"))
        return "; ".join(parts) + " (share of max points)"


class _Shift:
    """The ``shift`` map of one exam: the judge's share plus ``offset`` (slope 1: a line whose slope is fixed)."""

    def __init__(self, offset: float) -> None:
        self.intercept_ = offset
        self.coef_ = np.array([1.0])

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x[:, 0] + self.intercept_, dtype=float)


def _arrays(rows: Sequence[Graded]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    mx = np.array([r.max_points for r in rows], dtype=float)
    x = np.array([r.judge for r in rows], dtype=float) / mx
    y = np.array([np.nan if r.expert is None else r.expert for r in rows], dtype=float) / mx
    return x, y, np.array([r.question_id for r in rows]), np.array([r.exam for r in rows]), mx


def _folds(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import KFold

    k = min(FOLDS, n)
    return [(tr, te) for tr, te in KFold(n_splits=k, shuffle=True, random_state=seed).split(np.arange(n))]


def cv_predict(name: str, x: np.ndarray, y: np.ndarray, q: np.ndarray, e: np.ndarray, seed: int, *,
               monotone: bool = True) -> np.ndarray:
    """Cross-validated predictions (share of max) of one map on graded answers."""
    pred = np.empty(len(x))
    for tr, te in _folds(len(x), seed):
        pred[te] = Fitted(name, x[tr], y[tr], q[tr], e[tr], monotone=monotone).predict(x[te], q[te], e[te])
    return pred


def cv_rmse(name: str, x: np.ndarray, y: np.ndarray, q: np.ndarray, e: np.ndarray, seed: int, *,
            monotone: bool = True) -> float:
    """Cross-validated RMSE (share of max) of one map on graded answers."""
    pred = cv_predict(name, x, y, q, e, seed, monotone=monotone)
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def clustered_se(d: np.ndarray, q: np.ndarray) -> float:
    """The standard error of the mean of ``d`` (one value per answer), clustered by question."""
    _, inv = np.unique(q, return_inverse=True)
    k = int(inv.max()) + 1 if len(inv) else 0
    if k < 2:
        return float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.inf
    tot = np.bincount(inv, d)
    cnt = np.bincount(inv).astype(float)
    mean = float(np.sum(d) / len(d))
    return float(math.sqrt(k / (k - 1) * np.sum((tot - cnt * mean) ** 2)) / len(d))


def choose(x: np.ndarray, y: np.ndarray, q: np.ndarray, e: np.ndarray, seed: int,
           maps: Sequence[str] = MAPS, *, monotone: bool = True) -> tuple[str, dict[str, float]]:
    """The chosen map and every map's cross-validated RMSE.  Among the parametric maps (``shift``, ``linear``,
    ``linear+offset``, ``per-question``) the simplest (:data:`COMPLEXITY`) whose cross-validated error the one
    with the lowest does not beat by more than one standard error (of the difference of the answers' squared
    errors, clustered by question: the one-standard-error rule); a step function (``isotonic``) only on
    :data:`ISOTONIC_MIN` grades or more and when it beats that one by more than one standard error; and the result
    replaces the judge's grades (``raw``) when its cross-validated error is lower.

    Before ``shift`` existed, the choice replaced ``raw`` only when it beat it by a standard error: on exams of 6
    questions with 2 expert grades each that kept ``raw`` on about half the draws, though the judge's level was
    off (docs/calibration.md); the simplest map within a standard error now takes the small sample's risk."""
    preds = {m: cv_predict(m, x, y, q, e, seed, monotone=monotone) for m in maps}
    sq = {m: (p - y) ** 2 for m, p in preds.items()}
    scores = {m: float(np.sqrt(np.mean(v))) for m, v in sq.items()}
    order = sorted(maps, key=lambda m: (COMPLEXITY.index(m) if m in COMPLEXITY else len(COMPLEXITY),
                                        maps.index(m)))

    def beats(a: str, b: str, se: float = 1.0) -> bool:  # a's error below b's by more than se standard errors
        d = sq[a] - sq[b]
        return float(np.mean(d)) + se * clustered_se(d, q) < -1e-12

    steps = [m for m in order if m == "isotonic"]
    smooth = [m for m in order if m != "raw" and m not in steps]
    if len(x) < ISOTONIC_MIN:  # a step per distinct grade on a handful of grades fits their noise
        steps = []
    pick = min(smooth, key=lambda m: (round(float(np.mean(sq[m])), 12), order.index(m))) if smooth else None
    if pick is not None:  # the one-standard-error rule: the simplest map the best does not clearly beat
        best = pick
        pick = next(m for m in smooth if m == best or not beats(best, m))
    for m in steps:
        if pick is None or beats(m, pick):
            pick = m
    if pick is None:
        return order[0], scores
    if "raw" in maps and not beats(pick, "raw", RAW_SE):
        return "raw", scores
    return pick, scores


def enough(rows: Sequence[Graded]) -> str | None:
    """Why ``rows`` (the graded answers a fit would use) are too few, or None when they are enough."""
    judged = [r for r in rows if r.expert is not None and r.judge is not None]
    if len(judged) < MIN_GRADES:
        return (f"{len(judged)} answers have both an expert grade and a valid judge grade; calibration needs at "
                f"least {MIN_GRADES}")
    if len({(r.judge or 0.0) / r.max_points for r in judged}) < 2:
        return "the judge gave every expert-graded answer the same grade: nothing to map from"
    return None


def label_for(map_name: str, expert_grades: int, shapes: Mapping[str, str] | None = None) -> str:
    """How a calibrated grade is labelled wherever it is shown: the map, the expert grades behind it, and when the
    map is constant that the judge does not rank the answers; the judge's grade when calibration declined."""
    if map_name == "raw":
        return (f"judge's grade (no calibration: no map beat the judge's own grades in cross-validation on "
                f"{expert_grades} expert grades)")
    flat = sorted(e for e, s in (shapes or {}).items() if s == "constant")
    extra = ""
    if flat and len(flat) == len(shapes or {}):
        extra = f"; {CONSTANT}" + (", per question" if map_name == "linear+offset" else "")
    elif flat:
        extra = f"; exam {', '.join(flat)}: {CONSTANT}"
    return f"calibrated ({map_name}, {expert_grades} expert grades{extra})"


@dataclass
class Calibration:
    """A fitted calibration and its held-out figures (:func:`calibrate`)."""

    map: str
    description: str
    #: the number of expert grades the map was fitted on
    expert_grades: int
    #: every map's cross-validated RMSE (share of max points) on the fit's grades
    cv_rmse: dict[str, float]
    #: answer id -> calibrated grade in points (every answer with a valid judge grade)
    grades: dict[str, float]
    #: answer id -> standard deviation of the calibrated grade over bootstrap refits (points)
    sd: dict[str, float]
    #: how the held-out figures were made: ``holdout`` or ``nested cross-validation``
    heldout: str
    #: held-out figures before (``raw``) and after (``calibrated``), with CIs
    figures: dict[str, Any] = field(default_factory=dict)
    #: answer id -> held-out calibrated grade (never from a map fitted on that answer)
    heldout_grades: dict[str, float] = field(default_factory=dict)
    #: exam -> the chosen map's shape there (:meth:`Fitted.shapes`: ``increasing`` or ``constant``)
    shapes: dict[str, str] = field(default_factory=dict)

    @property
    def constant(self) -> bool:
        """The map gives every answer of every exam the same grade (before per-question offsets): the judge
        does not rank these answers."""
        return bool(self.shapes) and all(s == "constant" for s in self.shapes.values())

    @property
    def label(self) -> str:
        return label_for(self.map, self.expert_grades, self.shapes)

    def to_dict(self) -> dict[str, Any]:
        return {"map": self.map, "description": self.description, "expert_grades": self.expert_grades,
                "cv_rmse": self.cv_rmse, "heldout": self.heldout, "figures": self.figures,
                "grades": self.grades, "sd": self.sd, "heldout_grades": self.heldout_grades,
                "shapes": self.shapes, "constant": self.constant}


def _grid_step(values: np.ndarray) -> float | None:
    from knockout.metrics._kappa import on_grid

    for step in (1.0, 0.5, 0.25):
        if on_grid(values, step):
            return step
    return None


def heldout_figures(judge: np.ndarray, cal: np.ndarray, expert: np.ndarray, questions: np.ndarray, *,
                    resamples: int, seed: int, max_points: np.ndarray | None = None) -> dict[str, Any]:
    """RMSE (points), Pearson (share of max points, as ``knockout report``'s) and quadratic Cohen's kappa
    (grades rounded to the experts' grid) of the raw and the calibrated grades against the experts' on held-out
    answers, with cluster-bootstrap CIs over questions, and the RMSE difference (calibrated - raw) with its CI.
    A figure that cannot be computed is None, with its reason under ``<name>_why`` (and a missing CI's under
    ``<name>_ci_why``)."""
    mx = np.ones(len(expert)) if max_points is None else np.asarray(max_points, dtype=float)
    from knockout.metrics._bootstrap import bootstrap
    from knockout.metrics._kappa import grid_kappa

    step = _grid_step(expert)

    def kappa(a: np.ndarray, b: np.ndarray) -> float:
        if step is None:
            return math.nan
        k = grid_kappa(np.round(a / step) * step, b, weights="quadratic", step=step)
        return math.nan if k is None else k

    def pearson(a: np.ndarray, b: np.ndarray) -> float:
        if len(a) < 3 or np.std(a) == 0 or np.std(b) == 0:
            return math.nan
        return float(np.corrcoef(a, b)[0, 1])

    def stat(idx: np.ndarray) -> np.ndarray:
        j, c, h, m = judge[idx], cal[idx], expert[idx], mx[idx]
        rj, rc = float(np.sqrt(np.mean((j - h) ** 2))), float(np.sqrt(np.mean((c - h) ** 2)))
        return np.array([rj, rc, rc - rj, pearson(j / m, h / m), pearson(c / m, h / m), kappa(j, h),
                         kappa(c, h)])

    def pearson_why(a: np.ndarray, which: str) -> str:
        if len(a) < 3:
            return f"too few answers ({len(a)}; Pearson needs 3)"
        if np.std(expert / mx) == 0:
            return "the experts gave every held-out answer the same share of max points"
        return f"the {which} gave every held-out answer the same share of max points"

    def kappa_why(a: np.ndarray, which: str) -> str:
        if step is None:
            return "the expert grades are on no whole, half or quarter point grid"
        return f"undefined: the {which} rounded and the experts' grades take a single value"

    full = stat(np.arange(len(expert)))
    cis = bootstrap(stat, questions, resamples=resamples, seed=seed) if resamples else []
    names = ("rmse_raw", "rmse_calibrated", "rmse_difference", "pearson_raw", "pearson_calibrated",
             "kappa_raw", "kappa_calibrated")
    whys = {"pearson_raw": lambda: pearson_why(judge / mx, "judge"),
            "pearson_calibrated": lambda: pearson_why(cal / mx, "calibrated grades"),
            "kappa_raw": lambda: kappa_why(judge, "judge's grades"),
            "kappa_calibrated": lambda: kappa_why(cal, "calibrated grades")}
    out: dict[str, Any] = {"n": len(expert), "questions": len(np.unique(questions)),
                           "kappa_step": step, "pearson_unit": "share of max points"}
    for i, name in enumerate(names):
        v = float(full[i])
        out[name] = v if math.isfinite(v) else None
        if out[name] is None and name in whys:
            out[f"{name}_why"] = whys[name]()
        ci = cis[i] if cis else None
        out[f"{name}_ci"] = None if ci is None or ci.low is None else [ci.low, ci.high]
        if out[name] is not None and out[f"{name}_ci"] is None:
            out[f"{name}_ci_why"] = ("no bootstrap (--resamples 0)" if not resamples else
                                     "too few questions or answers to resample" if len(np.unique(questions)) < 2
                                     else "the resampled figures are undefined too often")
    return out


def calibrate(rows: Sequence[Graded], *, fit_ids: set[str] | None = None, maps: Sequence[str] = MAPS,
              seed: int = 0, resamples: int = 1000, refits: int = 100, heldout: bool = True,
              monotone: bool = True) -> Calibration:
    """Fit the calibration of ``rows`` (one per answer; invalid judge grades have ``judge`` None).

    ``fit_ids``: the expert-graded answers the fit may use (default: every expert-graded answer); the other
    expert-graded answers are then the holdout the figures are computed on.  ``heldout=False``: no held-out
    figures (the grades and their spread only: what a review queue needs).  Raises :class:`ConfigError`
    when there are too few expert grades (:func:`enough`).  ``monotone=False``: linear maps may reverse the
    judge's order (a negative slope); only for ``bench/review.py``'s comparison."""
    valid = [r for r in rows if r.judge is not None]
    graded = [r for r in valid if r.expert is not None]
    fit = [r for r in graded if fit_ids is None or r.id in fit_ids]
    why = enough(fit)
    if why is not None:
        raise ConfigError(f"too few expert grades to calibrate: {why} (grade more answers in the web app, or "
                          "give a data file with human grades)")
    x, y, q, e, _ = _arrays(fit)
    name, scores = choose(x, y, q, e, seed, maps, monotone=monotone)
    final = Fitted(name, x, y, q, e, monotone=monotone)
    ax, _, aq, ae, amx = _arrays(valid)
    grades = final.predict(ax, aq, ae) * amx
    # each calibrated grade's spread over refits on resampled graded answers (the chosen map)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(refits if name != "raw" else 0):
        idx = rng.integers(0, len(x), len(x))
        if len(np.unique(x[idx])) < 2:
            continue
        draws.append(Fitted(name, x[idx], y[idx], q[idx], e[idx], monotone=monotone).predict(ax, aq, ae) * amx)
    sd = np.std(np.array(draws), axis=0) if draws else np.zeros(len(valid))
    # held-out predictions: the holdout, or nested cross-validation of the whole procedure (choice included)
    held = [r for r in graded if fit_ids is not None and r.id not in fit_ids]
    if not heldout:
        return Calibration(name, final.describe(), len(fit), scores,
                           {r.id: float(g) for r, g in zip(valid, grades, strict=True)},
                           {r.id: float(s) for r, s in zip(valid, sd, strict=True)}, "none",
                           shapes=final.shapes())
    if held:
        hx, hy, hq, he, hmx = _arrays(held)
        hpred = final.predict(hx, hq, he)
        how = "holdout"
        ids = [r.id for r in held]
    else:
        hx, hy, hq, he, hmx = x, y, q, e, _arrays(fit)[4]
        hpred = np.empty(len(fit))
        for k, (tr, te) in enumerate(_folds(len(fit), seed)):
            if enough([fit[i] for i in tr]) is not None:
                hpred[te] = x[te]  # too few in this fold's fit: the raw grade (no calibration)
                continue
            inner, _ = choose(x[tr], y[tr], q[tr], e[tr], seed + k + 1, maps, monotone=monotone)
            hpred[te] = Fitted(inner, x[tr], y[tr], q[tr], e[tr], monotone=monotone).predict(x[te], q[te], e[te])
        how = "nested cross-validation"
        ids = [r.id for r in fit]
    figures = heldout_figures(hx * hmx, hpred * hmx, hy * hmx, hq, resamples=resamples, seed=seed,
                              max_points=hmx)
    return Calibration(name, final.describe(), len(fit), scores,
                       {r.id: float(g) for r, g in zip(valid, grades, strict=True)},
                       {r.id: float(s) for r, s in zip(valid, sd, strict=True)}, how, figures,
                       {i: float(p) for i, p in zip(ids, hpred * hmx, strict=True)}, final.shapes())


def first_per_question(rows: Sequence[Graded], per_question: int, seed: int = 0) -> set[str]:
    """``per_question`` expert-graded answers of each question, drawn at random (seeded): the fit of a
    simulation in which experts graded only these."""
    rng = np.random.default_rng(seed)
    by_q: dict[str, list[str]] = {}
    for r in rows:
        if r.expert is not None and r.judge is not None:
            by_q.setdefault(r.question_id, []).append(r.id)
    out: set[str] = set()
    for ids in by_q.values():
        out.update(str(i) for i in rng.permutation(ids)[:per_question])
    return out


def graded_rows(items: Any, results: Sequence[Mapping[str, Any]]) -> list[Graded]:
    """One :class:`Graded` per result of a grading run (``items``: its :class:`~knockout.data.ItemSet` with the
    human grades of the file and the web app, which are the expert grades)."""
    out = []
    for _, a, q, score in answered(items, results):
        if q.human_scale != "points":
            continue
        out.append(Graded(a.id, q.id, float(q.max_points), score, a.human_score, q.exam_id or ""))
    return out


def answered(items: Any, results: Iterable[Mapping[str, Any]]
             ) -> Iterator[tuple[Mapping[str, Any], Any, Any, float | None]]:
    """Each stored result of a grading run with its answer and question in ``items`` and its grade (None when
    invalid); a result whose answer the item set lacks is left out."""
    for r in results:
        try:
            a = items.answer(r["item_id"])
            q = items.question_of(a)
        except KeyError:
            continue
        score = r.get("score") if r.get("valid", True) else None
        yield r, a, q, None if score is None else float(score)
