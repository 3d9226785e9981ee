"""The comparison an experiment prints, computed from the store alone once its parts have run.

* grading: the layout of Table 1 of the knockout paper — methods as rows, judges (and the jury) as columns,
  question-level Pearson with its 95% cluster-bootstrap CI in each cell (and an exam-level table when the
  items have examinees) — then, per judge, ``knockout compare`` of the methods against the baseline method
  (paired bootstrap and Williams' test), with the ``compare.by`` tables;
* side-by-side: ``knockout compare`` of every part (Titova et al.'s Tables 1 and 3-6 layout);
* meta-evaluation: per framework and meta-judge, the judgements, the ranking's top, Kendall's tau with the
  human ranking and the cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knockout.experiments._file import LAYOUTS, ExperimentFile
from knockout.experiments._run import Part
from knockout.reports._report import comparison_tables
from knockout.reports._tables import Table, num, transpose, with_ci


def experiment_report(ef: ExperimentFile, parts: list[Part], store: Path) -> dict[str, Any]:
    exp = ef.exp
    cmp = exp.compare
    head = {"experiment": exp.title or ef.path.stem, "file": str(ef.path), "kind": exp.kind, "store": str(store),
            "parts": [{"row": p.row, "column": p.column, "run_id": p.run_id, "status": p.status,
                       **({"cell": p.cell} if p.cell else {})} for p in parts]}
    if exp.grid is not None:  # SciEx's grid, as the paper's Tables 4, 9, 10 and 11
        from knockout.sciex._grid import grid_report

        return {**head, **grid_report(exp.title or ef.path.stem, parts, store, shots=exp.grid.shots,
                                      sources=exp.grid.shot_sources, reference=exp.grid.reference,
                                      resamples=cmp.resamples, seed=cmp.seed)}
    layout = LAYOUTS[exp.kind]
    if layout == "compare":  # the kind's own comparison of every part
        from knockout.runs import ReportOptions, kind_of
        from knockout.storage import Store

        with Store.open_existing(store) as st:
            page = kind_of(exp.kind).compare([(st, st.find_run(p.run_id)) for p in parts],
                                             ReportOptions(resamples=cmp.resamples, seed=cmp.seed))
        return {**head, "layout": layout, "comparison": page.data}
    if layout == "summaries":
        return {**head, "layout": layout, "meta": [{"row": p.row, "column": p.column, "run_id": p.run_id,
                                                    **_meta_row(p.summary)} for p in parts]}
    from knockout.metrics._analysis import analyse
    from knockout.reports._report import build_comparison
    from knockout.reports._runs import load_run

    rows = list(dict.fromkeys(p.row for p in parts))
    cols = list(dict.fromkeys(p.column for p in parts))
    loaded = {(p.row, p.column): load_run(store, p.run_id) for p in parts}
    cells: dict[str, dict[str, Any]] = {r: {} for r in rows}
    for (r, c), lr in loaded.items():
        d = analyse(lr.items, lr.results, resamples=cmp.resamples, seed=cmp.seed).to_dict()
        cells[r][c] = {"run_id": lr.run.id, "question_level": d["question_level"], "exam_level": d["exam_level"],
                       "invalid": d["invalid"]}
    baseline = cmp.baseline or rows[0]
    order = [baseline, *(r for r in rows if r != baseline)]
    comparisons = {}
    if len(rows) > 1:
        for c in cols:
            comparisons[c] = build_comparison([loaded[(r, c)] for r in order], resamples=cmp.resamples, seed=cmp.seed,
                                              by=cmp.by)
            # the tables head their rows and columns with the file's method names, not run-id hashes
            comparisons[c]["names"] = {loaded[(r, c)].run.id: r for r in order}
    return {**head, "layout": layout, "rows": rows, "columns": cols, "baseline": baseline, "cells": cells,
            "comparisons": comparisons, "resamples": cmp.resamples}


def _meta_row(s: dict[str, Any]) -> dict[str, Any]:
    tau = s.get("kendall_tau") or {}
    return {"framework": s.get("framework"), "judge": s.get("judge"), "judgements": s.get("judgements"),
            "valid": s.get("valid"), "invalid": s.get("invalid"),
            "ranking": [r["evaluator"] for r in s.get("ranking", [])],
            "human_ranking": [r["evaluator"] for r in
                              ((s.get("human") or {}).get("all_items") or {}).get("ranking", [])],
            "kendall_tau": tau.get("tau"), "kendall_p": tau.get("p_value"),
            "judge_calls": s.get("judge_calls"), "cache_hits": s.get("cache_hits"),
            "tokens": int(s.get("prompt_tokens", 0)) + int(s.get("completion_tokens", 0))}


def experiment_tables(rep: dict[str, Any]) -> list[Table]:
    title = rep["experiment"]
    if rep["layout"] == "sciex-grid":
        from knockout.sciex._grid import grid_tables

        return grid_tables(rep)
    if rep["layout"] == "compare":
        from knockout.runs import kind_of

        tables = kind_of(rep["kind"]).compare_tables(rep["comparison"])
        tables[0].title = f"{title}: {tables[0].title}"
        return tables
    if rep["layout"] == "summaries":
        t = Table(f"{title}: meta-evaluation", ["framework", "meta-judge", "run", "judgements (invalid)",
                                                "meta ranking", "human ranking", "Kendall tau (p)", "live calls"])
        for m in rep["meta"]:
            t.rows.append([m["row"], m["column"], m["run_id"], f"{m['judgements']} ({m['invalid']})",
                           " > ".join(m["ranking"]), " > ".join(m["human_ranking"]) or "-",
                           f"{num(m['kendall_tau'])} ({num(m['kendall_p'])})", num(m["judge_calls"])])
        return [t]
    cols = rep["columns"]
    t = Table(f"{title}: Pearson with the human scores (question level) [95% CI]", ["method", *cols],
              note=f"CIs: cluster bootstrap over questions, {rep['resamples']} resamples; the layout of Table 1 of "
                   "the knockout paper (methods x judges)")
    for r in rep["rows"]:
        t.rows.append([r, *(with_ci(rep["cells"][r][c]["question_level"], "pearson") + _inv(rep["cells"][r][c])
                            if c in rep["cells"][r] else "-" for c in cols)])
    tables = [t]
    if any(cell.get("exam_level") for row in rep["cells"].values() for cell in row.values()):
        e = Table(f"{title}: Pearson of the exam totals [95% CI]", ["method", *cols])
        for r in rep["rows"]:
            e.rows.append([r, *(with_ci(rep["cells"][r][c].get("exam_level"), "pearson") if c in rep["cells"][r]
                                else "-" for c in cols)])
        tables.append(e)
    for c, cmp in rep["comparisons"].items():
        for i, x in enumerate(comparison_tables(cmp)):
            x.title = f"{c}: {x.title}"
            tables.append(transpose(x) if i < 2 and len(x.rows) <= 4 else x)  # few methods: metrics as rows
    return tables


def _inv(cell: dict[str, Any]) -> str:
    return f" ({cell['invalid']} invalid)" if cell.get("invalid") else ""
