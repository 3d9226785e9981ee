"""The raw replies and call traces recorded in a result's details (the engine's ``attempts``), and a result's
match references completed by the stored matches: what ``export``, the tidy tables and the viewer read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from knockout.storage._store import MatchRow


def attempts_in(obj: Any) -> Iterator[dict[str, Any]]:
    """Every attempt (a request's key, raw reply, cached, error) recorded anywhere in a result's details, in the
    engine's call traces (depth first, in recorded order)."""
    if isinstance(obj, dict):
        attempts = obj.get("attempts")
        if isinstance(attempts, list):
            yield from (a for a in attempts if isinstance(a, dict))
        for k, v in obj.items():
            if k != "attempts" and isinstance(v, (dict, list)):
                yield from attempts_in(v)
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)):
                yield from attempts_in(v)


def replies_in(obj: Any) -> Iterator[str]:
    """Every raw reply recorded anywhere in a result's details (depth first, in recorded order)."""
    return (a["reply"] for a in attempts_in(obj) if isinstance(a.get("reply"), str))


def expand(details: dict[str, Any], matches: dict[str, MatchRow]) -> dict[str, Any]:
    """The details with each match reference completed by the stored match (both games, raw replies)."""
    refs = details.get("matches")
    if not isinstance(refs, list) or not matches:
        return details
    full = []
    for ref in refs:
        m = matches.get(str(ref.get("match_id"))) if isinstance(ref, dict) else None
        full.append({**ref, "games": m.games} if m is not None else ref)
    return {**details, "matches": full}
