"""A meta-judge's verdict read from its verdict slot (docs/methods.md#the-verdict-slot; ``knockout meta --verdict``).

The meta presets that give a verdict declare a reasoning-first slot (JDEval's and MDEval's ``<Better_assistant>``,
one of ``Assistant1`` / ``Assistant2`` / ``equally good``; JDEval-i's and BSMEval's solve score, 1 to 5): the
meta-judge reasons as the prompt asks, then knockout writes the verdict's tag and the judge fills only its value.
:class:`MetaSlotParse` reads that value from the backend's slot verdict (``expected``: a class is the most probable
one, a score the probability-weighted mean; ``constrained``: the value written) into the value the text parser
gives, so the frameworks read both alike; a reply without a slot verdict is invalid, never read from its text.
"""

from __future__ import annotations

from typing import Any

from knockout._verdict import Verdict
from knockout.judges._slot import Slot
from knockout.meta._parsers import own_answer, own_score
from knockout.prompts._parsers import Parsed
from knockout.prompts._slots import SlotParse


class MetaSlotParse:
    """One meta request's slot parse: a choice slot gives ``{"winner": A|B|TIE, "answer": ...}`` (``meta-better``'s
    value), a score slot ``{"score": X, "own": ...}`` (``meta-score``'s).  The winner or score is the slot verdict
    alone; ``answer`` / ``own`` (the meta-judge's own better answer or score of the text, a diagnostic beside the
    verdict) are read from its reasoning by the copy-checking readers, never one copied from the texts shown."""

    __slots__ = ("max_points", "shown", "slot")
    #: no stored parse stands for reading the verdict again (it is cheap, and checked each time)
    parse_identity = None

    def __init__(self, slot: Slot, max_points: float, shown: tuple[str, ...] = ()) -> None:
        self.slot, self.max_points, self.shown = slot, max_points, shown

    def __call__(self, text: str) -> Parsed:
        return SlotParse(self.slot, self.max_points)(text)

    def read_verdict(self, verdict: Any, text: str) -> Parsed:
        read = SlotParse(self.slot, self.max_points).read_verdict(verdict, text)
        if not read.ok:
            return read
        if self.slot.kind == "choice":
            return Parsed(value={"winner": Verdict.parse(read.value), "answer": own_answer(text, self.shown)})
        return Parsed(value={"score": float(read.value), "own": own_score(text, self.max_points, self.shown)})
