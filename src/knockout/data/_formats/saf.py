"""SAF short-answer feedback XML (Filighera et al. 2022): one ``<question>`` per file."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from knockout.data._io import EMPTY_ANSWER, build, item_set, natural_key, read_bytes, to_number
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import InputError


def _text(el: ET.Element | None) -> str:
    return "".join(el.itertext()).strip() if el is not None else ""


def sniff(path: Path) -> bool:
    """An ``.xml`` file, or a folder with ``.xml`` files."""
    if path.is_dir():
        return any(path.glob("*.xml"))
    return path.suffix.lower() == ".xml" and path.is_file()


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(path.glob("*.xml"), key=lambda p: natural_key(p.name))
    if not files:
        raise InputError("no .xml files in this folder", file=str(path))
    return files


def load(path: Path, *, max_points: float = 1.0) -> ItemSet:
    """Options: ``max_points`` (default 1) rescales the [0, 1] expert scores to 0..max_points.

    Question ids are the file names without ``.xml`` (the XML ``id`` attributes repeat across
    files, e.g. three files say ``id="2.1"``); the XML id is kept in ``meta["saf_id"]``.
    """
    questions: list[Question] = []
    answers: list[Answer] = []
    for file in _files(path):
        try:
            root = ET.fromstring(read_bytes(file))
        except ET.ParseError as e:
            line, col = e.position
            raise InputError(
                f"malformed XML: {str(e).rsplit(': line', 1)[0]} (column {col})",
                file=str(file),
                record=f"line {line}",
            ) from None
        if root.tag != "question":
            raise InputError(f"root element is <{root.tag}>, expected <question>", file=str(file))
        qid = file.stem
        refs = root.findall("referenceAnswers/referenceAnswer")
        q = {
            "id": qid,
            "text": _text(root.find("questionText")),
            "reference": _text(refs[0]) if refs else None,
            "max_points": max_points,
            "language": "en",
            "exam_id": root.get("module"),
            "meta": {"saf_id": root.get("id")},
        }
        questions.append(
            build(
                Question, q, file=file, record=f"question {root.get('id')}", rename={"text": "questionText"}
            )
        )
        for n, el in enumerate(root.findall("studentAnswers/studentAnswer"), 1):
            aid = el.get("id") or f"{qid}/{n}"
            score = to_number(_text(el.find("score")), file=file, record=aid, field="score")
            meta: dict[str, Any] = {
                "feedback": _text(el.find("response_feedback")),
                "verification": _text(el.find("verification_feedback")),
            }
            text = _text(el.find("response"))
            meta["empty"] = not text
            a = {
                "id": aid,
                "question_id": qid,
                "text": text or EMPTY_ANSWER,
                "human_scores": {"expert": score * max_points},
                "meta": {k: v for k, v in meta.items() if v},
            }
            answers.append(build(Answer, a, file=file, record=aid, rename={"text": "response"}))
    return item_set(questions, answers, path)
