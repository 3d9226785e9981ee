"""The judge's own noise: what asking the same judge the same question again changes (``--samples K``: K draws
per answer, each with its own seed and cache key).

* **Test-retest reliability**: ICC(1,1), the one-way random-effects intraclass correlation of a single draw
  (Shrout & Fleiss 1979, case 1: the draws of an answer are exchangeable, with no "draw 2" effect common to
  every answer), from the one-way ANOVA mean squares over the answers with every draw valid::

      MSB = K * sum_i (mean_i - mean)^2 / (n - 1)          (between answers)
      MSW = sum_ij (y_ij - mean_i)^2 / (n (K - 1))          (within answers: draw to draw)
      ICC(1,1) = (MSB - MSW) / (MSB + (K - 1) MSW)

  its 95% interval a bootstrap over answers; ICC(2,1) (two-way, absolute agreement,
  :func:`knockout.metrics._interrater.icc`) beside it, which also counts a shift common to a draw.  Grades are
  shares of the maximum points, so questions worth 1 and 10 points count alike.
* **The spread per answer**: the standard deviation and range of its draws (points), the share of answers
  whose draws are not all equal, and the answers that spread most.
* **Intervals with the draw-to-draw variance** beside those that resample answers only, for the mean grade
  (share of max) and, where answers have human grades, the Pearson correlation with them (percentile
  bootstrap, numpy, seeded): *answers only* resamples answers with the first draw's grades (what a
  single-draw run reports, around the first draw's figure); *answers and draws* resamples answers and, within
  each, its draws (two-stage), with the mean of the resampled draws as the grade; *draws only* keeps the
  answers and resamples the draws: how far the figure would move were the same judge asked again.  The last
  two are around the figure from the mean of the draws, re-centred on it (resampled draws are noisier than
  their mean, which pulls a correlation down: the shift is taken out, the spread kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from knockout.data._records import ItemSet

#: answers in the table of those whose draws spread most
TOP_SPREAD = 10


def icc1(scores: np.ndarray) -> float | None:
    """ICC(1,1) of ``scores`` (answers x draws, complete rows only; module doc)."""
    y = np.asarray(scores, dtype=float)
    y = y[np.all(np.isfinite(y), axis=1)]
    n, k = y.shape if y.ndim == 2 else (0, 0)
    if n < 2 or k < 2:
        return None
    row = y.mean(axis=1)
    msb = k * float(((row - y.mean()) ** 2).sum()) / (n - 1)
    msw = float(((y - row[:, None]) ** 2).sum()) / (n * (k - 1))
    den = msb + (k - 1) * msw
    return (msb - msw) / den if den > 1e-15 else None


def draw_matrix(items: ItemSet, results: Sequence[dict[str, Any]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The answers with draws, their draws as shares of the maximum points (answers x K, NaN: invalid) and
    their maximum points."""
    ids, rows, tops = [], [], []
    for r in results:
        draws = (r.get("details") or {}).get("draws")
        if not draws:
            continue
        try:
            top = items.question_of(items.answer(str(r["item_id"]))).max_points
        except KeyError:
            continue
        ids.append(str(r["item_id"]))
        rows.append([np.nan if d is None else float(d) / top for d in draws])
        tops.append(top)
    k = max((len(x) for x in rows), default=0)
    m = np.full((len(rows), k), np.nan)
    for i, x in enumerate(rows):
        m[i, :len(x)] = x
    return ids, m, np.array(tops, dtype=float)


def _pearson_rows(x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Pearson of each row of ``x`` (B x n) with each row of ``h`` (B x n)."""
    xc = x - x.mean(axis=1, keepdims=True)
    hc = h - h.mean(axis=1, keepdims=True)
    den = np.sqrt((xc**2).sum(axis=1) * (hc**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * hc).sum(axis=1) / den, np.nan)


def _interval(values: np.ndarray, centre: float | None = None) -> list[float] | None:
    """The 95% percentile interval of ``values``; with ``centre``, moved so that the resamples' median is at
    ``centre`` (resampling an answer's draws makes each resample's mean of draws noisier than the data's,
    which lowers a correlation: the spread is kept, the shift taken out)."""
    v = values[np.isfinite(values)]
    if len(v) < 10:
        return None
    lo, hi = np.quantile(v, [0.025, 0.975])
    if centre is not None:
        shift = centre - float(np.median(v))
        lo, hi = lo + shift, hi + shift
    return [round(float(lo), 4), round(float(hi), 4)]


def draw_intervals(m: np.ndarray, human: np.ndarray | None, *, resamples: int, seed: int) -> dict[str, Any]:
    """The mean grade and Pearson with humans under the three resampling schemes (module doc); ``m``: complete
    answers x draws shares, ``human``: the answers' human shares (None: no Pearson)."""
    n, k = m.shape
    rng = np.random.default_rng(seed)
    figures: dict[str, Any] = {"mean": {"value": float(m.mean()), "first": float(m[:, 0].mean())}}
    if human is not None:
        figures["pearson"] = {"value": float(_pearson_rows(m.mean(axis=1)[None], human[None])[0]),
                              "first": float(_pearson_rows(m[:, 0][None], human[None])[0])}
    if resamples <= 0 or n < 2:
        return _rounded(figures)
    out: dict[str, dict[str, np.ndarray]] = {f: {} for f in figures}
    chunk = max(1, min(resamples, 2_000_000 // max(1, n * k)))
    acc: dict[str, dict[str, list[np.ndarray]]] = {f: {"answers": [], "answers_draws": [], "draws": []}
                                                   for f in figures}
    for start in range(0, resamples, chunk):
        b = min(chunk, resamples - start)
        rows = rng.integers(0, n, size=(b, n))
        cols = rng.integers(0, k, size=(b, n, k))
        first = m[rows, 0]                                             # answers only, the first draw
        both = np.take_along_axis(m[rows], cols, axis=2).mean(axis=2)  # answers, then draws within each
        fixed = np.arange(n)[None, :].repeat(b, axis=0)
        drawn = np.take_along_axis(m[fixed], cols, axis=2).mean(axis=2)  # these answers, draws resampled
        for name, grades, who in (("answers", first, rows), ("answers_draws", both, rows), ("draws", drawn, fixed)):
            acc["mean"][name].append(grades.mean(axis=1))
            if human is not None:
                acc["pearson"][name].append(_pearson_rows(grades, human[who]))
    for f in figures:
        out[f] = {name: np.concatenate(v) for name, v in acc[f].items()}
        for name, values in out[f].items():
            figures[f][f"{name}_ci"] = _interval(values, None if name == "answers" else figures[f]["value"])
    return _rounded(figures)


def _rounded(figures: dict[str, Any]) -> dict[str, Any]:
    return {f: {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()} for f, d in figures.items()}


def noise_report(items: ItemSet, results: Sequence[dict[str, Any]], *, resamples: int = 1000,
                 seed: int = 0) -> dict[str, Any] | None:
    """The report's section on the judge's noise (module doc); None for a run without repeated draws."""
    from knockout.metrics._interrater import icc

    ids, m, tops = draw_matrix(items, results)
    if not ids or m.shape[1] < 2:
        return None
    complete = np.all(np.isfinite(m), axis=1)
    mc, ids_c, tops_c = m[complete], [i for i, c in zip(ids, complete, strict=True) if c], tops[complete]
    points = mc * tops_c[:, None]
    sd = points.std(axis=1, ddof=1) if len(mc) else np.array([])
    spread = points.max(axis=1) - points.min(axis=1) if len(mc) else np.array([])
    rng = np.random.default_rng(seed)
    boot = []
    if resamples > 0 and len(mc) >= 2:
        for _ in range(resamples):
            v = icc1(mc[rng.integers(0, len(mc), len(mc))])
            if v is not None:
                boot.append(v)
    one = icc1(mc)
    humans = [items.answer(i).human_score for i in ids_c]
    human = (np.array([(h or 0.0) / t for h, t in zip(humans, tops_c, strict=True)], dtype=float)
             if humans and all(h is not None for h in humans) else None)
    order: list[int] = [int(i) for i in np.argsort(-sd, kind="stable")[:TOP_SPREAD]] if len(sd) else []
    return {
        "draws": int(m.shape[1]),
        "answers": len(ids),
        "complete": int(complete.sum()),
        "icc1_1": None if one is None else round(one, 4),
        "icc1_1_ci": _interval(np.array(boot)) if boot else None,
        "icc2_1": (lambda v: None if v is None else round(v, 4))(icc(mc)["icc2_1"]) if len(mc) >= 2 else None,
        "sd_mean": round(float(sd.mean()), 4) if len(sd) else None,
        "sd_share_mean": round(float((sd / tops_c).mean()), 4) if len(sd) else None,
        "differ": round(float((spread > 0).mean()), 4) if len(spread) else None,
        "spread_max": round(float(spread.max()), 4) if len(spread) else None,
        "widest": [{"answer": ids_c[i], "draws": [round(float(x), 3) for x in points[i]],
                    "sd": round(float(sd[i]), 4), "max_points": float(tops_c[i])} for i in order if sd[i] > 0],
        "intervals": draw_intervals(mc, human, resamples=resamples, seed=seed) if len(mc) >= 2 else None,
        "resamples": resamples,
    }


def noise_tables(noise: dict[str, Any], title: str = "") -> list[Any]:
    """The tables of :func:`noise_report`'s section."""
    from knockout.reports._tables import Table, num

    def ci(v: list[float] | None) -> str:
        return "-" if not v else f"[{v[0]:.3f}, {v[1]:.3f}]"

    head = f"{title}: " if title else ""
    rows = [["draws per answer", str(noise["draws"])],
            ["answers (every draw valid)", f"{noise['complete']} of {noise['answers']}"],
            ["test-retest ICC(1,1) [95% CI]", f"{num(noise['icc1_1'])} {ci(noise['icc1_1_ci'])}"],
            ["ICC(2,1)", num(noise["icc2_1"])],
            ["mean SD of an answer's draws (points / share of max)",
             f"{num(noise['sd_mean'])} / {num(noise['sd_share_mean'])}"],
            ["answers whose draws differ", "-" if noise["differ"] is None else f"{100 * noise['differ']:.1f}%"],
            ["largest range of an answer's draws (points)", num(noise["spread_max"])]]
    tables = [Table(f"{head}the judge's own noise (repeated draws)", ["", ""], rows,
                    "ICC(1,1): one-way random effects, single draw, on shares of the maximum points; CI: bootstrap "
                    "over answers.")]
    iv = noise.get("intervals") or {}
    if iv:
        names = {"mean": "mean grade (share of max)", "pearson": "Pearson with the humans"}
        tables.append(Table(
            f"{head}95% intervals with and without the draw-to-draw variance",
            ["figure", "first draw", "answers only", "mean of draws", "answers and draws", "draws only"],
            [[names[f], num(v["first"]), ci(v.get("answers_ci")), num(v["value"]), ci(v.get("answers_draws_ci")),
              ci(v.get("draws_ci"))] for f, v in iv.items()],
            f"Percentile bootstrap, {noise['resamples']} resamples. Answers only: answers resampled with the first "
            "draw's grades (a single-draw run's interval); answers and draws: answers resampled, then each one's "
            "draws; draws only: these answers, their draws resampled (the judge asked again); the last two "
            "re-centred on the mean of draws."))
    if noise["widest"]:
        tables.append(Table(f"{head}answers whose draws spread most", ["answer", "draws (points)", "SD", "max"],
                            [[w["answer"], ", ".join(f"{x:g}" for x in w["draws"]), num(w["sd"]),
                              f"{w['max_points']:g}"] for w in noise["widest"]]))
    return tables
