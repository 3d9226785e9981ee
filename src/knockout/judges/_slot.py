"""The verdict slot: where a judge writes its verdict in a form an answer's text cannot reach.

A request may carry a :class:`Slot`: the verdict the reply starts with (``Score: X/5``; a match's
``Answer 1: X/5 Answer 2: Y/5``), its allowed values, and what the judge may write after it (nothing, or
an explanation).  A backend that offers a slot fills it itself and returns the verdict beside the text
(:class:`knockout.judges.Completion.verdict`), in one of two modes (:data:`MODES`):

* ``expected``: the backend reads the judge's **token probabilities** at the value's position, over
  every allowed value as a token sequence (half points and two-digit maxima included), and returns that
  distribution; the grade is its probability-weighted mean (never the argmax), kept with the
  distribution and its spread.  Where the allowed values carry less than :data:`MIN_MASS` of the
  probability the judge wanted to write something else: the grade falls back to the most probable
  allowed value, and the fallback is recorded and counted.
* ``constrained``: the backend constrains decoding so that only an allowed value can be written there
  (a llama.cpp grammar, a JSON schema for OpenAI structured outputs and vLLM guided decoding, a forced
  tool call with a typed input for Anthropic); the grade is the value written.

Either way the verdict is written by the judge in a position the prompt's data cannot fill: knockout
writes the slot's field name itself and reads only the value the judge put after it, so an answer that
holds ``Score: 5/5`` cannot plant it.  A backend without a slot (:attr:`Judge.slot_modes` empty) gets the
template's free-text format, read by the copy-checking parsers (:mod:`knockout.prompts._parsers`), and
the run says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: The slot modes, best first: what ``--verdict auto`` takes of what a backend offers.
MODES = ("expected", "constrained")
#: Verdict options (``--verdict``): ``auto`` (the backend's best slot mode, else text), a mode, or ``text``.
VERDICTS = ("auto", *MODES, "text")
#: The share of the probability the allowed values must carry for the expected grade to be read.
MIN_MASS = 0.5


def score_values(max_points: float) -> tuple[str, ...]:
    """The grades a judge may give on ``0..max_points``: half points up to 20 points (the papers' prompts
    allow half points), whole points above (an MT score of 0-100)."""
    step = 0.5 if max_points <= 20 else 1.0
    n = math.floor(max_points / step + 1e-9)
    values = [_num(i * step) for i in range(n + 1)]
    top = _num(max_points)
    if values[-1] != top:  # a maximum off the step (2.25): itself allowed
        values.append(top)
    return tuple(values)


def _num(x: float) -> str:
    return f"{x:g}"


def number(value: str) -> float:
    """An allowed value as a number (``4,5`` in a German slot is 4.5)."""
    return float(value.replace(",", "."))


@dataclass(frozen=True)
class Slot:
    """A verdict the judge writes first: each of ``fields`` (``"Score: "``; ``"Answer 1: "``,
    ``" Answer 2: "``) followed by one of ``values`` and ``suffix`` (``"/5"``); then ``then`` (``"\\n
    Explanation:"``), after which the judge writes freely (nothing: the reply ends with the verdict)."""

    kind: Literal["score", "pair", "choice"]
    fields: tuple[str, ...]
    values: tuple[str, ...]
    suffix: str = ""
    then: str = ""

    def key(self) -> dict[str, Any]:
        """What a cache key holds of the slot."""
        return {"kind": self.kind, "fields": list(self.fields), "values": list(self.values), "suffix": self.suffix,
                "then": self.then}

    def key_json(self) -> str:
        return json.dumps(self.key(), sort_keys=True, ensure_ascii=False)

    def numeric(self) -> bool:
        return self.kind != "choice"

    def text(self, chosen: Sequence[str]) -> str:
        """The verdict as written: each field, its value and the suffix."""
        return "".join(f"{f}{v}{self.suffix}" for f, v in zip(self.fields, chosen, strict=True))

    # -- constrained decoding: what each backend is given ------------------------------------------------
    def gbnf(self) -> str:
        """A llama.cpp grammar: the verdict, then (with ``then``) ``then`` and one free line."""
        alts = " | ".join(json.dumps(v) for v in sorted(self.values, key=len, reverse=True))
        parts = " ".join(f"{json.dumps(f)} value {json.dumps(self.suffix)}" if self.suffix else
                         f"{json.dumps(f)} value" for f in self.fields)
        root = f"root ::= {parts}" + (f" {json.dumps(self.then)} line" if self.then else "")
        return f"{root}\nvalue ::= {alts}\nline ::= [^\\n]{{0,1200}}\n"

    def field_names(self) -> list[str]:
        """The JSON keys of the fields (structured outputs, tool inputs): ``score``; ``answer_1``, ``answer_2``;
        ``verdict``."""
        if self.kind == "pair":
            return [f"answer_{i}" for i in range(1, len(self.fields) + 1)]
        return ["verdict" if self.kind == "choice" else "score"]

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the verdict object: each field one of the allowed values (as strings, so that
        ``4.5`` is written as it is allowed), then ``explanation`` when the judge explains (after the verdict:
        structured outputs are written in the schema's order)."""
        props: dict[str, Any] = {}
        for name in self.field_names():
            props[name] = {"type": "string", "enum": list(self.values)}
        if self.then:
            props["explanation"] = {"type": "string"}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    def from_json(self, obj: Any) -> list[str] | None:
        """The values of a verdict object (a structured output or a tool input), or None when it is not one
        of this slot's."""
        if not isinstance(obj, dict):
            return None
        out = []
        for name in self.field_names():
            v = obj.get(name)
            if isinstance(v, int | float) and not isinstance(v, bool):
                v = _num(float(v))
                if "," in "".join(self.values):
                    v = v.replace(".", ",")
            if not isinstance(v, str) or v not in self.values:
                return None
            out.append(v)
        return out


def constrained(slot: Slot, chosen: Sequence[str], note: str | None = None) -> dict[str, Any]:
    """The verdict a backend returns in the ``constrained`` mode: the values written."""
    out: dict[str, Any] = {"mode": "constrained", "chosen": list(chosen)}
    if note:
        out["note"] = note
    return out


def distribution(slot: Slot, probs: Sequence[Sequence[float]], chosen: Sequence[str]) -> dict[str, Any]:
    """The verdict a backend returns in the ``expected`` mode: per field the probability of each allowed value
    (in :attr:`Slot.values` order, as the judge's own, unnormalised) and the value written."""
    return {"mode": "expected", "probs": [[float(p) for p in ps] for ps in probs], "chosen": list(chosen)}


@dataclass(frozen=True)
class SlotVerdict:
    """What a slot verdict says: ``values`` (per field: the expected grade, or the value written; a choice's
    letter), ``spread`` (per field: the standard deviation of the distribution, 0 without one), ``mass``
    (per field: the allowed values' share of the probability), ``fallback`` (why a field fell back to the
    most probable value), or ``error``."""

    values: tuple[Any, ...] = ()
    spread: tuple[float, ...] = ()
    mass: tuple[float, ...] = ()
    fallback: str | None = None
    error: str | None = None


def read_verdict(slot: Slot, verdict: Any) -> SlotVerdict:
    """Check a backend's (or a stored) slot verdict against ``slot`` and read it: a verdict of the wrong
    shape, with a value that is not allowed or with probabilities that are not probabilities is an error,
    never a grade."""
    if not isinstance(verdict, dict):
        return SlotVerdict(error="the slot verdict is not an object")
    chosen = verdict.get("chosen")
    n = len(slot.fields)
    if not isinstance(chosen, list) or len(chosen) != n or any(c not in slot.values for c in chosen):
        return SlotVerdict(error=f"the slot verdict's values {chosen!r} are not {n} of the allowed values")
    mode = verdict.get("mode")
    if mode == "constrained":
        vals = tuple(number(c) if slot.numeric() else c for c in chosen)
        return SlotVerdict(vals, (0.0,) * n, (1.0,) * n)
    if mode != "expected":
        return SlotVerdict(error=f"unknown slot mode {mode!r}")
    probs = verdict.get("probs")
    if (not isinstance(probs, list) or len(probs) != n
            or any(not isinstance(ps, list) or len(ps) != len(slot.values) for ps in probs)
            or any(type(p) not in (float, int) or not math.isfinite(p) or p < 0 or p > 1 + 1e-6
                   for ps in probs for p in ps)):
        return SlotVerdict(error="the slot verdict's probabilities are not one distribution per field")
    values: list[Any] = []
    spread: list[float] = []
    mass: list[float] = []
    fallback = None
    for i, ps in enumerate(probs):
        total = float(sum(ps))
        mass.append(total)
        if total < MIN_MASS:  # the judge wanted to write something else: the most probable allowed value
            fallback = f"field {i + 1}: the allowed values carry {total:.2f} of the probability (< {MIN_MASS})"
            values.append(number(chosen[i]) if slot.numeric() else chosen[i])
            spread.append(0.0)
            continue
        if not slot.numeric():
            values.append(slot.values[max(range(len(ps)), key=ps.__getitem__)])
            spread.append(0.0)
            continue
        nums = [number(v) for v in slot.values]
        mean = sum(p * x for p, x in zip(ps, nums, strict=True)) / total
        var = sum(p * (x - mean) ** 2 for p, x in zip(ps, nums, strict=True)) / total
        values.append(mean)
        spread.append(math.sqrt(max(var, 0.0)))
    return SlotVerdict(tuple(values), tuple(spread), tuple(mass), fallback)


def verdict_spread(details: dict[str, Any], max_points: float) -> float | None:
    """The standard deviation (points) of the judge's distribution over the grades behind an individual grade
    read from a verdict slot's token probabilities (its last attempt's ``verdict``); None without one."""
    attempts = details.get("attempts") or []
    verdict = attempts[-1].get("verdict") if attempts and isinstance(attempts[-1], dict) else None
    if not isinstance(verdict, dict) or verdict.get("mode") != "expected":
        return None
    values = score_values(max_points)
    chosen = verdict.get("chosen")
    if isinstance(chosen, list) and chosen and isinstance(chosen[0], str) and "," in chosen[0]:
        values = tuple(v.replace(".", ",") for v in values)
    read = read_verdict(Slot("score", ("",), values), verdict)
    return None if read.error is not None or read.fallback else read.spread[0]
