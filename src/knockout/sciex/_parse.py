"""Parsers for SciEx runs: an examinee's answer, and the authors' way of reading a grade.

``answer`` (``knockout solve``): any non-empty reply is the examinee's answer (an empty one is asked again
with the reminder, then recorded as no answer).

``sciex-score`` reads a grade as the authors' ``parse_grade`` does (github TuAnh23/SciEx, ``utils.py``):
the last ``[grade] X`` whose X lies in ``0..max``; when there is none, the **last number anywhere in the
reply** that lies in ``0..max``.  That second step guesses (it may read a number of the reasoning, or one
copied from the answer), so knockout uses it only when asked (``knockout grade --parser sciex-score``)
and counts every grade read that way (``info.sciex_parser.fallbacks`` of the run summary).  A reply with
no number in range is invalid (the authors' ``None``) and asked again with the format reminder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from knockout.prompts._parsers import Parsed
from knockout.prompts._stored import is_score, is_text, stored_shape

_GRADE = re.compile(r"\[grade\]\s*(\d+(?:[.,]\d+)?)")  # the authors' first pattern (case-sensitive, as theirs)
_NUMBER = re.compile(r"(\d+(?:[.,]\d+)?)")


def _last_in_range(matches: Sequence[str], max_points: float) -> float | None:
    for m in reversed(matches):
        x = float(m.replace(",", "."))
        if 0 <= x <= max_points:
            return x
    return None


def sciex_grade(text: str, max_points: float) -> tuple[float | None, bool]:
    """(grade, read by the fallback): the authors' ``parse_grade``; (None, False) when it finds none."""
    tagged = _last_in_range(_GRADE.findall(text), max_points)
    if tagged is not None:
        return tagged, False
    anywhere = _last_in_range(_NUMBER.findall(text), max_points)
    return anywhere, anywhere is not None


def parse_sciex_score(text: str, max_points: float, shown: Sequence[str] = ()) -> Parsed:
    """SciEx's parse_grade: the last in-range [grade] X, else the last in-range number (fallbacks counted).

    See the module docstring; ``shown`` is accepted and not used: the authors' parser reads any number."""
    value, _ = sciex_grade(text, max_points)
    if value is None:
        return Parsed(error=f"no number within 0..{max_points:g} in the reply")
    return Parsed(value=value)


def parse_answer(text: str, max_points: float, shown: Sequence[str] = ()) -> Parsed:
    """An examinee's answer (knockout solve): any non-empty reply, stripped."""
    answer = text.strip()
    return Parsed(value=answer) if answer else Parsed(error="the reply is empty")


stored_shape(parse_sciex_score, is_score)
stored_shape(parse_answer, is_text)
