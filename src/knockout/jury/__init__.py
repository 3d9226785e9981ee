"""Juries: several judges grade (or judge side by side) the same items; their results are aggregated.

Each member is an ordinary run (the same run id, cache and results as the solo run); the jury writes the
aggregate as its own run (kind ``jury``).  See docs/juries.md.
"""

from knockout.jury._aggregate import score_aggregates, verdict_aggregates
from knockout.jury._build import grade_member_runs, make_jury, sbs_member_runs
from knockout.jury._members import JuryFile, MemberSpec, member_from_table, read_jury_file, unique_labels
from knockout.jury._run import JuryDetails, JuryReport, JuryRun, JurySbsDetails, JurySummary

__all__ = [
    "JuryDetails",
    "JuryFile",
    "JuryReport",
    "JuryRun",
    "JurySbsDetails",
    "JurySummary",
    "MemberSpec",
    "grade_member_runs",
    "make_jury",
    "member_from_table",
    "read_jury_file",
    "sbs_member_runs",
    "score_aggregates",
    "unique_labels",
    "verdict_aggregates",
]
