"""Method A vs method B on the same items: paired bootstrap and Williams' test.

Both tests use the answers that both methods graded validly and a human graded, so that the two
correlations are computed on exactly the same points.  The figure compared is the question-level
Pearson correlation on normalised scores (and, by paired bootstrap, the exam-level one when the items
have examinees).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from knockout.data._records import ItemSet
from knockout.errors import ConfigError
from knockout.metrics._agreement import pearson_np
from knockout.metrics._analysis import Aligned, Row, build_rows, finite_or_none
from knockout.metrics._bootstrap import DEFAULT_RESAMPLES, paired_bootstrap
from knockout.metrics._measures import williams_test, williams_undefined


def _common(items: ItemSet, a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]
            ) -> tuple[Aligned, np.ndarray]:
    rows_a, _ = build_rows(items, a)
    rows_b = {r.id: r for r in build_rows(items, b)[0]}
    keep: list[Row] = []
    other: list[float] = []
    for r in rows_a:
        rb = rows_b.get(r.id)
        if r.score is None or r.human is None or rb is None or rb.score is None:
            continue
        keep.append(r)
        other.append(rb.score / r.question.max_points)
    return Aligned(keep), np.array(other, dtype=float)


def paired_comparison(items: ItemSet, results_a: Iterable[Mapping[str, Any]],
                      results_b: Iterable[Mapping[str, Any]], *, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = 0) -> dict[str, Any]:
    """A minus B: Pearson of each with the humans on the common answers, the paired-bootstrap interval and
    p-value of the difference (questions resampled), and Williams' t-test (dependent correlations)."""
    al, b_norm = _common(items, results_a, results_b)
    h, a_norm = al.human_norm, al.judge_norm
    n = len(al)
    out: dict[str, Any] = {"n": n, "pearson_a": finite_or_none(pearson_np(a_norm, h)),
                           "pearson_b": finite_or_none(pearson_np(b_norm, h)),
                           "pearson_ab": finite_or_none(pearson_np(a_norm, b_norm))}
    pb = paired_bootstrap(lambda s: finite_or_none(pearson_np(a_norm[s], h[s])),
                          lambda s: finite_or_none(pearson_np(b_norm[s], h[s])), al.question,
                          resamples=resamples, seed=seed)
    out["question_level"] = {"delta": pb.delta, "ci": None if pb.low is None else [pb.low, pb.high],
                             "p_bootstrap": pb.p_value}
    r12, r13, r23 = out["pearson_a"], out["pearson_b"], out["pearson_ab"]
    reason = "a correlation is undefined (constant grades)" if None in (r12, r13, r23) else \
        williams_undefined(r12, r13, r23, n)
    if reason is None:
        try:
            w = williams_test(r12, r13, r23, n)
            out["question_level"].update({"williams_t": w.t, "williams_df": w.df,
                                          "p_williams_one_sided": w.p_one_sided,
                                          "p_williams_two_sided": w.p_two_sided})
        except ValueError as exc:
            reason = str(exc).removeprefix("Williams' test is undefined: ")
    if reason is not None:
        out["question_level"]["williams_na"] = reason
    if np.any(al.ee >= 0):
        b_al = Aligned(al.rows)  # the same answers, with B's normalised scores as the judge's
        b_al.judge_norm = b_norm

        def exam_pearson(x: Aligned) -> Any:
            return lambda s: finite_or_none(x.exam_stat(s)[0])

        pe = paired_bootstrap(exam_pearson(al), exam_pearson(b_al), al.question, resamples=resamples, seed=seed)
        out["exam_level"] = {"delta": pe.delta, "ci": None if pe.low is None else [pe.low, pe.high],
                             "p_bootstrap": pe.p_value}
    return out


def group_comparison(items: ItemSet, runs: Sequence[Iterable[Mapping[str, Any]]], key: str, *,
                     resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """Per group under ``key`` (the thesis's Tables 4.2 and 4.6): each run's question-level Pearson with
    its cluster-bootstrap CI, and each later run minus the first (the baseline) by paired bootstrap on the
    answers both graded validly in that group (questions resampled; a group of one question resamples its
    answers), with Williams' test.  The last group, ``all``, is every answer.

    An answer's group comes from the item set (difficulty, language, examinee, exam, modality, ...) or,
    for a group a method records in its results (``round``: the knockout's elimination round), from the
    first run that records it, and is then used for every run: ``--by round`` compares all runs on the
    answers the knockout eliminated in each round.
    """
    from knockout.data._io import natural_key
    from knockout.metrics._analysis import GROUP_KEYS, check_keys

    check_keys([key])
    lists = [list(r) for r in runs]
    rows = [build_rows(items, res)[0] for res in lists]
    group_of: dict[str, str] = {}
    for rs in rows:
        for r in rs:
            g = r.key(key)
            if g is not None and r.id not in group_of:
                group_of[r.id] = g
    if not group_of:
        declared = sorted({k for rs in rows for r in rs for k in (r.details.get("groups") or {})})
        raise ConfigError(f"no run records the group '{key}' (breakdowns: {', '.join(GROUP_KEYS)}, meta:KEY, or a "
                          f"group a run's method records: {', '.join(declared) or 'none'})")
    names = sorted(set(group_of.values()), key=natural_key)
    out = []
    for g in [*names, None]:
        ids = set(group_of) if g is None else {a for a, x in group_of.items() if x == g}
        subset = [[r for r in res if str(r["item_id"]) in ids] for res in lists]
        per_run = []
        for rs in rows:
            sel = [r for r in rs if r.id in ids]
            al = Aligned(sel)
            m = al.question_metrics(np.arange(len(al)), resamples=resamples, seed=seed) if len(al) else {}
            per_run.append({"n": len(al), "invalid": sum(r.score is None for r in sel),
                            "pearson": m.get("pearson"), "pearson_ci": m.get("pearson_ci")})
        deltas = []
        for res in subset[1:]:
            pc = paired_comparison(items, res, subset[0], resamples=resamples, seed=seed)
            ql = pc["question_level"]
            deltas.append({"n": pc["n"], "delta": ql["delta"], "ci": ql["ci"], "p_bootstrap": ql["p_bootstrap"],
                           "p_williams_two_sided": ql.get("p_williams_two_sided")})
        out.append({"group": "all" if g is None else g, "answers": len(ids), "runs": per_run, "deltas": deltas})
    return {"key": key, "groups": out}
