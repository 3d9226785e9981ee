"""How a jury turns its members' results for one item into one: score aggregates and verdict aggregates.

Scores (grading runs; every member grades on the question's point scale): ``mean``, ``median``,
``trimmed`` (the mean after dropping the ``trim`` lowest and ``trim`` highest member scores; the plain
mean when fewer than ``2 trim + 1`` members have a valid score).  Side-by-side verdicts (A-D in candidate
terms, E invalid): ``majority`` (the verdict more than half of the members with a valid verdict gave,
else E with the reason "no majority") and ``table8`` (three valid verdicts ensembled by Table 8 of Titova
et al., as their annotators are; otherwise the strict majority).  An invalid member result (an invalid
grade, an E) is left out; an item no member judged validly is invalid for the jury too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from knockout._registry import Registry
from knockout._verdict import Verdict
from knockout.errors import ConfigError

ScoreAggregate = Callable[[Sequence[float], int], float]
VerdictAggregate = Callable[[Sequence[str]], Verdict | None]


def mean(scores: Sequence[float], trim: int = 0) -> float:
    return float(np.mean(scores))


def median(scores: Sequence[float], trim: int = 0) -> float:
    return float(np.median(scores))


def trimmed(scores: Sequence[float], trim: int = 1) -> float:
    """Mean without the ``trim`` lowest and highest scores (plain mean when too few to trim)."""
    s = sorted(scores)
    if trim > 0 and len(s) >= 2 * trim + 1:
        s = s[trim:-trim]
    return float(np.mean(s))


def _valid(verdicts: Sequence[str]) -> list[Verdict]:
    """The side-by-side classes A-D among ``verdicts`` (E and anything else left out)."""
    return [Verdict(v) for v in verdicts if v in (Verdict.A, Verdict.B, Verdict.C, Verdict.D)]


def majority(verdicts: Sequence[str]) -> Verdict | None:
    """The verdict of a strict majority of the valid verdicts (A-D), else None."""
    valid = _valid(verdicts)
    if not valid:
        return None
    top, n = Counter(valid).most_common(1)[0]
    return top if 2 * n > len(valid) else None


def table8(verdicts: Sequence[str]) -> Verdict | None:
    """Titova et al.'s Table 8 for three valid verdicts; the strict majority otherwise."""
    from knockout.sbs._ensemble import ensemble

    valid = _valid(verdicts)
    return ensemble(valid) if valid else None


score_aggregates: Registry[ScoreAggregate] = Registry("jury score aggregate", group="knockout.jury_scores")
score_aggregates.add("mean", mean, "mean of the members' valid scores")
score_aggregates.add("median", median, "median of the members' valid scores")
score_aggregates.add("trimmed", trimmed, "mean without the trim lowest and trim highest scores")

verdict_aggregates: Registry[VerdictAggregate] = Registry("jury verdict aggregate", group="knockout.jury_verdicts")
verdict_aggregates.add("majority", majority, "strict majority of the members' valid verdicts, else E")
verdict_aggregates.add("table8", table8, "Table 8 of Titova et al. for three verdicts, else strict majority")

DEFAULT = {"grade": "mean", "sbs": "majority"}


def check_aggregate(of: str, name: str) -> None:
    reg = score_aggregates if of == "grade" else verdict_aggregates
    if name not in reg:
        what = "scores" if of == "grade" else "side-by-side verdicts"
        raise ConfigError(f"unknown jury aggregate '{name}' for {what} (one of {', '.join(reg.names())})")
