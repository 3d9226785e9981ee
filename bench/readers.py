"""Two readers (issue 48): the rule that combines the judge and the meaning reader, chosen on human-graded data.

    python bench/readers.py --out accuracy.db                       # saf-ind, demo-ind, mohler-ind
    python bench/readers.py --suite mohler-ind-all --out accuracy.db

For each suite of ``bench/accuracy.py`` (the same answers, the judge's grades from the same store: a rerun makes
no judge call) the judge alone (``--readers judge``) is paired with each reading and rule, on the answers both
readers read (English, with a reference):

* ``meaning``: the meaning reader alone (question-demoted cosine, put on the judge's scale over the run);
* ``meaning (plain)``: the same without question demoting;
* ``mean``: the mean of the two readers' z-scores over the run, on the judge's scale (the issue's fixed rule);
* ``capped m``: the mean, at most the lower reader plus ``m`` times the readers' spread (:mod:`knockout.meaning`;
  the default is m = :data:`knockout.meaning.MARGIN`);
* ``lower``: the lower of the two.

Printed per suite and rule: Pearson with the humans (normalised by max points, pooled) with its 95% cluster-bootstrap
CI over questions, RMSE in points beside the constant at the humans' mean, the mean within-question Pearson, the
share of answers capped, and the paired differences against the judge alone (questions resampled).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy import RESAMPLES, SUITES, grade_suite, load_subset

from knockout.meaning import combine, read_meaning
from knockout.metrics._bootstrap import bootstrap, paired_bootstrap
from knockout.storage._store import Store

MARGINS = (0.25, 0.5, 1.0)


def rules(judge: list[float | None], sim: list[float | None], plain: list[float | None]) -> dict[str, Any]:
    """Every rule's grades (shares of max points) and its capped share."""
    out: dict[str, Any] = {"judge": (judge, 0.0)}
    for name, s in (("meaning", sim), ("meaning (plain)", plain)):
        c = combine(judge, s, margin=1e9)
        out[name] = (c.meaning_grades, 0.0)
    c = combine(judge, sim, margin=1e9)
    out["mean"] = (c.grades, 0.0)
    for m in MARGINS:
        c = combine(judge, sim, margin=m)
        read = [g for g in c.grades if g is not None]
        out[f"capped {m:g}"] = (c.grades, sum(c.capped) / max(len(read), 1))
    c = combine(judge, sim, margin=0.0)
    out["lower"] = (c.grades, 0.0)
    return out


def corr(v: np.ndarray, h: np.ndarray) -> Any:
    return lambda s: None if np.std(v[s]) == 0 or np.std(h[s]) == 0 else float(np.corrcoef(v[s], h[s])[0, 1])


def err(v: np.ndarray, h: np.ndarray, mp: np.ndarray) -> Any:
    return lambda s: float(np.sqrt(np.mean(((v[s] - h[s]) * mp[s]) ** 2)))


def figures(h: np.ndarray, x: np.ndarray, mp: np.ndarray, q: np.ndarray) -> dict[str, Any]:
    def r(s: np.ndarray) -> float | None:
        return None if np.std(x[s]) == 0 or np.std(h[s]) == 0 else float(np.corrcoef(x[s], h[s])[0, 1])

    ci = bootstrap(lambda s: np.array([r(s) if r(s) is not None else np.nan]), q, resamples=RESAMPLES)[0]
    within = [float(np.corrcoef(x[q == k], h[q == k])[0, 1]) for k in np.unique(q)
              if np.std(x[q == k]) > 0 and np.std(h[q == k]) > 0]
    return {"pearson": r(np.arange(len(x))), "ci": (ci.low, ci.high),
            "rmse": float(np.sqrt(np.mean(((x - h) * mp) ** 2))), "within": float(np.mean(within)) if within else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", action="append", default=[])
    ap.add_argument("--out", type=Path, default=Path("accuracy.db"))
    ap.add_argument("--judge", default="llamacpp")
    ap.add_argument("--slices", type=int, help="also cut each suite into exams of this many consecutive questions "
                    "(the first --slice-answers answers of each), each combined on its own as a teacher's run would")
    ap.add_argument("--slice-answers", type=int, default=8)
    args = ap.parse_args()
    names = args.suite or ["saf-ind", "demo-ind", "mohler-ind"]
    console = Console(width=200)
    with Store(args.out) as store:
        for name in names:
            s = SUITES[name]
            if not s.path.exists():
                print(f"{name}: skipped ({s.path} not found)", file=sys.stderr)
                continue
            items = load_subset(s)
            report, scores = grade_suite(s, items, store, args.judge, {"threads": "2"}, {"readers": "judge"}, {})
            answers = list(items)
            qs = [items.question_of(a) for a in answers]
            refs = [q.reference for q in qs]
            langs = [q.language for q in qs]
            sim = [r.similarity for r in read_meaning([a.text for a in answers], [q.text for q in qs], refs, langs)]
            plain = [r.similarity for r in read_meaning([a.text for a in answers], [""] * len(qs), refs, langs)]
            judge = [None if scores.get(a.id) is None else scores[a.id] / q.max_points  # type: ignore[operator]
                     for a, q in zip(answers, qs, strict=True)]
            graded = rules(judge, sim, plain)
            keep = [i for i, a in enumerate(answers) if a.human_score is not None and judge[i] is not None
                    and sim[i] is not None and qs[i].human_scale == "points"]
            h = np.array([answers[i].human_score / qs[i].max_points for i in keep])  # type: ignore[operator]
            mp = np.array([qs[i].max_points for i in keep], dtype=float)
            clusters = np.unique(np.array([qs[i].id for i in keep]), return_inverse=True)[1]
            constant = float(np.sqrt(np.mean(((h.mean() - h) * mp) ** 2)))
            t = Table(title=f"{name}: {len(keep)} answers read by both readers (of {len(answers)}), "
                      f"{len(set(clusters))} questions; RMSE of the constant at the humans' mean {constant:.3f}; "
                      f"judge run {report.run_id}", box=box.MARKDOWN)
            for c in ("rule", "Pearson [95% CI]", "within-q r", "RMSE", "capped", "ΔPearson vs judge [95% CI]",
                      "ΔRMSE vs judge [95% CI]"):
                t.add_column(c, justify="left" if c == "rule" else "right")
            base = np.array([graded["judge"][0][i] for i in keep], dtype=float)
            for rule, (grades, capped) in graded.items():
                x = np.array([grades[i] for i in keep], dtype=float)
                f = figures(h, x, mp, clusters)

                pr = paired_bootstrap(corr(x, h), corr(base, h), clusters, resamples=RESAMPLES)
                pe = paired_bootstrap(err(x, h, mp), err(base, h, mp), clusters, resamples=RESAMPLES)
                t.add_row(rule, f"{f['pearson']:.3f} [{f['ci'][0]:.2f}, {f['ci'][1]:.2f}]", f"{f['within']:.3f}",
                          f"{f['rmse']:.3f}", f"{capped:.1%}",
                          "-" if rule == "judge" else f"{pr.delta:+.3f} [{pr.low:+.2f}, {pr.high:+.2f}]",
                          "-" if rule == "judge" else f"{pe.delta:+.3f} [{pe.low:+.2f}, {pe.high:+.2f}]")
            console.print(t)
            console.print(marks_line(items, report, keep, answers, qs, judge, sim, h, mp))
            if args.slices:
                console.print(slice_table(name, answers, qs, judge, sim, plain, args.slices, args.slice_answers))
    return 0


def marks_line(items: Any, report: Any, keep: list[int], answers: list[Any], qs: list[Any],
               judge: list[float | None], sim: list[float | None], h: np.ndarray, mp: np.ndarray) -> str:
    """The readers-disagree mark (the default margin) against the judge's needs-expert mark: precision (marked
    answers whose grade is off the humans' by more than a quarter of max points) and recall (such answers marked)."""
    from knockout.calibration._trust import trust_marks
    from knockout.meaning import MARGIN

    c = combine(judge, sim, margin=MARGIN)
    trust = trust_marks(items, [{"item_id": r.answer_id, "score": r.score, "valid": r.valid, "details": r.details}
                                for r in report.results])
    x = np.array([c.grades[i] for i in keep], dtype=float)
    j = np.array([judge[i] for i in keep], dtype=float)
    bad_c, bad_j = np.abs(x - h) > 0.25, np.abs(j - h) > 0.25
    dis = np.array([c.capped[i] for i in keep])
    ne = np.array([trust.needs_expert(answers[i].id) for i in keep])

    def pr(mark: np.ndarray, bad: np.ndarray) -> str:
        p = f"{bad[mark].mean():.0%}" if mark.any() else "-"
        return f"{mark.sum()} marked, precision {p}, recall {mark[bad].mean():.0%} (base rate {bad.mean():.0%})"

    return (f"marks (an answer is off when its grade is more than 0.25 of max from the humans'): readers disagree "
            f"(margin {MARGIN:g}) on the combined grade: {pr(dis, bad_c)}; needs expert on the judge's grade: "
            f"{pr(ne, bad_j)}; needs expert on the combined grade: {pr(ne, bad_c)}")


def slice_table(name: str, answers: list[Any], qs: list[Any], judge: list[float | None], sim: list[float | None],
                plain: list[float | None], size: int, per: int) -> Table:
    """Each rule on exams of ``size`` questions x ``per`` answers cut from the suite, combined exam by exam."""
    order = list(dict.fromkeys(q.id for q in qs))
    t = Table(title=f"{name} cut into exams of {size} questions x {per} answers, each combined on its own: Pearson "
              "(RMSE) per exam; last column the mean over exams", box=box.MARKDOWN)
    exams = [order[i:i + size] for i in range(0, len(order) - size + 1, size)]
    t.add_column("rule")
    for i in range(len(exams)):
        t.add_column(f"exam {i + 1}", justify="right")
    t.add_column("mean", justify="right")
    per_rule: dict[str, list[tuple[float, float]]] = {}
    for ex in exams:
        idx = [i for i in range(len(answers)) if qs[i].id in ex]
        idx = [i for k in ex for i in [j for j in idx if qs[j].id == k][:per]]
        graded = rules([judge[i] for i in idx], [sim[i] for i in idx], [plain[i] for i in idx])
        keep = [k for k, i in enumerate(idx) if answers[i].human_score is not None and judge[i] is not None
                and sim[i] is not None]
        h = np.array([answers[idx[k]].human_score / qs[idx[k]].max_points for k in keep])
        mp = np.array([qs[idx[k]].max_points for k in keep], dtype=float)
        for rule, (grades, _) in graded.items():
            x = np.array([grades[k] for k in keep], dtype=float)
            r = float(np.corrcoef(x, h)[0, 1]) if np.std(x) > 0 and np.std(h) > 0 else float("nan")
            per_rule.setdefault(rule, []).append((r, float(np.sqrt(np.mean(((x - h) * mp) ** 2)))))
    for rule, vals in per_rule.items():
        t.add_row(rule, *(f"{r:.2f} ({e:.2f})" for r, e in vals),
                  f"{np.nanmean([r for r, _ in vals]):.3f} ({np.mean([e for _, e in vals]):.2f})")
    return t


if __name__ == "__main__":
    raise SystemExit(main())
