"""SciEx exams (Dinh et al. 2024): exam JSON, additional_info.json, answers/ and grades/ in one folder."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from knockout.data._io import (
    EMPTY_ANSWER,
    build,
    item_set,
    list_folder,
    natural_key,
    read_json,
    read_text,
    resolve_image,
    shorten,
    sniff_json,
    to_number,
)
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import InputError

INFO = "additional_info.json"
GOLD = {"en": "GoldAnswerEnglish", "de": "GoldAnswerGerman"}
END_MARKER = "*" * 88 + "\n" + "*" * 88
SECTION = re.compile(r"\s*Answer to Question[ \t]+([^\s:]+):?[ \t]*\n?(.*)", re.DOTALL)


def sniff(path: Path) -> bool:
    """A folder with ``additional_info.json``, or a JSON file holding an object with ``Questions``."""
    if path.is_dir():
        return (path / INFO).is_file() or is_exam_set(path)
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    data = sniff_json(path)
    return isinstance(data, dict) and "Questions" in data


def _rubric(value: Any) -> Any:
    """``Rubric`` of a question's entry in additional_info.json (optional): a text, or a list of criteria
    ``{"Criterion": ..., "Points": ...}`` (lower-case keys as in knockout's JSONL are read too); the Question
    model checks it (the criteria's points must add up to MaximumPoints)."""
    if _is_none(value):
        return None
    if isinstance(value, list):
        return [{k.lower() if isinstance(k, str) and k.lower() in ("criterion", "points") else k: v
                 for k, v in c.items()} if isinstance(c, dict) else c for c in value]
    return value


def _is_none(x: object) -> bool:
    return x is None or (isinstance(x, str) and x.strip().lower() in ("", "none"))


def _questions(path: Path, obj: Any) -> list[dict[str, Any]]:
    """The ``Questions`` list of a SciEx JSON file, each entry an object with an ``Index``."""
    qs = obj.get("Questions") if isinstance(obj, dict) else None
    if not isinstance(qs, list):
        raise InputError("expected an object with a 'Questions' list", file=str(path), field="Questions")
    seen: set[str] = set()
    for i, q in enumerate(qs, 1):
        if not isinstance(q, dict) or _is_none(q.get("Index")):
            raise InputError(
                f"entry {i} of 'Questions' has no Index",
                file=str(path),
                record=f"Questions[{i}]",
                field="Index",
            )
        q["Index"] = str(q["Index"]).strip()
        if q["Index"] in seen:
            raise InputError(f"a second entry with Index {shorten(q['Index'])}", file=str(path),
                             record=f"Questions[{i}]", field="Index")
        seen.add(q["Index"])
    return qs


def _locate(path: Path, language: str | None) -> Path:
    """The exam JSON file: ``path`` itself, or the one file in the folder (``<exam>_<language>.json``)."""
    if path.is_file() and path.name != INFO:
        return path
    folder = path if path.is_dir() else path.parent
    found = sorted(p for p in folder.glob("*.json") if p.name != INFO)
    if language and (matching := [p for p in found if p.stem.endswith(f"_{language}")]):
        found = matching
    if len(found) != 1:
        what = f"several exam files ({', '.join(p.name for p in found)})" if found else "no exam JSON file"
        raise InputError(f"{what}; give the exam file or the option language", file=str(folder))
    return found[0]


def gold_answers(info: dict[str, Any]) -> dict[str, str]:
    """The question's gold answers per language (``GoldAnswerEnglish`` -> "en", ...; lists joined by blank
    lines), those that are given."""
    out = {}
    for lang, key in GOLD.items():
        gold = info.get(key)
        if isinstance(gold, list):
            gold = "\n\n".join(str(g) for g in gold if not _is_none(g))
        if not _is_none(gold):
            out[lang] = str(gold)
    return out


def _gold(golds: dict[str, str], language: str) -> str | None:
    """The gold answer in the exam's language, else the other one."""
    return golds.get(language) or next(iter(golds.values()), None)


def _figures(q: dict[str, Any], *, file: Path, record: str) -> list[Any]:
    """Every ``Figures`` path of a question and its subquestions (each a list, when given)."""

    def listed(obj: Any, field: str) -> list[Any]:
        value = obj.get(field)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InputError(f"must be a list, got {type(value).__name__}", file=str(file), record=record,
                             field=field)
        return value

    figs = list(listed(q, "Figures"))
    for sub in listed(q, "Subquestions"):
        if isinstance(sub, dict):
            figs += listed(sub, "Figures")
    return figs


def _read_answers(path: Path) -> dict[str, str]:
    """Index -> answer text from ``answers/<examinee>.json`` or SciEx's raw ``.txt`` form."""
    if path.suffix == ".json":
        out = {}
        for q in _questions(path, read_json(path)):
            if q.get("Answer") is not None:
                out[q["Index"]] = str(q["Answer"]).strip()
        return out
    text = read_text(path).replace("\r\n", "\n")
    out, line = {}, 1
    for section in text.split(END_MARKER):
        m = SECTION.fullmatch(section)
        if m:
            if m.group(1) in out:
                raise InputError(f"a second answer to Question {shorten(m.group(1))}", file=str(path),
                                 record=f"line {line}")
            out[m.group(1)] = m.group(2).strip()
        elif section.strip():
            lead = section[: len(section) - len(section.lstrip())]
            raise InputError(
                "section does not start with 'Answer to Question <Index>'",
                file=str(path),
                record=f"line {line + lead.count(chr(10))}",
            )
        line += section.count("\n") + 1  # END_MARKER spans two lines
    return out


def _exam_folders(path: Path) -> list[Path]:
    """The exam folders of an exam set (a folder of SciEx exam folders), in natural order; a visible
    subfolder that is not an exam folder is refused (never skipped without a word)."""
    subs = sorted((p for p in list_folder(path, "*") if p.is_dir() and not p.name.startswith(".")),
                  key=lambda p: natural_key(p.name))
    exams = [p for p in subs if (p / INFO).is_file()]
    for p in subs:
        if p not in exams:
            raise InputError(f"not an exam folder (no {INFO}); an exam set holds SciEx exam folders only",
                             file=str(p))
    return exams


def is_exam_set(path: Path) -> bool:
    """A folder without ``additional_info.json`` whose subfolders are SciEx exam folders."""
    if not path.is_dir() or (path / INFO).is_file():
        return False
    return any((p / INFO).is_file() for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def load(path: Path, *, language: str | None = None) -> ItemSet:
    """Options: ``language`` ("en"/"de") picks the exam file in a folder and is used when the
    file name has no language suffix.  ``path`` may be an exam set: a folder of exam folders, read as one
    item set (exam ids are the folder names)."""
    if is_exam_set(path):
        sets = [load(p, language=language) for p in _exam_folders(path)]
        return ItemSet.concat(sets, source=str(path))
    exam_file = _locate(path, language)
    folder = exam_file.parent
    exam = folder.name
    suffix = exam_file.stem.rsplit("_", 1)[-1] if "_" in exam_file.stem else ""
    lang = suffix if len(suffix) == 2 and suffix.isalpha() and suffix.islower() else language
    if not lang:  # never a silent default: the language picks the prompts
        raise InputError("cannot tell the exam's language: name the file <exam>_<lang>.json as SciEx does "
                         "(e.g. _en, _de) or give the option language (--data-opt language=en)", file=str(exam_file))
    answer_files = sorted(list_folder(folder / "answers", "*.*"), key=lambda p: natural_key(p.name))
    grades = folder / "grades"
    grade_files = [("human", p, p.name.removesuffix("_grade.json"))
                   for p in sorted(list_folder(grades, "*_grade.json"))]
    grade_files += [(p.parent.name, p, p.name.removesuffix("_grade.json"))
                    for p in sorted(list_folder(grades, "*/*_grade.json"))]
    return read_exam(exam_file, folder / INFO, exam=exam, lang=lang,
                     answer_files=[(p.stem, p) for p in answer_files if p.suffix in (".json", ".txt")],
                     grade_files=grade_files)


def read_exam(exam_file: Path, info_file: Path, *, exam: str, lang: str, answer_files: list[tuple[str, Path]],
              grade_files: list[tuple[str, Path, str]], figure_folder: Path | None = None) -> ItemSet:
    """One SciEx exam: its exam JSON, its ``additional_info.json``, answer files ``(examinee, path)`` and grade
    files ``(grader, path, examinee)``; figures relative to ``figure_folder`` (default: the exam file's)."""
    folder = figure_folder or exam_file.parent
    if not info_file.is_file():
        raise InputError(f"missing {INFO} beside the exam (it holds MaximumPoints)", file=str(info_file))
    from knockout.sciex._german import exam_info

    info_obj = read_json(info_file)
    infos = {q["Index"]: q for q in _questions(info_file, info_obj)}
    exam_level = exam_info(info_obj, file=str(info_file))  # totals, student results, grade boundaries

    questions: dict[str, Question] = {}
    for q in _questions(exam_file, read_json(exam_file)):
        idx, where = q["Index"], f"Index {q['Index']}"
        desc = q.get("Description")
        if not (_is_none(desc) or isinstance(desc, str)):  # the question's text: an object is not one
            raise InputError(f"expected text, got {type(desc).__name__} {shorten(repr(desc))}",
                             file=str(exam_file), record=where, field="Description")
        info = infos.get(idx, {})
        if _is_none(info.get("MaximumPoints")):
            raise InputError(
                "no MaximumPoints for this question", file=str(info_file), record=where, field="MaximumPoints"
            )
        max_points = to_number(info["MaximumPoints"], file=info_file, record=where, field="MaximumPoints")
        avg = info.get("AverageStudentPoints")
        avg_points = (
            None
            if _is_none(avg)
            else to_number(avg, file=info_file, record=where, field="AverageStudentPoints")
        )
        difficulty = info.get("DifficultyLabel")
        golds = gold_answers(info)
        fields = {
            "id": f"{exam}/{idx}",
            "text": json.dumps({k: v for k, v in q.items() if k != "Index"}, ensure_ascii=False),
            "reference": _gold(golds, lang),
            "max_points": max_points,
            "language": lang,
            "difficulty": None if _is_none(difficulty) else str(difficulty).strip().lower(),
            "exam_id": exam,
            "images": [
                resolve_image(f, folder, file=exam_file, record=where, field="Figures")
                for f in _figures(q, file=exam_file, record=where)
            ],
            "rubric": _rubric(info.get("Rubric")),
            "meta": {"index": idx, "average_student_points": avg_points,
                     **({"gold_answers": golds} if golds else {}),
                     **({"exam_info": exam_level} if exam_level else {})},
        }
        questions[idx] = build(
            Question,
            fields,
            file=exam_file,
            record=where,
            rename={"text": "Description", "max_points": "MaximumPoints", "rubric": "Rubric"},
        )

    def check_index(idx: str, file: Path) -> None:
        if idx not in questions:
            raise InputError(
                f"no question with Index {idx} in {exam_file.name}",
                file=str(file),
                record=f"Index {idx}",
                field="Index",
            )

    answers: dict[tuple[str, str], Answer] = {}
    for examinee, file in answer_files:
        for idx, text in _read_answers(file).items():
            check_index(idx, file)
            if (idx, examinee) in answers:
                raise InputError(f"second answer of '{examinee}'", file=str(file), record=f"Index {idx}")
            a = {
                "id": f"{exam}/{idx}/{examinee}",
                "question_id": f"{exam}/{idx}",
                "examinee": examinee,
                "text": text or EMPTY_ANSWER,
                "meta": {"empty": True} if not text else {},
            }
            answers[idx, examinee] = build(
                Answer, a, file=file, record=f"Index {idx}", rename={"text": "Answer"}
            )

    for grader, file, examinee in grade_files:
        for q in _questions(file, read_json(file)):
            idx, points = q["Index"], q.get("Points")
            check_index(idx, file)
            answer = answers.get((idx, examinee))
            if answer is None or _is_none(points):  # no answer to grade, or not graded
                continue
            score = to_number(points, file=file, record=f"Index {idx}", field="Points")
            if not 0 <= score <= questions[idx].max_points:
                raise InputError(
                    f"{score:g} points is outside 0..{questions[idx].max_points:g}",
                    file=str(file),
                    record=f"Index {idx}",
                    field="Points",
                )
            answer.human_scores[grader] = score

    order = {idx: i for i, idx in enumerate(questions)}
    ordered = [a for (_, a) in sorted(answers.items(), key=lambda kv: order[kv[0][0]])]
    return item_set(questions.values(), ordered, exam_file)
