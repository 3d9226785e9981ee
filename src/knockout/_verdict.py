"""The one verdict vocabulary of knockout: which of two answers is better, or neither.

Every part that compares two answers speaks it: side-by-side judging (:mod:`knockout.sbs`), the
web app's pair annotations (:mod:`knockout.annotations`), meta-evaluation's pairwise verdicts and
meta-judge winners (:mod:`knockout.meta`), pairwise matches of the ranking methods
(:mod:`knockout.methods`), jury aggregates and reports.

========  ========  ==================================================================================
member    value     meaning
========  ========  ==================================================================================
``A``     ``"A"``   the first answer (A, the candidate, Answer 1) is better
``B``     ``"B"``   the second answer (B, the baseline, Answer 2) is better
``C``     ``"C"``   both are equally good (side-by-side class C)
``D``     ``"D"``   both are equally bad (side-by-side class D)
``TIE``   ``"TIE"`` a tie without a quality judgement (pairwise matches, meta-evaluation)
``E``     ``"E"``   no valid verdict (a reply none of the above; counted, never dropped)
========  ========  ==================================================================================

:class:`Verdict` is a :class:`~enum.StrEnum` whose values are the strings stored so far (``"A"`` ...
``"E"``), so a member equals its string, is written to JSON and SQLite as that string and reads back
with ``Verdict(value)``.  :meth:`Verdict.parse` also reads the legacy spellings: the annotations'
``both_good`` / ``both_bad``, meta-evaluation data's ``1`` / ``2`` / ``0`` (tie) and the winner names of
the meta-evaluation study (``Assistant1``, ``AnswerB``, ``equally good``...).
"""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """A verdict on a pair of answers (see the module doc for the members)."""

    A = "A"
    B = "B"
    C = "C"
    D = "D"
    TIE = "TIE"
    E = "E"

    @property
    def label(self) -> str:
        """Words for people: ``A better``, ``both good``, ``tie``, ``invalid``..."""
        return _LABELS[self]

    @property
    def is_valid(self) -> bool:
        """Everything but ``E``."""
        return self is not Verdict.E

    @property
    def is_tie(self) -> bool:
        """Neither answer is better: ``C``, ``D`` or ``TIE``."""
        return self in (Verdict.C, Verdict.D, Verdict.TIE)

    def swap(self) -> Verdict:
        """The same verdict with the two answers' places traded: ``A`` <-> ``B``, the others unchanged."""
        return Verdict.B if self is Verdict.A else Verdict.A if self is Verdict.B else self

    def score_first(self) -> float | None:
        """The first answer's result: 1 (``A``), 0 (``B``), 0.5 (a tie of any kind); None for ``E``."""
        return None if self is Verdict.E else 1.0 if self is Verdict.A else 0.0 if self is Verdict.B else 0.5

    @classmethod
    def from_scores(cls, first: float | None, second: float | None) -> Verdict:
        """The verdict of two grades: the higher one wins, equal grades tie, a missing grade is ``E``."""
        if first is None or second is None:
            return cls.E
        return cls.A if first > second else cls.B if first < second else cls.TIE

    @classmethod
    def parse(cls, value: object) -> Verdict:
        """A verdict from any known spelling (case and surrounding space ignored).

        Members' values and names (``A``, ``tie``), the annotations' ``both_good`` / ``both_bad``,
        meta-evaluation data's ``1`` / ``2`` / ``0``, winner names (``Assistant1``, ``AnswerB``,
        ``model_a``, ``equally good``, ``draw``) and the labels (``A better``); ``invalid`` is ``E``.
        Raises :class:`ValueError` naming the value for anything else (booleans included).
        """
        if isinstance(value, Verdict):
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"not a verdict: {value!r}")
        key = str(value).strip().lower()
        found = _SPELLINGS.get(key) or _SPELLINGS.get(key.replace("_", " "))
        if found is None:
            raise ValueError(f"not a verdict: {value!r}")
        return found

    @classmethod
    def spellings(cls) -> tuple[str, ...]:
        """Every spelling :meth:`parse` reads (lower case)."""
        return tuple(_SPELLINGS)


_LABELS = {
    Verdict.A: "A better", Verdict.B: "B better", Verdict.C: "both good", Verdict.D: "both bad",
    Verdict.TIE: "tie", Verdict.E: "invalid",
}  # fmt: skip

#: Lower-case spelling -> verdict (``_`` and space are one: ``both_good`` is ``both good``).
_SPELLINGS: dict[str, Verdict] = {
    **{m.value.lower(): m for m in Verdict},
    **{label.lower(): m for m, label in _LABELS.items()},
    "1": Verdict.A, "answer1": Verdict.A, "answera": Verdict.A, "answer 1": Verdict.A, "answer a": Verdict.A,
    "assistant1": Verdict.A, "assistant 1": Verdict.A, "model a": Verdict.A, "first": Verdict.A,
    "2": Verdict.B, "answer2": Verdict.B, "answerb": Verdict.B, "answer 2": Verdict.B, "answer b": Verdict.B,
    "assistant2": Verdict.B, "assistant 2": Verdict.B, "model b": Verdict.B, "second": Verdict.B,
    "0": Verdict.TIE, "0.5": Verdict.TIE, "equally good": Verdict.TIE, "equal": Verdict.TIE, "draw": Verdict.TIE,
    "both good": Verdict.C, "both bad": Verdict.D, "tie (bothbad)": Verdict.D,
    "none": Verdict.E,
}  # fmt: skip

#: Meta-evaluation data's spelling of the pairwise verdicts (``1``, ``2``, ``0`` = tie).
META_SPELLING = {Verdict.A: "1", Verdict.B: "2", Verdict.TIE: "0"}
