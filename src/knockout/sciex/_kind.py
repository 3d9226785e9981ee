"""The ``solve`` run kind: a model answers exam questions as a SciEx examinee.

Its results are answers, not grades: they are graded by a ``grade`` run over the examinees' answers, and
ranked by ``knockout leaderboard``.  It is listed, exported (every answer with its raw reply) and read in the
viewer (each question's answer and the model's calls) like every kind.
"""

from __future__ import annotations

from typing import Any

from knockout.runs import Column, RunKind
from knockout.sciex._solve import SolveRun, SolveSummary
from knockout.storage._store import RunRecord, Store


class SolveKind(RunKind):
    name = "solve"
    title = "solve"
    run = SolveRun
    summary_model = SolveSummary
    rank = 3

    def headline(self, record: RunRecord) -> dict[str, Any]:
        s = record.summary or {}
        return {"invalid": s.get("failed_answers"), "pearson": None}

    def columns(self, store: Store, record: RunRecord) -> list[Column]:
        return [Column("question", "id", "item"), Column("answer", "answer")]

    def listing(self, store: Store, record: RunRecord, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from knockout.reports._replies import replies_in

        return [{"id": r["item_id"], "question_id": r["question_id"], "valid": r["valid"], "gap": None,
                 "answer": next(replies_in(r["details"]), "")[:120], "error": r["details"].get("error")}
                for r in results]

    def item_view(self, store: Store, record: RunRecord, row: dict[str, Any], view: dict[str, Any]) -> None:
        from knockout.reports._transcripts import snapshot

        items = snapshot(store, record)
        if items is not None and row["item_id"] in items.questions:
            view["question"] = items.questions[row["item_id"]]
        view["facts"].append(("Examinee", record.judge))
