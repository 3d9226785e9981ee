"""SciEx in the authors' repository layout (github TuAnh23/SciEx; Dinh et al. 2024).

The authors' README does not describe the folders; their scripts fix them, and this loader reads them as
those scripts do (``llm_grade_exam.py`` lines 25, 52-53 and 173; ``grade_ui.py`` 18-44; ``prepare_llm_output.py``
16-21; ``utils.py`` ``LLM_LIST`` and ``map_llm_to_index``)::

    exams_json/<exam>/<exam>_<lang>.json                    the exam, one file per language (en, de);
                                                            its Figures relative to exams_json/<exam>/
    human_feedback/<exam>/additional_info.json              MaximumPoints, gold answers, ... (all languages)
    human_feedback/<exam>/grades/<exam>_<lang>_<llm>_grade.json   the experts' grades of one LLM's answers
    llm_out_filtered/<exam>/<exam>_<lang>_<llm>.txt         the LLM's answers ("Answer to Question <Index>")

``<llm>`` is ``llm<i>``, the i-th of ``LLM_LIST`` (``llava, mistral, mixtral, qwen, claude, gpt35, gpt4v,
o1-mini``); the examinee takes the model's name (``llm4`` -> ``claude``), which is also how the authors'
released LLM grades name it.  Each language version is its own exam, ``<exam>_<lang>`` (their results are
per exam file), with questions ``<exam>_<lang>/<Index>``.  The expert grades are grader ``human``.  An exam
without ``additional_info.json`` is refused (their grading script skips it with a message; knockout never
skips without a word): choose exams with the option ``exams``.
"""

from __future__ import annotations

import re
from pathlib import Path

from knockout.data._formats.sciex import INFO, read_exam
from knockout.data._io import list_folder, natural_key
from knockout.data._records import ItemSet
from knockout.errors import InputError

EXAMS, FEEDBACK, ANSWERS = "exams_json", "human_feedback", "llm_out_filtered"
_LLM = re.compile(r"llm\d+")


def sniff(path: Path) -> bool:
    """A folder holding ``exams_json/`` and ``human_feedback/``."""
    return path.is_dir() and (path / EXAMS).is_dir() and (path / FEEDBACK).is_dir()


def _examinee(name: str) -> str:
    from knockout.sciex._llm_grades import aliases

    if _LLM.fullmatch(name):
        named = sorted(a for a in aliases(name) if a != name)
        return named[0] if named else name
    return name


def load(path: Path, *, exams: str | None = None, language: str | None = None) -> ItemSet:
    """Options: ``exams`` (comma-separated exam names: only these), ``language`` (``en`` or ``de``: only the
    exam files in that language)."""
    wanted = None if exams is None else [e.strip() for e in exams.split(",") if e.strip()]
    folders = sorted((p for p in list_folder(path / EXAMS, "*") if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: natural_key(p.name))
    if wanted is not None:
        missing = sorted(set(wanted) - {p.name for p in folders})
        if missing:
            raise InputError(f"no exam {', '.join(missing)} (option exams)", file=str(path / EXAMS))
        folders = [p for p in folders if p.name in wanted]
    sets: list[ItemSet] = []
    for folder in folders:
        exam = folder.name
        files = sorted(list_folder(folder, f"{exam}_*.json"), key=lambda p: natural_key(p.name))
        langs = [(p, p.stem.removeprefix(f"{exam}_")) for p in files]
        langs = [(p, lang) for p, lang in langs if re.fullmatch(r"[a-z]{2}", lang)]
        if not langs:
            raise InputError(f"no exam file {exam}_<lang>.json", file=str(folder))
        feedback = path / FEEDBACK / exam
        for exam_file, lang in langs:
            if language is not None and lang != language:
                continue
            stem = f"{exam}_{lang}_"
            answer_files = [(_examinee(p.stem.removeprefix(stem)), p)
                            for p in sorted(list_folder(path / ANSWERS / exam, f"{stem}*.txt"),
                                            key=lambda p: natural_key(p.name))]
            grade_files = [("human", p, _examinee(p.name.removeprefix(stem).removesuffix("_grade.json")))
                           for p in sorted(list_folder(feedback / "grades", f"{stem}*_grade.json"))]
            sets.append(read_exam(exam_file, feedback / INFO, exam=f"{exam}_{lang}", lang=lang,
                                  answer_files=answer_files, grade_files=grade_files, figure_folder=folder))
    if not sets:
        raise InputError("no exam to read" + (f" in language {language}" if language else ""), file=str(path / EXAMS))
    return ItemSet.concat(sets, source=str(path))
