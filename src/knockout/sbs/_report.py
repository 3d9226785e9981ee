"""``knockout report`` for side-by-side runs: every metric recomputed from the stored verdicts.

A side-by-side run (``kind = "sbs"``, made by ``knockout sbs``) stores per item the judge's verdict in
both orders, in candidate terms (A candidate better, B baseline better, C both good, D both bad, E
invalid), the ensembled human verdict and the annotators' verdicts.  The report recomputes the verdict
distributions, Cohen's kappa, accuracy, MPCC and the position-bias metrics from those rows alone (the
window and stride of the run's configuration), adds the human x judge confusion per order, the
annotators' agreement and the run's cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from knockout.errors import ConfigError
from knockout.metrics._bias import sbs_length
from knockout.metrics._bootstrap import DEFAULT_RESAMPLES
from knockout.reports._runs import LoadedRun
from knockout.reports._tables import Table, num, pct
from knockout.runs import ReportOptions, kind_of
from knockout.sbs._metrics import human_agreement, sbs_metrics, soft_metrics
from knockout.sbs._verdicts import CLASSES, INVALID

ORDERS = ("swap0", "swap1")
ORDER_LABEL = {"swap0": "swap 0 (candidate first)", "swap1": "swap 1 (baseline first)", "mean": "mean"}


def confusion(human: list[str | None], judge: list[str]) -> dict[str, dict[str, int]]:
    """``{human class: {judge class: count}}`` over the items with a human verdict."""
    out: dict[str, dict[str, int]] = {h: {j: 0 for j in (*CLASSES, INVALID)} for h in CLASSES}
    for h, j in zip(human, judge, strict=True):
        if h is not None and h in out:
            out[h][j if j in out[h] else INVALID] += 1
    return out


def verdict_lists(results: Sequence[dict[str, Any]], path: Path, run_id: str
                  ) -> tuple[dict[str, list[str]], list[str | None], list[dict[str, str]]]:
    """(verdicts per order, ensembled human verdicts, annotators' verdicts) of a side-by-side run's results."""
    verdicts: dict[str, list[str]] = {o: [] for o in ORDERS}
    humans: list[str | None] = []
    annotations: list[dict[str, str]] = []
    for r in results:
        d = r["details"]
        try:
            for o in ORDERS:
                verdicts[o].append(str(d["verdicts"][o]))
        except (KeyError, TypeError):
            raise ConfigError(f"{path}: run {run_id}, item {r['item_id']}: no 'verdicts' field "
                              "(not a side-by-side result)") from None
        humans.append(d.get("human"))
        if d.get("human_verdicts"):
            annotations.append(dict(d["human_verdicts"]))
    return verdicts, humans, annotations


def build_sbs_report(run: LoadedRun, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """The side-by-side report of one stored run (the ``knockout report --json`` object for sbs runs), with
    the sections its kind adds (a side-by-side jury: ``jury``)."""
    rec, results, snapshot = run.run, run.results, run.items
    verdicts, humans, annotations = verdict_lists(results, run.store_path, rec.id)
    cfg = rec.config
    has_human = any(h is not None for h in humans)
    metrics = sbs_metrics(verdicts["swap0"], verdicts["swap1"], humans if has_human else None,
                          window=int(cfg.get("window", 20)), stride=int(cfg.get("stride", 5)))
    if cfg.get("preference") == "soft":  # each item's verdict from both orders' token probabilities
        softs = [r["details"].get("soft") or INVALID for r in results]
        firsts = [tuple(r["details"].get("first_better") or (None, None)) for r in results]
        metrics["soft"] = soft_metrics(softs, firsts, humans if has_human else None)
    return {
        "kind": "sbs",
        "run": {
            "run_id": rec.id, "kind": rec.kind, "store": str(run.store_path), "method": rec.method,
            "judge": rec.judge, "simulated_judge": rec.simulated, "data": rec.data_source, "status": rec.status,
            "results": len(results), "prompt": cfg.get("prompt"), "debate": cfg.get("debate", "none"),
        },
        "items": len(results),
        "orders_invalid": sum(v == INVALID for o in ORDERS for v in verdicts[o]),
        "metrics": metrics,
        "confusion": {o: confusion(humans, verdicts[o]) for o in ORDERS} if has_human else None,
        "human_agreement": human_agreement(annotations) if annotations else {},
        "length": sbs_length(snapshot, verdicts["swap0"], verdicts["swap1"], humans,
                             [str(r["item_id"]) for r in results]) if len(snapshot.questions) else None,
        "cost": run.cost,
        **kind_of(rec.kind).report_sections(run, ReportOptions(resamples=resamples, seed=seed)),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def sbs_tables(rep: dict[str, Any]) -> list[Table]:
    """Headline, distributions, confusions, annotator agreement and cost as tables."""
    m, run = rep["metrics"], rep["run"]
    head = Table(f"side-by-side run {run['run_id']}: {run['method']} · {run['prompt']} · {run['judge']}",
                 ["metric", "swap 0", "swap 1", "mean / both orders"],
                 note="A candidate better, B baseline better, C both good, D both bad, E invalid. "
                      "PBias@AB > 0: the first-shown answer is favoured.")
    rows = head.rows
    rows.append(["items (orders invalid)", str(m["invalid"]["swap0"]), str(m["invalid"]["swap1"]),
                 f"{rep['items']} ({rep['orders_invalid']} of {2 * rep['items']} orders E)"])
    if "kappa" in m:
        for key, label in (("kappa", "Cohen's kappa vs human"), ("kappa_3class", "kappa, C+D merged"),
                           ("accuracy", "accuracy vs human"), ("mpcc", f"MPCC N={m['window']} K={m['stride']}")):
            rows.append([label, num(m[key]["swap0"]), num(m[key]["swap1"]), num(m[key]["mean"])])
        rows.append(["accuracy delta / MPCC-delta", "", "", f"{num(m['accuracy']['delta'])} / "
                     f"{num(m['mpcc_delta'])}"])
    for key, label in (("pbias_ab", "PBias@AB"), ("con_abcd", "Con@ABCD"), ("pcon_ab", "PCon@AB"),
                       ("mpcc_consistency", "MPCC-Consistency")):
        rows.append([label, "", "", num(m[key])])
    soft = m.get("soft")
    if soft:  # --preference soft: the items' verdicts from both orders' token probabilities
        if "kappa" in soft:
            for key, label in (("kappa", "soft: Cohen's kappa vs human"), ("kappa_3class", "soft: kappa, C+D merged"),
                               ("accuracy", "soft: accuracy vs human")):
                rows.append([label, "", "", num(soft[key])])
        rows.append(["soft: PBias (probabilities) / consistency", "", "",
                     f"{num(soft['pbias_soft'])} / {num(soft['con_soft'])}"])
    if run["simulated_judge"]:
        rows.append(["NOTE", "", "", "scripted judge: a simulation, not an LLM"])

    classes = [*CLASSES, INVALID]
    dist = Table("verdict distribution (%)", ["order", *classes])
    for o in ("swap0", "swap1", "mean"):
        dist.rows.append([ORDER_LABEL[o], *(_pct(m["distribution"][o][c]) for c in classes)])
    if soft:
        dist.rows.append(["soft (both orders)", *(_pct(soft["distribution"][c]) for c in classes)])
    if "human_distribution" in m:
        dist.rows.append([f"human (n {m['n_human']})", *(_pct(m["human_distribution"][c]) for c in classes)])
    tables = [head, dist]
    for o, conf in (rep.get("confusion") or {}).items():
        t = Table(f"human (rows) x judge (columns), {ORDER_LABEL[o]}", ["human", *classes])
        t.rows += [[h, *(str(conf[h][j]) for j in classes)] for h in CLASSES if sum(conf[h].values())]
        tables.append(t)
    ha = rep.get("human_agreement") or {}
    if ha.get("pairs"):
        t = Table("annotator agreement", ["annotators", "Cohen's kappa"],
                  note=f"Fleiss' kappa {num(ha.get('fleiss'))} over {ha.get('n_fleiss')} items")
        t.rows += [[k, num(v)] for k, v in ha["pairs"].items()]
        tables.append(t)
    ln = rep.get("length")
    if ln:
        tables.append(Table("length: A/B verdicts preferring the longer answer (words)", ["who", "share", "verdicts"],
                            [["judge (both orders)", pct(ln["longer_preferred"]), str(ln["verdicts"])],
                             ["humans", pct(ln["longer_preferred_human"]), str(ln["human_verdicts"])]]))
    tables += kind_of(run["kind"]).section_tables(rep)
    c = rep["cost"]
    cost = Table("cost" + (" (the jury: its members added up)" if rep.get("jury") else ""),
                 ["requests", "live calls", "prompt tokens", "completion tokens", "judge s", "wall s"])
    cost.rows.append([str(c["requests"]), str(c["live_calls"]), str(c["prompt_tokens"]),
                      str(c["completion_tokens"]), num(c["judge_s"], 1), num(c["wall_s"], 1)])
    tables.append(cost)
    return tables
