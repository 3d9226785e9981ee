"""Calibration of a judge's grades to the experts' grades, and the review queue of answers to grade next.

* :func:`calibrate` fits a map from judge grades to expert grades (linear, isotonic, linear with per-question
  offsets; chosen by cross-validation) on the answers experts graded and reports RMSE, Pearson and kappa
  before and after on held-out answers only (:mod:`knockout.calibration._fit`).
* ``_run.calibrate_loaded``: the calibration of a stored grading run (its data file's human grades and the
  web app's expert grades), as ``knockout calibrate`` and ``report --calibrate`` show it.
* ``_review.rank`` / ``_review.review_loaded``: answers ranked by how much an expert grade would help
  (``knockout review``, the web app's "grade these next").
"""

from __future__ import annotations

from knockout.calibration._fit import (
    MAPS,
    MIN_GRADES,
    Calibration,
    Graded,
    calibrate,
    first_per_question,
    graded_rows,
)

__all__ = ["MAPS", "MIN_GRADES", "Calibration", "Graded", "calibrate", "first_per_question", "graded_rows"]
