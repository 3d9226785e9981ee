"""A kind of run as one object: how its runs are written and how they are read back.

Each :data:`knockout.runs.run_kinds` entry is a :class:`RunKind`.  It names the :class:`Run` class that
writes its runs (through the one lifecycle, :func:`knockout.runs.execute`), the typed summary model the
run's summary is written as and read back as, and its *read hooks*: what ``knockout report`` prints
(:meth:`RunKind.report`), what ``knockout compare`` prints (:meth:`RunKind.compare`), its tidy tables
(:meth:`RunKind.tidy`), the rows and facts of the transcript viewer (:meth:`RunKind.listing`,
:meth:`RunKind.item_facts`), what it cost (:meth:`RunKind.cost`) and the tables shown after a run
(:meth:`RunKind.after_run_tables`).  ``reports/``, ``export``, ``compare``, the viewer and the web app
ask the kind through the registry (:func:`kind_of`); none of them switches on a kind's name.

A kind that leaves a hook out gets what every kind shares: every run can be listed (``knockout runs``),
exported with its raw replies (``knockout export``), and read in the viewer (its results and every judge
call); ``report``, ``compare`` and the tidy tables say clearly that the kind has none.  A plugin may register
a bare :class:`Run` subclass: it is read as a :class:`RunKind` with no hooks.

Every hook that reads gets the open :class:`~knockout.storage.Store`; the caller opens it once.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ValidationError

from knockout.errors import ConfigError
from knockout.metrics._constants import DEFAULT_RESAMPLES
from knockout.runs._models import RunSummary

if TYPE_CHECKING:
    from knockout.runs._run import Run
    from knockout.storage._store import RunRecord, Store


class TableLike(Protocol):
    """A table of strings (:class:`knockout.reports.Table`)."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str


@dataclass
class ReportOptions:
    """What ``knockout report`` and ``knockout compare`` were asked for."""

    level: str = "question"
    by: Sequence[str] = ()
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    #: with ``details=False`` a report reads only each result's breakdown groups, not its raw replies
    details: bool = False
    #: called once a report has read what it keeps (the CLI moves it out of the garbage collector's reach)
    on_loaded: Callable[[], None] | None = None
    #: ``compare``: a price table (:func:`knockout.reports._prices.load_prices`) for costs in money
    prices: Any = None
    #: ``report --calibrate``: add the calibration to expert grades (kinds whose results are grades)
    calibrate: bool = False
    #: with ``calibrate``: fit on this many expert grades per question, the figures on the others
    calibrate_per_question: int | None = None


@dataclass
class ReportPage:
    """A report or a comparison: the ``--json`` object, its tables, and its plots (made only when asked)."""

    title: str
    data: dict[str, Any]
    tables: list[Any]
    plots: Callable[[], dict[str, bytes]] = dict
    #: the heads of the runs shown (status and simulated judge: what a reader must see first)
    heads: list[dict[str, Any]] = field(default_factory=list)
    #: ``compare`` prints a table of few runs with runs as columns; False keeps a paper's layout
    transpose: bool = True


@dataclass
class Column:
    """One column of the viewer's list of a run's items: its header and the row field shown in it."""

    header: str
    field: str
    #: ``num`` (a number, 3 significant digits), ``gap`` (two decimals), ``list`` (joined by " vs "), ``text``
    format: str = "text"


class RunKind:
    """One kind of run (module doc).  Subclasses set the class attributes and override the hooks they have."""

    #: the kind's name, stored in each run's row (``grade``, ``sbs``, ...)
    name: ClassVar[str] = ""
    #: what the kind is called in messages (``side-by-side``)
    title: ClassVar[str] = ""
    #: the :class:`Run` subclass that writes its runs, or a lazy ``"module:Class"``
    run: ClassVar[str | type[Any]] = ""
    #: the model its summary is written as and read back as
    summary_model: ClassVar[type[RunSummary]] = RunSummary
    #: its tidy tables (:meth:`tidy`); the first is the default
    tables: ClassVar[tuple[str, ...]] = ()
    #: ``export`` takes its runs (every kind's results and raw replies export the same way)
    exportable: ClassVar[bool] = True
    #: its results are grades of answers in points, read with :func:`knockout.reports.load_run` (the agreement
    #: report, SciEx leaderboards, calibration); a kind that reads as another (a jury) has that kind's
    grades_answers: ClassVar[bool] = False
    #: which kind ``report``, ``compare`` and ``export`` read when no run is named: the latest run of the
    #: kind with the lowest rank (grading runs first, then side-by-side runs, ...)
    rank: ClassVar[int] = 100

    # -- writing ------------------------------------------------------------------------------------
    @property
    def run_class(self) -> type[Run[Any]]:
        """The :class:`Run` subclass that writes this kind's runs."""
        if isinstance(self.run, str):
            module, _, attr = self.run.partition(":")
            cls: type[Run[Any]] = getattr(importlib.import_module(module), attr)
            return cls
        return self.run

    # -- reading ------------------------------------------------------------------------------------
    def reads_as(self, record: RunRecord) -> str:
        """What the run's results are, for ``report`` and ``compare``: its own kind's name, or (a jury)
        the kind whose results its aggregate has, so that it is read like a run of that kind."""
        return self.name

    def summary(self, record: RunRecord) -> RunSummary | None:
        """The run's summary as the model it was written as (None while the run has not finished).

        A summary written by an older knockout that the model no longer validates is read as it is."""
        if record.summary is None:
            return None
        try:
            return self.summary_model.model_validate(record.summary)
        except ValidationError:
            return self.summary_model.model_construct(**record.summary)

    def headline(self, record: RunRecord) -> dict[str, Any]:
        """``knockout runs``' figures of a finished run: ``invalid`` results and its ``pearson`` with humans."""
        s = self.summary(record)
        if s is None:
            return {"invalid": None, "pearson": None}
        data = s.model_dump() if isinstance(s, BaseModel) else {}
        agreement = data.get("agreement") or {}
        return {"invalid": data.get("invalid"), "pearson": agreement.get("pearson")}

    def cost(self, store: Store, record: RunRecord) -> dict[str, Any]:
        """Judge requests, live calls, tokens and time of a run: what it paid, and what it would cost from
        scratch.

        ``requests``: what the run asked for in its latest invocation, cache hits included (its cost in
        calls whatever the cache held).  ``live_calls``, tokens and ``judge_s`` (summed latency): every call
        actually sent for this run over all its invocations (a resumed run adds up): what it paid.
        ``scratch_*``: the tokens of every request of its latest invocation, live or from the cache (the
        matches another method played first included): what it would cost on an empty store (None for a run
        written before knockout counted them).  ``wall_s``: the wall time of the latest invocation that sent a judge
        call (a rerun answered wholly from the store keeps it: :func:`knockout.runs._run.keep_work_time`)."""
        s = record.summary or {}
        live, pt, ct, lat = store.run_calls(record.id)
        scratch_pt = int(s.get("prompt_tokens", 0)) + int(s.get("cached_prompt_tokens", 0))
        scratch_ct = int(s.get("completion_tokens", 0)) + int(s.get("cached_completion_tokens", 0))
        known = "cached_prompt_tokens" in s  # a summary written before knockout counted cached tokens: unknown
        return {"requests": int(s.get("judge_calls", 0)) + int(s.get("cache_hits", 0)), "live_calls": live,
                "prompt_tokens": pt, "completion_tokens": ct, "tokens": pt + ct, "judge_s": round(lat, 3),
                "wall_s": s.get("wall_s"), "format_retries": s.get("format_retries", 0),
                "scratch_prompt_tokens": scratch_pt if known else None,
                "scratch_completion_tokens": scratch_ct if known else None,
                "scratch_tokens": scratch_pt + scratch_ct if known else None}

    def has(self, hook: str) -> bool:
        """Whether the kind has ``hook`` (``report``, ``compare``, ``tidy``) of its own."""
        return getattr(type(self), hook) is not getattr(RunKind, hook)

    def report(self, store: Store, record: RunRecord, options: ReportOptions) -> ReportPage:
        """``knockout report`` of one run."""
        raise ConfigError(f"{self.title or self.name} runs have no report; knockout export STORE:{record.id} "
                          "gives their results and every raw reply")

    def compare(self, runs: Sequence[tuple[Store, RunRecord]], options: ReportOptions) -> ReportPage:
        """``knockout compare`` of runs that all read as this kind."""
        raise ConfigError(f"{self.title or self.name} runs cannot be compared")

    def table_names(self, record: RunRecord) -> tuple[str, ...]:
        """The run's tidy tables, the default first (a jury's are those of the kind it reads as)."""
        return self.tables

    def compare_tables(self, data: dict[str, Any]) -> list[Any]:
        """The tables of a comparison's ``--json`` object (:meth:`compare`'s ``data``)."""
        return []

    def tidy(self, store: Store, record: RunRecord, table: str) -> list[dict[str, Any]]:
        """The rows of one of :meth:`table_names`."""
        raise ConfigError(f"run {record.id} is a {self.title or self.name} run: it has no tidy tables")

    # -- what a kind adds to the report of the kind it reads as (a jury to a grading report) ----------------
    def load_extra(self, store: Store, record: RunRecord) -> dict[str, Any]:
        """What :meth:`report_sections` needs beyond the run's own items and results, read while the store
        is open (a jury: its members' runs and results)."""
        return {}

    def report_sections(self, loaded: Any, options: ReportOptions) -> dict[str, Any]:
        """Sections added to the report of a run read with :func:`knockout.reports.load_run` (computed from
        the loaded run alone: the store is not read again)."""
        return {}

    def section_tables(self, report: dict[str, Any]) -> list[Any]:
        """The tables of :meth:`report_sections`' sections."""
        return []

    def after_run_tables(self, store: Store, record: RunRecord) -> list[Any]:
        """Tables the CLI prints after a run of this kind, beside its summary."""
        return []

    # -- the transcript viewer ------------------------------------------------------------------------
    def columns(self, store: Store, record: RunRecord) -> list[Column]:
        """The viewer's columns for the run's items (the first links to the item; ``gap`` sorts)."""
        return [Column("item", "id"), Column("question", "question_id"), Column("value", "value", "num")]

    def listing(self, store: Store, record: RunRecord, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One row per result for the viewer: ``id``, ``question_id``, ``valid``, ``error``, ``gap`` (the
        human-judge gap, None when there is none) and the fields of :meth:`columns`."""
        return [{"id": r["item_id"], "question_id": r["question_id"], "value": r["score"], "valid": r["valid"],
                 "gap": None, "error": r["details"].get("error")} for r in results]

    def item_view(self, store: Store, record: RunRecord, row: dict[str, Any], view: dict[str, Any]) -> None:
        """Complete the viewer's page of one item (``view``: ``result``, ``details``, ``question``,
        ``answer``, ``answers``, ``facts``, ``links``, ``step``): its texts, what the judge decided."""
        view["facts"].append(("Parsed value", _value(row)))

    def bracket(self, store: Store, record: RunRecord, question_id: str) -> dict[str, Any]:
        """The viewer's page of one question's matches (kinds whose runs play matches)."""
        raise KeyError(question_id)


def _value(row: dict[str, Any]) -> str:
    return "–" if row.get("score") is None else f"{row['score']:g}"


class _Plain(RunKind):
    """A kind registered as a bare :class:`Run` subclass, or a run of a kind no longer installed."""


def plain_kind(name: str, run: type[Any] | None = None) -> RunKind:
    kind = type(f"{name.title()}Kind", (_Plain,), {"name": name, "title": name, "run": run or ""})
    return kind()  # type: ignore[no-any-return]


def kind_of(name: str) -> RunKind:
    """The registered kind ``name`` (a bare :class:`Run` subclass registered by a plugin is wrapped in a
    kind with no hooks; a run of a kind not installed here reads as one too)."""
    from knockout.runs import run_kinds

    try:
        entry: Any = run_kinds.get(name)
    except ConfigError:
        return plain_kind(name)
    if isinstance(entry, RunKind):
        return entry
    if isinstance(entry, type) and issubclass(entry, RunKind):
        return entry()
    return plain_kind(name, entry)


def kinds_with(hook: str) -> list[RunKind]:
    """The registered kinds that have ``hook`` of their own, in registry order."""
    from knockout.runs import run_kinds

    return sorted((k for k in (kind_of(n) for n in run_kinds.names()) if k.has(hook)), key=lambda k: k.rank)
