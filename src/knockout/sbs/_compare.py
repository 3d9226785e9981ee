"""``knockout compare`` of side-by-side runs: the layout of Titova et al.'s Tables 1 and 3-6.

One row per run (a judge, a prompt, a debate mode, or a jury), the human row first: the verdict shares
A-E in % (the mean of both orders, as the paper reports them), Cohen's kappa against the human verdict
(mean of orders), MPCC (mean of orders), PCon@AB, MPCC-Consistency and MPCC-delta; then a second table
with PBias@AB, Con@ABCD, accuracy and the cost.  Every figure is recomputed from the stored verdicts
(:mod:`knockout.sbs._metrics`).  Kappa, accuracy, PCon@AB, Con@ABCD and PBias@AB have 95% intervals from a
seeded bootstrap over items; MPCC, MPCC-Consistency and MPCC-delta have none (their sliding windows run
over the benchmark order, which a resample of items would not keep).  Every run after the first on the
same items also gets its kappa minus the first run's, by paired bootstrap (the same resampled items for
both).  A row is named by what differs between the runs: the prompt when all share a judge, the judge
when all share a prompt, else both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knockout.errors import ConfigError
from knockout.metrics._bootstrap import DEFAULT_RESAMPLES
from knockout.reports._tables import Table, num, pvalue, with_ci
from knockout.runs import kind_of
from knockout.sbs._metrics import bootstrap_intervals, paired_kappa, sbs_metrics
from knockout.sbs._report import verdict_lists
from knockout.sbs._verdicts import ALL_CLASSES
from knockout.storage._store import RunRecord, Store


def _name(rec: RunRecord) -> tuple[str, str]:
    cfg = rec.config
    prompt = str(cfg.get("prompt", "?")) + ("" if cfg.get("debate", "none") == "none" else f" +{cfg['debate']}")
    return rec.judge, prompt


def build_sbs_comparison(refs: Sequence[tuple[Store, RunRecord]], *, resamples: int = DEFAULT_RESAMPLES,
                         seed: int = 0) -> dict[str, Any]:
    """Runs x the paper's figures (module doc), with the human row and paired kappa differences against the
    first run (none for one run: an experiment of one judge and one prompt gets the figures alone)."""
    if not refs:
        raise ConfigError("compare needs at least one run")
    rows: list[dict[str, Any]] = []
    lists: list[tuple[dict[str, list[str]], list[str | None]]] = []
    for store, rec in refs:
        path = store.path
        results = store.results(rec.id)
        cost = kind_of(rec.kind).cost(store, rec)
        if not results:
            raise ConfigError(f"{path}: run {rec.id} has no results (status {rec.status})")
        v, humans, _ = verdict_lists(results, path, rec.id)
        has = any(h is not None for h in humans)
        cfg = rec.config
        m = sbs_metrics(v["swap0"], v["swap1"], humans if has else None, window=int(cfg.get("window", 20)),
                        stride=int(cfg.get("stride", 5)))
        judge, prompt = _name(rec)
        rows.append({"run_id": rec.id, "store": str(path), "kind": rec.kind, "judge": judge, "prompt": prompt,
                     "status": rec.status, "simulated_judge": rec.simulated, "data": rec.data_source,
                     "data_fingerprint": rec.data_fingerprint, "items": len(results), "metrics": m,
                     "ci": bootstrap_intervals(v["swap0"], v["swap1"], humans if has else None,
                                               resamples=resamples, seed=seed),
                     "cost": cost})
        lists.append((v, humans))
    judges = {r["judge"] for r in rows}
    prompts = {r["prompt"] for r in rows}
    for r in rows:
        r["label"] = r["prompt"] if len(judges) == 1 else r["judge"] if len(prompts) == 1 else \
            f"{r['judge']} · {r['prompt']}"
    base_v, base_h = lists[0]
    for r, (v, _) in zip(rows[1:], lists[1:], strict=True):
        if r["data_fingerprint"] != rows[0]["data_fingerprint"] or not any(h is not None for h in base_h):
            r["kappa_vs_first"] = None
            continue
        r["kappa_vs_first"] = paired_kappa((base_v["swap0"], base_v["swap1"]), (v["swap0"], v["swap1"]), base_h,
                                           resamples=resamples, seed=seed)
    human = rows[0]["metrics"].get("human_distribution")
    return {"kind": "sbs", "runs": rows, "human": {"distribution": human, "n": rows[0]["metrics"].get("n_human")}
            if human else None, "resamples": resamples, "seed": seed}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def sbs_comparison_tables(cmp: dict[str, Any]) -> list[Table]:
    t = Table("side-by-side runs compared (Titova et al., Tables 1 and 3-6)",
              ["run", "judge / prompt", *(f"{c} %" for c in ALL_CLASSES), "CK [95% CI]", "MPCC", "PCon@AB [95% CI]",
               "MPCC-Consistency", "MPCC-delta", "CK - first [95% CI]", "p"],
              note="A-E: share of verdicts, mean of both orders; CK (Cohen's kappa) and MPCC: mean of both orders "
                   f"against the human verdict; CIs: {cmp['resamples']} bootstrap resamples of items (none for the "
                   "MPCC figures, whose windows follow the benchmark order)")
    h = cmp.get("human")
    if h:
        t.rows.append(["", f"experts (human, n {h['n']})", *(_pct(h["distribution"][c]) for c in ALL_CLASSES),
                       *["-"] * 7])
    for r in cmp["runs"]:
        m, ci = r["metrics"], r["ci"]
        d = r.get("kappa_vs_first")
        t.rows.append([r["run_id"], r["label"] + (" (SIMULATION)" if r["simulated_judge"] else ""),
                       *(_pct(m["distribution"]["mean"][c]) for c in ALL_CLASSES),
                       with_ci({"k": (m.get("kappa") or {}).get("mean"), "k_ci": ci.get("kappa")}, "k"),
                       num((m.get("mpcc") or {}).get("mean")),
                       with_ci({"p": m.get("pcon_ab"), "p_ci": ci.get("pcon_ab")}, "p"),
                       num(m.get("mpcc_consistency")), num(m.get("mpcc_delta")),
                       with_ci({"d": d["delta"], "d_ci": d["ci"]}, "d") if d else "-",
                       pvalue(d["p_bootstrap"]) if d else "-"])
    b = Table("position bias, accuracy and cost", ["run", "judge / prompt", "items", "PBias@AB [95% CI]",
                                                    "Con@ABCD [95% CI]", "accuracy [95% CI]", "requests",
                                                    "live calls", "tokens paid / from scratch"],
              note="PBias@AB > 0: the first-shown answer is favoured; accuracy: mean of both orders")
    for r in cmp["runs"]:
        m, ci, c = r["metrics"], r["ci"], r["cost"]
        b.rows.append([r["run_id"], r["label"], num(r["items"]),
                       with_ci({"p": m.get("pbias_ab"), "p_ci": ci.get("pbias_ab")}, "p"),
                       with_ci({"c": m.get("con_abcd"), "c_ci": ci.get("con_abcd")}, "c"),
                       with_ci({"a": (m.get("accuracy") or {}).get("mean"), "a_ci": ci.get("accuracy")}, "a"),
                       num(c.get("requests")), num(c.get("live_calls")),
                       f"{num(c.get('tokens'))} / {num(c.get('scratch_tokens'))}"])
    return [t, b]
