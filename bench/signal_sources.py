"""More signal from the same judge (issue 41, item 2): the grade read from other prompts and models, alone and
averaged, each paired against today's default on the same answers.

    python bench/signal_sources.py --out /tmp/signal.db                       # mohler-ind, demo-ind, saf-ind
    python bench/signal_sources.py --suite demo-ind --member score@1.5b --member correct@1.5b
    python bench/signal_sources.py --shots-per-question 2 --out /tmp/signal.db  # few-shot against calibrate

A member is a prompt and a model, graded as ``bench/accuracy.py`` grades a suite (the embedded judge, seed 0,
temperature 0.1, the expected grade from the verdict slot), through one store: a rerun makes no judge call.

* ``score``: ``knockout-individual-en-ref-score``, the default (the expected grade on 0..max points);
* ``correct``: ``knockout-individual-en-ref-correct``, P(yes) x max points (Kadavath et al. 2022's P(True));
* models: ``1.5b`` (Qwen2.5-Coder-1.5B-Instruct, the default) and ``0.5b``.

Combinations are juries with the ``mean`` aggregate (``knockout.jury``: the members' grades averaged, in points,
which for one question is the mean on the expected scale) computed from the members' stored grades: no judge
call of their own.  Printed per suite and configuration: n, Pearson [95% CI, questions resampled], RMSE against
the constant at the humans' mean, the median within-question Pearson and the judge's within-question SD against
the humans'; then each against the first member (``score@1.5b``) on the same answers: the Pearson and RMSE deltas
with their paired cluster-bootstrap CIs, and the judge calls per answer.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import SUITES, grade_figures, grade_suite, load_subset, paired_grades, question_figures
from rich.console import Console
from rich.table import Table

from knockout.data._records import ItemSet
from knockout.jury import score_aggregates
from knockout.storage._store import Store

PROMPTS = {"score": "knockout-individual-en-ref-score", "correct": "knockout-individual-en-ref-correct"}
MODELS = {"1.5b": "llamacpp:qwen2.5-coder-1.5b", "0.5b": "llamacpp:qwen2.5-coder-0.5b",
          "sim": "scripted?slot=true"}  # sim: the scripted judge, a simulation (the bench's own check)


def grade(suite: str, member: str, store: Store, threads: int, items: ItemSet | None = None,
          **opts: Any) -> tuple[dict[str, float | None], float, int]:
    """One member's grades of one suite (answer id -> grade; ``items``: a variant of the suite's, ``opts``: method
    options over the member's prompt), the seconds it took and its live judge calls."""
    prompt, model = member.split("@")
    s = SUITES[suite]
    t0 = time.perf_counter()
    report, scores = grade_suite(s, load_subset(s) if items is None else items, store, MODELS[model],
                                 {} if model == "sim" else {"threads": str(threads)},
                                 {"prompt": PROMPTS[prompt], **opts}, {})
    return scores, time.perf_counter() - t0, int(report.summary()["judge_calls"])


def shots_against_calibration(suite: str, k: int, draw: int, store: Store, threads: int,
                              member: str = "score@1.5b") -> dict[str, Any]:
    """The teacher's ``k`` graded answers per question shown to the judge as examples (SciEx's few-shot grading,
    ``--shots k`` from the same question) against the same ``k`` per question used by ``knockout calibrate`` after
    grading without them: both scored on the other answers.  The draw is ``first_per_question(..., k, seed=draw)``,
    as ``calibrate --per-question k --seed draw`` draws; the judge sees no other expert grade."""
    from knockout.calibration import calibrate, first_per_question, graded_rows

    items = load_subset(SUITES[suite])

    def rows(grades: dict[str, float | None]) -> list[Any]:
        return graded_rows(items, [{"item_id": a, "score": g, "valid": g is not None} for a, g in grades.items()])

    def calibrated(grades: dict[str, float | None]) -> tuple[dict[str, float | None], str]:
        cal = calibrate(rows(grades), fit_ids=fit, seed=draw, resamples=0, refits=0)
        return {a: cal.grades.get(a) for a in grades}, cal.map

    base, _, _ = grade(suite, member, store, threads)
    fit = first_per_question(rows(base), k, seed=draw)
    hidden = ItemSet(list(items.questions.values()),
                     [a if a.id in fit else a.model_copy(update={"human_scores": {}}) for a in items],
                     source=items.source)
    shot, secs, calls = grade(suite, member, store, threads, hidden, shots=k, shot_source="same-question",
                              allow_fewer_shots=True)
    held = {a.id for a in items if a.id not in fit and a.human_score is not None}
    sub = ItemSet(list(items.questions.values()), [a for a in items if a.id in held], source=items.source)
    (cal_base, cal_map), (cal_shot, _) = calibrated(base), calibrated(shot)
    out: dict[str, Any] = {"suite": suite, "k": k, "draw": draw, "held_out": len(held), "map": cal_map,
                           "seconds": secs, "live_calls": calls}
    for name, g in (("raw", base), ("shots", shot), ("calibrated", cal_base), ("shots, then calibrated", cal_shot)):
        out[name] = grade_figures(sub, {a: g.get(a) for a in held})
        if name != "raw":
            out[name]["paired"] = paired_grades(sub, {a: base.get(a) for a in held}, {a: g.get(a) for a in held})
    return out


def delta(v: Any, ci: Any) -> str:
    """A paired difference and its CI, as the tables print it."""
    if v is None:
        return "–"
    return f"{v:+.3f} [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else f"{v:+.3f}"


def mean_of(grades: list[dict[str, float | None]]) -> dict[str, float | None]:
    """The jury's ``mean`` aggregate (``knockout.jury.score_aggregates``) of each answer's valid member grades; an
    answer no member graded validly is invalid, as in a jury."""
    mean = score_aggregates.get("mean")
    out: dict[str, float | None] = {}
    for k in grades[0]:
        vals = [v for g in grades if (v := g.get(k)) is not None]
        out[k] = mean(vals, 0) if vals else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", action="append", default=[], help="a bench/accuracy.py suite graded in points")
    ap.add_argument("--member", action="append", default=[],
                    help="PROMPT@MODEL (score|correct @ 1.5b|0.5b|sim); the first is the default paired against")
    ap.add_argument("--out", type=Path, default=Path("signal.db"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save", type=Path, help="write the figures (JSON)")
    ap.add_argument("--shots-per-question", type=int, default=0,
                    help="instead: K teacher-graded answers per question as examples, against calibrate on the same K")
    ap.add_argument("--draw", type=int, default=0, help="--shots-per-question: the draw (calibrate's --seed)")
    args = ap.parse_args()
    if args.shots_per_question:
        with Store(args.out) as store:
            for suite in args.suite or ["mohler-ind"]:
                res = shots_against_calibration(suite, args.shots_per_question, args.draw, store, args.threads,
                                                *args.member[:1])
                print(f"\n{suite}: {args.shots_per_question} graded answers per question (draw {args.draw}), "
                      f"{res['held_out']} other answers; calibrate chose {res['map']}; the few-shot run: "
                      f"{res['live_calls']} live calls in {res['seconds']:.0f} s")
                print("| grades | Pearson [95% CI] | RMSE | constant | ΔPearson vs raw [CI] | ΔRMSE vs raw [CI] |")
                print("|---|---|---|---|---|---|")
                for name in ("raw", "shots", "calibrated", "shots, then calibrated"):
                    f = res[name]
                    p = f.get("paired", {})
                    ci = f.get("pearson_ci") or [float("nan")] * 2
                    print(f"| {name} | {f['pearson']:.3f} [{ci[0]:.2f}, {ci[1]:.2f}] | {f['rmse']:.3f} | "
                          f"{f['rmse_constant']:.3f} | {delta(p.get('delta'), p.get('delta_ci'))} | "
                          f"{delta(p.get('rmse_delta'), p.get('rmse_delta_ci'))} |")
                if args.save:
                    args.save.write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
        return 0
    suites = args.suite or ["mohler-ind", "demo-ind", "saf-ind"]
    members = args.member or ["score@1.5b", "correct@1.5b", "score@0.5b", "correct@0.5b"]
    default = members[0]  # what every configuration is paired against (today's default: score@1.5b)
    combos = [(m,) for m in members] + [c for n in range(2, len(members) + 1) for c in
                                        itertools.combinations(members, n)]
    console = Console(width=200)
    saved: dict[str, Any] = {}
    with Store(args.out) as store:
        for suite in suites:
            items = load_subset(SUITES[suite])
            grades, cost = {}, {}
            for m in members:
                grades[m], secs, calls = grade(suite, m, store, args.threads)
                cost[m] = (secs, calls)
                console.print(f"{suite} {m}: {calls} live calls in {secs:.0f} s")
            t = Table(title=f"{suite}: {len(items)} answers, {len(items.question_ids())} questions")
            for col in ("configuration", "n", "Pearson [95% CI]", "RMSE", "constant", "within-q r (median)",
                        "judge SD / human SD", "ΔPearson vs default [CI]", "ΔRMSE [CI]", "calls/answer"):
                t.add_column(col)
            rows = []
            for c in combos:
                g = mean_of([grades[m] for m in c])
                fig = grade_figures(items, g)
                pq = question_figures(items, g)["summary"]
                pair = paired_grades(items, grades[default], g) if c != (default,) else {}
                name = " + ".join(c)
                rows.append({"configuration": name, **fig, "per_question": pq, "paired": pair})
                t.add_row(name, str(fig["n"]),
                          f"{fig['pearson']:.3f} [{fig['pearson_ci'][0]:.2f}, {fig['pearson_ci'][1]:.2f}]"
                          if fig["pearson_ci"] else f"{fig['pearson']}",
                          f"{fig['rmse']:.3f}", f"{fig['rmse_constant']:.3f}",
                          f"{pq['pearson_median']:.2f}" if pq["pearson_median"] is not None else "-",
                          f"{pq['judge_sd_mean']:.2f} / {pq['human_sd_mean']:.2f}",
                          delta(pair.get("delta"), pair.get("delta_ci")),
                          delta(pair.get("rmse_delta"), pair.get("rmse_delta_ci")),  # this RMSE minus the default's
                          str(len(c)))
            console.print(t)
            console.print("seconds per answer: " + ", ".join(
                f"{m} {cost[m][0] / max(cost[m][1], 1):.2f} s ({cost[m][1]} live)" for m in members))
            saved[suite] = rows
    if args.save:
        args.save.write_text(json.dumps(saved, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
