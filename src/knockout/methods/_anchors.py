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

``shift`` (issue 48) asks only the reference, one call per question, and moves every grade of the question by
the gap between full points and the judge's grade of the reference, with no stretch::

    shifted = g + (m - reference), clipped to 0..m

so an answer gains from the judge exactly what it gained before (an attack is not stretched), and the question's
level is the one at which its own reference gets full points.  With two readers the shifted grades are what the
meaning reader is combined with.  Off by default too: it brings the Mohler and SAF grades' RMSE below the
constant at the humans' mean and raises the demo exam's significantly (docs/methods.md#reference-anchors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from knockout.data._records import Answer, Question
from knockout.errors import ConfigError

ANCHOR_MODES = ("off", "on", "shift")
#: the two ends, in the order they are asked (a request's subject: ``Subject("anchor", (question id, end))``)
ANCHOR_ENDS = ("reference", "null")
#: the answer that stands for no points (its grade anchors 0)
NULL_ANSWER = "I don't know."
#: the smallest reference - null gap a question's line is drawn through (share of max points): a judge that
#: grades the reference barely above the null answer does not stretch its grades more than 10-fold
MIN_GAP = 0.1


def resolve_anchors(option: str, method: str) -> str:
    """The mode (``off``, ``on``, ``shift``), checked: anchors need individual grading."""
    if option not in ANCHOR_MODES:
        raise ConfigError(f"unknown anchors mode '{option}' (known: {', '.join(ANCHOR_MODES)})")
    if option != "off" and method != "individual":
        raise ConfigError(f"--anchors {option}: reference anchors are for individual grading, not '{method}'")
    return option


def anchor_ends(mode: str) -> tuple[str, ...]:
    """The anchor answers a mode asks, in order: both ends for the line (``on``), the reference alone to shift."""
    return ANCHOR_ENDS if mode == "on" else ANCHOR_ENDS[:1]


def anchor_answers(q: Question, mode: str = "on") -> list[tuple[str, Answer]]:
    """The question's anchor answers (end, answer) a mode asks: its reference (full points), and for the line the
    null answer (none)."""
    assert q.reference, "anchors need the question's reference"
    texts = {"reference": q.reference, "null": NULL_ANSWER}
    return [(end, Answer(id=f"{q.id} (anchor: {end})", question_id=q.id, text=texts[end])) for end in anchor_ends(mode)]


@dataclass(frozen=True)
class Anchors:
    """The judge's grades (points) of a question's reference and null answers (None: shifted on the reference
    alone)."""

    reference: float
    null: float | None
    max_points: float

    @property
    def scale(self) -> float:
        """Points of the anchored grade per point of the judge's grade (1 for a shift)."""
        if self.null is None:
            return 1.0
        return self.max_points / max(self.reference - self.null, MIN_GAP * self.max_points)

    @property
    def shift(self) -> float:
        """Points added to the judge's grade (a shift's; 0 for the line, which starts at the null answer)."""
        return self.max_points - self.reference if self.null is None else 0.0

    def read(self, grade: float) -> float:
        """``grade`` on the question's anchored scale (0..max points)."""
        moved = grade + self.shift if self.null is None else (grade - self.null) * self.scale
        return min(max(moved, 0.0), self.max_points)

    def record(self, grade: float) -> dict[str, float | None]:
        """What an anchored answer's details keep: its grade before anchoring and the question's anchors."""
        rec: dict[str, float | None] = {"grade_raw": grade, "reference": self.reference, "null": self.null,
                                        "scale": self.scale}
        if self.null is None:
            rec["shift"] = self.shift
        return rec


def anchored_words(anchored: dict[str, Any]) -> str:
    """An anchored answer's details (:meth:`Anchors.record`, or why its anchors were not used) in words."""
    if anchored.get("error"):
        return str(anchored["error"])
    judge = f"the judge's grade {anchored['grade_raw']:.2f}"
    if anchored.get("shift") is not None:
        return (f"{judge}, moved by {anchored['shift']:+.2f}: the gap between full points and its grade of the "
                f"reference ({anchored['reference']:.2f})")
    return (f"{judge}, read on the line through its grades of the reference ({anchored['reference']:.2f}: full "
            f"points) and of a null answer ({anchored['null']:.2f}: none)")
