"""Calibration with K expert grades per question, over draws: raw against calibrated RMSE on the other answers.

    python bench/calibration_draws.py --synthetic                 # the issue-41 situation, simulated (no judge)
    python bench/calibration_draws.py --synthetic --questions 63 --answers 28
    python bench/calibration_draws.py --store acc.db:RUN_ID       # a stored grading run (its human grades)
    python bench/calibration_draws.py --store acc.db:RUN_ID --per-question 2 --draws 10 --maps raw,linear
    python bench/calibration_draws.py --store mohler.db:RUN_ID --slices 6 --slice-answers 8   # exams like issue 41's

Each draw takes K expert-graded answers per question at random (``first_per_question``, seeded by the draw),
lets ``knockout calibrate`` choose and fit a map on them (cross-validation, one-standard-error rule) and
computes the RMSE (points) of the judge's grades and of the calibrated grades on the other expert-graded
answers, as ``knockout calibrate --per-question K --seed DRAW`` does.  Printed: one row per draw (the map
chosen, RMSE raw and calibrated, the difference) and the mean; then the issue's criterion: no draw more than
0.05 points above raw, and the mean at least 10% below raw.  Then the precision of the ``needs expert`` mark
(:func:`knockout.calibration.question_reliability`) with no expert grade and with K per question: how many
marked questions really had a within-question Pearson below 0.3 with every human grade, and how many unmarked
ones had.

``--slices K --slice-answers A`` cuts a stored run into exams the size of issue 41's held-out slices: consecutive
groups of K questions (in the data's order), the first A answers of each, each exam calibrated and marked on its
own; a last table gives every exam's raw Pearson and RMSE against the constant at its humans' mean, and the
calibration criterion per exam.

``--synthetic`` simulates what issue 41 measured on held-out short answers (0-5 points) with the default
judge's expected grades: the judge's grades are squeezed (within-question SD 0.08-0.26 points where the
humans' is 1.1-1.2, every answer about 3.3), its order inside a question partly right (within-question
Pearson 0.8, 0.7, 0.45, -0.25, ...) and its level per question off by up to 0.9 points, so that across the
exam its grades are noise.  It is a simulation, not a judge: it checks the procedure, not a model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from knockout.calibration import Graded, calibrate, first_per_question  # noqa: E402

#: within-question Pearson of the simulated judge, question by question (cycled)
WITHIN = (0.8, 0.7, 0.45, -0.25, 0.6, 0.75, 0.3, 0.55)


def squeezed_exam(questions: int = 6, answers: int = 8, seed: int = 0, max_points: float = 5.0) -> list[Graded]:
    """A simulated exam in the issue-41 situation (a SIMULATION, not a judge's grades): human grades 0..5 in
    halves with a per-question level and SD about 1.15; the judge's grade about 3.3 with a per-question offset
    (up to 0.9 points), squeezed (within-question SD 0.08-0.26 points) and correlated inside the question at
    :data:`WITHIN`."""
    rng = np.random.default_rng(seed)
    rows = []
    for qi in range(questions):
        level = float(rng.uniform(1.5, 3.2))  # the humans' mean on this question
        r = WITHIN[qi % len(WITHIN)]
        judge_sd = float(rng.uniform(0.08, 0.26))
        offset = float(rng.uniform(-0.9, 0.9))
        z = rng.normal(size=answers)
        noise = rng.normal(size=answers)
        human = np.clip(np.round((level + 1.15 * z) * 2) / 2, 0, max_points)
        judge = 3.3 + offset + judge_sd * (r * z + np.sqrt(1 - r * r) * noise)
        for ai in range(answers):
            rows.append(Graded(f"q{qi}/a{ai}", f"q{qi}", max_points, float(np.clip(judge[ai], 0, max_points)),
                               float(human[ai])))
    return rows


def stored_rows(ref: str) -> tuple[list[Graded], dict[str, float | None], dict[str, float]]:
    """A stored run's answers as calibration sees them, each answer's noise (points: repeated draws, a jury's
    half range; None without one) and the judge's own grade where it differs from the answer's (a grade read on
    reference anchors: the reliability is the judge's own, as ``trust_marks`` reads it)."""
    from knockout.calibration import graded_rows
    from knockout.calibration._trust import answer_noise, combined_noise, own_grade
    from knockout.reports._runs import parse_ref, pick_run, read_run
    from knockout.storage import Store

    path, run_id = parse_ref(ref)
    with Store.open_existing(path) as store:
        loaded = read_run(store, pick_run(store, run_id, "grades"), details=True, web_grades=True)
    rows = graded_rows(loaded.items, loaded.results)
    mx = {r.id: r.max_points for r in rows}
    noise: dict[str, float | None] = {}
    own: dict[str, float] = {}
    for r in loaded.results:
        d, i = r.get("details") or {}, str(r["item_id"])
        u = combined_noise(answer_noise(d, mx.get(i, 1.0)))
        grade, scale = own_grade(d, 0.0 if r.get("score") is None else float(r["score"]))
        if scale != 1.0:
            own[i] = grade
        noise[i] = None if u is None else u / scale
    return rows, noise, own


def reliability_precision(rows: list[Graded], noise: dict[str, float | None], per_question: int, n: int,
                          own: dict[str, float] | None = None) -> dict[str, Any]:
    """How well the ``needs expert`` mark finds the questions where the judge's within-question Pearson with
    every human grade is below 0.3, with ``per_question`` expert grades entered (drawn as the calibration
    draws are; 0: none): over the draws, the marked questions that really were below 0.3 (precision) and the
    unmarked ones that were (what the mark missed); ``own``: the judge's own grades where they differ (reference
    anchors), which the mark reads."""
    from knockout.calibration._trust import THRESHOLD, question_reliability

    own = own or {}

    by_q: dict[str, list[Graded]] = {}
    for r in rows:
        if r.judge is not None and r.expert is not None:
            by_q.setdefault(r.question_id, []).append(r)
    truth = {}
    for qid, rs in by_q.items():
        j, h = np.array([r.judge for r in rs], dtype=float), np.array([r.expert for r in rs], dtype=float)
        truth[qid] = (float(np.corrcoef(j, h)[0, 1]) if len(rs) >= 3 and np.std(j) > 0 and np.std(h) > 0
                      else 0.0)
    marked = marked_low = unmarked = unmarked_low = 0
    for d in range(n if per_question else 1):
        fit = first_per_question(rows, per_question, seed=d) if per_question else set()
        for qid, rs in by_q.items():
            j = [own.get(r.id, float(r.judge or 0.0)) for r in rs]
            rel = question_reliability(j, rs[0].max_points, noise=[noise.get(r.id) for r in rs],
                                       expert=[(x, float(r.expert or 0.0)) for x, r in zip(j, rs, strict=True)
                                               if r.id in fit], question_id=qid)
            low = truth[qid] < 0.3
            if rel.estimate < THRESHOLD:
                marked, marked_low = marked + 1, marked_low + low
            else:
                unmarked, unmarked_low = unmarked + 1, unmarked_low + low
    return {"questions": len(by_q), "below_0.3": sum(v < 0.3 for v in truth.values()), "marked": marked,
            "marked_below_0.3": marked_low, "unmarked": unmarked, "unmarked_below_0.3": unmarked_low,
            "draws": n if per_question else 1}


def sliced(rows: list[Graded], questions: int, answers: int) -> list[list[Graded]]:
    """``rows`` cut into exams of ``questions`` consecutive questions with their first ``answers`` answers each (a
    last group with fewer questions is left out)."""
    by_q: dict[str, list[Graded]] = {}
    for r in rows:
        by_q.setdefault(r.question_id, []).append(r)
    qids = list(by_q)
    return [[r for q in qids[i:i + questions] for r in by_q[q][:answers]]
            for i in range(0, len(qids) - questions + 1, questions)]


def raw_figures(rows: list[Graded]) -> dict[str, float]:
    """The judge's raw Pearson (shares of max points) and RMSE (points) against the expert grades, and the RMSE of
    a constant at the experts' mean."""
    rs = [r for r in rows if r.judge is not None and r.expert is not None]
    mp = np.array([r.max_points for r in rs])
    j, h = np.array([r.judge for r in rs], dtype=float), np.array([r.expert for r in rs], dtype=float)
    return {"n": len(rs), "pearson": float(np.corrcoef(j / mp, h / mp)[0, 1]) if np.std(j) > 0 else 0.0,
            "rmse": float(np.sqrt(np.mean((j - h) ** 2))), "constant": float(np.sqrt(np.mean((h - h.mean()) ** 2)))}


def draws(rows: list[Graded], per_question: int, n: int, maps: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """One entry per draw: the map chosen, the held-out RMSE raw and calibrated (points)."""
    out = []
    for d in range(n):
        fit = first_per_question(rows, per_question, seed=d)
        kw: dict[str, Any] = {"maps": maps} if maps else {}
        cal = calibrate(rows, fit_ids=fit, seed=d, resamples=0, refits=0, **kw)
        f = cal.figures
        out.append({"draw": d, "map": cal.map + (" (constant)" if cal.constant else ""), "fit": len(fit),
                    "heldout": f["n"], "rmse_raw": f["rmse_raw"], "rmse_calibrated": f["rmse_calibrated"],
                    "cv_rmse": cal.cv_rmse})
    return out


def verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    raw = np.array([r["rmse_raw"] for r in rows])
    cal = np.array([r["rmse_calibrated"] for r in rows])
    worst = float(np.max(cal - raw))
    gain = float(1 - cal.mean() / raw.mean())
    return {"mean_raw": float(raw.mean()), "mean_calibrated": float(cal.mean()), "worst_difference": worst,
            "mean_gain": gain, "never_worse_than_raw_plus_0.05": worst <= 0.05,
            "mean_at_least_10pct_below": gain >= 0.10}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--synthetic", action="store_true", help="the simulated issue-41 exam (no judge)")
    src.add_argument("--store", help="STORE or STORE:RUN_ID: a stored grading run with human grades")
    ap.add_argument("--questions", type=int, default=6, help="--synthetic: questions")
    ap.add_argument("--answers", type=int, default=8, help="--synthetic: answers per question")
    ap.add_argument("--exams", type=int, default=3, help="--synthetic: simulated exams (seeds 0..N-1)")
    ap.add_argument("--per-question", type=int, default=2)
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--maps", help="comma-separated maps to choose from (default: every map)")
    ap.add_argument("--slices", type=int, help="--store: exams of this many consecutive questions, each on its own")
    ap.add_argument("--slice-answers", type=int, default=8, help="--slices: the first N answers of each question")
    args = ap.parse_args()
    maps = tuple(args.maps.split(",")) if args.maps else None
    sets: list[tuple[str, list[Graded], dict[str, float | None], dict[str, float]]] = (
        [(f"synthetic seed {s} ({args.questions} x {args.answers})", squeezed_exam(args.questions, args.answers, s),
          {}, {}) for s in range(args.exams)] if args.synthetic else [(args.store, *stored_rows(args.store))])
    if args.slices and not args.synthetic:
        name, rows, noise, own = sets[0]
        sets = [(f"{name} exam {i + 1} (questions {i * args.slices + 1}-{(i + 1) * args.slices}, "
                 f"{args.slice_answers} answers each)", part, noise, own)
                for i, part in enumerate(sliced(rows, args.slices, args.slice_answers))]
    ok = True
    summary = []
    for name, rows, noise, own in sets:
        got = draws(rows, args.per_question, args.draws, maps)
        summary.append((name, raw_figures(rows), verdict(got)))
        print(f"\n{name}: {args.per_question} expert grades per question, {args.draws} draws")
        print("| draw | map chosen | fit | held out | RMSE raw | RMSE calibrated | calibrated - raw |")
        print("|---|---|---|---|---|---|---|")
        for r in got:
            print(f"| {r['draw']} | {r['map']} | {r['fit']} | {r['heldout']} | {r['rmse_raw']:.3f} | "
                  f"{r['rmse_calibrated']:.3f} | {r['rmse_calibrated'] - r['rmse_raw']:+.3f} |")
        v = verdict(got)
        print(f"| mean | | | | {v['mean_raw']:.3f} | {v['mean_calibrated']:.3f} | "
              f"{v['mean_calibrated'] - v['mean_raw']:+.3f} ({-v['mean_gain']:+.1%}) |")
        print(f"worst draw {v['worst_difference']:+.3f} (criterion: <= +0.05: "
              f"{'met' if v['never_worse_than_raw_plus_0.05'] else 'NOT met'}); mean {v['mean_gain']:.1%} below raw "
              f"(criterion: >= 10%: {'met' if v['mean_at_least_10pct_below'] else 'NOT met'})")
        ok = ok and v["never_worse_than_raw_plus_0.05"] and v["mean_at_least_10pct_below"]
        print("\nthe needs-expert mark against the within-question Pearson of the judge with every human grade "
              "(below 0.3: the judge really cannot grade the question)")
        print("| expert grades per question | questions (below 0.3) | marked | of which below 0.3 (precision) | "
              "unmarked | of which below 0.3 |")
        print("|---|---|---|---|---|---|")
        for k in sorted({0, args.per_question}):
            p = reliability_precision(rows, noise, k, args.draws, own)
            prec = f"{p['marked_below_0.3'] / p['marked']:.0%}" if p["marked"] else "-"
            miss = f"{p['unmarked_below_0.3'] / p['unmarked']:.0%}" if p["unmarked"] else "-"
            print(f"| {k} ({p['draws']} draw{'s' if p['draws'] != 1 else ''}) | {p['questions']} ({p['below_0.3']}) | "
                  f"{p['marked']} | {p['marked_below_0.3']} ({prec}) | {p['unmarked']} | {p['unmarked_below_0.3']} "
                  f"({miss}) |")
    if len(sets) > 1:
        print(f"\nevery exam: the judge's raw grades, and calibration with {args.per_question} expert grades per "
              f"question ({args.draws} draws)")
        print("| exam | n | Pearson | RMSE | constant at the humans' mean | calibrated: mean vs raw | worst draw |")
        print("|---|---|---|---|---|---|---|")
        for name, f, v in summary:
            print(f"| {name} | {f['n']} | {f['pearson']:.3f} | {f['rmse']:.3f} | {f['constant']:.3f} | "
                  f"{-v['mean_gain']:+.1%} | {v['worst_difference']:+.3f} |")
        below = sum(f["rmse"] < f["constant"] for _, f, _ in summary)
        met = sum(v["never_worse_than_raw_plus_0.05"] and v["mean_at_least_10pct_below"] for _, _, v in summary)
        print(f"raw RMSE below the constant's on {below} of {len(summary)} exams; the calibration criterion met on "
              f"{met} of {len(summary)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
