"""The free-text verdict parsers: a judge's reply read into a grade, or why it cannot be.

A parser never guesses: a reply without a recognisable grade, with a grade
outside ``0..max_points`` (a sign or an exponent is read as written: ``-1/5``
and ``1e3/5`` are invalid, never 1), or on another scale (``Score: 7/10`` when
the maximum is 5) is invalid, and the engine retries it with a format reminder.

**The path of templates without a verdict slot.**  Every preset that produces a verdict declares a slot
(:mod:`knockout.prompts._slots`, docs/methods.md#the-verdict-slot); these parsers read the free text where no slot
is filled: a user's template without one, a backend without slot modes (batch judges, another server), a run with
``--verdict text``, and a template whose slot ``--verdict auto`` leaves off (``slot_auto = false``: among the
presets, only two meta-evaluation families', which the meta feature's own parsers read).  A run that
reads them says ``verdict: text``.

A parser reads only the judge's own verdict (:mod:`knockout.prompts._copies`: the reply and the shown texts
normalised alike, never across a marker, copied by position not by value, the last own verdict).

Registered parsers (by name, used by prompt presets; other features and plugins add theirs
through the entry-point group ``knockout.parsers``), each called as ``parser(text, max_points,
shown=texts)`` (a plugin parser without a ``shown`` parameter is called without it):

* ``score`` — one grade: ``Score: X/max`` and real variants (``Punktzahl: 1,5/2``,
  ``**Score:** 4``, ``Score: [3.5]/5``, ``[grade] 2 [/grade]``,
  ``<Rating> 4 </Rating>``); the last one in the reply wins.  A bare fraction
  on the question's scale (``4 out of 5``) is read only when there is none.
* ``criteria`` — one verdict per criterion of the question's criteria rubric, ``Criterion N: X/P``
  (also ``Kriterium``); every criterion needs its own verdict on ``0..P`` (the last one not copied), a
  missing, unreadable or out-of-range one, or one for a criterion the rubric does not have, makes the
  whole reply invalid (asked again, then counted invalid); the grade is the sum.  Called with
  ``criteria=`` the points of each criterion (:func:`knockout.prompts._render.own_verdict`).
* ``pairwise`` — two grades: ``Answer 1: X/max Answer 2: Y/max`` (also
  ``Antwort``, ``Translation``, ``Übersetzung``, ``Response``, ``Assistant``);
  a pair written together is read (and checked for copies) as one verdict.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from knockout._registry import Registry
from knockout.prompts._copies import _FINAL, COPIED, ECHO, Copies, reply_text

#: A number as written: a sign, a decimal point or comma, an exponent are part of it; glued to a letter or
#: digit on either side it is not a number.
NUM = r"(?<![\w.,])([-+\u2212]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?)(?![\w])"
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


# Parsers of other features (side-by-side, meta-evaluation, SciEx): lazy entries added in prompts/__init__;
# of plugins: through entry points.
parsers: Registry[Parser] = Registry("parser", group="knockout.parsers")


def to_float(s: str) -> float:
    """A number as written (:data:`NUM`): a decimal point or a German decimal comma, a sign, an exponent;
    ``1.2.3`` raises ValueError."""
    s = s.replace("\u2212", "-")
    mantissa = s.split("e")[0].split("E")[0]
    if mantissa.count(".") + mantissa.count(",") > 1:
        raise ValueError(f"not one number: {s!r}")
    return float(s.replace(",", "."))


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


def _check(number: str | float, denom: str | None, max_points: float) -> Parsed:
    try:
        value = to_float(number) if isinstance(number, str) else number
        d = None if denom is None else to_float(denom)
    except ValueError:
        return Parsed(error=f"{number!s}/{denom} is not a number")
    if d is not None and abs(d - max_points) > 1e-9:
        return Parsed(error=f"grade {value:g}/{d:g} is not on the 0..{max_points:g} scale")
    if math.isnan(value) or value < 0 or value > max_points + 1e-9:  # NaN, negative, too high
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
    clean = reply_text(text, copies)
    if copies.echo(clean):
        return Parsed(error=ECHO)
    every = score_verdicts(clean)
    pick = copies.pick([v[0] for v in every])
    if pick is not None:
        _, number, denom = next(v for v in every if v[0] is pick)
        return _check(number, denom, max_points)
    fractions = []
    for m in _FRACTION.finditer(clean):
        try:
            on_scale = abs(to_float(m.group(2)) - max_points) < 1e-9
        except ValueError:
            on_scale = False
        if on_scale:
            fractions.append(m)
    fraction = copies.pick(fractions)
    if fraction is not None:
        return _check(fraction.group(1), None, max_points)
    if every or fractions:
        return Parsed(error=COPIED)
    if re.search(r"\[score\]|\[grade\]|<grade>", clean, re.I):
        return Parsed(error="the reply repeats the format placeholder instead of a grade")
    return Parsed(error="no grade found in the reply")


_CORRECT = re.compile(r"\b(?:correct|richtig)\s*[:=]\s*\[?\s*\**(yes|no|ja|nein)\b", re.I)


@parsers.register("correct", "one verdict 'Correct: yes|no' (yes: max points, no: 0); the last one not copied")
def parse_correct(text: str, max_points: float, shown: Sequence[str] = ()) -> Parsed:
    """The free-text reading of a yes/no template (``knockout-individual-en-ref-correct``), for a backend without a
    verdict slot: where the slot reads the probability of ``yes``, the text gives all or nothing."""
    copies = Copies(shown)
    clean = reply_text(text, copies)
    if copies.echo(clean):
        return Parsed(error=ECHO)
    every = list(_CORRECT.finditer(clean))
    pick = copies.pick(every)
    if pick is not None:
        return Parsed(value=max_points if pick.group(1).lower() in ("yes", "ja") else 0.0)
    return Parsed(error=COPIED if every else "no 'Correct: yes' or 'Correct: no' found in the reply")


_PAIR_LABEL = r"(?:answer|antwort|translation|übersetzung|uebersetzung|response|assistant)"


def _pair_pattern(n: int) -> re.Pattern[str]:
    return re.compile(
        r"\b" + _PAIR_LABEL + r"\s*" + str(n) + r"\s*(?:score|grade|punktzahl)?\s*[:=]\s*\[?\s*" + NUM + r"\s*\]?"
        + _DENOM,
        re.I,
    )


_PAIR = {1: _pair_pattern(1), 2: _pair_pattern(2)}
#: What may stand between the two grades of one pair verdict ("Answer 1: 3/5, Answer 2: 4/5").
_PAIR_JOIN = re.compile(r"[\s,;.|/\-–]*(?:(?:and|und)[\s,;.|\-–]*)?")


def _pairs(clean: str) -> list[tuple[re.Match[str], re.Match[str]]]:
    """Pair verdicts written together: an answer-1 grade followed only by a separator and an answer-2 grade."""
    firsts = list(_PAIR[1].finditer(clean))
    starts = [m.start() for m in firsts]
    out = []
    for m2 in _PAIR[2].finditer(clean):
        i = bisect.bisect_left(starts, m2.start()) - 1  # the last answer-1 grade that starts before it
        if i >= 0 and firsts[i].end() <= m2.start() and _PAIR_JOIN.fullmatch(clean, firsts[i].end(), m2.start()):
            out.append((firsts[i], m2))
    return out


@parsers.register("pairwise", "two grades, 'Answer 1: X/max Answer 2: Y/max'; the last ones not copied")
def parse_pairwise(text: str, max_points: float, shown: Sequence[str] = ()) -> Parsed:
    copies = Copies(shown)
    clean = reply_text(text, copies)
    if copies.echo(clean):
        return Parsed(error=ECHO)
    pairs = _pairs(clean)
    by_second = {p[1].start(): p for p in pairs}
    pick = copies.pick([p[1] for p in pairs], span=lambda m2: (by_second[m2.start()][0].start(), m2.end()))
    chosen: list[re.Match[str]]
    if pick is not None:
        chosen = list(by_second[pick.start()])
    else:
        chosen = []
        for n in (1, 2):
            every = list(_PAIR[n].finditer(clean))
            m = copies.pick(every)
            if m is None:
                return Parsed(error=f"answer {n}: {COPIED}" if every else f"no grade for answer {n} found in the reply")
            chosen.append(m)
    values: list[float] = []
    for n, m in zip((1, 2), chosen, strict=True):
        checked = _check(m.group(1), m.group(2), max_points)
        if not checked.ok:
            return Parsed(error=f"answer {n}: {checked.error}")
        values.append(checked.value)
    return Parsed(value=(values[0], values[1]))


_CRITERION = re.compile(
    r"\b(?:criterion|kriterium)\s*(\d{1,6})\s*(?:\(\s*[^)\n]{0,40}\))?\s*[:=]\s*\[?\s*" + NUM + r"\s*\]?" + _DENOM,
    re.I,
)


def _holds_criterion(n: int) -> Callable[[str], bool]:
    """Whether a (squashed) text holds a verdict label for criterion ``n``."""
    label = re.compile(rf"(?:criterion|kriterium){n}(?!\d)")
    return lambda text: label.search(text) is not None


@parsers.register("criteria", "one verdict per rubric criterion, 'Criterion N: X/P'; the grade is their sum")
def parse_criteria(text: str, max_points: float, shown: Sequence[str] = (), criteria: Sequence[float] = ()
                   ) -> Parsed:
    """``criteria``: the points of each criterion, in order.  The value is ``{"grade": sum, "criteria":
    [points awarded per criterion]}``; any criterion without a readable verdict makes the reply invalid."""
    if not criteria:
        return Parsed(error="the question has no criteria rubric to grade by")
    copies = Copies(shown)
    clean = reply_text(text, copies)
    if copies.echo(clean):
        return Parsed(error=ECHO)
    every = list(_CRITERION.finditer(clean))
    # a verdict for a criterion the rubric lacks makes the reply invalid when the judge wrote it, not when it
    # quotes it from an answer (copied, or standing in a shown text): an answer cannot void its own grade
    numbers = {int(m.group(1)) for m in every}
    stray = sorted(n for n in numbers - set(range(1, len(criteria) + 1))
                   if any(not copies.copied(m.string, m.start(), m.end()) and not copies.stands(m.group(0))
                          for m in every if int(m.group(1)) == n))
    if stray:
        return Parsed(error=f"the reply grades criterion {stray[0]}; the rubric has {len(criteria)}")
    # the reply's final block of verdicts (nothing but separators between and after them): a verdict in it
    # ends the reply as the format asks, though the other criteria's verdicts follow it
    start = end = len(clean)
    if every and _FINAL.fullmatch(clean, every[-1].end()):
        start, end = every[-1].start(), every[-1].end()
        for before in reversed(every[:-1]):
            if not _FINAL.fullmatch(clean, before.end(), start):
                break
            start = before.start()
    awarded: list[float] = []
    for n, points in enumerate(criteria, 1):
        found = [m for m in every if int(m.group(1)) == n]
        # the short-answer rule only where the answer holds this criterion's verdict before it (the judge's own
        # verdict for criterion 1 before its criterion 2 is not a copy of an answer holding both)
        m = copies.pick(found, ends=lambda v: end if v.start() >= start else v.end(), edge=_holds_criterion(n))
        if m is None:
            return Parsed(error=f"criterion {n}: {COPIED}" if found
                          else f"no verdict for criterion {n} found in the reply")
        checked = _check(m.group(2), m.group(3), points)
        if not checked.ok:
            return Parsed(error=f"criterion {n}: {checked.error}")
        awarded.append(float(checked.value))
    total = sum(awarded)
    if total > max_points + 1e-9:
        return Parsed(error=f"the criteria add up to {total:g}, above {max_points:g}")
    return Parsed(value={"grade": min(total, max_points), "criteria": awarded})
