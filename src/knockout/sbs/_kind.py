"""The ``sbs`` run kind: side-by-side verdicts, candidate against baseline in both orders (Titova et al.).

How its runs are read: ``knockout report`` (verdict distributions, kappa, MPCC, position bias,
:mod:`knockout.sbs._report`), ``compare`` (the paper's Tables 1 and 3-6, :mod:`knockout.sbs._compare`),
the tidy ``orders`` table, and the viewer's rows (the verdict in each order against the human one).
A side-by-side jury reads as this kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knockout._verdict import Verdict
from knockout.data._records import ItemSet
from knockout.errors import ConfigError
from knockout.runs import Column, ReportOptions, ReportPage, RunKind
from knockout.sbs._run import SbsRun, SbsSummary
from knockout.storage._store import RunRecord, Store

SBS = "sbs"


class SbsKind(RunKind):
    name = SBS
    title = "side-by-side"
    run = SbsRun
    summary_model = SbsSummary
    tables = ("orders",)
    rank = 1

    def headline(self, record: RunRecord) -> dict[str, Any]:
        s = record.summary or {}
        return {"invalid": s.get("orders_invalid"), "pearson": None}

    def report(self, store: Store, record: RunRecord, options: ReportOptions) -> ReportPage:
        from knockout.reports._runs import read_run
        from knockout.sbs._report import build_sbs_report, sbs_tables

        rep = build_sbs_report(read_run(store, record, items_needed=False), resamples=options.resamples,
                               seed=options.seed)

        def plots() -> dict[str, bytes]:
            from knockout.sbs._plots import sbs_distribution

            return {"verdicts by order": sbs_distribution(rep)}

        return ReportPage(f"knockout report: side-by-side run {record.id}", rep, list(sbs_tables(rep)), plots,
                          [rep["run"]])

    def compare(self, runs: Sequence[tuple[Store, RunRecord]], options: ReportOptions) -> ReportPage:
        from knockout.sbs._compare import build_sbs_comparison

        if [k for k in options.by if k.strip()]:
            raise ConfigError("--by compares grading runs; side-by-side runs are compared as a whole")
        cmp = build_sbs_comparison(runs, resamples=options.resamples, seed=options.seed)
        return ReportPage("knockout: runs compared", cmp, self.compare_tables(cmp), dict, cmp["runs"],
                          transpose=False)

    def compare_tables(self, data: dict[str, Any]) -> list[Any]:
        from knockout.sbs._compare import sbs_comparison_tables

        return list(sbs_comparison_tables(data))

    def tidy(self, store: Store, record: RunRecord, table: str) -> list[dict[str, Any]]:
        from knockout.reports._tidy import snapshot

        return order_rows(store, record, snapshot(store, record))

    # -- the viewer -----------------------------------------------------------------------------------
    def columns(self, store: Store, record: RunRecord) -> list[Column]:
        return [Column("item", "id", "item"), Column("human", "human"), Column("candidate first", "swap0"),
                Column("baseline first", "swap1"), Column("orders off the human", "gap")]

    def listing(self, store: Store, record: RunRecord, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows = []
        for r in results:
            d = r["details"]
            v = d.get("verdicts") or {}
            human = d.get("human")
            gap = None if human is None else sum(v.get(k) != human for k in ("swap0", "swap1"))
            rows.append({"id": r["item_id"], "question_id": r["question_id"], "human": human,
                         "swap0": v.get("swap0"), "swap1": v.get("swap1"), "valid": r["valid"], "gap": gap,
                         "error": d.get("error")})
        return rows

    def item_view(self, store: Store, record: RunRecord, row: dict[str, Any], view: dict[str, Any]) -> None:
        from knockout.reports._transcripts import snapshot

        items = snapshot(store, record)
        item_id = row["item_id"]
        if items is not None and item_id in items.questions:
            view["question"] = items.questions[item_id]
            view["answers"] = items.answers_for(item_id)
        d = row["details"]
        v, shown = d.get("verdicts") or {}, d.get("display") or {}
        humans = d.get("human_verdicts") or {}
        view["facts"] += [
            ("Verdicts (candidate terms)", f"candidate first {v.get('swap0')}, baseline first {v.get('swap1')}"),
            ("As the judge said them", f"{shown.get('swap0')} / {shown.get('swap1')}"),
            ("Human", (d.get("human") or "–") + (" (" + ", ".join(f"{k} {h}" for k, h in humans.items()) + ")"
                                                 if humans else "")),
            ("Prompt, debate", f"{d.get('prompt')}, {d.get('debate')}")]


def order_rows(store: Store, run: RunRecord, items: ItemSet) -> list[dict[str, Any]]:
    """The tidy ``orders`` table: one row per item and order."""
    from knockout.reports._tidy import Tokens, run_cols

    tokens = Tokens(store)
    base = run_cols(run)
    rows = []
    for r in store.results(run.id):
        d = r["details"]
        q = items.questions.get(r["item_id"])
        texts = {a.meta.get("role"): a for a in items.answers_for(r["item_id"])} if q else {}
        sbs = (q.meta.get("sbs") or {}) if q else {}
        for swap in (0, 1):
            key = f"swap{swap}"
            verdict = (d.get("verdicts") or {}).get(key)
            call = (d.get("calls") or {}).get(key) or {}
            human = d.get("human")
            rows.append({
                **base, "item_id": r["item_id"], "swap": swap,
                "shown_first": "baseline" if swap else "candidate",
                "candidate_system": sbs.get("candidate_system"), "baseline_system": sbs.get("baseline_system"),
                "prompt": d.get("prompt"), "debate": d.get("debate"),
                "verdict": verdict, "display": (d.get("display") or {}).get(key), "human": human,
                "agrees_with_human": None if human is None or verdict is None else verdict == human,
                "valid": bool(call.get("valid", verdict not in (None, Verdict.E))), "error": call.get("error"),
                "question_chars": len(q.text) if q else None,
                "candidate_chars": len(texts["candidate"].text) if "candidate" in texts else None,
                "baseline_chars": len(texts["baseline"].text) if "baseline" in texts else None,
                **tokens.of(call)})
    return rows
