"""The review queue: the answers without an expert grade, ranked by how much an expert grade would help.

Each signal is a number in 0..1 per answer (share of max points where it is a grade difference); the
priority is their weighted sum (:data:`WEIGHTS`).  A signal the run does not have (no jury, no matches, no
repeated samples, too few expert grades for a calibration) is 0 for every answer and so leaves the order to
the others.

* ``uncertainty``: the calibrated grade's standard deviation over bootstrap refits of the map
  (:func:`knockout.calibration.calibrate`), as a share of max points;
* ``jury``: a jury's spread (highest minus lowest member grade, share of max points);
* ``flips``: the share of the answer's debiased-knockout matches whose winner changes with the order shown;
* ``samples``: the standard deviation of the grades of repeated draws (a result's ``details["draws"]`` as
  ``grade --samples K`` writes them, or ``details["samples"]``; invalid draws left out), share of max points;
* ``boundary``: closeness of the (calibrated, else raw) grade to a grade boundary: 1 half-way between two
  grades of the experts' grid (where rounding flips), 0 on a grade;
* ``coverage``: ``1 / (1 + n)``, ``n`` the question's expert grades: a question no expert graded yet has the
  most to gain (a per-question offset needs :data:`~knockout.calibration._fit.MIN_PER_QUESTION` grades).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from knockout.calibration._fit import Calibration, Graded, _grid_step, calibrate, enough, graded_rows

SIGNALS = ("uncertainty", "jury", "flips", "samples", "boundary", "coverage")
#: the weight of each signal in the priority (every signal is on 0..1)
WEIGHTS: dict[str, float] = {"uncertainty": 2.0, "jury": 1.0, "flips": 1.0, "samples": 1.0, "boundary": 0.5,
                             "coverage": 1.0}


def boundary_closeness(grade: float, step: float) -> float:
    """1 half-way between two grades of the grid ``step``, 0 on one."""
    frac = (grade / step) % 1.0
    return float(1.0 - 2.0 * abs(frac - 0.5))


def rank(rows: Sequence[Graded], signals: Mapping[str, Mapping[str, float]], calibration: Calibration | None,
         weights: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """The answers of ``rows`` without an expert grade (and with a valid judge grade), highest priority first.

    ``signals``: signal name -> answer id -> value in 0..1 (``jury``, ``flips``, ``samples``); ``uncertainty``,
    ``boundary`` and ``coverage`` come from ``calibration`` and ``rows``."""
    w = {**WEIGHTS, **(weights or {})}
    experts = np.array([r.expert for r in rows if r.expert is not None], dtype=float)
    step = _grid_step(experts) if len(experts) else None
    if step is None:
        step = 1.0
    per_q: dict[str, int] = {}
    for r in rows:
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
            "boundary": boundary_closeness(grade, step),
            "coverage": 1.0 / (1 + per_q.get(r.question_id, 0)),
        }
        priority = float(sum(w[k] * v for k, v in s.items()))
        out.append({"answer_id": r.id, "question_id": r.question_id, "judge": r.judge, "max_points": r.max_points,
                    "calibrated": calibration.grades.get(r.id) if calibration else None,
                    "calibrated_sd": calibration.sd.get(r.id) if calibration else None,
                    "priority": priority, "signals": s})
    out.sort(key=lambda x: (-float(x["priority"]), str(x["question_id"]), str(x["answer_id"])))
    return out


def run_signals(loaded: Any) -> dict[str, dict[str, float]]:
    """The signals a stored run already has: jury spread, debiased-knockout order flips, repeated samples."""
    maxp = {}
    for a in loaded.items:
        try:
            maxp[a.id] = float(loaded.items.question_of(a).max_points)
        except KeyError:
            continue
    jury: dict[str, float] = {}
    samples: dict[str, float] = {}
    for r in loaded.results:
        d, mx = r.get("details") or {}, maxp.get(r["item_id"], 1.0)
        if isinstance(d.get("spread"), int | float):
            jury[r["item_id"]] = min(1.0, float(d["spread"]) / mx)
        # repeated draws of the judge (``grade --samples K`` keeps them as ``details["draws"]``)
        got = [float(x) for x in d.get("draws") or d.get("samples") or [] if isinstance(x, int | float)]
        if len(got) >= 2:
            samples[r["item_id"]] = min(1.0, float(np.std(got)) / mx)
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
    return {"jury": jury, "flips": flips, "samples": samples}


def review_loaded(loaded: Any, *, seed: int = 0, weights: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The review queue of a loaded grading run, and the calibration it used (None: too few expert grades)."""
    rows = graded_rows(loaded.items, loaded.results)
    cal = calibrate(rows, seed=seed, resamples=0, refits=50, heldout=False) if enough(rows) is None else None
    return {"queue": rank(rows, run_signals(loaded), cal, weights),
            "calibration": None if cal is None else {"map": cal.map, "expert_grades": cal.expert_grades},
            "expert_grades": sum(r.expert is not None for r in rows), "weights": {**WEIGHTS, **(weights or {})}}


def queue_tables(queue: dict[str, Any], n: int) -> list[Any]:
    from knockout.reports._tables import Table, num

    cal = queue["calibration"]
    rows = [[str(i + 1), q["answer_id"], q["question_id"], num(q["judge"]),
             "-" if q["calibrated"] is None else f"{q['calibrated']:.2f} ± {q['calibrated_sd']:.2f}",
             f"{q['priority']:.2f}", ", ".join(f"{k} {v:.2f}" for k, v in q["signals"].items() if v > 0)]
            for i, q in enumerate(queue["queue"][:n])]
    note = (f"calibrated ({cal['map']}, {cal['expert_grades']} expert grades)" if cal else
            f"not calibrated: {queue['expert_grades']} expert grades, too few") + \
        "; priority: weighted sum of the signals (" + \
        ", ".join(f"{k} x{v:g}" for k, v in queue["weights"].items()) + ")"
    return [Table(f"grade these next ({len(queue['queue'])} answers without an expert grade)",
                  ["#", "answer", "question", "judge", "calibrated ± sd", "priority", "signals"], rows, note)]


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
        queue["queue"] = [q for q in queue["queue"] if q["answer_id"] in answer_ids][:n]
        queue["run_id"] = record.id
        queue["judge"] = record.judge
        queue["simulated"] = record.simulated
        return queue
    if unfinished is not None:
        return {"queue": [], "unfinished": unfinished}
    return None
