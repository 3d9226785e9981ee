"""The teacher's grades move the grade model to the teacher's level: never a map chosen on a dozen points.

With ``n`` answers of an exam graded by the teacher (shares of max points ``y``) beside the model's grades of
them (``x``), the adapted grade of any answer of that exam is

    clip(x + a + d * (x - c) + b_q, 0, 1)

* ``a`` (the exam's level) and ``d`` (its slope less one), around ``c`` (the mean model grade of the graded
  answers), are the posterior mean of a Bayesian linear regression of ``y - x`` with the frozen model as prior:
  ``d ~ N(0, slope_sd^2)``, noise ``N(0, noise_sd^2)``, and the level from a *scale mixture*: with probability
  ``1 - wide_share`` the teacher stands near the model's level, ``a ~ N(0, offset_sd^2)``, else anywhere within
  ``a ~ N(0, wide_sd^2)``.  Each component's posterior is closed form (ridge towards the model); they are mixed
  by their evidence (the marginal likelihood of the grades), so a few grades a little off the model's level are
  read as noise and barely move it, while grades far off it (a strict teacher, another scale) move it as far as
  they say.  Without ``wide_sd`` the prior is the single Gaussian ``N(0, offset_sd^2)``;
  the slope is never below 0 (the model's order is never reversed: where the posterior mean would, the slope
  is held at 0 and the level is the posterior mean given it);
* ``b_q`` (a question's own level) is the mean remaining residual of the question's graded answers shrunk towards
  0 by ``n_q / (n_q + (noise_sd / question_sd)^2)``: with 2 grades a question moves by a small part of what they
  say.

An exam with no teacher grade is not moved; the prior makes a handful of grades move an exam a little and many
grades move it as far as they say.  The prior's four numbers are part of the shipped model (``model.json``:
``adapt``), chosen on simulated teachers over the training data's cross-validated grades
(``bench/fit_grade_model.py``), and can be given by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Prior:
    """How far the teacher's grades may move the model (shares of max points)."""

    offset_sd: float = 0.10
    slope_sd: float = 0.25
    question_sd: float = 0.05
    noise_sd: float = 0.20
    #: the level's wide component (``None``: one Gaussian) and its prior probability
    wide_sd: float | None = None
    wide_share: float = 0.0

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Prior:
        vals = {k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__}
        wide = vals.pop("wide_sd", None)
        return cls(**{k: float(v) for k, v in vals.items()}, wide_sd=None if wide is None else float(wide))

    def to_json(self) -> dict[str, float | None]:
        return {"offset_sd": self.offset_sd, "slope_sd": self.slope_sd, "question_sd": self.question_sd,
                "noise_sd": self.noise_sd, "wide_sd": self.wide_sd, "wide_share": self.wide_share}

    def components(self) -> list[tuple[float, float]]:
        """The level's prior components: (prior probability, SD)."""
        if self.wide_sd is None or self.wide_share <= 0.0:
            return [(1.0, self.offset_sd)]
        return [(1.0 - self.wide_share, self.offset_sd), (self.wide_share, self.wide_sd)]


@dataclass
class Adaptation:
    """The teacher's level per exam (``level``, ``slope`` less one, ``centre``) and per question (``question``)."""

    prior: Prior
    exams: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    questions: dict[str, float] = field(default_factory=dict)
    grades: int = 0

    def predict(self, x: Sequence[float] | np.ndarray, q: Sequence[str], e: Sequence[str]) -> np.ndarray:
        """Adapted shares of max points for model shares ``x`` of questions ``q`` in exams ``e``."""
        xs = np.asarray(x, dtype=float)
        out = xs.copy()
        for i, (qi, ei) in enumerate(zip(q, e, strict=True)):
            a, d, c = self.exams.get(ei, (0.0, 0.0, 0.0))
            out[i] = xs[i] + a + d * (xs[i] - c) + self.questions.get(qi, 0.0)
        clipped: np.ndarray = np.clip(out, 0.0, 1.0)
        return clipped

    def describe(self) -> str:
        if not self.exams:
            return "no teacher grade: the model's grades"
        parts = [f"exam {k or '(one)'}: level {a:+.3f}, slope {1 + d:.2f}"
                 for k, (a, d, _) in sorted(self.exams.items())]
        moved = sum(abs(v) > 1e-9 for v in self.questions.values())
        return (f"the model moved to the teacher's level on {self.grades} teacher grades ({'; '.join(parts)}; "
                f"{moved} questions with their own level, shrunk towards the exam's)")

    def to_json(self) -> dict[str, Any]:
        return {"prior": self.prior.to_json(), "grades": self.grades,
                "exams": {k: {"level": a, "slope": 1 + d, "centre": c} for k, (a, d, c) in self.exams.items()},
                "questions": self.questions}


def adapt(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, q: Sequence[str], e: Sequence[str],
          prior: Prior | None = None, weights: Sequence[float] | np.ndarray | None = None) -> Adaptation:
    """The adaptation to the teacher's grades ``y`` of answers whose model grades are ``x`` (shares of max).
    ``weights``: how many teacher judgements each grade is worth (default 1 each; a grade given to a group of ``k``
    answers at once is ``1 / k`` on each member: the group counts as one judgement)."""
    prior = prior or Prior()
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ws = np.ones(len(xs)) if weights is None else np.asarray(weights, dtype=float)
    qs, es = np.asarray(q, dtype=object), np.asarray(e, dtype=object)
    out = Adaptation(prior, grades=len(xs))
    s2 = prior.noise_sd ** 2
    comps = prior.components()
    for exam in sorted(set(es.tolist())):
        m = es == exam
        xe, re, we = xs[m], ys[m] - xs[m], ws[m]
        c = float(np.average(xe, weights=we))
        design = np.column_stack([np.ones(len(xe)), xe - c])
        _, qix = np.unique(qs[m].astype(str), return_inverse=True)
        # a grade weighing w is as noisy as 1/w grades' mean: a group's k members (1/k each) count as one grade
        noise = np.diag(s2 / we) + prior.question_sd ** 2 * (qix[:, None] == qix[None, :])
        noise_inv = np.linalg.inv(noise)  # one inverse for every component
        fits = [_posterior(design, re, noise, noise_inv, sd, prior.slope_sd) for _, sd in comps]
        logw = np.array([np.log(pi) + f[2] for (pi, _), f in zip(comps, fits, strict=True)])
        w = np.exp(logw - logw.max())
        w /= w.sum()
        a = float(sum(wk * f[0] for wk, f in zip(w, fits, strict=True)))
        d = float(sum(wk * f[1] for wk, f in zip(w, fits, strict=True)))
        if d < -1.0:  # never reverse the model's order: the best level with the slope held at 0 (the same
            d = -1.0    # generalised least squares: a question's grades stay correlated)
            ones, held = np.ones(len(xe)), re + (xe - c)
            a = float(sum(wk * float(ones @ noise_inv @ held) / (float(ones @ noise_inv @ ones) + 1 / sd ** 2)
                          for wk, (_, sd) in zip(w, comps, strict=True)))
        out.exams[str(exam)] = (a, d, c)
    k = (prior.noise_sd / prior.question_sd) ** 2
    pred = out.predict(xs, [str(v) for v in qs], [str(v) for v in es])
    for question in sorted(set(qs.tolist())):
        m = qs == question
        resid = float(np.average(ys[m] - pred[m], weights=ws[m]))
        out.questions[str(question)] = resid * ws[m].sum() / (ws[m].sum() + k)
    return out


def _posterior(design: np.ndarray, r: np.ndarray, noise: np.ndarray, noise_inv: np.ndarray, level_sd: float,
               slope_sd: float) -> tuple[float, float, float]:
    """The posterior mean (level, slope less one) of ``r = design @ (a, d) + e``, ``e ~ N(0, noise)`` (the
    answers' noise and their questions' own levels: grades of one question are correlated), under the Gaussian
    prior ``N(0, diag(level_sd^2, slope_sd^2))``, and the log marginal likelihood of ``r`` (the component's
    evidence); ``noise_inv`` is ``noise``'s inverse."""
    prior_cov = np.diag([level_sd ** 2, slope_sd ** 2])
    precision = design.T @ noise_inv @ design + np.linalg.inv(prior_cov)
    a, d = np.linalg.solve(precision, design.T @ noise_inv @ r)
    cov = noise + design @ prior_cov @ design.T
    _, logdet = np.linalg.slogdet(cov)
    evidence = -0.5 * (float(r @ np.linalg.solve(cov, r)) + logdet + len(r) * np.log(2 * np.pi))
    return float(a), float(d), evidence
