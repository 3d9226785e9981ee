"""``knockout.grade``: a table of answers in, the same table out with the judge's grades added.

One grading run (:class:`knockout.methods.GradeRun`) through the one lifecycle (:func:`knockout.runs.execute`,
which also works inside a running event loop, as in Jupyter, by running the pipeline in a worker thread;
:func:`grade_async` awaits it in the caller's loop).  The table is read by the table loader
(:mod:`knockout.data._formats.table`: the same fields and ``columns`` mapping as CSV and DataFrames), and
given back row for row, with the user's own columns as they were and these added:

* ``grade`` — the judge's grade (None when no valid grade was obtained);
* ``valid`` — whether the judge's reply gave a grade;
* ``explanation`` — the judge's reply (individual grading: the reply the grade was read from, or the last
  unreadable one; pairwise methods: the reply of every game the answer played, labelled with the opponent
  and the order shown); the error when no reply came;
* ``human_grade`` — the mean of the human grades, when the data has any.

The language and the maximum points of each question come from the data (a mapped column) or from the
``language=`` / ``max_points=`` arguments, never from a silent default.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knockout.data._formats.frames import frame_rows, is_dataframe
from knockout.data._formats.table import Row, blank_row, column_map, load_rows
from knockout.data._records import ItemSet, Question
from knockout.errors import ConfigError
from knockout.judges._base import GenParams, Judge
from knockout.judges._registry import DEFAULT_JUDGE, make_judge
from knockout.methods._base import MethodOptions, check_method_name
from knockout.methods._run import GradeRun, RunConfig, RunReport
from knockout.notebook._progress import grade_progress
from knockout.reports._replies import replies_in
from knockout.runs import execute, execute_async
from knockout.storage._store import MatchRow, Store

#: the columns :func:`grade` adds (after ``prefix``); ``human_grade`` only when the data has human grades
ADDED = ("grade", "valid", "explanation", "human_grade")
#: the run's counts in ``attrs["knockout"]`` (the keys of ``knockout grade --json``; ``stats`` holds every count)
COUNTS = ("answers", "valid", "invalid", "judge_calls", "cache_hits", "prompt_tokens", "completion_tokens",
          "failed", "format_retries", "wall_s")
#: question fields that have a default in :class:`Question` which a table must not fall back on silently
REQUIRED_FIELDS = {"language": "language='en'", "max_points": "max_points=10"}


@functools.cache
def _session_dir() -> tempfile.TemporaryDirectory[str]:
    """One temporary folder per process (removed at exit): ``store=None`` reruns in a session hit its cache."""
    return tempfile.TemporaryDirectory(prefix="knockout-grade-")


def session_store() -> Path:
    """The store ``grade(..., store=None)`` uses: one per process, in a temporary folder removed at exit."""
    return Path(_session_dir().name) / "grades.db"


@dataclass
class Job:
    """A prepared call: the run, the rows it reads and how to give them back."""

    run: GradeRun
    frame: Any  # the user's DataFrame, or None for a list of rows
    rows: list[Mapping[str, Any]]
    answer_ids: list[str | None]  # per input row: its answer's id (None: an empty row, no answer)
    prefix: str
    owned: bool  # the judge was made here from a spec (closed afterwards)

    @property
    def judge(self) -> Judge:
        return self.run.judge

    @property
    def items(self) -> ItemSet:
        return self.run.items

    def table(self, store: Store, report: RunReport, store_path: Path | None) -> Any:
        """The user's rows with the grades added: a DataFrame for a DataFrame, else a list of dicts."""
        results = {r["item_id"]: r for r in store.results(report.run_id)}
        matches = {m.match_id: m for m in store.matches(report.run_id)}
        humans = self.items.has_human_scores()
        label = self._labels()
        added: dict[str, list[Any]] = {name: [] for name in ADDED if humans or name != "human_grade"}
        for answer_id in self.answer_ids:
            r = results.get(answer_id) if answer_id is not None else None
            values: dict[str, Any] = {"grade": None, "valid": None, "explanation": None, "human_grade": None}
            if r is not None:
                values |= {"grade": r["score"], "valid": bool(r["valid"]),
                           "explanation": explanation(answer_id or "", r["details"], matches, label)}
            if answer_id is not None:
                values["human_grade"] = self.items.answer(answer_id).human_score
            for name, column in added.items():
                column.append(values[name])
        names = {name: self.prefix + name for name in added}
        summary = report.summary()
        info = {"run_id": report.run_id, "store": None if store_path is None else str(store_path),
                "method": report.method, "judge": report.judge, "simulated_judge": report.simulated,
                **{k: summary.get(k, 0) for k in COUNTS},
                "status": report.status,
                "agreement": report.agreement, "stats": report.stats}
        if self.frame is not None:
            out = self.frame.copy()
            for name, column in added.items():
                out[names[name]] = column
            out.attrs["knockout"] = info
            return out
        return [{**row, **{names[n]: column[i] for n, column in added.items()}} for i, row in enumerate(self.rows)]

    def _labels(self) -> Callable[[str], str]:
        """An answer as an opponent is named in an explanation: its examinee, else its id."""
        def label(answer_id: str) -> str:
            try:
                a = self.items.answer(answer_id)
            except KeyError:
                return answer_id
            return a.examinee or a.id

        return label


def _last_reply(obj: Any) -> str | None:
    replies = [r.strip() for r in replies_in(obj) if r.strip()]
    return replies[-1] if replies else None


def explanation(answer_id: str, details: Mapping[str, Any], matches: Mapping[str, MatchRow],
                label: Callable[[str], str]) -> str | None:
    """The judge's words about one answer (module doc), read from its stored result and matches."""
    error = details.get("error")
    refs = details.get("matches")
    if not isinstance(refs, list):
        return _last_reply(dict(details)) or (str(error) if error else None)
    parts = []
    for ref in refs:
        m = matches.get(str(ref.get("match_id"))) if isinstance(ref, dict) else None
        if m is None:
            continue
        opponent = label(m.b if m.a == answer_id else m.a)
        for game in m.games:
            reply = _last_reply(game)
            if reply:
                order = "shown first" if game.get("first") == answer_id else "shown second"
                parts.append(f"[vs {opponent}, {order}] {reply}")
    return "\n\n".join(parts) or (str(error) if error else None)


def _rows_of(data: Any) -> tuple[Any, list[Mapping[str, Any]], list[str], list[Row], str]:
    """(the DataFrame or None, the user's rows, column names, rows as the table loader reads them, source)."""
    if is_dataframe(data):
        names, rows = frame_rows(data)
        read = list(rows)
        return data, [cells for _, cells in read], names, read, "<DataFrame>"
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)) and all(
            isinstance(r, Mapping) for r in data):
        user: list[Mapping[str, Any]] = list(data)
        cells = [{str(k): v for k, v in r.items()} for r in user]
        names = list(dict.fromkeys(k for r in cells for k in r))
        return None, user, names, [(f"row {i}", r) for i, r in enumerate(cells, 1)], "<rows>"
    raise ConfigError(f"grade() takes a pandas DataFrame or a list of dicts (one per answer), not a "
                      f"{type(data).__name__}")


def _given(name: str, value: Any) -> Any:
    """``language=`` / ``max_points=`` checked as a question's field is."""
    try:
        return getattr(Question(id="q", text="q", **{name: value}), name)
    except ValidationError as e:
        raise ConfigError(f"{name}={value!r}: {e.errors()[0]['msg']}") from None


def _read(data: Any, columns: Mapping[str, str] | str | None, defaults: Mapping[str, Any],
          ) -> tuple[Any, list[Mapping[str, Any]], list[str], ItemSet, list[str | None]]:
    """The item set of ``data`` and each row's answer id; a required question field (language, max points)
    comes from its column or from ``defaults``, and is refused when neither gives it."""
    frame, user, names, read, source = _rows_of(data)
    mapping = column_map(columns)
    present = set(names)
    inject: dict[str, Any] = {}
    for field, example in REQUIRED_FIELDS.items():
        column = mapping.get(field, field)
        value = defaults.get(field)
        if column in present and value is not None:
            raise ConfigError(f"{field} is given twice: the column '{column}' and {field}={value!r} (drop one)")
        if column in present:
            continue
        if field in mapping:  # a mapped column that is not there: the loader names it
            continue
        if value is None:
            raise ConfigError(f"the data has no {field}: pass {example} to grade(), or map a column to it "
                              f"(columns={{'{field}': ...}})")
        key = f"<{field}>"
        mapping[field] = key
        inject[key] = _given(field, value)

    def rows() -> Iterator[Row]:
        for where, cells in read:
            yield (where, cells) if blank_row(cells) or not inject else (where, {**cells, **inject})

    items = load_rows(rows(), [*names, *inject], columns=mapping, path=Path(source), source=source,
                      header_where="columns" if frame is not None else "row 1",
                      columns_in="the columns" if frame is not None else "the rows' keys")
    for q in items.questions.values():  # a column that is there but empty on a question's first row
        for field in REQUIRED_FIELDS:
            if field not in q.model_fields_set:
                raise ConfigError(f"question '{q.id}' has no {field} (its first row leaves the column "
                                  f"'{mapping.get(field, field)}' empty)")
    answers: Iterator[str] = (a.id for a in items.answers)
    ids = [None if blank_row(cells) else next(answers) for _, cells in read]
    return frame, user, names, items, ids


def _options(options: Mapping[str, Any]) -> MethodOptions:
    """Keyword arguments as method options: the prompt options and ``debias`` by name, the rest the method's
    own options (``--method-opt``; an unknown one is refused when the run is checked)."""
    known = {f.name for f in fields(MethodOptions)}
    own = {k: v for k, v in options.items() if k in known}
    own.setdefault("reference", True)  # a reference answer in the data is shown, as on the command line
    extra = {**own.pop("extra", {}), **{k: v for k, v in options.items() if k not in known}}
    return MethodOptions(**own, extra=extra)


def prepare(data: Any, *, judge: str | Judge, method: str, columns: Mapping[str, str] | str | None,
            language: str | None, max_points: float | None, prefix: str, concurrency: int | None,
            format_retries: int, params: GenParams | None, options: Mapping[str, Any]) -> Job:
    """Everything checked before a store is opened or a judge is asked."""
    check_method_name(method)
    frame, user, names, items, ids = _read(data, columns, {"language": language, "max_points": max_points})
    added = [prefix + n for n in ADDED if items.has_human_scores() or n != "human_grade"]
    clash = [n for n in added if n in names]
    if clash:
        raise ConfigError(f"the data already has a column '{clash[0]}': rename it or pass prefix='judge_'")
    cfg = RunConfig(method=method, options=_options(options), params=params or GenParams(),
                    concurrency=concurrency, format_retries=format_retries)
    if isinstance(judge, Judge):
        made, owned = judge, False
    elif isinstance(judge, str):
        made, owned = make_judge(judge), True
    else:
        raise ConfigError(f"judge must be a spec such as 'llamacpp' or 'openai:MODEL', or a Judge, not a "
                          f"{type(judge).__name__}")
    return Job(GradeRun(items, made, cfg), frame, user, ids, prefix, owned)


def _store_path(store: str | Path | Store | None) -> Path | None:
    if isinstance(store, Store):
        return None
    return session_store() if store is None else Path(store)


@contextmanager
def _opened(store: str | Path | Store | None, path: Path | None) -> Iterator[Store]:
    """The store to use: a given :class:`Store` as it is (left open), else the one at ``path`` (closed after)."""
    if isinstance(store, Store):
        yield store
        return
    assert path is not None
    with Store(path) as opened:
        yield opened


def grade(data: Any, *, judge: str | Judge = DEFAULT_JUDGE, method: str = "individual",
          columns: Mapping[str, str] | str | None = None, language: str | None = None,
          max_points: float | None = None, store: str | Path | Store | None = None, prefix: str = "",
          concurrency: int | None = None, format_retries: int = 2, params: GenParams | None = None,
          progress: bool | str | None = None, **options: Any) -> Any:
    """Grade a table of answers (one row per answer) and return it with the grades added.

    ``data``: a pandas DataFrame (returned as a DataFrame: the same index and columns, plus ``grade``,
    ``valid``, ``explanation`` and ``human_grade``; ``.attrs["knockout"]`` holds the run id, the store, the
    judge, the run's status (``incomplete`` when judge requests failed for good) and the agreement with the
    human grades) or a list of dicts (returned as a list of dicts).
    ``columns``: our field -> your column (``question_id``, ``question``, ``answer``, ``reference``,
    ``max_points``, ``language``, ``examinee``, ``human_score``, ``human_score:<grader>``, ...; see
    docs/data-formats.md).  ``language`` / ``max_points``: for data without such a column (given in both
    places, or in neither, is refused).  ``judge``: a spec (``"llamacpp"``, ``"openai:MODEL"``,
    ``"scripted"`` for a simulation) or a :class:`~knockout.Judge` (left open; a spec's judge is closed).
    ``method`` and ``**options``: as ``knockout grade --method``, ``--debias``, ``--prompt``,
    ``--reference``, ``--shots`` ... and ``--method-opt key=value``.  ``store``: a path (a rerun is read
    from its cache), a :class:`~knockout.Store`, or None: one temporary store per process.  ``prefix``:
    put before the added column names.  ``progress``: a progress bar (tqdm's when installed, else rich's) with
    the requests done and the time left: True, False, or None (the default) for one when watched (Jupyter,
    IPython or a terminal).  Works inside a running event loop (Jupyter)."""
    job = prepare(data, judge=judge, method=method, columns=columns, language=language, max_points=max_points,
                  prefix=prefix, concurrency=concurrency, format_retries=format_retries, params=params,
                  options=options)
    path = _store_path(store)
    with _opened(store, path) as st, grade_progress(progress, job.run.spec()) as observer:
        report = execute(job.run, st, close_judges=job.owned, observer=observer)
        return job.table(st, report, path)


async def grade_async(data: Any, *, judge: str | Judge = DEFAULT_JUDGE, method: str = "individual",
                      columns: Mapping[str, str] | str | None = None, language: str | None = None,
                      max_points: float | None = None, store: str | Path | Store | None = None, prefix: str = "",
                      concurrency: int | None = None, format_retries: int = 2, params: GenParams | None = None,
                      progress: bool | str | None = None, **options: Any) -> Any:
    """:func:`grade` in the caller's event loop (``await knockout.grade_async(df, ...)``)."""
    job = prepare(data, judge=judge, method=method, columns=columns, language=language, max_points=max_points,
                  prefix=prefix, concurrency=concurrency, format_retries=format_retries, params=params,
                  options=options)
    path = _store_path(store)
    with _opened(store, path) as st, grade_progress(progress, job.run.spec()) as observer:
        try:
            report = await execute_async(job.run, st, observer=observer)
        finally:
            if job.owned:
                await job.judge.aclose()
        return job.table(st, report, path)
