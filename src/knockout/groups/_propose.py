"""Which group the teacher should grade next: the one whose grade would reduce the expected error most.

A group's grade is the teacher's grade of its representative: the representative and the members near-identical
to it take it, and it enters the grade model's adaptation as one judgement, which moves the other members' own
drafts (:func:`knockout.groups.grade_group`).  A group the teacher graded is not proposed again (``graded``).  For
a group ``g`` with ``U`` members the teacher has not graded, the gain is the expected squared error its grade
speaks for: the error of the drafts on ``U``, ``|U| (b² + s²)`` (``b²`` the squared error the drafts have on the
question as far as the teacher's grades tell: their mean squared difference from the drafts, shrunk towards the
prior :data:`PRIOR_ERROR` of the maximum with :data:`PRIOR_WEIGHT` pseudo-grades; ``s²`` the members' mean squared
judge spread), less what one grade cannot tell about them, how much the members differ among themselves (their
drafts' variance ``v``): ``|U| max(0, b² + s² - v)``.  Large groups of alike answers come first: the
representatives of the question's bulk.  This order is the first-groups check of ``bench/groups.py`` (``--order
propose``; on the grade model's drafts, two groups per question by this order brought the other answers below raw
on 20 of 20 mohler-dev draws, largest first on 19).

The hook for the grade model: ``expected_error(answer_id) -> squared points`` replaces ``b² + s²`` per answer
(the grade model's adapted grades and their spread, once it is adapted to the teacher).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from knockout.groups._build import Group

#: the squared error assumed of a draft grade before any teacher grade, as a share of the maximum
PRIOR_ERROR = 0.2
#: how many teacher grades the prior weighs
PRIOR_WEIGHT = 2.0


def draft_error(groups: Mapping[str, list[Group]], teacher: Mapping[str, float]) -> dict[str, float]:
    """Question id -> the expected squared error of a draft grade (points²), from the teacher's grades so far."""
    out = {}
    for qid, gs in groups.items():
        mx = gs[0].max_points if gs else 1.0
        errs = [(teacher[a] - d) ** 2 for g in gs for a, d in g.drafts.items() if a in teacher and d is not None]
        prior = (PRIOR_ERROR * mx) ** 2
        out[qid] = (PRIOR_WEIGHT * prior + sum(errs)) / (PRIOR_WEIGHT + len(errs))
    return out


def propose(groups: Mapping[str, list[Group]], teacher: Mapping[str, float], *,
            expected_error: Callable[[str], float] | None = None,
            graded: Collection[str] = ()) -> list[dict[str, Any]]:
    """The groups with ungraded members that are not ``graded`` (group ids) already, by expected gain (squared
    points), highest first; each with its gain, ungraded members and the gain in words."""
    bias = draft_error(groups, teacher)
    out: list[dict[str, Any]] = []
    for qid, gs in groups.items():
        for g in gs:
            todo = [a for a in g.members if a not in teacher]
            if not todo or g.id in graded:
                continue
            drafts = [d for d in g.drafts.values() if d is not None]
            mean = sum(drafts) / len(drafts) if drafts else 0.0
            var = sum((d - mean) ** 2 for d in drafts) / len(drafts) if drafts else 0.0
            judge = max(0.0, (g.spread or 0.0) ** 2 - var)  # the spread holds the drafts' variance and the judge's
            before = sum(expected_error(a) for a in todo) if expected_error else len(todo) * (bias[qid] + judge)
            gain = max(0.0, before - len(todo) * var)
            out.append({"group": g.id, "question_id": qid, "ungraded": len(todo), "size": len(g.members),
                        "gain": gain, "draft": g.draft, "representative": g.representative,
                        "words": (f"{len(todo)} ungraded x (expected draft error {before / len(todo):.2f} - "
                                  f"the members' own variance {var:.2f}) = {gain:.2f} points²")})
    out.sort(key=lambda x: (-round(float(x["gain"]), 9), str(x["question_id"]), str(x["group"])))
    return out
