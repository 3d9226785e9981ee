"""Parsers for the meta-judge's replies (registered in :data:`knockout.prompts._parsers.parsers`).

The meta-evaluation prompts (the study's Tables 9-13) ask for XML-like tags; the last tag of a
kind in the reply wins, an unclosed last tag (a reply cut by the token limit) is read to the end,
and ``Tag: value`` lines are accepted for models that drop the angle brackets.  A tag or line the
meta-judge copied from the texts it was shown (``shown``: question, answers, assessments, the
debate so far) is never read.  Nothing is guessed: a missing tag, an echoed placeholder or
a choice naming both sides is an error, which the engine answers with a format reminder and, in
the end, an invalid result.

* ``meta-better`` — ``<Better_assistant>Assistant1 | Assistant2 | equally good</Better_assistant>``
  → ``{"winner": A|B|TIE, "answer": A|B|TIE|None}`` (:class:`knockout.Verdict`; ``answer``: the meta-judge's own
  ``<Better_answer>``, AnswerA/AnswerB/equally good, when readable).
* ``meta-debate`` — a final ``<Better_assistant>`` as above, or a ``<Question>`` for the debaters
  → ``{"winner": ..., "question": None}`` or ``{"winner": None, "question": "..."}``.
* ``meta-score`` — ``<Score_for_Assistant...>X</...>`` with X in 1..max → ``{"score": X, "own": Y}``
  (``own``: the meta-judge's own score of the text or answer, ``<Score_for_...>``, when readable).
* ``meta-criteria`` — ``<Criterion>...</Criterion>`` blocks (or a numbered list), at most 5 used
  → a list of criteria.
* ``meta-argument`` — any non-empty reply (a debater's argument) → the text.
* ``meta-plan`` — the authors' BSMEval branch reply: ``<Evaluation Plan>`` with one criterion per line
  (numbering and bullets dropped; or, without the tag, a numbered list), at most 5 used → a list of criteria.
* ``meta-score-tag`` — the authors' BSMEval solve reply: ``<Score>X</Score>`` (or ``Score:`` with X on the
  same or the next line, as their recorded replies have it) with X in 1..max → ``{"score": X, "own": None}``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from knockout._verdict import Verdict
from knockout.prompts._copies import COPIED, Copies, own_text
from knockout.prompts._parsers import NUM, Parsed, to_float
from knockout.prompts._stored import is_grade, is_text, is_texts, stored_shape

MAX_CRITERIA = 5
_PLACEHOLDER = re.compile(r"^\(?\s*(?:your|choose|assign|give)\b", re.I)


def _tag(text: str, name: str, copies: Copies) -> str | None:
    """Content of the last ``<name>...</name>`` (unclosed: to the end), else of the last ``name: ...`` line;
    tags and lines copied from the texts shown are passed over."""
    text = own_text(text)
    pattern = rf"<\s*{name}\s*>(.*?)(?:<\s*/\s*{name}\s*>|(?=<\s*\w+\s*>)|\Z)"
    block = copies.pick(list(re.finditer(pattern, text, re.I | re.S)))
    if block is not None:
        return block.group(1).strip()
    line = copies.pick(list(re.finditer(rf"^\W*{name}\W*[:=]\s*(.+)$", text, re.I | re.M)))
    return line.group(1).strip() if line is not None else None


def _choice(value: str, one: str, two: str) -> Verdict | None:
    """A, B or TIE from a choice such as "Assistant1", "AnswerB", "equally good"; None if unclear."""
    v = value.lower()
    if _PLACEHOLDER.match(v):
        return None
    has1 = re.search(one, v) is not None
    has2 = re.search(two, v) is not None
    tie = re.search(r"equal|\btie\b|\bboth\b|\bneither\b", v) is not None
    if has1 + has2 + tie != 1:
        return None
    return Verdict.A if has1 else Verdict.B if has2 else Verdict.TIE


_ASSISTANT = (r"assistant\s*_?\s*1\b|assistant\s*_?\s*one\b", r"assistant\s*_?\s*2\b|assistant\s*_?\s*two\b")
_ANSWER = (r"answer\s*_?\s*a\b|answer\s*_?\s*1\b", r"answer\s*_?\s*b\b|answer\s*_?\s*2\b")


def _winner(text: str, copies: Copies) -> tuple[Verdict | None, str | None]:
    """(winner, error) from the Better_assistant tag."""
    raw = _tag(text, "Better_assistant", copies)
    if raw is None:
        return None, COPIED if _tag(text, "Better_assistant", Copies()) else "no <Better_assistant> tag in the reply"
    w = _choice(raw, *_ASSISTANT)
    if w is None:
        return None, f"<Better_assistant> must be Assistant1, Assistant2 or equally good, got {raw[:60]!r}"
    return w, None


def _answer(text: str, copies: Copies) -> Verdict | None:
    raw = _tag(text, "Better_answer", copies)
    return None if raw is None else _choice(raw, *_ANSWER)


def parse_better(text: str, max_points: float = 0, shown: Sequence[str] = ()) -> Parsed:
    copies = Copies(shown)
    winner, error = _winner(text, copies)
    if winner is None:
        return Parsed(error=error)
    return Parsed(value={"winner": winner, "answer": _answer(text, copies)})


def parse_debate(text: str, max_points: float = 0, shown: Sequence[str] = ()) -> Parsed:
    copies = Copies(shown)
    if _tag(text, "Better_assistant", copies) is not None:
        winner, error = _winner(text, copies)
        return Parsed(error=error) if winner is None else Parsed(value={"winner": winner, "question": None})
    question = _tag(text, "Question", copies)
    if question and not _PLACEHOLDER.match(question):
        return Parsed(value={"winner": None, "question": question})
    return Parsed(error="neither a <Better_assistant> decision nor a <Question> in the reply")


def _number(raw: str | None, low: float, high: float) -> float | None:
    """The number in a tag's content, within [low, high]; None for none, out of range or an echoed placeholder."""
    if raw is None or _PLACEHOLDER.match(raw):
        return None
    m = re.search(NUM, raw)
    if m is None:
        return None
    x = to_float(m.group(1))
    return x if low <= x <= high else None


def parse_score(text: str, max_points: float = 5, shown: Sequence[str] = ()) -> Parsed:
    copies = Copies(shown)
    clean = text.replace("**", "")
    tags = _score_tags(clean)
    mine = [t for t in tags if t.lower().startswith("score_for_assistant")]
    if not mine:
        return Parsed(error="no <Score_for_Assistant> tag in the reply")
    raw = _tag(clean, mine[-1], copies)
    if raw is None:
        return Parsed(error=COPIED)
    score = _number(raw, 1, max_points)
    if score is None:
        why = ("repeats the format placeholder instead of a score" if raw and _PLACEHOLDER.match(raw)
               else f"must hold a score from 1 to {max_points:g}")
        return Parsed(error=f"<{mine[-1]}> {why}, got {(raw or '')[:40]!r}")
    return Parsed(value={"score": score, "own": _own_score(clean, tags, copies, max_points)})


def _score_tags(clean: str) -> list[str]:
    """The ``Score_for_...`` tags (or ``Score_for_...:`` lines) of a reply, in order."""
    return re.findall(r"<\s*(Score_for_\w+)\s*>", clean, re.I) or re.findall(r"^\W*(Score_for_\w+)\W*[:=]", clean,
                                                                          re.I | re.M)


def _own_score(clean: str, tags: list[str], copies: Copies, max_points: float) -> float | None:
    """The meta-judge's own score of the text or answer (its last ``Score_for_...`` tag that is not the
    assistant's), when readable."""
    others = [t for t in tags if not t.lower().startswith("score_for_assistant")]
    return _number(_tag(clean, others[-1], copies), 1, max_points) if others else None


def own_score(text: str, max_points: float = 5, shown: Sequence[str] = ()) -> float | None:
    """The meta-judge's own score of the text it was shown (``<Score_for_story>``...) in a reply's reasoning, never
    one copied from the texts shown: beside a slot verdict, a diagnostic, not the verdict."""
    clean = text.replace("**", "")
    return _own_score(clean, _score_tags(clean), Copies(shown), max_points)


def own_answer(text: str, shown: Sequence[str] = ()) -> Verdict | None:
    """The meta-judge's own better answer (``<Better_answer>``) in a reply's reasoning, never one copied from the
    texts shown: beside a slot verdict, a diagnostic, not the verdict."""
    return _answer(text, Copies(shown))


def parse_criteria(text: str, max_points: float = 0, shown: Sequence[str] = ()) -> Parsed:
    found = [c.strip() for c in re.findall(r"<\s*Criterion\s*>(.*?)<\s*/\s*Criterion\s*>", text, re.I | re.S)]
    if not found:
        found = [m.strip() for m in re.findall(r"^\s*\d+[.)]\s+(.+)$", text, re.M)]
    found = [c for c in found if c and not _PLACEHOLDER.match(c)]
    if not found:
        return Parsed(error="no <Criterion> in the reply")
    return Parsed(value=found[:MAX_CRITERIA])


def parse_argument(text: str, max_points: float = 0, shown: Sequence[str] = ()) -> Parsed:
    t = text.strip()
    return Parsed(value=t) if t else Parsed(error="empty argument")


_BULLET = re.compile(r"^\s*(?:[-*•]|\(?\d+[.):]|\(?[a-z][.)])\s*", re.I)


def parse_plan(text: str, max_points: float = 0, shown: Sequence[str] = ()) -> Parsed:
    raw = _tag(text, "Evaluation[ _]?Plan", Copies(shown))
    if raw is not None:
        found = [_BULLET.sub("", ln).strip() for ln in raw.splitlines()]
    else:
        found = [m.strip() for m in re.findall(r"^\s*\d+[.)]\s+(.+)$", text, re.M)]
    found = [c for c in found if c and len(c) > 2 and not _PLACEHOLDER.match(c) and not c.startswith("(")]
    if not found:
        return Parsed(error="no criteria in an <Evaluation Plan> in the reply")
    return Parsed(value=found[:MAX_CRITERIA])


def parse_score_tag(text: str, max_points: float = 5, shown: Sequence[str] = ()) -> Parsed:
    """The score of a ``<Score>`` tag (or the line after a ``Score`` heading), never one copied from
    the texts shown."""
    copies = Copies(shown)
    clean = text.replace("**", "")
    raw = _tag(clean, "Score", copies)
    if raw is None:
        nxt = copies.own(re.finditer(r"^\W*Score\W*[:=]?\s*\n\s*(\S.*)$", clean, re.I | re.M))
        raw = nxt[-1].group(1).strip() if nxt else None
    if raw is None:
        return Parsed(error="no <Score> tag in the reply")
    score = _number(raw, 1, max_points)
    if score is None:
        why = ("repeats the format placeholder instead of a score" if _PLACEHOLDER.match(raw)
               else f"must hold a score from 1 to {max_points:g}")
        return Parsed(error=f"<Score> {why}, got {raw[:40]!r}")
    return Parsed(value={"score": score, "own": None})


# -- what each parser's valid value looks like once stored (knockout.prompts._parsers.STORED_SHAPES) --------
def _is_meta_score(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return (type(v) is dict and set(v) == {"score", "own"} and is_grade(v["score"], 1.0, max_points)
            and (v["own"] is None or is_grade(v["own"], 1.0, max_points)))


def _is_question(v: Any, max_points: float, criteria: Sequence[float]) -> bool:
    return type(v) is dict and set(v) == {"winner", "question"} and v["winner"] is None and \
        is_text(v["question"], max_points, criteria)


stored_shape(parse_score, _is_meta_score)
stored_shape(parse_score_tag, lambda v, m, c: _is_meta_score(v, m, c) and v["own"] is None)
stored_shape(parse_criteria, is_texts)
stored_shape(parse_plan, is_texts)
stored_shape(parse_argument, is_text)
stored_shape(parse_debate, _is_question)
