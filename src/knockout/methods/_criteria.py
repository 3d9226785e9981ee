"""Criterion verdicts of a run graded by criteria rubrics: the report's ``criteria`` section and its tables.

Each answer graded by a criteria rubric carries the judge's verdict on every criterion
(:class:`knockout.methods._base.CriterionVerdict`: the points awarded out of the criterion's); its grade is
their sum.  The section summarises the verdicts per criterion (how often full marks, how often none) and
keeps every answer's verdicts (``knockout report --json``); the tables show the summary, and each answer's
verdicts when the run is small enough to read them all (:data:`MAX_ANSWER_ROWS`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from knockout.data._records import ItemSet

#: above this many answers graded by criteria, the report's table of each answer's verdicts is left out
#: (they are in ``--json``, ``knockout export`` and the web app's item view)
MAX_ANSWER_ROWS = 200


def criteria_section(items: ItemSet, results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per question, each criterion's verdicts summarised, and every answer's verdicts; None when no
    answer of the run was graded by criteria."""
    by_question: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        verdicts = (r.get("details") or {}).get("criteria")
        if r.get("valid") and verdicts:
            by_question.setdefault(r["question_id"], []).append({"answer_id": r["item_id"], "score": r["score"],
                                                                 "verdicts": verdicts})
    if not by_question:
        return None
    questions = []
    for qid, answers in by_question.items():
        first = answers[0]["verdicts"]
        criteria = []
        for i, c in enumerate(first):
            got = [a["verdicts"][i]["awarded"] for a in answers if len(a["verdicts"]) > i]
            criteria.append({"n": i + 1, "criterion": c["criterion"], "points": c["points"], "verdicts": len(got),
                             "mean_awarded": sum(got) / len(got),
                             "full_rate": sum(x >= c["points"] - 1e-9 for x in got) / len(got),
                             "none_rate": sum(x <= 1e-9 for x in got) / len(got)})
        for a in answers:
            a["human"] = None
            with contextlib.suppress(KeyError):
                a["human"] = items.answer(a["answer_id"]).human_score
            a["awarded"] = [v["awarded"] for v in a.pop("verdicts")]
        questions.append({"question_id": qid, "criteria": criteria, "answers": answers})
    return {"questions": questions, "answers": sum(len(q["answers"]) for q in questions)}


def criteria_tables(section: dict[str, Any] | None) -> list[Any]:
    from knockout.reports._tables import Table, num, pct

    if not section:
        return []
    rows = [[q["question_id"], str(c["n"]), _short(c["criterion"]), f"{c['points']:g}", num(c["verdicts"]),
             num(c["mean_awarded"]), pct(c["full_rate"]), pct(c["none_rate"])]
            for q in section["questions"] for c in q["criteria"]]
    tables = [Table("rubric criteria: the judge's verdicts", ["question", "#", "criterion", "points", "verdicts",
                                                              "mean awarded", "full marks", "none"], rows,
                    "a verdict per criterion, the grade is their sum (valid answers graded by a criteria rubric)")]
    if section["answers"] <= MAX_ANSWER_ROWS:
        rows = [[a["answer_id"], "  ".join(f"{i}: {x:g}/{c['points']:g}" for i, (x, c) in
                                           enumerate(zip(a["awarded"], q["criteria"], strict=False), 1)),
                 "-" if a["score"] is None else f"{a['score']:g}", "-" if a["human"] is None else f"{a['human']:g}"]
                for q in section["questions"] for a in q["answers"]]
        tables.append(Table("criterion verdicts per answer", ["answer", "criterion: awarded/points", "grade (sum)",
                                                              "human"], rows))
    else:
        tables.append(Table("criterion verdicts per answer", ["note"], [[
            f"{section['answers']} answers: each answer's verdicts are in --json, knockout export and the web "
            "app's item view"]]))
    return tables


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"
