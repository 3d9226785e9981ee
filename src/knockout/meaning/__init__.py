"""The second reader of a grade: the answer's meaning against the reference, read by a packaged sentence encoder.

The judge reads an answer; this reader compares what it means with what the reference means, with no judge
call (docs/methods.md#two-readers).  The two fail in different places, and a grade combines them so that buying
one buys nothing (:mod:`knockout.meaning._combine`).
"""

from knockout.meaning._combine import DISAGREE_WORDS, MARGIN, MIN_ANSWERS, Combined, combine, resolve_readers
from knockout.meaning._encoder import (
    DEFAULT_ENCODER,
    ENCODERS,
    Encoder,
    PackagedEncoder,
    encoder_available,
    load_encoder,
)
from knockout.meaning._reading import Reading, demote, read_meaning

__all__ = ["DEFAULT_ENCODER", "DISAGREE_WORDS", "ENCODERS", "MARGIN", "MIN_ANSWERS", "Combined", "Encoder",
           "PackagedEncoder", "Reading", "combine", "demote", "encoder_available", "load_encoder", "read_meaning",
           "resolve_readers"]
