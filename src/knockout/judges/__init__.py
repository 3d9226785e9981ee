"""Judges: one async interface, backends found by name from a spec string."""

from knockout.judges._base import Completion, GenParams, Judge, JudgeRequest, Message
from knockout.judges._options import JudgeOptions
from knockout.judges._registry import DEFAULT_JUDGE, backend_options, backends, make_judge, parse_spec

__all__ = [
    "DEFAULT_JUDGE",
    "Completion",
    "GenParams",
    "Judge",
    "JudgeOptions",
    "JudgeRequest",
    "Message",
    "backend_options",
    "backends",
    "make_judge",
    "parse_spec",
]
