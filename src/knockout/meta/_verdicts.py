"""Evaluator verdicts to meta-evaluate: which evaluator said what about which item.

Three inputs give a :class:`VerdictSet`:

* a **folder** with one file per evaluator (JSONL or CSV); the evaluator's name is the file name
  ``merged_eval_results_<name>_pairwise.jsonl`` / ``merged_scores_<name>_pointwise.jsonl`` (the
  meta-evaluation study's files) or else the file stem, unless the rows carry an ``evaluator`` field;
* one **JSONL or CSV file** whose rows carry an ``evaluator`` field;
* a **knockout store** (``.db``): every finished grade run is one evaluator (name = its judge spec),
  each graded answer one pointwise item (score, and the judge's last reply as its explanation).

Row fields.  Pairwise: ``question``, ``answer1``, ``answer2``, ``winner`` (``1``, ``2``, ``0`` = tie;
``verdict`` is accepted too; read as :class:`knockout.Verdict` ``A``, ``B``, ``TIE``), ``explanation``.
Pointwise: ``text``, ``score``, ``explanation``.
Optional: ``item`` (the item id; without it items are aligned by position), ``question_id``, and the
human label (field ``label`` unless ``human_field`` names another).  Items are aligned across
evaluators by id (or position), and the alignment is checked: the same position must hold the same
question and answers (or text), the same ``question_id`` and the same human label, else an
:class:`InputError` names the file, line and field.  An empty verdict or score is the evaluator's
invalid assessment: kept (the meta-judge sees "no verdict"), and counted as wrong in the human baseline.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from knockout._bounds import Selection
from knockout._verdict import META_SPELLING, Verdict
from knockout.data._io import CsvRows, iter_json_lines, read_text, to_number, unique_header
from knockout.errors import InputError

Kind = Literal["pairwise", "pointwise"]
_FILE_NAME = re.compile(r"^merged_(?:eval_results|scores)_(.+?)_(?:pairwise|pointwise)$")
#: The verdicts a pairwise evaluator can give (no quality: a tie is TIE, not C or D).
PAIRWISE = tuple(META_SPELLING)
_VERDICT_FIELDS = ("winner", "verdict")
POINTWISE_TASKS = ("summeval", "openmeva", "text")


@dataclass(frozen=True)
class Assessment:
    """One evaluator's assessment of one item: a verdict (pairwise) or a score (pointwise)."""

    evaluator: str
    explanation: str
    verdict: Verdict | None = None  # A, B or TIE; None: the evaluator gave none
    score: float | None = None  # None: the evaluator gave none

    @property
    def valid(self) -> bool:
        return self.verdict is not None or self.score is not None


@dataclass
class MetaItem:
    """An item (a pair of answers, or a text) with every evaluator's assessment of it."""

    id: str
    kind: Kind
    question: str = ""  # pairwise: the instruction
    answer1: str = ""
    answer2: str = ""
    text: str = ""  # pointwise: the text that was scored
    human: Verdict | float | None = None  # pairwise: A, B or TIE; pointwise: a score
    task: str = "text"  # pointwise: summeval | openmeva | text (chooses the paper's prompt)
    max_score: float = 5.0  # pointwise scale (1..max_score for Likert data)
    assessments: dict[str, Assessment] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def content(self) -> tuple[str, ...]:
        return (self.question, self.answer1, self.answer2) if self.kind == "pairwise" else (self.text,)


@dataclass
class VerdictSet:
    kind: Kind
    items: list[MetaItem]
    evaluators: list[str]
    source: str

    def subset(self, limit: int | None) -> VerdictSet:
        Selection(limit=limit)  # the bound: a ValidationError
        return self if limit is None else VerdictSet(self.kind, self.items[:limit], self.evaluators, self.source)

    def has_human(self) -> bool:
        return any(i.human is not None for i in self.items)

    def fingerprint(self) -> str:
        """The verdicts' identity (part of a meta run's id); verdicts hash in the data's own spelling
        (``1``/``2``/``0``), as before :class:`knockout.Verdict`, so run ids stay what they were."""
        h = hashlib.sha256(self.kind.encode())
        for i in self.items:
            d = asdict(i)
            d["human"] = _legacy(i.human)
            d["assessments"] = {k: {**asdict(v), "verdict": _legacy(v.verdict)}
                                for k, v in sorted(i.assessments.items())}
            h.update(json.dumps(d, sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]


# -- reading rows ---------------------------------------------------------------------------------
def read_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(record name, row) of a JSONL or CSV file."""
    if path.suffix.lower() == ".csv":
        rows = CsvRows(read_text(path), file=path)
        header = unique_header(next(rows, []), file=path)
        for n, cells in enumerate((r for r in rows if r), 2):
            yield f"line {n}", dict(zip(header, cells, strict=False))
    elif path.suffix.lower() in (".jsonl", ".json"):
        for n, obj in iter_json_lines(path):
            yield f"line {n}", obj
    else:
        raise InputError("expected a .jsonl or .csv file of evaluator verdicts", file=str(path))


def _text(row: dict[str, Any], key: str, *, file: Path, record: str, required: bool = True,
          empty: bool = False) -> str:
    """A text field; ``required``: must be present (and, unless ``empty``, not blank)."""
    value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required and (value is None or not empty):
            raise InputError("missing field", file=str(file), record=record, field=key)
        return ""
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def _legacy(value: object) -> object:
    return META_SPELLING[value] if isinstance(value, Verdict) and value in META_SPELLING else value


def parse_verdict(value: object, *, file: Path, record: str, field: str) -> Verdict | None:
    """``1``/``2``/``0`` (and ``A``, ``AnswerB``, ``tie``, ``equally good``...) as A, B, TIE; empty → None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        verdict = Verdict.parse(value)
    except ValueError:
        verdict = Verdict.E
    if verdict not in PAIRWISE:
        raise InputError(f"verdict must be 1, 2 or 0 (tie), got {value!r}", file=str(file), record=record,
                         field=field)
    return verdict


def _score(value: object, *, file: Path, record: str, field: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return to_number(value, file=file, record=record, field=field)


def _kind_of(row: dict[str, Any]) -> Kind:
    return "pairwise" if "answer1" in row or any(f in row for f in _VERDICT_FIELDS) else "pointwise"


def _pointwise_task(row: dict[str, Any]) -> str:
    """SummEval (coherence) or OpenMEVA (five-line stories), told by the evaluator's recorded prompt."""
    prompt = str(row.get("prompt") or row.get("task") or "").lower()
    if "five-line story" in prompt or prompt == "openmeva":
        return "openmeva"
    if "coherence" in prompt or prompt == "summeval":
        return "summeval"
    return "text"


def _item_from_row(
    row: dict[str, Any], item_id: str, kind: Kind, human_field: str, *, file: Path, record: str
) -> tuple[MetaItem, Assessment, str]:
    explanation = _text(row, "explanation", file=file, record=record, required=False)
    human_raw = row.get(human_field)
    if kind == "pairwise":
        vfield = next((f for f in _VERDICT_FIELDS if f in row), "winner")
        item = MetaItem(
            id=item_id,
            kind=kind,
            question=_text(row, "question", file=file, record=record),
            answer1=_text(row, "answer1", file=file, record=record, empty=True),
            answer2=_text(row, "answer2", file=file, record=record, empty=True),
            human=parse_verdict(human_raw, file=file, record=record, field=human_field),
        )
        assessment = Assessment("", explanation, verdict=parse_verdict(row.get(vfield), file=file,
                                                                       record=record, field=vfield))
    else:
        item = MetaItem(
            id=item_id,
            kind=kind,
            text=_text(row, "text", file=file, record=record),
            human=_score(human_raw, file=file, record=record, field=human_field),
            task=_pointwise_task(row),
        )
        assessment = Assessment("", explanation, score=_score(row.get("score"), file=file, record=record,
                                                              field="score"))
    if row.get("question_id") not in (None, ""):
        item.meta["question_id"] = str(row["question_id"])
    return item, assessment, record


def evaluator_name(path: Path) -> str:
    m = _FILE_NAME.match(path.stem)
    return m.group(1) if m else path.stem


class _Builder:
    """Collects assessments item by item and checks that evaluators agree on what each item is."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: dict[str, MetaItem] = {}
        self.evaluators: list[str] = []
        self.kind: Kind | None = None

    def add(self, evaluator: str, item: MetaItem, a: Assessment, *, file: Path, record: str) -> None:
        if self.kind is None:
            self.kind = item.kind
        elif item.kind != self.kind:
            raise InputError(f"a {item.kind} row among {self.kind} verdicts", file=str(file), record=record)
        if evaluator not in self.evaluators:
            self.evaluators.append(evaluator)
        known = self.items.get(item.id)
        if known is None:
            self.items[item.id] = known = item
        else:
            for what, mine, theirs in (
                ("question/answers" if item.kind == "pairwise" else "text", item.content(), known.content()),
                ("question_id", item.meta.get("question_id"), known.meta.get("question_id")),
                ("human label", item.human, known.human),
            ):
                if mine is not None and theirs is not None and mine != theirs:
                    raise InputError(
                        f"item {item.id} differs from the other evaluators' item {item.id} ({what}); "
                        "items are aligned by position or 'item' id",
                        file=str(file), record=record, field=what,
                    )
        for key, value in item.meta.items():  # a field some evaluators' files lack (question_id)
            known.meta.setdefault(key, value)
        if known.human is None:
            known.human = item.human
        if evaluator in known.assessments:
            raise InputError(f"evaluator '{evaluator}' assesses item {item.id} twice", file=str(file),
                             record=record)
        known.assessments[evaluator] = Assessment(evaluator, a.explanation, a.verdict, a.score)

    def build(self) -> VerdictSet:
        if self.kind is None or not self.items:
            raise InputError("no evaluator verdicts found", file=self.source)
        return VerdictSet(self.kind, list(self.items.values()), self.evaluators, self.source)


def _add_file(b: _Builder, path: Path, human_field: str, default_evaluator: str | None) -> None:
    position: dict[str, int] = {}
    for record, row in read_rows(path):
        evaluator = str(row.get("evaluator") or default_evaluator or "")
        if not evaluator:
            raise InputError("missing field (one file with several evaluators needs it)", file=str(path),
                             record=record, field="evaluator")
        n = position.get(evaluator, 0)
        position[evaluator] = n + 1
        item_id = str(row["item"]) if row.get("item") not in (None, "") else str(n)
        item, a, _ = _item_from_row(row, item_id, _kind_of(row), human_field, file=path, record=record)
        b.add(evaluator, item, a, file=path, record=record)


def _from_store(path: Path) -> VerdictSet:
    from knockout.storage._store import Store

    store = Store(path)
    b = _Builder(str(path))
    try:
        names: dict[str, int] = {}
        for run in store.runs():
            items = store.items_for_run(run.id)
            if run.kind != "grade" or run.status != "complete" or items is None:
                continue
            names[run.judge] = names.get(run.judge, 0) + 1
            evaluator = run.judge if names[run.judge] == 1 else f"{run.judge}#{run.id}"
            for r in store.results(run.id):
                a = items.answer(r["item_id"])
                q = items.question_of(a)
                attempts = r["details"].get("attempts") or [{}]
                item = MetaItem(
                    id=a.id, kind="pointwise", text=f"Question: {q.text}\n\nAnswer: {a.text}",
                    human=a.human_score, max_score=q.max_points,
                )
                assessment = Assessment(evaluator, str(attempts[-1].get("reply") or ""), score=r["score"])
                b.add(evaluator, item, assessment, file=path, record=f"run {run.id} item {a.id}")
    finally:
        store.close()
    return b.build()


def load_verdicts(path: str | Path, *, human_field: str = "label") -> VerdictSet:
    """Load evaluator verdicts from a folder, a JSONL/CSV file or a knockout store (see module doc)."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", file=str(p))
    if p.is_file() and p.suffix.lower() in (".db", ".sqlite", ".sqlite3"):
        return _from_store(p)
    b = _Builder(str(p))
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in (".jsonl", ".csv"))
        if not files:
            raise InputError("no .jsonl or .csv evaluator files in the folder", file=str(p))
        for f in files:
            _add_file(b, f, human_field, evaluator_name(f))
    else:
        _add_file(b, p, human_field, None)
    vs = b.build()
    if len(vs.evaluators) < 2 and vs.kind == "pairwise":
        raise InputError(f"only one evaluator ({vs.evaluators[0]}); meta-evaluation compares several",
                         file=str(p))
    return vs
