"""Tidy tables of a stored run: one row per answer (and per match, per side-by-side order, per meta-judgement)
with every field a user would group by, for pandas (``results_df``) and Parquet (``knockout export --format
parquet``).

Tables (``table=``):

* ``answers`` (grade runs; the default): the run's settings, the answer's question fields (exam, language,
  difficulty, task, max points, the question's scalar ``meta:KEY`` fields), the human and the judge score
  (also normalised by max points, and their gap), validity and the reason of an invalid result, lengths,
  the judge requests and tokens spent on it, and what the method adds (knockout: round, champion,
  eliminated round, byes; all-pairs: Elo, Bradley-Terry and ranks; sorting: rank);
* ``matches`` (pairwise methods): one row per question-level match, both answers' grades in each order;
* ``orders`` (side-by-side runs; the default there): one row per item and order, the verdict in candidate
  terms, as displayed, and the human verdict;
* ``judgements`` (meta runs; the default there): one row per meta-judgement.

Tokens are summed over the call keys a row's details recorded (every attempt), read from the store's
``calls`` table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from knockout._verdict import Verdict
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.reports._replies import attempts_in
from knockout.runs import kind_of
from knockout.storage._store import MatchRow, RunRecord, Store


def keys_in(obj: Any) -> Iterator[str]:
    """Every call key recorded in a result's details (the attempts of each call trace, depth first)."""
    return (a["key"] for a in attempts_in(obj) if isinstance(a.get("key"), str))


class Tokens:
    """Tokens and latency of stored calls, by key (read once per run)."""

    def __init__(self, store: Store) -> None:
        self.rows = store.call_costs()

    def of(self, details: Any) -> dict[str, Any]:
        keys = list(keys_in(details))
        found = [self.rows[k] for k in keys if k in self.rows]
        return {"requests": len(keys), "prompt_tokens": sum(f[0] for f in found),
                "completion_tokens": sum(f[1] for f in found), "judge_s": round(sum(f[2] for f in found), 3)}


def run_cols(run: RunRecord) -> dict[str, Any]:
    opts = run.config.get("options") or {}
    params = run.config.get("params") or {}
    return {"run_id": run.id, "kind": run.kind, "method": run.method, "judge": run.judge, "status": run.status,
            "simulated_judge": run.simulated, "debias": opts.get("debias"), "prompt_option": opts.get("prompt"),
            "reference_shown": opts.get("reference"), "shots": opts.get("shots"), "seed": opts.get("seed"),
            "temperature": params.get("temperature")}


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool)) or v is None


def question_cols(q: Question) -> dict[str, Any]:
    return {"question_id": q.id, "exam_id": q.exam_id, "language": q.language, "difficulty": q.difficulty,
            "task": q.task, "max_points": q.max_points, "human_scale": q.human_scale,
            "question_chars": len(q.text), **{f"meta:{k}": v for k, v in q.meta.items() if _scalar(v)}}


def _norm(x: float | None, q: Question) -> float | None:
    return None if x is None else x / q.max_points


def answer_cols(a: Answer, q: Question) -> dict[str, Any]:
    h = a.human_score
    return {"answer_id": a.id, "examinee": a.examinee, "answer_chars": len(a.text),
            "answer_words": len(a.text.split()), "human_score": h, "human_norm": _norm(h, q),
            "human_graders": len(a.human_scores)}


def _method_cols(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "prompt" in d and isinstance(d["prompt"], str):
        out["prompt"] = d["prompt"]
    groups = d.get("groups")
    if isinstance(groups, dict):
        out |= {k: v for k, v in groups.items() if _scalar(v)}
    for k in ("champion", "eliminated_round", "rounds_played", "rank", "elo", "elo_std", "rank_elo", "bt",
              "rank_bt"):
        if k in d:
            out[k] = d[k]
    if isinstance(d.get("byes"), list):
        out["byes"] = len(d["byes"])
    if isinstance(d.get("matches"), list):
        out["matches"] = len(d["matches"])
        out["invalid_matches"] = sum(not m.get("valid", True) for m in d["matches"] if isinstance(m, dict))
        out["grades_received"] = len(d.get("scores") or [])
    return out


def answer_rows(store: Store, run: RunRecord, items: ItemSet) -> list[dict[str, Any]]:
    tokens = Tokens(store)
    matches = {m.match_id: m for m in store.matches(run.id)}
    base = run_cols(run)
    rows = []
    for r in store.results(run.id):
        d = r["details"]
        try:
            a = items.answer(r["item_id"])
        except KeyError:
            continue
        q = items.question_of(a)
        score = r["score"]
        row = {**base, **question_cols(q), **answer_cols(a, q), "score": score, "score_norm": _norm(score, q)}
        gap = None if score is None or a.human_score is None else (score - a.human_score) / q.max_points
        row |= {"gap_norm": gap, "abs_gap_norm": None if gap is None else abs(gap), "valid": r["valid"],
                "invalid_reason": None if r["valid"] else d.get("error")}
        refs = d.get("matches") if isinstance(d.get("matches"), list) else []
        played = [matches[str(m.get("match_id"))].games for m in refs if str(m.get("match_id")) in matches]
        row |= tokens.of([d, played]) | _method_cols(d)
        rows.append(row)
    return rows


def _game_scores(m: MatchRow) -> dict[str, Any]:
    """Each answer's grade in each order: ``score_a_ab`` = a's grade when a was shown first."""
    out: dict[str, Any] = {"score_a_ab": None, "score_b_ab": None, "score_a_ba": None, "score_b_ba": None}
    for g in m.games:
        scores = g.get("scores")
        if not scores:
            continue
        first, s1, s2 = g.get("first"), float(scores[0]), float(scores[1])
        if first == m.a:
            out["score_a_ab"], out["score_b_ab"] = s1, s2
        else:
            out["score_b_ba"], out["score_a_ba"] = s1, s2
    return out


def _mean(*xs: float | None) -> float | None:
    got = [x for x in xs if x is not None]
    return sum(got) / len(got) if got else None


def match_rows(store: Store, run: RunRecord, items: ItemSet) -> list[dict[str, Any]]:
    tokens = Tokens(store)
    base = run_cols(run)
    rows = []
    for m in store.matches(run.id):
        try:
            a, b = items.answer(m.a), items.answer(m.b)
        except KeyError:
            continue
        q = items.question_of(a)
        g = _game_scores(m)
        sa, sb = _mean(g["score_a_ab"], g["score_a_ba"]), _mean(g["score_b_ab"], g["score_b_ba"])
        ha, hb = a.human_score, b.human_score
        winner = Verdict.from_scores(sa, sb) if sa is not None and sb is not None else None
        human_winner = Verdict.from_scores(ha, hb) if ha is not None and hb is not None else None
        rows.append({**base, **question_cols(q), "match_id": m.match_id, "step": m.step, "a": m.a, "b": m.b,
                     "examinee_a": a.examinee, "examinee_b": b.examinee, "valid": m.valid, "partial": m.partial,
                     "orders": len(m.games), **g, "score_a": sa, "score_b": sb, "winner": winner,
                     "human_a": ha, "human_b": hb, "human_winner": human_winner,
                     "agrees_with_human": None if winner is None or human_winner is None else winner == human_winner,
                     "chars_a": len(a.text), "chars_b": len(b.text),
                     "longer_won": None if winner in (None, Verdict.TIE) or len(a.text) == len(b.text)
                     else (winner is Verdict.A) == (len(a.text) > len(b.text)),
                     **tokens.of(m.games)})
    return rows


def tidy_rows(store: Store, run: RunRecord, table: str | None = None) -> list[dict[str, Any]]:
    """The run's rows of ``table`` (default: its kind's first table: answers, orders or judgements)."""
    kind = kind_of(run.kind)
    names = kind.table_names(run)
    title = kind.title or kind.name
    if not names:
        raise ConfigError(f"run {run.id} is a {title} run: it has no tidy tables")
    table = table or names[0]
    if table not in names:
        raise ConfigError(f"run {run.id} is a {title} run: its tables are {', '.join(names)}, not {table!r}")
    return normalise(kind.tidy(store, run, table))


def snapshot(store: Store, run: RunRecord) -> ItemSet:
    """The run's item-set snapshot (an error for a store from before snapshots)."""
    items = store.items_for_run(run.id)
    if items is None:
        raise ConfigError(f"run {run.id} has no item-set snapshot (a store from before snapshots)")
    return items


def normalise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row with every column (None where a row has none), in first-seen order; a column holding values
    of different kinds (text and numbers) becomes text, so that it has one type in a DataFrame or Parquet."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    kinds: dict[str, set[type]] = {c: set() for c in cols}
    for r in rows:
        for c, v in r.items():
            if v is not None:
                kinds[c].add(type(v))
    number = {int, float}
    mixed = {c for c, k in kinds.items() if (len(k) > 1 and not k <= number) or k - {str, bool, *number}}
    if not mixed and all(len(r) == len(cols) for r in rows):
        return rows
    return [{c: (str(r.get(c)) if c in mixed and r.get(c) is not None else r.get(c)) for c in cols} for r in rows]


def results_df(store: Store | str | Path, run_id: str | None = None, *, table: str | None = None) -> Any:
    """A pandas DataFrame of one run's tidy rows (``run_id``: default the latest run; ``table``: see the
    module doc).  Needs pandas (``pip install 'knockout[dataframes]'``)."""
    try:
        import pandas as pd
    except ImportError:
        raise ConfigError("results_df needs pandas: pip install 'knockout[dataframes]'") from None
    from knockout.reports._runs import pick_run, reading

    with reading(store) as st:
        return pd.DataFrame(tidy_rows(st, pick_run(st, run_id, "export"), table))


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """Rows as a Parquet file (written to a temporary file and renamed into place)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("Parquet needs pyarrow: pip install 'knockout[dataframes]'") from None
    from knockout.data._output import atomic_output_bytes

    table = pa.Table.from_pylist(rows)
    with atomic_output_bytes(path) as f:
        pq.write_table(table, f)
