"""Tables of answers: one row per answer, the question's fields repeated on each row.

The one reading of such rows, whatever holds them: CSV (:mod:`.csvfile`), a flat JSONL file
(:mod:`.jsonl`, records without ``type``), Parquet (:mod:`.parquet`), a pandas DataFrame or a Hugging
Face dataset (:mod:`.frames`).  Every source gives rows as ``(where, {column: value})`` and the same
column mapping applies (``columns``: our field -> the source's column).  Values may be text (CSV) or
typed (JSON numbers, Parquet columns, DataFrame cells): numbers are accepted where text is expected
for ids and texts (``question_id`` 7 is ``"7"``), and a missing value (None, NaN, pandas' NA, an empty
string) is an empty cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from knockout._bounds import is_name, is_text
from knockout.data._io import build, shorten, to_number, unique_header, unique_keys
from knockout.data._records import Answer, AnswerFields, ItemSet, Question
from knockout.errors import ConfigError, InputError

QUESTION_FIELDS = ("question_id", "question", "reference", "max_points", "language", "difficulty", "exam_id",
                   "rubric")
ANSWER_FIELDS = ("answer_id", "examinee", "answer", "human_score")
FIELDS = QUESTION_FIELDS + ANSWER_FIELDS
#: A JSON object of grades ``{grader: score}`` (JSONL, Parquet struct/map, DataFrame dict cells).
SCORES_FIELD = "human_scores"
REQUIRED = ("question_id", "question", "answer")
GRADER_PREFIX = "human_score:"
# Our field name -> the Question / Answer model field it fills.
MODEL_FIELD = {"question_id": "id", "question": "text", "answer_id": "id", "answer": "text"}

Row = tuple[str, Mapping[str, Any]]

#: a missing-column error lists at most this many of the columns that are there
LISTED_COLUMNS = 40


#: characters of a column name an error shows (a header can hold a name of any length)
SHOWN_NAME = 60


def _cut(name: str) -> str:
    return name if len(name) <= SHOWN_NAME else f"{name[:SHOWN_NAME]}... ({len(name)} characters)"


def columns_there(names: Sequence[str]) -> str:
    """``the columns there: 'qid', 'prompt', ...`` for an error about a column that is not there."""
    names = [n for n in names if not (n.startswith("<") and n.endswith(">"))]  # knockout.grade's own columns
    if not names:
        return "there are no columns"
    shown = ", ".join(repr(_cut(str(n))) for n in list(names)[:LISTED_COLUMNS])
    more = f" and {len(names) - LISTED_COLUMNS} more" if len(names) > LISTED_COLUMNS else ""
    return f"the columns there: {shown}{more}"


def check_field(field: str) -> None:
    if field not in FIELDS and field != SCORES_FIELD and not (
        field.startswith(GRADER_PREFIX) and len(field) > len(GRADER_PREFIX)
    ):
        raise ConfigError(
            f"unknown column field '{field}' (known: {', '.join(FIELDS)}, {SCORES_FIELD}, {GRADER_PREFIX}<grader>)"
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
        check_field(field)
        if field in mapping:
            raise ConfigError(f"column mapping names the field '{field}' twice ('{mapping[field]}' and '{column}')")
        mapping[field] = column
    return mapping


def column_map(columns: Mapping[str, str] | str | None) -> dict[str, str]:
    mapping = parse_column_map(columns) if isinstance(columns, str) else dict(columns or {})
    for f in mapping:
        check_field(f)
    return mapping


def is_missing(value: Any) -> bool:
    """None, NaN, pandas' NA/NaT, or a blank string."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, float):
        return math.isnan(value)
    try:  # pandas.NA, numpy.nan in an object column, NaT: not equal to themselves, or refusing to say
        return bool(value != value)
    except (TypeError, ValueError):
        return True


def plain(value: Any) -> Any:
    """numpy scalars as Python scalars (DataFrame and Parquet cells)."""
    item = getattr(value, "item", None)
    if item is not None and not isinstance(value, (str, bytes, list, dict)) and getattr(value, "ndim", 1) == 0:
        return item()
    return value


def as_text(value: Any, *, file: Path, record: str, field: str) -> str | None:
    """A cell as text: strings stripped, integers (also integral floats, as pandas stores ids with gaps)
    written without a decimal point; None for a missing value."""
    value = plain(value)
    if is_missing(value):
        return None
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    raise InputError(f"expected text, got {type(value).__name__} {shorten(repr(value))}", file=str(file),
                     record=record, field=field)


def as_number(value: Any, *, file: Path, record: str, field: str) -> float | None:
    value = plain(value)
    if is_missing(value):
        return None
    if isinstance(value, bool):
        raise InputError(f"expected a number, got {value!r}", file=str(file), record=record, field=field)
    return to_number(value, file=file, record=record, field=field)


def as_rubric(value: Any, *, file: Path, record: str, field: str) -> Any:
    """A ``rubric`` cell: a list of ``{criterion, points}`` objects (JSON, Parquet, DataFrame cells), a text
    holding such a JSON array (CSV), or a text rubric; None when empty.  The Question model checks it."""
    value = plain(value)
    if _blank(value):
        return None
    if isinstance(value, (list, tuple)):
        return [plain(c) if not isinstance(c, dict) else {k: plain(v) for k, v in c.items()} for c in value]
    text = as_text(value, file=file, record=record, field=field)
    if text is not None and text.startswith("["):
        try:
            parsed = json.loads(text, object_pairs_hook=unique_keys)
        except ValueError:
            return text  # a text rubric that happens to start with a bracket
        if isinstance(parsed, list):
            return parsed
    return text


def _blank(value: Any) -> bool:
    value = plain(value)
    return len(value) == 0 if isinstance(value, (dict, list, tuple)) else is_missing(value)


def blank_row(cells: Mapping[str, Any]) -> bool:
    """A row whose every cell is missing: skipped by :func:`load_rows` (it gives no answer)."""
    return all(_blank(v) for v in cells.values())


def _grades(value: Any, *, file: Path, record: str, field: str) -> dict[str, float]:
    """A ``human_scores`` cell: an object / dict / Parquet map (list of key-value pairs) of grader -> score."""
    value = plain(value)
    if _blank(value):
        return {}
    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        value = dict(value)
    if not isinstance(value, dict):
        raise InputError(f"expected an object of grader: score, got {shorten(repr(value))}", file=str(file),
                         record=record, field=field)
    out: dict[str, float] = {}
    for grader, score in value.items():
        if isinstance(plain(score), float) and math.isnan(plain(score)):  # a missing grade is null or absent
            raise InputError("a grade that is NaN (leave the grader out, or write null, for no grade)",
                             file=str(file), record=record, field=f"{field}.{grader}")
        x = as_number(score, file=file, record=record, field=f"{field}.{grader}")
        if x is not None:
            out[str(grader)] = x
    return out


def load_rows(rows: Iterable[Row], header: Iterable[str], *, columns: Mapping[str, str] | str | None,
              path: Path, source: str | None = None, header_where: str = "header",
              columns_in: str = "the header") -> ItemSet:
    """The item set of ``rows`` (``(where, {column: value})``), whose columns are ``header``.

    Errors name ``path`` (or ``source``, for data that is not a file), the row's ``where`` (a missing
    column: ``header_where``) and the source's column."""
    mapping = column_map(columns)
    file = Path(source) if source else path
    names = list(dict.fromkeys(unique_header(header, file=file, record=header_where, columns_in=columns_in)))
    index = set(names)
    col = {f: mapping.get(f, f) for f in (*FIELDS, SCORES_FIELD)}
    graders = {f[len(GRADER_PREFIX):]: c for f, c in mapping.items() if f.startswith(GRADER_PREFIX)}
    mapped = set(mapping.values())
    for h in names:  # columns already named human_score:<grader> need no mapping
        if h.startswith(GRADER_PREFIX) and h not in mapped:
            graders.setdefault(h[len(GRADER_PREFIX):], h)
    if col["human_score"] in index:
        graders.setdefault("human", col["human_score"])
    for f in (*REQUIRED, *mapping):
        c = mapping.get(f, f)
        if c not in index:
            raise InputError(f"no column '{c}' (for field '{f}') in {columns_in}; {columns_there(names)}",
                             file=str(file), record=header_where, field=c)
    qrename = {MODEL_FIELD.get(f, f): col[f] for f in QUESTION_FIELDS}
    arename = {MODEL_FIELD.get(f, f): col[f] for f in ANSWER_FIELDS}
    arename |= {"question_id": col["question_id"], **{f"human_scores.{g}": c for g, c in graders.items()}}
    scores_col = col[SCORES_FIELD] if col[SCORES_FIELD] in index else None
    return ItemSet.from_records(_records(rows, col, graders, scores_col, file, qrename, arename), source=str(file))


#: the fields-set of an answer read from a table row (the fields :func:`_records` gives it)
_ROW_FIELDS = frozenset(("id", "question_id", "examinee", "text", "human_scores"))


def _records(rows: Iterable[Row], col: dict[str, str], graders: dict[str, str], scores_col: str | None,
             file: Path, qrename: dict[str, str], arename: dict[str, str]
             ) -> Iterator[Question | Answer | AnswerFields]:
    """Each row's question (the first time its id is met) and answer, one at a time: an answer whose fields
    pass :class:`Answer`'s checks as :class:`AnswerFields` (no object built); any other is validated as an
    :class:`Answer`, whose error names the row and the source's column."""
    questions: dict[str, tuple[str, dict[str, Any]]] = {}
    qcols = [(f, col[f], MODEL_FIELD.get(f, f)) for f in QUESTION_FIELDS[1:]]
    c_qid, c_ex, c_aid, c_text = col["question_id"], col["examinee"], col["answer_id"], col["answer"]
    grader_cols = list(graders.items())
    for where, cells in rows:
        if blank_row(cells):
            continue
        get = cells.get
        qid = as_text(get(c_qid), file=file, record=where, field=c_qid) or ""
        q: dict[str, Any] = {"id": qid}
        for f, c, model_field in qcols:
            value = get(c)
            if value is None:  # no cell: nothing to read (the readers below give None for it too)
                continue
            if f == "max_points":
                x = as_number(value, file=file, record=where, field=c)
                if x is not None:
                    q[f] = x
            elif f == "rubric":
                if (rubric := as_rubric(value, file=file, record=where, field=c)) is not None:
                    q[f] = rubric
            elif (v := as_text(value, file=file, record=where, field=c)) is not None:
                q[model_field] = v
        seen = questions.get(qid)
        if seen is not None:  # later rows may leave question cells empty, but must not contradict
            first_where, first = seen
            for k, v in q.items():
                if first.get(k) != v:
                    raise InputError(f"question '{qid}' differs from its first row ({first_where})", file=str(file),
                                     record=where, field=qrename[k])
        else:
            questions[qid] = (where, q)
            yield build(Question, q, file=file, record=where, rename=qrename)
        examinee = as_text(get(c_ex), file=file, record=where, field=c_ex)
        scores: dict[str, float] = {}
        if scores_col is not None:
            scores |= _grades(get(scores_col), file=file, record=where, field=scores_col)
        for g, c in grader_cols:
            x = as_number(get(c), file=file, record=where, field=c)
            if x is not None:
                scores[g] = x
        aid = as_text(get(c_aid), file=file, record=where, field=c_aid) or \
            f"{qid}/{examinee or where.replace(' ', '')}"
        text = as_text(get(c_text), file=file, record=where, field=c_text) or ""
        if is_name(aid) and is_name(qid) and (examinee is None or is_name(examinee)) and is_text(text) and \
                all(is_name(g) for g in scores):
            yield AnswerFields(aid, qid, examinee, text, scores, _ROW_FIELDS)
        else:  # Answer's own checks name the field that fails (and pass what the quick checks above did not)
            a = {"id": aid, "question_id": qid, "examinee": examinee, "text": text, "human_scores": scores}
            yield build(Answer, a, file=file, record=where, rename=arename)

