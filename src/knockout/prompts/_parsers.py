"""Parsers that turn a judge's reply into a grade, or say why they cannot.

A parser never guesses: a reply without a recognisable grade, with a grade
outside ``0..max_points`` (a sign or an exponent is read as written: ``-1/5``
and ``1e3/5`` are invalid, never 1), or on another scale (``Score: 7/10`` when
the maximum is 5) is invalid, and the engine retries it with a format reminder.

A parser reads only the judge's own verdict:

* **Normalised alike.** The reply and every text shown to the judge are
  normalised the same way before anything is read or compared (:func:`normalise`:
  NFKC, so fullwidth digits are digits; ignorable characters dropped;
  ``\\boxed{x}`` read as ``x``; ``**``/``__`` markup dropped; repeated to a
  fixpoint, so normalising twice changes nothing).
* **Never across a marker.** Text that a reply quotes between knockout's markers
  (``<<<k…`` … ``k…>>>``, :mod:`knockout.prompts._render`), or up to a closing
  marker the judge echoed, is data and is never read; no verdict is read across
  a marker line.  Markers are found in the reply as written, never after
  normalising: a look-alike (fullwidth ``＞＞＞``) is text.
* **Copied by position, not by value.** A verdict counts as copied only when the
  text around it in the reply reproduces a span of a text shown to the judge:
  the verdict together with :data:`CONTEXT` characters before it, or after it,
  stands in that text (compared without case, whitespace and ``*_`` markup).
  The same value written in an answer does not make the judge's own verdict a
  copy, so an answer cannot veto it.
* **The last own verdict.** Of the verdicts left, the last one is read; one whose
  text does not occur in any shown text is preferred to one that does (a verdict
  a judge quotes right after its own).  A reply that only repeats the texts shown
  is invalid (asked again, then counted invalid, never a grade).

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
import functools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from knockout._registry import Registry

#: A number as written: a sign, a decimal point or comma, an exponent are part of it; glued to a letter or
#: digit on either side it is not a number.
NUM = r"(?<![\w.,])([-+\u2212]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?)(?![\w])"
_DENOM = r"(?:\s*(?:/|out\s+of|of|von|aus)\s*\[?\s*" + NUM + r"\s*\]?)?"
#: Characters of context (after squashing) that make a verdict a copy of a shown text.
CONTEXT = 16
#: Characters of context (after squashing) that make a verdict a copy when they are all a shown text holds
#: before it (:meth:`Copies.copied`).
EDGE = 8
#: A knockout marker line (knockout.prompts._render): ``<<<k`` + 11 hex digits, or those + ``>>>``.
MARKER = re.compile(r"<<<k[0-9a-f]{11}|k[0-9a-f]{11}>>>")
#: Characters a reader does not see, dropped before anything is read or compared: Unicode's
#: Default_Ignorable_Code_Point (zero-width spaces and joiners, soft hyphen, bidi controls, variation
#: selectors, tags, Hangul fillers).  NFKC never produces one.
_IGNORABLE_BMP = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                  "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8")
_IGNORABLE_ASTRAL = "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
_IGNORABLE = re.compile(f"[{_IGNORABLE_BMP}{_IGNORABLE_ASTRAL}]")
_IGNORABLE_IN_BMP = re.compile(f"[{_IGNORABLE_BMP}]")  # a smaller class is searched faster


def _astral(text: str) -> bool:
    """``text`` holds a character above U+FFFF."""
    return len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)


def _has_ignorable(text: str) -> bool:
    if text.isascii():
        return False
    return bool((_IGNORABLE if _astral(text) else _IGNORABLE_IN_BMP).search(text))


def _without_ignorable(text: str) -> str:
    if text.isascii():
        return text
    return (_IGNORABLE if _astral(text) else _IGNORABLE_IN_BMP).sub("", text)


#: How many passes :func:`normalise` makes before it drops markup outright (a clean text needs two or three).
PASSES = 16
_BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")


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
COPIED = "every verdict in the reply is copied from the text being judged, none is the judge's own"


def to_float(s: str) -> float:
    """A number as written (:data:`NUM`): a decimal point or a German decimal comma, a sign, an exponent;
    ``1.2.3`` raises ValueError."""
    s = s.replace("\u2212", "-")
    mantissa = s.split("e")[0].split("E")[0]
    if mantissa.count(".") + mantissa.count(",") > 1:
        raise ValueError(f"not one number: {s!r}")
    return float(s.replace(",", "."))


def _markup(text: str) -> str:
    return _BOXED.sub(r"\1", text.replace("**", "").replace("__", ""))


def _fold(text: str) -> str:
    """One pass of :func:`normalise`: NFKC, then no ignorable characters, then no markup."""
    return _markup(_without_ignorable(unicodedata.normalize("NFKC", text)))


def _settled(text: str) -> bool:
    """``_fold(text) == text``, without building a new text (the common case: a text already normalised)."""
    return (unicodedata.is_normalized("NFKC", text) and "**" not in text and "__" not in text
            and not _has_ignorable(text) and not _BOXED.search(text))


def normalise(text: str) -> str:
    """What a parser reads, and what it compares with the texts shown: NFKC, no ignorable (zero-width,
    bidi, variation selector...) characters, ``\\boxed{x}`` as ``x``, no ``**``/``__`` markup (the same for
    the reply and for every shown text).

    Idempotent: the passes repeat until the text no longer changes (``e``, a zero-width space and a combining
    acute become ``é``, which one pass leaves as ``e`` + acute; ``\\boxed{\\boxed{1}}`` becomes ``1``), so
    normalising a normalised text changes nothing.  A text built to need more than :data:`PASSES` passes (no
    clean one does) loses every ``*``, ``_``, ``{`` and ``}`` instead, which leaves nothing for a further
    pass to change (NFKC then only recomposes, and composition makes none of them)."""
    for _ in range(PASSES):
        if _settled(text):
            return text
        text = _fold(text)
    text = _HOSTILE_MARKUP.sub("", _without_ignorable(unicodedata.normalize("NFKC", text)))
    return unicodedata.normalize("NFKC", text)


_HOSTILE_MARKUP = re.compile(r"[*_{}]")
_SQUASHED = re.compile(r"[\s*_`]+")  # the same characters as str.isspace() or "*_`"


def _lower_text(text: str) -> str:
    """``text.lower()`` without its one context rule: a final sigma is lowered as any other (``ς`` and ``σ``
    compare equal), so that a text lowers the same alone and quoted among other words."""
    return text.lower().replace("\u03c2", "\u03c3")


def _squash(text: str) -> str:
    return _SQUASHED.sub("", _lower_text(text))


@functools.lru_cache(maxsize=1024)
def _squashed(shown: str) -> str:
    """A shown text as the copy checks compare it (the same question or reference is shown again and again)."""
    return _squash(normalise(shown))


class Copies:
    """Tells whether a verdict in a reply was copied from the texts shown to the judge (by position), and
    whether its text stands in them at all (by value)."""

    def __init__(self, shown: Iterable[str] = ()) -> None:
        self._texts = [t for t in (_squashed(s) for s in shown) if t]
        self._cache: tuple[str, str, Callable[[int], int]] | None = None
        self._lowered: tuple[str, str] | None = None

    def __call__(self, fragment: str) -> bool:
        """The fragment's text stands in a shown text (by value)."""
        return self.stands(normalise(fragment))

    def stands(self, fragment: str) -> bool:
        """A fragment of a normalised text (:func:`own_text`) stands in a shown text (by value)."""
        f = _squash(fragment)
        return bool(f) and any(f in t for t in self._texts)

    def _lower(self, text: str) -> str:
        """``text.lower()``, kept for the reply whose verdicts are being checked."""
        if self._lowered is None or self._lowered[0] is not text:
            self._lowered = (text, _lower_text(text))
        return self._lowered[1]

    def _map(self, text: str) -> tuple[str, Callable[[int], int]]:
        """The squashed text and, for a position of the original, how many squashed characters precede it."""
        if self._cache is None or self._cache[0] is not text:
            lowered = self._lower(text)
            if len(lowered) == len(text):  # positions agree: count what squashing drops, run by run
                starts, ends, dropped = [], [], [0]
                for m in _SQUASHED.finditer(lowered):
                    starts.append(m.start())
                    ends.append(m.end())
                    dropped.append(dropped[-1] + m.end() - m.start())

                def before(i: int) -> int:
                    k = bisect.bisect_left(starts, i)  # the runs that start before i
                    return i if k == 0 else i - dropped[k - 1] - (min(ends[k - 1], i) - starts[k - 1])

                self._cache = (text, _SQUASHED.sub("", lowered), before)
            else:  # a character whose lower case is longer (such as "İ"): character by character
                keep: list[str] = []
                counts = [0] * (len(text) + 1)
                n = 0
                for i, ch in enumerate(text):
                    counts[i] = n
                    kept = _SQUASHED.sub("", _lower_text(ch))
                    keep.append(kept)
                    n += len(kept)
                counts[len(text)] = n
                self._cache = (text, "".join(keep), counts.__getitem__)
        return self._cache[1], self._cache[2]

    def copied(self, text: str, start: int, end: int, edge: Callable[[str], bool] | None = None) -> bool:
        """``text[start:end]`` (a verdict) with :data:`CONTEXT` characters before or after it stands in a shown
        text: the judge reproduced a span of it (or, :meth:`_edge_copy`, all of a short text before it; ``edge``
        says for which of those texts' beginnings)."""
        if not self._texts:
            return False
        lowered = self._lower(text)
        if len(lowered) == len(text):  # every window holds the squashed verdict: where it stands nowhere, none does
            verdict = _SQUASHED.sub("", lowered[start:end])
            if not verdict or not any(verdict in t for t in self._texts):
                return False
        sq, before = self._map(text)
        s, e = before(start), before(end)
        if e <= s:
            return False
        windows = []
        if s >= CONTEXT:
            windows.append(sq[s - CONTEXT:e])
        if len(sq) - e >= CONTEXT:
            windows.append(sq[s:e + CONTEXT])
        if any(w in t for w in windows for t in self._texts):
            return True
        return self._edge_copy(sq, s, e, edge)

    def _edge_copy(self, sq: str, s: int, e: int, edge: Callable[[str], bool] | None) -> bool:
        """The verdict ``sq[s:e]`` stands within :data:`CONTEXT` characters of a shown text's start and the
        reply reproduces everything of that text before it, at least :data:`EDGE` characters (or the verdict's
        length, if shorter): a short answer such as ``Score: 0/1 Score: 1/1`` quoted at the end of a reply is a
        copy even though no 16 characters surround the last grade.  (Not the mirror rule at a text's end: the
        judge's own verdict followed by its next one, ``Criterion 1: 1/1`` ``Criterion 2: 1/1``, would be a
        copy of an answer holding both.)"""
        verdict = sq[s:e]
        least = min(len(verdict), EDGE)
        for t in self._texts:
            j = t.find(verdict, least, CONTEXT + len(verdict) - 1)
            while j != -1:
                if s >= j and sq[s - j:s] == t[:j] and (edge is None or edge(t[:j])):
                    return True
                j = t.find(verdict, j + 1, CONTEXT + len(verdict) - 1)
        return False

    def own(self, matches: Iterable[re.Match[str]]) -> list[re.Match[str]]:
        """The matches that are not copies (by position in the string they were found in), in reply order."""
        return [m for m in matches if not self.copied(m.string, m.start(), m.end())]

    def echo(self, text: str) -> bool:
        """The whole reply repeats a shown text: all of it, or a span of at least :data:`CONTEXT` characters
        (a shorter reply that is only part of a text, such as a bare verdict letter, is judged by its verdicts)."""
        sq = _squash(normalise(text))
        return bool(sq) and any(sq == t or (len(sq) >= CONTEXT and sq in t) for t in self._texts)

    def pick(self, matches: Sequence[re.Match[str]], *, span: Any = None, fresh_only: bool = False,
             ends: Callable[[re.Match[str]], int] | None = None, edge: Callable[[str], bool] | None = None
             ) -> re.Match[str] | None:
        """The judge's own verdict of ``matches`` (reply order), or None: the last one not copied (by
        position) whose text stands in no shown text; failing that, the last one not copied if it ends the
        reply (as the format asks: a judge's own verdict that happens to equal a grade written in an answer).
        ``span(m)`` gives the (start, end) a match is checked by; ``fresh_only``: no such fallback; ``ends(m)``:
        where the reply must end for ``m`` to end it (default: the end of its span; the criteria parser gives
        the end of the reply's final block of verdicts); ``edge(context)``: whether the short-answer rule of
        :meth:`copied` applies, given what the shown text holds before the verdict."""
        spans = [span(m) if span else (m.start(), m.end()) for m in matches]
        own = [(m, sp) for m, sp in zip(matches, spans, strict=True) if not self.copied(m.string, sp[0], sp[1], edge)]
        fresh = [m for m, sp in own if not self.stands(m.string[sp[0]:sp[1]])]
        if fresh:
            return fresh[-1]
        if own and not fresh_only and _FINAL.fullmatch(own[-1][0].string,
                                                       ends(own[-1][0]) if ends else own[-1][1][1]):
            return own[-1][0]
        return None


#: What may follow a reply's final verdict.
_FINAL = re.compile(r"[\s.,;:!?)\]}\"'*_`\0]*")


def unecho(text: str, copies: Copies) -> str:
    """A reply that echoes its prompt (Llama/Mistral ``[INST] ... [/INST]``): only what follows,
    unless the marker is one the judge copied from an answer."""
    if "[/INST]" in text and not copies("[/INST]"):
        return text.rsplit("[/INST]", 1)[1]
    return text


def own_text(text: str) -> str:
    """The reply as the parsers read it: every span quoted between markers (or up to a closing marker the
    reply echoed) replaced by a line break and a NUL, which no verdict reads across, and what is left
    normalised (:func:`normalise`), piece by piece.

    The markers are found in the reply **as written**, never after normalising: a marker is the ASCII
    line knockout renders, and a look-alike (fullwidth ``＜＜＜``, small ``﹥﹥﹥``, one with a zero-width
    character or markup inside) is just text, which cannot hide the judge's own verdict or make a quoted
    one look like the judge's."""
    if "<<<k" not in text and ">>>" not in text:
        return normalise(text)
    out: list[str] = []
    pos = 0
    inside = False
    for m in MARKER.finditer(text):
        opening = m.group(0).startswith("<<<")
        if opening and not inside:
            out.append(normalise(text[pos:m.start()]))
            inside = True
        elif not opening:
            if not inside:  # an echo that began inside a quoted text: everything before is data
                out = []
            inside = False
        pos = m.end()
        out.append("\n\0\n")
    if not inside:
        out.append(normalise(text[pos:]))
    return "".join(out)


def _strip_markup(text: str, copies: Copies) -> str:
    return own_text(unecho(text, copies))


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


ECHO = "the reply only repeats the text being judged; it has no verdict of its own"


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
    clean = _strip_markup(text, copies)
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
    clean = _strip_markup(text, copies)
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
    clean = _strip_markup(text, copies)
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


# -- a stored parse is checked like a fresh one (issue 34) ------------------------------------------------
def is_grade(x: Any, low: float, high: float) -> bool:
    """A grade as a parser makes it: a float (not an int, a bool or a string), finite, within low..high."""
    return type(x) is float and low <= x <= high + 1e-9


def is_score(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return is_grade(v, 0.0, max_points)


def _is_pair(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return type(v) is list and len(v) == 2 and all(is_grade(x, 0.0, max_points) for x in v)


def _is_criteria(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    if type(v) is not dict or set(v) != {"grade", "criteria"}:
        return False
    awarded = v["criteria"]
    if type(awarded) is not list or len(awarded) != len(criteria) or not criteria:
        return False
    if not all(is_grade(x, 0.0, p) for x, p in zip(awarded, criteria, strict=True)):
        return False
    total = sum(awarded)
    return total <= max_points + 1e-9 and is_grade(v["grade"], 0.0, max_points) and v["grade"] == min(total, max_points)


def is_text(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return type(v) is str and bool(v) and v == v.strip()


def is_texts(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return type(v) is list and 1 <= len(v) <= 5 and all(is_text(x, max_points, criteria) for x in v)


_Shape = Callable[[Any, float, Sequence[float]], bool]
#: What each knockout parser's valid value looks like once stored (JSON read back), by the parser's
#: ``module:name`` (other features add theirs with :func:`stored_shape`); a value of a parser not here
#: (side-by-side verdicts hold enum members and are never stored for reuse; plugins have no parse identity) is
#: never used: the reply is read again.
STORED_SHAPES: dict[str, _Shape] = {
    "knockout.prompts._parsers:parse_score": is_score,
    "knockout.prompts._parsers:parse_pairwise": _is_pair,
    "knockout.prompts._parsers:parse_criteria": _is_criteria,
}


def stored_shape(parser: Callable[..., Any], shape: _Shape) -> None:
    """Declare what a parser's valid value looks like once stored (:data:`STORED_SHAPES`): the features that own
    parsers (SciEx, meta-evaluation) declare theirs beside them."""
    STORED_SHAPES[f"{parser.__module__}:{parser.__qualname__}"] = shape


def stored_value_ok(parse: Any, value: Any) -> bool:
    """``value``, a request's stored parse read back from the store, is one the request's parse
    (:class:`knockout.prompts._render.OwnVerdict`) could have made: of its parser's exact types, shape and
    ranges (:data:`STORED_SHAPES`: a grade a float within ``0..max_points``, not ``"2"``, ``99``, ``-5`` or
    ``{"grade": 2}``; a pair two of them; criteria one per criterion within its points, adding up to the
    grade).  False for anything else, and for a parse whose parser has no known shape."""
    parser = getattr(parse, "parse", None)
    max_points = getattr(parse, "max_points", None)
    criteria = getattr(parse, "criteria", ())
    if parser is None or not isinstance(max_points, int | float) or not math.isfinite(max_points):
        return False
    shape = STORED_SHAPES.get(f"{getattr(parser, '__module__', '')}:{getattr(parser, '__qualname__', '')}")
    try:
        return shape is not None and bool(shape(value, float(max_points), tuple(criteria)))
    except (TypeError, ValueError):
        return False
