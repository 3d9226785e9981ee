"""The one normalisation of an answer's text before any reader reads it.

NFKC folds compatibility forms (fullwidth letters, ligatures, superscripts) to the letters they stand for, and
every *format* character (Unicode category ``Cf``: zero-width spaces and joiners, bidi marks and overrides, the
invisible tag characters, soft hyphens) is removed: a student who puts a zero-width character inside every word
reads, to the judge, the meaning reader and the lexical readings alike, as the words a person sees (issue 58: one
zero-width character per word had defeated question demoting).
"""

from __future__ import annotations

import unicodedata


def normalise(text: str) -> str:
    """``text`` in NFKC with every format character (category ``Cf``) removed."""
    folded = unicodedata.normalize("NFKC", text)
    if folded.isascii():
        return folded
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")
