"""``knockout report`` and ``knockout compare``: the analysis of stored runs as JSON-able dicts and tables.

The tables (:class:`Table`) are plain strings, rendered by the CLI with rich and by
:mod:`knockout.reports._html` as an HTML page, so both show the same figures.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from knockout.errors import ConfigError
from knockout.metrics._analysis import Analysis, analyse
from knockout.metrics._bootstrap import DEFAULT_RESAMPLES
from knockout.metrics._comparison import group_comparison, paired_comparison
from knockout.reports._prices import PriceTable, money
from knockout.reports._runs import LoadedRun
from knockout.reports._tables import Table, kv, num, pct, pvalue, with_ci
from knockout.runs import ReportOptions, kind_of


# -- report -------------------------------------------------------------------------------------------------
def build_report(run: LoadedRun, *, level: str = "question", by: Sequence[str] = (),
                 resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                 options: ReportOptions | None = None) -> tuple[dict[str, Any], Analysis]:
    """The report of a loaded run; ``options`` (what ``report`` was asked for) reach the kind's sections
    (``--calibrate``)."""
    from knockout.metrics._bias import length_analysis, match_bias

    an = analyse(run.items, run.results, level=level, by=by, resamples=resamples, seed=seed)
    report = {"run": run.header(), "cost": run.cost, "resamples": resamples, "seed": seed, **an.to_dict(),
              "length": length_analysis(an.aligned, resamples=resamples, seed=seed),
              "position": match_bias(run.items, run.matches)}
    if options is None:
        options = ReportOptions(level, by, resamples, seed)
    report.update(kind_of(run.run.kind).report_sections(run, options))
    return report, an


def bias_tables(length: dict[str, Any] | None, position: dict[str, Any] | None) -> list[Table]:
    """Length bias (every run) and position bias (pairwise methods) against the humans."""
    tables = []
    if length:
        p = length["pairs"]
        tables.append(kv("length bias (answer length in words)", [
            ("partial r(judge, length | human) [95% CI]", with_ci(length, "partial_r")),
            ("r(judge, length) / r(human, length)",
             f"{num(length['judge_length_r'])} / {num(length['human_length_r'])}"),
            ("Pearson with humans: plain / length regressed out of the judge [95% CI]",
             f"{num(length['pearson'])} / {with_ci(length, 'length_controlled_pearson')}"),
            ("pairs of answers to one question won by the longer: judge / humans",
             f"{pct(p['longer_wins'])} of {p['decided']} / {pct(p['longer_wins_human'])} of {p['decided_human']}"),
            ("mean answer length", f"{length['mean_words']:.1f} words"),
        ], "partial r > 0: longer answers get more than their human grade predicts; CIs: cluster bootstrap over "
           "questions"))
    if position:
        q = position
        rows = [
            ("matches / valid games / tied games", f"{q['matches']} / {q['games']} / {q['ties']}"),
            ("first-shown answer wins (decided games): judge / humans",
             f"{pct(q['first_win_rate'])} of {q['decided_games']} / {pct(q['first_win_rate_human'])}"),
            ("grade first minus second (share of max): judge / humans",
             f"{num(q['first_minus_second'])} / {num(q['first_minus_second_human'])}"),
            ("matches won by the longer answer: judge / humans",
             f"{pct(q['longer_wins'])} of {q['decided_matches']} / {pct(q['longer_wins_human'])} of "
             f"{q['decided_matches_human']}"),
        ]
        if q["debiased_matches"]:
            rows += [("swap consistency (same winner in both orders)",
                      f"{pct(q['swap_consistency'])} of {q['debiased_matches']} matches"),
                     ("first-shown wins in both orders", pct(q["first_wins_both"]))]
        tables.append(kv("position bias (the run's pairwise matches)", rows,
                          "an unbiased judge wins the first position as often as the humans' grades say"))
    return tables




def question_rows(q: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("answers compared", num(q.get("n"))),
        ("questions", num(q.get("questions"))),
        ("Pearson (normalised: share of max points) [95% CI]", with_ci(q, "pearson")),
        ("Spearman [95% CI]", with_ci(q, "spearman")),
        ("Kendall tau-b [95% CI]", with_ci(q, "kendall")),
        ("RMSE (points)", num(q.get("rmse"))),
        ("mean difference judge - human (points)", num(q.get("mean_diff"))),
        ("mean difference (share of max points)", num(q.get("mean_diff_norm"))),
        ("Cohen's kappa (plain / linear / quadratic)",
         " / ".join(num(q.get(k)) for k in ("kappa", "kappa_linear", "kappa_quadratic"))),
        ("judge gives full points", pct(q.get("full_points_rate"))),
        ("precision of full points", num(q.get("full_points_precision"))),
        ("humans give full points", pct(q.get("human_full_points_rate"))),
    ]


def exam_rows(e: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("examinee-exam totals", num(e.get("n"))),
        ("exams", num(e.get("exams"))),
        ("Pearson (normalised totals) [95% CI]", with_ci(e, "pearson")),
        ("Spearman [95% CI]", with_ci(e, "spearman")),
        ("Kendall tau-b [95% CI]", with_ci(e, "kendall")),
        ("pairwise ranking accuracy (Kocmi) [95% CI]",
         with_ci(e, "pairwise_accuracy") + f" over {e.get('pairs')} pairs"),
        ("RMSE of normalised totals", num(e.get("rmse_norm"))),
        ("mean difference (share of max points)", num(e.get("mean_diff_norm"))),
    ]


def group_table(key: str, level: str, groups: list[dict[str, Any]]) -> Table:
    if level == "exam":
        cols = ["group", "totals", "exams", "Pearson [95% CI]", "Spearman", "pairwise acc.", "mean diff (norm)"]
        rows = [[g["group"], num(g["n"]), num(g["exams"]), with_ci(g, "pearson"), num(g["spearman"]),
                 num(g["pairwise_accuracy"]), num(g["mean_diff_norm"])] for g in groups]
    else:
        cols = ["group", "n", "invalid", "Pearson [95% CI]", "Spearman", "RMSE", "mean diff (norm)",
                "full points", "precision"]
        rows = [[g["group"], num(g["n"]), num(g["invalid"]), with_ci(g, "pearson"), num(g["spearman"]),
                 num(g["rmse"]), num(g["mean_diff_norm"]), pct(g["full_points_rate"]),
                 num(g["full_points_precision"])] for g in groups]
    return Table(f"by {key} ({level} level)", cols, rows)


def human_sources(h: dict[str, Any]) -> str:
    """Where the human grades came from: the input file's graders and the web app's."""
    parts = [f"input file: {', '.join(h.get('file') or []) or 'none'}"]
    if h.get("web") or h.get("web_skipped"):
        parts.append(f"web app: {', '.join(h.get('web') or []) or 'none'} ({h.get('web_grades', 0)} grades)")
    skipped = h.get("web_skipped") or {}
    if skipped:
        parts.append("left out: " + ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())))
    return "; ".join(parts)


def _used_rows(used: dict[str, Any]) -> list[tuple[str, str]]:
    """What the run used (LoadedRun.used): few-shot examples per answer, figures left out, languages."""
    rows = []
    if used.get("shots"):
        rows.append(("few-shot", str(used["shots"])))
    if used.get("figures_left_out"):
        rows.append(("figures left out", f"{used['figures_left_out']} (--figures none)"))
    if used.get("languages"):
        rows.append(("languages graded", ", ".join(used["languages"])))
    verdict = used.get("verdict") or {}
    if verdict.get("mode") == "expected":
        spread = verdict.get("mean_spread")
        rows.append(("verdict", "expected grade from the judge's token probabilities (verdict slot)"
                     + (f"; the judge's own spread: sd {spread:.2f} points on average" if spread is not None else "")))
    elif verdict.get("mode") == "mixed":
        words = {"expected": "expected grade from the judge's token probabilities (verdict slot)",
                 "constrained": "the value the judge wrote in the verdict slot",
                 "text": "read from the judge's free text (prompts without a verdict slot, e.g. criteria rubrics)"}
        rows.append(("verdict", "; ".join(f"{words.get(m, m)}: {n} question{'s' if n != 1 else ''}"
                                          for m, n in (verdict.get("questions") or {}).items())))
    elif verdict.get("mode"):
        rows.append(("verdict", {"constrained": "the value the judge wrote in the verdict slot",
                                 "text": "read from the judge's free text"}.get(verdict["mode"], verdict["mode"])))
    return rows


def report_tables(report: dict[str, Any]) -> list[Table]:
    run, cost, q, e = report["run"], report["cost"], report["question_level"], report["exam_level"]
    tables = [kv(f"run {run['run_id']}", [
        ("method", run["method"]), ("judge", run["judge"] + ("  (SIMULATION, not an LLM)" if run["simulated_judge"]
                                                             else "")),
        ("data", str(run["data"])),
        *_used_rows(run.get("used") or {}),
        ("human grades", human_sources(run.get("human_grades") or {})),
        ("answers", f"{report['answers']} ({report['invalid']} invalid, excluded; "
                    f"{report['without_human_score']} without a human score)"),
        ("judge requests", f"{cost['requests']} ({cost['live_calls']} live calls logged)"),
        ("tokens", f"{cost['prompt_tokens']} prompt + {cost['completion_tokens']} completion"),
        ("tokens from scratch (every request used, cached or not)",
         "-" if cost.get("scratch_tokens") is None else
         f"{cost['scratch_prompt_tokens']} prompt + {cost['scratch_completion_tokens']} completion"),
        ("wall time", "-" if cost["wall_s"] is None else f"{cost['wall_s']:.1f} s"),
    ])]
    level_tables = [kv("question level", question_rows(q),
                        f"95% CIs: cluster bootstrap over questions, {report['resamples']} resamples")]
    if e:
        level_tables.append(kv("exam level", exam_rows(e), "one point per examinee and exam: points / max points"))
    if report["level"] == "exam":
        level_tables.reverse()
    tables += level_tables
    for key, groups in report["breakdowns"].items():
        tables.append(group_table(key, report["level"], groups))
    infl = report["inflation_by_difficulty"]
    if infl and not (len(infl) == 1 and infl[0]["group"] == "(none)"):
        tables.append(Table("inflation by difficulty (judge - human)", ["difficulty", "n", "invalid",
                                                                         "mean diff (points)", "mean diff (norm)",
                                                                         "judge full points"],
                            [[g["group"], num(g["n"]), num(g["invalid"]), num(g["mean_diff"]),
                              num(g["mean_diff_norm"]), pct(g["full_points_rate"])] for g in infl]))
    rd = report.get("rounds")
    if rd:
        tables.append(Table("elimination round (knockout)", ["answers", "n", "Pearson [95% CI]", "Spearman"], [
            ["eliminated in round 1", num(rd["first_round"]["n"]), with_ci(rd["first_round"], "pearson"),
             num(rd["first_round"]["spearman"])],
            ["later rounds / winner", num(rd["later_rounds"]["n"]), with_ci(rd["later_rounds"], "pearson"),
             num(rd["later_rounds"]["spearman"])],
        ], f"difference later - first: {num(rd['pearson_difference'])}"))
    rk = report.get("ranking")
    if rk:
        tables.append(Table("examinee ranking", ["examinee", "answers", "human %", "human rank", "judge %",
                                                 "judge rank"],
                            [[r["examinee"], num(r["answers"]), f"{r['human_pct']:.1f}", num(r["human_rank"]),
                              f"{r['judge_pct']:.1f}", num(r["judge_rank"])] for r in rk["examinees"]],
                            f"rank agreement: Spearman {num(rk['spearman'])}, Kendall {num(rk['kendall'])}"))
    hh = report.get("human_human")
    if hh:
        rows = [[f"{p['a']} vs {p['b']}", num(p["n"]), with_ci(p, "pearson"), num(p["spearman"]),
                 num(p["kappa"]), num(p["kappa_quadratic"])] for p in hh["pairs"]]
        rows += [[f"judge vs {p['grader']}", num(p["n"]), with_ci(p, "pearson"), num(p["spearman"]),
                  num(p["kappa"]), num(p["kappa_quadratic"])] for p in hh["judge_vs_grader"]]
        tables.append(Table("human-human agreement (the ceiling) and the judge against each grader",
                            ["pair", "n", "Pearson [95% CI]", "Spearman", "kappa", "kappa (quadratic)"], rows))
    tables += bias_tables(report.get("length"), report.get("position"))
    tables += kind_of(run["kind"]).section_tables(report)
    cal = report.get("calibration")
    if cal:
        tables.append(Table("calibration: mean judge score per human score bin (normalised)",
                            ["human score", "n", "mean human", "mean judge"],
                            [[num(c["human_low"], 2) if c["human_low"] == c["human_high"] else
                              f"{c['human_low']:.2f}-{c['human_high']:.2f}", num(c["n"]), num(c["human_mean"]),
                              num(c["judge_mean"])] for c in cal]))
    return tables


# -- compare ------------------------------------------------------------------------------------------------
def build_comparison(runs: Sequence[LoadedRun], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                     by: Sequence[str] = (), prices: PriceTable | None = None) -> dict[str, Any]:
    """Methods x metrics with CIs and costs (paid, and from scratch: every request a run used, cached or
    not; in money with ``prices``); paired tests of every run against the first (the baseline); with ``by``,
    per group of each key: every run's Pearson and its difference to the baseline."""
    if len(runs) < 2:
        raise ConfigError("compare needs at least two runs")
    rows = []
    for r in runs:
        an = analyse(r.items, r.results, resamples=resamples, seed=seed)
        d = an.to_dict()
        rows.append({**r.header(), "cost": r.cost, "money": money(prices, r.run.judge, r.cost),
                     "answers": d["answers"], "invalid": d["invalid"],
                     "question_level": d["question_level"], "exam_level": d["exam_level"]})
    distinct_labels(rows, runs)
    base = runs[0]
    paired = []
    for r in runs[1:]:
        if r.run.data_fingerprint != base.run.data_fingerprint:
            paired.append({"run_id": r.run.id, "baseline": base.run.id,
                           "skipped": "different item sets: no paired test"})
            continue
        paired.append({"run_id": r.run.id, "baseline": base.run.id,
                       **paired_comparison(base.items, r.results, base.results, resamples=resamples, seed=seed)})
    groups = []
    keys = [k.strip() for k in by if k.strip()]
    if keys and any(r.run.data_fingerprint != base.run.data_fingerprint for r in runs[1:]):
        raise ConfigError("compare --by needs runs on the same item set (paired per group)")
    for key in keys:
        groups.append(group_comparison(base.items, [r.results for r in runs], key, resamples=resamples, seed=seed))
    return {"runs": rows, "paired": paired, "resamples": resamples, "seed": seed, "by": groups}


def distinct_labels(rows: list[dict[str, Any]], runs: Sequence[LoadedRun]) -> None:
    """Runs whose labels read the same (two prompt variants, one with ``--debias``, ... of one judge) get the
    options and parameters in which they differ added (``· shots=2``), and when none differ their run id."""
    def settings(r: LoadedRun) -> dict[str, Any]:
        options = {k: v for k, v in (r.run.config.get("options") or {}).items() if k != "extra"}
        return {**options, **(r.run.config.get("params") or {})}

    by_label: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_label.setdefault(str(row["label"]), []).append(i)
    for label, idx in by_label.items():
        if len(idx) < 2:
            continue
        got = [settings(runs[i]) for i in idx]
        keys = sorted({k for s in got for k in s if len({json.dumps(x.get(k), sort_keys=True) for x in got}) > 1})
        for i, s in zip(idx, got, strict=True):
            rows[i]["label"] = " · ".join([label, *(f"{k}={s.get(k)}" for k in keys)])
        if len({rows[i]["label"] for i in idx}) < len(idx):
            for i in idx:
                rows[i]["label"] += f" · run {runs[i].run.id}"


def comparison_df(cmp: dict[str, Any]) -> Any:
    """A :func:`build_comparison` result as a pandas DataFrame: one row per run (indexed by run id; the
    first is the baseline) with its method, judge, label, answers, invalid, the question-level Pearson,
    Spearman (with their 95% CI bounds), Kendall and RMSE, the exam-level Pearson, requests, tokens and wall
    time, and its paired test against the baseline (``delta``, its CI, ``p_bootstrap``, ``williams_t``,
    ``p_williams``, ``williams_na``: why Williams' test was not computed).  Needs pandas."""
    try:
        import pandas as pd
    except ImportError:
        raise ConfigError("comparison_df needs pandas: pip install 'knockout[dataframes]'") from None

    def ci(d: dict[str, Any] | None, key: str, i: int) -> Any:
        bounds = (d or {}).get(f"{key}_ci")
        return bounds[i] if bounds else None

    paired = {x["run_id"]: x for x in cmp.get("paired", [])}
    rows = []
    for r in cmp["runs"]:
        q, e, c = r["question_level"], r.get("exam_level") or {}, r.get("cost") or {}
        x = paired.get(r["run_id"], {})
        ql = x.get("question_level") or {}
        rows.append({
            "run_id": r["run_id"], "method": r.get("method"), "judge": r.get("judge"), "label": r.get("label"),
            "simulated_judge": r.get("simulated_judge"), "answers": r.get("answers"), "invalid": r.get("invalid"),
            "n": q.get("n"), "pearson": q.get("pearson"), "pearson_low": ci(q, "pearson", 0),
            "pearson_high": ci(q, "pearson", 1), "spearman": q.get("spearman"),
            "spearman_low": ci(q, "spearman", 0), "spearman_high": ci(q, "spearman", 1),
            "kendall": q.get("kendall"), "rmse": q.get("rmse"), "exam_pearson": e.get("pearson"),
            "requests": c.get("requests"), "tokens": c.get("tokens"), "wall_s": c.get("wall_s"),
            "baseline": x.get("baseline"), "delta": ql.get("delta"),
            "delta_low": (ql.get("ci") or [None, None])[0], "delta_high": (ql.get("ci") or [None, None])[1],
            "p_bootstrap": ql.get("p_bootstrap"), "williams_t": ql.get("williams_t"),
            "p_williams": ql.get("p_williams_two_sided"), "williams_na": ql.get("williams_na") or x.get("skipped"),
        })
    return pd.DataFrame(rows).set_index("run_id")


def shown(cmp: dict[str, Any], run_id: str) -> str:
    """How a run is named in the comparison's tables: its name in ``cmp["names"]`` (an experiment file's
    method or part) with the run id, else the run id."""
    name = (cmp.get("names") or {}).get(run_id)
    return f"{name} ({run_id[:8]})" if name else run_id


def comparison_tables(cmp: dict[str, Any]) -> list[Table]:
    priced = any(r.get("money") for r in cmp["runs"])
    t = Table("methods x metrics (question level unless marked exam)",
              ["run", "method / judge", "n", "invalid", "Pearson [95% CI]", "Spearman [95% CI]", "Kendall", "RMSE",
               "exam Pearson [95% CI]", "pairwise acc. (exam)", "requests", "tokens paid / from scratch",
               *(["cost paid / from scratch"] if priced else []), "wall s"],
              note=f"95% CIs: cluster bootstrap over questions, {cmp['resamples']} resamples. Tokens paid: the "
                   "calls this run sent; from scratch: every request it used, also those answered from the "
                   "store (matches another method played first): its cost on an empty store")
    for r in cmp["runs"]:
        q, e, c = r["question_level"], r["exam_level"], r["cost"]
        m = r.get("money")
        t.rows.append([shown(cmp, r["run_id"]), r["label"], num(q["n"]), num(r["invalid"]), with_ci(q, "pearson"),
                       with_ci(q, "spearman"), num(q["kendall"]), num(q["rmse"]), with_ci(e, "pearson"),
                       with_ci(e, "pairwise_accuracy"), num(c["requests"]),
                       f"{num(c['tokens'])} / {num(c.get('scratch_tokens'))}",
                       *([_money(m)] if priced else []),
                       "-" if c["wall_s"] is None else f"{c['wall_s']:.1f}"])
    p = Table("paired tests against the first run (question-level Pearson, answers valid in both)",
              ["run", "baseline", "n", "delta [95% CI]", "p (paired bootstrap)", "Williams t", "p (Williams, 2-sided)",
               "exam delta [95% CI]"])
    for x in cmp["paired"]:
        if "skipped" in x:
            p.rows.append([shown(cmp, x["run_id"]), shown(cmp, x["baseline"]), "-", x["skipped"], "-", "-", "-", "-"])
            continue
        ql, el = x["question_level"], x.get("exam_level") or {}
        p.rows.append([shown(cmp, x["run_id"]), shown(cmp, x["baseline"]), num(x["n"]),
                       with_ci({"d": ql["delta"], "d_ci": ql["ci"]}, "d"),
                       pvalue(ql["p_bootstrap"]),
                       f"n/a: {ql['williams_na']}" if ql.get("williams_na") else num(ql.get("williams_t")),
                       "n/a" if ql.get("williams_na") else pvalue(ql.get("p_williams_two_sided")),
                       with_ci({"d": el.get("delta"), "d_ci": el.get("ci")}, "d")])
    return [t, p, *group_tables(cmp)]


def _money(m: dict[str, Any] | None) -> str:
    if not m:
        return "- (no price)"

    def amount(x: float | None) -> str:
        return "-" if x is None else f"{x:.4f}"

    return f"{amount(m['paid'])} / {amount(m['scratch'])} {m['currency']}"


def group_tables(cmp: dict[str, Any]) -> list[Table]:
    """One table per ``--by`` key: groups x (each run's Pearson, each run minus the baseline)."""
    runs = cmp["runs"]
    ids = [shown(cmp, r["run_id"]) for r in runs]
    out = []
    for sec in cmp.get("by", []):
        cols = ["group", "answers", *(f"{i} Pearson [95% CI]" for i in ids)]
        for i in ids[1:]:
            cols += [f"{i} - {ids[0]} [95% CI]", "p"]
        t = Table(f"by {sec['key']}: Pearson per group and the difference to the first run", cols,
                  note="runs: " + "; ".join(f"{shown(cmp, r['run_id'])} = {r['label']}" for r in runs)
                       + f". Differences: paired bootstrap over the group's questions ({cmp['resamples']} "
                         "resamples), answers valid in both runs")
        for g in sec["groups"]:
            row = [g["group"], num(g["answers"]), *(with_ci(x, "pearson") for x in g["runs"])]
            for d in g["deltas"]:
                row += [with_ci({"d": d["delta"], "d_ci": d["ci"]}, "d"), pvalue(d["p_bootstrap"])]
            t.rows.append(row)
        out.append(t)
    return out
