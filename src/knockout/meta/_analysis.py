"""Rank evaluators from meta-judgements; compare with the human baseline; check self-preference.

* Paired frameworks (JDEval, MDEval): matches (first shown evaluator, second, 1 / 0.5 / 0); win
  rates as the study's equation (1) — wins / matches, ties counted apart, so winrate(i/j) +
  winrate(j/i) = 1 - ties/matches (its equation (2)) — and the share with ties counted half
  (:func:`knockout.metrics._elo.win_rates`); Elo with K = 4 from 1000 (equations (3)-(5)) averaged
  over ``shuffles`` seeded orders (:func:`knockout.metrics._elo.elo_shuffled`), with the convergence
  check of the study's appendix C: the same with ``check`` (5x) shuffles must not move any rating by
  more than ``tolerance`` points.  The ranking is by Elo.
* Scoring frameworks (JDEval-i, BSMEval): the ranking is by the mean score the meta-judge gave each
  evaluator's assessments.
* Human baseline: accuracy of each evaluator's verdicts against the human label (pairwise; an
  evaluator's missing verdict counts as wrong), or Pearson between its scores and the human scores
  (pointwise; missing scores left out and counted).  Kendall tau (:func:`scipy.stats.kendalltau`)
  between the meta ranking values and the baseline values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats

from knockout._bounds import MAX_K, MAX_SHUFFLES, Seed
from knockout._verdict import Verdict
from knockout.meta._frameworks import Judgement
from knockout.meta._verdicts import VerdictSet
from knockout.metrics._agreement import pearson
from knockout.metrics._elo import Match, elo_shuffled, win_rates

DEFAULT_K = 4.0
DEFAULT_SHUFFLES = 200
TOLERANCE = 3.0  # points: "minor fluctuations ... limited to only 1 or 2 points" (appendix C)


def matches_from(judgements: Sequence[Judgement]) -> list[Match]:
    return [(j.evaluators[0], j.evaluators[1], float(j.value)) for j in judgements
            if j.valid and j.value is not None and len(j.evaluators) == 2]


def match_table(matches: Sequence[Match]) -> dict[str, dict[str, dict[str, float]]]:
    """``table[a][b]``: ``n`` matches of a against b, ``win`` (eq. 1), ``tie`` share, ``score`` (ties half)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for a, b, s in matches:
        for x, y, r in ((a, b, s), (b, a, 1.0 - s)):
            c = counts.setdefault((x, y), [0, 0, 0])
            c[0 if r == 1.0 else 1 if r == 0.5 else 2] += 1
    half = win_rates(matches)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for (x, y), (w, t, lo) in sorted(counts.items()):
        n = w + t + lo
        table.setdefault(x, {})[y] = {"n": n, "win": w / n, "tie": t / n, "score": half[x][y]}
    return table


class EloOptions(BaseModel):
    """The bounds of Elo's options (``knockout elo``, ``knockout meta``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    k: float = Field(default=DEFAULT_K, ge=0, le=MAX_K)
    shuffles: int = Field(default=DEFAULT_SHUFFLES, ge=1, le=MAX_SHUFFLES)
    check: int | None = Field(default=None, ge=1, le=MAX_SHUFFLES)
    seed: Seed = 0  # numpy's generators take no negative seed


def elo_report(matches: Sequence[Match], *, k: float = DEFAULT_K, shuffles: int = DEFAULT_SHUFFLES, seed: int = 0,
               check: int | None = None, tolerance: float = TOLERANCE) -> dict[str, Any]:
    """Shuffled Elo and its convergence check against ``check`` shuffles (default 5 x shuffles)."""
    EloOptions(k=k, shuffles=shuffles, check=check, seed=seed)  # the bounds: a ValidationError
    res = elo_shuffled(matches, k=k, shuffles=shuffles, seed=seed)
    n_check = check if check is not None else 5 * shuffles
    more = elo_shuffled(matches, k=k, shuffles=n_check, seed=seed)
    shift = max((abs(more.ratings[p] - r) for p, r in res.ratings.items()), default=0.0)
    return {
        "k": k,
        "initial": 1000.0,
        "shuffles": shuffles,
        "ratings": res.ratings,
        "std": res.std,
        "convergence": {"shuffles": n_check, "ratings": more.ratings, "max_shift": shift,
                        "tolerance": tolerance, "converged": shift <= tolerance},
    }


def mean_scores(judgements: Sequence[Judgement]) -> dict[str, dict[str, Any]]:
    per: dict[str, list[float]] = {}
    invalid: dict[str, int] = {}
    for j in judgements:
        e = j.evaluators[0]
        per.setdefault(e, [])
        if j.valid and j.value is not None:
            per[e].append(j.value)
        else:
            invalid[e] = invalid.get(e, 0) + 1
    return {e: {"mean": float(np.mean(v)) if v else None, "n": len(v), "invalid": invalid.get(e, 0)}
            for e, v in per.items()}


def ranking(values: dict[str, float | None]) -> list[dict[str, Any]]:
    """Evaluators by value, best first (those without a value last)."""

    def key(e: str) -> tuple[bool, float, str]:
        v = values[e]
        return (v is None, -v if v is not None else 0.0, e)

    return [{"rank": i + 1, "evaluator": e, "value": values[e]} for i, e in enumerate(sorted(values, key=key))]


def baseline(vs: VerdictSet) -> dict[str, dict[str, Any]]:
    """Per evaluator: accuracy (pairwise) or Pearson (pointwise) against the human labels."""
    out: dict[str, dict[str, Any]] = {}
    labelled = [i for i in vs.items if i.human is not None]
    for e in vs.evaluators:
        rows = [(i, i.assessments[e]) for i in labelled if e in i.assessments]
        if vs.kind == "pairwise":
            correct = sum(a.verdict == i.human for i, a in rows)
            out[e] = {"accuracy": correct / len(rows) if rows else None, "n": len(rows),
                      "missing": sum(a.verdict is None for _, a in rows)}
        else:
            pts = [(a.score, float(i.human)) for i, a in rows if a.score is not None and i.human is not None]
            x = [p[0] for p in pts]
            y = [p[1] for p in pts]
            out[e] = {"pearson": pearson(x, y), "n": len(pts), "missing": len(rows) - len(pts)}
    return out


def baseline_values(base: dict[str, dict[str, Any]]) -> dict[str, float]:
    key = "accuracy" if any("accuracy" in v for v in base.values()) else "pearson"
    return {e: float(v[key]) for e, v in base.items() if v.get(key) is not None}


def kendall(meta: dict[str, float | None], human: dict[str, float]) -> dict[str, Any]:
    common = [e for e, v in meta.items() if e in human and v is not None]
    if len(common) < 2:
        return {"tau": None, "p_value": None, "n": len(common)}
    res = stats.kendalltau([meta[e] for e in common], [human[e] for e in common])
    tau = None if np.isnan(res.statistic) else float(res.statistic)
    p = None if np.isnan(res.pvalue) else float(res.pvalue)
    return {"tau": tau, "p_value": p, "n": len(common)}


def self_preference(name: str | None, meta: dict[str, float | None], human: dict[str, float],
                    table: dict[str, dict[str, dict[str, float]]] | None = None) -> dict[str, Any] | None:
    """How the meta-judge rates the evaluator that is itself: its meta rank against its human rank
    (``rank_shift`` > 0: the meta-judge ranks itself higher than the humans do) and, for paired
    frameworks, its win rate against the others next to the others' mean win rate."""
    if not name:
        return None
    if name not in meta:
        return {"evaluator": name, "error": "not among the evaluators"}
    meta_rank = next(r["rank"] for r in ranking(meta) if r["evaluator"] == name)
    human_rank = next((r["rank"] for r in ranking(dict(human)) if r["evaluator"] == name), None)
    out: dict[str, Any] = {"evaluator": name, "meta_rank": meta_rank, "human_rank": human_rank,
                           "rank_shift": None if human_rank is None else human_rank - meta_rank}
    if table:
        def mean_win(e: str) -> float | None:
            rows = [v["win"] for v in table.get(e, {}).values()]
            return float(np.mean(rows)) if rows else None

        others = [w for e in table if e != name and (w := mean_win(e)) is not None]
        out["win_rate"] = mean_win(name)
        out["others_mean_win_rate"] = float(np.mean(others)) if others else None
    return out


def position_stats(judgements: Sequence[Judgement]) -> dict[str, Any]:
    valid = [j.value for j in judgements if j.valid and j.value is not None]
    n = len(valid)
    return {"n": n, "first_wins": sum(v == 1.0 for v in valid) / n if n else None,
            "second_wins": sum(v == 0.0 for v in valid) / n if n else None,
            "ties": sum(v == 0.5 for v in valid) / n if n else None}


def meta_answer_accuracy(judgements: Sequence[Judgement], vs: VerdictSet) -> dict[str, Any]:
    """The meta-judge's own choice of the better answer (its <Better_answer>) against the human label
    (the study's "post accuracy", Table 3)."""
    human = {i.id: i.human for i in vs.items}
    pairs = [(Verdict.parse(a), h) for j in judgements if j.valid
             if (a := j.details.get("answer")) is not None and (h := human.get(j.item)) is not None]
    return {"accuracy": sum(a == h for a, h in pairs) / len(pairs) if pairs else None, "n": len(pairs)}
