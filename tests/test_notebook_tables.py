"""The researcher's tables in a notebook: an item set as a DataFrame, a run's counts where the docs say, a
comparison as a DataFrame, and a missing column named with the columns that are there."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

import knockout
from knockout.data import Answer, ItemSet, Question
from knockout.errors import InputError

pd = pytest.importorskip("pandas")


def demo() -> ItemSet:
    with resources.as_file(resources.files("knockout.examples") / "demo_exam.jsonl") as path:
        return knockout.load_items(path, "jsonl")


def test_item_set_to_dataframe() -> None:
    items = demo()
    df = items.to_dataframe()
    assert len(df) == len(items) == 24
    assert list(df.columns[:12]) == ["question_id", "question", "reference", "max_points", "language", "difficulty",
                                     "exam_id", "task", "answer_id", "examinee", "answer", "human_score"]
    first = items.answers[0]
    q = items.question_of(first)
    row = df.iloc[0]
    assert (row["answer_id"], row["question_id"], row["question"], row["answer"]) == (first.id, q.id, q.text,
                                                                                      first.text)
    assert row["max_points"] == q.max_points and row["language"] == q.language
    assert row["human_score"] == pytest.approx(first.human_score)
    graders = sorted(first.human_scores)
    if graders != ["human"]:  # the demo exam has two graders: a column each
        assert [f"human_score:{g}" for g in graders] == sorted(c for c in df.columns if c.startswith("human_score:"))
        assert row[f"human_score:{graders[0]}"] == first.human_scores[graders[0]]


def test_to_dataframe_with_one_unnamed_grader() -> None:
    items = ItemSet([Question(id="q", text="Why?", max_points=2, language="de")],
                    [Answer(id="a", question_id="q", text="Weil.", human_scores={"human": 1}),
                     Answer(id="b", question_id="q", text="Darum.")])
    df = items.to_dataframe()
    assert [c for c in df.columns if c.startswith("human_score")] == ["human_score"]
    assert df["human_score"].iloc[0] == 1 and pd.isna(df["human_score"].iloc[1])
    assert df["language"].tolist() == ["de", "de"]


def table() -> list[dict[str, object]]:
    return [{"qid": f"q{i % 2}", "prompt": "Why?", "response": f"because {'x' * i}", "teacher": i % 3}
            for i in range(6)]


def test_grade_counts_where_the_docs_say(tmp_path: Path) -> None:
    df = pd.DataFrame(table())
    cols = {"question_id": "qid", "question": "prompt", "answer": "response", "human_score": "teacher"}
    first = knockout.grade(df, judge="scripted", columns=cols, language="en", max_points=2, store=tmp_path / "s.db",
                           progress=False)
    info = first.attrs["knockout"]
    assert (info["judge_calls"], info["cache_hits"], info["answers"], info["valid"], info["invalid"]) == (6, 0, 6, 6, 0)
    assert info["prompt_tokens"] == info["stats"]["prompt_tokens"] and "wall_s" in info
    again = knockout.grade(df, judge="scripted", columns=cols, language="en", max_points=2, store=tmp_path / "s.db",
                           progress=False)
    assert (again.attrs["knockout"]["judge_calls"], again.attrs["knockout"]["cache_hits"]) == (0, 6)


def test_a_missing_column_lists_the_columns_there(tmp_path: Path) -> None:
    df = pd.DataFrame(table())
    with pytest.raises(InputError, match=r"no column 'answer'.*the columns there: 'qid', 'prompt', 'response', "
                                         r"'teacher'$") as e:
        knockout.grade(df, judge="scripted", columns={"question_id": "qid", "question": "prompt"}, language="en",
                       max_points=2, store=tmp_path / "s.db", progress=False)
    assert "<language>" not in str(e.value)


def test_comparison_as_a_dataframe(tmp_path: Path) -> None:
    items = demo()
    db = tmp_path / "runs.db"
    ids = []
    with knockout.Store(db) as store:
        for spec in ("scripted?noise=0.05", "scripted?noise=0.4&seed=2"):
            ids.append(knockout.run(items, knockout.make_judge(spec), store, knockout.RunConfig()).run_id)
    runs = [knockout.load_run(db, i) for i in ids]
    cmp = knockout.build_comparison(runs, resamples=50)
    df = knockout.comparison_df(cmp)
    assert list(df.index) == ids
    assert df.loc[ids[0], "pearson"] == pytest.approx(cmp["runs"][0]["question_level"]["pearson"])
    assert df.loc[ids[0], "pearson_low"] <= df.loc[ids[0], "pearson"] <= df.loc[ids[0], "pearson_high"]
    assert pd.isna(df.loc[ids[0], "delta"]) and df.loc[ids[1], "baseline"] == ids[0]
    paired = cmp["paired"][0]["question_level"]
    assert df.loc[ids[1], "delta"] == pytest.approx(paired["delta"])
    assert df.loc[ids[1], "p_bootstrap"] == pytest.approx(paired["p_bootstrap"])
    assert {"method", "judge", "spearman", "rmse", "kendall", "williams_t", "p_williams",
            "williams_na"} <= set(df.columns)


def test_two_prompt_variants_of_one_judge_have_distinct_labels(tmp_path: Path) -> None:
    """Two prompts, and a knockout with and without --debias, of one judge: each run its own label."""
    items = demo()
    db = tmp_path / "runs.db"
    judge = knockout.make_judge("scripted?noise=0.3")
    configs = [knockout.RunConfig(options=knockout.MethodOptions(prompt="knockout")),
               knockout.RunConfig(options=knockout.MethodOptions(prompt="knockout-first")),
               knockout.RunConfig(method="knockout"),
               knockout.RunConfig(method="knockout", options=knockout.MethodOptions(debias=True))]
    with knockout.Store(db) as store:
        ids = [knockout.run(items, judge, store, c).run_id for c in configs]
    df = knockout.comparison_df(knockout.build_comparison([knockout.load_run(db, i) for i in ids], resamples=0))
    labels = df["label"].tolist()
    assert len(set(labels)) == 4, labels
    assert labels[:2] == ["individual · scripted:sim · prompt=knockout",
                          "individual · scripted:sim · prompt=knockout-first"]
    assert labels[2:] == ["knockout · scripted:sim · debias=False", "knockout · scripted:sim · debias=True"]


def test_the_build_comparison_example_of_the_docs_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "python-api.md").read_text(encoding="utf-8")
    code = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "build_comparison(runs" in b)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/python-api.md", "exec"), {})  # the documented example, as written
    out = capsys.readouterr().out
    assert "prompt=knockout-first" in out and "pearson" in out, out
