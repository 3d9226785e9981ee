"""Trust marks: where a teacher should not take the judge's grade as it is.

Two marks per answer, built here once and shown by every place that shows a grade (the CLI table of
``knockout grade``, ``knockout report``, the gradebook, the tidy export, the web app's exam page, the review
queue):

* ``needs expert``: the answer's question is one the judge cannot grade reliably
  (:func:`question_reliability` below :data:`THRESHOLD`): grade it by hand;
* ``flagged``: the persuasion defence flagged the answer (``details["guard"]["flagged"]``); its grade is the
  defended one, and ``details["guard"]["grade_full"]`` the grade it would have had.

**The reliability of a question** (:func:`question_reliability`) estimates the Pearson correlation, inside the
question, between the judge's grades and the experts' -- how far the judge's order inside a question can be
trusted.  From what a run has without new judge calls (grades as shares of max points):

* the judge's **spread**: ``s``, the standard deviation of its grades over the question's answers; a judge that
  gives every answer the same grade ranks nothing (estimate 0);
* its **noise** per answer ``u_i``, the agreement between variants: the standard deviation of repeated draws
  (``--samples``) and half a jury's range (highest minus lowest member); ``u^2`` is the mean over answers of the
  mean of the available ones' squares.  The judge's internal reliability is ``rel = s^2 / (s^2 + u^2)`` (1
  without variants).  The spread of the judge's own distribution over the grades (the verdict slot's
  probabilities, :func:`knockout.judges._slot.verdict_spread`) is shown beside (``own spread``) but does not
  lower the estimate: an expected grade is that distribution's mean, not a draw from it, and on the Mohler dev
  sample (docs/calibration.md) the score-only preset's expected grades moved by 0.17-0.31 points inside a
  question against an own spread of 1.0-1.25, which marked every question, the ones it ranked well included;
* **squeeze**: ``min(1, s / SQUEEZED)``: grades that move by less than :data:`SQUEEZED` of max points over the
  question's answers are barely apart;
* the **prior** estimate ``r0 = PRIOR x sqrt(rel) x squeeze`` (:data:`PRIOR`: a judge's typical within-question
  correlation; the square root: Spearman's attenuation by the judge's own unreliability);
* the **teacher grades** of the question (``h``, beside the judge's ``j``), read as a regression of the teacher on
  the judge inside the question, ``h = c_q + beta_q j + e`` (the grade model is fitted to predict the teacher, so
  its errors are taken as independent of its grades); the judge's within-question correlation with the teacher is
  then ``r = beta_q s / sqrt(beta_q^2 s^2 + sigma_q^2)``:

  - ``sigma_q^2``, the question's error: ``(ERROR_WEIGHT sigma_0^2 + sum d_i^2) / (ERROR_WEIGHT + n)`` with
    ``d_i = (h_i - mean h) - beta_0 (j_i - mean j)`` the distance of each teacher grade from the exam's line
    through the judge's (the means over the exam's teacher-graded answers, ``beta_0`` the slope of the exam's other
    questions below: the level and slope the adaptation sets), shrunk towards ``sigma_0``, the
    grade model's own error against a teacher (the shipped model's adaptation prior, ``model.json``:
    ``adapt.noise_sd``, read at run time) with :data:`ERROR_WEIGHT` pseudo-grades: two grades 3 points from the
    judge's count, two grades as the judge's barely move it;
  - ``beta_q``, the question's slope: its teacher grades' within-question regression on the judge's (centred on
    their question's means, weighed at ``sigma_q``), with a normal prior of SD :data:`SLOPE_SD` around the slope of
    the **exam's other questions** pooled the same way (which itself starts from 1, the model's scale, weighed at
    ``sigma_0``): a hierarchical estimate, so that 2 grades per question say something -- two answers the teacher
    orders against the judge by a point or more pull ``beta_q`` below 0, two it orders as the judge leave it near
    the exam's;
  - the 90% interval: ``beta_q`` +- 1.645 posterior SDs, through the same formula.

  With ``n >= 4`` teacher grades that differ, their plain Pearson ``r_e`` with the judge's and its 95% interval
  ``tanh(z_e +- 1.96 / sqrt(n - 3))`` are shown beside (not used: the regression already reads them).  A question
  with no teacher grade of its own keeps the prior ``r0``; one whose teacher grades all have the same judge grade
  has no within-question slope of its own and takes the exam's.

A question is marked ``needs expert`` when its estimate is below :data:`THRESHOLD`.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knockout.calibration._fit import answered

#: below this estimated within-question correlation a question is marked "needs expert"
THRESHOLD = 0.3
#: a judge's within-question correlation with the experts before anything else is known
PRIOR = 0.5
#: the prior's width: its 90% interval is ``tanh(z0 +- 1.645 / sqrt(PRIOR_WEIGHT))`` on Fisher's z scale
PRIOR_WEIGHT = 4.0
#: the grade model's own error against a teacher (``sigma_0``) weighs as this many teacher grades of a question
ERROR_WEIGHT = 4.0
#: how far a question's within-question slope of the teacher on the judge may stray from its exam's (prior SD)
SLOPE_SD = 1.0
#: a spread of the judge's grades over a question's answers below this share of max points is squeezed
SQUEEZED = 0.05
#: the words of the mark, wherever it is shown
NEEDS_EXPERT = "needs expert"
NEEDS_EXPERT_WORDS = "the judge cannot grade this question reliably: grade it by hand"
FLAGGED = "flagged"
FLAGGED_WORDS = "the persuasion defence flagged this answer"
DISAGREE = "readers disagree"


@dataclass(frozen=True)
class Reliability:
    """A question's reliability (:func:`question_reliability`)."""

    question_id: str
    answers: int
    #: the estimated within-question correlation of the judge with the experts, and its 90% interval
    estimate: float
    low: float
    high: float
    spread: float | None
    noise: float | None
    internal: float | None
    prior: float
    experts: int
    expert_r: float | None = None
    expert_ci: tuple[float, float] | None = None
    why: str = ""
    #: the root mean square of the judge's own spread over the grades (verdict slot), share of max points
    own_spread: float | None = None

    @property
    def reliable(self) -> bool:
        return self.estimate >= THRESHOLD

    def words(self) -> str:
        """The estimate with its interval and what it rests on."""
        out = f"reliability {self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}]"
        return out + (f": {self.why}" if self.why else "")

    def to_dict(self) -> dict[str, Any]:
        return {"question_id": self.question_id, "answers": self.answers, "estimate": self.estimate,
                "interval": [self.low, self.high], "spread": self.spread, "noise": self.noise,
                "internal": self.internal, "own_spread": self.own_spread, "prior": self.prior,
                "expert_grades": self.experts,
                "expert_r": self.expert_r, "expert_ci": list(self.expert_ci) if self.expert_ci else None,
                "reliable": self.reliable, "why": self.why,
                "mark": None if self.reliable else NEEDS_EXPERT}


def _z(r: float) -> float:
    return math.atanh(max(-0.999, min(0.999, r)))


def model_error() -> float:
    """``sigma_0``: the grade model's own error against a teacher (share of max points), the shipped model's
    adaptation prior's noise (``model.json``: ``adapt.noise_sd``), read at run time."""
    from knockout.calibration._fit import shipped_prior

    return float(shipped_prior().noise_sd)


def within(pairs: Sequence[tuple[float, float]], max_points: float) -> tuple[float, float]:
    """The within-question sums of a question's (judge, teacher) pairs, shares of max centred on their means:
    ``(sum x*y, sum x*x)``, what the slope of the teacher on the judge is pooled from."""
    if len(pairs) < 2:
        return 0.0, 0.0
    pj, ph = (np.array(pairs, dtype=float) / max_points).T
    x, y = pj - pj.mean(), ph - ph.mean()
    return float(x @ y), float(x @ x)


@dataclass(frozen=True)
class ExamEvidence:
    """What the exam says (:func:`trust_marks`): ``judge_mean`` and ``teacher_mean`` the means of the judge's and
    the teacher's shares over the exam's teacher-graded answers (None: the question's own), ``sxy`` and ``sxx``
    the other questions' within-question sums (:func:`within`)."""

    judge_mean: float | None = None
    teacher_mean: float | None = None
    sxy: float = 0.0
    sxx: float = 0.0


def _slope_prior(exam: ExamEvidence, sigma0: float) -> float:
    """The exam's slope of the teacher on the judge from its other questions, starting from 1."""
    prec = 1.0 / SLOPE_SD ** 2 + exam.sxx / sigma0 ** 2
    return (1.0 / SLOPE_SD ** 2 + exam.sxy / sigma0 ** 2) / prec


def question_reliability(judge: Sequence[float], max_points: float, *, noise: Sequence[float | None] = (),
                         expert: Sequence[tuple[float, float]] = (), question_id: str = "",
                         own_spread: Sequence[float | None] = (), exam: ExamEvidence | None = None) -> Reliability:
    """The reliability of one question: ``judge`` its answers' valid judge grades (points), ``noise`` each
    answer's noise between variants (points: repeated draws' SD, a jury's half range; None where the run has
    none), ``expert`` the (judge grade, teacher grade) pairs of its teacher-graded answers, ``own_spread`` each
    answer's spread of the judge's own distribution over the grades (points; shown, not used), ``exam`` what the
    exam's other questions' teacher grades say (none: the question alone).  The formula: the module's docstring
    and docs/calibration.md."""
    own = [float(v) / max_points for v in own_spread if v is not None and math.isfinite(v)]
    own_rms = math.sqrt(float(np.mean(np.square(own)))) if own else None
    x = np.asarray(judge, dtype=float) / max_points
    pairs = [(j / max_points, h / max_points) for j, h in expert]
    why: list[str] = []
    if len(x) < 2 or float(np.std(x)) < 1e-9:
        s = float(np.std(x)) if len(x) else None
        return Reliability(question_id, len(x), 0.0, 0.0, 0.0, s, None, None, 0.0, len(pairs),
                           why="the judge gave every answer of this question the same grade: it ranks nothing"
                           if len(x) >= 2 else "fewer than 2 valid judge grades", own_spread=own_rms)
    s = float(np.std(x))
    got = [float(u) / max_points for u in noise if u is not None and math.isfinite(u)]
    u2 = float(np.mean(np.square(got))) if got else None
    rel = None if u2 is None else s * s / (s * s + u2)
    squeeze = min(1.0, s / SQUEEZED)
    r0 = PRIOR * math.sqrt(1.0 if rel is None else rel) * squeeze
    why.append(f"judge's spread {s:.3f} of max points" + (" (squeezed)" if squeeze < 1 else ""))
    if rel is not None:
        why.append(f"noise between its variants {math.sqrt(u2 or 0.0):.3f}, internal reliability {rel:.2f}")
    expert_r, expert_ci = None, None
    if len(pairs) >= 4:
        pj, ph = np.array(pairs).T
        if float(np.std(ph)) > 1e-12 and float(np.std(pj)) > 1e-12:
            expert_r = float(np.corrcoef(pj, ph)[0, 1])
            ze, half = _z(expert_r), 1.96 / math.sqrt(len(pairs) - 3)
            expert_ci = (math.tanh(ze - half), math.tanh(ze + half))
    if not pairs:
        half = 1.645 / math.sqrt(PRIOR_WEIGHT)
        return Reliability(question_id, len(x), r0, math.tanh(_z(r0) - half), math.tanh(_z(r0) + half), s,
                           None if u2 is None else math.sqrt(u2), rel, r0, 0, why="; ".join(why), own_spread=own_rms)
    exam = exam or ExamEvidence()
    sigma0 = model_error()
    sxy, sxx = within(expert, max_points)
    prior_slope = _slope_prior(exam, sigma0)
    pj, ph = np.array(pairs, dtype=float).T
    mj = float(pj.mean()) if exam.judge_mean is None else exam.judge_mean
    mh = float(ph.mean()) if exam.teacher_mean is None else exam.teacher_mean
    d = (ph - mh) - prior_slope * (pj - mj)  # each teacher grade's distance from the exam's line through the judge's
    sigma2 = (ERROR_WEIGHT * sigma0 ** 2 + float(np.sum(d ** 2))) / (ERROR_WEIGHT + len(pairs))
    prec = 1.0 / SLOPE_SD ** 2 + sxx / sigma2
    beta = (prior_slope / SLOPE_SD ** 2 + sxy / sigma2) / prec
    half = 1.645 / math.sqrt(prec)

    def corr(b: float) -> float:
        return b * s / math.sqrt(b * b * s * s + sigma2)

    est, low, high = corr(beta), corr(beta - half), corr(beta + half)
    n = len(pairs)
    why.append(f"{n} teacher grade{'s' if n != 1 else ''}: {math.sqrt(sigma2):.3f} of max from the exam's line "
               f"through the judge's (the model's own error {sigma0:.3f}), slope of the teacher on the judge "
               f"{beta:.2f} (the exam's other questions {prior_slope:.2f})")
    if n < 4:
        why.append(f"too few for a correlation of their own ({n} of 4 needed)")
    elif expert_r is not None and expert_ci is not None:
        why.append(f"their r {expert_r:.2f} [{expert_ci[0]:.2f}, {expert_ci[1]:.2f}]")
    else:
        why.append("their grades all the same: no correlation of their own")
    return Reliability(question_id, len(x), est, low, high, s, None if u2 is None else math.sqrt(u2), rel, r0, n,
                       expert_r, expert_ci, "; ".join(why), own_rms)


def answer_noise(details: Mapping[str, Any], max_points: float) -> dict[str, float]:
    """An answer's noise signals (points): ``spread`` the judge's own distribution over the grades (verdict
    slot), ``samples`` the standard deviation of repeated draws, ``jury`` a jury's range (highest - lowest)."""
    from knockout.judges._slot import verdict_spread

    out: dict[str, float] = {}
    sd = verdict_spread(dict(details), max_points)
    if sd is not None:
        out["spread"] = float(sd)
    if isinstance(details.get("spread"), int | float):
        out["jury"] = float(details["spread"])
    got = [float(v) for v in details.get("draws") or details.get("samples") or [] if isinstance(v, int | float)]
    if len(got) >= 2:
        out["samples"] = float(np.std(got))
    return out


def combined_noise(signals: Mapping[str, float]) -> float | None:
    """One answer's noise between variants (points) from its signals: the root of the mean of the squares of
    repeated draws' SD and a jury's half range (the verdict slot's own spread is not among them)."""
    parts = [signals[k] / (2.0 if k == "jury" else 1.0) for k in ("samples", "jury") if k in signals]
    return math.sqrt(sum(p * p for p in parts) / len(parts)) if parts else None


def own_grade(details: Mapping[str, Any], score: float) -> tuple[float, float]:
    """The judge's own grade of an answer and the scale its grade was read on: a grade read on reference anchors
    (``details["anchored"]``, :mod:`knockout.methods._anchors`) is the judge's stretched by its question's
    anchors; a question's reliability is the judge's own discrimination, before that stretch."""
    a = details.get("anchored")
    if isinstance(a, Mapping) and isinstance(a.get("scale"), int | float) and a["scale"] > 0:
        return float(a["grade_raw"]), float(a["scale"])
    return score, 1.0


def guard_of(details: Mapping[str, Any]) -> dict[str, Any] | None:
    """The persuasion defence's record of an answer when it flagged it (``details["guard"]``), else None."""
    g = details.get("guard")
    return dict(g) if isinstance(g, Mapping) and g.get("flagged") else None


@dataclass
class Trust:
    """The trust marks of a run's answers (:func:`trust_marks`)."""

    questions: dict[str, Reliability] = field(default_factory=dict)
    #: answer id -> its question
    question_of: dict[str, str] = field(default_factory=dict)
    #: answer id -> the defence's record (``grade_full``, ``p_address``, ``removed``) of a flagged answer
    flagged: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: answer id -> its two readings (``judge``, ``meaning``, points; :mod:`knockout.meaning`), when two read it
    readings: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: question id -> its answers (those in ``question_of``), and the answers whose readers disagree: what
    #: :meth:`counts` reads, kept also by ``trust_marks(per_answer=False)``, which fills no map by answer
    answers: dict[str, int] = field(default_factory=dict)
    disagreeing: int = 0

    def disagree(self, answer_id: str) -> bool:
        """Whether the answer's two readers disagreed beyond their measured spread (its grade leans to the lower)."""
        return bool(self.readings.get(answer_id, {}).get("disagree"))

    def needs_expert(self, answer_id: str) -> bool:
        r = self.questions.get(self.question_of.get(answer_id, ""))
        return r is not None and not r.reliable

    def marks(self, answer_id: str) -> list[str]:
        """The answer's marks, ``flagged`` first."""
        return (([FLAGGED] if answer_id in self.flagged else []) + ([DISAGREE] if self.disagree(answer_id) else [])
                + ([NEEDS_EXPERT] if self.needs_expert(answer_id) else []))

    def grade_full(self, answer_id: str) -> float | None:
        g = self.flagged.get(answer_id, {}).get("grade_full")
        return float(g) if isinstance(g, int | float) else None

    def words(self, answer_id: str) -> str:
        """The answer's marks in words ("" without any)."""
        out = []
        if answer_id in self.flagged:
            full = self.grade_full(answer_id)
            whole = "; its flagged parts are most of it, so it was graded whole: check it"
            out.append(f"{FLAGGED}: {FLAGGED_WORDS}" + (f" (it would have had {full:g})" if full is not None else "")
                       + (whole if self.flagged[answer_id].get("graded_whole") else ""))
        if self.disagree(answer_id):
            from knockout.grading import DISAGREE_WORDS

            rd = self.readings[answer_id]
            out.append(f"{DISAGREE}: {DISAGREE_WORDS} (the judge {rd.get('judge'):.2f}, the meaning "
                       f"{rd.get('meaning'):.2f} points)")
        if self.needs_expert(answer_id):
            out.append(f"{NEEDS_EXPERT}: {NEEDS_EXPERT_WORDS}")
        return "; ".join(out)

    def unreliable(self) -> list[Reliability]:
        return [r for r in self.questions.values() if not r.reliable]

    def counts(self) -> dict[str, int]:
        bad = {r.question_id for r in self.unreliable()}
        return {"questions": len(self.questions), "needs_expert_questions": len(bad),
                "needs_expert_answers": sum(self.answers.get(q, 0) for q in bad),
                "flagged": len(self.flagged), "disagree": self.disagreeing}

    def summary_words(self) -> str:
        c = self.counts()
        return (f"{c['needs_expert_questions']} of {c['questions']} questions need an expert ({NEEDS_EXPERT_WORDS}; "
                f"{c['needs_expert_answers']} answers), {c['flagged']} answers flagged by the persuasion defence"
                + (f", {c['disagree']} whose readers disagree" if self.readings else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": THRESHOLD, "counts": self.counts(),
                "questions": {q: r.to_dict() for q, r in self.questions.items()},
                "flagged": self.flagged, "readings": self.readings,
                "answers": {a: self.marks(a) for a in self.question_of if self.marks(a)}}


def trust_marks(items: Any, results: Iterable[Mapping[str, Any]], per_answer: bool = True) -> Trust:
    """The trust marks of a grading run's answers: ``items`` its item set (the human grades of the file and the
    web app are the expert grades), ``results`` its results as stored (``item_id``, ``score``, ``valid``,
    ``details``).  ``per_answer=False``: only what :meth:`Trust.counts` reads (the questions' reliabilities, the
    flagged answers, counters), no map by answer (a run's summary at a million answers, issue 59)."""
    trust = Trust()
    # each question's judge grades, noise, own spread (NaN: None) and (judge, expert) pairs, as floats
    per_q: dict[str, dict[str, array[float]]] = {}
    maxp: dict[str, float] = {}
    exam_of: dict[str, str] = {}
    for r, a, q, score in answered(items, results):
        d = r.get("details") or {}
        if not isinstance(d, Mapping):
            d = {}
        g = guard_of(d)
        if g is not None:
            trust.flagged[a.id] = {k: g.get(k) for k in ("grade_full", "p_address", "removed", "graded_whole")
                                   if k in g}
        rd = d.get("readers")
        if isinstance(rd, Mapping) and rd.get("combined") is not None:
            trust.disagreeing += bool(rd.get("disagree"))
            if per_answer:
                trust.readings[a.id] = {k: rd.get(k) for k in ("judge", "meaning", "similarity", "disagree")}
        if q.human_scale != "points":
            continue
        if per_answer:
            trust.question_of[a.id] = q.id
        trust.answers[q.id] = trust.answers.get(q.id, 0) + 1
        maxp[q.id] = float(q.max_points)
        exam_of[q.id] = str(q.exam_id or "")
        slot = per_q.setdefault(q.id, {k: array("d") for k in ("judge", "noise", "own", "expert_judge", "expert")})
        if score is None:
            continue
        score, scale = own_grade(d, score)  # reference anchors: a squeezed judge stays squeezed
        slot["judge"].append(score)
        signals = answer_noise(d, float(q.max_points))
        noise = combined_noise(signals)
        slot["noise"].append(math.nan if noise is None else noise / scale)
        slot["own"].append(signals.get("spread", math.nan))
        if a.human_score is not None:
            slot["expert_judge"].append(score)
            slot["expert"].append(float(a.human_score))
    sums = {qid: within(_pairs(slot), maxp[qid]) for qid, slot in per_q.items()}
    shares: dict[str, list[np.ndarray]] = {}  # each exam's (judge, teacher) pairs, shares of max
    for qid, slot in per_q.items():
        shares.setdefault(exam_of[qid], []).append(
            np.column_stack((np.frombuffer(slot["expert_judge"]), np.frombuffer(slot["expert"]))) / maxp[qid])
    means: dict[str, tuple[float | None, float | None]] = {}  # each exam's judge and teacher means, once an exam
    for exam, got in shares.items():
        ex = np.concatenate(got).reshape(-1, 2)
        means[exam] = (float(ex[:, 0].mean()), float(ex[:, 1].mean())) if len(ex) else (None, None)
    del shares
    totals: dict[str, tuple[float, float]] = {}  # each exam's within-question sums, once an exam (not per question)
    for qid, (sxy, sxx) in sums.items():
        t = totals.get(exam_of[qid], (0.0, 0.0))
        totals[exam_of[qid]] = (t[0] + sxy, t[1] + sxx)
    for qid, slot in per_q.items():
        total = totals[exam_of[qid]]  # the exam's other questions: its total less this question's own sums
        evidence = ExamEvidence(*means[exam_of[qid]], total[0] - sums[qid][0],
                                max(0.0, total[1] - sums[qid][1]))
        trust.questions[qid] = question_reliability(list(slot["judge"]), maxp[qid], noise=_nones(slot["noise"]),
                                                    expert=_pairs(slot), question_id=qid,
                                                    own_spread=_nones(slot["own"]), exam=evidence)
    return trust


def _pairs(slot: dict[str, array[float]]) -> list[tuple[float, float]]:
    """A question's (judge, expert) grade pairs (:func:`trust_marks`)."""
    return list(zip(slot["expert_judge"], slot["expert"], strict=True))


def _nones(values: array[float]) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values]


#: a run read without its results' details (``report`` without ``--details``) has them read again for the
#: trust marks (the judge's own spread, the defence's flags) up to this many results
DETAILS_LIMIT = 50_000


def trust_of_loaded(loaded: Any) -> Trust:
    """:func:`trust_marks` of a loaded run (:func:`knockout.reports.load_run`); a run loaded without its results'
    details has them read from its store (up to :data:`DETAILS_LIMIT` results)."""
    results = loaded.results
    has_details = any(isinstance(r.get("details"), Mapping) and set(r["details"]) - {"groups"} for r in results)
    if not has_details and 0 < len(results) <= DETAILS_LIMIT:
        import sqlite3

        from knockout.errors import KnockoutError
        from knockout.storage._store import Store

        try:
            with Store.open_existing(loaded.store_path) as store:
                results = store.results(loaded.run.id)
        except (OSError, sqlite3.Error, KnockoutError):  # not readable again: the marks from what was loaded
            results = loaded.results
    return trust_marks(loaded.items, results)


def trust_rows(trust: Trust, rows: list[dict[str, Any]], id_key: str = "answer_id") -> list[dict[str, Any]]:
    """``rows`` (one per answer) with its trust columns: ``trust`` (the marks, comma-separated, or None),
    ``trust_words``, ``grade_full`` (a flagged answer's grade before the defence), the two readers' readings
    (``grade_judge``, ``grade_meaning`` in points and ``meaning_similarity``; None unless two read it) and
    ``question_reliability``."""
    out = []
    for r in rows:
        aid = str(r.get(id_key))
        rel = trust.questions.get(trust.question_of.get(aid, ""))
        rd = trust.readings.get(aid, {})
        out.append({**r, "trust": ", ".join(trust.marks(aid)) or None, "trust_words": trust.words(aid) or None,
                    "grade_full": trust.grade_full(aid), "grade_judge": rd.get("judge"),
                    "grade_meaning": rd.get("meaning"), "meaning_similarity": rd.get("similarity"),
                    "question_reliability": None if rel is None else round(rel.estimate, 4)})
    return out


def trust_tables(section: Mapping[str, Any]) -> list[Any]:
    """The report's tables of the ``trust`` section: each question's reliability, the flagged answers."""
    from knockout.meaning._words import meaning_points
    from knockout.reports._tables import Table

    qs = sorted(section["questions"].values(), key=lambda r: (r["reliable"], r["estimate"], r["question_id"]))

    def share(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    rows = [[r["question_id"], str(r["answers"]),
             f"{r['estimate']:.2f} [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}]",
             f"{share(r['spread'])} / {share(r['noise'])} / {share(r.get('own_spread'))}",
             str(r["expert_grades"]) + ("" if r["expert_r"] is None else
                                        f": r {r['expert_r']:.2f} [{r['expert_ci'][0]:.2f}, {r['expert_ci'][1]:.2f}]"),
             NEEDS_EXPERT if not r["reliable"] else "", r["why"]] for r in qs]
    c = section["counts"]
    out = [Table(f"trust: how reliably the judge grades each question ({c['needs_expert_questions']} of "
                 f"{c['questions']} marked {NEEDS_EXPERT})",
                 ["question", "answers", "reliability [90%]", "judge spread / noise / own spread", "expert grades",
                  "mark", "why"],
                 rows,
                 "reliability: the estimated within-question correlation of the judge with the experts, from the "
                 "spread of the judge's grades over the question's answers (share of max points), the noise between "
                 "its variants (repeated draws, a jury) and the teacher grades entered (their distance from the "
                 "judge's and their order against it, pooled over the exam's questions; with 4 or more their own r "
                 "and 95% CI beside); the "
                 "judge's own spread over the grades (verdict slot) is shown, not used (docs/calibration.md); below "
                 f"{THRESHOLD:g} a question is marked {NEEDS_EXPERT}: {NEEDS_EXPERT_WORDS}")]
    if section.get("flagged"):
        frows = [[aid, "-" if f.get("grade_full") is None else f"{f['grade_full']:g}",
                  "-" if f.get("p_address") is None else f"{f['p_address']:.2f}",
                  "; ".join(str(s) for s in f.get("removed") or [])[:120]]
                 for aid, f in sorted(section["flagged"].items())]
        out.append(Table(f"flagged by the persuasion defence ({len(frows)} answers)",
                         ["answer", "would have had", "p(address)", "sentences removed"], frows,
                         "the grade shown is the defended one; an expert should check these first"))
    readings = section.get("readings") or {}
    if readings:
        n = len(readings)
        both = [(aid, r) for aid, r in sorted(readings.items()) if r.get("disagree")]
        out.append(Table(f"two readers: {n} answers graded by the judge and the meaning reader, {len(both)} where "
                         f"they disagree ({DISAGREE})", ["answer", "judge", "meaning", "similarity"],
                         [[aid, f"{r['judge']:.2f}", meaning_points(r), f"{r['similarity']:.3f}"]
                          for aid, r in both],
                         "judge and meaning in points (the meaning reader on the judge's scale over the run); where "
                         "they disagree beyond twice their measured spread the grade leans to the lower: check these"))
    return out
