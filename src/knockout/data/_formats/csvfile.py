"""CSV: one row per answer; question fields repeat on each row of the same question."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from knockout.data._io import build, item_set, read_text, to_number
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError, InputError

QUESTION_FIELDS = ("question_id", "question", "reference", "max_points", "language", "difficulty", "exam_id")
ANSWER_FIELDS = ("answer_id", "examinee", "answer", "human_score")
FIELDS = QUESTION_FIELDS + ANSWER_FIELDS
REQUIRED = ("question_id", "question", "answer")
GRADER_PREFIX = "human_score:"
# Our field name -> the Question / Answer model field it fills.
MODEL_FIELD = {"question_id": "id", "question": "text", "answer_id": "id", "answer": "text"}


def sniff(path: Path) -> bool:
    """A ``.csv`` file."""
    return path.suffix.lower() == ".csv" and path.is_file()


def _check_field(field: str) -> None:
    if field not in FIELDS and not (field.startswith(GRADER_PREFIX) and len(field) > len(GRADER_PREFIX)):
        raise ConfigError(
            f"unknown CSV field '{field}' (known: {', '.join(FIELDS)}, {GRADER_PREFIX}<grader>)"
        )


def parse_column_map(spec: str) -> dict[str, str]:
    """``"answer=Response,human_score:ta=Grade TA"`` -> ``{"answer": "Response", "human_score:ta": ...}``."""
    mapping: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        field, sep, column = (x.strip() for x in part.partition("="))
        if not sep or not field or not column:
            raise ConfigError(f"bad column mapping '{part}' (expected field=column)")
        _check_field(field)
        mapping[field] = column
    return mapping


def load(path: Path, *, columns: Mapping[str, str] | str | None = None, delimiter: str = ",") -> ItemSet:
    """Options: ``columns`` maps our field names to the file's column names (or a "field=column,..."
    string); ``delimiter`` (default ",")."""
    mapping = parse_column_map(columns) if isinstance(columns, str) else dict(columns or {})
    for f in mapping:
        _check_field(f)
    rows = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=delimiter)
    header = [h.strip() for h in next(rows, [])]
    if not any(header):
        raise InputError("empty CSV file (no header)", file=str(path), record="line 1")
    index = {name: i for i, name in enumerate(header)}
    col = {f: mapping.get(f, f) for f in FIELDS}
    graders = {f[len(GRADER_PREFIX) :]: c for f, c in mapping.items() if f.startswith(GRADER_PREFIX)}
    mapped = set(mapping.values())
    for h in header:  # columns already named human_score:<grader> need no mapping
        if h.startswith(GRADER_PREFIX) and h not in mapped:
            graders.setdefault(h[len(GRADER_PREFIX) :], h)
    if col["human_score"] in index:
        graders.setdefault("human", col["human_score"])
    for f in (*REQUIRED, *mapping):
        c = mapping.get(f, f)
        if c not in index:
            raise InputError(
                f"no column '{c}' (for field '{f}') in the header", file=str(path), record="line 1", field=c
            )
    qrename = {MODEL_FIELD.get(f, f): col[f] for f in QUESTION_FIELDS}
    arename = {MODEL_FIELD.get(f, f): col[f] for f in ANSWER_FIELDS}
    arename |= {"question_id": col["question_id"], **{f"human_scores.{g}": c for g, c in graders.items()}}

    questions: dict[str, tuple[int, dict[str, Any]]] = {}
    built: list[Question] = []
    answers: list[Answer] = []
    line = 1
    for row in rows:
        start, line = line + 1, rows.line_num
        where = f"line {start}"
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise InputError(
                f"expected {len(header)} columns, found {len(row)}", file=str(path), record=where
            )

        cells = {name: row[i].strip() for name, i in index.items()}
        qid = cells.get(col["question_id"], "")
        q: dict[str, Any] = {"id": qid}
        for f in QUESTION_FIELDS[1:]:
            value = cells.get(col[f])
            if value and f == "max_points":
                q[f] = to_number(value, file=path, record=where, field=col[f])
            elif value:
                q[MODEL_FIELD.get(f, f)] = value
        if qid in questions:  # later rows may leave question cells empty, but must not contradict
            first_line, first = questions[qid]
            for k, v in q.items():
                if first.get(k) != v:
                    raise InputError(
                        f"question '{qid}' differs from its first row (line {first_line})",
                        file=str(path),
                        record=where,
                        field=qrename[k],
                    )
        else:
            questions[qid] = (start, q)
            built.append(build(Question, q, file=path, record=where, rename=qrename))
        examinee = cells.get(col["examinee"]) or None
        a = {
            "id": cells.get(col["answer_id"]) or f"{qid}/{examinee or f'line{start}'}",
            "question_id": qid,
            "examinee": examinee,
            "text": cells[col["answer"]],
            "human_scores": {
                g: to_number(cells[c], file=path, record=where, field=c)
                for g, c in graders.items()
                if cells.get(c)
            },
        }
        answers.append(build(Answer, a, file=path, record=where, rename=arename))
    return item_set(built, answers, path)
