"""Two readers, one grade: the judge's and the meaning reader's, combined so that buying one buys little.

Over the answers of a run that both readers read (at least :data:`MIN_ANSWERS`), each reader is put on a common
scale (its z-score over those answers: the judge's grades as shares of max points, the meaning reader's
similarities), and the grade is

* the **mean** of the two z-scores where the readers agree, put back on the judge's scale (the judge's mean and
  spread over those answers: a share of max points, clipped to 0..1);
* where they disagree by more than :data:`MARGIN` times their measured spread (the standard deviation of their
  difference over the run's answers), the **lower reader plus the margin**: an answer that moved one reader far
  from the other gets at most that margin for it.  Such an answer is marked ``readers disagree`` for an expert.

So an answer that persuades the judge but does not mean what the reference means, or one that copies the
reference's words without the judge's grade, gains at most the margin over its other reader.  The rule has no
parameter fitted to grades: the scale is the run's own, the margin a multiple of the readers' own spread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: fewer answers read by both readers than this: no common scale, the grade is the judge's
MIN_ANSWERS = 8
#: the margin, in units of the readers' spread (the SD of their z-score difference)
MARGIN = 1.0
#: an answer is marked when its readers' z-scores differ by more than 2 x MARGIN x spread (its grade is capped)
DISAGREE_WORDS = "the judge and the answer's meaning against the reference disagree: check it"


@dataclass
class Combined:
    """The combined grades (shares of max points; None where the grade stays the judge's) and what they rest on."""

    grades: list[float | None]
    #: the meaning reader put on the judge's scale (share of max points)
    meaning_grades: list[float | None]
    capped: list[bool]
    #: why no answer was combined (too few answers, no spread), else None
    why_not: str | None = None
    scale: dict[str, float] = field(default_factory=dict)


def combine(judge: Sequence[float | None], meaning: Sequence[float | None], margin: float = MARGIN,
            min_answers: int = MIN_ANSWERS) -> Combined:
    """Combine the judge's shares of max points and the meaning reader's similarities (None: not read)."""
    n = len(judge)
    both = [i for i in range(n) if judge[i] is not None and meaning[i] is not None]
    none: list[float | None] = [None] * n
    if len(both) < min_answers:
        return Combined(list(none), list(none), [False] * n,
                        why_not=f"{len(both)} answers read by both readers, fewer than {min_answers}: no common scale")
    j = np.array([judge[i] for i in both], dtype=float)
    s = np.array([meaning[i] for i in both], dtype=float)
    mj, sj, ms, ss = float(j.mean()), float(j.std()), float(s.mean()), float(s.std())
    if sj <= 1e-9 or ss <= 1e-9:
        return Combined(list(none), list(none), [False] * n,
                        why_not="a reader gives every answer the same reading: no common scale")
    zj, zs = (j - mj) / sj, (s - ms) / ss
    spread = float(np.std(zj - zs))
    cap = np.minimum(zj, zs) + margin * spread
    mean = (zj + zs) / 2
    z = np.minimum(mean, cap)
    grades, meaning_grades = list(none), list(none)
    capped = [False] * n
    for k, i in enumerate(both):
        grades[i] = float(np.clip(mj + sj * z[k], 0.0, 1.0))
        meaning_grades[i] = float(np.clip(mj + sj * zs[k], 0.0, 1.0))
        capped[i] = bool(cap[k] < mean[k] - 1e-9)
    return Combined(grades, meaning_grades, capped,
                    scale={"judge_mean": mj, "judge_sd": sj, "meaning_mean": ms, "meaning_sd": ss, "spread": spread,
                           "margin": margin, "answers": float(len(both))})


#: ``--readers``: auto (two where the meaning reader applies and the judge is not a simulation), two, judge
READER_MODES = ("auto", "two", "judge")


def resolve_readers(option: str, method: str, simulated: bool) -> tuple[str, str | None]:
    """``two`` or ``judge``, and why the second reader is off when ``auto`` leaves it off (None otherwise).

    ``auto`` is ``two`` for individual grading with a real judge when the encoder is installed; a simulated judge
    (``scripted``) reads no text, so its grades are not combined with a reading of the text unless asked
    (``two``)."""
    from knockout.errors import ConfigError
    from knockout.meaning._encoder import encoder_available

    if option not in READER_MODES:
        raise ConfigError(f"unknown readers mode '{option}' (known: {', '.join(READER_MODES)})")
    if option == "judge":
        return "judge", None
    if method != "individual":
        if option == "two":
            raise ConfigError(f"--readers two: the meaning reader is for individual grading, not '{method}'")
        return "judge", f"the meaning reader is for individual grading, not '{method}'"
    missing = encoder_available()
    if missing is not None:
        if option == "two":
            raise ConfigError(f"--readers two: {missing}")
        return "judge", missing
    if option == "auto" and simulated:
        return "judge", "a simulated judge reads no text: its grades are not combined with a reading of it"
    return "two", None
