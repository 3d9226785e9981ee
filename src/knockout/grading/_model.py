"""The grade model: an answer's readings become its points, on an absolute scale, one answer at a time.

The model is a *monotone additive* model (a generalised additive model with piecewise-linear shape functions):
each reading enters through ramps between knots, ``clip((x - k_j) / (k_{j+1} - k_j), 0, 1)``, whose
coefficients are constrained to the reading's known direction (scikit-learn's ``Ridge(positive=True)`` over the
ramps of the reading oriented its way; a reading of unknown direction gets both orientations), plus two
interactions (the judge with the meaning reader, both up; "no word beyond the question" with the judge, down).
The sum is the answer's share of max points, clipped to 0..1.  Everything it is, knots and coefficients, is plain
data (``model.json`` beside this module), fitted once by ``bench/fit_grade_model.py``.

**Every pattern of missing readings** has its own fitted sub-model: the readings fall in three groups that may be
absent (the judge's spread: no token probabilities; the encoder's readings: a language it was not trained for;
the reference's readings: no reference), and the model holds one fit for each of the eight patterns, each fitted on
the same training rows with the absent readings left out.  So a German answer is graded from the judge and the
lexical readings, an answer without a reference from what remains, never from an imputed value.

**Persuasion stays capped**: where the meaning reader applies (a reference and the encoder's language), the grade
is at most the *meaning side's* grade (a sub-model fitted on every reading but the judge's) plus :attr:`margin`
of max points.  An answer that moves the judge and not what it means gains at most the margin over what its
meaning is worth; the mark ``readers disagree`` says the cap bound.  The margin was chosen by cross-validation on
the real answers (the CV table in ``model.json``), never on the attacks.

An answer's grade depends only on its own readings: nothing of the run, of other answers or of other questions
enters it.  The teacher's grades move it through :mod:`knockout.grading._adapt`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from knockout.grading._readings import ENCODER_READINGS, READINGS, REFERENCE_READINGS

#: the direction each reading's effect on points is known to have: +1 up, -1 down, 0 unknown (both ways)
DIRECTIONS: dict[str, int] = {"judge": 1, "judge_sd": 0, "similarity": 1, "similarity_plain": 1,
                              "question_similarity": 0, "nothing_beyond": -1, "length_ratio": 0,
                              "reference_share": 0, "guard": -1}
#: the interactions: (name, the two readings multiplied, direction)
INTERACTIONS: tuple[tuple[str, str, str, int], ...] = (
    ("judge*similarity", "judge", "similarity", 1),
    ("judge*nothing_beyond", "judge", "nothing_beyond", -1),
)
#: the groups of readings that may be absent, and the readings each takes away
GROUPS: dict[str, tuple[str, ...]] = {"sd": ("judge_sd",), "encoder": ENCODER_READINGS,
                                      "reference": REFERENCE_READINGS}
#: the readings of the judge (left out of the meaning side)
JUDGE_READINGS = ("judge", "judge_sd")
MODEL_FILE = "model.json"


def pattern_of(present: Mapping[str, bool]) -> str:
    """The key of a pattern: the groups present, in :data:`GROUPS` order (``"sd+encoder+reference"``, ``""``)."""
    return "+".join(g for g in GROUPS if present.get(g))


def patterns() -> list[str]:
    return [pattern_of(dict(zip(GROUPS, bits, strict=True))) for bits in itertools.product((True, False),
                                                                                            repeat=len(GROUPS))]


def readings_of(pattern: str, side: str = "full") -> list[str]:
    """The readings a pattern's sub-model reads (``side`` ``meaning``: without the judge's)."""
    present = set(pattern.split("+")) if pattern else set()
    gone = {r for g, rs in GROUPS.items() if g not in present for r in rs}
    names = [r for r in READINGS if r not in gone]
    return [r for r in names if r not in JUDGE_READINGS] if side == "meaning" else names


def interactions_of(names: Sequence[str]) -> list[tuple[str, str, str, int]]:
    return [i for i in INTERACTIONS if i[1] in names and i[2] in names]


def basis(x: np.ndarray, knots: Sequence[float], direction: int) -> np.ndarray:
    """The ramps of one reading (rows x columns), oriented so that a positive coefficient moves the grade in the
    reading's direction; a reading of unknown direction gets both orientations (2 x the columns)."""
    k = np.asarray(knots, dtype=float)
    if len(k) < 2:
        return np.zeros((len(x), 0))
    lo, hi = k[:-1], k[1:]
    width = np.maximum(hi - lo, 1e-9)
    up = np.clip((x[:, None] - lo[None, :]) / width[None, :], 0.0, 1.0)
    out: np.ndarray = up if direction > 0 else -up if direction < 0 else np.hstack([up, -up])
    return out


@dataclass(frozen=True)
class SideFit:
    """One fitted side of one pattern: its intercept and, per term, the coefficients of its ramps."""

    intercept: float
    coef: dict[str, list[float]]

    def to_json(self) -> dict[str, Any]:
        return {"intercept": round(self.intercept, 8), "coef": {k: [round(c, 8) for c in v]
                                                                for k, v in self.coef.items()}}


@dataclass(frozen=True)
class Prediction:
    """One answer's grade from its readings: the share of max points, what the sides gave and whether the cap
    bound."""

    share: float
    full: float
    meaning: float | None
    capped: bool
    pattern: str


class GradeModel:
    """Readings in, shares of max points out: ``fit`` on graded data, parameters as plain data (``to_json``),
    ``predict`` per answer."""

    def __init__(self, knots: dict[str, list[float]], fits: dict[str, dict[str, SideFit]], margin: float | None,
                 meta: dict[str, Any] | None = None) -> None:
        self.knots = knots
        self.fits = fits
        self.margin = margin
        self.meta = meta or {}

    # -- the terms ---------------------------------------------------------------------------------------------
    def _design(self, rows: Sequence[Mapping[str, float | None]], names: Sequence[str]) -> tuple[np.ndarray,
                                                                                                 list[tuple[str, int]]]:
        cols: list[np.ndarray] = []
        spans: list[tuple[str, int]] = []
        for r in names:
            x = np.array([float(row.get(r) or 0.0) for row in rows])
            b = basis(x, self.knots[r], DIRECTIONS[r])
            cols.append(b)
            spans.append((r, b.shape[1]))
        for name, a, c, d in interactions_of(names):
            x = np.array([float(row.get(a) or 0.0) * float(row.get(c) or 0.0) for row in rows])
            b = basis(x, self.knots[name], d)
            cols.append(b)
            spans.append((name, b.shape[1]))
        return (np.hstack(cols) if cols else np.zeros((len(rows), 0))), spans

    # -- fitting ---------------------------------------------------------------------------------------------------
    @classmethod
    def fit(cls, rows: Sequence[Mapping[str, float | None]], y: Sequence[float], weights: Sequence[float] | None = None,
            alpha: float = 1.0, margin: float | None = 0.1, n_knots: int = 5,
            meta: dict[str, Any] | None = None) -> GradeModel:
        """Fit every pattern's two sides on ``rows`` (every reading present), targets ``y`` (shares of max
        points), sample ``weights``; knots at quantiles of the training readings."""
        knots: dict[str, list[float]] = {}
        qs = np.linspace(0, 1, n_knots)
        for r in READINGS:
            x = np.array([float(row.get(r) or 0.0) for row in rows])
            knots[r] = sorted({round(float(v), 6) for v in np.quantile(x, qs)})
        for name, a, c, _ in INTERACTIONS:
            x = np.array([float(row.get(a) or 0.0) * float(row.get(c) or 0.0) for row in rows])
            knots[name] = sorted({round(float(v), 6) for v in np.quantile(x, qs)})
        model = cls(knots, {}, margin, meta)
        for p in patterns():
            model.fits[p] = {"full": model._fit_side(rows, y, weights, readings_of(p), alpha)}
            if "reference" in p.split("+") and "encoder" in p.split("+"):
                model.fits[p]["meaning"] = model._fit_side(rows, y, weights, readings_of(p, "meaning"), alpha)
        return model

    def _fit_side(self, rows: Sequence[Mapping[str, float | None]], y: Sequence[float],
                  weights: Sequence[float] | None, names: Sequence[str], alpha: float) -> SideFit:
        from sklearn.linear_model import Ridge

        x, spans = self._design(rows, names)
        reg = Ridge(alpha=alpha, positive=True)
        reg.fit(x, np.asarray(y, dtype=float), sample_weight=None if weights is None else np.asarray(weights))
        coef: dict[str, list[float]] = {}
        at = 0
        for name, width in spans:
            coef[name] = [float(c) for c in reg.coef_[at:at + width]]
            at += width
        return SideFit(float(reg.intercept_), coef)

    # -- prediction ------------------------------------------------------------------------------------------------
    def _side(self, row: Mapping[str, float | None], fit: SideFit) -> float:
        total = fit.intercept
        for name, cs in fit.coef.items():
            if "*" in name:
                a, c = name.split("*")
                x = float(row.get(a) or 0.0) * float(row.get(c) or 0.0)
                d = next(i[3] for i in INTERACTIONS if i[0] == name)
            else:
                x = float(row.get(name) or 0.0)
                d = DIRECTIONS[name]
            total += float(basis(np.array([x]), self.knots[name], d)[0] @ np.asarray(cs))
        return total

    @staticmethod
    def present(row: Mapping[str, float | None]) -> dict[str, bool]:
        """Which groups of readings an answer has: the judge's spread, the encoder's readings (its question
        similarity), the reference's (its share of the reference's words)."""
        return {"sd": row.get("judge_sd") is not None, "encoder": row.get("question_similarity") is not None,
                "reference": row.get("reference_share") is not None}

    def predict_one(self, row: Mapping[str, float | None]) -> Prediction:
        """One answer's grade (share of max points) from its readings alone."""
        if row.get("judge") is None:
            raise ValueError("the grade model needs the judge's reading")
        p = pattern_of(self.present(row))
        sides = self.fits[p]
        full = float(np.clip(self._side(row, sides["full"]), 0.0, 1.0))
        meaning = None
        share, capped = full, False
        if "meaning" in sides:
            meaning = float(np.clip(self._side(row, sides["meaning"]), 0.0, 1.0))
            if self.margin is not None and full > meaning + self.margin:
                share, capped = meaning + self.margin, True
        return Prediction(round(share, 6), round(full, 6), None if meaning is None else round(meaning, 6), capped, p)

    def predict(self, rows: Sequence[Mapping[str, float | None]]) -> list[Prediction]:
        return [self.predict_one(r) for r in rows]

    # -- plain data ------------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {**self.meta, "margin": self.margin, "knots": self.knots,
                "fits": {p: {s: f.to_json() for s, f in sides.items()} for p, sides in self.fits.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GradeModel:
        fits = {p: {s: SideFit(float(f["intercept"]), {k: [float(c) for c in v] for k, v in f["coef"].items()})
                    for s, f in sides.items()} for p, sides in data["fits"].items()}
        meta = {k: v for k, v in data.items() if k not in ("margin", "knots", "fits")}
        return cls({k: [float(x) for x in v] for k, v in data["knots"].items()}, fits,
                   None if data.get("margin") is None else float(data["margin"]), meta)

    @property
    def name(self) -> str:
        return str(self.meta.get("name", "unnamed"))

    @property
    def digest(self) -> str:
        """SHA-256 (first 12 hex digits) of the model's parameters as shipped: what a grade says it rests on."""
        blob = json.dumps(self.to_json(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


@cache
def default_model() -> GradeModel:
    """The shipped model (``model.json`` in this package), read once."""
    text = resources.files("knockout.grading").joinpath(MODEL_FILE).read_text(encoding="utf-8")
    return GradeModel.from_json(json.loads(text))

