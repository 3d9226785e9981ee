"""What the free-text parsers read of a reply, and how they tell the judge's own verdict from one copied from the
texts shown (:mod:`knockout.prompts._parsers`, the path of templates without a verdict slot; the side-by-side and
meta-evaluation parsers use it too).

* **Normalised alike.** The reply and every text shown to the judge are normalised the same way before anything
  is read or compared (:func:`normalise`: NFKC, so fullwidth digits are digits; ignorable characters dropped;
  ``\\boxed{x}`` read as ``x``; ``**``/``__`` markup dropped; repeated to a fixpoint, so normalising twice changes
  nothing).
* **Never across a marker.** Text that a reply quotes between knockout's markers (``<<<k…`` … ``k…>>>``,
  :mod:`knockout.prompts._render`), or up to a closing marker the judge echoed, is data and is never read; no
  verdict is read across a marker line (:func:`own_text`).  Markers are found in the reply as written, never after
  normalising: a look-alike (fullwidth ``＞＞＞``) is text.
* **Copied by position, not by value** (:class:`Copies`).  A verdict counts as copied only when the text around it
  in the reply reproduces a span of a text shown to the judge: the verdict together with :data:`CONTEXT`
  characters before it, or after it, stands in that text (compared without case, whitespace and ``*_`` markup).
  The same value written in an answer does not make the judge's own verdict a copy, so an answer cannot veto it.
* **The last own verdict** (:meth:`Copies.pick`).  Of the verdicts left, the last one is read; one whose text does
  not occur in any shown text is preferred to one that does (a verdict a judge quotes right after its own).  A reply
  that only repeats the texts shown is invalid (:data:`ECHO`).
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

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

COPIED = "every verdict in the reply is copied from the text being judged, none is the judge's own"
ECHO = "the reply only repeats the text being judged; it has no verdict of its own"


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


def reply_text(text: str, copies: Copies) -> str:
    """The reply as a parser reads it: an echoed prompt left out (:func:`unecho`), then :func:`own_text`."""
    return own_text(unecho(text, copies))
