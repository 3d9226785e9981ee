"""Tidy tables of stored runs (knockout.reports.results_df, knockout export --format parquet / --table): one row
per answer, per match, per side-by-side order and per meta-judgement.  Judges: scripted (a SIMULATION)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from knockout.data import load_items
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run
from knockout.reports import results_df, tidy_rows
from knockout.sbs._run import SbsConfig, run_sbs
from knockout.storage._store import Store
from tests.test_meta import write_verdicts
from tests.test_sbs_run import synthetic

DEMO = Path(__file__).resolve().parents[1] / "src/knockout/examples/demo_exam.jsonl"
pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store with a debiased knockout run, an individual run, a side-by-side and a meta run."""
    from knockout.meta import MetaConfig, MetaOptions, load_verdicts, run_meta

    tmp = tmp_path_factory.mktemp("tidy")
    db = tmp / "runs.db"
    items = load_items(DEMO)
    ids = {}
    with Store(db) as store:
        ids["knockout"] = run(items, make_judge("scripted"), store,
                              RunConfig(method="knockout", options=MethodOptions(debias=True))).run_id
        ids["individual"] = run(items, make_judge("scripted?invalid=0.3&seed=3"), store,
                                RunConfig(format_retries=0)).run_id
        ids["sbs"] = run_sbs(synthetic(6), make_judge("scripted"), store, SbsConfig(), source="syn").run_id
        vs = load_verdicts(write_verdicts(tmp / "v"))
        ids["meta"] = run_meta(vs, make_judge("scripted"), store,
                               MetaConfig(options=MetaOptions(framework="jdeval"), shuffles=5)).run_id
    return db, ids


def test_answers_table_of_a_knockout_run(store_path: tuple[Path, dict[str, str]]) -> None:
    db, ids = store_path
    df = results_df(db, ids["knockout"])
    items = load_items(DEMO)
    assert len(df) == len(items) == 24
    for col in ("run_id", "method", "judge", "simulated_judge", "debias", "question_id", "exam_id", "language",
                "difficulty", "examinee", "max_points", "human_score", "score", "score_norm", "gap_norm", "valid",
                "round", "champion", "eliminated_round", "byes", "matches", "requests", "prompt_tokens",
                "answer_chars"):
        assert col in df.columns, col
    assert set(df["method"]) == {"knockout"} and df["debias"].all() and df["simulated_judge"].all()
    assert (df.groupby("question_id")["champion"].sum() == 1).all()
    assert set(df.loc[df["champion"], "round"]) == {"winner"}
    by_id = df.set_index("answer_id")
    for a in items:
        assert by_id.loc[a.id, "human_score"] == pytest.approx(a.human_score)
    # every request of every match an answer played: 2 per match (both orders)
    assert (df["requests"] == 2 * df["matches"]).all()
    assert df.groupby("language")["abs_gap_norm"].mean().index.tolist() == ["de", "en"]


def test_matches_table(store_path: tuple[Path, dict[str, str]]) -> None:
    db, ids = store_path
    m = results_df(db, ids["knockout"], table="matches")
    assert len(m) == 4 * 5  # N - 1 matches per question
    assert (m["orders"] == 2).all() and m[["score_a_ab", "score_a_ba", "score_b_ab", "score_b_ba"]].notna().all().all()
    assert set(m["winner"]) <= {"A", "B", "TIE"} and "agrees_with_human" in m and "longer_won" in m
    with pytest.raises(ConfigError, match="orders"):
        results_df(db, ids["knockout"], table="orders")


def test_individual_invalid_rows_keep_their_reason(store_path: tuple[Path, dict[str, str]]) -> None:
    db, ids = store_path
    df = results_df(db, ids["individual"])
    bad = df[~df["valid"]]
    assert len(bad) > 0 and bad["score"].isna().all() and bad["invalid_reason"].notna().all()
    # the demo exam has criteria rubrics: graded per criterion (docs/rubrics.md)
    assert set(df["prompt"]) == {"knockout-individual-en-criteria", "knockout-individual-de-criteria"}


def test_sbs_orders_and_meta_judgements(store_path: tuple[Path, dict[str, str]]) -> None:
    db, ids = store_path
    o = results_df(db, ids["sbs"])
    assert len(o) == 12 and sorted(set(o["swap"])) == [0, 1]
    assert set(o["shown_first"]) == {"candidate", "baseline"} and o["verdict"].notna().all()
    j = results_df(db, ids["meta"])
    assert set(j["framework"]) == {"jdeval"} and len(j) == 6 * 3
    assert j["evaluator_1"].notna().all() and j["evaluator_2"].notna().all()


def test_export_parquet_and_tidy_csv_through_the_cli(store_path: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    db, ids = store_path
    cli = [sys.executable, "-m", "knockout.cli", "export"]
    out = tmp_path / "k.parquet"
    res = subprocess.run([*cli, f"{db}:{ids['knockout']}", "--format", "parquet", "-O", str(out), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["rows"] == 24
    back = pd.read_parquet(out)
    assert back.shape == results_df(db, ids["knockout"]).shape
    res = subprocess.run([*cli, f"{db}:{ids['knockout']}", "--table", "matches", "--format", "csv"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].startswith("run_id,") and len(res.stdout.splitlines()) == 21
    res = subprocess.run([*cli, str(db), "--format", "parquet"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--output" in res.stderr


def test_mixed_meta_values_become_one_type(tmp_path: Path) -> None:
    from knockout.data._records import Answer, ItemSet, Question

    qs = [Question(id="q1", text="Q1?", meta={"code": 7}), Question(id="q2", text="Q2?", meta={"code": "x"})]
    items = ItemSet(qs, [Answer(id=f"{q.id}/a{i}", question_id=q.id, text="t", human_scores={"h": 1})
                         for q in qs for i in range(2)])
    with Store(tmp_path / "s.db") as store:
        rid = run(items, make_judge("scripted"), store, RunConfig()).run_id
        rows = tidy_rows(store, store.get_run(rid))  # type: ignore[arg-type]
    assert [r["meta:code"] for r in rows] == ["7", "7", "x", "x"]
