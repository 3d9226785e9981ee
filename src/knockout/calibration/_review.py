"""The review queue: the answers without an expert grade, ranked by how much an expert grade would help.

Each signal is a number in 0..1 per answer (share of max points where it is a grade difference); the
priority is their weighted sum (:data:`WEIGHTS`).  A signal the run does not have (no jury, no matches, no
repeated samples, too few expert grades for a calibration) is 0 for every answer and so leaves the order to
the others.

* ``uncertainty``: the adapted grade's standard deviation over bootstrap refits of the adaptation to the
  teacher's grades (:func:`knockout.calibration.calibrate`), as a share of max points;
* ``jury``: a jury's spread (highest minus lowest member grade, share of max points);
* ``flips``: the share of the answer's debiased-knockout matches whose winner changes with the order shown;
* ``samples``: the standard deviation of the grades of repeated draws (a result's ``details["draws"]`` as
  ``grade --samples K`` writes them, or ``details["samples"]``; invalid draws left out), share of max points;
* ``spread``: the standard deviation of the judge's own distribution over the grades, where its grade is the
  expected grade of its token probabilities (``--verdict expected``: the verdict slot kept with each reply),
  share of max points;
* ``boundary``: closeness of the (adapted, else the model's) grade to a grade boundary: 1 half-way between two
  grades of the experts' grid (where rounding flips), 0 on a grade;
* ``coverage``: ``1 / (1 + n)``, ``n`` the question's expert grades: a question no expert graded yet has the
  most to gain (its own level is shrunk towards the exam's by ``n / (n + k)``: each grade moves it further).

The trust marks (:mod:`knockout.calibration._trust`) come before the priority: answers the persuasion defence
flagged first, then the answers of questions the judge cannot grade reliably (``needs expert``), then the rest;
the priority orders each group.  An entry's ``marks`` and ``trust`` say which and why.

Each answer carries its reasons in plain words (``why``: what each signal above 0 means for it, with the number
beside) and its priority spelled out as the weighted sum (``priority_words``).  Answers whose priorities tie
(to 1e-9) are listed by question, then answer id, and marked (``ties``: how many share the priority).  With too
few teacher grades to adapt to, the grades are the model's and are labelled so, never "adapted".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from knockout.calibration._fit import (
    Calibration,
    Graded,
    _grid_step,
    calibrate,
    enough,
    graded_rows,
    label_for,
)
from knockout.calibration._trust import FLAGGED, NEEDS_EXPERT, Trust, answer_noise, trust_of_loaded

SIGNALS = ("uncertainty", "jury", "flips", "samples", "spread", "boundary", "coverage")
#: the weight of each signal in the priority (every signal is on 0..1)
WEIGHTS: dict[str, float] = {"uncertainty": 2.0, "jury": 1.0, "flips": 1.0, "samples": 1.0, "spread": 1.0,
                             "boundary": 0.5, "coverage": 1.0}


def boundary_closeness(grade: float, step: float) -> float:
    """1 half-way between two grades of the grid ``step``, 0 on one."""
    frac = (grade / step) % 1.0
    return float(1.0 - 2.0 * abs(frac - 0.5))


def reasons(s: Mapping[str, float], *, grade: float, max_points: float, step: float, graded: int,
            answers: int) -> list[str]:
    """Each signal above 0 in plain words, its number beside it."""
    out = []
    for k, v in s.items():
        if v <= 0:
            continue
        if k == "uncertainty":
            out.append(f"the adapted grade is uncertain: ± {v * max_points:.2f} points over refits of the "
                       f"adaptation (uncertainty {v:.2f} of max points)")
        elif k == "jury":
            out.append(f"the jury's members disagree by {v * max_points:.2f} points (jury {v:.2f} of max points)")
        elif k == "flips":
            out.append(f"the winner of {v:.0%} of its knockout matches changes with the order shown (flips {v:.2f})")
        elif k == "samples":
            out.append(f"the judge's repeated draws vary: sd {v * max_points:.2f} points (samples {v:.2f} of max "
                       "points)")
        elif k == "spread":
            out.append(f"the judge is unsure between grades: its probabilities spread sd {v * max_points:.2f} points "
                       f"(spread {v:.2f} of max points)")
        elif k == "boundary":
            out.append(f"near a grade boundary: {grade:.2f} points on the experts' grid of {step:g}, where rounding "
                       f"flips (boundary {v:.2f}: 1.00 = half-way between two grades, 0 = on one)")
        elif k == "coverage":
            out.append(f"few expert grades on this question: {graded} of its {answers} answers (coverage {v:.2f} = "
                       f"1 / (1 + {graded}))")
        else:
            out.append(f"{k} {v:.2f}")
    return out


def mark_ties(queue: list[dict[str, Any]]) -> None:
    """Each entry's ``ties``: how many entries of ``queue`` share its priority (1: none)."""
    counts: dict[float, int] = {}
    for q in queue:
        counts[round(float(q["priority"]), 9)] = counts.get(round(float(q["priority"]), 9), 0) + 1
    for q in queue:
        q["ties"] = counts[round(float(q["priority"]), 9)]


def rank(rows: Sequence[Graded], signals: Mapping[str, Mapping[str, float]], calibration: Calibration | None,
         weights: Mapping[str, float] | None = None, trust: Trust | None = None) -> list[dict[str, Any]]:
    """The answers of ``rows`` without an expert grade (and with a valid judge grade): ``flagged`` answers first,
    then those whose question ``needs expert`` (``trust``), each group by priority, highest first.

    ``signals``: signal name -> answer id -> value in 0..1 (``jury``, ``flips``, ``samples``); ``uncertainty``,
    ``boundary`` and ``coverage`` come from ``calibration`` and ``rows``."""
    w = {**WEIGHTS, **(weights or {})}
    experts = np.array([r.expert for r in rows if r.expert is not None], dtype=float)
    step = _grid_step(experts) if len(experts) else None
    if step is None:
        step = 1.0
    per_q: dict[str, int] = {}
    total_q: dict[str, int] = {}
    for r in rows:
        total_q[r.question_id] = total_q.get(r.question_id, 0) + 1
        if r.expert is not None:
            per_q[r.question_id] = per_q.get(r.question_id, 0) + 1
    out: list[dict[str, Any]] = []
    for r in rows:
        if r.expert is not None or r.judge is None:
            continue
        grade = calibration.grades.get(r.id, r.judge) if calibration else r.judge
        s = {
            "uncertainty": (calibration.sd.get(r.id, 0.0) / r.max_points) if calibration else 0.0,
            "jury": float(signals.get("jury", {}).get(r.id, 0.0)),
            "flips": float(signals.get("flips", {}).get(r.id, 0.0)),
            "samples": float(signals.get("samples", {}).get(r.id, 0.0)),
            "spread": float(signals.get("spread", {}).get(r.id, 0.0)),
            "boundary": boundary_closeness(grade, step),
            "coverage": 1.0 / (1 + per_q.get(r.question_id, 0)),
        }
        priority = float(sum(w[k] * v for k, v in s.items()))
        terms = [f"{w[k]:g} x {v:.2f} ({k})" for k, v in s.items() if v > 0 and w[k]]
        marks = trust.marks(r.id) if trust is not None else []
        out.append({"answer_id": r.id, "question_id": r.question_id, "judge": r.judge, "max_points": r.max_points,
                    "marks": marks, "trust": trust.words(r.id) if trust is not None else "",
                    "calibrated": calibration.grades.get(r.id) if calibration else None,
                    "calibrated_sd": calibration.sd.get(r.id) if calibration else None,
                    "priority": priority, "signals": s,
                    "priority_words": f"{priority:.2f} = " + (" + ".join(terms) if terms else "0: no signal"),
                    "why": reasons(s, grade=grade, max_points=r.max_points, step=step,
                                   graded=per_q.get(r.question_id, 0), answers=total_q[r.question_id]),
                    "question_expert_grades": per_q.get(r.question_id, 0),
                    "question_answers": total_q[r.question_id]})
    out.sort(key=lambda x: (FLAGGED not in x["marks"], NEEDS_EXPERT not in x["marks"],
                            -round(float(x["priority"]), 9), str(x["question_id"]), str(x["answer_id"])))
    mark_ties(out)
    return out


def calibration_words(cal: Calibration | None, rows: Sequence[Graded]) -> dict[str, Any]:
    """What the queue's grades are: adapted to the teacher's (how, its label) or the model's, and why not."""
    if cal is None:
        why = enough(rows) or "not calibrated"
        return {"calibrated": False, "map": None, "label": f"the model's grade (not adapted: {why})",
                "why_not": why}
    return {"calibrated": True, "map": cal.map, "expert_grades": cal.expert_grades,
            "label": label_for(cal.expert_grades)}


def grade_words(q: Mapping[str, Any], cal: Mapping[str, Any]) -> str:
    """The queue entry's adapted grade in words: the grade ± its spread and what they mean, or why none."""
    if q["calibrated"] is None:
        return f"- ({cal['label']})"
    sd = float(q["calibrated_sd"] or 0.0)
    return (f"{q['calibrated']:.2f} ± {sd:.2f}" +
            (" (every refit of the adaptation gives this grade)" if sd < 0.005 else
             " (sd over refits of the adaptation)"))


def run_signals(loaded: Any) -> dict[str, dict[str, float]]:
    """The signals a stored run already has: jury spread, debiased-knockout order flips, repeated samples."""
    maxp = {}
    for a in loaded.items:
        try:
            maxp[a.id] = float(loaded.items.question_of(a).max_points)
        except KeyError:
            continue
    found: dict[str, dict[str, float]] = {"jury": {}, "samples": {}, "spread": {}}
    for r in loaded.results:
        # the judge's own distribution (verdict slot), a jury's range, repeated draws (``--samples K``)
        mx = maxp.get(r["item_id"], 1.0)
        for k, v in answer_noise(r.get("details") or {}, mx).items():
            found[k][r["item_id"]] = min(1.0, v / mx)
    played: dict[str, int] = {}
    flipped: dict[str, int] = {}
    for m in loaded.matches:
        winners: set[str | None] = set()
        for g in m.games:
            sc = g.get("scores")
            if not sc or sc[0] == sc[1]:
                winners.add(None)
                continue
            first_wins = float(sc[0]) > float(sc[1])
            winners.add(g.get("first") if first_wins else g.get("second"))
        if len(m.games) < 2:
            continue
        for aid in (m.a, m.b):
            played[aid] = played.get(aid, 0) + 1
            flipped[aid] = flipped.get(aid, 0) + (len(winners) > 1)
    flips = {aid: flipped[aid] / n for aid, n in played.items() if n}
    return {"jury": found["jury"], "flips": flips, "samples": found["samples"], "spread": found["spread"]}


def review_loaded(loaded: Any, *, seed: int = 0, weights: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The review queue of a loaded grading run, and the calibration it used (None: too few expert grades)."""
    rows = graded_rows(loaded.items, loaded.results)
    cal = calibrate(rows, seed=seed, resamples=0, refits=50, heldout=False) if enough(rows) is None else None
    words = calibration_words(cal, rows)
    trust = trust_of_loaded(loaded)
    queue = rank(rows, run_signals(loaded), cal, weights, trust)
    for q in queue:
        q["calibrated_words"] = grade_words(q, words)
    return {"queue": queue, "trust": trust.counts(), "trust_words": trust.summary_words(),
            "needs_expert": {r.question_id: r.words() for r in trust.unreliable()},
            "flagged": {aid: trust.grade_full(aid) for aid in trust.flagged},
            "calibration": None if cal is None else {"map": cal.map, "expert_grades": cal.expert_grades,
                                                     "label": cal.label},
            "grades": words,
            "expert_grades": sum(r.expert is not None for r in rows), "weights": {**WEIGHTS, **(weights or {})}}


def tie_note(queue: Sequence[Mapping[str, Any]]) -> str:
    """What the ties of the listed entries are, in words ("" when none tie)."""
    if len(queue) > 1 and all(q.get("ties", 1) >= len(queue) for q in queue) and \
            len({round(float(q["priority"]), 9) for q in queue}) == 1:
        return (f"every answer listed ties at priority {float(queue[0]['priority']):.2f}: no signal tells them "
                "apart, so they are listed by question, then answer id")
    if any(q.get("ties", 1) > 1 for q in queue):
        return "answers marked \"tie\" share their priority with others: listed by question, then answer id"
    return ""


def queue_tables(queue: dict[str, Any], n: int) -> list[Any]:
    from knockout.reports._tables import Table, points

    words = queue["grades"]
    shown = queue["queue"][:n]
    rows = [[str(i + 1), q["answer_id"], q["question_id"], f"{points(q['judge'])} / {points(q['max_points'])}",
             q.get("calibrated_words") or grade_words(q, words),
             q["priority_words"] + (f" (tie: {q['ties']} answers)" if q.get("ties", 1) > 1 else ""),
             "; ".join(q["why"]) or "no signal", q.get("trust") or ""]
            for i, q in enumerate(shown)]
    note = ("grades: " + words["label"] +
            "; priority: how much an expert grade would help, the weighted sum of the signals (each 0..1; "
            "weights " + ", ".join(f"{k} x{v:g}" for k, v in queue["weights"].items()) +
            "), highest first; flagged answers first, then those of questions that need an expert" +
            (f" ({queue['trust_words']})" if queue.get("trust_words") else ""))
    ties = tie_note(shown)
    return [Table(f"grade these next ({len(queue['queue'])} answers without an expert grade)",
                  ["#", "answer", "question", "judge (points)", "adapted ± sd (points)", "priority",
                   "why", "trust"], rows, note + (f"; {ties}" if ties else ""))]


def exam_queue(store: Any, answer_ids: set[str], n: int = 5, seed: int = 0) -> dict[str, Any] | None:
    """The web app's "grade these next": the review queue of the latest complete grading run in ``store`` that
    graded answers of an exam (``answer_ids``), restricted to them; when no complete run did but one that is
    not complete (interrupted, failed, running) was made for them, ``{"queue": [], "unfinished": {...}}`` with
    that run's id, status, results and the command that resumes it; None when no run graded them."""
    from knockout.reports._runs import read_run, resume_hint
    from knockout.runs import kind_of

    unfinished: dict[str, Any] | None = None
    for record in reversed(store.runs()):
        kind = kind_of(kind_of(record.kind).reads_as(record))
        if not kind.grades_answers:
            continue
        if record.status != "complete":
            if unfinished is None:
                items = store.items_for_run(record.id)
                mine = [a.id for a in items if a.id in answer_ids] if items is not None else []
                if mine:
                    done = sum(r["item_id"] in answer_ids for r in store.results(record.id, details=False))
                    unfinished = {"run_id": record.id, "status": record.status, "judge": record.judge,
                                  "results": done, "answers": len(mine), "simulated": record.simulated,
                                  "resume": resume_hint(record) if record.status != "running" else None}
            continue
        results = store.results(record.id, details=False)
        if not any(r["item_id"] in answer_ids for r in results):
            continue
        loaded = read_run(store, record, details=True, web_grades=True)
        queue = review_loaded(loaded, seed=seed)
        mine = [q for q in queue["queue"] if q["answer_id"] in answer_ids]
        # the trust marks of the exam's own answers and questions (the web app's "grade these by hand")
        questions = {str(r["question_id"]) for r in results if r["item_id"] in answer_ids}
        queue["needs_expert"] = {k: v for k, v in queue["needs_expert"].items() if k in questions}
        queue["flagged"] = {k: v for k, v in queue["flagged"].items() if k in answer_ids}
        mark_ties(mine)
        queue["queue"] = mine[:n]
        queue["ties"] = tie_note(queue["queue"])
        queue["run_id"] = record.id
        queue["judge"] = record.judge
        queue["simulated"] = record.simulated
        return queue
    if unfinished is not None:
        return {"queue": [], "unfinished": unfinished}
    return None
