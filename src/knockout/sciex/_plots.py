"""Bar charts of the leaderboard as PNG bytes (matplotlib, as SciEx's Figures 1-3)."""

from __future__ import annotations

from typing import Any

import numpy as np

from knockout.reports._plots import _plt, _png


def _sources(board: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, result) per examinee: expert-graded, else the first judge's (label marked ``*``)."""
    first = board["judges"][0]["key"] if board["judges"] else None
    out = []
    for r in board["examinees"]:
        if r["expert"]:
            out.append((r["examinee"], r["expert"]))
        elif first and r["judges"].get(first):
            out.append((r["examinee"] + "*", r["judges"][first]))
    return out


def overall(board: dict[str, Any]) -> bytes:
    """Each examinee's grade (mean of per-exam %) by the experts and by each judge, with 95% CIs, and the
    student average as a line."""
    plt = _plt()
    names = [r["examinee"] for r in board["examinees"]]
    series = [("expert", [r["expert"] for r in board["examinees"]])]
    series += [(f"judge {n}", [r["judges"].get(j["key"]) for r in board["examinees"]])
               for n, j in enumerate(board["judges"], 1)]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(names) + 2), 3.8))
    x = np.arange(len(names))
    width = 0.8 / max(1, len(series))
    for i, (label, results) in enumerate(series):
        vals = np.array([np.nan if not r else r["percent"] for r in results], dtype=float)
        lo = np.array([0 if not r or not r.get("percent_ci") else r["percent"] - r["percent_ci"][0] for r in results])
        hi = np.array([0 if not r or not r.get("percent_ci") else r["percent_ci"][1] - r["percent"] for r in results])
        ax.bar(x + (i - (len(series) - 1) / 2) * width, vals, width, yerr=[lo, hi], capsize=2, label=label)
    if board["students"]:
        ax.axhline(board["students"]["percent"], color="grey", ls="--", lw=1, label="student average")
    ax.set_xticks(x, names, rotation=20, ha="right")
    ax.set_ylabel("grade (% of max points)")
    ax.set_title("grade: mean of the per-exam percentages, 95% CI")
    ax.legend(fontsize=8)
    return _png(fig)


def by_group(board: dict[str, Any], key: str, *, diff: bool) -> bytes:
    """Question-level % per group (``diff``: the difference to the student average), one bar per group and
    examinee; the students included when not ``diff`` (Figure 1a)."""
    plt = _plt()
    sources = _sources(board)
    if not diff and board["students"]:
        sources.append(("student", board["students"]))
    groups: list[str] = []
    for _, res in sources:
        for g in res["breakdowns"].get(key, []):
            if g["group"] not in groups:
                groups.append(g["group"])
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(sources) + 2), 3.6))
    x = np.arange(len(sources))
    width = 0.8 / max(1, len(groups))
    for i, g in enumerate(groups):
        vals = []
        for _, res in sources:
            hit = next((h for h in res["breakdowns"].get(key, []) if h["group"] == g), None)
            value = None if hit is None else hit.get("diff_to_students") if diff else hit.get("percent")
            vals.append(np.nan if value is None else value)
        ax.bar(x + (i - (len(groups) - 1) / 2) * width, vals, width, label=g)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(x, [n for n, _ in sources], rotation=20, ha="right")
    ax.set_ylabel("difference to students (points of %)" if diff else "% of max points")
    what = "difference to the student average" if diff else "score"
    ax.set_title(f"{what} by {key} (question level; * judge-graded)")
    ax.legend(fontsize=8)
    return _png(fig)


def leaderboard_plots(board: dict[str, Any]) -> dict[str, bytes]:
    """The charts of the HTML page, by caption."""
    plots = {"grades (experts and judges)": overall(board)}
    if not _sources(board):
        return plots
    plots["by difficulty (Figure 1a)"] = by_group(board, "difficulty", diff=False)
    if board["students"]:
        plots["difference to students by difficulty (Figure 1b)"] = by_group(board, "difficulty", diff=True)
        plots["difference to students by modality (Figure 2)"] = by_group(board, "modality", diff=True)
        plots["difference to students by language (Figure 3)"] = by_group(board, "language", diff=True)
    else:
        plots["by modality"] = by_group(board, "modality", diff=False)
        plots["by language"] = by_group(board, "language", diff=False)
    return plots
