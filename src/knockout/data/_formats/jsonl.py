"""The project's own JSONL format: one ``{"type": "question" | "answer", ...}`` object per line."""

from __future__ import annotations

from pathlib import Path

from knockout.data._formats.metaeval import is_metaeval_row
from knockout.data._io import build, first_json_line, item_set, iter_json_lines, resolve_image
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import InputError


def sniff(path: Path) -> bool:
    """A ``.jsonl`` file, unless its first record is a meta-evaluation row (``metaeval``'s).  A
    malformed first line is ours: the loader reports it."""
    if path.suffix.lower() != ".jsonl" or not path.is_file():
        return False
    return not is_metaeval_row(first_json_line(path))


def load(path: Path) -> ItemSet:
    questions: list[Question] = []
    answers: list[Answer] = []
    for n, obj in iter_json_lines(path):
        where = f"line {n}"
        kind = obj.pop("type", None)
        if kind == "question":
            images = obj.get("images")
            if isinstance(images, list):
                obj["images"] = [
                    resolve_image(im, path.parent, file=path, record=where, field="images") for im in images
                ]
            questions.append(build(Question, obj, file=path, record=where))
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
            answers.append(build(Answer, obj, file=path, record=where, rename=rename))
        else:
            raise InputError(
                f"unknown record type {kind!r} (expected 'question' or 'answer')",
                file=str(path),
                record=where,
                field="type",
            )
    return item_set(questions, answers, path)
