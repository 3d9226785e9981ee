"""Agreement analysis of one set of judge scores against the human grades of an item set.

Question level (SciEx, Dinh et al. 2024, section 4.3): one point per answer; Pearson, Spearman and
Kendall on scores normalised by the question's maximum points, RMSE and the mean difference (judge
minus human, "inflation") on the original points scale, Cohen's kappa where the grades are categories,
full-points rate and precision (SciEx appendix G.3).

Exam level (SciEx 4.3.1 and appendix G.1; knockout thesis 4.3): one point per examinee and exam, the
sum of the points over the exam's questions divided by the sum of their maximum points.  Only answers
that the judge graded validly and a human graded enter both sums, so both totals cover the same
questions.  Pairwise ranking accuracy (Kocmi et al. 2021; thesis 4.2.2) compares the examinees of each
exam in pairs.

Every correlation has a 95% cluster-bootstrap interval that resamples questions
(:mod:`knockout.metrics._bootstrap`).  Invalid judge results are excluded and counted, never graded.
"""

from __future__ import annotations

import functools
import math
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from knockout._bounds import Bootstrap
from knockout.data._io import natural_key
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.metrics._agreement import Codes, codes, pearson_np, ranks_from, rmse, spearman_np
from knockout.metrics._bootstrap import DEFAULT_RESAMPLES, Interval, bootstrap
from knockout.metrics._kappa import grid_kappa
from knockout.metrics._measures import full_points, kendall, pairwise_ranking_accuracy
from knockout.storage._store import ResultRows

LEVELS = ("question", "exam")
#: Breakdown keys of every run; ``meta:KEY`` reads the answer's, then the question's ``meta``.  A method
#: adds its own groups through its results' ``details.groups`` (the knockout: ``round``, the round an
#: answer was eliminated in, ``winner`` for the champion).
GROUP_KEYS = ("difficulty", "language", "examinee", "exam", "question", "task", "max_points", "modality")
#: the group the first-round vs later-rounds analysis reads (knockout thesis, Table 4.8)
ROUND_GROUP = "round"
NONE_GROUP = "(none)"


# -- fast correlations on numpy arrays (bootstrap inner loop) -----------------------------------------------
#: Kendall's tau-b from the contingency table of the distinct values when it has at most this many cells
#: (grades are usually few distinct values: O(n + cells)); otherwise from all pairs up to
#: ``KENDALL_PAIRS`` points, and above that scipy's O(n log n) implementation.
KENDALL_CELLS = 40_000
KENDALL_PAIRS = 1500


@functools.lru_cache(maxsize=64)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(n, k=1)
    return i, j


def _kendall_codes(x: np.ndarray, y: np.ndarray, cx: Codes, cy: Codes) -> float:
    n = len(x)
    if n < 2:
        return math.nan
    (xi, nx), (yi, ny) = cx, cy
    pairs = n * (n - 1) / 2
    tx = float((nx * (nx - 1)).sum() / 2)
    ty = float((ny * (ny - 1)).sum() / 2)
    den = math.sqrt((pairs - tx) * (pairs - ty))
    if den <= 0:
        return math.nan
    kx, ky = len(nx), len(ny)
    if kx * ky <= KENDALL_CELLS:
        t = np.bincount(xi * ky + yi, minlength=kx * ky).reshape(kx, ky).astype(float)
        # s[i, j] = sum of t[i:, j:]; below-right of cell (i, j) is s[i+1, j+1]
        s = np.zeros((kx + 1, ky + 1))
        s[:-1, :-1] = t[::-1, ::-1].cumsum(0).cumsum(1)[::-1, ::-1]
        conc = float((t * s[1:, 1:]).sum())
        disc = float((t * (s[1:, 0:1] - s[1:, :-1])).sum())  # below-left: rows > i, columns < j
        return (conc - disc) / den
    if n > KENDALL_PAIRS:
        v = kendall(x, y)
        return math.nan if v is None else v
    iu = _pairs(n)
    return float(np.dot(np.sign(x[iu[0]] - x[iu[1]]), np.sign(y[iu[0]] - y[iu[1]]))) / den


def kendall_np(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b (NaN where undefined); equal to scipy.stats.kendalltau, faster in bootstrap loops."""
    return _kendall_codes(x, y, codes(x), codes(y)) if len(x) >= 2 else math.nan


def correlations_np(x: np.ndarray, y: np.ndarray, cx: Codes | None = None, cy: Codes | None = None) -> np.ndarray:
    """[Pearson, Spearman, Kendall tau-b] (NaN where undefined), sharing one sort per variable (``cx``/``cy``:
    the codes of ``x``/``y`` when the caller has them, e.g. from :func:`subset_codes`)."""
    if len(x) < 2:
        return np.full(3, math.nan)
    cx, cy = cx or codes(x), cy or codes(y)
    return np.array([pearson_np(x, y), pearson_np(ranks_from(cx), ranks_from(cy)), _kendall_codes(x, y, cx, cy)])


def _weighted_pearson(t: np.ndarray, rx: np.ndarray, ry: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    n = float(rx.sum())
    da, db = a - float(rx @ a) / n, b - float(ry @ b) / n
    den = math.sqrt(float(rx @ (da * da)) * float(ry @ (db * db)))
    return min(1.0, max(-1.0, float(da @ t @ db) / den)) if den > 1e-12 else math.nan


def correlations_from_table(t: np.ndarray, xv: np.ndarray, yv: np.ndarray) -> np.ndarray:
    """[Pearson, Spearman, Kendall tau-b] of the points counted in the contingency table ``t`` (rows: the
    distinct values ``xv``, columns: ``yv``): the same figures as :func:`correlations_np` on the points."""
    rx, ry = t.sum(1), t.sum(0)
    n = float(rx.sum())
    if n < 2:
        return np.full(3, math.nan)
    rank_x, rank_y = np.cumsum(rx) - (rx - 1) / 2.0, np.cumsum(ry) - (ry - 1) / 2.0
    pairs = n * (n - 1) / 2
    tx, ty = float((rx * (rx - 1)).sum() / 2), float((ry * (ry - 1)).sum() / 2)
    den = math.sqrt(max(pairs - tx, 0.0) * max(pairs - ty, 0.0))
    tau = math.nan
    if den > 0:
        kx, ky = t.shape
        s = np.zeros((kx + 1, ky + 1))
        s[:-1, :-1] = t[::-1, ::-1].cumsum(0).cumsum(1)[::-1, ::-1]
        conc = float((t * s[1:, 1:]).sum())
        disc = float((t * (s[1:, 0:1] - s[1:, :-1])).sum())
        tau = min(1.0, max(-1.0, (conc - disc) / den))
    return np.array([_weighted_pearson(t, rx, ry, xv, yv), _weighted_pearson(t, rx, ry, rank_x, rank_y), tau])


def table_bootstrap(x: np.ndarray, y: np.ndarray, clusters: np.ndarray, *, resamples: int, seed: int,
                    alpha: float = 0.05) -> list[Interval] | None:
    """Cluster-bootstrap intervals of [Pearson, Spearman, Kendall] computed from contingency tables: each
    cluster's table of (x, y) value pairs is counted once, and a resample is the clusters' tables weighted by
    how often each was drawn (O(questions + cells) per resample, no sort, no per-answer work).  The same
    resamples as :func:`bootstrap` with the same seed.  None when the values have too many distinct
    pairs for a table (then the caller resamples the points)."""
    from scipy import sparse

    from knockout.metrics._bootstrap import ClusterSampler, percentile_intervals

    (xi, xc), (yi, yc) = codes(x), codes(y)
    kx, ky = len(xc), len(yc)
    if kx * ky > KENDALL_CELLS:
        return None
    xv, yv = np.unique(x), np.unique(y)
    sampler = ClusterSampler(clusters, seed)
    k = len(sampler.sizes)
    counts = sparse.csr_matrix((np.ones(len(x)), (xi * ky + yi, sampler.inverse)), shape=(kx * ky, k))
    samples = np.full((resamples, 3), math.nan)
    for b in range(resamples):
        t = np.asarray(counts @ sampler.draw_weights()).reshape(kx, ky)
        samples[b] = correlations_from_table(t, xv, yv)
    return percentile_intervals(samples, alpha)


def subset_codes(inverse: np.ndarray, k: int, idx: np.ndarray) -> Codes:
    """The codes of a resample ``idx`` of values whose distinct-value codes (``inverse``, ``k`` distinct) were
    computed once: ranks without sorting again (values absent from the resample count 0)."""
    sub = inverse[idx]
    return sub, np.bincount(sub, minlength=k)


def finite_or_none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def ci_pair(iv: Interval) -> list[float] | None:
    return None if iv.low is None or iv.high is None else [iv.low, iv.high]


#: each breakdown key's group of an answer (one function per key: a report asks millions of times)
_KEYS: dict[str, Callable[[Question, Row], str | None]] = {
    "difficulty": lambda q, r: q.difficulty,
    "language": lambda q, r: q.language,
    "examinee": lambda q, r: r.examinee,
    "exam": lambda q, r: q.exam_id,
    "question": lambda q, r: q.id,
    "task": lambda q, r: q.task,
    "max_points": lambda q, r: f"{q.max_points:g}",
    # SciEx's modality: a question with figures is "image", else "text" (a loader may set meta)
    "modality": lambda q, r: str(q.meta.get("modality") or ("image" if q.images else "text")),
}

#: the details of a result that has none (shared by such rows: read, never written)
NO_DETAILS: dict[str, Any] = {}


@dataclass(slots=True)
class Row:
    """One answer (by its index in the item set: no :class:`Answer` is kept) with its question, the judge's
    result and the group keys."""

    items: ItemSet
    index: int
    question: Question
    score: float | None  # None: invalid (or no result)
    details: dict[str, Any]

    @property
    def answer(self) -> Answer:
        """The answer, built from the item set (each time: the hot paths read the fields below)."""
        return self.items.answer_at(self.index)

    @property
    def id(self) -> str:
        return self.items.answer_id_at(self.index)

    @property
    def examinee(self) -> str | None:
        return self.items.examinee_at(self.index)

    @property
    def text(self) -> str:
        return self.items.text_at(self.index)

    @property
    def human(self) -> float | None:
        return self.items.human_score_at(self.index)

    @property
    def human_scores(self) -> dict[str, float]:
        return self.items.human_scores_at(self.index)

    def key(self, name: str) -> str | None:
        """The answer's group under breakdown key ``name`` (None: the key does not apply)."""
        q = self.question
        if name.startswith("meta:"):
            k = name[5:]
            v = self.items.meta_at(self.index).get(k, q.meta.get(k))
            return NONE_GROUP if v is None else str(v)
        if name not in GROUP_KEYS:  # a group the run's method declares in its results, else not applicable
            groups = self.details.get("groups")
            return str(groups[name]) if isinstance(groups, dict) and name in groups else None
        value = _KEYS[name](q, self)
        return NONE_GROUP if value is None else value


def check_keys(names: Iterable[str]) -> list[str]:
    out = []
    for n in names:
        n = n.strip()
        if not n:
            continue
        if n not in GROUP_KEYS and not (n.startswith("meta:") and len(n) > 5) and not n.isidentifier():
            raise ConfigError(f"unknown breakdown '{n}' (one of {', '.join(GROUP_KEYS)}, meta:KEY, or a group the "
                              "run's method records, such as round for the knockout)")
        out.append(n)
    return out


class Aligned:
    """Aligned arrays of the answers that have a valid judge score and a human score."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = [r for r in rows if r.score is not None and r.human is not None]
        self.judge = np.array([r.score for r in self.rows], dtype=float)
        self.human = np.array([r.human for r in self.rows], dtype=float)
        self.max_points = np.array([r.question.max_points for r in self.rows], dtype=float)
        self.points = np.array([r.question.human_scale == "points" for r in self.rows], dtype=bool)
        self.judge_norm = self.judge / self.max_points if len(self.rows) else self.judge
        self.human_norm = np.where(self.points, self.human / np.where(self.points, self.max_points, 1.0),
                                   self.human) if len(self.rows) else self.human
        qids = [r.question.id for r in self.rows]
        self.question = np.unique(qids, return_inverse=True)[1] if qids else np.array([], dtype=int)
        # exam-examinee groups (-1: no examinee, left out of the exam level)
        keys = [(r.question.exam_id or NONE_GROUP, r.examinee) for r in self.rows]
        self.ee_keys = sorted({k for k in keys if k[1] is not None}, key=lambda k: (natural_key(k[0]),
                                                                                      natural_key(str(k[1]))))
        pos = {k: i for i, k in enumerate(self.ee_keys)}
        self.ee = np.array([pos.get(k, -1) for k in keys], dtype=int)
        exams = sorted({k[0] for k in self.ee_keys}, key=natural_key)
        self.ee_exam = np.array([exams.index(k[0]) for k in self.ee_keys], dtype=int)

    def __len__(self) -> int:
        return len(self.rows)

    # -- question level --------------------------------------------------------------------------------
    def corr_stat(self, idx: np.ndarray) -> np.ndarray:
        """Correlations on the answers ``idx``; the values are ranked once for all resamples."""
        if not hasattr(self, "_codes"):
            (jv, jk), (hv, hk) = codes(self.judge_norm), codes(self.human_norm)
            self._codes = (jv, len(jk), hv, len(hk))
        jv, jn, hv, hn = self._codes
        return correlations_np(self.judge_norm[idx], self.human_norm[idx], subset_codes(jv, jn, idx),
                               subset_codes(hv, hn, idx))

    def question_metrics(self, idx: np.ndarray, *, resamples: int, seed: int) -> dict[str, Any]:
        j, h = self.judge_norm[idx], self.human_norm[idx]
        pts = idx[self.points[idx]]
        jp, hp, mp = self.judge[pts], self.human[pts], self.max_points[pts]
        fp = full_points(jp, hp, mp)
        corr = self.corr_stat(idx)
        cis = [Interval(None, None, 0)] * 3
        if resamples and len(idx) >= 3:
            cis = table_bootstrap(j, h, self.question[idx], resamples=resamples, seed=seed) or \
                bootstrap(lambda s: self.corr_stat(idx[s]), self.question[idx], resamples=resamples, seed=seed)
        out: dict[str, Any] = {"n": len(idx), "questions": len(np.unique(self.question[idx]))}
        for name, value, iv in zip(("pearson", "spearman", "kendall"), corr, cis, strict=True):
            out[name] = finite_or_none(value)
            out[f"{name}_ci"] = ci_pair(iv)
        out.update({
            "rmse": rmse(list(jp), list(hp)) if len(pts) else None,
            "mean_diff": float(np.mean(jp - hp)) if len(pts) else None,
            "mean_diff_norm": float(np.mean(j - h)) if len(idx) and len(pts) == len(idx) else None,
            "kappa": grid_kappa(jp, hp) if len(pts) else None,
            "kappa_linear": grid_kappa(jp, hp, "linear") if len(pts) else None,
            "kappa_quadratic": grid_kappa(jp, hp, "quadratic") if len(pts) else None,
            "full_points_rate": fp.rate,
            "full_points_precision": fp.precision,
            "human_full_points_rate": fp.human_rate,
        })
        return out

    # -- exam level ------------------------------------------------------------------------------------
    def exam_totals(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(judge, human, exam) per exam-examinee group present in ``idx``: points over max points."""
        idx = idx[self.ee[idx] >= 0]
        g = self.ee[idx]
        n = len(self.ee_keys)
        m = np.bincount(g, weights=self.max_points[idx], minlength=n)
        jt = np.bincount(g, weights=self.judge_norm[idx] * self.max_points[idx], minlength=n)
        ht = np.bincount(g, weights=self.human_norm[idx] * self.max_points[idx], minlength=n)
        return self._ratios(jt, ht, m)

    def _ratios(self, jt: np.ndarray, ht: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(judge, human, exam) of the exam-examinee groups with points: summed points over max points."""
        present = m > 0
        return jt[present] / m[present], ht[present] / m[present], self.ee_exam[present]

    @staticmethod
    def _figures(j: np.ndarray, h: np.ndarray, e: np.ndarray) -> np.ndarray:
        """[Pearson, Spearman, Kendall, pairwise ranking accuracy] of exam totals (NaN where undefined)."""
        acc, _ = pairwise_ranking_accuracy(j, h, e)
        return np.append(correlations_np(j, h), math.nan if acc is None else acc)

    def exam_stat(self, idx: np.ndarray) -> np.ndarray:
        return self._figures(*self.exam_totals(idx))

    def exam_bootstrap(self, idx: np.ndarray, *, resamples: int, seed: int) -> list[Interval]:
        """Intervals of :meth:`exam_stat` over resamples of the questions of ``idx``: each question's points
        and maximum points per exam-examinee group are summed once (a sparse matrix), and a resample's totals
        are those sums weighted by how often each question was drawn (the same resamples as
        :func:`bootstrap` with the same seed)."""
        from scipy import sparse

        from knockout.metrics._bootstrap import sums_bootstrap

        g = self.ee[idx]
        rows = np.flatnonzero(g >= 0)
        n = len(self.ee_keys)
        mp = self.max_points[idx[rows]]
        values = np.concatenate([self.judge_norm[idx[rows]] * mp, self.human_norm[idx[rows]] * mp, mp])
        cols = np.concatenate([g[rows], g[rows] + n, g[rows] + 2 * n])
        per_row = sparse.csr_matrix((values, (np.tile(rows, 3), cols)), shape=(len(idx), 3 * n))

        def stat(block: np.ndarray) -> np.ndarray:
            return np.array([self._figures(*self._ratios(s[:n], s[n:2 * n], s[2 * n:])) for s in block])

        return sums_bootstrap(per_row, self.question[idx], stat, resamples=resamples, seed=seed)

    def exam_metrics(self, idx: np.ndarray, *, resamples: int, seed: int) -> dict[str, Any]:
        j, h, e = self.exam_totals(idx)
        acc, pairs = pairwise_ranking_accuracy(j, h, e)
        values = self.exam_stat(idx)
        cis = self.exam_bootstrap(idx, resamples=resamples, seed=seed) if resamples and len(j) >= 3 \
            else [Interval(None, None, 0)] * 4
        out: dict[str, Any] = {"n": len(j), "exams": len(np.unique(e)), "pairs": pairs}
        for name, value, iv in zip(("pearson", "spearman", "kendall", "pairwise_accuracy"), values, cis,
                                   strict=True):
            out[name] = finite_or_none(value)
            out[f"{name}_ci"] = ci_pair(iv)
        out["pairwise_accuracy"] = acc
        pts_all = bool(np.all(self.points[idx])) if len(idx) else False
        out["rmse_norm"] = float(np.sqrt(np.mean((j - h) ** 2))) if len(j) and pts_all else None
        out["mean_diff_norm"] = float(np.mean(j - h)) if len(j) and pts_all else None
        return out

    def metrics(self, level: str, idx: np.ndarray, *, resamples: int, seed: int) -> dict[str, Any]:
        if level == "exam":
            return self.exam_metrics(idx, resamples=resamples, seed=seed)
        return self.question_metrics(idx, resamples=resamples, seed=seed)


@dataclass
class Analysis:
    """Everything ``knockout report`` shows; :meth:`to_dict` is its ``--json``."""

    level: str
    aligned: Aligned
    rows: list[Row]
    sections: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, **self.sections}


def build_rows(items: ItemSet, results: Iterable[Mapping[str, Any]]) -> tuple[list[Row], int]:
    """Rows for the item set's answers that have a result (in the item set's order; a later result of the same
    answer replaces an earlier one); also the number of results matching no answer.  The results are read
    once, as they come (a store's rows one at a time), into arrays over the item set."""
    n = len(items)
    state = bytearray(n)  # 0: no result, 1: a score, 2: invalid (no score)
    score = array("d", bytes(8 * n))
    details: dict[int, dict[str, Any]] = {}
    unmatched: set[str] = set()
    rows: Iterable[tuple[str, Any, Any, Any]] = results.shared() if isinstance(results, ResultRows) else \
        ((str(r["item_id"]), r.get("score"), r.get("valid", r.get("score") is not None), r.get("details"))
         for r in results)
    for aid, s, valid, d in rows:
        i = items.find(aid)
        if i is None:
            unmatched.add(aid)
            continue
        if s is None or not valid:
            state[i] = 2
        else:
            state[i], score[i] = 1, float(s)
        if d:
            details[i] = d
        else:
            details.pop(i, None)
    return [Row(items, i, items.question_at(i), score[i] if state[i] == 1 else None, details.get(i, NO_DETAILS))
            for i in range(n) if state[i]], len(unmatched)


def analyse(items: ItemSet, results: Iterable[Mapping[str, Any]], *, level: str = "question",
            by: Sequence[str] = (), resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Analysis:
    """Agreement of stored results (``Store.results`` rows: item_id, score, valid, details) with humans."""
    Bootstrap(resamples=resamples, seed=seed)  # the bounds: a ValidationError
    if level not in LEVELS:
        raise ConfigError(f"unknown level '{level}' (question or exam)")
    by = check_keys(by)
    rows, unmatched = build_rows(items, results)
    for key in by:
        if key not in GROUP_KEYS and not key.startswith("meta:") and all(r.key(key) is None for r in rows):
            declared = sorted({k for r in rows for k in (r.details.get("groups") or {})})
            raise ConfigError(f"unknown breakdown '{key}': one of {', '.join(GROUP_KEYS)}, meta:KEY, or a group this "
                              f"run's method records ({', '.join(declared) or 'none'})")
    al = Aligned(rows)
    everything = np.arange(len(al))
    invalid = sum(r.score is None for r in rows)
    unscored = sum(r.score is not None and r.human is None for r in rows)
    ql = {"invalid": invalid, "without_human_score": unscored,
          **al.question_metrics(everything, resamples=resamples, seed=seed)}
    has_exam = bool(np.any(al.ee >= 0))
    sections: dict[str, Any] = {
        "answers": len(rows),
        "invalid": invalid,
        "without_human_score": unscored,
        "results_without_answer": unmatched,
        "question_level": ql,
        "exam_level": al.exam_metrics(everything, resamples=resamples, seed=seed) if has_exam else None,
    }
    breakdowns = {}
    for key in by:
        breakdowns[key] = breakdown(al, rows, key, level, resamples=resamples, seed=seed)
    sections["breakdowns"] = breakdowns
    sections["inflation_by_difficulty"] = [
        {k: g[k] for k in ("group", "n", "invalid", "mean_diff", "mean_diff_norm", "full_points_rate")}
        for g in breakdown(al, rows, "difficulty", "question", resamples=0, seed=seed)
    ]
    sections["rounds"] = rounds(al, rows, resamples=resamples, seed=seed)
    sections["ranking"] = examinee_ranking(al)
    sections["human_human"] = human_agreement(items, rows, resamples=resamples, seed=seed)
    sections["calibration"] = calibration(al)
    return Analysis(level, al, rows, sections)


def _groups(al: Aligned, rows: Sequence[Row], key: str) -> list[tuple[str, np.ndarray, int]]:
    """(group, indices into ``al``, invalid answers) for each group under ``key``."""
    aligned_keys = [r.key(key) for r in al.rows]
    invalid: dict[str, int] = {}
    for r in rows:
        k = r.key(key)
        if r.score is None and k is not None:
            invalid[k] = invalid.get(k, 0) + 1
    names = sorted({k for k in aligned_keys if k is not None} | set(invalid), key=natural_key)
    keys = np.array(aligned_keys, dtype=object)
    return [(g, np.flatnonzero(keys == g), invalid.get(g, 0)) for g in names]


def breakdown(al: Aligned, rows: Sequence[Row], key: str, level: str, *, resamples: int, seed: int
              ) -> list[dict[str, Any]]:
    return [{"group": g, "invalid": inv, **al.metrics(level, idx, resamples=resamples, seed=seed)}
            for g, idx, inv in _groups(al, rows, key)]


def rounds(al: Aligned, rows: Sequence[Row], *, resamples: int, seed: int) -> dict[str, Any] | None:
    """First-round vs later-round eliminations (knockout thesis, Table 4.8), when the run records rounds."""
    if not any(r.key(ROUND_GROUP) is not None for r in rows):
        return None
    keys = np.array([r.key(ROUND_GROUP) for r in al.rows], dtype=object)
    first = np.flatnonzero(keys == "1")
    later = np.flatnonzero((keys != "1") & np.array([k is not None for k in keys], dtype=bool))
    f = al.question_metrics(first, resamples=resamples, seed=seed)
    la = al.question_metrics(later, resamples=resamples, seed=seed)
    diff = None if f["pearson"] is None or la["pearson"] is None else la["pearson"] - f["pearson"]
    return {"first_round": f, "later_rounds": la, "pearson_difference": diff,
            "by_round": breakdown(al, rows, ROUND_GROUP, "question", resamples=0, seed=seed)}


def _ranks(values: np.ndarray) -> list[int]:
    return [int(r) for r in stats.rankdata(-values, method="min")]


def examinee_ranking(al: Aligned) -> dict[str, Any] | None:
    """Examinees by average grade (% of the points they could get), by the humans and by the judge."""
    ex = np.array([r.examinee for r in al.rows], dtype=object)
    names = sorted({e for e in ex if e is not None}, key=natural_key)
    if len(names) < 2:
        return None
    j, h, n = [], [], []
    for name in names:
        idx = np.flatnonzero(ex == name)
        m = al.max_points[idx].sum()
        j.append(float((al.judge_norm[idx] * al.max_points[idx]).sum() / m))
        h.append(float((al.human_norm[idx] * al.max_points[idx]).sum() / m))
        n.append(len(idx))
    ja, ha = np.array(j), np.array(h)
    hr, jr = _ranks(ha), _ranks(ja)
    table = [{"examinee": e, "answers": k, "human_pct": 100 * hv, "human_rank": a, "judge_pct": 100 * jv,
              "judge_rank": b} for e, k, hv, a, jv, b in zip(names, n, h, hr, j, jr, strict=True)]
    table.sort(key=lambda t: (t["human_rank"], natural_key(t["examinee"])))
    sp = finite_or_none(spearman_np(ja, ha))
    return {"examinees": table, "spearman": sp, "kendall": kendall(ja, ha)}


def human_agreement(items: ItemSet, rows: Sequence[Row], *, resamples: int, seed: int) -> dict[str, Any] | None:
    """Human-human agreement (the ceiling) and the judge against each single grader, where several graded."""
    graders = sorted({g for r in rows for g in r.human_scores} if len(items.graders()) > 1 else items.graders(),
                     key=natural_key)
    if len(graders) < 2:
        return None

    def pair_stats(get_x: Callable[[Row], float | None], get_y: Callable[[Row], float | None]) -> dict[str, Any]:
        sel = [(r, x, y) for r in rows if (x := get_x(r)) is not None and (y := get_y(r)) is not None]
        if not sel:
            return {"n": 0, "pearson": None, "pearson_ci": None, "spearman": None, "kappa": None,
                    "kappa_quadratic": None}
        xs = np.array([x for _, x, _ in sel])
        ys = np.array([y for _, _, y in sel])
        mp = np.array([r.question.max_points for r, _, _ in sel])
        xn, yn = xs / mp, ys / mp
        q = np.unique([r.question.id for r, _, _ in sel], return_inverse=True)[1]
        ci = bootstrap(lambda s: np.array([pearson_np(xn[s], yn[s])]), q, resamples=resamples, seed=seed)[0] \
            if resamples and len(sel) >= 3 else Interval(None, None, 0)
        return {"n": len(sel), "pearson": finite_or_none(pearson_np(xn, yn)), "pearson_ci": ci_pair(ci),
                "spearman": finite_or_none(spearman_np(xn, yn)), "kappa": grid_kappa(xs, ys),
                "kappa_quadratic": grid_kappa(xs, ys, "quadratic")}

    def grader(g: str) -> Callable[[Row], float | None]:
        return lambda r: r.human_scores.get(g) if r.question.human_scale == "points" else None

    def judge(r: Row) -> float | None:
        return r.score if r.question.human_scale == "points" else None

    pairs = [{"a": a, "b": b, **pair_stats(grader(a), grader(b))}
             for i, a in enumerate(graders) for b in graders[i + 1:]]
    vs = [{"grader": g, **pair_stats(judge, grader(g))} for g in graders]
    return {"graders": graders, "pairs": pairs, "judge_vs_grader": vs}


def calibration(al: Aligned, bins: int = 10) -> list[dict[str, Any]]:
    """Mean judge score (normalised) per human score bin: each distinct human value when there are at
    most ``bins + 1`` of them, else ``bins`` equal-width bins over [0, 1] (top bin closed)."""
    if not len(al):
        return []
    h, j = al.human_norm, al.judge_norm
    values = np.unique(np.round(h, 9))
    out = []
    if len(values) <= bins + 1:
        for v in values:
            sel = np.abs(h - v) < 1e-9
            out.append({"human_low": float(v), "human_high": float(v), "n": int(sel.sum()),
                        "judge_mean": float(j[sel].mean()), "human_mean": float(h[sel].mean())})
        return out
    lo, hi = min(0.0, float(h.min())), max(1.0, float(h.max()))
    edges = np.linspace(lo, hi, bins + 1)
    which = np.clip(np.searchsorted(edges, h, side="right") - 1, 0, bins - 1)
    for b in range(bins):
        sel = which == b
        if sel.any():
            out.append({"human_low": float(edges[b]), "human_high": float(edges[b + 1]), "n": int(sel.sum()),
                        "judge_mean": float(j[sel].mean()), "human_mean": float(h[sel].mean())})
    return out
