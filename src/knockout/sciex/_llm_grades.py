"""SciEx's released LLM grades: the files the authors' grading script writes (github TuAnh23/SciEx,
``llm_grade_exam.py``), read as judge grades for ``knockout leaderboard --llm-grades``.

Layout (one file per exam, language, grader, setting and examinee)::

    llm_grade/<exam>/grader_<grader>/<k>_shot[_with_ref]/[<type>_shot/]<exam>_<lang>_<examinee>_grade.json

    {"Questions": [{"Index": "1", "PromptInput": "...", "ShotLLMs": ["mixtral"], "ShotExam": "HCI_SS23",
                    "ShotQuestion": ["3"], "FullOutput": "...", "Points": 1.5}, ...],
     "TotalPoints": 12.5, "NrFailed": 0, "TotalGradeGermanScale": null}

``Points`` is null where the authors' ``parse_grade`` found no grade (a failed parse: knockout counts it
as invalid).  Examinees are named as in the authors' ``LLM_LIST`` (``claude``, ``gpt4v``, ...) while their
answer and human-grade files use ``llm<i>`` (``map_llm_to_index``); a grade matches an answer under either
name.  Bad files are :class:`InputError` naming the file, the question and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from knockout.data._io import read_json, to_number
from knockout.data._records import ItemSet
from knockout.errors import InputError
from knockout.sciex._copyrate import ShotGrading
from knockout.sciex._output import index_of

#: The authors' examinee list (``utils.LLM_LIST``); ``llm<i>`` is the name of the i-th in their files.
LLM_LIST = ("llava", "mistral", "mixtral", "qwen", "claude", "gpt35", "gpt4v", "o1-mini")
_FILE = re.compile(r"^(?P<exam>.+)_(?P<lang>[a-z]{2})_(?P<examinee>[^_]+)_grade\.json$")
_SETTING = re.compile(r"^(?P<k>\d+)_shot(?P<ref>_with_ref)?$")


def aliases(name: str) -> set[str]:
    """An examinee's names in the authors' files: ``claude`` <-> ``llm4``."""
    out = {name}
    if name in LLM_LIST:
        out.add(f"llm{LLM_LIST.index(name)}")
    m = re.fullmatch(r"llm(\d+)", name)
    if m and int(m.group(1)) < len(LLM_LIST):
        out.add(LLM_LIST[int(m.group(1))])
    return out


@dataclass(frozen=True)
class LLMGrade:
    """One released grade of one answer."""

    grader: str
    shots: int
    with_ref: bool
    shot_type: str | None
    exam: str
    language: str
    examinee: str
    index: str
    points: float | None
    output: str = ""
    shot_examinees: tuple[str, ...] = field(default_factory=tuple)
    shot_exam: str | None = None
    shot_questions: tuple[str, ...] = field(default_factory=tuple)
    file: str = ""

    @property
    def setting(self) -> str:
        ref = ", ref" if self.with_ref else ""
        kind = f" {self.shot_type}" if self.shots and self.shot_type else ""
        return f"{self.shots}-shot{kind}{ref}"

    @property
    def label(self) -> str:
        return f"SciEx {self.grader} ({self.setting})"


def _setting(path: Path) -> tuple[str, int, bool, str | None]:
    parts = path.parts
    grader_at = next((i for i in range(len(parts) - 1, -1, -1) if parts[i].startswith("grader_")), None)
    if grader_at is None or grader_at + 1 >= len(parts) - 1:
        raise InputError("not in a folder grader_<name>/<k>_shot[_with_ref]/ as the authors' grading script writes",
                         file=str(path))
    m = _SETTING.match(parts[grader_at + 1])
    if not m:
        raise InputError(f"folder '{parts[grader_at + 1]}' is not <k>_shot or <k>_shot_with_ref", file=str(path))
    rest = parts[grader_at + 2:-1]
    shot_type = rest[0].removesuffix("_shot") if rest else None
    return parts[grader_at].removeprefix("grader_"), int(m.group("k")), bool(m.group("ref")), shot_type


def _strings(value: object, *, file: Path, record: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {type(value).__name__}", file=str(file), record=record, field=name)
    return tuple(str(v) for v in value)


def read_grade_file(path: Path) -> list[LLMGrade]:
    """The grades of one released file."""
    m = _FILE.match(path.name)
    if not m:
        raise InputError("file name is not <exam>_<lang>_<examinee>_grade.json", file=str(path))
    grader, k, ref, shot_type = _setting(path)
    obj = read_json(path)
    qs = obj.get("Questions") if isinstance(obj, dict) else None
    if not isinstance(qs, list):
        raise InputError("expected an object with a 'Questions' list", file=str(path), field="Questions")
    out = []
    for i, q in enumerate(qs, 1):
        record = f"Questions[{i}]"
        if not isinstance(q, dict) or q.get("Index") in (None, ""):
            raise InputError("entry has no Index", file=str(path), record=record, field="Index")
        record = f"Index {q['Index']}"
        points = q.get("Points")
        out.append(LLMGrade(
            grader=grader, shots=k, with_ref=ref, shot_type=shot_type, exam=m.group("exam"), language=m.group("lang"),
            examinee=m.group("examinee"), index=str(q["Index"]).strip(),
            points=None if points is None else to_number(points, file=path, record=record, field="Points"),
            output=str(q.get("FullOutput") or ""),
            shot_examinees=_strings(q.get("ShotLLMs"), file=path, record=record, name="ShotLLMs"),
            shot_exam=None if q.get("ShotExam") is None else str(q["ShotExam"]),
            shot_questions=_strings(q.get("ShotQuestion"), file=path, record=record, name="ShotQuestion"),
            file=str(path),
        ))
    return out


def load_llm_grades(path: str | Path) -> list[LLMGrade]:
    """Every released grade in a grade file or under a folder (searched recursively)."""
    p = Path(path)
    if p.is_file():
        return read_grade_file(p)
    if not p.is_dir():
        raise InputError("no such file or folder", file=str(p))
    files = sorted(f for f in p.rglob("*_grade.json") if f.is_file())
    if not files:
        raise InputError("no *_grade.json files of the authors' grading script under this folder", file=str(p))
    return [g for f in files for g in read_grade_file(f)]


class AnswerIndex:
    """Finds the answer of an item set that a released grade is about: (exam, Index, examinee), the exam
    named by its folder (``exam_id``) or as ``<exam>_<lang>``, the examinee under either of its names."""

    def __init__(self, items: ItemSet) -> None:
        self._ids: dict[tuple[str, str, str], str] = {}
        self.items = items
        for a in items:
            q = items.question_of(a)
            if a.examinee is None or q.exam_id is None:
                continue
            for name in aliases(a.examinee):
                self._ids[(q.exam_id, index_of(q), name)] = a.id
                self._ids[(f"{q.exam_id}_{q.language}", index_of(q), name)] = a.id

    def find(self, exam: str, language: str, index: str, examinee: str) -> str | None:
        for name in aliases(examinee):
            for e in (exam, f"{exam}_{language}"):
                if (e, index, name) in self._ids:
                    return self._ids[(e, index, name)]
        return None


def grades_by_setting(records: Iterable[LLMGrade], items: ItemSet) -> dict[str, dict[str, float | None]]:
    """Label (grader and setting) -> answer id -> points (None: failed parse), for the answers of ``items``."""
    index = AnswerIndex(items)
    out: dict[str, dict[str, float | None]] = {}
    for g in records:
        aid = index.find(g.exam, g.language, g.index, g.examinee)
        if aid is not None:
            out.setdefault(g.label, {})[aid] = g.points
    return out


def released_gradings(records: Iterable[LLMGrade], items: ItemSet) -> dict[str, list[ShotGrading]]:
    """Label -> the few-shot gradings of released grades (the examples' expert grades looked up in ``items``),
    for :func:`knockout.sciex._copyrate.copy_rate`."""
    index = AnswerIndex(items)
    out: dict[str, list[ShotGrading]] = {}
    for g in records:
        if g.points is None or not g.shot_examinees:
            continue
        shots = []
        exam = g.shot_exam or g.exam
        for who, idx in zip(g.shot_examinees, g.shot_questions, strict=False):
            aid = index.find(exam, g.language, idx, who)
            score = items.answer(aid).human_score if aid is not None else None
            if score is not None:
                shots.append(score)
        target = index.find(g.exam, g.language, g.index, g.examinee)
        expert = items.answer(target).human_score if target is not None else None
        if shots:
            out.setdefault(g.label, []).append(ShotGrading(g.points, shots, expert))
    return out
