"""The German grade scale (1.0 best .. 4.0 pass, 5.0 fail) and each exam's information about it.

SciEx reports an examinee's exam result also on the German scale (Dinh et al. 2024, section 4.1: "the
detailed mapping from the scores to the German grade scale is defined by the lecturers").  The
authors' data records the lecturers' grade per exam (``TotalGradeGermanScale`` in the grade files,
``MedianStudentGradeGermanScale`` in ``additional_info.json``) but no mapping from points to grades, so
a new examinee cannot be placed on the scale.  knockout reads the mapping from an optional field of
the exam's ``additional_info.json``::

    "GradeBoundaries": {"1.0": 57, "1.3": 54, "1.7": 51, ..., "4.0": 30}

the fewest points for each grade (any subset of 1.0, 1.3, 1.7, 2.0, 2.3, 2.7, 3.0, 3.3, 3.7, 4.0; fewer
points than the worst grade listed is 5.0), out of ``MaximumTotalPoints`` (else the sum of the
questions' maximum points).  Without it, :data:`DEFAULT_BOUNDARIES` applies and every output that uses
it says so: 50% of the points pass with 4.0, and each further 5 percentage points improve the grade by
one step (95% and more: 1.0), a linear scale common at German universities.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knockout.data._io import to_number
from knockout.errors import InputError

#: The steps of the German scale, best first (5.0: failed).
GERMAN_STEPS = (1.0, 1.3, 1.7, 2.0, 2.3, 2.7, 3.0, 3.3, 3.7, 4.0)
FAIL = 5.0
#: The default mapping when an exam has no ``GradeBoundaries``: (grade, least share of the points).
DEFAULT_BOUNDARIES: tuple[tuple[float, float], ...] = tuple(
    (g, round(0.95 - 0.05 * i, 2)) for i, g in enumerate(GERMAN_STEPS)
)
#: What outputs say when the default mapping was used.
DEFAULT_NOTE = ("German grades from knockout's default mapping (no GradeBoundaries in the exam info): 50% of the "
                "points = 4.0, each further 5 points of percentage one step better, 95% = 1.0")
#: The exam-level fields of ``additional_info.json`` that knockout keeps (in each question's ``meta["exam_info"]``).
EXAM_FIELDS = ("MaximumTotalPoints", "AverageStudentTotalPoints", "MedianStudentGradeGermanScale", "GradeBoundaries")


@dataclass(frozen=True)
class Boundaries:
    """A points-to-grade mapping: (grade, least share of the maximum points), best grade first."""

    steps: tuple[tuple[float, float], ...]
    default: bool = False

    def grade(self, share: float) -> float:
        """The German grade of a share (0..1) of the maximum points."""
        for g, least in self.steps:
            if share >= least - 1e-9:
                return g
        return FAIL


DEFAULT = Boundaries(DEFAULT_BOUNDARIES, default=True)


def _number(value: Any, *, file: str | None, record: str, field: str) -> float:
    return to_number(value, file=Path(file or "additional_info.json"), record=record, field=field)


def parse_boundaries(raw: Any, *, file: str | None = None, record: str = "exam") -> dict[str, float]:
    """Check a ``GradeBoundaries`` object (grade -> least points) and return it normalised
    (``{"1.0": 57.0, ...}``, best grade first).  Bad input is an :class:`InputError` naming the field."""
    field = "GradeBoundaries"
    if not isinstance(raw, dict) or not raw:
        raise InputError("expected an object mapping German grades to the least points, e.g. "
                         '{"1.0": 57, "4.0": 30}', file=file, record=record, field=field)
    out: dict[float, float] = {}
    for key, value in raw.items():
        grade = _number(key, file=file, record=record, field=field)
        if not any(abs(grade - s) < 1e-9 for s in GERMAN_STEPS):
            steps = ", ".join(f"{s:.1f}" for s in GERMAN_STEPS)
            raise InputError(f"'{key}' is not a passing German grade ({steps})", file=file, record=record,
                             field=f"{field}.{key}")
        points = _number(value, file=file, record=record, field=f"{field}.{key}")
        if points < 0:
            raise InputError(f"least points must be >= 0 (got {points:g})", file=file, record=record,
                             field=f"{field}.{key}")
        out[round(grade, 1)] = points
    ordered = sorted(out.items())
    for (g1, p1), (g2, p2) in itertools.pairwise(ordered):
        if p1 < p2:
            raise InputError(f"grade {g1:.1f} needs {p1:g} points, fewer than the worse grade {g2:.1f} ({p2:g})",
                             file=file, record=record, field=f"{field}.{g1:.1f}")
    return {f"{g:.1f}": p for g, p in ordered}


def boundaries_for(info: dict[str, Any] | None, max_total: float) -> Boundaries:
    """The exam's mapping from its info (``GradeBoundaries`` in points, out of ``MaximumTotalPoints`` or
    ``max_total``), else :data:`DEFAULT`."""
    raw = (info or {}).get("GradeBoundaries")
    if not raw:
        return DEFAULT
    total = (info or {}).get("MaximumTotalPoints") or max_total
    if not total or total <= 0:
        return DEFAULT
    steps = tuple((float(g), float(p) / float(total)) for g, p in sorted(raw.items(), key=lambda kv: float(kv[0])))
    return Boundaries(steps)


def exam_info(raw: dict[str, Any], *, file: str | None = None) -> dict[str, Any]:
    """The exam-level fields of an ``additional_info.json`` object, checked (numbers, boundaries)."""
    out: dict[str, Any] = {}
    for key in EXAM_FIELDS:
        value = raw.get(key)
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            continue
        if key == "GradeBoundaries":
            out[key] = parse_boundaries(value, file=file)
        else:
            x = _number(value, file=file, record="exam", field=key)
            if x < 0 or (key == "MaximumTotalPoints" and x == 0):
                raise InputError(f"must be a number > 0 (got {x:g})" if key == "MaximumTotalPoints" else
                                 f"must be >= 0 (got {x:g})", file=file, record="exam", field=key)
            if key == "MedianStudentGradeGermanScale" and not 1.0 <= x <= FAIL:
                raise InputError(f"must be a German grade within 1.0..5.0 (got {x:g})", file=file, record="exam",
                                 field=key)
            out[key] = x
    return out
