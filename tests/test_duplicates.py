"""Duplicate header columns, duplicate JSON keys and duplicate answer ids are refused with file, record and field
(issue 60 item 4): before, a CSV with a column twice and a JSONL record with a key twice were graded without a
word (the last value won)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knockout.data import load_items
from knockout.errors import InputError

Q1 = {"type": "question", "id": "q1", "text": "What does DNS do?", "max_points": 2}
A1 = {"type": "answer", "id": "a1", "question_id": "q1", "text": "Name resolution.", "human_score": 1.5}


def _refused(path: Path, record: str, field: str, *words: str) -> None:
    with pytest.raises(InputError) as e:
        load_items(path)
    err = e.value
    assert err.file is not None and Path(err.file).name == path.name, str(err)
    assert err.record == record and err.field == field, str(err)
    for w in words:
        assert w in str(err), str(err)
    assert "\n" not in str(err)


@pytest.mark.parametrize("header", [
    "question_id,question,max_points,answer,answer,human_score",
    "question_id,question,max_points,answer,human_score,human_score ",  # the same after the strip
    "question_id,question,max_points,examinee,answer,human_score,examinee",  # a column no field maps: still refused
])
def test_a_csv_column_written_twice_is_refused(tmp_path: Path, header: str) -> None:
    cols = header.split(",")
    dup = next(c.strip() for i, c in enumerate(cols) if c.strip() in [x.strip() for x in cols[:i]])
    cells = {"question_id": "q1", "question": "Q?", "max_points": "2", "answer": "fine", "human_score": "1",
             "examinee": "s1"}
    p = tmp_path / "grades.csv"
    p.write_text(header + "\n" + ",".join(cells[c.strip()] for c in cols) + "\n", encoding="utf-8")
    _refused(p, "line 1", dup, "appears twice", "columns ")


def test_unnamed_columns_may_repeat(tmp_path: Path) -> None:
    p = tmp_path / "grades.csv"
    p.write_text("question_id,question,max_points,answer,human_score,,\nq1,Q?,2,fine,1,,\n", encoding="utf-8")
    assert len(load_items(p)) == 1


@pytest.mark.parametrize("record", [
    '{"type": "answer", "id": "a1", "question_id": "q1", "text": "Name resolution.", "text": "Better.", '
    '"human_score": 1.5}',
    '{"type": "answer", "id": "a1", "question_id": "q1", "text": "x", "human_scores": {"ta": 1, "ta": 2}}',
])
def test_a_json_key_written_twice_is_refused(tmp_path: Path, record: str) -> None:
    p = tmp_path / "exam.jsonl"
    p.write_text(json.dumps(Q1) + "\n" + record + "\n", encoding="utf-8")
    field = "text" if '"text": "Better.' in record else "ta"
    _refused(p, "line 2", field, "appears twice")


def test_a_flat_jsonl_key_written_twice_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "flat.jsonl"
    p.write_text('{"question_id": "q1", "question": "Q?", "max_points": 2, "answer": "a", "answer": "b"}\n',
                 encoding="utf-8")
    _refused(p, "line 1", "answer", "appears twice")


def test_a_duplicate_answer_id_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "exam.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in (Q1, A1, {**A1, "text": "Other."})), encoding="utf-8")
    _refused(p, "a1", "id", "duplicate answer id")


def test_a_verdict_csv_with_a_column_twice_is_refused(tmp_path: Path) -> None:
    from knockout.meta._verdicts import read_rows
    from knockout.reports._verdicts import iter_records

    p = tmp_path / "v.csv"
    p.write_text("id,verdict,verdict\nx,A,B\n", encoding="utf-8")
    for read in (read_rows, iter_records):
        with pytest.raises(InputError) as e:
            list(read(p))
        assert e.value.field == "verdict" and e.value.record == "line 1"
