"""The persuasion guard of individual grading: answers that talk to the grader found and graded without it
(:mod:`knockout.guard._guard`; docs/injection.md)."""

from knockout.guard._guard import (
    FLAG_AT,
    GUARD_MODES,
    WHOLE_AT,
    GuardDetails,
    detect,
    removed_share,
    resolve_guard,
    split_parts,
    visible,
    without,
)

__all__ = ["FLAG_AT", "GUARD_MODES", "WHOLE_AT", "GuardDetails", "detect", "removed_share", "resolve_guard",
           "split_parts", "visible", "without"]
