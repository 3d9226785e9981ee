"""Reference anchors: each question's expected grades read on the judge's own scale for that question.

A small judge's expected grades are squeezed and shifted, by a different amount on each question (issue 41:
inside a question it ranks the answers partly right, but the question's level is off and its grades span a
fraction of the points). Before reading a question's grades, the judge grades two answers that stand for the
ends of the scale, through the same prompt as every answer:

* the question's **reference answer** itself: what full points look like to this judge on this question;
* a **null answer** (:data:`NULL_ANSWER`): what no points look like.

An answer's expected grade ``g`` is then read on the line through them (points; ``m`` the question's max)::

    anchored = m * (g - null) / max(reference - null, MIN_GAP * m), clipped to 0..m

so the reference scores full points, the null answer none, and the question's answers keep their order. The
anchors come from the question, never from an answer: an examinee can neither plant nor move them, but whatever
an answer gains from the judge is stretched with it. Two judge calls per question with a reference shown and no
criteria rubric. Off by default: measured in docs/methods.md#reference-anchors, it lowers the RMSE on two
suites and raises no Pearson significantly, and it doubles the largest inflation an attack reaches.
"""

from __future__ import annotations

from dataclasses import dataclass

from knockout.data._records import Answer, Question
from knockout.errors import ConfigError

ANCHOR_MODES = ("off", "on")
#: the two ends, in the order they are asked (a request's subject: ``Subject("anchor", (question id, end))``)
ANCHOR_ENDS = ("reference", "null")
#: the answer that stands for no points (its grade anchors 0)
NULL_ANSWER = "I don't know."
#: the smallest reference - null gap a question's line is drawn through (share of max points): a judge that
#: grades the reference barely above the null answer does not stretch its grades more than 10-fold
MIN_GAP = 0.1


def resolve_anchors(option: str, method: str) -> str:
    """``on`` or ``off``, checked: ``on`` needs individual grading."""
    if option not in ANCHOR_MODES:
        raise ConfigError(f"unknown anchors mode '{option}' (known: {', '.join(ANCHOR_MODES)})")
    if option == "on" and method != "individual":
        raise ConfigError(f"--anchors on: reference anchors are for individual grading, not '{method}'")
    return option


def anchor_answers(q: Question) -> tuple[Answer, Answer]:
    """The question's two anchor answers: its reference (full points) and the null answer (none)."""
    assert q.reference, "anchors need the question's reference"
    return (Answer(id=f"{q.id} (anchor: reference)", question_id=q.id, text=q.reference),
            Answer(id=f"{q.id} (anchor: null)", question_id=q.id, text=NULL_ANSWER))


@dataclass(frozen=True)
class Anchors:
    """The judge's grades (points) of a question's reference and null answers."""

    reference: float
    null: float
    max_points: float

    @property
    def scale(self) -> float:
        """Points of the anchored grade per point of the judge's grade."""
        return self.max_points / max(self.reference - self.null, MIN_GAP * self.max_points)

    def read(self, grade: float) -> float:
        """``grade`` on the question's anchored scale (0..max points)."""
        return min(max((grade - self.null) * self.scale, 0.0), self.max_points)

    def record(self, grade: float) -> dict[str, float]:
        """What an anchored answer's details keep: its grade before anchoring and the question's anchors."""
        return {"grade_raw": grade, "reference": self.reference, "null": self.null, "scale": self.scale}
