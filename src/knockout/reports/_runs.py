"""Finding a stored run and reading it: its item set, results, human grades and cost.

Every command that reads runs picks them here (:func:`pick_run`) and asks the run's kind
(:func:`knockout.runs.kind_of`) what it can do: ``report``, ``compare``, tidy tables.  The store is opened
once by the caller (:meth:`knockout.storage.Store.open_existing`) and passed on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knockout.annotations import add_web_grades
from knockout.data._records import ItemSet
from knockout.errors import ConfigError
from knockout.runs import RunKind, kind_of, kinds_with
from knockout.storage._store import MatchRow, RunRecord, Store


@dataclass
class LoadedRun:
    store_path: Path
    run: RunRecord
    items: ItemSet
    #: the results (``details=False``: their breakdown groups only, held as columns, :class:`ResultRows`)
    results: Sequence[dict[str, Any]]
    cost: dict[str, Any]
    #: where the human grades came from: the input file's graders, the web app's (``web:<user>``), counts
    human_grades: dict[str, Any] = field(default_factory=dict)
    #: the run's pairwise matches (both games with their grades), for the position-bias figures
    matches: list[MatchRow] = field(default_factory=list)
    #: what the run's kind read besides (:meth:`knockout.runs.RunKind.load_extra`: a jury's member runs)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """How the run is named in reports and comparisons: method · judge, its prompt when not the default
        (``prompt=...``), its method's own options (:func:`knockout.reports.build_comparison` makes the labels of
        the runs it compares distinct)."""
        options = self.run.config.get("options", {})
        extra = options.get("extra") or {}
        opts = ",".join(f"{k}={v}" for k, v in sorted(extra.items()))
        prompt = options.get("prompt")
        return " · ".join([self.run.method, self.run.judge, *([f"prompt={prompt}"] if prompt not in (None, "auto")
                                                               else []), *([opts] if opts else [])])

    def header(self) -> dict[str, Any]:
        return {"run_id": self.run.id, "kind": self.run.kind, "store": str(self.store_path),
                "method": self.run.method, "judge": self.run.judge, "simulated_judge": self.run.simulated,
                "data": self.run.data_source, "status": self.run.status, "label": self.label,
                "options": self.run.config.get("options", {}), "results": len(self.results),
                "human_grades": self.human_grades, **({"used": used} if (used := self.used()) else {}),
                **({"resume": resume_hint(self.run)} if self.run.status in ("interrupted", "failed") else {})}

    def used(self) -> dict[str, Any]:
        """What the run used where it could differ from what it was asked (few-shot examples per answer,
        figures left out, the languages of the questions graded), from its results and summary."""
        from knockout.prompts._fewshot import shots_label, shots_used

        out: dict[str, Any] = {}
        opts = self.run.config.get("options") or {}
        if opts.get("shots"):
            out["shots"] = shots_label(shots_used(self.results, int(opts["shots"]), str(opts.get("shot_source", ""))))
        info = (self.run.summary or {}).get("info") or {}
        if info.get("figures_left_out"):
            out["figures_left_out"] = info["figures_left_out"]
        items = self.items
        at = {k for r in self.results if (k := items.find(str(r["item_id"]))) is not None}  # graded answers
        langs = sorted({items.question_at(i).language for i in at})
        if len(langs) > 1 or opts.get("shots"):
            out["languages"] = langs
        summary = self.run.summary or {}
        mode = summary.get("verdict") or opts.get("verdict")  # the summary says it per question (mixed)
        if mode in ("expected", "constrained", "mixed"):  # read from a verdict slot: said, with its spread
            out["verdict"] = self.verdict_used(str(mode), summary.get("verdict_questions"))
        return out

    def verdict_used(self, mode: str, questions: dict[str, int] | None = None) -> dict[str, Any]:
        """How the grades were read (the run's verdict mode; ``mixed``: the questions per mode) and, for expected
        grades, the judge's own spread over the grades (mean standard deviation of its distributions, points)
        and how many fell back."""
        from knockout.judges._slot import verdict_spread

        out: dict[str, Any] = {"mode": mode}
        if mode == "mixed" and isinstance(questions, dict):
            out["questions"] = questions
        if mode != "expected" and not (mode == "mixed" and isinstance(questions, dict) and "expected" in questions):
            return out
        items = self.items
        spreads = []
        for r in self.results:
            k = items.find(str(r["item_id"]))
            if k is None or not r.get("valid"):
                continue
            sd = verdict_spread(r.get("details") or {}, float(items.question_at(k).max_points))
            if sd is not None:
                spreads.append(sd)
        out["graded"] = len(spreads)
        if spreads:
            out["mean_spread"] = sum(spreads) / len(spreads)
        return out


def resume_hint(run: RunRecord) -> str:
    """How to resume ``run``, a run that is not complete: the command line that started it, as the CLI stored
    it (the same line the run printed when it was stopped; with ``cd FOLDER &&`` when it ran in another
    folder), or, for a run begun without one (the Python API, an older version), what it was made of."""
    import shlex

    cmd = run.config.get("command")
    argv = cmd.get("argv") if isinstance(cmd, dict) else None
    if isinstance(argv, str) and argv:
        assert isinstance(cmd, dict)
        cwd = cmd.get("cwd")
        if isinstance(cwd, str) and cwd and Path(cwd).resolve() != Path.cwd().resolve():
            return f"cd {shlex.quote(cwd)} && {argv}"
        return argv
    return (f"the command that started it, run again (its data {run.data_source or 'unknown'}, judge {run.judge}, "
            f"method {run.method}: the store holds no command line for it)")


def not_complete(run: RunRecord) -> str:
    """``; resume it with: COMMAND`` for a run that is interrupted or failed (nothing for one still running or
    complete): what a command that stops at such a run adds to its message."""
    if run.status in ("complete", "running"):
        return ""
    return f"; resume it with: {resume_hint(run)}"


def parse_ref(ref: str) -> tuple[Path, str | None]:
    """``STORE`` or ``STORE:RUN_ID`` (an existing file name containing ':' is taken whole)."""
    if Path(ref).is_file() or ":" not in ref:
        return Path(ref), None
    path, _, run_id = ref.rpartition(":")
    return Path(path), run_id or None


@contextmanager
def reading(store: Store | str | Path) -> Iterator[Store]:
    """``store`` itself when it is open, else the store at that path opened for reading (and closed after)."""
    if isinstance(store, Store):
        yield store
        return
    with Store.open_existing(store) as opened:
        yield opened


def run_cost(store: Store, run: RunRecord) -> dict[str, Any]:
    """What the run cost (:meth:`knockout.runs.RunKind.cost`: a jury adds up its members)."""
    return kind_of(run.kind).cost(store, run)


def reads_as(run: RunRecord) -> str:
    """What a run's results are read as: its kind, or for a jury the kind of its members."""
    return kind_of(run.kind).reads_as(run)


def _names(kinds: list[RunKind]) -> str:
    return " and ".join(k.title or k.name for k in kinds) or "no"


def readers(hook: str) -> list[RunKind]:
    """The kinds whose runs ``hook`` reads, in the order a default run is looked for: ``export`` reads every
    exportable kind; ``grades`` the kinds whose results are grades of answers (:func:`load_run`); ``report``,
    ``compare`` and ``tidy`` the kinds that have that hook."""
    if hook in ("export", "grades"):
        from knockout.runs import run_kinds

        every = [kind_of(n) for n in run_kinds.names()]
        wanted = [k for k in every if (k.exportable if hook == "export" else k.grades_answers)]
        return sorted(wanted, key=lambda k: k.rank)
    return kinds_with(hook)


def pick_run(store: Store, run_id: str | None, hook: str) -> RunRecord:
    """The one way ``report``, ``compare`` and ``export`` pick a run: the run ``run_id`` (an id or a unique
    prefix), which must be read as a kind that has ``hook`` (``report``, ``compare``, ``export``), or else the
    latest run read as the first such kind the store holds (a member run of a jury stands for its jury: the
    latest jury that lists it)."""
    kinds = readers(hook)
    names = {k.name for k in kinds}
    if run_id is not None:
        found = store.find_run(run_id)
        if reads_as(found) not in names:
            kind = kind_of(found.kind)
            raise ConfigError(f"{store.path}: run {found.id} is a {kind.title or kind.name} run; this reads "
                              f"{_names(kinds)} runs")
        return found
    runs = store.runs()
    jury_of = {str(m.get("run_id")): r for r in runs if kind_of(r.kind).reads_as(r) != r.kind
               for m in r.config.get("members", [])}
    for kind in kinds:
        of_kind = [r for r in runs if reads_as(r) == kind.name]
        if of_kind:
            latest = of_kind[-1]
            return jury_of.get(latest.id, latest)
    raise ConfigError(f"{store.path}: no {' or '.join(k.title or k.name for k in kinds)} runs")


def refuse_partial(store: Store, run: RunRecord, partial: bool, what: str) -> RunRecord:
    """``run``, unless it is not complete (``incomplete``: judge requests failed for good; ``interrupted``,
    ``failed``, ``running``) and ``partial`` is not given: then a one-line refusal naming its status, the
    results written, the command that resumes it (:func:`not_complete`) and ``--partial`` (what ``export``,
    ``calibrate``, ``review`` and ``gradebook`` do)."""
    if not run.complete and not partial:
        n = store.count_results(run.id)
        raise ConfigError(f"{store.path}: run {run.id} is {run.status} ({n} results written"
                          f"{'; ' + run.error if run.error else ''}){not_complete(run)}; pass --partial to {what} "
                          "it anyway")
    return run


def find_run(path: Store | str | Path, run_id: str | None = None, hook: str = "report") -> RunRecord:
    """The run ``run_id``, or else the latest run that ``hook`` reads (default: grading, then side-by-side)."""
    with reading(path) as store:
        return pick_run(store, run_id, hook)


def read_run(store: Store, run: RunRecord, *, details: bool = True, items_needed: bool = True,
             web_grades: bool = False) -> LoadedRun:
    """One run read from the open store: its item-set snapshot (an error when ``items_needed`` and there is
    none), results (an error when there are none), cost, matches, and what its kind reads besides
    (:meth:`knockout.runs.RunKind.load_extra`); ``web_grades``: the web app's grades join the file's."""
    items = store.items_for_run(run.id)
    if items is None:
        if items_needed:
            raise ConfigError(f"{store.path}: run {run.id} has no stored item set (made by an older version?)")
        items = ItemSet([], [])
    results: Sequence[dict[str, Any]] = store.results(run.id) if details else store.result_rows(run.id)
    if not results:
        raise ConfigError(f"{store.path}: run {run.id} has no results (status {run.status}){not_complete(run)}")
    kind = kind_of(run.kind)
    human: dict[str, Any] = {}
    if web_grades:
        items, human = add_web_grades(store, items)
    return LoadedRun(Path(store.path), run, items, results, kind.cost(store, run), human, store.matches(run.id),
                     kind.load_extra(store, run))


def load_run(path: Store | str | Path, run_id: str | None = None, *, details: bool = True) -> LoadedRun:
    """A run read as a grading run (default: the latest) with its item-set snapshot, results and cost
    (``details=False``: each result's breakdown groups only, not its raw replies: what agreement reports
    read), and what its kind reads besides (a jury: its members' results).

    The human grades are those of the snapshot (the input file) plus the grades entered in the web app on
    the same answers in the same store (:func:`knockout.annotations.add_web_grades`, graders ``web:<user>``)."""
    with reading(path) as store:
        run = pick_run(store, run_id, "grades")
        return read_run(store, run, details=details, web_grades=True)


def load_ref(ref: str, *, details: bool = True) -> LoadedRun:
    path, run_id = parse_ref(ref)
    return load_run(path, run_id, details=details)
