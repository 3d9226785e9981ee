"""JSONL: the project's own format, one ``{"type": "question" | "answer", ...}`` object per line; or a
*flat* file, one answer per line with its question's fields on the line and no ``type`` (the shape of
most exported grades), read like a CSV file with the same column mapping (:mod:`.table`).

A file is flat when its first record has no ``type`` field but an ``answer`` or ``question`` field (the
default column names), or when ``columns`` is given.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from knockout.data._formats.metaeval import is_metaeval_row
from knockout.data._formats.table import load_rows
from knockout.data._io import build, first_json_line, iter_json_lines, resolve_image
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import InputError


def sniff(path: Path) -> bool:
    """A ``.jsonl`` file, unless its first record is a meta-evaluation row (``metaeval``'s).  A
    malformed first line is ours: the loader reports it."""
    if path.suffix.lower() != ".jsonl" or not path.is_file():
        return False
    return not is_metaeval_row(first_json_line(path))


def is_flat(record: dict[str, object]) -> bool:
    """A flat record: no ``type``, and a question or an answer field of a table row (typed records have
    ``text`` instead)."""
    return "type" not in record and ("answer" in record or "question" in record)


def load(path: Path, *, columns: Mapping[str, str] | str | None = None) -> ItemSet:
    """Option ``columns`` (flat files): our field -> the records' key, as for CSV."""
    lines = iter_json_lines(path)
    first = next(lines, None)
    if columns is not None or (first is not None and is_flat(first[1])):
        # A table, whose header is every key of every record: a first pass reads the keys (and meets any
        # malformed line before a row is read, as the whole file read at once did), the second the rows, one
        # at a time in both (memory stays flat).
        header: dict[str, None] = {}
        for _, obj in itertools.chain([] if first is None else [first], lines):
            header.update(dict.fromkeys(obj))
        rows = ((f"line {n}", obj) for n, obj in iter_json_lines(path))
        return load_rows(rows, header, columns=columns, path=path,
                         header_where=f"line {first[0]}" if first else "line 1", columns_in="any record")
    records = itertools.chain([] if first is None else [first], lines)  # read one by one (memory stays flat)
    return ItemSet.from_records(_typed(records, path), source=str(path))


def _typed(records: Iterable[tuple[int, dict[str, Any]]], path: Path) -> Iterator[Question | Answer]:
    """Each typed record validated, one at a time (the item set keeps its answers as columns, so a million
    answers are never a million objects at once)."""
    for n, obj in records:
        where = f"line {n}"
        kind = obj.pop("type", None)
        if kind == "question":
            images = obj.get("images")
            if isinstance(images, list):
                obj["images"] = [
                    resolve_image(im, path.parent, file=path, record=where, field="images") for im in images
                ]
            yield build(Question, obj, file=path, record=where)
        elif kind == "answer":
            rename = None
            if "human_score" in obj:
                if "human_scores" in obj:
                    raise InputError(
                        "give either human_score or human_scores, not both",
                        file=str(path),
                        record=where,
                        field="human_score",
                    )
                score = obj.pop("human_score")
                obj["human_scores"] = {} if score is None else {"human": score}
                rename = {"human_scores.human": "human_score", "human_scores": "human_score"}
            yield build(Answer, obj, file=path, record=where, rename=rename)
        else:
            raise InputError(
                f"unknown record type {kind!r} (expected 'question' or 'answer'; a flat file, one answer per "
                "line, has no 'type' and an 'answer' or 'question' field on its first line, or a column map)",
                file=str(path),
                record=where,
                field="type",
            )
