"""Writing an item set as SciEx exam folders (and the project's JSONL), e.g. the output of ``knockout solve``.

One folder per exam, the layout the ``sciex`` loader reads (docs/data-formats.md) and the authors' files
hold (github TuAnh23/SciEx)::

    <out>/<exam>/<exam>_<lang>.json          {"Questions": [{"Index": ..., <the question's JSON>}]}
    <out>/<exam>/additional_info.json        MaximumPoints, AverageStudentPoints, GoldAnswer*, DifficultyLabel
                                             per question; the exam's totals, student results, GradeBoundaries
    <out>/<exam>/<figure paths>              the figures, at the paths the questions name
    <out>/<exam>/answers/<examinee>.txt      "Answer to Question <Index>" + answer + two lines of 88 '*'
    <out>/<exam>/grades/<examinee>_grade.json            grader "human"
    <out>/<exam>/grades/<grader>/<examinee>_grade.json   any other grader

The answer files are laid out exactly as ``llm_solve_exam.py`` writes them, so the authors' own tools read
them too.  An exam whose questions are in several languages becomes one folder per language
(``<exam>-<lang>``), since a SciEx exam file has one language.  Files are written through a temporary
name and renamed into place.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from knockout.data._output import atomic_output, output_folder
from knockout.data._records import Answer, ItemSet, Question
from knockout.sciex._figures import figure_names

STARS = "*" * 88
SEPARATOR = f"\n\n\n\n\n{STARS}\n{STARS}\n\n\n\n\n"
GOLD = {"en": "GoldAnswerEnglish", "de": "GoldAnswerGerman"}


def _atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as f:
        f.write(text)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "x"


def index_of(q: Question) -> str:
    """The question's ``Index`` (SciEx), else its id after the exam's prefix."""
    idx = q.meta.get("index")
    if idx is not None:
        return str(idx)
    if q.exam_id and q.id.startswith(f"{q.exam_id}/"):
        return q.id[len(q.exam_id) + 1:]
    return q.id


def answer_file(sections: Iterable[tuple[str, str]]) -> str:
    """SciEx's answer file: per question ``Answer to Question <Index>``, the answer, the separator."""
    # An answer cannot hold the separator (two lines of 88 '*'): one star less keeps it readable.
    return "".join(f"Answer to Question {idx}\n{text.replace(STARS, STARS[:-1])}{SEPARATOR}" for idx, text in sections)


def _question_json(q: Question, idx: str, names: list[str]) -> dict[str, Any]:
    try:
        obj = json.loads(q.text)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        obj = {"Description": q.text}
        if names:
            obj["Figures"] = names
    return {"Index": idx, **{k: v for k, v in obj.items() if k != "Index"}}


def _relative(name: str) -> Path:
    p = Path(name)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return Path("figures") / _safe(p.name)
    return p


def write_sciex(items: ItemSet, out_dir: str | Path) -> list[Path]:
    """Write ``items`` as SciEx exam folders under ``out_dir`` (one per exam); returns the folders."""
    out = output_folder(out_dir)
    by_exam: dict[tuple[str, str], list[Question]] = {}
    for q in items.questions.values():
        by_exam.setdefault((q.exam_id or Path(items.source).stem or "exam", q.language), []).append(q)
    mixed = {e for e, _ in by_exam if sum(e == other for other, _ in by_exam) > 1}
    folders = []
    for (exam_id, lang), questions in by_exam.items():
        exam = f"{exam_id}-{lang}" if exam_id in mixed else exam_id  # a SciEx exam file has one language
        folder = out / _safe(exam)
        qjson, infos = [], []
        for q in questions:
            idx = index_of(q)
            names = [str(_relative(n)) for n in figure_names(q.text, q.images)]
            for src, name in zip(q.images, names, strict=True):
                if os.path.isfile(src):
                    target = folder / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if not target.is_file() or target.read_bytes() != Path(src).read_bytes():
                        shutil.copyfile(src, target)
            qjson.append(_question_json(q, idx, names))
            info: dict[str, Any] = {"Index": idx, "MaximumPoints": q.max_points,
                                    "AverageStudentPoints": q.meta.get("average_student_points"),
                                    "GoldAnswerEnglish": None, "GoldAnswerGerman": None,
                                    "DifficultyLabel": q.difficulty.capitalize() if q.difficulty else None}
            golds = q.meta.get("gold_answers") or {}
            for other, gold in golds.items():  # every language the exam info had
                if other in GOLD:
                    info[GOLD[other]] = gold
            if lang in golds or q.reference not in golds.values():  # not the other language's fallback
                info[GOLD.get(lang, GOLD["en"])] = q.reference
            infos.append(info)
        exam_info = dict(questions[0].meta.get("exam_info") or {})
        _atomic(folder / f"{_safe(exam)}_{lang}.json", json.dumps({"Questions": qjson}, ensure_ascii=False, indent=2))
        _atomic(folder / "additional_info.json",
                json.dumps({"Questions": infos, **exam_info}, ensure_ascii=False, indent=2))
        qids = {q.id: index_of(q) for q in questions}
        by_examinee: dict[str, list[Answer]] = {}
        for a in items:
            if a.question_id in qids:
                by_examinee.setdefault(_safe(a.examinee or a.id), []).append(a)
        for examinee, answers in by_examinee.items():
            sections = [(qids[a.question_id], "" if a.meta.get("empty") else a.text) for a in answers]
            _atomic(folder / "answers" / f"{examinee}.txt", answer_file(sections))
            graders = sorted({g for a in answers for g in a.human_scores})
            for grader in graders:
                points = [a.human_scores.get(grader) for a in answers]
                rows = [{"Index": qids[a.question_id], "Points": p} for a, p in zip(answers, points, strict=True)]
                total = sum(p or 0.0 for p in points)
                path = (folder / "grades" / f"{examinee}_grade.json" if grader == "human"
                        else folder / "grades" / _safe(grader) / f"{examinee}_grade.json")
                _atomic(path, json.dumps({"Questions": rows, "TotalPoints": total}, ensure_ascii=False, indent=2))
        folders.append(folder)
    return folders


def write_solved(items: ItemSet, out_dir: str | Path, jsonl_name: str = "solved.jsonl") -> tuple[list[Path], Path]:
    """``items`` as SciEx folders under ``out_dir`` and, read back from them, as one JSONL file beside them
    (the folders and the JSONL hold the same item set)."""
    from knockout.data import load_items, write_jsonl

    folders = write_sciex(items, out_dir)
    loaded = [load_items(f, "sciex") for f in folders]
    questions = [q for s in loaded for q in s.questions.values()]
    answers = [a for s in loaded for a in s]
    jsonl = Path(out_dir) / jsonl_name
    write_jsonl(ItemSet(questions, answers, source=str(jsonl)), jsonl)
    return folders, jsonl
