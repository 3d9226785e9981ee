"""Export a run's per-item results with every raw reply, for every kind of run.

Replies are collected from the typed details wherever the engine recorded them (``attempts`` of each call
trace: an individual grade, each order of a side-by-side item with its debate agents, each meta-judgement
with its debate or criteria), and, for pairwise methods, from the matches the item played (stored once in
the run's ``matches`` and joined here).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from knockout.data._csv import Writer, dicts_text
from knockout.errors import ConfigError
from knockout.reports._replies import expand, replies_in
from knockout.storage._store import RunRecord, Store

#: the export of every reply (streamed row by row)
FORMATS = ("csv", "jsonl")
#: the tidy tables (knockout.reports._tidy)
TIDY_FORMATS = ("csv", "jsonl", "parquet")


def iter_export_rows(store: Store, run: RunRecord) -> Iterator[dict[str, Any]]:
    """One run's export rows, one at a time (results read from the store in pages)."""
    matches = {m.match_id: m for m in store.matches(run.id)}
    for r in store.iter_results(run.id):
        details = expand(r["details"], matches)
        yield {"run_id": run.id, "kind": run.kind, "method": run.method, "judge": run.judge,
               "status": run.status, "simulated_judge": run.simulated, **r, "details": details,
               "replies": list(replies_in(details))}


def export_rows(store: Store, run: RunRecord) -> list[dict[str, Any]]:
    return list(iter_export_rows(store, run))


#: the CSV's columns: ``grade`` is the run's grade of the item (for ``--verdict expected`` the
#: probability-weighted mean of the judge's distribution over the grades, not the number its reply states);
#: ``judge_replies`` is the judge's text, every reply of the item joined by `` ||| ``; ``flagged`` (1/0; empty where the
#: persuasion guard did not run) and ``grade_full``: the grade the answer would have had without the guard;
#: ``grade_judge``, ``grade_meaning`` and ``meaning_similarity``: the judge's grade, the grade model's meaning side
#: (points) and the similarity as read, of a grade the model made (empty where the grade is the judge's alone),
#: ``readers_disagree`` (1/0: the cap bound), ``grade_model`` (the model's name and digest) and ``readings`` (every
#: reading the model read, JSON)
CSV_HEADER = ["run_id", "kind", "method", "judge", "status", "simulated_judge", "item_id", "question_id", "grade",
              "valid", "error", "judge_replies", "flagged", "grade_full", "grade_judge", "grade_meaning",
              "meaning_similarity", "readers_disagree", "grade_model", "readings"]


def export_lines(store: Store, run: RunRecord, fmt: str) -> Iterator[str]:
    """The export of one run as text, a row at a time (JSON lines as stored, or CSV with a header, its text cells
    neutralised where a spreadsheet would read a formula)."""
    if fmt == "jsonl":
        for r in iter_export_rows(store, run):
            yield json.dumps(r, ensure_ascii=False) + "\n"
        return
    buf = io.StringIO()
    w = Writer(buf)  # the one CSV writer: text cells a spreadsheet would read as a formula neutralised
    w.writerow(CSV_HEADER)
    for r in iter_export_rows(store, run):
        d = r["details"]
        g = d.get("guard") if isinstance(d.get("guard"), dict) else None
        full = g.get("grade_full") if g else None
        rd = d.get("readers") if isinstance(d.get("readers"), dict) and d["readers"].get("combined") is not None \
            else {}
        w.writerow([
            run.id, run.kind, run.method, run.judge, run.status, int(run.simulated), r["item_id"], r["question_id"],
            "" if r["score"] is None else r["score"], int(r["valid"]), d.get("error") or "",
            " ||| ".join(r["replies"]), "" if g is None else int(bool(g.get("flagged"))), "" if full is None else full,
            *("" if rd.get(k) is None else rd[k] for k in ("judge", "meaning", "similarity")),
            "" if not rd else int(bool(rd.get("disagree"))),
            "" if not rd.get("model") else f"{rd['model']}@{rd.get('model_sha')}",
            "" if not rd.get("readings") else json.dumps(rd["readings"], sort_keys=True),
        ])
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    if buf.tell():
        yield buf.getvalue()


def _pick_exportable(store: Store, db: Path, run_id: str | None, partial: bool) -> RunRecord:
    from knockout.reports._runs import pick_run, refuse_partial

    return refuse_partial(store, pick_run(store, run_id, "export"), partial, "export")


def export_to(db: Path, run_id: str | None, fmt: str, out: TextIO, *, partial: bool = False) -> tuple[RunRecord, int]:
    """Write one run's export to ``out`` row by row (memory stays flat); (run, number of rows).

    The run is ``run_id`` or the latest run of any kind; a run that is not complete is refused unless
    ``partial`` (its rows then say its status)."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format '{fmt}' ({' or '.join(FORMATS)}; parquet writes the tidy table)")
    with Store.open_existing(db) as store:
        run = _pick_exportable(store, db, run_id, partial)
        out.writelines(export_lines(store, run, fmt))
        return run, store.count_results(run.id)


def export_run(db: Path, run_id: str | None, fmt: str, *, partial: bool = False) -> tuple[RunRecord, int, str]:
    """(run, number of rows, text) of one run's results (:func:`export_to` into a string)."""
    buf = io.StringIO()
    run, rows = export_to(db, run_id, fmt, buf, partial=partial)
    return run, rows, buf.getvalue()


def export_tidy(db: Path, run_id: str | None, fmt: str, table: str | None, output: Path | None, *,
                partial: bool = False) -> tuple[RunRecord, int, str | None]:
    """One run's tidy table (:mod:`knockout.reports._tidy`): written to ``output`` as Parquet, or returned
    as CSV/JSONL text.  (run, number of rows, text or None)."""
    from knockout.reports._tidy import tidy_rows, write_parquet

    if fmt not in TIDY_FORMATS:
        raise ConfigError(f"unknown export format '{fmt}' ({', '.join(TIDY_FORMATS)})")
    if fmt == "parquet" and output is None:
        raise ConfigError("--format parquet writes a file: give --output FILE")
    with Store.open_existing(db) as store:
        run = _pick_exportable(store, db, run_id, partial)
        rows = tidy_rows(store, run, table)
    if fmt == "parquet":
        assert output is not None
        write_parquet(rows, output)
        return run, len(rows), None
    if fmt == "jsonl":
        return run, len(rows), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return run, len(rows), dicts_text(rows)
