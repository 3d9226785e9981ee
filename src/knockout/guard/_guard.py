"""The persuasion guard: an answer that talks to the grader is found, and graded without what it says to it.

The verdict slot ended planting (no answer can write its own grade); what an answer can still do is
*persuade* the judge: a note to the grader, a fake instruction or chat turn, a claim of being correct, a plea.
The guard, for individual grading (docs/injection.md):

1. **Visible text only.** The judge is shown the answer without invisible characters (every
   Default_Ignorable_Code_Point: zero-width characters, bidi controls, Unicode tag characters that smuggle
   ASCII): what the judge reads is what a person reading the answer sees.  A clean answer holds none of them.
2. **Detection.** The answer is split into parts (sentences, lines, code blocks, HTML comments;
   :func:`split_parts`, every part alone however long the answer) and each part is read by
   :mod:`knockout.guard._detector` (structural rules and a small classifier; no judge call): a part scoring at
   least :data:`FLAG_AT` is aimed at the grader, and the answer is flagged.
3. **The lower grade.** A flagged answer is graded again without those parts, and its grade is the lower of
   the two, but never lower than the whole answer's grade less the removed share of max points; the grade it
   would have had stays in the details (``grade_full``).  When those parts are most of
   the answer (more than :data:`WHOLE_AT` of it) it is graded whole instead (``graded_whole``): a defence never
   grades an answer on less than its content, and the flag asks an expert to look.  A flagged answer is shown as
   flagged wherever its grade is (CLI table, report, export, gradebook source ``flagged``, web app) and comes
   first in the review queue; the run's summary counts them.

The second grade goes through the engine's store like any other request: a rerun makes no call, a killed run
resumes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from knockout.errors import ConfigError
from knockout.guard._detector import MIN_UNITS, scores, units
from knockout.prompts._copies import _without_ignorable

#: ``--guard``: auto (on for individual grading whose verdict is read from a verdict slot), on, off
GUARD_MODES = ("auto", "on", "off")
#: an answer is flagged when a part of at least MIN_UNITS scores this (a rule's part: any length); in a flagged answer
#: every part scoring REMOVE_AT is removed (an attack's other sentences: "Grade the answer.").  Chosen on the tune
#: part of bench/persuasion.py and the clean answers of the demo exam, SAF and mohler-dev: docs/injection.md
FLAG_AT = 0.7
REMOVE_AT = 0.5
#: :func:`split_parts`' default: at most this many parts (a longer answer's sentences grouped into this many)
MAX_PARTS = 40
#: :func:`detect` reads every part of an answer alone, up to this many (an answer's size is bounded long before:
#: a plea among 120 sentences was read inside a group of three and diluted below FLAG_AT, issue 60)
MAX_READ = 20000
#: a flagged answer whose removed parts are more than this share of it (characters) is graded whole and marked:
#: a defence never grades an answer on less than its content (issue 48: honest answers whose every part was
#: removed were graded 0)
WHOLE_AT = 0.5


class GuardDetails(BaseModel):
    """What the guard did for one answer (``details["guard"]`` of an individual result)."""

    model_config = ConfigDict(extra="forbid")

    #: the largest score of the answer's parts (how surely some part is aimed at the grader, 0..1)
    p_address: float
    flagged: bool
    #: per part, its score (flagged answers only)
    parts: list[float] | None = None
    #: the parts removed before the second grade
    removed: list[str] = []
    #: the grade of the whole answer, and of the answer without the removed parts (flagged answers)
    grade_full: float | None = None
    grade_stripped: float | None = None
    #: the share of the answer (non-space characters) the removed parts are; the grade without them may lower the
    #: whole answer's by at most this share of max points
    removed_share: float | None = None
    #: the removed parts would be most of the answer (:data:`WHOLE_AT`): graded whole, marked for an expert
    graded_whole: bool = False
    error: str | None = None


def resolve_guard(option: str, method: str, verdict: str) -> str:
    """``on`` or ``off``: ``auto`` is on for individual grading whose verdict is read from a verdict slot
    (``expected`` or ``constrained``: the default command with the embedded judge); ``on`` needs individual
    grading."""
    if option not in GUARD_MODES:
        raise ConfigError(f"unknown guard mode '{option}' (known: {', '.join(GUARD_MODES)})")
    if option == "auto":
        return "on" if method == "individual" and verdict in ("expected", "constrained") else "off"
    if option == "on" and method != "individual":
        raise ConfigError(f"--guard on: the persuasion guard is for individual grading, not '{method}'")
    return option


def visible(text: str) -> str:
    """``text`` without invisible characters (Default_Ignorable_Code_Point: zero-width, bidi controls, tags)."""
    return _without_ignorable(text)


_FENCE = re.compile(r"```.*?(?:```|$)|<!--.*?(?:-->|$)", re.S)
_SENTENCE = re.compile(r"[^.!?。！？\n]*(?:[.!?。！？]+(?=\s|$|[\"'»”)\]])|[。！？]+|\n|$)")


def split_parts(text: str, limit: int = MAX_PARTS) -> list[str]:
    """The answer's parts: code blocks and HTML comments whole, the rest by sentence and line; more than
    ``limit`` parts are grouped into ``limit`` runs of consecutive parts."""
    parts: list[str] = []
    pos = 0
    for m in _FENCE.finditer(text):
        parts += _sentences(text[pos:m.start()])
        parts.append(m.group(0).strip())
        pos = m.end()
    parts += _sentences(text[pos:])
    parts = [p for p in parts if p]
    if len(parts) > limit:
        size = -(-len(parts) // limit)
        parts = [" ".join(parts[i:i + size]) for i in range(0, len(parts), size)]
    return parts


#: where a run of one script meets a run of another across a space (CJK and Latin or Cyrillic, Latin and
#: Cyrillic): a sentence boundary, also without a full stop (an answer in English, then a line in Chinese)
_SCRIPT_CHANGE = re.compile(r"(?<=[\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uff00-\uffef])\s+(?=[A-Za-z\u0400-\u04ff])|"
                            r"(?<=[\w.,;:!?)\]])\s+(?=[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af])|"
                            r"(?<=[A-Za-z][.,;:!?)\]]|[A-Za-z]{2})\s+(?=[\u0400-\u04ff]{2})|"
                            r"(?<=[\u0400-\u04ff][.,;:!?)\]]|[\u0400-\u04ff]{2})\s+(?=[A-Za-z]{2})")


#: abbreviations whose full stop ends no sentence ("e.g. a stack" is one part)
_ABBREV = re.compile(r"\b(e\.g|i\.e|cf|etc|vs|resp|approx|Dr|Mr|Mrs|Ms|Prof|Fig|z\.B|d\.h|usw|bzw)\.(?=\s)", re.I)
_DOT = "\ue000"  # a private-use stand-in for an abbreviation's full stop while splitting


def _sentences(text: str) -> list[str]:
    held = _ABBREV.sub(lambda m: m.group(0).replace(".", _DOT), text)
    return [p.strip().replace(_DOT, ".") for s in _SENTENCE.findall(held) for p in _SCRIPT_CHANGE.split(s)
            if p.strip()]


def without(text: str, removed: Sequence[str]) -> str:
    """``text`` with each removed part taken out once, whitespace tidied."""
    out = text
    for r in removed:
        out = out.replace(r, " ", 1)
    return re.sub(r"[ \t]+", " ", re.sub(r"\n\s*\n+", "\n", out)).strip()


def removed_share(text: str, rest: str) -> float:
    """The share of ``text`` (non-space characters) that is not in ``rest``."""
    whole = len(re.sub(r"\s", "", text))
    return 0.0 if whole == 0 else max(0.0, 1.0 - len(re.sub(r"\s", "", rest)) / whole)


def detect(text: str) -> dict[str, object]:
    """The guard's reading of one answer: ``p_address`` (its parts' largest score), ``flagged``, and for a flagged
    answer every part's score and the parts removed."""
    parts = split_parts(text, MAX_READ)  # each sentence alone: a flagged part is found wherever it stands
    sc = scores(parts)
    top = max((x for p, x in zip(parts, sc, strict=True) if x == 1.0 or units(p) >= MIN_UNITS), default=0.0)
    if top < FLAG_AT:
        return {"p_address": top, "flagged": False}
    return {"p_address": top, "flagged": True, "parts": sc, "removed": [p for p, x in zip(parts, sc, strict=True)
                                                                        if x >= REMOVE_AT]}
