"""The jury section of a report: each member's and the jury's agreement with humans, how far the members
agree with each other, and what the jury cost (the sum of its members).

Grading juries: question-level Pearson with its 95% cluster-bootstrap CI (questions resampled) for each
member and for the jury, the jury minus each member by paired bootstrap; inter-judge agreement on the
normalised scores (score / max points): Krippendorff's alpha (interval; every answer at least two members
graded validly), ICC(2,1) and ICC(3,1) (answers every member graded validly), each with a cluster-bootstrap
CI, and Pearson between every two members (:mod:`knockout.metrics._interrater`).  Side-by-side juries:
kappa and accuracy (mean of orders, with item-bootstrap CIs), MPCC, PCon@AB and PBias@AB per member and for
the jury; Krippendorff's alpha (nominal) over every item and order, and Cohen's kappa between every two
members.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from knockout._verdict import Verdict
from knockout.data._records import ItemSet
from knockout.metrics._bootstrap import DEFAULT_RESAMPLES, bootstrap
from knockout.reports._tables import Table, num, with_ci
from knockout.storage._store import RunRecord, Store

T = TypeVar("T")
COST_KEYS = ("live_calls", "prompt_tokens", "completion_tokens", "tokens", "judge_s", "format_retries",
             "scratch_prompt_tokens", "scratch_completion_tokens", "scratch_tokens")


@dataclass
class Member:
    """One member of a jury as read from the store: its entry in the jury's configuration, its run (None
    when the run is not in this store), the run's results and cost."""

    entry: dict[str, Any]
    run: RunRecord | None
    results: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)


def load_members(store: Store, run: RunRecord) -> list[Member]:
    """Every member of the jury ``run`` with its results and cost (the only store reads of a jury section)."""
    from knockout.runs import kind_of

    out = []
    for m in run.config.get("members", []):
        rec = store.get_run(str(m.get("run_id")))
        out.append(Member(m, rec) if rec is None else
                   Member(m, rec, store.results(rec.id), kind_of(rec.kind).cost(store, rec)))
    return out


def member_rows(members: list[Member], figures: Callable[[list[dict[str, Any]]], tuple[dict[str, Any], T]]
                ) -> tuple[list[dict[str, Any]], list[str], list[T]]:
    """One row per member (``figures(results)`` gives its fields and the data the inter-judge figures need;
    a member whose run is not in the store is marked ``missing``), with the present members' labels and data."""
    rows: list[dict[str, Any]] = []
    labels: list[str] = []
    data: list[T] = []
    for mem in members:
        m, rec = mem.entry, mem.run
        label = str(m.get("label"))
        if rec is None:
            rows.append({"label": label, "run_id": m.get("run_id"), "missing": True})
            continue
        fields, d = figures(mem.results)
        rows.append({"label": label, "run_id": rec.id, "judge": rec.judge, "prompt": m.get("prompt"),
                     "status": rec.status, **fields, "cost": mem.cost})
        labels.append(label)
        data.append(d)
    return rows, labels, data


def jury_cost(members: list[Member], own: dict[str, Any]) -> dict[str, Any]:
    """The jury's cost: its members' calls, tokens and judge time added up (the jury itself calls no judge);
    ``requests`` and ``wall_s`` from the jury's own summary (which already sums its members' requests)."""
    costs = [m.cost for m in members if m.run is not None]
    out = dict(own)
    for k in COST_KEYS:
        out[k] = round(sum(c.get(k) or 0 for c in costs), 3) if k == "judge_s" else sum(c.get(k) or 0 for c in costs)
    out["members"] = len(costs)
    return out


def _ci(iv: Any) -> list[float] | None:
    return None if iv.low is None or iv.high is None else [iv.low, iv.high]


def grade_jury_section(members: list[Member], run: RunRecord, items: ItemSet, results: list[dict[str, Any]], *,
                       resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """The jury section of a grading jury's report (module doc)."""
    from knockout.metrics._analysis import analyse
    from knockout.metrics._comparison import paired_comparison
    from knockout.metrics._interrater import icc, krippendorff_alpha, pairwise_pearson

    def figures(res: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        ql = analyse(items, res, resamples=resamples, seed=seed).to_dict()["question_level"]
        paired = paired_comparison(items, results, res, resamples=resamples, seed=seed)
        return {"question_level": ql, "jury_minus_member": paired["question_level"]}, res

    rows, labels, member_results = member_rows(members, figures)
    jury_ql = analyse(items, results, resamples=resamples, seed=seed).to_dict()["question_level"]

    # answers x members matrix of normalised scores (NaN: invalid or missing)
    answers = list(items)
    mp = np.array([items.question_of(a).max_points for a in answers], dtype=float)
    mat = np.full((len(answers), len(member_results)), np.nan)
    pos = {a.id: i for i, a in enumerate(answers)}
    for j, res in enumerate(member_results):
        for r in res:
            i = pos.get(str(r["item_id"]))
            if i is not None and r.get("valid") and r.get("score") is not None:
                mat[i, j] = float(r["score"]) / mp[i]
    clusters = np.unique([a.question_id for a in answers], return_inverse=True)[1]

    def stat(idx: np.ndarray) -> np.ndarray:
        sub = mat[idx]
        a = krippendorff_alpha(sub.T, "interval")
        c = icc(sub)
        return np.array([np.nan if a is None else a, np.nan if c["icc2_1"] is None else c["icc2_1"],
                         np.nan if c["icc3_1"] is None else c["icc3_1"]])

    full = stat(np.arange(len(answers)))
    ivs = bootstrap(stat, clusters, resamples=resamples, seed=seed) if resamples and len(answers) >= 3 and \
        mat.shape[1] >= 2 else []
    inter: dict[str, Any] = {"units": int(np.sum(np.sum(np.isfinite(mat), axis=1) >= 2)),
                             "complete": int(np.sum(np.all(np.isfinite(mat), axis=1)))}
    for k, (name, v) in enumerate(zip(("alpha_interval", "icc2_1", "icc3_1"), full, strict=True)):
        inter[name] = None if not np.isfinite(v) else float(v)
        inter[f"{name}_ci"] = _ci(ivs[k]) if ivs else None
    inter["pairs"] = pairwise_pearson(mat, labels)
    return {"of": "grade", "aggregate": run.config.get("aggregate"), "members": rows,
            "jury": {"question_level": jury_ql}, "inter_judge": inter}


def sbs_jury_section(members: list[Member], run: RunRecord, results: list[dict[str, Any]], path: Path, *,
                     resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """The jury section of a side-by-side jury's report (module doc)."""
    from knockout.metrics._interrater import krippendorff_alpha
    from knockout.metrics._kappa import cohen_kappa
    from knockout.sbs._metrics import bootstrap_intervals, sbs_metrics
    from knockout.sbs._report import verdict_lists

    window, stride = int(run.config.get("window", 20)), int(run.config.get("stride", 5))

    def figures(res: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[str]]]:
        v, humans, _ = verdict_lists(res, path, run.id)
        has = any(h is not None for h in humans)
        m = sbs_metrics(v["swap0"], v["swap1"], humans if has else None, window=window, stride=stride)
        m["ci"] = bootstrap_intervals(v["swap0"], v["swap1"], humans if has else None, resamples=resamples,
                                      seed=seed)
        return m, v

    def member(res: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[str]]]:
        met, v = figures(res)
        return {"metrics": met}, v

    rows, labels, member_verdicts = member_rows(members, member)
    jury_metrics, _ = figures(results)
    units = np.array([[None if x == Verdict.E else x for o in ("swap0", "swap1") for x in v[o]]
                      for v in member_verdicts], dtype=object)
    pairs = []
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            a = [x for o in ("swap0", "swap1") for x in member_verdicts[i][o]]
            b = [x for o in ("swap0", "swap1") for x in member_verdicts[j][o]]
            pairs.append({"a": labels[i], "b": labels[j], "n": len(a), "kappa": cohen_kappa(a, b)})
    inter = {"units": int(units.shape[1]) if units.ndim == 2 else 0,
             "alpha_nominal": krippendorff_alpha(units, "nominal") if len(labels) >= 2 else None, "pairs": pairs}
    return {"of": "sbs", "aggregate": run.config.get("aggregate"), "members": rows,
            "jury": {"metrics": jury_metrics}, "inter_judge": inter}


# -- tables -------------------------------------------------------------------------------------------------
def _cost_cells(c: dict[str, Any]) -> list[str]:
    return [num(c.get("live_calls")), num(c.get("tokens"))]


def jury_tables(sec: dict[str, Any], cost: dict[str, Any]) -> list[Table]:
    """The members and the jury side by side, inter-judge agreement, and cost."""
    agg = sec.get("aggregate")
    if sec["of"] == "grade":
        t = Table(f"jury ({agg}): each member and the jury against the humans",
                  ["member", "run", "n", "invalid", "Pearson [95% CI]", "jury - member [95% CI]", "p",
                   "live calls", "tokens"],
                  note="question level, normalised scores; CIs: cluster bootstrap over questions; "
                       "jury - member: paired bootstrap on the answers both graded")
        for m in sec["members"]:
            if m.get("missing"):
                t.rows.append([m["label"], str(m["run_id"]), "-", "-", "member run not in this store", "-", "-",
                               "-", "-"])
                continue
            q, d = m["question_level"], m["jury_minus_member"]
            t.rows.append([m["label"], m["run_id"], num(q.get("n")), num(q.get("invalid")), with_ci(q, "pearson"),
                           with_ci({"d": d.get("delta"), "d_ci": d.get("ci")}, "d"),
                           "-" if d.get("p_bootstrap") is None else f"{d['p_bootstrap']:.3f}", *_cost_cells(m["cost"])])
        q = sec["jury"]["question_level"]
        t.rows.append([f"JURY ({agg})", "", num(q.get("n")), num(q.get("invalid")), with_ci(q, "pearson"), "", "",
                       *_cost_cells(cost)])
        ij = sec["inter_judge"]
        inter = Table("agreement among the jury's members (normalised scores)", ["figure", "value [95% CI]", "units"],
                      note="alpha: the krippendorff package, interval level, answers at least two members graded; "
                           "ICC: two-way ANOVA (numpy), answers every member graded")
        inter.rows += [["Krippendorff's alpha (interval)", with_ci(ij, "alpha_interval"), num(ij["units"])],
                       ["ICC(2,1) absolute agreement", with_ci(ij, "icc2_1"), num(ij["complete"])],
                       ["ICC(3,1) consistency", with_ci(ij, "icc3_1"), num(ij["complete"])]]
        inter.rows += [[f"Pearson {p['a']} ~ {p['b']}", num(p["pearson"]), num(p["n"])] for p in ij["pairs"]]
        return [t, inter]
    t = Table(f"side-by-side jury ({agg}): each member and the jury against the humans",
              ["member", "run", "kappa [95% CI]", "accuracy [95% CI]", "MPCC", "PCon@AB [95% CI]",
               "PBias@AB", "E orders", "live calls", "tokens"],
              note="kappa, accuracy, MPCC: mean of both orders; CIs: items resampled")

    def cells(m: dict[str, Any]) -> list[str]:
        ci = m.get("ci") or {}
        return [with_ci({"k": (m.get("kappa") or {}).get("mean"), "k_ci": ci.get("kappa")}, "k"),
                with_ci({"a": (m.get("accuracy") or {}).get("mean"), "a_ci": ci.get("accuracy")}, "a"),
                num((m.get("mpcc") or {}).get("mean")),
                with_ci({"p": m.get("pcon_ab"), "p_ci": ci.get("pcon_ab")}, "p"), num(m.get("pbias_ab")),
                num(m["invalid"]["swap0"] + m["invalid"]["swap1"])]

    for m in sec["members"]:
        if m.get("missing"):
            t.rows.append([m["label"], str(m["run_id"]), "member run not in this store", *["-"] * 7])
            continue
        t.rows.append([m["label"], m["run_id"], *cells(m["metrics"]), *_cost_cells(m["cost"])])
    t.rows.append([f"JURY ({agg})", "", *cells(sec["jury"]["metrics"]), *_cost_cells(cost)])
    ij = sec["inter_judge"]
    inter = Table("agreement among the jury's members (verdicts A-D; E left out)", ["figure", "value", "units"],
                  note="alpha: the krippendorff package, nominal level, every item in both orders")
    inter.rows.append(["Krippendorff's alpha (nominal)", num(ij["alpha_nominal"]), num(ij["units"])])
    inter.rows += [[f"Cohen's kappa {p['a']} ~ {p['b']}", num(p["kappa"]), num(p["n"])] for p in ij["pairs"]]
    return [t, inter]
