"""The one-call notebook API: grade a table of answers, get the table back with the judge's grades.

``knockout.grade(df, judge=..., method=..., columns=...)`` (and ``await knockout.grade_async(...)``) run
one grading run through the usual pipeline (:func:`knockout.runs.execute`) and return the user's own
rows, under the user's own column names, with the grade, its validity, the judge's explanation and the
human grade added.
"""

from knockout.notebook._grade import grade, grade_async

__all__ = ["grade", "grade_async"]
