"""The grade model: an answer's readings become its points, on an absolute scale, one answer at a time
(docs/methods.md#the-grade-model).

Readers (``judges/``: the judge's grade and its spread; ``meaning/``: the sentence encoder; ``guard/``: the
persuasion guard's score) give readings (:mod:`._readings`); one fitted model turns an answer's readings into its
points (:mod:`._model`, shipped as ``model.json``, refitted by ``bench/fit_grade_model.py``); the teacher's grades
move it to the teacher's level (:mod:`._adapt`).  An answer's grade depends only on its own readings, its question
and, where given, the teacher's grades of its exam.
"""

from knockout.grading._grade import DISAGREE_WORDS, READER_MODES, grade_all, resolve_readers
from knockout.grading._model import GradeModel, Prediction, default_model
from knockout.grading._normalise import normalise
from knockout.grading._readings import READINGS, Readings, default_encoder, demote, read_answers

__all__ = ["DISAGREE_WORDS", "READER_MODES", "READINGS", "GradeModel", "Prediction", "Readings", "default_encoder",
           "default_model", "demote", "grade_all", "normalise", "read_answers", "resolve_readers"]
