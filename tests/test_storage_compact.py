"""Compact, streaming storage: requests stored once by content (blobs), older request rows readable,
compressed item-set snapshots written once, chunked individual runs, paged results and streamed export, and
the contingency-table bootstrap (the same intervals as resampling the points)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.engine import CallRecord
from knockout.judges import make_judge
from knockout.methods import RunConfig, run
from knockout.methods._individual import Individual
from knockout.metrics._analysis import correlations_np, table_bootstrap
from knockout.metrics._bootstrap import bootstrap
from knockout.reports._export import export_run
from knockout.storage import Store
from knockout.storage import _store as store_module


def items(n_q: int = 3, n_a: int = 4) -> ItemSet:
    qs = [Question(id=f"q{i}", text=f"Explain topic {i} " + "in detail " * 20, max_points=4) for i in range(n_q)]
    answers = [Answer(id=f"q{i}a{j}", question_id=f"q{i}", examinee=f"e{j}", text=f"answer {j} to {i}",
                      human_scores={"h": float((i + j) % 5)}) for i in range(n_q) for j in range(n_a)]
    return ItemSet(qs, answers, source="compact-test")


def record(key: str) -> CallRecord:
    return CallRecord(key, "Score: 1/4", None, 10, 3, 0.1, "stop", 0)


def test_requests_are_stored_once_by_content(tmp_path: Path) -> None:
    long = "Grade this answer carefully. " * 40
    with Store(tmp_path / "s.db") as s:
        ident = {"backend": "x", "model": "m"}
        params = {"temperature": 0.1, "max_tokens": 512}
        s.put_call("k1", ident, {"messages": [{"role": "system", "content": long}, {"role": "user", "content": "a"}],
                                 "params": params}, record("k1"))
        s.put_call("k2", ident, {"messages": [{"role": "system", "content": long}, {"role": "user", "content": "b"}],
                                 "params": params}, record("k2"))
        blobs = s.db.execute("SELECT z, LENGTH(data) FROM blobs").fetchall()
        assert len(blobs) == 4  # the long system prompt and the parameters once, each user message
        assert any(z == 1 and n < len(long) / 3 for z, n in blobs)  # compressed where it pays
        stored = s.db.execute("SELECT request FROM calls WHERE key = 'k1'").fetchone()[0]
        assert long not in stored
        calls = {c["key"]: json.loads(c["request"]) for c in s.iter_calls()}
        assert calls["k1"]["messages"][0]["content"] == long and calls["k2"]["messages"][1]["content"] == "b"
        assert calls["k1"]["params"] == params


def test_prompts_of_one_template_are_compressed_against_a_preset_dictionary(tmp_path: Path) -> None:
    """Prompts that differ only in the answer are stored as a few dozen bytes each (z 2: compressed with the
    writer's first long content as a zlib preset dictionary), and read back by any later store object,
    whatever dictionary it chose for its own writes; rows written before (z 0/1) stay readable."""
    template = ("You are a university professor exam grader. Grade the following answer on a scale of 0 to 4 "
                "based on its correctness and relevancy given the following question.\n\nThe Question: {q}\n\n"
                "The Answer: {a}\n\nGive your grade in the format: Explanation: [explanation] Score: [score]/4")
    texts = [template.format(q=f"Explain topic {i % 7}.", a=f"Answer {i}: the kernel bounds the prior {i * 7}.")
             for i in range(200)]
    with Store(tmp_path / "s.db") as s:
        refs = [s.put_blob(t.encode()) for t in texts]
        kinds = dict(s.db.execute("SELECT z, COUNT(*) FROM blobs GROUP BY z").fetchall())
        assert kinds.get(2, 0) == len(texts) - 1  # all but the dictionary itself
        sizes = [n for (n,) in s.db.execute("SELECT LENGTH(data) FROM blobs WHERE z = 2")]
        assert max(sizes) < 100 < min(len(t) for t in texts) / 3
    with Store(tmp_path / "s.db") as s:
        other = s.put_blob(("another template entirely, " * 20).encode())  # this writer's own dictionary
        again = s.put_blob(("another template entirely, " * 19 + "with a change").encode())
        assert [s.get_blob(r).decode() for r in refs] == texts
        assert s.get_blob(other).decode() == "another template entirely, " * 20
        assert s.get_blob(again).decode().endswith("with a change")


def test_request_rows_written_before_blobs_read_as_they_are(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as s:
        old = json.dumps({"messages": [{"role": "user", "content": "old prompt"}], "params": {"seed": 0}})
        s.db.execute("INSERT INTO calls (key, backend, model, request, reply, created) VALUES ('o', 'x', 'm', ?, "
                     "'r', 0)", (old,))
        (row,) = list(s.iter_calls())
        assert json.loads(row["request"]) == json.loads(old)


def test_item_set_snapshot_compressed_and_written_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = items()
    with Store(tmp_path / "s.db") as s:
        fp = s.save_items(data)
        (blob,) = s.db.execute("SELECT data FROM itemsets").fetchone()
        assert isinstance(blob, bytes)
        back = s.load_items(fp)
        assert back is not None and back.fingerprint() == fp and back.source == data.source

        def boom(_: ItemSet) -> bytes:
            raise AssertionError("serialised again")

        monkeypatch.setattr(store_module, "pack_items", boom)
        assert s.save_items(data) == fp  # stored: not serialised again
        # a snapshot written before schema step 36 (JSON text) is read too
        s.db.execute("UPDATE itemsets SET data = ? WHERE fingerprint = ?", (json.dumps(data.to_dict()), fp))
        assert s.load_items(fp).fingerprint() == fp  # type: ignore[union-attr]


def test_chunked_individual_run_same_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = items(3, 5)
    with Store(tmp_path / "one.db") as s:
        whole = run(data, make_judge("scripted?noise=0.3"), s, RunConfig())
    monkeypatch.setattr(Individual, "chunk", 4)
    with Store(tmp_path / "chunks.db") as s:
        parts = run(data, make_judge("scripted?noise=0.3"), s, RunConfig())
        assert parts.stats["waves"] == 1 and parts.stats["judge_calls"] == 15
        assert [r.score for r in parts.results] == [r.score for r in whole.results]
        # the details are in the store; kept: the prompt (what a run used, for its summary)
        assert all(set(r.details) == {"prompt"} for r in parts.results if r.valid)
        stored = s.results(parts.run_id)
        assert len(stored) == 15 and stored[0]["details"]["attempts"][0]["reply"]
        assert s.count_results(parts.run_id) == 15
        light = s.results(parts.run_id, details=False)
        assert light[0]["details"] == {} and light[0]["score"] == stored[0]["score"]
    _, rows, text = export_run(tmp_path / "chunks.db", None, "jsonl")
    assert rows == 15 and len(text.splitlines()) == 15 and json.loads(text.splitlines()[0])["replies"]


def test_table_bootstrap_gives_the_point_bootstrap_intervals() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 9, 600) / 8
    y = np.clip(x + rng.normal(0, 0.25, 600), 0, 1).round(1)
    q = np.repeat(np.arange(60), 10)
    fast = table_bootstrap(x, y, q, resamples=200, seed=7)
    slow = bootstrap(lambda s: correlations_np(x[s], y[s]), q, resamples=200, seed=7)
    assert fast is not None
    for a, b in zip(fast, slow, strict=True):
        assert a.resamples == b.resamples
        assert a.low == pytest.approx(b.low, abs=1e-9) and a.high == pytest.approx(b.high, abs=1e-9)
    assert table_bootstrap(rng.normal(size=300), rng.normal(size=300), np.arange(300), resamples=5, seed=0) is None


def test_migrated_store_has_the_new_tables(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db"):
        pass
    con = sqlite3.connect(tmp_path / "s.db")
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert {"blobs", "batches", "batch_requests"} <= names


def test_scale_bench_smoke(tmp_path: Path) -> None:
    """bench/scale.py end to end at 10k answers (the figures are the benchmark's; here: it runs and reads)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "scale.py"), "--answers", "10000", "--resamples", "50",
                        "--json", "--dir", str(tmp_path)], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["judge_calls"] == 10000 and got["rerun_cache_hits"] == 10000
    assert got["store_mb"] > 0 and got["peak_rss_mb"] > 0


def test_individual_details_written_directly_match_the_model() -> None:
    from knockout.engine import Attempt, Outcome
    from knockout.methods._base import IndividualDetails
    from knockout.methods._individual import individual_details

    for o in (Outcome(2.0, True, [Attempt(key="k", reply="Score: 2/4", cached=False, error=None)]),
              Outcome(None, False, [Attempt(key="k", reply="?", cached=True, error="no score")], error="no score"),
              Outcome(None, False, [], error="judge error: x", failed=True)):
        model = IndividualDetails(prompt="p", shots=["a"], **o.trace().model_dump()).model_dump(mode="json")
        assert "criteria" not in model  # written only for an answer graded by a criteria rubric
        assert json.dumps(individual_details(o, "p", ["a"])) == json.dumps(model)
    from knockout.data._records import Criterion

    o = Outcome({"grade": 1.5, "criteria": [1.0, 0.5]}, True, [Attempt(key="k", reply="r", cached=False, error=None)])
    crit = [Criterion(criterion="a", points=1), Criterion(criterion="b", points=1)]
    direct = individual_details(o, "p", [], crit)
    model = IndividualDetails(prompt="p", criteria=direct["criteria"], **o.trace().model_dump()).model_dump(mode="json")
    assert json.dumps(direct) == json.dumps(model)


def test_the_written_blob_digests_kept_in_memory_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 59 item 7: the digests of the blobs a store object wrote are kept for the latest
    ``blobs_seen_max`` only (before: a set that grew to 100,000, ~90 bytes an answer); a blob written again and
    again (a template's shared text, the parameters) stays known and is not written again; one that left is
    found again, and every blob reads back."""
    from knockout.storage import Store

    monkeypatch.setattr(Store, "blobs_seen_max", 50)
    with Store(tmp_path / "s.db") as store:
        shared = store.put_blob(b"the shared system prompt " * 10)
        refs = []
        for i in range(1000):
            refs.append(store.put_blob(f"answer {i}".encode()))
            assert store.put_blob(b"the shared system prompt " * 10) == shared
            assert len(store._blobs_seen) <= 50
        assert bytes.fromhex(shared) in store._blobs_seen
        assert [store.get_blob(r) for r in refs[:3]] == [b"answer 0", b"answer 1", b"answer 2"]
        assert store.put_blob(b"answer 0") == refs[0]  # left memory, written again: the same blob, one row
        assert store.db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1001
