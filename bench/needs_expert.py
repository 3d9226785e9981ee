"""How well ``needs expert`` finds the questions the grade model grades badly, with 2 teacher grades per question.

    python bench/needs_expert.py [--draws 20]

On mohler-dev (its 12 assignments as exams), each answer's grade is the shipped grade model's question-grouped
cross-validated grade (``bench/grade_model/cv_grades.json``, read at run time); a question is truly badly graded when
that grade's within-question Pearson with the human grade over all its answers is below the mark's threshold.  Each
draw gives every question 2 teacher grades (the human grades of 2 answers drawn at random) and marks the questions
whose reliability (:func:`knockout.calibration._trust.question_reliability`) falls below the threshold, pooled over
the exam's questions as ``trust_marks`` does and, for comparison, each question alone.  No judge call.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from knockout.calibration._trust import THRESHOLD, ExamEvidence, question_reliability, within  # noqa: E402
from knockout.data import load_items  # noqa: E402

MOHLER = ROOT.parent / "shared" / "data" / "mohler-dev" / "mohler_dev.csv"
CV_GRADES = ROOT / "bench" / "grade_model" / "cv_grades.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=20)
    args = ap.parse_args()
    items = load_items(MOHLER)
    cv = json.loads(CV_GRADES.read_text())["grades"]
    by_q: dict[str, list[tuple[float, float]]] = {}
    maxp: dict[str, float] = {}
    for a in items:
        share = cv.get(f"mohler/{a.id}")
        if share is None or a.human_score is None:
            continue
        question = items.question_of(a)
        maxp[question.id] = float(question.max_points)
        by_q.setdefault(question.id, []).append((float(share) * maxp[question.id], float(a.human_score)))
    truth = {}
    for q, rs in by_q.items():
        j, h = np.array(rs).T
        truth[q] = float(np.corrcoef(j, h)[0, 1]) if np.std(j) > 0 and np.std(h) > 0 else 0.0
    exam_of = {q: q.split(".")[0] for q in by_q}
    counts = {way: {"marked": 0, "marked_low": 0, "unmarked": 0, "unmarked_low": 0} for way in ("pooled", "alone")}
    for d in range(args.draws):
        rng = np.random.default_rng(d)
        pairs = {q: [rs[i] for i in rng.choice(len(rs), 2, replace=False)] for q, rs in by_q.items()}
        sums = {q: within(p, maxp[q]) for q, p in pairs.items()}
        for q, rs in by_q.items():
            same = [o for o in by_q if exam_of[o] == exam_of[q]]
            shares = np.array([(j / maxp[o], h / maxp[o]) for o in same for j, h in pairs[o]])
            pooled = ExamEvidence(float(shares[:, 0].mean()), float(shares[:, 1].mean()),
                                  float(sum(sums[o][0] for o in same if o != q)),
                                  float(sum(sums[o][1] for o in same if o != q)))
            for way, exam in (("pooled", pooled), ("alone", None)):
                r = question_reliability([j for j, _ in rs], maxp[q], expert=pairs[q], exam=exam)
                c, low = counts[way], truth[q] < THRESHOLD
                key = "marked" if r.estimate < THRESHOLD else "unmarked"
                c[key] += 1
                c[key + "_low"] += low
    print(f"mohler-dev: {len(by_q)} questions, {sum(v < THRESHOLD for v in truth.values())} with the grade model's "
          f"within-question Pearson below {THRESHOLD} (all answers); {args.draws} draws of 2 teacher grades per "
          "question")
    for way, c in counts.items():
        print(f"  {way}: marked {c['marked']} ({c['marked_low'] / max(1, c['marked']):.0%} truly below), unmarked "
              f"{c['unmarked']} ({c['unmarked_low'] / max(1, c['unmarked']):.0%} truly below)")


if __name__ == "__main__":
    main()
