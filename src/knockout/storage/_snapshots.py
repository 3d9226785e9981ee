"""Item-set snapshots: the questions and answers a run was made on, stored with it (``itemsets``).

A snapshot is zlib-compressed lines, written and read a piece at a time (no whole-set JSON in memory):

- ``knockout-items-columns`` (written now; a snapshot's first line names its format, so no schema step is
  needed): a header (source, counts, examinee names, grader layouts, fields sets), one JSON line per question,
  then the answers' columns
  (:class:`~knockout.data._records.AnswerColumns`) in chunks of ``chunk`` values, each chunk one JSON array
  on one line: ids, texts, question indices, examinee indices, layouts, fields sets, the human grades one
  after the other, and ``[index, meta]`` pairs for the answers with meta.  Reading one is a JSON parse per
  chunk and no pydantic object per answer: a million answers read in seconds.
- ``knockout-items-jsonl`` (before): a source line, then one line per question and per answer, each read
  back through pydantic.  Still read.
"""

from __future__ import annotations

import itertools
import json
import zlib
from array import array
from collections.abc import Iterator
from typing import Any

from knockout._redact import redact
from knockout.data._records import Answer, AnswerColumns, ItemSet, Question
from knockout.errors import ConfigError

ITEMS_V2 = b"knockout-items-jsonl\n"
ITEMS_V3 = b"knockout-items-columns\n"
#: answers per chunk line of a columnar snapshot
CHUNK = 8192


def _question_json(q: Question) -> bytes:
    # a question without a rubric is written as before rubrics existed
    return q.model_dump_json(exclude={"rubric"} if q.rubric is None else None).encode()


def pack_items(items: ItemSet) -> bytes:
    """An item set as a columnar snapshot: zlib-compressed lines, built a chunk at a time."""
    cols = items.columns()
    z = zlib.compressobj(6)
    dump = json.dumps
    n, chunk = len(cols.ids), CHUNK
    meta = sorted(cols.meta.items())
    head = {"source": redact(items.source), "answers": n, "chunk": chunk, "questions": len(items.questions),
            "names": cols.names, "layouts": [list(g) for g in cols.layouts],
            "fields": [sorted(f) for f in cols.fields_sets], "grades": len(cols.grades), "meta": len(meta)}
    parts = [z.compress(ITEMS_V3 + dump(head, ensure_ascii=False).encode() + b"\n")]
    parts.extend(z.compress(_question_json(q) + b"\n") for q in items.questions.values())
    columns: list[Any] = [cols.ids, cols.text, cols.question, cols.examinee, cols.layout, cols.fields, cols.grades,
                          meta]
    for column in columns:
        for start in range(0, len(column), chunk):
            part = column[start:start + chunk]
            values = part.tolist() if isinstance(part, array) else part
            parts.append(z.compress(dump(values, ensure_ascii=False).encode() + b"\n"))
    parts.append(z.flush())
    return b"".join(parts)


def _snapshot_lines(data: bytes) -> Iterator[bytes]:
    d = zlib.decompressobj()
    tail = b""
    for i in range(0, len(data), 1 << 20):
        tail += d.decompress(data[i:i + (1 << 20)])
        *lines, tail = tail.split(b"\n")
        yield from lines
    tail += d.flush()
    if tail:
        yield tail


def unpack_items(data: bytes) -> ItemSet:
    """The item set :func:`pack_items` wrote (or a snapshot of the line-per-answer format before it)."""
    lines = _snapshot_lines(data)
    magic = next(lines, b"") + b"\n"
    if magic == ITEMS_V3:
        return _unpack_columns(lines)
    if magic == ITEMS_V2:
        return _unpack_records(lines)
    raise ConfigError("an item-set snapshot in an unknown format")


def _unpack_columns(lines: Iterator[bytes]) -> ItemSet:
    try:
        head = json.loads(next(lines))
        n, chunk = int(head["answers"]), int(head["chunk"])
        questions = [Question.model_validate_json(next(lines)) for _ in range(int(head["questions"]))]

        def column(count: int) -> list[Any]:
            out: list[Any] = []
            for _ in range(-(-count // chunk)):
                out.extend(json.loads(next(lines)))
            if len(out) != count:
                raise ValueError("a column of the wrong length")
            return out

        ids, text = column(n), column(n)
        question, examinee, layout, fields = (array("i", column(n)) for _ in range(4))
        grades = array("d", column(int(head["grades"])))
        meta = {int(i): m for i, m in column(int(head["meta"]))}
        cols = AnswerColumns(ids=ids, text=text, question=question, examinee=examinee, names=list(head["names"]),
                             layout=layout, layouts=[tuple(g) for g in head["layouts"]], grades=grades, meta=meta,
                             fields=array("B", fields), fields_sets=[set(f) for f in head["fields"]])
    except (StopIteration, ValueError, KeyError, TypeError, OverflowError) as exc:
        raise ConfigError(f"a damaged item-set snapshot ({exc or type(exc).__name__})") from None
    return ItemSet.from_columns(questions, cols, source=str(head.get("source", "<store>")))


def _unpack_records(lines: Iterator[bytes]) -> ItemSet:
    source = "<store>"
    first = next(lines, b"")
    if not first.startswith((b'{"a":', b'{"q":')):  # the source line, written first
        source = str(json.loads(first).get("source", source)) if first else source
        first = b""

    def records() -> Iterator[Question | Answer]:
        for line in itertools.chain([first], lines):
            # {"a": ANSWER} / {"q": QUESTION}: parsed by pydantic from the bytes
            if line.startswith(b'{"a":'):
                yield Answer.model_validate_json(line[5:-1])
            elif line.startswith(b'{"q":'):
                yield Question.model_validate_json(line[5:-1])

    return ItemSet.from_records(records(), source=source)


def pack_records(items: ItemSet) -> bytes:
    """The snapshot format before :func:`pack_items` (a line per answer): what older stores hold; kept to
    test that they are still read."""
    z = zlib.compressobj(6)
    parts = [z.compress(ITEMS_V2 + json.dumps({"source": items.source}, ensure_ascii=False).encode() + b"\n")]
    for q in items.questions.values():
        parts.append(z.compress(b'{"q":' + _question_json(q) + b"}\n"))
    for a in items.answers:
        parts.append(z.compress(b'{"a":' + a.model_dump_json().encode() + b"}\n"))
    parts.append(z.flush())
    return b"".join(parts)
