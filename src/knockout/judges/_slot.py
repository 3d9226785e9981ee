"""The verdict slot: where a judge writes its verdict in a form an answer's text cannot reach.

A request may carry a :class:`Slot`: the verdict the reply starts with (``Score: X/5``; a match's
``Answer 1: X/5 Answer 2: Y/5``), its allowed values, and what the judge may write after it (nothing, or
an explanation); or, in a **reasoning-first** slot (:attr:`Slot.reasoning`), the verdict the reply ends with,
after the judge's free reasoning (the papers' ``Explanation: ... Score: X/5``): the reasoning is generated
freely up to a bound, or up to the verdict's field, and the verdict is then written in the slot as above.  The
grade is read from the verdict alone, never from the reasoning.
A backend that offers a slot fills it itself and returns the verdict beside the text
(:class:`knockout.judges.Completion.verdict`), in one of two modes (:data:`MODES`):

* ``expected``: the backend reads the judge's **token probabilities** at the value's position, over
  every allowed value as a token sequence (half points and two-digit maxima included), and returns that
  distribution; the grade is its probability-weighted mean (never the argmax), kept with the
  distribution and its spread.  Where the allowed values carry less than :data:`MIN_MASS` of the
  probability the judge wanted to write something else: the grade falls back to the most probable
  allowed value, and the fallback is recorded and counted.  An ``openai:`` judge reads it from a server's
  ``top_logprobs`` (:mod:`knockout.judges._expected`), where values outside the top 20 are unknown: there too
  little probability is an invalid verdict instead (:func:`invalid`), never a grade.
* ``constrained``: the backend constrains decoding so that only an allowed value can be written there
  (a llama.cpp grammar, a JSON schema for OpenAI structured outputs and vLLM guided decoding, a forced
  tool call with a typed input for Anthropic); the grade is the value written, read only from the server's
  own structured field and only when it is exactly a verdict object of the slot's schema
  (:meth:`Slot.object_error`; a JSON schema carries a :func:`schema_check` the reply must repeat), else an
  invalid verdict (:func:`invalid`), never a grade.

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

    kind: Literal["score", "pair", "choice", "criteria"]
    fields: tuple[str, ...]
    values: tuple[str, ...]
    suffix: str = ""
    then: str = ""
    #: the points of each allowed value where the values are labels (``no``, ``yes``: a template's
    #: ``slot_labels``); empty: the values are the numbers they read as
    points: tuple[float, ...] = ()
    #: a reasoning-first slot: the text the reply begins with (``"Explanation: "``; ``""``: none), after which the
    #: judge reasons freely until it writes the first field (:meth:`reasoning_stop`) or reaches its token bound;
    #: then knockout writes the fields and the judge fills the values.  None: the verdict comes first.
    reasoning: str | None = None
    #: per field, its allowed values where the fields differ (a criteria rubric's criteria, each on its own points:
    #: ``kind="criteria"``); empty: every field takes :attr:`values`
    choices: tuple[tuple[str, ...], ...] = ()
    #: per field, the text after its value where the fields differ (``/2``, ``/1``); empty: :attr:`suffix`
    suffixes: tuple[str, ...] = ()

    def values_at(self, i: int) -> tuple[str, ...]:
        """The allowed values of field ``i``."""
        return self.choices[i] if self.choices else self.values

    def suffix_at(self, i: int) -> str:
        """The text after field ``i``'s value."""
        return self.suffixes[i] if self.suffixes else self.suffix

    def key(self) -> dict[str, Any]:
        """What a cache key holds of the slot (the labels' points only where there are labels: a numeric slot's
        key is what it was before labels existed)."""
        out: dict[str, Any] = {"kind": self.kind, "fields": list(self.fields), "values": list(self.values),
                               "suffix": self.suffix, "then": self.then}
        if self.points:
            out["points"] = list(self.points)
        if self.reasoning is not None:  # a reasoning-first slot (a verdict-first slot's key is as before)
            out["reasoning"] = self.reasoning
        if self.choices:
            out["choices"] = [list(c) for c in self.choices]
        if self.suffixes:
            out["suffixes"] = list(self.suffixes)
        return out

    def reasoning_stop(self) -> str:
        """Where a reasoning-first slot's free reasoning ends: the first line of the first field that is not
        blank (``"Score:"`` for ``" Score: "``, ``"[/reason]"`` for ``" [/reason]\\n[grade] "``); the judge
        writing it hands the verdict to the slot, unless it writes it quoting a text it was shown
        (:mod:`knockout.judges._reasoning`)."""
        return next((line.strip() for line in self.fields[0].splitlines() if line.strip()), "")

    def written(self, chosen: Sequence[str], reasoning: str | None = None, explanation: str | None = None) -> str:
        """The reply as the slot writes it: the reasoning (a reasoning-first slot's, after its
        :attr:`reasoning` text), the verdict (:meth:`text`), and the explanation after ``then``."""
        head = f"{self.reasoning}{(reasoning or '').strip()}" if self.reasoning is not None else ""
        tail = f"{self.then} {explanation}" if self.then and isinstance(explanation, str) else ""
        return head + self.text(chosen) + tail

    def number(self, value: str) -> float:
        """An allowed value's points: a label's (:attr:`points`), else the number it is."""
        return self.points[self.values.index(value)] if self.points else number(value)

    def total(self, values: Sequence[float], max_points: float) -> Any:
        """A read verdict's value as a grading parse makes it: a grade (a score), two (a pair), or a criteria
        rubric's ``{"grade": sum, "criteria": [per criterion]}`` (the total computed, never read), each within
        its points."""
        if self.kind == "criteria":
            awarded = [min(max(float(v), 0.0), number(c[-1])) for v, c in zip(values, self.choices, strict=True)]
            return {"grade": min(sum(awarded), max_points), "criteria": awarded}
        clipped = [min(max(float(v), 0.0), max_points) for v in values]
        return clipped[0] if self.kind == "score" else (clipped[0], clipped[1])

    def numeric(self) -> bool:
        return self.kind != "choice"

    def text(self, chosen: Sequence[str]) -> str:
        """The verdict as written: each field, its value and the suffix."""
        return "".join(f"{f}{v}{self.suffix_at(i)}" for i, (f, v) in enumerate(zip(self.fields, chosen, strict=True)))

    # -- constrained decoding: what each backend is given ------------------------------------------------
    def gbnf(self) -> str:
        """A llama.cpp grammar: (a reasoning-first slot: its :attr:`reasoning` text and free reasoning) the
        verdict, then (with ``then``) ``then`` and one free line.  The
        embedded judge runs a reasoning-first grammar in two steps: the reasoning generated freely up to
        :meth:`reasoning_stop` or its token bound, then the value under the grammar of the allowed values."""
        n = len(self.choices) or 1
        alts = [" | ".join(json.dumps(v) for v in sorted(self.values_at(i), key=len, reverse=True)) for i in range(n)]
        value = ["value" if n == 1 else f"value{i + 1}" for i in range(n)]
        parts = " ".join(f"{json.dumps(f)} {value[min(i, n - 1)]}" + (f" {json.dumps(self.suffix_at(i))}"
                                                                       if self.suffix_at(i) else "")
                         for i, f in enumerate(self.fields))
        head = "" if self.reasoning is None else (f"{json.dumps(self.reasoning)} reasoning " if self.reasoning
                                                  else "reasoning ")
        root = f"root ::= {head}{parts}" + (f" {json.dumps(self.then)} line" if self.then else "")
        rules = f"{root}\n" + "".join(f"{v} ::= {a}\n" for v, a in zip(value, alts, strict=True))
        rules += "line ::= [^\\n]{0,1200}\n"
        if self.reasoning is not None:
            rules += "reasoning ::= [^\\x00]*\n"
        return rules

    def field_names(self) -> list[str]:
        """The JSON keys of the fields (structured outputs, tool inputs): ``score``; ``answer_1``, ``answer_2``;
        ``verdict``."""
        if self.kind == "pair":
            return [f"answer_{i}" for i in range(1, len(self.fields) + 1)]
        if self.kind == "criteria":
            return [f"criterion_{i}" for i in range(1, len(self.fields) + 1)]
        return ["verdict" if self.kind == "choice" else "score"]

    def json_schema(self, check: str | None = None) -> dict[str, Any]:
        """The JSON schema of the verdict object: each field one of the allowed values (as strings, so that
        ``4.5`` is written as it is allowed), then ``explanation`` when the judge explains (after the verdict:
        structured outputs are written in the schema's order); with ``check`` (:func:`schema_check`) first a
        :data:`CHECK` field whose only allowed value is ``check``, which the reply must repeat."""
        props: dict[str, Any] = {}
        if check is not None:
            props[CHECK] = {"type": "string", "enum": [check]}
        if self.reasoning is not None:  # the reasoning before the verdict: written first, in the schema's order
            props[REASONING] = {"type": "string"}
        for i, name in enumerate(self.field_names()):
            props[name] = {"type": "string", "enum": list(self.values_at(i))}
        if self.then:
            props["explanation"] = {"type": "string"}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    def object_error(self, obj: Any, check: str | None = None) -> str | None:
        """Why ``obj`` (a structured output or a tool input, as :func:`parse_object` read it) is not a verdict
        object of this slot's schema, or None when it is: exactly the schema's keys (none missing, none
        other), each field one of the allowed values (a number only where it equals one exactly: ``2`` for
        ``"2"``, never ``2.4`` for ``"2.5"``), a string explanation, and with ``check`` the schema check's
        value.  Nothing is rounded in or skipped: a verdict that is not exactly the schema's is invalid."""
        if check is not None and (not isinstance(obj, dict) or obj.get(CHECK) != check):
            got = "no JSON object" if not isinstance(obj, dict) else (
                f"its '{CHECK}' {str(obj[CHECK])[:40]!r}" if CHECK in obj else f"no '{CHECK}'")
            return f"{SCHEMA_IGNORED}: the reply has {got}, not the value the request's schema allows"
        if not isinstance(obj, dict):
            return "the verdict is not a JSON object"
        if isinstance(obj, _Object) and obj.duplicates:
            return f"the verdict object repeats the key(s) {sorted(obj.duplicates)}"
        keys = [*([CHECK] if check is not None else []), *([REASONING] if self.reasoning is not None else []),
                *self.field_names(), *(["explanation"] if self.then else [])]
        extra = sorted(str(k) for k in obj if k not in keys)
        if extra:
            return f"the verdict object has key(s) {extra} its schema does not allow"
        missing = [k for k in keys if k not in obj]
        if missing:
            return f"the verdict object lacks the key(s) {missing} its schema requires"
        for i, name in enumerate(self.field_names()):
            if self._allowed(obj[name], i) is None:
                return f"the verdict's {name} {str(obj[name])[:40]!r} is not one of the allowed values"
        if self.then and not isinstance(obj["explanation"], str):
            return "the verdict's explanation is not a string"
        if self.reasoning is not None and not isinstance(obj[REASONING], str):
            return "the verdict's reasoning is not a string"
        return None

    def _allowed(self, v: Any, i: int = 0) -> str | None:
        """The allowed value of field ``i`` that ``v`` is: the string itself, or the one value a number equals
        exactly."""
        allowed = self.values_at(i)
        if isinstance(v, str):
            return v if v in allowed else None
        if (self.numeric() and not self.points and isinstance(v, int | float) and not isinstance(v, bool)
                and math.isfinite(v)):
            hits = [a for a in allowed if self.number(a) == v]
            return hits[0] if len(hits) == 1 else None
        return None

    def from_json(self, obj: Any, check: str | None = None) -> list[str] | None:
        """The values of a verdict object (a structured output or a tool input), or None when it is not
        exactly one of this slot's (:meth:`object_error`)."""
        if self.object_error(obj, check) is not None:
            return None
        return [v for v in (self._allowed(obj[name], i) for i, name in enumerate(self.field_names())) if v is not None]


#: the JSON key of the schema check (:func:`schema_check`)
CHECK = "check"
#: the JSON key of a reasoning-first slot's reasoning (before the verdict's fields)
REASONING = "reasoning"
#: what an invalid verdict says when the reply shows that the server did not decode under the schema
SCHEMA_IGNORED = "the server did not honour the verdict schema"


def schema_check(messages: Any, slot: Slot) -> str:
    """The value a request's verdict schema allows in its :data:`CHECK` field: a digest of the request (its
    messages and slot).  The judge never sees it in its prompt, and an answer cannot hold the digest of a
    prompt that holds the answer, so a reply that carries it was written under the schema; a server that
    ignores the schema (the model writing free text, or echoing a ``{"score": ...}`` found in an answer)
    cannot write it."""
    import hashlib

    text = json.dumps([messages, slot.key()], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


class _Object(dict[str, Any]):
    """A JSON object as :func:`parse_object` reads it: the keys it repeated in ``duplicates``."""

    duplicates: frozenset[str] = frozenset()


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        repeated: set[str] = set()
        for k, _ in pairs:
            (repeated if k in seen else seen).add(k)
        obj.duplicates = frozenset(repeated)
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_object(text: str) -> tuple[Any, str | None]:
    """``text`` read as exactly one JSON value (white space around it aside): (the value, None), or (None,
    why not).  Objects keep the keys they repeat (:meth:`Slot.object_error` refuses them: a reader taking the
    first or the last would be guessing); NaN and Infinity are not JSON.  Nothing is searched for inside a
    text: a reply with anything before or after its object is not one."""
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant), None
    except (ValueError, RecursionError) as exc:
        return None, f"the reply is not one JSON object ({str(exc)[:80]})"


def constrained(slot: Slot, chosen: Sequence[str], note: str | None = None) -> dict[str, Any]:
    """The verdict a backend returns in the ``constrained`` mode: the values written."""
    out: dict[str, Any] = {"mode": "constrained", "chosen": list(chosen)}
    if note:
        out["note"] = note
    return out


def invalid(why: str, mode: str = "constrained") -> dict[str, Any]:
    """The verdict a backend returns when it cannot read one: in the ``constrained`` mode, the server's structured
    output is not exactly a verdict object of the slot's schema (:meth:`Slot.object_error`); in the ``expected``
    mode over a server (:mod:`knockout.judges._expected`), the server gave no token probabilities at the value or
    the allowed values carry too little of them.  Why, stored with the reply and read as an invalid verdict (asked
    again, then recorded invalid), never a grade."""
    return {"mode": mode, "invalid": why}


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
    if "invalid" in verdict:  # the backend found the server's structured output not the schema's (invalid())
        return SlotVerdict(error=str(verdict["invalid"]) or "an invalid slot verdict")
    chosen = verdict.get("chosen")
    n = len(slot.fields)
    if (not isinstance(chosen, list) or len(chosen) != n
            or any(c not in slot.values_at(i) for i, c in enumerate(chosen))):
        return SlotVerdict(error=f"the slot verdict's values {chosen!r} are not {n} of the allowed values")
    mode = verdict.get("mode")
    if mode == "constrained":
        vals = tuple(slot.number(c) if slot.numeric() else c for c in chosen)
        return SlotVerdict(vals, (0.0,) * n, (1.0,) * n)
    if mode != "expected":
        return SlotVerdict(error=f"unknown slot mode {mode!r}")
    probs = verdict.get("probs")
    if (not isinstance(probs, list) or len(probs) != n
            or any(not isinstance(ps, list) or len(ps) != len(slot.values_at(i)) for i, ps in enumerate(probs))
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
            values.append(slot.number(chosen[i]) if slot.numeric() else chosen[i])
            spread.append(0.0)
            continue
        if not slot.numeric():
            values.append(slot.values[max(range(len(ps)), key=ps.__getitem__)])
            spread.append(0.0)
            continue
        nums = [slot.number(v) for v in slot.values_at(i)]
        mean = sum(p * x for p, x in zip(ps, nums, strict=True)) / total
        var = sum(p * (x - mean) ** 2 for p, x in zip(ps, nums, strict=True)) / total
        values.append(mean)
        spread.append(math.sqrt(max(var, 0.0)))
    return SlotVerdict(tuple(values), tuple(spread), tuple(mass), fallback)


def normalised(slot: Slot, verdict: Any) -> list[list[float]] | None:
    """Per field, the probability of each allowed value (in :attr:`Slot.values` order) normalised over the allowed
    values, from a verdict read from token probabilities (the ``expected`` mode); None for any other verdict, one
    that :func:`read_verdict` refuses, or one whose allowed values carry less than :data:`MIN_MASS`."""
    if not isinstance(verdict, dict) or verdict.get("mode") != "expected":
        return None
    read = read_verdict(slot, verdict)
    if read.error is not None or read.fallback is not None:
        return None
    return [[float(p) / m for p in ps] for ps, m in zip(verdict["probs"], read.mass, strict=True)]


def first_better(slot: Slot, verdict: Any) -> float | None:
    """The probability that the answer shown first is the better one, from a verdict read from token probabilities
    (the ``expected`` mode); None for any other verdict, or where the allowed values carry less than
    :data:`MIN_MASS` of the probability (the judge wanted to write something else).

    A choice slot (``A``, ``B``, ``C``, ``D``): ``(P(A) + (P(C) + P(D)) / 2) / (P(A) + P(B) + P(C) + P(D))`` -- a
    preference among the allowed letters, as alpaca_eval's ``logprob_parser`` reads one (the probability of the
    letter for the first output over the letters allowed), the two ties (both good, both bad) counted half each
    way.  A pair slot (two grades): ``P(S1 > S2) + P(S1 = S2) / 2`` with ``S1`` the first field's distribution and
    ``S2`` the second's (read after the first's most probable value: :class:`Slot`), each normalised over the
    allowed values and taken as independent."""
    probs = normalised(slot, verdict) if slot.kind != "score" else None
    if probs is None:
        return None
    if slot.kind == "choice":
        p = dict(zip(slot.values, probs[0], strict=True))
        return min(max(p.get("A", 0.0) + (p.get("C", 0.0) + p.get("D", 0.0)) / 2, 0.0), 1.0)
    nums = [slot.number(v) for v in slot.values]
    above = sum(p1 * p2 * (1.0 if x1 > x2 else 0.5 if x1 == x2 else 0.0)
                for x1, p1 in zip(nums, probs[0], strict=True) for x2, p2 in zip(nums, probs[1], strict=True))
    return min(max(above, 0.0), 1.0)


def verdict_spread(details: dict[str, Any], max_points: float) -> float | None:
    """The standard deviation (points) of the judge's distribution over the grades behind an individual grade
    read from a verdict slot's token probabilities (its last attempt's ``verdict``); None without one.  A criteria
    grade (``details["criteria"]``: a distribution per criterion, each on its own points) is their sum: its
    spread is that of a sum of the criteria's distributions taken as independent."""
    attempts = details.get("attempts") or []
    verdict = attempts[-1].get("verdict") if attempts and isinstance(attempts[-1], dict) else None
    if not isinstance(verdict, dict) or verdict.get("mode") != "expected":
        return None
    criteria = details.get("criteria")
    points = ([float(c["points"]) for c in criteria if isinstance(c, dict) and "points" in c]
              if isinstance(criteria, list) else [])
    chosen = verdict.get("chosen")
    comma = any(isinstance(c, str) and "," in c for c in chosen) if isinstance(chosen, list) else False

    def allowed(top: float) -> tuple[str, ...]:
        return tuple(v.replace(".", ",") for v in score_values(top)) if comma else score_values(top)

    if points and isinstance(criteria, list) and len(points) == len(criteria):
        choices = tuple(allowed(p) for p in points)
        slot = Slot("criteria", ("",) * len(points), choices[0], choices=choices)
    else:
        slot = Slot("score", ("",), allowed(max_points))
    read = read_verdict(slot, verdict)
    return None if read.error is not None or read.fallback else math.sqrt(sum(sd * sd for sd in read.spread))
