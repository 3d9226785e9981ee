"""Parsers that turn a judge's reply into a grade, or say why they cannot.

A parser never guesses: a reply without a recognisable grade, with a grade
outside ``0..max_points``, or on another scale (``Score: 7/10`` when the
maximum is 5) is invalid, and the engine retries it with a format reminder.

Registered parsers (by name, used by prompt presets); other features and plugins add theirs
through the entry-point group ``knockout.parsers``:

* ``score`` — one grade: ``Score: X/max`` and real variants (``Punktzahl: 1,5/2``,
  ``**Score:** 4``, ``Score: [3.5]/5``, ``4 out of 5``, ``[grade] 2 [/grade]``,
  ``<Rating> 4 </Rating>``), the last one in the reply wins.
* ``pairwise`` — two grades: ``Answer 1: X/max Answer 2: Y/max`` (also
  ``Antwort``, ``Translation``, ``Übersetzung``, ``Response``, ``Assistant``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


Parser = Callable[[str, float], Parsed]
# Parsers of other features (side-by-side, meta-evaluation) and of plugins come through entry points.
parsers: Registry[Parser] = Registry("parser", group="knockout.parsers")


def to_float(s: str) -> float:
    """Parse a number with a decimal point or a German decimal comma."""
    return float(s.replace(",", "."))


def _strip_markup(text: str) -> str:
    # A reply that echoes its prompt (Llama/Mistral "[INST] ... [/INST]"): read only what follows.
    if "[/INST]" in text:
        text = text.rsplit("[/INST]", 1)[1]
    # Bold/italic markers and LaTeX-ish boxes do not change the grade.
    text = text.replace("**", "").replace("__", "")
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


@parsers.register("score", "one grade, 'Score: X/max' and variants")
def parse_score(text: str, max_points: float) -> Parsed:
    clean = _strip_markup(text)
    for block in _BLOCKS:
        blocks = [b for b in block.findall(clean) if _IN_BLOCK.search(b)]
        if blocks:
            m = list(_IN_BLOCK.finditer(blocks[-1]))[-1]
            return _check(to_float(m.group(1)), m.group(2), max_points)
    matches = list(_LABELLED.finditer(clean))
    if matches:
        m = matches[-1]
        return _check(to_float(m.group(1)), m.group(2), max_points)
    fractions = [m for m in _FRACTION.finditer(clean) if abs(to_float(m.group(2)) - max_points) < 1e-9]
    if fractions:
        return _check(to_float(fractions[-1].group(1)), None, max_points)
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


@parsers.register("pairwise", "two grades, 'Answer 1: X/max Answer 2: Y/max' and variants")
def parse_pairwise(text: str, max_points: float) -> Parsed:
    clean = _strip_markup(text)
    values: list[float] = []
    for n in (1, 2):
        matches = list(_PAIR[n].finditer(clean))
        if not matches:
            return Parsed(error=f"no grade for answer {n} found in the reply")
        m = matches[-1]
        checked = _check(to_float(m.group(1)), m.group(2), max_points)
        if not checked.ok:
            return Parsed(error=f"answer {n}: {checked.error}")
        values.append(checked.value)
    return Parsed(value=(values[0], values[1]))
