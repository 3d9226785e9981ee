"""Finding a stored run, its item set and results, and what it cost."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knockout.annotations import add_web_grades
from knockout.data._records import ItemSet
from knockout.errors import ConfigError
from knockout.reports._export import open_existing
from knockout.storage._store import MatchRow, RunRecord, Store


@dataclass
class LoadedRun:
    store_path: Path
    run: RunRecord
    items: ItemSet
    results: list[dict[str, Any]]
    cost: dict[str, Any]
    #: where the human grades came from: the input file's graders, the web app's (``web:<user>``), counts
    human_grades: dict[str, Any] = field(default_factory=dict)
    #: the run's pairwise matches (both games with their grades), for the position-bias figures
    matches: list[MatchRow] = field(default_factory=list)

    @property
    def label(self) -> str:
        extra = self.run.config.get("options", {}).get("extra") or {}
        opts = ",".join(f"{k}={v}" for k, v in sorted(extra.items()))
        return f"{self.run.method} · {self.run.judge}" + (f" · {opts}" if opts else "")

    def header(self) -> dict[str, Any]:
        return {"run_id": self.run.id, "store": str(self.store_path), "method": self.run.method,
                "judge": self.run.judge, "simulated_judge": self.run.simulated,
                "data": self.run.data_source, "status": self.run.status, "label": self.label,
                "options": self.run.config.get("options", {}), "results": len(self.results),
                "human_grades": self.human_grades}


def parse_ref(ref: str) -> tuple[Path, str | None]:
    """``STORE`` or ``STORE:RUN_ID`` (an existing file name containing ':' is taken whole)."""
    if Path(ref).is_file() or ":" not in ref:
        return Path(ref), None
    path, _, run_id = ref.rpartition(":")
    return Path(path), run_id or None


def run_cost(store: Store, run: RunRecord) -> dict[str, Any]:
    """Judge requests, live calls, tokens and time of a run.

    ``requests``: what the method asked for in its latest invocation, cache hits included (the method's
    cost in calls whatever the cache held).  ``live_calls``, tokens and ``judge_s`` (summed latency) come
    from the store's call log: every call actually sent for this run over all its invocations (a resumed
    run adds up).  ``wall_s``: the latest invocation's wall time from the run summary.
    """
    s = run.summary or {}
    try:
        row = store.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(c.prompt_tokens), 0), COALESCE(SUM(c.completion_tokens), 0), "
            "COALESCE(SUM(c.latency_s), 0) FROM call_log l JOIN calls c ON c.key = l.key "
            "WHERE l.run_id = ? AND l.error IS NULL",
            (run.id,),
        ).fetchone()
    except sqlite3.Error as exc:  # pragma: no cover - a damaged store
        raise ConfigError(f"{store.path}: cannot read the call log ({exc})") from None
    live, pt, ct, lat = int(row[0]), int(row[1]), int(row[2]), float(row[3])
    return {
        "requests": int(s.get("judge_calls", 0)) + int(s.get("cache_hits", 0)),
        "live_calls": live,
        "prompt_tokens": pt,
        "completion_tokens": ct,
        "tokens": pt + ct,
        "judge_s": round(lat, 3),
        "wall_s": s.get("wall_s"),
        "format_retries": s.get("format_retries", 0),
    }


KIND_NAMES = {"grade": "grade", "sbs": "side-by-side", "meta": "meta-evaluation", "jury": "jury"}
#: what each command reads, in order of preference when no run id is given
REPORT_KINDS = ("grade", "sbs")
EXPORT_KINDS = ("grade", "sbs", "meta")


def content_kind(run: RunRecord) -> str:
    """What a run's results are: its kind, or for a jury the kind of its members (``grade`` or ``sbs``),
    so that a jury's aggregate is read like a run of that kind."""
    return str(run.config.get("of", "grade")) if run.kind == "jury" else run.kind


def pick_run(store: Store, path: Path, run_id: str | None, kinds: tuple[str, ...]) -> RunRecord:
    """The one way ``report``, ``compare`` and ``export`` pick a run: the run ``run_id`` (whose results must
    be of one of ``kinds``), or else the latest run of the first of ``kinds`` the store holds (a member run
    of a jury stands for its jury: the latest jury that lists it)."""
    runs = store.runs()
    if run_id is not None:
        found = store.get_run(run_id)
        if found is None:
            raise ConfigError(f"{path}: no run '{run_id}' (runs: {', '.join(r.id for r in runs) or 'none'})")
        if content_kind(found) not in kinds:
            raise ConfigError(f"{path}: run {found.id} is a {KIND_NAMES.get(found.kind, found.kind)} run; this "
                              f"reads {' and '.join(KIND_NAMES.get(k, k) for k in kinds)} runs")
        return found
    jury_of = {str(m.get("run_id")): r for r in runs if r.kind == "jury" for m in r.config.get("members", [])}
    for kind in kinds:
        of_kind = [r for r in runs if content_kind(r) == kind]
        if of_kind:
            latest = of_kind[-1]
            return jury_of.get(latest.id, latest)
    raise ConfigError(f"{path}: no {' or '.join(KIND_NAMES.get(k, k) for k in kinds)} runs")


def find_run(path: Path, run_id: str | None = None, kinds: tuple[str, ...] = REPORT_KINDS) -> RunRecord:
    """The run ``run_id``, or else the latest run of the first of ``kinds`` (default: grade, then sbs)."""
    with open_existing(path) as store:
        return pick_run(store, path, run_id, kinds)


def load_run(path: Path, run_id: str | None = None, *, details: bool = True) -> LoadedRun:
    """A run (default: the latest grade run) with its item-set snapshot, results and cost (``details=False``:
    each result's breakdown groups only, not its raw replies: what agreement reports read).

    The human grades are those of the snapshot (the input file) plus the grades entered in the web app on
    the same answers in the same store (:func:`knockout.annotations.add_web_grades`, graders ``web:<user>``)."""
    with open_existing(path) as store:
        run = pick_run(store, path, run_id, ("grade",))
        items = store.items_for_run(run.id)
        if items is None:
            raise ConfigError(f"{path}: run {run.id} has no stored item set (made by an older version?)")
        results = store.results(run.id, details=details)
        if not results:
            raise ConfigError(f"{path}: run {run.id} has no results (status {run.status})")
        cost = run_cost(store, run)
        if run.kind == "jury":
            from knockout.reports._jury import jury_cost

            cost = jury_cost(store, run, cost)
        items, human = add_web_grades(store, items)
        return LoadedRun(Path(path), run, items, results, cost, human, store.matches(run.id))


def load_ref(ref: str, *, details: bool = True) -> LoadedRun:
    path, run_id = parse_ref(ref)
    return load_run(path, run_id, details=details)
