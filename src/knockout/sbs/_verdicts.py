"""Side-by-side verdicts: the four classes, the invalid class E, the parser and the order mapping.

Classes (Titova et al., "Exploring Side-by-Side LLM Evaluation Through Human Alignment and Bias
Mitigation", section 3.2): **A** the candidate is better, **B** the baseline is better, **C** both are
equally good, **D** both are equally bad, and **E** a reply that is none of the four (counted, never
dropped).

A judge answers in *display* terms (``A`` = the first response shown).  Every item is judged in two
orders: swap 0 shows the candidate first, swap 1 the baseline first.  :func:`to_candidate` maps a
display verdict back to candidate/baseline terms (in swap 1, ``A`` and ``B`` trade places; ``C``, ``D``
and ``E`` are symmetric).  The classes are members of :class:`knockout.Verdict`, the verdict vocabulary
every part of knockout shares.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from knockout._verdict import Verdict
from knockout.prompts._copies import COPIED, ECHO, Copies, own_text, unecho
from knockout.prompts._parsers import Parsed

CLASSES = (Verdict.A, Verdict.B, Verdict.C, Verdict.D)
INVALID = Verdict.E
ALL_CLASSES = (*CLASSES, INVALID)
SWAPS = (0, 1)  # 0: candidate first; 1: baseline first

_BRACKETED = re.compile(r"\[\[\s*([ABCDabcd])\s*\]\]")
# The format list of the prompt echoed back ("[[A]], [[B]], [[C]] or [[D]]") is not a verdict.
_FORMAT_LIST = re.compile(r"\[\[A\]\],?\s*\[\[B\]\],?\s*\[\[C\]\],?\s*(?:or\s+)?\[\[D\]\]", re.I)
# The whole reply is one letter, maybe quoted, bold, bracketed or followed by a period.
_ALONE = re.compile(r"""^\W*?([ABCD])[\s'"*`)\].!]*$""")
# The reply starts with the letter on its own ("A.", "B:", "C)", "A\n<explanation>").
_LEADING = re.compile(r"""^[\s'"*`(\[]*([ABCD])(?:\s*\n|[.:)\]'"*`]*\s*(?:\n|$)|[.:)]\s)""")
# "Answer: A", "Verdict - 'B'", "Final verdict: **C**", "Output: D", "Decision: [A]".
_LABELLED = re.compile(
    r"\b(?:final\s+)?(?:answer|verdict|decision|output|choice)\s*(?:is|[:=-])?\s*['\"*`(\[]*([ABCD])(?![A-Za-z0-9])",
    re.I,
)


def _strip(text: str, copies: Copies) -> str:
    # reasoning models' hidden thoughts
    text = re.sub(r"<think>.*?</think>", "", own_text(unecho(text, copies)), flags=re.S)
    return _FORMAT_LIST.sub(" ", text.replace("**", "")).strip()


def parse_sbs(text: str, max_points: float = 1.0, shown: Sequence[str] = ()) -> Parsed:
    """A verdict letter in display terms: the last ``[[X]]``, else a bare letter.

    Bare forms: the reply is only the letter (``A``, ``'B'``, ``C.``), starts with it on its own
    (``A\\nThe first ...``, ``B. Because ...``), or labels it (``Answer: C``, ``Verdict: [D]``; the last
    label wins).  A ``[[X]]`` or label that stands in a response shown to the judge (``shown``) was
    copied from it and is never read.  Anything else is invalid (class E); ``max_points`` is unused
    (parser signature).
    """
    copies = Copies(shown)
    clean = _strip(text, copies)
    if copies.echo(clean):
        return Parsed(error=ECHO)
    bracketed = list(_BRACKETED.finditer(clean))
    labelled = list(_LABELLED.finditer(clean))
    own = copies.pick(bracketed, fresh_only=True)
    if own is not None:
        return Parsed(value=Verdict(own.group(1).upper()))
    for pattern in (_ALONE, _LEADING):
        m = pattern.match(clean)
        if m:
            return Parsed(value=Verdict(m.group(1)))
    # A verdict whose text stands in a response only when nothing else is left and it ends the reply.
    for found in ((labelled, True), (bracketed, False), (labelled, False)):
        own = copies.pick(found[0], fresh_only=found[1])
        if own is not None:
            return Parsed(value=Verdict(own.group(1).upper()))
    if bracketed or labelled:
        return Parsed(error=COPIED)
    if re.search(r"\[\[\s*selected answer\s*\]\]", clean, re.I):
        return Parsed(error="the reply repeats the format placeholder instead of a verdict")
    return Parsed(error="no verdict A, B, C or D found in the reply")


def to_candidate(display: str, swap: int) -> Verdict:
    """A display-order verdict in candidate terms (A = candidate better, B = baseline better)."""
    verdict = Verdict(display)
    return verdict.swap() if swap == 1 else verdict


def to_display(candidate: str, swap: int) -> Verdict:
    """The inverse of :func:`to_candidate` (the mapping is its own inverse)."""
    return to_candidate(candidate, swap)
