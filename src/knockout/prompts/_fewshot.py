"""Few-shot example selection as SciEx (Dinh et al. 2024, section 3.2) defines it.

To grade question M of exam A answered by examinee X, examples are human-graded
answers by another examinee Y != X:

* ``same-question``: to the same question M;
* ``same-exam``: to another question N != M of the same exam A;
* ``other-exam``: to a question of another exam B != A, in the **same language** as exam A, and
  one that is **not image-heavy** ("for Exam B, we opt to select the exams that do not heavily require
  images"; the authors' ``llm_grade_exam.py`` fixes B per language: HCI_SS23 or DLNN-WS2223 for English,
  dbs_exam_ipd-boehm_2023 or TGI2324 for German).  An exam is image-heavy when more than
  :data:`IMAGE_HEAVY` of its questions have figures; when every candidate exam is, the least image-heavy
  ones are used.  All examples of one graded answer come from one exam B, drawn per exam A.

The examples of one prompt come from **distinct examinees** and, except for ``same-question``, from
distinct questions, as the authors draw them (``random.sample`` of the other LLMs and of the questions);
with fewer candidates there are fewer examples, which a grading run refuses unless it is told to go on
(``allow_fewer_shots``; :meth:`knockout.prompts._builder.PromptBuilder.check_shots`).
The graded answer and its own grade are never used, nor
any answer by the same examinee.  Selection is deterministic: it depends only on the seed and the
answer's id (and, for exam B, the exam's id).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from knockout.data._records import Answer, ItemSet
from knockout.errors import ConfigError

SHOT_SOURCES = ("same-question", "same-exam", "other-exam")
#: An exam whose share of questions with figures is above this is image-heavy (other-exam shots avoid it).
IMAGE_HEAVY = 0.25


@dataclass(frozen=True)
class Shot:
    answer: Answer
    grade: float


def _rng(seed: int, answer_id: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{answer_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def image_share(items: ItemSet, exam_id: str | None) -> float:
    """The share of an exam's questions that have figures."""
    qs = [q for q in items.questions.values() if q.exam_id == exam_id]
    return sum(bool(q.images) for q in qs) / len(qs) if qs else 0.0


def other_exam(items: ItemSet, candidates: list[Answer] | list[int], exam_id: str | None, seed: int) -> str | None:
    """Exam B for ``other-exam`` shots of exam A (``exam_id``): drawn from the candidates' exams (answers, or
    their indices in ``items``) that are not image-heavy (else the least image-heavy), deterministically per
    seed and exam A."""
    exams = sorted({str((items.question_at(a) if isinstance(a, int) else items.question_of(a)).exam_id)
                    for a in candidates})
    if not exams:
        return None
    share = {e: image_share(items, e) for e in exams}
    lightest = min(share.values())
    light = [e for e in exams if share[e] <= IMAGE_HEAVY + 1e-9] or [e for e in exams if share[e] == lightest]
    return _rng(seed, f"exam-b:{exam_id}").choice(light)


def select_shots(items: ItemSet, target: Answer, k: int, source: str, seed: int) -> list[Shot]:
    """Up to ``k`` examples for ``target``; fewer when the data has fewer candidates."""
    if source not in SHOT_SOURCES:
        raise ConfigError(f"unknown shot source '{source}' (known: {', '.join(SHOT_SOURCES)})")
    if k <= 0:
        return []
    q = items.question_of(target)
    candidates: list[int] = []  # indices into items: an answer is built only when it is chosen
    pool = items.indices_for(q.id) if source == "same-question" else range(len(items))
    for i in pool:
        if items.human_score_at(i) is None or items.answer_id_at(i) == target.id:
            continue
        if target.examinee is not None and items.examinee_at(i) == target.examinee:
            continue
        aq = items.question_at(i)
        if source == "same-question":
            ok = aq.id == q.id
        elif source == "same-exam":
            ok = aq.id != q.id and aq.exam_id == q.exam_id
        else:
            ok = aq.exam_id != q.exam_id and aq.language == q.language
        if ok:
            candidates.append(i)
    if source == "other-exam":
        exam_b = other_exam(items, candidates, q.exam_id, seed)
        candidates = [i for i in candidates if str(items.question_at(i).exam_id) == exam_b]
    rng = _rng(seed, target.id)
    chosen: list[int] = []
    examinees: set[str] = set()
    questions: set[str] = set()
    for i in rng.sample(candidates, len(candidates)):
        ex = items.examinee_at(i)
        who = ex if ex is not None else f"answer:{items.answer_id_at(i)}"
        qid = items.question_at(i).id
        if who in examinees or (source != "same-question" and qid in questions):
            continue
        chosen.append(i)
        examinees.add(who)
        questions.add(qid)
        if len(chosen) == k:
            break
    return [Shot(items.answer_at(i), float(h)) for i in chosen if (h := items.human_score_at(i)) is not None]



def shots_used(results: Iterable[Any], requested: int, source: str) -> dict[str, Any]:
    """What a few-shot run used: examples per answer (``{"2": 10, "1": 3}``), how many answers got fewer than
    ``requested``, and the prompts (so the language) they were graded with.  ``results``: a grade run's results
    (``AnswerResult`` or stored rows, each with ``details.shots`` and ``details.prompt``)."""
    per: dict[int, int] = {}
    prompts: dict[str, int] = {}
    for r in results:
        details = (r.get("details") if isinstance(r, dict) else r.details) or {}
        n = len(details.get("shots") or [])
        per[n] = per.get(n, 0) + 1
        if details.get("prompt"):
            prompts[str(details["prompt"])] = prompts.get(str(details["prompt"]), 0) + 1
    out: dict[str, Any] = {"requested": requested, "source": source,
                           "per_answer": {str(n): per[n] for n in sorted(per, reverse=True)},
                           "fewer": sum(c for n, c in per.items() if n < requested)}
    if prompts:
        out["prompts"] = dict(sorted(prompts.items()))
    return out


def shots_label(used: dict[str, Any]) -> str:
    """``2-shot other-exam`` when every answer got its examples, else what they got, e.g.
    ``2-shot other-exam requested: 0 shots for 6 of 12 answers, 2 for 6``."""
    requested, source = used.get("requested", 0), used.get("source", "")
    per: dict[str, int] = used.get("per_answer") or {}
    head = f"{requested}-shot {source}".strip()
    if not used.get("fewer"):
        return head
    total = sum(per.values())
    used_text = ", ".join(f"{n} for {c}" for n, c in per.items())
    return f"{head} requested, used {used_text} of {total} answers"
