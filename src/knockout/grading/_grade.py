"""The grade of each answer from its readings: where the grade model meets a run (``--readers``).

``grade_all`` takes the answers' judge readings (the judge's valid grades, the spread of its distribution) and
their other readings (:func:`knockout.grading._readings.read_answers`, started beside the judge's requests so the
encoder never waits for them nor they for it) and gives each answer its grade from the shipped model
(:func:`knockout.grading._model.default_model`) and the record stored with it (``details["readers"]``): every
reading, the model's name and digest, the meaning side's grade and whether the cap bound (``disagree``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knockout.grading._model import GradeModel, Prediction, default_model
from knockout.grading._readings import Readings

#: ``--readers``: auto (two where the encoder is installed and the judge is not a simulation), two, judge
READER_MODES = ("auto", "two", "judge")
DISAGREE_WORDS = ("the judge's grade is far above what the answer's meaning against the reference is worth: the "
                  "grade is capped there, check it")


def resolve_readers(option: str, method: str, simulated: bool) -> tuple[str, str | None]:
    """``two`` or ``judge``, and why the grade model is off when ``auto`` leaves it off (None otherwise).

    ``auto`` is ``two`` for individual grading with a real judge when the encoder is installed; a simulated judge
    (``scripted``) reads no text, so its grades are not put through a model of a real judge's readings unless
    asked (``two``)."""
    from knockout.errors import ConfigError
    from knockout.meaning._encoder import encoder_available

    if option not in READER_MODES:
        raise ConfigError(f"unknown readers mode '{option}' (known: {', '.join(READER_MODES)})")
    if option == "judge":
        return "judge", None
    if method != "individual":
        if option == "two":
            raise ConfigError(f"--readers two: the grade model is for individual grading, not '{method}'")
        return "judge", f"the grade model is for individual grading, not '{method}'"
    missing = encoder_available()
    if missing is not None:
        if option == "two":
            raise ConfigError(f"--readers two: {missing}")
        return "judge", missing
    if option == "auto" and simulated:
        return "judge", "a simulated judge reads no text: its grades are not put through the grade model"
    return "two", None


def record(readings: Readings, pred: Prediction, judge_points: float, max_points: float, model: GradeModel,
           encoder: str | None) -> dict[str, Any]:
    """What a grade rests on, stored with it (``details["readers"]``, points where a grade)."""
    return {"judge": judge_points, "similarity": readings.get("similarity"), "encoder": encoder,
            "readings": readings.record(), "model": model.name, "model_sha": model.digest, "pattern": pred.pattern,
            "full": round(pred.full * max_points, 6),
            "meaning": None if pred.meaning is None else round(pred.meaning * max_points, 6),
            "combined": round(pred.share * max_points, 6), "disagree": pred.capped,
            **({"why_not": readings.why_not} if readings.why_not else {})}


def grade_all(readings: Sequence[Readings], judge: Sequence[float | None], judge_sd: Sequence[float | None],
              max_points: Sequence[float], encoder: str | None,
              model: GradeModel | None = None) -> list[dict[str, Any] | None]:
    """Each answer's record (its grade in ``combined``, points), or None where the judge gave no valid grade.
    ``judge``/``judge_sd`` in points; every answer graded from its own readings alone."""
    model = model or default_model()
    out: list[dict[str, Any] | None] = []
    for rd, j, sd, mp in zip(readings, judge, judge_sd, max_points, strict=True):
        if j is None:
            out.append(None)
            continue
        rd.values["judge"] = min(max(j / mp, 0.0), 1.0)
        rd.values["judge_sd"] = None if sd is None else sd / mp
        out.append(record(rd, model.predict_one(rd.values), j, mp, model, encoder))
    return out
