"""A template's verdict slot for one question, and the parse that reads a slot verdict.

A template that declares a slot (``slot``, ``slot_fields``, ``slot_suffix``, ``slot_then``,
``slot_decimal``; :mod:`knockout.prompts._templates`) asks for its verdict first; with a backend that
offers a slot mode (:attr:`knockout.judges.Judge.slot_modes`) the request carries the slot and the grade
is read from the backend's verdict (:func:`knockout.judges._slot.read_verdict`), never from the reply's
text.  :func:`resolve_verdict` turns the ``--verdict`` option into the mode a run uses.
"""

from __future__ import annotations

from typing import Any

from knockout.errors import ConfigError
from knockout.judges._base import Judge
from knockout.judges._slot import MODES, VERDICTS, Slot, read_verdict, score_values
from knockout.prompts._parsers import Parsed
from knockout.prompts._templates import CHOICES, PromptTemplate, fmt_points, render


def resolve_verdict(option: str, judge: Judge) -> str:
    """The verdict mode a run with ``--verdict option`` uses with ``judge``: ``auto`` is the backend's default slot
    mode (:meth:`Judge.default_slot_mode`: its best one, except where a mode is offered only when asked for, as an
    ``openai:`` judge's ``expected``; ``text`` when it has none); a slot mode the backend does not offer is
    refused."""
    if option not in VERDICTS:
        raise ConfigError(f"unknown verdict mode '{option}' (known: {', '.join(VERDICTS)})")
    offered = tuple(m for m in judge.slot_modes if m in MODES)
    if option == "auto":
        default = judge.default_slot_mode()
        return default if default in offered else "text"
    if option != "text" and option not in offered:
        have = ", ".join(offered) if offered else "none: its verdicts are read from free text"
        raise ConfigError(f"the {judge.backend} backend offers no '{option}' verdict slot (offers: {have}); "
                          "use --verdict auto or text")
    return option


#: how a pairwise verdict is read (``--preference``; docs/methods.md#soft-preferences)
PREFERENCES = ("letter", "soft")


def check_preference(preference: str, pairwise: bool, verdict: str) -> None:
    """Refuse a ``--preference`` that is unknown, or ``soft`` where there is no pair to prefer or no token
    probabilities to read it from (``verdict``: the run's resolved verdict mode)."""
    if preference not in PREFERENCES:
        raise ConfigError(f"unknown preference '{preference}' (known: {', '.join(PREFERENCES)})")
    if preference != "soft":
        return
    if not pairwise:
        raise ConfigError("--preference soft decides pairwise matches and side-by-side verdicts; this method grades "
                          "each answer on its own")
    if verdict != "expected":
        raise ConfigError(f"--preference soft reads the judge's token probabilities: it needs --verdict expected "
                          f"(the embedded llamacpp judge), not '{verdict}'")


def slot_for(t: PromptTemplate, max_points: float) -> Slot | None:
    """The template's verdict slot for a question worth ``max_points`` (None: the template has none)."""
    if not t.slot:
        return None
    if t.slot == "choice":
        return Slot("choice", tuple(t.slot_fields), CHOICES, t.slot_suffix, t.slot_then)
    points = {"max_points": fmt_points(max_points)}
    fields, suffix, then = (tuple(render(f, points) for f in t.slot_fields), render(t.slot_suffix, points),
                            render(t.slot_then, points))
    if t.slot_labels:  # labels (no, yes): each worth its share of the question's points
        return Slot("score", fields, tuple(k for k, _ in t.slot_labels), suffix, then,
                    tuple(v * max_points for _, v in t.slot_labels))
    values = score_values(max_points)
    if t.slot_decimal != ".":
        values = tuple(v.replace(".", t.slot_decimal) for v in values)
    kind: Any = t.slot
    return Slot(kind, fields, values, suffix, then)


class SlotParse:
    """A slot request's parse: the grade (a score), the two grades (a pair) or the verdict letter (a choice: the
    most probable one) of the backend's slot verdict, checked against the slot; a reply without one is invalid
    (never read from its text)."""

    __slots__ = ("max_points", "slot")
    #: no stored parse stands for reading the verdict again (it is cheap, and checked each time)
    parse_identity = None

    def __init__(self, slot: Slot, max_points: float) -> None:
        self.slot, self.max_points = slot, max_points

    def __call__(self, text: str) -> Parsed:
        return Parsed(error="the reply has no slot verdict (the backend did not fill the slot)")

    def read_verdict(self, verdict: Any, text: str) -> Parsed:
        if verdict is None:
            return self(text)
        read = read_verdict(self.slot, verdict)
        if read.error is not None:
            return Parsed(error=read.error)
        if self.slot.kind == "choice":
            return Parsed(value=read.values[0])
        values = [min(max(float(v), 0.0), self.max_points) for v in read.values]
        return Parsed(value=values[0] if self.slot.kind == "score" else (values[0], values[1]))
