"""The CLI: summaries, --json, export, and bad input (exit 2, one clear line, nothing written)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

EXE = [sys.executable, "-m", "knockout.cli"]


def knockout(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


GOOD = [
    {"type": "question", "id": "q1", "text": "What does TCP add over IP?", "max_points": 2},
    {"type": "answer", "id": "a1", "question_id": "q1", "examinee": "e1", "text": "Reliability.",
     "human_score": 2},
    {"type": "answer", "id": "a2", "question_id": "q1", "examinee": "e2", "text": "Colour.", "human_score": 0},
    {"type": "answer", "id": "a3", "question_id": "q1", "examinee": "e3", "text": "Ordering, sometimes.",
     "human_score": 1},
]


def test_grade_json_and_export(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", GOOD)
    db = tmp_path / "r.db"
    res = knockout("grade", str(data), "--judge", "scripted", "-o", str(db), "--json", "-q")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    for key in ("run_id", "method", "judge", "simulated_judge", "answers", "valid", "invalid", "judge_calls",
                "cache_hits", "prompt_tokens", "completion_tokens", "waves", "wall_s", "agreement"):
        assert key in summary
    assert summary["answers"] == 3 and summary["judge_calls"] == 3 and summary["simulated_judge"] is True
    assert set(summary["agreement"]) >= {"pearson", "rmse", "n", "invalid"}
    again = json.loads(knockout("grade", str(data), "--judge", "scripted", "-o", str(db), "--json", "-q").stdout)
    assert again["judge_calls"] == 0 and again["run_id"] == summary["run_id"]
    csv_out = knockout("export", str(db), "--format", "csv")
    assert csv_out.returncode == 0
    rows = list(csv.DictReader(io.StringIO(csv_out.stdout)))
    assert [r["item_id"] for r in rows] == ["a1", "a2", "a3"] and all(r["valid"] == "1" for r in rows)
    # issue 42: the run's grade and the judge's text are named so that neither is taken for the other
    assert list(rows[0])[8:] == ["grade", "valid", "error", "judge_replies", "flagged", "grade_full", "grade_judge",
                                 "grade_meaning", "meaning_similarity", "readers_disagree", "grade_model", "readings"]
    assert "score" not in rows[0]
    assert all(float(r["grade"]) >= 0 and r["judge_replies"] for r in rows)
    out_file = tmp_path / "x.jsonl"
    summary_export = json.loads(knockout("export", str(db), "--format", "jsonl", "-O", str(out_file), "--json").stdout)
    assert summary_export["rows"] == 3 and summary_export["run_id"] == summary["run_id"]
    jl = out_file.read_text().splitlines()
    assert {json.loads(x)["item_id"] for x in jl} == {"a1", "a2", "a3"}


BAD_CASES = [
    ("malformed", "{not json\n", "line 1"),
    ("missing", json.dumps({"type": "question", "id": "q1", "max_points": 2}) + "\n", "text"),
    ("nonnumeric", "\n".join(json.dumps(r) for r in [GOOD[0], {**GOOD[1], "human_score": "good"}]) + "\n",
     "human_score"),
    ("negative", "\n".join(json.dumps(r) for r in [GOOD[0], {**GOOD[1], "human_score": -1}]) + "\n", "a1"),
    ("maxpoints", json.dumps({**GOOD[0], "max_points": 0}) + "\n", "max_points"),
    ("duplicate", "\n".join(json.dumps(r) for r in [GOOD[0], GOOD[1], GOOD[1]]) + "\n", "duplicate"),
    ("empty", "\n".join(json.dumps(r) for r in [GOOD[0], {**GOOD[1], "text": "  "}]) + "\n", "text"),
]


@pytest.mark.parametrize(("name", "content", "fragment"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, name: str, content: str, fragment: str) -> None:
    data = tmp_path / f"{name}.jsonl"
    data.write_text(content)
    db = tmp_path / "r.db"
    res = knockout("grade", str(data), "--judge", "scripted", "-o", str(db))
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [x for x in res.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1, res.stderr
    assert f"{name}.jsonl" in lines[0] and fragment in lines[0]
    assert not db.exists(), "nothing may be written for bad input"


def test_unknown_judge_spec(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", GOOD)
    db = tmp_path / "r.db"
    res = knockout("grade", str(data), "--judge", "gpt5:whatever", "-o", str(db))
    assert res.returncode == 2
    assert "unknown judge backend 'gpt5'" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not db.exists()


def test_unknown_method_and_prompt(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", GOOD)
    res = knockout("grade", str(data), "--method", "nope", "--judge", "scripted", "-o", str(tmp_path / "r.db"))
    assert res.returncode == 2 and "unknown method 'nope'" in res.stderr
    res = knockout("grade", str(data), "--prompt", "nope", "--judge", "scripted", "-o", str(tmp_path / "r.db"))
    assert res.returncode == 2 and "unknown prompt" in res.stderr


def test_presets_and_judges_listing() -> None:
    res = knockout("presets", "--json")
    names = {p["name"] for p in json.loads(res.stdout)}
    assert "knockout-pairwise-de" in names
    js = json.loads(knockout("judges", "--json").stdout)
    assert {"llamacpp", "openai", "anthropic", "scripted"} <= set(js["backends"])
