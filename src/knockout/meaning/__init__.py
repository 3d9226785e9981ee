"""The meaning reader's sentence encoder: a packaged encoder run with numpy (no torch, no model hub).

The encoder reads an answer's meaning against its reference and its question with no judge call; those readings,
beside the judge's, are turned into points by the grade model (:mod:`knockout.grading`,
docs/methods.md#the-grade-model).
"""

from knockout.meaning._encoder import (
    DEFAULT_ENCODER,
    ENCODERS,
    Encoder,
    PackagedEncoder,
    encoder_available,
    load_encoder,
)

__all__ = ["DEFAULT_ENCODER", "ENCODERS", "Encoder", "PackagedEncoder", "encoder_available", "load_encoder"]
