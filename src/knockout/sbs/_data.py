"""Side-by-side items: a question, a candidate and a baseline answer, optional reference and verdicts.

Sources (:func:`load_sbs`):

* **sbs JSONL** (the project's side-by-side format): one object per line with ``id``, ``question``,
  ``candidate``, ``baseline`` (required), ``reference``, ``candidate_system``, ``baseline_system``,
  ``human_verdicts`` (``{annotator: "A"|"B"|"C"|"D"}`` in candidate terms: A = candidate better,
  B = baseline better, C = both good, D = both bad; ``"human_verdict": "B"`` is short for
  ``{"human": "B"}``) and ``meta``.  Unknown fields are errors.
* **pairwise sources** read by :func:`knockout.data._formats.metaeval.load_pairs` (the PandaLM test set
  JSON, the meta-evaluation pairwise JSONL), whose verdicts are "0" tie, "1" first better, "2" second
  better.  ``candidate="first"`` (default) makes the first response (PandaLM ``response1``, the first
  system of ``cmp_key``) the candidate; ``"second"`` the other.  These sources have no "both bad"
  class: a tie becomes ``tie`` (default ``C``, "both good": a human tie says the two answers are of
  equal quality, and most PandaLM ties are between acceptable answers; ``D`` is the alternative).  The
  metrics also report a 3-class kappa with C and D merged, which does not depend on this choice.

The item set is snapshotted in the store as an :class:`ItemSet` (:func:`to_itemset`): one question per
item (``meta["sbs"]`` holds the verdicts) with the answers ``<id>/candidate`` and ``<id>/baseline``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from knockout._verdict import Verdict
from knockout.data._formats.metaeval import load_pairs
from knockout.data._io import EMPTY_ANSWER, build, iter_json_lines
from knockout.data._records import Answer, ItemSet, PairItem, Question
from knockout.errors import ConfigError, InputError
from knockout.sbs._ensemble import ensemble
from knockout.sbs._verdicts import CLASSES


class SbsItem(BaseModel):
    """One side-by-side comparison; verdicts are in candidate terms (A = candidate better)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    question: str
    candidate: str
    baseline: str
    reference: str | None = None
    candidate_system: str | None = None
    baseline_system: str | None = None
    human_verdicts: dict[str, Verdict] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", "question")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not str(v).strip():
            raise ValueError("must not be empty")
        return v

    @field_validator("human_verdicts", mode="before")
    @classmethod
    def _classes(cls, v: Any) -> Any:
        for who, verdict in (v.items() if isinstance(v, dict) else ()):
            if verdict not in CLASSES:
                raise ValueError(f"verdict of '{who}' must be A, B, C or D, got {str(verdict)!r}")
        return v

    @property
    def human(self) -> Verdict | None:
        """The annotators' verdicts ensembled into one (Table 8 for three), or None."""
        return ensemble(self.human_verdicts[k] for k in sorted(self.human_verdicts))


def _from_pair(p: PairItem, *, tie: str, candidate: str) -> SbsItem:
    first = candidate == "first"

    def verdict(source: str) -> Verdict:  # "1"/"2"/"0" of the pair -> candidate terms
        v = Verdict.parse(source)
        v = Verdict(tie) if v.is_tie else v
        return v if first else v.swap()

    return SbsItem(
        id=p.id,
        question=p.question,
        candidate=p.answer_a if first else p.answer_b,
        baseline=p.answer_b if first else p.answer_a,
        reference=p.reference,
        candidate_system=p.system_a if first else p.system_b,
        baseline_system=p.system_b if first else p.system_a,
        human_verdicts={k: verdict(v) for k, v in p.human_verdicts.items()},
        meta={**p.meta, "candidate_position_in_source": 1 if first else 2},
    )


def _load_jsonl(path: Path) -> list[SbsItem]:
    out: list[SbsItem] = []
    seen: set[str] = set()
    for n, obj in iter_json_lines(path):
        where = f"line {n}"
        rename = None
        if "human_verdict" in obj:
            if "human_verdicts" in obj:
                raise InputError("give either human_verdict or human_verdicts, not both", file=str(path),
                                 record=where, field="human_verdict")
            v = obj.pop("human_verdict")
            obj["human_verdicts"] = {} if v is None else {"human": v}
            rename = {"human_verdicts.human": "human_verdict", "human_verdicts": "human_verdict"}
        item = build(SbsItem, obj, file=path, record=where, rename=rename)
        if item.id in seen:
            raise InputError("duplicate id", file=str(path), record=where, field="id")
        seen.add(item.id)
        out.append(item)
    return out


def is_sbs_jsonl(path: Path) -> bool:
    if path.suffix.lower() != ".jsonl":
        return False
    first = next(iter_json_lines(path), None)
    return first is not None and {"candidate", "baseline"} <= first[1].keys()


def load_sbs(path: str | Path, *, tie: str = "C", candidate: str = "first") -> list[SbsItem]:
    """Side-by-side items from an sbs JSONL file or a pairwise source (PandaLM, meta-eval JSONL)."""
    p = Path(path)
    if tie not in ("C", "D"):
        raise ConfigError(f"tie must map to C (both good) or D (both bad), got {tie!r}")
    if candidate not in ("first", "second"):
        raise ConfigError(f"candidate must be 'first' or 'second', got {candidate!r}")
    if not p.is_file():
        raise InputError("no such file", file=str(p))
    items = _load_jsonl(p) if is_sbs_jsonl(p) else [_from_pair(x, tie=tie, candidate=candidate) for x in load_pairs(p)]
    if not items:
        raise InputError("no side-by-side items", file=str(p))
    return items


def to_itemset(items: list[SbsItem], source: str) -> ItemSet:
    """The items as an ItemSet (for the store's snapshot); :func:`from_itemset` reverses it."""
    questions: list[Question] = []
    answers: list[Answer] = []
    for it in items:
        sbs = it.model_dump(mode="json", exclude={"id", "question", "candidate", "baseline", "reference"})
        questions.append(Question(id=it.id, text=it.question, reference=it.reference, meta={"sbs": sbs},
                                  human_scale="sbs"))
        for role, text, system in (("candidate", it.candidate, it.candidate_system),
                                   ("baseline", it.baseline, it.baseline_system)):
            answers.append(Answer(id=f"{it.id}/{role}", question_id=it.id, examinee=system or role,
                                  text=text if text.strip() else EMPTY_ANSWER,
                                  meta={"role": role, **({} if text.strip() else {"empty": True})}))
    return ItemSet(questions, answers, source=source)


def from_itemset(items: ItemSet) -> list[SbsItem]:
    out = []
    for qid in items.question_ids():
        q = items.questions[qid]
        texts = {a.meta["role"]: ("" if a.meta.get("empty") else a.text) for a in items.answers_for(qid)}
        out.append(SbsItem(id=q.id, question=q.text, reference=q.reference, candidate=texts["candidate"],
                           baseline=texts["baseline"], **q.meta["sbs"]))
    return out
