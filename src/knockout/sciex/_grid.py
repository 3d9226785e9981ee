"""SciEx's grading grid: shots x shot source x reference, per judge, laid out as Tables 4, 9, 10 and 11 of
Dinh et al. (2024) lay it out.

* **Table 4**: question-level Pearson with the expert grades (scores normalised by the maximum points), for
  text-only and for image-related questions (a question with figures), 95% cluster-bootstrap CI;
* **Table 9**: exam-level Pearson (one point per examinee and exam, scores normalised);
* **Table 10**: question-level RMSE in points, text-only and image-related;
* **Table 11**: giving full points: the precision of the judge's full points (the share of them the
  experts also gave) and the share of answers it gave full points, without and with the reference.

Rows are the judges and the numbers of shots, columns the reference (without, with) and the shot source
(same question, same exam, other exam — the paper's "diff exam"); zero-shot has one value per reference, in
the first source column, as in the paper.  Table 11 has no source dimension in the paper: for k > 0 each cell
is the mean over the shot sources' runs.  A cell whose run gave some answers fewer examples than asked
(``allow_fewer_shots``) is marked ``*`` and the note says how many.  Each cell is one ordinary grade run
(individual grading), computed from the store alone with :func:`knockout.metrics._analysis.analyse`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from knockout.reports._tables import Table, num, with_ci

SOURCE_LABELS = {"same-question": "same question", "same-exam": "same exam", "other-exam": "diff exam"}
MODALITIES = (("text", "Text-only questions"), ("image", "Image-related questions"))


def grid_cell(store: Path, run_id: str, *, resamples: int, seed: int) -> dict[str, Any]:
    """The numbers of one cell (one run) of the grid."""
    from knockout.metrics._analysis import analyse
    from knockout.prompts._fewshot import shots_used
    from knockout.reports._runs import load_run

    lr = load_run(store, run_id)
    d = analyse(lr.items, lr.results, by=["modality"], resamples=resamples, seed=seed).to_dict()
    ql = d["question_level"]
    keep = ("n", "pearson", "pearson_ci", "rmse", "full_points_precision", "full_points_rate")
    opts = lr.run.config.get("options") or {}
    used = shots_used(lr.results, int(opts.get("shots") or 0), str(opts.get("shot_source", "")))
    return {
        "run_id": lr.run.id,
        "invalid": d["invalid"],
        "question_level": {k: ql.get(k) for k in keep},
        "exam_level": {k: (d["exam_level"] or {}).get(k) for k in ("n", "pearson", "pearson_ci")},
        "modality": {g["group"]: {k: g.get(k) for k in keep} for g in d["breakdowns"].get("modality", [])},
        "fewer_shots": used["fewer"] if opts.get("shots") else 0,
    }


def _columns(rep: dict[str, Any]) -> list[tuple[bool, str]]:
    return [(ref, src) for ref in rep["reference"] for src in rep["sources"]]


def _head(rep: dict[str, Any]) -> list[str]:
    return ["judge", "shots", *(f"{'with' if ref else 'without'} ref: {SOURCE_LABELS.get(src, src)}"
                                for ref, src in _columns(rep))]


def _cell(rep: dict[str, Any], judge: str, k: int, ref: bool, src: str) -> dict[str, Any] | None:
    key = f"{judge}|{k}|{'ref' if ref else 'noref'}|{src if k else ''}"
    cell: dict[str, Any] | None = rep["cells"].get(key)
    return cell


def _table(rep: dict[str, Any], title: str, value: Any, note: str) -> Table:
    t = Table(title, _head(rep), note=note)
    for judge in rep["judges"]:
        for k in rep["shots"]:
            row = [judge, f"{k} shot"]
            for ref, src in _columns(rep):
                if k == 0 and src != rep["sources"][0]:
                    row.append("")
                    continue
                cell = _cell(rep, judge, k, ref, src)
                text = "-" if cell is None else value(cell)
                row.append(text + ("*" if cell and cell.get("fewer_shots") else ""))
            t.rows.append(row)
    return t


def grid_tables(rep: dict[str, Any]) -> list[Table]:
    """Tables 4, 9, 10 and 11 of the paper from :func:`grid_report`'s dictionary."""
    title = rep["experiment"]
    fewer = sum(int(c.get("fewer_shots") or 0) for c in rep["cells"].values())
    star = f" * some answers got fewer examples than asked ({fewer} in all; allow_fewer_shots)." if fewer else ""
    ci = f"CIs: cluster bootstrap over questions, {rep['resamples']} resamples."
    tables = []
    for group, label in MODALITIES:
        tables.append(_table(rep, f"{title}: Table 4 ({label}): question-level Pearson with the experts [95% CI]",
                             lambda c, g=group: with_ci(c["modality"].get(g), "pearson"),
                             f"Scores normalised by the maximum points; zero-shot has one value per reference. {ci}"
                             + star))
    tables.append(_table(rep, f"{title}: Table 9: exam-level Pearson with the experts [95% CI]",
                         lambda c: with_ci(c["exam_level"], "pearson"),
                         f"One point per examinee and exam, scores normalised. {ci}" + star))
    for group, label in MODALITIES:
        tables.append(_table(rep, f"{title}: Table 10 ({label}): question-level RMSE (points)",
                             lambda c, g=group: num((c["modality"].get(g) or {}).get("rmse"), 2), star.strip()))
    t11 = Table(f"{title}: Table 11: giving full points",
                ["judge", "shots", *(f"max score precision: {'ref' if r else 'no ref'}" for r in rep["reference"]),
                 *(f"max score predicted (%): {'ref' if r else 'no ref'}" for r in rep["reference"])],
                note="Precision: the share of the judge's full points that the experts also gave; predicted: the "
                     "share of answers given full points.  k > 0: the mean over the shot sources' runs." + star)
    for judge in rep["judges"]:
        for k in rep["shots"]:
            prec, pred = [], []
            for ref in rep["reference"]:
                cells = [c for src in (rep["sources"] if k else [rep["sources"][0]])
                         if (c := _cell(rep, judge, k, ref, src)) is not None]
                prec.append(_mean([c["question_level"].get("full_points_precision") for c in cells], 3))
                pred.append(_mean([c["question_level"].get("full_points_rate") for c in cells], 1, 100.0))
            t11.rows.append([judge, f"{k} shot", *prec, *pred])
    tables.append(t11)
    return tables


def _mean(values: Sequence[float | None], digits: int, scale: float = 1.0) -> str:
    xs = [float(v) * scale for v in values if v is not None]
    return num(sum(xs) / len(xs), digits) if xs else "-"


def grid_report(title: str, parts: Sequence[Any], store: Path, *, shots: Sequence[int], sources: Sequence[str],
                reference: Sequence[bool], resamples: int, seed: int) -> dict[str, Any]:
    """The grid's numbers from the store: ``parts`` are the experiment's parts, each with its ``cell``
    (judge, shots, source, reference) and ``run_id``."""
    cells = {}
    judges: list[str] = []
    for p in parts:
        c = p.cell
        judges += [] if c["judge"] in judges else [c["judge"]]
        key = f"{c['judge']}|{c['shots']}|{'ref' if c['reference'] else 'noref'}|{c['source'] if c['shots'] else ''}"
        cells[key] = {**c, **grid_cell(store, p.run_id, resamples=resamples, seed=seed)}
    return {"experiment": title, "layout": "sciex-grid", "judges": judges, "shots": list(shots),
            "sources": list(sources), "reference": list(reference), "cells": cells, "resamples": resamples}
