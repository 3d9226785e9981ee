"""Active versus random choice of the answers experts grade: RMSE of the calibrated grades after m expert grades.

    python bench/review.py                 # SAF (6 questions x 8 answers) and the demo exam (4 x 6)
    python bench/review.py --repeats 20 --plot review.png

The judge grades are real: the default embedded judge's per-answer grades committed in
``bench/baselines/accuracy.json`` (suites ``saf-ind`` and ``demo-ind``: individual grading with the reference;
``saf-ko-d`` and ``demo-ko-d``: debiased knockout, used as the second member of a two-method "jury" whose
disagreement is one signal of the queue).  The expert grades are the data's human grades (SAF from
``../shared/data/saf``, the demo exam bundled with knockout; the mean where two graders graded).  They are
revealed one at a time, in the order each strategy picks:

* ``random``: a random order (``--repeats`` seeds; the mean curve, and the 10th-90th percentile band);
* ``per question``: round robin over the questions, a random answer of each (the issue's "2 expert grades per
  question" design);
* ``active``: the review queue (:func:`knockout.calibration._review.rank`: calibrated grade's uncertainty,
  the two methods' disagreement, closeness to a grade boundary, questions with few expert grades) recomputed
  after every grade.

After m grades the calibration (:func:`knockout.calibration.calibrate`: the model adapted to the teacher's
grades; the raw grades while there are too few) gives every answer an adapted grade.  Two
RMSEs (points) against the expert grades: ``held-out``, over the answers not yet graded by an expert (the
calibrated grades themselves), and ``final``, over every answer with the expert's grade where there is one
(what the teacher ends up with).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from knockout.calibration import Graded, calibrate, first_per_question  # noqa: E402
from knockout.calibration._fit import enough  # noqa: E402
from knockout.calibration._review import rank  # noqa: E402
from knockout.data import load_items  # noqa: E402
from knockout.errors import ConfigError  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
BASELINE = ROOT / "bench" / "baselines" / "accuracy.json"
SETS = {
    "SAF": (SHARED / "saf/unseen_answers/english", "saf", 6, 8, "saf-ind", "saf-ko-d"),
    "demo": (ROOT / "src" / "knockout" / "examples" / "demo_exam.jsonl", None, None, None, "demo-ind", "demo-ko-d"),
}


def load_set(name: str) -> tuple[list[Graded], dict[str, float]]:
    """The answers (judge grade, expert grade) and the two methods' disagreement (share of max)."""
    path, loader, limit, answers, ind, kod = SETS[name]
    items = load_items(path, loader) if loader else load_items(path)
    if limit or answers:
        items = items.subset(limit=limit, answers_per_question=answers)
    suites = json.loads(BASELINE.read_text())["suites"]
    judge, second = suites[ind]["items"], suites[kod]["items"]
    rows, jury = [], {}
    for a in items:
        q = items.question_of(a)
        if a.human_score is None or a.id not in judge:
            continue
        rows.append(Graded(a.id, q.id, float(q.max_points), judge[a.id], a.human_score, q.exam_id or ""))
        if judge[a.id] is not None and second.get(a.id) is not None:
            jury[a.id] = abs(judge[a.id] - second[a.id]) / q.max_points
    return rows, jury


def grades_after(rows: list[Graded], revealed: set[str], seed: int, refits: int) -> tuple[dict[str, float], Any]:
    """Every answer's calibrated grade when experts graded ``revealed`` (raw grades while too few)."""
    shown = [r if r.id in revealed else Graded(r.id, r.question_id, r.max_points, r.judge, None, r.exam)
             for r in rows]
    if enough([r for r in shown if r.expert is not None]) is not None:
        return {r.id: r.judge for r in rows if r.judge is not None}, None
    cal = calibrate(shown, seed=seed, resamples=0, refits=refits, heldout=False)
    return cal.grades, cal


def rmses(rows: list[Graded], revealed: set[str], grades: dict[str, float]) -> tuple[float, float]:
    held, final = [], []
    for r in rows:
        g = grades.get(r.id)
        assert r.expert is not None
        if r.id in revealed:
            final.append(0.0)
            continue
        if g is None:  # an invalid judge grade: the scale's middle
            g = r.max_points / 2
        held.append((g - r.expert) ** 2)
        final.append((g - r.expert) ** 2)
    return (float(np.sqrt(np.mean(held))) if held else float("nan"), float(np.sqrt(np.mean(final))))


def order_random(rows: list[Graded], seed: int) -> list[str]:
    return [rows[i].id for i in np.random.default_rng(seed).permutation(len(rows))]


def order_per_question(rows: list[Graded], seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    by_q: dict[str, list[str]] = {}
    for r in rows:
        by_q.setdefault(r.question_id, []).append(r.id)
    queues = {q: list(rng.permutation(ids)) for q, ids in by_q.items()}
    qs = list(rng.permutation(sorted(queues)))
    out: list[str] = []
    while any(queues.values()):
        for q in qs:
            if queues[q]:
                out.append(str(queues[q].pop()))
    return out


def curve_fixed(rows: list[Graded], order: list[str], steps: list[int], seed: int) -> np.ndarray:
    out = []
    for m in steps:
        revealed = set(order[:m])
        out.append(rmses(rows, revealed, grades_after(rows, revealed, seed, 0)[0]))
    return np.array(out)


def curve_active(rows: list[Graded], jury: dict[str, float], steps: list[int], seed: int,
                 refits: int) -> np.ndarray:
    revealed: set[str] = set()
    rng = np.random.default_rng(seed)
    out = []
    for m in range(max(steps) + 1):
        grades, cal = grades_after(rows, revealed, seed, refits)
        if m in steps:
            out.append(rmses(rows, revealed, grades))
        shown = [r if r.id in revealed else Graded(r.id, r.question_id, r.max_points, r.judge, None, r.exam)
                 for r in rows]
        queue = rank(shown, {"jury": jury}, cal)
        if not queue:  # only answers without a valid judge grade are left: at random
            rest = [r.id for r in rows if r.id not in revealed]
            if not rest:
                break
            revealed.add(str(rng.choice(rest)))
            continue
        top = queue[0]["priority"]
        ties = [q["answer_id"] for q in queue if q["priority"] >= top - 1e-9]
        revealed.add(str(rng.choice(ties)))
    return np.array(out)


def run_set(name: str, repeats: int, refits: int) -> dict[str, Any]:
    rows, jury = load_set(name)
    n = len(rows)
    steps = sorted({0, 6, 8, 10, 12, 16, 20, 24, 32, 40, n // 4, n // 2, (3 * n) // 4})
    steps = [s for s in steps if s < n]
    curves: dict[str, list[np.ndarray]] = {"random": [], "per question": [], "active": []}
    for k in range(repeats):
        curves["random"].append(curve_fixed(rows, order_random(rows, k), steps, k))
        curves["per question"].append(curve_fixed(rows, order_per_question(rows, k), steps, k))
        curves["active"].append(curve_active(rows, jury, steps, k, refits))
    return {"set": name, "answers": n, "questions": len({r.question_id for r in rows}),
            "max_points": sorted({r.max_points for r in rows}), "steps": steps,
            "curves": {s: np.array(c) for s, c in curves.items()}}


def summary(res: dict[str, Any], column: int) -> list[list[str]]:
    rows = []
    for i, m in enumerate(res["steps"]):
        row = [str(m)]
        for s in ("random", "per question", "active"):
            c = res["curves"][s][:, i, column]
            lo, hi = np.nanpercentile(c, [10, 90])
            row.append(f"{np.nanmean(c):.3f} [{lo:.2f}, {hi:.2f}]")
        d = res["curves"]["active"][:, i, column].mean() - res["curves"]["random"][:, i, column].mean()
        row.append(f"{d:+.3f}")
        rows.append(row)
    return rows


def fixed_design(name: str, repeats: int) -> list[list[str]]:
    """The issue's design: k teacher grades per question (drawn at random, ``repeats`` draws), the model adapted to
    them, RMSE / Pearson on the other answers (the holdout) before and after, and how far the grades moved."""
    rows, _ = load_set(name)
    out = []
    for k in (1, 2, 3, 4):
        raw, cal, pr, pc, moved = [], [], [], [], []
        for seed in range(repeats):
            fit = first_per_question(rows, k, seed)
            try:
                c = calibrate(rows, fit_ids=fit, seed=seed, resamples=0, refits=0)
            except ConfigError:
                continue
            f = c.figures
            raw.append(f["rmse_raw"])
            cal.append(f["rmse_calibrated"])
            pr.append(np.nan if f["pearson_raw"] is None else f["pearson_raw"])
            pc.append(np.nan if f["pearson_calibrated"] is None else f["pearson_calibrated"])
            moved.append(c.moved["max"])
        if not raw:
            out.append([str(k), "-", "refused: too few teacher grades", "-", "-", "-", "-"])
            continue
        d = np.array(cal) - np.array(raw)
        out.append([str(k), f"{len(fit)} ({100 * len(fit) / len(rows):.0f}%)", f"{np.mean(raw):.3f}",
                    f"{np.mean(cal):.3f}", f"{np.mean(d):+.3f} (better in {np.mean(d < 0):.0%})",
                    f"{np.nanmean(pr):.3f} / {np.nanmean(pc):.3f}",
                    f"{np.mean(moved):.2f} (at most {np.max(moved):.2f})"])
    return out


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |")


def verdict(res: dict[str, Any]) -> str:
    """Which strategy wins, by the mean RMSE over the steps where a calibration can be fitted (m >= 6): held-out
    (the answers not yet graded; the active strategy takes the uncertain ones out of this set) and final (every
    answer: what the teacher ends up with, the fair comparison)."""
    idx = [i for i, m in enumerate(res["steps"]) if m >= 6]
    lines = []
    for col, what in ((1, "final"), (0, "held-out")):
        means = {s: float(np.nanmean(res["curves"][s][:, idx, col])) for s in res["curves"]}
        best = min(means, key=lambda s: means[s])
        d = means["active"] - means["random"]
        early = [i for i in idx if res["steps"][i] <= 12]
        de = float(np.nanmean(res["curves"]["active"][:, early, col]) - np.nanmean(res["curves"]["random"][:, early,
                                                                                                         col]))
        lines.append(f"{res['set']}, {what} RMSE, mean over m in {[res['steps'][i] for i in idx]}: "
                     + ", ".join(f"{s} {v:.3f}" for s, v in means.items())
                     + f"; best: {best}; active - random = {d:+.3f} points ({100 * d / means['random']:+.1f}%); "
                     f"for m <= 12: {de:+.3f}")
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.2), squeeze=False)
    for ax, res in zip(axes[0], results, strict=True):
        for s, colour in (("random", "grey"), ("per question", "tab:blue"), ("active", "tab:red")):
            c = res["curves"][s][:, :, 0]
            ax.plot(res["steps"], np.nanmean(c, axis=0), marker="o", color=colour, label=s)
            ax.fill_between(res["steps"], *np.nanpercentile(c, [10, 90], axis=0), color=colour, alpha=0.15)
        ax.set_title(f"{res['set']} ({res['answers']} answers, max {res['max_points'][-1]:g} points)")
        ax.set_xlabel("expert grades revealed (m)")
        ax.set_ylabel("RMSE of calibrated grades, not yet graded (points)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", choices=list(SETS), help="SAF and/or demo (default: both)")
    ap.add_argument("--repeats", type=int, default=10, help="seeds per strategy (draws of the fixed design)")
    ap.add_argument("--fixed-only", action="store_true", help="only the k-per-question table")
    ap.add_argument("--refits", type=int, default=20, help="bootstrap refits for the calibrated grades' spread")
    ap.add_argument("--plot", type=Path, default=Path("review.png"), help="the plot (PNG)")
    args = ap.parse_args()
    names = args.set or list(SETS)
    if "SAF" in names and not SETS["SAF"][0].exists():
        print(f"SAF not found at {SETS['SAF'][0]}: skipped")
        names.remove("SAF")
    for name in names:
        print_table(f"{name}: k expert grades per question, the other answers held out ({args.repeats} draws; "
                    "RMSE in points)", ["k", "fit on", "RMSE raw", "RMSE adapted", "adapted - raw",
                                        "Pearson raw / adapted", "largest move (points, mean over draws)"],
                    fixed_design(name, args.repeats))
    results = []
    for name in names if not args.fixed_only else []:
        t = time.perf_counter()
        res = run_set(name, args.repeats, args.refits)
        results.append(res)
        header = ["m", "random [10-90%]", "per question [10-90%]", "active [10-90%]", "active - random"]
        for col, what in ((0, "held-out RMSE (answers not yet graded, calibrated grades)"),
                          (1, "final RMSE (every answer; the expert's grade where graded)")):
            print_table(f"{name}: {what}, points; {res['answers']} answers, {res['questions']} questions, "
                        f"{args.repeats} seeds ({time.perf_counter() - t:.0f} s)", header, summary(res, col))
    print()
    for res in results:
        print(verdict(res))
    if results:
        plot(results, args.plot)
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
