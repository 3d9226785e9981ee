"""Pairwise outcome files: read them for ``knockout elo``, write them from JDEval/MDEval runs.

A row names two players and the winner.  Player fields: ``evaluator_1``/``evaluator_2`` (or
``model_a``/``model_b``, Chatbot Arena style).  ``winner``: ``Assistant1``, ``1``, ``A``,
``model_a`` or the first player's name (first wins); ``Assistant2``, ``2``, ``B``, ``model_b`` or
the second player's name (second wins); ``equally good``, ``0``, ``tie``, ``tie (bothbad)`` (tie):
the spellings :meth:`knockout.Verdict.parse` reads.  A ``winner`` of ``null``, ``""``, ``invalid`` or
``E`` is a match without a valid outcome: skipped and counted.  JSONL or CSV.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from knockout._verdict import Verdict
from knockout.errors import InputError
from knockout.meta._frameworks import Judgement
from knockout.meta._verdicts import read_rows
from knockout.metrics._elo import Match

PLAYER_FIELDS = (("evaluator_1", "evaluator_2"), ("model_a", "model_b"))
_WINNER_NAMES = {1.0: "Assistant1", 0.0: "Assistant2", 0.5: "equally good"}


def load_matches(path: str | Path) -> tuple[list[Match], int]:
    """(matches, rows without a valid outcome) from a JSONL or CSV outcome file."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", file=str(p))
    matches: list[Match] = []
    skipped = 0
    for record, row in read_rows(p):
        fields = next((f for f in PLAYER_FIELDS if f[0] in row), PLAYER_FIELDS[0])
        names = []
        for f in fields:
            v = row.get(f)
            if v is None or not str(v).strip():
                raise InputError("missing field", file=str(p), record=record, field=f)
            names.append(str(v).strip())
        a, b = names
        if a == b:
            raise InputError(f"a player cannot meet itself ({a})", file=str(p), record=record, field=fields[1])
        w = row.get("winner")
        key = "" if w is None else str(w).strip()
        verdict = _winner(key, a, b)
        if verdict is Verdict.E:
            skipped += 1
            continue
        if verdict is None:
            raise InputError(f"winner must be Assistant1, Assistant2, equally good (or 1, 2, 0, or a player's "
                             f"name), got {w!r}", file=str(p), record=record, field="winner")
        matches.append((a, b, verdict.score_first() or 0.0))
    if not matches:
        raise InputError("no match with a valid outcome", file=str(p))
    return matches, skipped


def _winner(key: str, first: str, second: str) -> Verdict | None:
    """The outcome named by ``key`` (a verdict spelling or a player's name; empty or ``null``: E)."""
    if key.lower() in ("", "null"):
        return Verdict.E
    try:
        verdict: Verdict | None = Verdict.parse(key)
    except ValueError:
        verdict = None
    if verdict in (Verdict.A, Verdict.B, Verdict.E):
        return verdict
    if key in (first, second):
        return Verdict.A if key == first else Verdict.B
    return Verdict.TIE if verdict is not None else None


def outcome_rows(judgements: Sequence[Judgement], *, run_id: str, meta_judge: str) -> list[dict[str, Any]]:
    """JDEval/MDEval judgements as outcome rows (readable by :func:`load_matches`)."""
    return [
        {"item": j.item, "evaluator_1": j.evaluators[0], "evaluator_2": j.evaluators[1],
         "winner": _WINNER_NAMES[j.value] if j.valid and j.value is not None else None,
         "meta_judge": meta_judge, "run_id": run_id}
        for j in judgements if len(j.evaluators) == 2
    ]


def write_outcomes(path: str | Path, rows: Sequence[dict[str, Any]]) -> None:
    from knockout.data._output import write_output

    write_output(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
