"""Calibration of a judge against experts: prediction-powered estimates (``_ppi``: a figure of the experts'
grades from the judge's grades on every answer and the experts' on a subset, PPI++ through ``ppi-python``),
the judge's own noise (``_noise``: test-retest reliability of repeated draws, the spread per answer,
intervals with the draw-to-draw variance), the grade model adapted to the teacher's grades (``_fit``: an
exam-level offset and slope and per-question offsets with the frozen model as prior, figures on held-out answers;
``_run``: a stored run's, as ``knockout calibrate`` and ``report --calibrate`` show it) and the review queue of
the answers an expert grade would help most (``_review``: ``knockout review``).  See docs/calibration.md."""

from typing import TYPE_CHECKING

from knockout._lazy import lazy_exports

_EXPORTS = {
    "MIN_GRADES": "knockout.calibration._fit",
    "Calibration": "knockout.calibration._fit",
    "Graded": "knockout.calibration._fit",
    "calibrate": "knockout.calibration._fit",
    "first_per_question": "knockout.calibration._fit",
    "graded_rows": "knockout.calibration._fit",
    "draw_intervals": "knockout.calibration._noise",
    "draw_matrix": "knockout.calibration._noise",
    "icc1": "knockout.calibration._noise",
    "noise_report": "knockout.calibration._noise",
    "noise_tables": "knockout.calibration._noise",
    "MIN_LABELLED": "knockout.calibration._ppi",
    "PPIEstimate": "knockout.calibration._ppi",
    "power_tuning": "knockout.calibration._ppi",
    "ppi_mean": "knockout.calibration._ppi",
    "ppi_total": "knockout.calibration._ppi",
    "Reliability": "knockout.calibration._trust",
    "Trust": "knockout.calibration._trust",
    "question_reliability": "knockout.calibration._trust",
    "trust_marks": "knockout.calibration._trust",
}
__all__ = [
    "MIN_GRADES",
    "MIN_LABELLED",
    "Calibration",
    "Graded",
    "PPIEstimate",
    "Reliability",
    "Trust",
    "calibrate",
    "draw_intervals",
    "draw_matrix",
    "first_per_question",
    "graded_rows",
    "icc1",
    "noise_report",
    "noise_tables",
    "power_tuning",
    "ppi_mean",
    "ppi_total",
    "question_reliability",
    "trust_marks",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from knockout.calibration._fit import (
        MIN_GRADES,
        Calibration,
        Graded,
        calibrate,
        first_per_question,
        graded_rows,
    )
    from knockout.calibration._noise import draw_intervals, draw_matrix, icc1, noise_report, noise_tables
    from knockout.calibration._ppi import MIN_LABELLED, PPIEstimate, power_tuning, ppi_mean, ppi_total
    from knockout.calibration._trust import Reliability, Trust, question_reliability, trust_marks
