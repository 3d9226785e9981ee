"""Group grades as a spreadsheet: the sheet ``knockout groups --sheet`` writes, and the file a teacher imports.

A group-grades file is CSV (a header row with ``group`` and ``grade``, optionally ``comment``; other columns,
such as the sheet's ``representative`` and ``draft``, are ignored, and a row with an empty grade is skipped) or
JSON (an object ``{"QUESTION#1": 2, ...}``, or a list of ``{"group": ..., "grade": ..., "comment": ...}``).  Group
ids are those ``knockout groups`` prints (``QUESTION#N``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knockout.errors import InputError
from knockout.groups._build import Group
from knockout.groups._stored import GroupGrade, RunGroups, grade_group, run_groups
from knockout.storage._store import Store

SHEET_COLUMNS = ["group", "question", "size", "draft", "spread", "representative", "text", "grade", "comment"]


@dataclass(frozen=True)
class GradeRow:
    record: int  # the line (CSV, header = 1) or the entry (JSON, from 1)
    group: str
    grade: float
    comment: str


def _number(value: Any, file: str, record: int) -> float:
    try:
        x = float(str(value).strip().replace(",", ".")) if not isinstance(value, (int, float)) else float(value)
    except ValueError:
        raise InputError(f"the grade '{value}' is not a number", file=file, record=record, field="grade") from None
    if not math.isfinite(x):
        raise InputError(f"the grade '{value}' is not a finite number", file=file, record=record, field="grade")
    return x


def read_group_grades(path: Path) -> list[GradeRow]:
    """The rows of a group-grades file (CSV or JSON, told by its first character)."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read it: {exc}", file=file) from None
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc}", file=file) from None
        entries: Iterable[tuple[int, Any]]
        if isinstance(data, dict):
            entries = enumerate(({"group": k, "grade": v} for k, v in data.items()), 1)
        elif isinstance(data, list):
            entries = enumerate(data, 1)
        else:
            raise InputError("a JSON object (group -> grade) or a list of {group, grade}", file=file)
        out = []
        for n, e in entries:
            if not isinstance(e, dict):
                raise InputError("an entry is an object with group and grade", file=file, record=n)
            for f in ("group", "grade"):
                if e.get(f) in (None, ""):
                    raise InputError("missing", file=file, record=n, field=f)
            out.append(GradeRow(n, str(e["group"]), _number(e["grade"], file, n), str(e.get("comment") or "")))
        return out
    reader = csv.DictReader(io.StringIO(text))
    head = [h.strip().lower() for h in reader.fieldnames or []]
    for f in ("group", "grade"):
        if f not in head:
            raise InputError(f"the header has no '{f}' column (it has: {', '.join(head) or 'none'})", file=file,
                             record=1, field=f)
    reader.fieldnames = head
    rows = []
    for n, row in enumerate(reader, 2):
        grade = (row.get("grade") or "").strip()
        if not grade:
            continue  # a group the teacher left for later
        group = (row.get("group") or "").strip()
        if not group:
            raise InputError("missing", file=file, record=n, field="group")
        rows.append(GradeRow(n, group, _number(grade, file, n), (row.get("comment") or "").strip()))
    return rows


def import_group_grades(store: Store, run_id: str, path: Path, grader: str) -> list[GroupGrade]:
    """Grade every group a file names, as one action (one undo reverts the whole import).  Every row is
    checked (the group exists, the grade is on its question's scale) before anything is written."""
    from knockout.annotations._exams import check_half_points

    rows = read_group_grades(path)
    groups = run_groups(store, run_id)
    seen: dict[str, int] = {}
    for r in rows:
        g = groups.group(r.group)
        if g is None:
            raise InputError(f"no group '{r.group}' in run {run_id} (knockout groups lists them)", file=str(path),
                             record=r.record, field="group")
        if r.group in seen:
            raise InputError(f"group '{r.group}' is graded twice (also record {seen[r.group]})", file=str(path),
                             record=r.record, field="group")
        seen[r.group] = r.record
        try:
            check_half_points(r.grade, g.max_points)
        except InputError as exc:
            raise InputError(exc.message, file=str(path), record=r.record, field="grade") from None
    action = "import:" + secrets.token_hex(6)
    return [grade_group(store, run_id, r.group, r.grade, grader, comment=r.comment, action=action, groups=groups)
            for r in rows]


def sheet_rows(groups: RunGroups, texts: dict[str, str]) -> list[dict[str, Any]]:
    """One row per group, to fill in: its id, question, size, draft grade and spread, representative and its
    text, an empty grade and comment."""
    def row(g: Group) -> dict[str, Any]:
        return {"group": g.id, "question": g.question_id, "size": len(g.members),
                "draft": "" if g.draft is None else f"{g.draft:.2f}",
                "spread": "" if g.spread is None else f"{g.spread:.2f}", "representative": g.representative,
                "text": texts.get(g.representative, ""), "grade": "", "comment": ""}

    return [row(g) for gs in groups.questions.values() for g in gs]
