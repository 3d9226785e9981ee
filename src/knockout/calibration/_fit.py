"""Calibration: the teacher's grades move the grade model to the teacher's level (issue 58).

Every grade is put on the share-of-max scale (points / max points), so that questions worth 1 and worth 10
points share one adaptation; the adapted share is clipped to 0..1 and multiplied back.

The adaptation is :func:`knockout.grading._adapt.adapt`: an exam-level offset and slope and per-question
offsets, each the posterior mean with the frozen model as prior (the shipped model's ``adapt`` prior,
:func:`shipped_prior`).  Nothing is *chosen*: no map is picked by cross-validation on a dozen points, so a few teacher
grades move the grades a little and many grades move them as far as they say, and a steep teacher's six grades
cannot give a low-graded answer full marks.  With no teacher grade there is nothing to adapt to and the grades
stay the model's.

The figures before and after are computed on held-out answers only, never on the answers the adaptation was
given: with a holdout (answers with teacher grades that the fit was not given: ``fit_ids``), on those, and then
the held-out grades are exactly the grades written for them; otherwise by plain K-fold cross-validation over the
graded answers (each fold's grades adapted on the other folds: there is no choice inside to nest).  CIs: cluster
bootstrap over questions (:mod:`knockout.metrics._bootstrap`).  Each adapted grade's uncertainty is the spread of
its prediction over bootstrap refits (graded answers resampled).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from knockout.errors import ConfigError

if TYPE_CHECKING:
    from knockout.grading._adapt import Adaptation, Prior

#: the name of the adaptation wherever a calibration is shown (``Calibration.map``)
ADAPT = "adapt"
#: fewest teacher grades a calibration is fitted on: one to adapt on and one to hold out in the cross-validated
#: figures.  The prior, not a count, keeps a handful of grades from moving the grades far: with 2 the adaptation
#: moves the model by a small part of what they say
MIN_GRADES = 2
#: cross-validation folds of the held-out figures (fewer when there are fewer graded answers)
FOLDS = 5


@dataclass(frozen=True)
class Graded:
    """One answer as calibration sees it: the model's grade (``judge``) and, when the teacher graded it, the
    teacher's (``expert``)."""

    id: str
    question_id: str
    max_points: float
    judge: float | None
    expert: float | None = None
    exam: str = ""


def shipped_prior() -> Prior:
    """The shipped model's adaptation prior (``model.json``: ``adapt``; the defaults of :class:`Prior` where it
    gives none)."""
    from knockout.grading._adapt import Prior
    from knockout.grading._model import default_model

    return Prior.from_json(default_model().meta.get("adapt"))


def _arrays(rows: Sequence[Graded]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    mx = np.array([r.max_points for r in rows], dtype=float)
    x = np.array([r.judge for r in rows], dtype=float) / mx
    y = np.array([np.nan if r.expert is None else r.expert for r in rows], dtype=float) / mx
    return x, y, np.array([r.question_id for r in rows]), np.array([r.exam for r in rows]), mx


def _fit(x: np.ndarray, y: np.ndarray, q: np.ndarray, e: np.ndarray, p: Prior | None,
         w: np.ndarray | None = None) -> Adaptation:
    from knockout.grading._adapt import adapt

    return adapt(x, y, [str(v) for v in q], [str(v) for v in e], p, weights=w)


def _predict(a: Adaptation, x: np.ndarray, q: np.ndarray, e: np.ndarray) -> np.ndarray:
    return a.predict(x, [str(v) for v in q], [str(v) for v in e])


def _folds(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import KFold

    k = min(FOLDS, n)
    return [(tr, te) for tr, te in KFold(n_splits=k, shuffle=True, random_state=seed).split(np.arange(n))]


def enough(rows: Sequence[Graded]) -> str | None:
    """Why ``rows`` (the graded answers a fit would use) are too few, or None when they are enough."""
    judged = [r for r in rows if r.expert is not None and r.judge is not None]
    if len(judged) < MIN_GRADES:
        return (f"{len(judged)} answers have both a teacher grade and a valid model grade; calibration needs at "
                f"least {MIN_GRADES}")
    return None


def label_for(expert_grades: int) -> str:
    """How an adapted grade is labelled wherever it is shown: what moved it (the teacher's grades, how many)."""
    return f"adapted to the teacher's level on {expert_grades} teacher grades"


@dataclass
class Calibration:
    """The adaptation to the teacher's grades and its held-out figures (:func:`calibrate`)."""

    #: :data:`ADAPT`
    map: str
    #: :meth:`Adaptation.describe`
    description: str
    #: the number of teacher grades the adaptation was given
    expert_grades: int
    #: the adaptation's numbers (:meth:`Adaptation.to_json`)
    adaptation: dict[str, Any]
    #: answer id -> adapted grade in points (every answer with a valid model grade): the grades written
    grades: dict[str, float]
    #: answer id -> standard deviation of the adapted grade over bootstrap refits (points)
    sd: dict[str, float]
    #: how the held-out figures were made: ``holdout``, ``cross-validation`` or ``none``
    heldout: str
    #: held-out figures before (``raw``: the model's grades) and after (``calibrated``), with CIs
    figures: dict[str, Any] = field(default_factory=dict)
    #: answer id -> held-out adapted grade (never from an adaptation given that answer's teacher grade)
    heldout_grades: dict[str, float] = field(default_factory=dict)
    #: how far the written grades moved from the model's (points): ``mean`` and ``max`` absolute move, ``answers``
    moved: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return label_for(self.expert_grades)

    def to_dict(self) -> dict[str, Any]:
        return {"map": self.map, "description": self.description, "expert_grades": self.expert_grades,
                "adaptation": self.adaptation, "heldout": self.heldout, "figures": self.figures,
                "grades": self.grades, "sd": self.sd, "heldout_grades": self.heldout_grades, "moved": self.moved}


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


def calibrate(rows: Sequence[Graded], *, fit_ids: set[str] | None = None, seed: int = 0, resamples: int = 1000,
              refits: int = 100, heldout: bool = True, prior: Prior | None = None,
              weights: Mapping[str, float] | None = None) -> Calibration:
    """Adapt the model's grades of ``rows`` (one per answer; invalid grades have ``judge`` None) to the teacher's.

    ``fit_ids``: the teacher-graded answers the adaptation is given (default: every one); the other
    teacher-graded answers are then the holdout the figures are computed on.  ``heldout=False``: no held-out
    figures (the grades and their spread only: what a review queue needs).  ``prior``: the adaptation's prior
    (default: the shipped model's, :func:`shipped_prior`).  ``weights``: answer id -> how many teacher judgements
    its grade is worth (default 1; a group's grade is one judgement spread over its members,
    :func:`knockout.calibration._run.group_weights`).  Raises :class:`ConfigError` when there are too few teacher
    grades (:func:`enough`)."""
    valid = [r for r in rows if r.judge is not None]
    graded = [r for r in valid if r.expert is not None]
    fit = [r for r in graded if fit_ids is None or r.id in fit_ids]
    why = enough(fit)
    if why is not None:
        raise ConfigError(f"too few teacher grades to calibrate: {why} (grade more answers in the web app, or "
                          "give a data file with human grades)")
    p = prior if prior is not None else shipped_prior()
    x, y, q, e, _ = _arrays(fit)
    w = np.array([(weights or {}).get(r.id, 1.0) for r in fit], dtype=float)
    final = _fit(x, y, q, e, p, w)
    ax, _, aq, ae, amx = _arrays(valid)
    grades = _predict(final, ax, aq, ae) * amx
    # each adapted grade's spread over refits on resampled graded answers
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(refits):
        idx = rng.integers(0, len(x), len(x))
        draws.append(_predict(_fit(x[idx], y[idx], q[idx], e[idx], p, w[idx]), ax, aq, ae) * amx)
    sd = np.std(np.array(draws), axis=0) if draws else np.zeros(len(valid))
    move = np.abs(grades - ax * amx)
    moved = {"mean": float(move.mean()) if len(move) else 0.0, "max": float(move.max()) if len(move) else 0.0,
             "answers": float(len(move))}
    out = Calibration(ADAPT, final.describe(), len(fit), final.to_json(),
                      {r.id: float(g) for r, g in zip(valid, grades, strict=True)},
                      {r.id: float(s) for r, s in zip(valid, sd, strict=True)}, "none", moved=moved)
    if not heldout:
        return out
    # held-out grades: the holdout's are the grades written for them; else plain K-fold cross-validation
    held = [r for r in graded if fit_ids is not None and r.id not in fit_ids]
    if held:
        hx, hy, hq, he, hmx = _arrays(held)
        hpred = _predict(final, hx, hq, he)
        out.heldout, ids = "holdout", [r.id for r in held]
    else:
        hx, hy, hq, he, hmx = x, y, q, e, _arrays(fit)[4]
        hpred = np.empty(len(fit))
        for tr, te in _folds(len(fit), seed):
            hpred[te] = _predict(_fit(x[tr], y[tr], q[tr], e[tr], p, w[tr]), x[te], q[te], e[te])
        out.heldout, ids = "cross-validation", [r.id for r in fit]
    out.figures = heldout_figures(hx * hmx, hpred * hmx, hy * hmx, hq, resamples=resamples, seed=seed,
                                  max_points=hmx)
    out.heldout_grades = {i: float(g) for i, g in zip(ids, hpred * hmx, strict=True)}
    return out


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
