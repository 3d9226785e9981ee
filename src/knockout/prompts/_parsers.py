"""Parsers that turn a judge's reply into a grade, or say why they cannot.

A parser never guesses: a reply without a recognisable grade, with a grade
outside ``0..max_points``, or on another scale (``Score: 7/10`` when the
maximum is 5) is invalid, and the engine retries it with a format reminder.

A parser reads only the judge's own verdict: the **last** verdict in the reply,
in any form it accepts, that is not a copy of text the judge was shown.  The
parse closure of a request passes the texts shown as data (``shown``: the
answers, question, reference, responses, assessments); a verdict whose text
also stands in one of them (compared without case, whitespace and ``*_``
markup) is one the judge copied from an answer, and is never read, even when it
is the only one (the reply is then invalid and asked again).

Registered parsers (by name, used by prompt presets; other features and plugins add theirs
through the entry-point group ``knockout.parsers``), each called as ``parser(text, max_points,
shown=texts)`` (a plugin parser without a ``shown`` parameter is called without it):

* ``score`` — one grade: ``Score: X/max`` and real variants (``Punktzahl: 1,5/2``,
  ``**Score:** 4``, ``Score: [3.5]/5``, ``[grade] 2 [/grade]``,
  ``<Rating> 4 </Rating>``); the last one in the reply wins.  A bare fraction
  on the question's scale (``4 out of 5``) is read only when there is none.
* ``pairwise`` — two grades: ``Answer 1: X/max Answer 2: Y/max`` (also
  ``Antwort``, ``Translation``, ``Übersetzung``, ``Response``, ``Assistant``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from knockout._registry import Registry

NUM = r"(\d+(?:[.,]\d+)?)"
_DENOM = r"(?:\s*(?:/|out\s+of|of|von|aus)\s*\[?\s*" + NUM + r"\s*\]?)?"


@dataclass(frozen=True)
class Parsed:
    """A parse outcome: ``value`` when valid, else ``error`` says what was wrong."""

    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Parser(Protocol):
    """``parser(reply, max_points, shown=texts)``: ``shown`` are the texts the judge was shown as data."""

    def __call__(self, text: str, max_points: float, /, *, shown: Sequence[str] = ()) -> Parsed: ...


# Parsers of other features (side-by-side, meta-evaluation) and of plugins come through entry points.
parsers: Registry[Parser] = Registry("parser", group="knockout.parsers")
COPIED = "every verdict in the reply is copied from the text being judged, none is the judge's own"


def to_float(s: str) -> float:
    """Parse a number with a decimal point or a German decimal comma."""
    return float(s.replace(",", "."))


def _squash(text: str) -> str:
    return re.sub(r"[\s*_`]+", "", text.lower())


class Copies:
    """Tells whether a piece of a reply stands in one of the texts shown to the judge."""

    def __init__(self, shown: Iterable[str] = ()) -> None:
        self._texts = [t for t in (_squash(s) for s in shown) if t]

    def __call__(self, fragment: str) -> bool:
        f = _squash(fragment)
        return bool(f) and any(f in t for t in self._texts)

    def own(self, matches: Iterable[re.Match[str]]) -> list[re.Match[str]]:
        """The matches that are not copies, in reply order."""
        return [m for m in matches if not self(m.group(0))]


def unecho(text: str, copies: Copies) -> str:
    """A reply that echoes its prompt (Llama/Mistral ``[INST] ... [/INST]``): only what follows,
    unless the marker is one the judge copied from an answer."""
    if "[/INST]" in text and not copies("[/INST]"):
        return text.rsplit("[/INST]", 1)[1]
    return text


def _strip_markup(text: str, copies: Copies) -> str:
    # Bold/italic markers and LaTeX-ish boxes do not change the grade.
    text = unecho(text, copies).replace("**", "").replace("__", "")
    return re.sub(r"\\boxed\{([^}]*)\}", r"\1", text)


# Tagged blocks: the last number inside <Rating>...</Rating>, [grade]...[/grade], <score>...</score>.
_BLOCKS = [
    re.compile(r"\[grade\](.*?)(?:\[/grade\]|\Z)", re.I | re.S),
    re.compile(r"<rating>(.*?)(?:</rat\w*>|\Z)", re.I | re.S),
    re.compile(r"<score>(.*?)</score>", re.I | re.S),
]
_IN_BLOCK = re.compile(NUM + _DENOM)
_LABELLED = re.compile(
    r"\b(?:score|grade|punktzahl|punkte|bewertung|rating|note)\s*(?:\(\s*[^)]{0,20}\))?\s*"
    r"(?:[:=]|\bof\b|\bis\b|\bto(?:\s+an?)?\b)\s*\[?\s*\(?\s*"
    + NUM
    + r"\s*\)?\s*\]?"
    + _DENOM,
    re.I,
)
_FRACTION = re.compile(NUM + r"\s*(?:/|out\s+of|von)\s*" + NUM)


def _check(value: float, denom: str | None, max_points: float) -> Parsed:
    if denom is not None and abs(to_float(denom) - max_points) > 1e-9:
        return Parsed(error=f"grade {value:g}/{to_float(denom):g} is not on the 0..{max_points:g} scale")
    if value < 0 or value > max_points + 1e-9:
        return Parsed(error=f"grade {value:g} is outside 0..{max_points:g}")
    return Parsed(value=value)


def score_verdicts(clean: str) -> list[tuple[re.Match[str], str, str | None]]:
    """Every explicit grade in a reply, in reply order: (match, number, denominator); tag blocks
    (their last number) and labels alike."""
    found: list[tuple[re.Match[str], str, str | None]] = []
    for block in _BLOCKS:
        for m in block.finditer(clean):
            inside = list(_IN_BLOCK.finditer(m.group(1)))
            if inside:
                found.append((m, inside[-1].group(1), inside[-1].group(2)))
    found += [(m, m.group(1), m.group(2)) for m in _LABELLED.finditer(clean)]
    return sorted(found, key=lambda v: (v[0].start(), v[0].end()))


@parsers.register("score", "one grade, 'Score: X/max' and variants; the last one not copied from the answer")
def parse_score(text: str, max_points: float, shown: Sequence[str] = ()) -> Parsed:
    copies = Copies(shown)
    clean = _strip_markup(text, copies)
    every = score_verdicts(clean)
    own = [v for v in every if not copies(v[0].group(0))]
    if own:
        _, number, denom = own[-1]
        return _check(to_float(number), denom, max_points)
    fractions = [m for m in copies.own(_FRACTION.finditer(clean)) if abs(to_float(m.group(2)) - max_points) < 1e-9]
    if fractions:
        return _check(to_float(fractions[-1].group(1)), None, max_points)
    if every:
        return Parsed(error=COPIED)
    if re.search(r"\[score\]|\[grade\]|<grade>", clean, re.I):
        return Parsed(error="the reply repeats the format placeholder instead of a grade")
    return Parsed(error="no grade found in the reply")


_PAIR_LABEL = r"(?:answer|antwort|translation|übersetzung|uebersetzung|response|assistant)"


def _pair_pattern(n: int) -> re.Pattern[str]:
    return re.compile(
        r"\b" + _PAIR_LABEL + r"\s*" + str(n) + r"\s*(?:score|grade|punktzahl)?\s*[:=]\s*\[?\s*" + NUM + r"\s*\]?"
        + _DENOM,
        re.I,
    )


_PAIR = {1: _pair_pattern(1), 2: _pair_pattern(2)}


@parsers.register("pairwise", "two grades, 'Answer 1: X/max Answer 2: Y/max'; the last ones not copied")
def parse_pairwise(text: str, max_points: float, shown: Sequence[str] = ()) -> Parsed:
    copies = Copies(shown)
    clean = _strip_markup(text, copies)
    values: list[float] = []
    for n in (1, 2):
        every = list(_PAIR[n].finditer(clean))
        matches = copies.own(every)
        if not matches:
            return Parsed(error=f"answer {n}: {COPIED}" if every else f"no grade for answer {n} found in the reply")
        m = matches[-1]
        checked = _check(to_float(m.group(1)), m.group(2), max_points)
        if not checked.ok:
            return Parsed(error=f"answer {n}: {checked.error}")
        values.append(checked.value)
    return Parsed(value=(values[0], values[1]))
