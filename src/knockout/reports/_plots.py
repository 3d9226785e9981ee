"""Plots as PNG bytes (matplotlib, Agg backend, imported only here; ``pip install 'knockout[plots]'``)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from knockout.errors import ConfigError
from knockout.metrics._analysis import Analysis


def _plt() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plots need matplotlib: pip install 'knockout[plots]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    return buf.getvalue()


def scatter(an: Analysis) -> bytes:
    """Judge vs human (normalised), one marker per distinct point, its area growing with the count."""
    plt = _plt()
    al = an.aligned
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    if len(al):
        pts, counts = np.unique(np.round(np.c_[al.human_norm, al.judge_norm], 6), axis=0, return_counts=True)
        ax.scatter(pts[:, 0], pts[:, 1], s=18 + 22 * counts, alpha=0.6, color="#1f77b4", edgecolor="k",
                   linewidth=0.4)
        lo = float(min(0.0, pts.min()))
        hi = float(max(1.0, pts.max()))
        ax.plot([lo, hi], [lo, hi], ls="--", color="grey", lw=1, label="judge = human")
        ax.legend(loc="upper left")
    ax.set_xlabel("human score (share of max points)")
    ax.set_ylabel("judge score (share of max points)")
    ax.set_title(f"judge vs human, {len(al)} answers")
    return _png(fig)


def by_group(groups: list[dict[str, Any]], key: str) -> bytes:
    """Pearson (with 95% CI) and mean difference judge - human per group, e.g. per difficulty."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8.4, 3.6))
    names = [g["group"] for g in groups]
    x = np.arange(len(names))
    r = np.array([np.nan if g.get("pearson") is None else g["pearson"] for g in groups])
    lo = np.array([r[i] - g["pearson_ci"][0] if g.get("pearson_ci") else 0 for i, g in enumerate(groups)])
    hi = np.array([g["pearson_ci"][1] - r[i] if g.get("pearson_ci") else 0 for i, g in enumerate(groups)])
    # a CI may miss its estimate by a rounding error: no negative bar
    a1.bar(x, np.nan_to_num(r), yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], capsize=4, color="#4c72b0")
    a1.set_xticks(x, names, rotation=20)
    a1.set_ylabel("Pearson with humans")
    a1.set_title(f"agreement by {key}")
    d = [0.0 if g.get("mean_diff_norm") is None else g["mean_diff_norm"] for g in groups]
    a2.bar(x, d, color=["#c44e52" if v > 0 else "#55a868" for v in d])
    a2.axhline(0, color="k", lw=0.8)
    a2.set_xticks(x, names, rotation=20)
    a2.set_ylabel("judge - human (share of max)")
    a2.set_title(f"inflation by {key}")
    return _png(fig)


def calibration(cal: list[dict[str, Any]]) -> bytes:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    if cal:
        h = [c["human_mean"] for c in cal]
        j = [c["judge_mean"] for c in cal]
        ax.plot(h, j, marker="o", color="#dd8452", label="mean judge score")
        for c in cal:
            ax.annotate(f"n={c['n']}", (c["human_mean"], c["judge_mean"]), textcoords="offset points",
                        xytext=(4, -10), fontsize=7)
        lo, hi = min(0.0, *h, *j), max(1.0, *h, *j)
        ax.plot([lo, hi], [lo, hi], ls="--", color="grey", lw=1, label="perfect calibration")
        ax.legend(loc="upper left")
    ax.set_xlabel("human score bin (mean, share of max)")
    ax.set_ylabel("mean judge score (share of max)")
    ax.set_title("calibration")
    return _png(fig)


def cost_vs_agreement(cmp: dict[str, Any]) -> bytes:
    """One point per run: what it costs from scratch (judge tokens of every request it used, cached or not; or
    requests when no tokens were counted) against Pearson, with CI: a method does not look cheap because
    another method's matches were in the store."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    use_tokens = all((r["cost"].get("scratch_tokens") or 0) > 0 for r in cmp["runs"])
    for r in cmp["runs"]:
        q = r["question_level"]
        if q.get("pearson") is None:
            continue
        x = r["cost"]["scratch_tokens"] if use_tokens else r["cost"]["requests"]
        ci = q.get("pearson_ci") or [q["pearson"], q["pearson"]]
        ax.errorbar([x], [q["pearson"]], yerr=[[max(0.0, q["pearson"] - ci[0])], [max(0.0, ci[1] - q["pearson"])]],
                    fmt="o", capsize=4)
        ax.annotate(f"{r['run_id'][:6]} {r['label'][:40]}", (x, q["pearson"]), textcoords="offset points",
                    xytext=(6, 4), fontsize=7)
    ax.set_xlabel("judge tokens, from scratch" if use_tokens else "judge requests")
    ax.set_ylabel("Pearson with humans (question level)")
    ax.set_title("cost vs agreement")
    ax.margins(x=0.25, y=0.15)
    return _png(fig)


def report_plots(report: dict[str, Any], an: Analysis) -> dict[str, bytes]:
    """The report's figures by title."""
    from knockout.metrics._analysis import breakdown

    plots = {"judge vs human": scatter(an)}
    diff = report["breakdowns"].get("difficulty") if report["level"] == "question" else None
    if diff is None:
        diff = breakdown(an.aligned, an.rows, "difficulty", "question", resamples=report["resamples"],
                         seed=report["seed"])
    if diff and not (len(diff) == 1 and diff[0]["group"] == "(none)"):
        plots["by difficulty"] = by_group(diff, "difficulty")
    if report.get("calibration"):
        plots["calibration"] = calibration(report["calibration"])
    return plots


def group_deltas(cmp: dict[str, Any], key_section: dict[str, Any]) -> bytes:
    """``compare --by``: each run minus the baseline per group, with the paired-bootstrap 95% CI."""
    plt = _plt()
    groups = [g for g in key_section["groups"] if g["group"] != "all"]
    runs = cmp["runs"]
    fig, ax = plt.subplots(figsize=(max(4.8, 1.1 * len(groups) + 2.4), 3.8))
    x = np.arange(len(groups))
    width = 0.7 / max(1, len(runs) - 1)
    for k, r in enumerate(runs[1:]):
        d = np.array([np.nan if g["deltas"][k]["delta"] is None else g["deltas"][k]["delta"] for g in groups])
        lo = np.array([d[i] - g["deltas"][k]["ci"][0] if g["deltas"][k]["ci"] else 0 for i, g in enumerate(groups)])
        hi = np.array([g["deltas"][k]["ci"][1] - d[i] if g["deltas"][k]["ci"] else 0 for i, g in enumerate(groups)])
        pos = x + (k - (len(runs) - 2) / 2) * width
        ax.errorbar(pos, d, yerr=[lo, hi], fmt="o", capsize=4, label=f"{r['run_id']} ({r['label']})"[:60])
    ax.axhline(0, color="grey", lw=1, ls="--")
    ax.set_xticks(x, [g["group"] for g in groups], rotation=30 if len(groups) > 5 else 0)
    ax.set_ylabel(f"Pearson minus {runs[0]['run_id']}")
    ax.set_title(f"difference to the baseline by {key_section['key']}")
    ax.legend(fontsize=7, loc="best")
    return _png(fig)
