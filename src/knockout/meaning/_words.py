"""The meaning reader's reading in words, as the CLI, the viewer and the trust tables show it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the similarity of an answer that says nothing beyond its question's words
NOTHING_BEYOND = 0.0


def meaning_points(rd: Mapping[str, Any]) -> str:
    """The meaning reader's grade on the judge's scale (``rd["meaning"]``) in words: "nothing beyond the question"
    for an answer that says nothing beyond it (``rd["similarity"]`` 0, which the combination still maps onto the
    scale: a similarity of 0.000 read as 2.19 of 4 points, issue 61)."""
    readings = rd.get("readings")
    sim = rd.get("similarity", readings.get("similarity") if isinstance(readings, Mapping) else None)
    meaning = rd.get("meaning")
    nothing = readings.get("nothing_beyond") if isinstance(readings, Mapping) else None
    if (isinstance(sim, int | float) and sim <= NOTHING_BEYOND) or nothing == 1:
        return "nothing beyond the question"
    return "-" if not isinstance(meaning, int | float) else f"{meaning:.2f}"
