"""The ``meta`` run kind: a meta-judge ranks judges (JDEval, MDEval, JDEval-i, BSMEval).

How its runs are read: the tidy ``judgements`` table and the viewer's rows (each meta-judgement with its
evaluators, value and winner; a debate's transcript).  Its ranking and agreement with the human ranking are
in its summary (``knockout meta`` prints them).
"""

from __future__ import annotations

from typing import Any

from knockout.meta._run import MetaRun, MetaSummary
from knockout.runs import Column, RunKind
from knockout.storage._store import RunRecord, Store


class MetaKind(RunKind):
    name = "meta"
    title = "meta-evaluation"
    run = MetaRun
    summary_model = MetaSummary
    tables = ("judgements",)
    rank = 2

    def tidy(self, store: Store, record: RunRecord, table: str) -> list[dict[str, Any]]:
        return judgement_rows(store, record)

    def columns(self, store: Store, record: RunRecord) -> list[Column]:
        return [Column("judgement", "id", "item"), Column("evaluators", "evaluators", "list"),
                Column("value", "value", "points")]

    def listing(self, store: Store, record: RunRecord, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"id": r["item_id"], "question_id": r["question_id"],
                 "evaluators": r["details"].get("evaluators") or [], "value": r["score"], "valid": r["valid"],
                 "winner": r["details"].get("winner"), "gap": None, "error": r["details"].get("error")}
                for r in results]

    def item_view(self, store: Store, record: RunRecord, row: dict[str, Any], view: dict[str, Any]) -> None:
        d = row["details"]
        if row["valid"]:
            view["facts"].append(("Parsed value", "–" if row["score"] is None else f"{row['score']:g}"))
        view["facts"].append(("Evaluators", " vs ".join(d.get("evaluators") or [])))
        if d.get("winner"):
            view["facts"].append(("Winner", str(d["winner"])))
        if d.get("criteria"):
            view["facts"].append(("Criteria", "; ".join(d["criteria"])))
        view["transcript"] = [(t.get("round"), t.get("speaker"), t.get("text")) for t in d.get("transcript") or []]


def judgement_rows(store: Store, run: RunRecord) -> list[dict[str, Any]]:
    """The tidy ``judgements`` table: one row per meta-judgement."""
    from knockout.reports._tidy import Tokens, run_cols

    tokens = Tokens(store)
    base = run_cols(run)
    framework = (run.config.get("options") or {}).get("framework")
    rows = []
    for r in store.results(run.id):
        d = r["details"]
        ev = list(d.get("evaluators") or [])
        rows.append({**base, "framework": framework, "judgement_id": r["item_id"], "item": r["question_id"],
                     "evaluator_1": ev[0] if ev else None, "evaluator_2": ev[1] if len(ev) > 1 else None,
                     "value": r["score"], "valid": r["valid"], "winner": d.get("winner"),
                     "swapped": d.get("swapped"), "rounds": d.get("rounds"), "error": d.get("error"),
                     **tokens.of(d)})
    return rows
