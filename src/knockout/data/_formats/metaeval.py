"""Meta-evaluation data: scored texts (SummEval, OpenMEVA), pairwise preferences (MT-Bench, LLMBar)
as in the meta-evaluation study's JSONL files, and the PandaLM test set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knockout._verdict import META_SPELLING, Verdict
from knockout.data._io import EMPTY_ANSWER, build, first_json_line, item_set, iter_json_lines, read_json, sniff_json
from knockout.data._records import Answer, ItemSet, PairItem, Question, ScoredText
from knockout.errors import InputError

VERDICTS = tuple(META_SPELLING[v] for v in (Verdict.TIE, Verdict.A, Verdict.B))  # "0" tie, "1" A, "2" B
INSTRUCTIONS = {
    "summeval": "Evaluate the coherence of the text.",
    "openmeva": "Evaluate the overall quality of the five-line story, considering its coherence, fluency, "
    "consistency, interestingness and creativity.",
}
DEFAULT_INSTRUCTION = "Evaluate the overall quality of the text."


def is_metaeval_row(row: object) -> bool:
    """A meta-evaluation JSONL row: no ``type`` field, and ``output_1`` (pairs) or ``text`` and ``score``."""
    return isinstance(row, dict) and "type" not in row and ("output_1" in row or {"text", "score"} <= row.keys())


def sniff(path: Path) -> bool:
    """A ``.jsonl`` file of scored texts or pairs (:func:`is_metaeval_row`), or the PandaLM JSON list
    (``response1``...)."""
    if not path.is_file():
        return False
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return is_metaeval_row(first_json_line(path))
    if suffix == ".json":
        data = sniff_json(path)
        return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "response1" in data[0]
    return False


def _verdict(value: object, *, file: Path, record: str, field: str) -> str:
    """The source's spelling, kept as read (it is part of the items' identity); read it with
    :meth:`knockout.Verdict.parse` (``1`` -> A, ``2`` -> B, ``0`` -> TIE)."""
    v = str(value).strip()
    if isinstance(value, bool) or v not in VERDICTS:
        raise InputError(
            f"verdict must be 0 (tie), 1 or 2, got {value!r}", file=str(file), record=record, field=field
        )
    return v


def load_scored_texts(path: Path | str) -> list[ScoredText]:
    """JSONL rows ``{"text", "score"}``; ids are ``<file stem>/<row>`` (row counted from 0)."""
    path = Path(path)
    out = []
    for i, (n, row) in enumerate(iter_json_lines(path)):
        if "text" not in row:
            raise InputError("missing field", file=str(path), record=f"line {n}", field="text")
        item = {
            "id": f"{path.stem}/{i}",
            "text": row["text"],
            "human_score": row.get("score"),
            "meta": {k: v for k, v in row.items() if k not in ("text", "score")},
        }
        out.append(build(ScoredText, item, file=path, record=f"line {n}", rename={"human_score": "score"}))
    return out


def _metaeval_pairs(path: Path) -> list[PairItem]:
    out = []
    for i, (n, row) in enumerate(iter_json_lines(path)):
        where = f"line {n}"
        for key in ("input", "output_1", "output_2"):
            if key not in row:
                raise InputError("missing field", file=str(path), record=where, field=key)
        label = (
            None
            if row.get("label") is None
            else _verdict(row["label"], file=path, record=where, field="label")
        )
        item = {
            "id": f"{path.stem}/{i}",
            "question": row["input"],
            "answer_a": row["output_1"],
            "answer_b": row["output_2"],
            "human_verdicts": {"human": label} if label else {},
            "meta": {"row": i, "label": row.get("label")},
        }
        out.append(
            build(
                PairItem,
                item,
                file=path,
                record=where,
                rename={"question": "input", "answer_a": "output_1", "answer_b": "output_2"},
            )
        )
    return out


def _pandalm_pairs(path: Path) -> list[PairItem]:
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError("expected a JSON list of comparisons", file=str(path))
    out = []
    for i, row in enumerate(data):
        where = f"item {i}"
        if not isinstance(row, dict):
            raise InputError("expected an object", file=str(path), record=where)
        for key in ("instruction", "response1", "response2"):
            if key not in row:
                raise InputError("missing field", file=str(path), record=where, field=key)
        idx = row.get("idx", i)
        where = f"idx {idx}"
        systems = str(row.get("cmp_key", "")).split("_")
        question = str(row["instruction"]).strip()
        if str(row.get("input") or "").strip():
            question += "\n\n" + str(row["input"]).strip()
        verdicts = {
            k: _verdict(row[k], file=path, record=where, field=k)
            for k in sorted(row)
            if k.startswith("annotator") and row[k] is not None
        }
        # A few responses are stored as JSON booleans (the answer "True"): keep them as text.
        a, b = (
            str(v) if isinstance(v, (bool, int, float)) else v for v in (row["response1"], row["response2"])
        )
        item = {
            "id": f"{path.stem}/{idx}",
            "question": question,
            "answer_a": a,
            "answer_b": b,
            "human_verdicts": verdicts,
            "system_a": systems[0] if len(systems) == 2 else None,
            "system_b": systems[1] if len(systems) == 2 else None,
            "meta": {k: row[k] for k in ("idx", "motivation_app", "cmp_key") if k in row},
        }
        out.append(
            build(
                PairItem,
                item,
                file=path,
                record=where,
                rename={"question": "instruction", "answer_a": "response1", "answer_b": "response2"},
            )
        )
    return out


def load_pairs(path: Path | str) -> list[PairItem]:
    """Pairwise items: a meta-evaluation JSONL file (``input, output_1, output_2, label``; verdict
    key ``human``) or the PandaLM test set JSON (verdict keys ``annotator1..3``).  Verdicts are
    "0" (tie), "1" (answer_a better), "2" (answer_b better)."""
    path = Path(path)
    return _pandalm_pairs(path) if path.suffix == ".json" else _metaeval_pairs(path)


def pairs_to_items(pairs: list[PairItem], path: Path) -> ItemSet:
    """Each pair as a question with two answers; the verdicts go to Question.meta["human_verdicts"]."""
    questions: list[Question] = []
    answers: list[Answer] = []
    for p in pairs:
        meta: dict[str, Any] = {**p.meta, "human_verdicts": p.human_verdicts}
        q = {"id": p.id, "text": p.question, "reference": p.reference, "max_points": 10.0, "meta": meta}
        questions.append(build(Question, q, file=path, record=p.id, rename={"text": "question"}))
        for k, (text, system) in enumerate(((p.answer_a, p.system_a), (p.answer_b, p.system_b)), 1):
            a = {
                "id": f"{p.id}/{k}",
                "question_id": p.id,
                "examinee": system or f"output_{k}",
                "text": text if text.strip() else EMPTY_ANSWER,
                "meta": {} if text.strip() else {"empty": True},
            }
            answers.append(build(Answer, a, file=path, record=p.id, rename={"text": f"output_{k}"}))
    return item_set(questions, answers, path)


def load(path: Path, *, instruction: str | None = None) -> ItemSet:
    """Scoring files: one question (id = file stem, text = ``instruction``) whose answers are the texts,
    scored 1..5 (``human_scale="likert-1-5"``).  Pairwise files and PandaLM: one question per pair."""
    if path.suffix == ".json" or "output_1" in next(iter_json_lines(path), (0, {}))[1]:
        return pairs_to_items(load_pairs(path), path)
    q = Question(
        id=path.stem,
        text=instruction or INSTRUCTIONS.get(path.stem, DEFAULT_INSTRUCTION),
        max_points=5.0,
        human_scale="likert-1-5",
    )
    answers = []
    for t in load_scored_texts(path):
        a = {
            "id": t.id,
            "question_id": q.id,
            "text": t.text,
            "meta": t.meta,
            "human_scores": {} if t.human_score is None else {"human": t.human_score},
        }
        answers.append(build(Answer, a, file=path, record=t.id))
    return item_set([q], answers, path)
