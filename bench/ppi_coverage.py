"""Coverage and width of the prediction-powered intervals (knockout.calibration, PPI++ through ppi-python)
against the expert-only ones, with the scripted judge (a SIMULATION, not an LLM) grading with a known bias.

    python bench/ppi_coverage.py                 # 8 judge seeds x 250 expert subsets, 30% expert-graded
    python bench/ppi_coverage.py --share 0.1 --judge 'scripted?inflation=0.2&noise=0.3&seed={seed}'

Data: two exams of 40 questions (1 to 5 points) answered by two examinees, every answer expert-graded (the
truth); the judge grades every answer through an ordinary grade run; each trial keeps the expert grades of a
random share of the answers.  Printed per figure: the coverage of the 95% PPI interval and of the
expert-only one (ppi_py.classical_mean_ci) of the figure from all expert grades, their mean widths, the
mean lambda, and the judge-only figure's mean error (its bias).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_ppi import _exact, _exam_items

from knockout.sciex._ppi import difference_ppi, exam_average_ppi, examinee_ppi
from knockout.sciex._results import exams_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8, help="judge seeds")
    ap.add_argument("--draws", type=int, default=250, help="expert subsets per judge seed")
    ap.add_argument("--share", type=float, default=0.3, help="share of answers expert-graded")
    ap.add_argument("--judge", default="scripted?inflation=0.2&noise=0.15&seed={seed}")
    args = ap.parse_args()

    from knockout.judges import make_judge
    from knockout.methods._run import GradeRun, RunConfig
    from knockout.runs import execute
    from knockout.storage import Store

    items = _exam_items()
    exams = exams_of(items)
    experts_all = {a.id: a.human_score for a in items}
    truth = {"strong": _exact(items, "strong"), "weak": _exact(items, "weak")}
    truth["strong - weak"] = truth["strong"] - truth["weak"]
    truth["exam e1 average"] = 100 * sum(experts_all[a.id] or 0.0 for a in items  # type: ignore[operator]
                                         if items.question_of(a).exam_id == "e1") / (2 * exams["e1"].max_points)
    stats: dict[str, dict[str, list[float]]] = {k: {"ppi": [], "expert": [], "w": [], "ew": [], "lam": [], "bias": []}
                                                for k in truth}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            with Store(Path(tmp) / "judge.db") as store:
                report = execute(GradeRun(items, make_judge(args.judge.format(seed=seed)), RunConfig()), store)
            judge = {r.answer_id: r.score for r in report.results}
            for draw in range(args.draws):
                rng = np.random.default_rng(100_000 * seed + draw)
                experts = {k: v for k, v in experts_all.items() if rng.uniform() < args.share}
                ests = {"strong": examinee_ppi(items, exams, "strong", judge, experts),
                        "weak": examinee_ppi(items, exams, "weak", judge, experts),
                        "strong - weak": difference_ppi(items, exams, "strong", "weak", judge, experts),
                        "exam e1 average": exam_average_ppi(items, exams, "e1", ["strong", "weak"], judge, experts)}
                for k, e in ests.items():
                    if e is None:
                        continue
                    s, t = stats[k], truth[k]
                    s["ppi"].append(e["ci"][0] <= t <= e["ci"][1])
                    s["expert"].append(e["expert_only_ci"][0] <= t <= e["expert_only_ci"][1])
                    s["w"].append(e["width"])
                    s["ew"].append(e["expert_only_width"])
                    s["lam"].append(float(np.mean(e["lambda"])))
                    s["bias"].append(e["judge_only"] - t)
    print(f"judge {args.judge} · {args.seeds} seeds x {args.draws} subsets · {100 * args.share:.0f}% expert-graded"
          " · 95% nominal")
    print(f"| {'figure':<16} | {'trials':>6} | {'PPI coverage':>12} | {'expert-only coverage':>20} | "
          f"{'PPI width':>9} | {'expert-only width':>17} | {'lambda':>6} | {'judge-only error':>16} |")
    print("|" + "|".join("-" * (w + 2) for w in (16, 6, 12, 20, 9, 17, 6, 16)) + "|")
    for k, s in stats.items():
        print(f"| {k:<16} | {len(s['ppi']):>6} | {100 * np.mean(s['ppi']):>11.1f}% | "
              f"{100 * np.mean(s['expert']):>19.1f}% | {np.mean(s['w']):>9.2f} | {np.mean(s['ew']):>17.2f} | "
              f"{np.mean(s['lam']):>6.2f} | {np.mean(s['bias']):>+16.2f} |")


if __name__ == "__main__":
    main()
