"""docs/injection.md's defences tables name, on every row, the tests that hold the defence (issue 60 item 7), and
every test they name exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "injection.md"


def _table(head: str) -> list[list[str]]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| ") and head in ln)
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split(" | ")])
    return rows


def test_every_defence_row_names_the_tests_that_hold_it() -> None:
    tables = [_table("| layer | guarantees |"), _table("| defence | what it refuses or hides |")]
    assert len(tables[0]) >= 4 and len(tables[1]) >= 7
    for rows in tables:
        for row in rows:
            held = row[-1]
            named = re.findall(r"`(test_\w+\.py)(?:::(test_\w+))?`|\b(test_\w+\.py)\b", held)
            assert named, f"no test named for: {row[0]}"
            for file, name, bare in named:
                path = ROOT / "tests" / (file or bare)
                assert path.is_file(), f"{row[0]}: {path.name} does not exist"
                if name:
                    assert re.search(rf"^def {name}\(", path.read_text(encoding="utf-8"), re.M), \
                        f"{row[0]}: {path.name}::{name} does not exist"
