"""Tables of answers in every container (CSV, flat JSONL, Parquet, pandas DataFrame, Hugging Face datasets)
load to the same item set with the same column mapping; the WMT DA loader (mt-metrics-eval layout) with the
knockout thesis's filtering, on a fixture written for these tests."""

from __future__ import annotations

import csv
import json
import math
import re
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from knockout.data import detect_format, from_dataframe, from_dataset, load_items
from knockout.errors import ConfigError, InputError

FIX = Path(__file__).parent / "fixtures"
WMT = FIX / "wmt"

# One answer per row, the question's fields repeated; column names as a user's export might have them.
ROWS: list[dict[str, Any]] = [
    {"qid": "q1", "Frage": "What does DNS do?", "gold": "Maps names to addresses.", "max": 2, "lang": "en",
     "level": "easy", "exam": "net", "student": "alice", "Antwort": "It translates host names into IP addresses.",
     "grade_a": 2, "grade_b": 1.5},
    {"qid": "q1", "Frage": "What does DNS do?", "gold": "Maps names to addresses.", "max": 2, "lang": "en",
     "level": "easy", "exam": "net", "student": "bob", "Antwort": "It encrypts web traffic.", "grade_a": 0,
     "grade_b": None},
    {"qid": "q2", "Frage": "Name one UDP use.", "gold": None, "max": 1, "lang": "en", "level": None, "exam": "net",
     "student": "alice", "Antwort": "DNS queries.", "grade_a": 1, "grade_b": 1},
    {"qid": "q2", "Frage": "Name one UDP use.", "gold": None, "max": 1, "lang": "en", "level": None, "exam": "net",
     "student": "carol", "Antwort": "Video streaming, because late packets are useless.", "grade_a": 0.5,
     "grade_b": 1},
]
COLUMNS = ("question_id=qid,question=Frage,reference=gold,max_points=max,language=lang,difficulty=level,"
           "exam_id=exam,examinee=student,answer=Antwort,human_score:a=grade_a,human_score:b=grade_b")


def raises_input(*parts: str) -> AbstractContextManager[Any]:
    return pytest.raises(InputError, match="(?s)" + "".join(f"(?=.*{re.escape(p)})" for p in parts))


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if v is None else v for k, v in r.items()})
    return path


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def dump(items: Any) -> list[Any]:
    return [[q.model_dump() for q in items.questions.values()], [a.model_dump() for a in items.answers]]


@pytest.fixture()
def reference(tmp_path: Path) -> Any:
    items = load_items(write_csv(tmp_path / "grades.csv", ROWS), columns=COLUMNS)
    assert len(items) == 4 and list(items.questions) == ["q1", "q2"]
    assert items.answer("q1/bob").human_scores == {"a": 0.0}  # the empty cell is no grade
    assert items.answer("q2/carol").human_scores == {"a": 0.5, "b": 1.0}
    assert items.questions["q1"].difficulty == "easy" and items.questions["q2"].reference is None
    return items


def test_flat_jsonl_parquet_dataframe_and_datasets_load_like_csv(tmp_path: Path, reference: Any) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    datasets = pytest.importorskip("datasets")
    flat = write_jsonl(tmp_path / "grades.jsonl", ROWS)
    assert detect_format(flat) == "jsonl"
    df = pd.DataFrame(ROWS)
    parquet = tmp_path / "grades.parquet"
    df.to_parquet(parquet)
    assert detect_format(parquet) == "parquet"
    ds = datasets.Dataset.from_list(ROWS)
    folder = tmp_path / "grades-ds"
    ds.save_to_disk(str(folder))
    assert detect_format(folder) == "hf-dataset"
    dd_folder = tmp_path / "grades-dd"
    datasets.DatasetDict({"test": ds, "train": ds.select([0])}).save_to_disk(str(dd_folder))
    loaded = {
        "flat jsonl": load_items(flat, columns=COLUMNS),
        "parquet": load_items(parquet, columns=COLUMNS),
        "dataframe": from_dataframe(df, columns=COLUMNS),
        "dataframe via load_items": load_items(df, columns=COLUMNS),
        "dataset": from_dataset(ds, columns=COLUMNS),
        "dataset folder": load_items(folder, columns=COLUMNS),
        "dataset dict folder": load_items(dd_folder, columns=COLUMNS, split="test"),
    }
    for name, items in loaded.items():
        assert items.fingerprint() == reference.fingerprint(), name
        assert dump(items) == dump(reference), name
    with pytest.raises(ConfigError, match="split"):
        load_items(dd_folder, columns=COLUMNS)


def test_default_column_names_need_no_mapping(tmp_path: Path) -> None:
    rows = [{"question_id": 7, "question": "Q?", "max_points": 3, "examinee": "s1", "answer": "yes",
             "human_score": 2, "human_score:ta": 2.5},
            {"question_id": 7, "question": "Q?", "max_points": 3, "examinee": "s2", "answer": 42,
             "human_scores": {"ta": 1}}]
    items = load_items(write_jsonl(tmp_path / "flat.jsonl", rows))
    assert list(items.questions) == ["7"]  # a numeric id is text
    assert items.answer("7/s1").human_scores == {"human": 2.0, "ta": 2.5}
    assert items.answer("7/s2").human_scores == {"ta": 1.0} and items.answer("7/s2").text == "42"


def test_dataframe_cells_nan_and_numpy(reference: Any) -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(ROWS)
    df["grade_b"] = df["grade_b"].astype("Float64")  # pandas' NA for the missing grade
    assert df["grade_b"].isna().sum() == 1
    assert from_dataframe(df, columns=COLUMNS).fingerprint() == reference.fingerprint()
    df2 = pd.DataFrame(ROWS).assign(max=lambda d: d["max"].astype(float))
    assert math.isnan(df2["grade_b"][1])
    assert from_dataframe(df2, columns=COLUMNS).fingerprint() == reference.fingerprint()


def test_table_errors_name_row_and_column(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    bad = [dict(ROWS[0]), dict(ROWS[1], grade_a="lots")]
    with raises_input("grades.jsonl", "line 2", "field 'grade_a'", "not a number"):
        load_items(write_jsonl(tmp_path / "grades.jsonl", bad), columns=COLUMNS)
    with raises_input("<DataFrame>", "row 1", "field 'grade_a'"):
        from_dataframe(pd.DataFrame(bad), columns=COLUMNS)
    with raises_input("<DataFrame>", "columns", "no column 'Antwort'"):
        from_dataframe(pd.DataFrame(ROWS).drop(columns=["Antwort"]), columns=COLUMNS)
    contradict = [dict(ROWS[0]), dict(ROWS[1], max=5)]
    with raises_input("grades.parquet", "row 2", "field 'max'", "differs from its first row (row 1)"):
        path = tmp_path / "grades.parquet"
        pd.DataFrame(contradict).to_parquet(path)
        load_items(path, columns=COLUMNS)
    with raises_input("x.jsonl", "line 1", "no column 'answer'", "any record"):
        load_items(write_jsonl(tmp_path / "x.jsonl", [{"question_id": "q", "question": "Q?", "text": "a"}]))
    with pytest.raises(ConfigError, match="columns and split"):
        load_items(pd.DataFrame(ROWS), segments=3)


def test_typed_jsonl_still_refuses_a_record_without_type(tmp_path: Path) -> None:
    q = {"type": "question", "id": "q1", "text": "Q?"}
    a = {"question_id": "q1", "answer": "x"}
    with raises_input("t.jsonl", "line 2", "field 'type'", "flat file"):
        load_items(write_jsonl(tmp_path / "t.jsonl", [q, a]))


def test_parquet_is_confined_and_checked(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    fake = tmp_path / "fake.parquet"
    fake.write_text("question_id,question\n", encoding="utf-8")
    with raises_input("fake.parquet", "not a Parquet file"):
        load_items(fake)
    with raises_input("big.parquet", "over the"):
        big = tmp_path / "big.parquet"
        big.write_bytes(b"PAR1" + b"\0" * (2 * 2**20) + b"PAR1")
        load_items(big, max_file_mb=1)


def test_dataset_folder_with_a_file_outside_is_refused(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "data" / "ds"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(folder))
    outside = tmp_path / "elsewhere.arrow"
    outside.write_bytes(b"x")
    (folder / "link.arrow").symlink_to(outside)
    with raises_input("outside the data folder"):
        load_items(folder, columns=COLUMNS)


# ---------------------------------------------------------------- WMT DA, mt-metrics-eval layout


def test_wmt_thesis_filtering() -> None:
    assert detect_format(WMT) == "wmt" and detect_format(WMT / "wmt23") == "wmt"
    items = load_items(WMT)
    assert list(items.questions) == ["wmt23/en-de/1", "wmt23/en-de/2", "wmt23/en-ja/1", "wmt24/en-es/1"]
    q1 = items.questions["wmt23/en-de/1"]
    assert (q1.task, q1.max_points, q1.language, q1.human_scale, q1.exam_id) == ("mt", 100.0, "de", "points",
                                                                                "wmt23/en-de")
    assert q1.text == "The cat sleeps on the warm roof." and q1.reference == "Die Katze schläft auf dem warmen Dach."
    assert q1.meta == {"testset": "wmt23", "pair": "en-de", "segment": 1, "source_language": "en", "domain": "news",
                       "doc": "doc1"}
    # sysE has no score for segment 1; the reference scored as a system (refA) is left out
    assert [a.examinee for a in items.answers_for(q1.id)] == ["sysA", "sysB", "sysC", "sysD"]
    # segment 2: sysA and sysB wrote the same translation: the first (by name) is kept, the other noted
    seg2 = items.answers_for("wmt23/en-de/2")
    assert [a.examinee for a in seg2] == ["sysA", "sysC", "sysD", "sysE"]
    assert seg2[0].human_scores == {"da-sqm": 81.0} and seg2[0].meta == {"same_as": {"sysB": 75.0}}
    # segment 3: three identical translations leave 3 distinct ones, fewer than 4: dropped
    assert "wmt23/en-de/3" not in items.questions
    assert items.answer("wmt24/en-es/1/m2").human_scores == {"esa": 91.0}


def test_wmt_options() -> None:
    thesis = load_items(WMT, languages="en,de,fr,it,pt,hi,es,th")
    assert list(thesis.questions) == ["wmt23/en-de/1", "wmt23/en-de/2", "wmt24/en-es/1"]
    mean = load_items(WMT / "wmt23", pairs="en-de", duplicates="mean")
    assert mean.answer("wmt23/en-de/2/sysA").human_scores == {"da-sqm": 78.0}
    drop = load_items(WMT / "wmt23", pairs="en-de", duplicates="drop", min_translations=2)
    assert [a.examinee for a in drop.answers_for("wmt23/en-de/2")] == ["sysC", "sysD", "sysE"]
    assert [a.examinee for a in drop.answers_for("wmt23/en-de/3")] == ["sysD", "sysE"]
    keep = load_items(WMT, testsets="wmt23", pairs="en-de", duplicates="keep", include_references=True,
                      min_translations=1, reference="none")
    assert len(keep.answers_for("wmt23/en-de/3")) == 6 and keep.questions["wmt23/en-de/3"].reference is None
    z = load_items(WMT / "wmt23", pairs="en-de", human="wmt-z")
    assert z.questions["wmt23/en-de/1"].human_scale == "wmt-z"  # not on 0..100: correlations only
    assert load_items(WMT, segments=1, pairs="en-de").question_ids() == ["wmt23/en-de/1"]
    with pytest.raises(ConfigError, match="duplicates"):
        load_items(WMT, duplicates="some")
    with pytest.raises(ConfigError, match="no test set wmt19"):
        load_items(WMT, testsets="wmt19")
    with raises_input("human-scores", "en-de", "no human score file en-de.mqm.seg.score"):
        load_items(WMT / "wmt23", pairs="en-de", human="mqm")


def test_wmt_bad_files(tmp_path: Path) -> None:
    import shutil

    ts = tmp_path / "wmt23"
    shutil.copytree(WMT / "wmt23", ts)
    score = ts / "human-scores" / "en-de.da-sqm.seg.score"
    lines = score.read_text().splitlines()
    score.write_text("\n".join(lines[:-1]) + "\n")
    with raises_input("en-de.da-sqm.seg.score", "system refA", "2 segment scores", "3 segments"):
        load_items(ts, pairs="en-de")
    score.write_text("\n".join([*lines[:-1], "refA\tninety"]) + "\n")
    with raises_input("en-de.da-sqm.seg.score", f"line {len(lines)}", "field 'score'", "not a number"):
        load_items(ts, pairs="en-de")
    score.write_text("\n".join(lines) + "\n")
    out = ts / "system-outputs" / "en-de" / "sysC.txt"
    out.write_text("only one line\n")
    with raises_input("sysC.txt", "1 lines; the source has 3"):
        load_items(ts, pairs="en-de")


def _big_table(n: int) -> list[dict[str, Any]]:
    return [{"question_id": f"q{i // 10}", "question": f"Question {i // 10}?", "max_points": 2, "answer_id": f"a{i}",
             "examinee": f"e{i % 10}", "answer": f"Answer {i}: the same input always gives the same digest.",
             "human_score:ta": i % 3} for i in range(n)]


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_table_streams_into_columns_without_answer_objects(tmp_path: Path, kind: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A flat JSONL or CSV file is read a row at a time into the item set's columns: no Answer is validated
    (each row's fields are checked as Answer checks them), and what the load holds at its peak is the loaded
    set itself, not a list of parsed lines or of answers beside it (that was 6-7 times the set)."""
    import tracemalloc

    from knockout.data import Answer
    from knockout.data._formats import table

    rows = _big_table(4000)
    path = (write_jsonl if kind == "jsonl" else write_csv)(tmp_path / f"big.{kind}", rows)
    built: list[str] = []
    real_build = table.build

    def counting_build(model: Any, data: Any, **kw: Any) -> Any:
        built.append(model.__name__)
        return real_build(model, data, **kw)

    load_items((write_jsonl if kind == "jsonl" else write_csv)(tmp_path / f"small.{kind}", rows[:20]))  # first use
    monkeypatch.setattr(table, "build", counting_build)
    tracemalloc.start()
    try:
        items = load_items(path, kind)  # named: a sniffer's look at the head is not the load's
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(items) == 4000 and len(items.questions) == 400
    assert built.count("Answer") == 0 and built.count("Question") == 400
    assert peak < 1.5 * held, (peak, held)
    a = items.answers[1234]
    want = Answer.model_validate({"id": "a1234", "question_id": "q123", "examinee": "e4",
                                  "text": rows[1234]["answer"], "human_scores": {"ta": 1.0}})
    assert a == want and a.model_fields_set == want.model_fields_set
    assert a.model_dump_json() == want.model_dump_json()


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
@pytest.mark.parametrize(("cell", "value", "message"), [
    ("answer", "   ", "must not be empty"),
    ("examinee", "\u200b", "must not be empty"),
    ("answer_id", "x" * 1025, "at most 1024 characters"),
    ("answer", "nul \x00 here", "a NUL character"),
    ("human_score:ta", "lots", "not a number"),
])
def test_a_bad_row_deep_in_a_table_is_named(tmp_path: Path, kind: str, cell: str, value: str, message: str) -> None:
    """The streamed read keeps the errors: file, the record (its line) and the column, as before."""
    rows = _big_table(300)
    rows[250] = dict(rows[250], **{cell: value})
    if kind == "csv" and "\x00" in value:
        pytest.skip("the csv module refuses a NUL before the row is read")
    path = (write_jsonl if kind == "jsonl" else write_csv)(tmp_path / f"bad.{kind}", rows)
    line = 251 if kind == "jsonl" else 252  # a CSV's header is line 1
    with raises_input(f"bad.{kind}", f"line {line}", f"field '{cell}'", message):
        load_items(path)


def test_csv_line_ends_read_as_before(tmp_path: Path) -> None:
    """CSV read a line at a time splits lines as the whole text did: CRLF, a lone CR, a line break inside a
    quoted cell (the error after it names the line the csv module counts)."""
    text = ('question_id,question,answer\r\nq1,"Two\nlines?",a\rq1,"Two\nlines?",b\r\n'
            'q2,Q2?,"multi\r\nline answer"\nq2,Q2?,\n')
    path = tmp_path / "ends.csv"
    path.write_bytes(text.encode("utf-8"))
    with raises_input("ends.csv", "line 8", "field 'answer'", "must not be empty"):
        load_items(path)
    path.write_bytes(text.removesuffix("q2,Q2?,\n").encode("utf-8"))
    items = load_items(path)
    assert [a.text for a in items.answers] == ["a", "b", "multi\r\nline answer"]
    assert items.questions["q1"].text == "Two\nlines?"
