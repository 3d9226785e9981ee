"""A template's verdict slot for one question, and the parse that reads a slot verdict.

A template that declares a slot (``slot``, ``slot_fields``, ``slot_suffix``, ``slot_then``,
``slot_decimal``; :mod:`knockout.prompts._templates`) asks for its verdict first; with a backend that
offers a slot mode (:attr:`knockout.judges.Judge.slot_modes`) the request carries the slot and the grade
is read from the backend's verdict (:func:`knockout.judges._slot.read_verdict`), never from the reply's
text.  :func:`resolve_verdict` turns the ``--verdict`` option into the mode a run uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knockout.errors import ConfigError
from knockout.judges._base import Judge
from knockout.judges._slot import MODES, VERDICTS, Slot, read_verdict, score_values
from knockout.prompts._parsers import Parsed
from knockout.prompts._templates import CHOICES, VERDICT_KINDS, PromptTemplate, fmt_points, render


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


#: the backends as ``knockout presets`` and docs/methods.md's table of modes list them: (name, the mode ``--verdict
#: auto`` takes where the template's slot is used, the modes a named ``--verdict`` may ask for)
BACKEND_MODES = (
    ("llamacpp", "expected", "expected, constrained"),
    ("openai (OpenAI API)", "constrained", "expected, constrained"),
    ("openai (vllm, llama-server, llama-cpp-python)", "text", "expected, constrained (slot=json-schema|json-object)"),
    ("openai (another server)", "text", "constrained (slot=json-schema|json-object)"),
    ("anthropic", "constrained", "constrained"),
    ("openai-batch, anthropic-batch", "text", "none"),
)


#: the parsers whose reply is no verdict though their template's kind gives verdicts: a meta-evaluation debater's
#: argument, a BSMEval branch's criteria
NOT_VERDICTS = {"meta-argument": "an argument", "meta-criteria": "criteria", "meta-plan": "criteria"}


def gives_verdict(t: PromptTemplate) -> bool:
    """Whether a template's reply is a verdict (not an examinee's answer, a debater's argument, criteria)."""
    return t.kind in VERDICT_KINDS and t.parser not in NOT_VERDICTS


def slot_words(t: PromptTemplate) -> str:
    """What a template's verdict slot is, in words (``none``: its verdict is read from free text only)."""
    if not gives_verdict(t):
        return f"none ({NOT_VERDICTS.get(t.parser, 'an answer')}, not a verdict)"
    if not t.slot:
        return "none (free text)"
    what = {"score": "grade", "pair": "two grades", "choice": "letter A-D", "criteria": "a grade per criterion"}[t.slot]
    if t.slot_values:  # its own values: a choice's classes, a score's grades
        what = (f"one of {' / '.join(t.slot_values)}" if t.slot == "choice"
                else f"grade {t.slot_values[0]}-{t.slot_values[-1]}")
    return f"{what}, {'reasoning first' if t.slot_reasoning is not None else 'verdict first'}"


def verdict_modes(t: PromptTemplate) -> dict[str, str]:
    """Per backend (:data:`BACKEND_MODES`), how ``--verdict auto`` reads a template's verdicts: its slot in the
    backend's default mode, or ``text`` (without a slot, where the backend's default is text, or where ``auto``
    leaves the template's slot off, ``slot_auto = false``; a named mode then fills the slot where the backend
    offers one)."""
    out: dict[str, str] = {}
    for backend, auto, named in BACKEND_MODES:
        if not t.slot or not gives_verdict(t):
            out[backend] = "text" if gives_verdict(t) else "-"
            continue
        mode = auto if t.slot_auto else "text"
        out[backend] = mode if mode != "text" or named == "none" else "text; the slot when named"
    return out


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


def slot_for(t: PromptTemplate, max_points: float, criteria: Sequence[float] = ()) -> Slot | None:
    """The template's verdict slot for a question worth ``max_points`` (None: the template has none); a criteria
    slot's for the question's ``criteria`` (their points: one field per criterion, none without them)."""
    if not t.slot or (t.slot == "criteria" and not criteria):
        return None
    points = {"max_points": fmt_points(max_points)}
    reasoning = None if t.slot_reasoning is None else render(t.slot_reasoning, points)
    if t.slot == "choice":
        return Slot("choice", tuple(t.slot_fields), t.slot_values or CHOICES, t.slot_suffix, t.slot_then,
                    reasoning=reasoning)
    if t.slot == "criteria":  # one field per criterion, each on its own points (in the template's decimal)
        each = [{**points, "n": str(n), "points": fmt_points(c)} for n, c in enumerate(criteria, 1)]
        field = t.slot_fields[0]
        choices = tuple(tuple(v.replace(".", t.slot_decimal) for v in score_values(c)) for c in criteria)
        return Slot("criteria", tuple(render(field, e) for e in each), choices[0], reasoning=reasoning,
                    choices=choices, suffixes=tuple(render(t.slot_suffix, e) for e in each))
    fields, suffix, then = (tuple(render(f, points) for f in t.slot_fields), render(t.slot_suffix, points),
                            render(t.slot_then, points))
    if t.slot_labels:  # labels (no, yes): each worth its share of the question's points
        return Slot("score", fields, tuple(k for k, _ in t.slot_labels), suffix, then,
                    tuple(v * max_points for _, v in t.slot_labels), reasoning)
    values = t.slot_values or score_values(max_points)  # a template's own grades (1..5) as it writes them
    if t.slot_decimal != "." and not t.slot_values:
        values = tuple(v.replace(".", t.slot_decimal) for v in values)
    kind: Any = t.slot
    return Slot(kind, fields, values, suffix, then, reasoning=reasoning)


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
        return Parsed(value=self.slot.total(read.values, self.max_points))
