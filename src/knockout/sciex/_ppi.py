"""Prediction-powered SciEx figures (:mod:`knockout.calibration._ppi`): each examinee's grade (the mean of its
per-exam percentages) and German grade, each exam's average over its examinees, and the difference between
examinees next to each other in the ranking, estimated from one judge's grades on every answer and the
experts' grades on a subset.

The figure is the one :mod:`knockout.sciex._results` defines, on *every* answer: an exam's percent is its
answers' expert points over the exam's maximum points (an unanswered question scores 0, as there).  An answer
the judge left invalid is predicted at the judge's mean share of the maximum points (a fixed prediction keeps
the estimate unbiased; it only widens the interval).  The German grade's interval comes from the exams'
percent intervals at level ``alpha / exams`` (Bonferroni: all hold together with probability ``1 - alpha``),
each mapped through the exam's boundaries, which only go down as the percent goes up.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from knockout.calibration._ppi import PPIEstimate, ppi_total
from knockout.data._records import Answer, ItemSet
from knockout.sciex._results import Exam, exam_of

Grades = Mapping[str, float | None]


def _answers(items: ItemSet, examinee: str, exams: Mapping[str, Exam]) -> dict[str, list[Answer]]:
    """The examinee's answers per exam it took (the exam's questions it answered)."""
    out: dict[str, list[Answer]] = {}
    for a in items:
        if a.examinee == examinee:
            out.setdefault(exam_of(items.question_of(a)), []).append(a)
    return {e: out[e] for e in exams if e in out}


class _Terms:
    """The answers of a figure with their weights, expert grades (None: not expert-graded) and judge grades."""

    def __init__(self, judge: Grades, experts: Grades, fallback: float) -> None:
        self.judge, self.experts, self.fallback = judge, experts, fallback
        self.weights: list[float] = []
        self.expert: list[float | None] = []
        self.pred: list[float] = []

    def add(self, items: ItemSet, answers: Sequence[Answer], weight: float) -> None:
        for a in answers:
            top = items.question_of(a).max_points
            j = self.judge.get(a.id)
            self.weights.append(weight)
            self.expert.append(self.experts.get(a.id))
            self.pred.append(float(j) if j is not None else self.fallback * top)

    def estimate(self, alpha: float) -> PPIEstimate | None:
        if not self.weights:
            return None
        return ppi_total(self.weights, self.expert, self.pred, alpha=alpha)


def judge_share(items: ItemSet, judge: Grades) -> float:
    """The judge's mean share of the maximum points over its valid grades (the prediction of an invalid one)."""
    shares = [float(judge[a.id]) / items.question_of(a).max_points for a in items  # type: ignore[arg-type]
              if judge.get(a.id) is not None]
    return float(np.mean(shares)) if shares else 0.5


def _percent_terms(items: ItemSet, exams: Mapping[str, Exam], per_exam: Mapping[str, list[Answer]], judge: Grades,
                   experts: Grades, fallback: float) -> _Terms:
    """The terms of an examinee's grade: the mean of per-exam percentages, each answer weighted by its exam."""
    terms = _Terms(judge, experts, fallback)
    for e, answers in per_exam.items():
        terms.add(items, answers, 100.0 / (len(per_exam) * exams[e].max_points))
    return terms


def examinee_ppi(items: ItemSet, exams: Mapping[str, Exam], examinee: str, judge: Grades, experts: Grades, *,
                 alpha: float = 0.05, fallback: float | None = None) -> dict[str, Any] | None:
    """The examinee's grade (mean of per-exam percentages) and German grade, prediction-powered."""
    fallback = judge_share(items, judge) if fallback is None else fallback
    per_exam = _answers(items, examinee, exams)
    if not per_exam:
        return None
    whole = _percent_terms(items, exams, per_exam, judge, experts, fallback)
    grade = whole.estimate(alpha)
    if grade is None:
        return None
    german: list[float] = []
    worst: list[float] = []
    best: list[float] = []
    for e, answers in per_exam.items():
        t = _Terms(judge, experts, fallback)
        t.add(items, answers, 1.0 / exams[e].max_points)
        est = t.estimate(alpha / len(per_exam))
        if est is None:  # too few expert grades in this exam for its own interval
            german = []
            break
        b = exams[e].boundaries
        german.append(b.grade(float(np.clip(est.estimate, 0, 1))))
        worst.append(b.grade(float(np.clip(est.ci[0], 0, 1))))
        best.append(b.grade(float(np.clip(est.ci[1], 0, 1))))
    out = {"examinee": examinee, **_clipped(grade.to_dict(2), 0.0, 100.0)}
    if german:
        out["german"] = round(float(np.mean(german)), 2)
        out["german_ci"] = [round(float(np.mean(best)), 2), round(float(np.mean(worst)), 2)]
    return out


def exam_average_ppi(items: ItemSet, exams: Mapping[str, Exam], exam_id: str, examinees: Sequence[str],
                     judge: Grades, experts: Grades, *, alpha: float = 0.05,
                     fallback: float | None = None) -> dict[str, Any] | None:
    """An exam's average percent over the examinees that took it, prediction-powered."""
    fallback = judge_share(items, judge) if fallback is None else fallback
    took = {x: _answers(items, x, exams).get(exam_id, []) for x in examinees}
    took = {x: a for x, a in took.items() if a}
    if not took:
        return None
    t = _Terms(judge, experts, fallback)
    for answers in took.values():
        t.add(items, answers, 100.0 / (len(took) * exams[exam_id].max_points))
    est = t.estimate(alpha)
    return None if est is None else {"exam": exam_id, "examinees": len(took), **_clipped(est.to_dict(2), 0.0, 100.0)}


def _clipped(est: dict[str, Any], low: float, high: float) -> dict[str, Any]:
    """The intervals cut to the figure's range (a percent is 0..100): the coverage stays, the width shown is
    the width that remains."""
    for key, width in (("ci", "width"), ("expert_only_ci", "expert_only_width")):
        lo, hi = max(est[key][0], low), min(est[key][1], high)
        est[key], est[width] = [lo, hi], round(hi - lo, 2)
    return est


def difference_ppi(items: ItemSet, exams: Mapping[str, Exam], first: str, second: str, judge: Grades,
                   experts: Grades, *, alpha: float = 0.05, fallback: float | None = None) -> dict[str, Any] | None:
    """``first``'s grade minus ``second``'s (percentage points): the difference of the two examinees'
    prediction-powered grades, whose answers (and expert subsets) are disjoint, so their variances add (the
    standard error of each from its interval); the expert-only difference the same way."""
    fallback = judge_share(items, judge) if fallback is None else fallback
    ests = []
    for who in (first, second):
        est = _percent_terms(items, exams, _answers(items, who, exams), judge, experts, fallback).estimate(alpha)
        if est is None:
            return None
        ests.append(est)
    a, b = ests
    z = NormalDist().inv_cdf(1 - alpha / 2)

    def combined(x: float, y: float, cx: tuple[float, float], cy: tuple[float, float]) -> list[float]:
        se = math.hypot((cx[1] - cx[0]) / (2 * z), (cy[1] - cy[0]) / (2 * z))
        return [round(x - y - z * se, 2), round(x - y + z * se, 2)]

    ci = combined(a.estimate, b.estimate, a.ci, b.ci)
    eci = combined(a.expert_only, b.expert_only, a.expert_only_ci, b.expert_only_ci)
    return _clipped({"first": first, "second": second, "estimate": round(a.estimate - b.estimate, 2), "ci": ci,
                     "width": 0.0, "lambda": [round(a.lam, 2), round(b.lam, 2)],
                     "judge_only": round(a.judge_only - b.judge_only, 2),
                     "expert_only": round(a.expert_only - b.expert_only, 2), "expert_only_ci": eci,
                     "expert_only_width": 0.0, "labelled": a.labelled + b.labelled, "answers": a.answers + b.answers,
                     "confidence": 1 - alpha}, -100.0, 100.0)


def leaderboard_ppi(items: ItemSet, exams: Mapping[str, Exam], order: Sequence[str], judge: Grades,
                    experts: Grades, *, alpha: float = 0.05, truth: Grades | None = None) -> dict[str, Any]:
    """The leaderboard's prediction-powered section for one judge: every examinee of ``order`` (ranked), every
    exam's average, and the difference between neighbours in the ranking; with ``truth`` (every expert grade,
    when the leaderboard hid some: ``--expert-sample``), the figure from all of them beside each estimate."""
    fallback = judge_share(items, judge)
    kw: dict[str, Any] = {"alpha": alpha, "fallback": fallback}
    rows = []
    for x in order:
        est = examinee_ppi(items, exams, x, judge, experts, **kw)
        if est is not None:
            if truth is not None:
                est["all_experts"] = _exact(items, exams, [x], truth)
            rows.append(est)
    exam_rows = []
    for e in exams:
        est = exam_average_ppi(items, exams, e, order, judge, experts, **kw)
        if est is not None:
            if truth is not None:
                est["all_experts"] = _exact_exam(items, exams, e, order, truth)
            exam_rows.append(est)
    diffs = []
    for a, b in itertools.pairwise(order):
        est = difference_ppi(items, exams, a, b, judge, experts, **kw)
        if est is not None:
            if truth is not None:
                ta, tb = _exact(items, exams, [a], truth), _exact(items, exams, [b], truth)
                est["all_experts"] = None if ta is None or tb is None else round(ta - tb, 2)
            diffs.append(est)
    labelled = sum(1 for a in items if a.examinee in set(order) and experts.get(a.id) is not None)
    answers = sum(1 for a in items if a.examinee in set(order))
    return {"examinees": rows, "exams": exam_rows, "differences": diffs, "labelled": labelled, "answers": answers,
            "confidence": 1 - alpha, "invalid_predicted_at": round(fallback, 4)}


def _exact(items: ItemSet, exams: Mapping[str, Exam], who: Sequence[str], truth: Grades) -> float | None:
    """The figure itself from every expert grade (None when an answer has none)."""
    (x,) = who
    per_exam = _answers(items, x, exams)
    total = 0.0
    for e, answers in per_exam.items():
        vals = [truth.get(a.id) for a in answers]
        if any(v is None for v in vals):
            return None
        total += 100.0 * sum(v for v in vals if v is not None) / (len(per_exam) * exams[e].max_points)
    return round(total, 2) if per_exam else None


def _exact_exam(items: ItemSet, exams: Mapping[str, Exam], exam_id: str, order: Sequence[str],
                truth: Grades) -> float | None:
    took = [a for x in order for a in _answers(items, x, exams).get(exam_id, [])]
    n = len({a.examinee for a in took})
    vals = [truth.get(a.id) for a in took]
    if not took or any(v is None for v in vals):
        return None
    return round(100.0 * sum(v for v in vals if v is not None) / (n * exams[exam_id].max_points), 2)
