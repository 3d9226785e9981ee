"""Experiment files: one TOML file names the data, the judges, the prompt, the methods and the comparison.

See docs/experiments.md for the format.  Every field is checked before anything runs; an error names the
file, the table and the field (``InputError``, exit code 2).  Relative paths (``data.path``, ``store``) are
taken from ``root``, itself relative to the experiment file's folder (default: that folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from knockout._bounds import (
    MAX_CONCURRENCY,
    MAX_COUNT,
    MAX_DRAWS,
    MAX_INT,
    MAX_K,
    MAX_NAME,
    MAX_RESAMPLES,
    MAX_RETRIES,
    MAX_ROUNDS,
    MAX_SHOTS,
    MAX_SHUFFLES,
    MAX_TRUNCATE,
    Int,
    Name,
    PathSpec,
    Seed,
    Spec,
    Text,
    field_error,
)
from knockout.errors import ConfigError, InputError
from knockout.judges._base import GenParams
from knockout.jury._members import MemberSpec, member_from_table, read_toml
from knockout.meta._parsers import MAX_CRITERIA

Strict = ConfigDict(extra="forbid", allow_inf_nan=False)


#: how each kind of experiment is reported: ``grid`` (methods x judges, Table 1 of the knockout paper, then
#: ``compare`` per judge), ``compare`` (the run kind's own comparison of every part), ``summaries`` (a row per
#: part from its summary)
LAYOUTS = {"grade": "grid", "sbs": "compare", "meta": "summaries"}
#: a grading experiment with a ``[grid]`` table: SciEx's shots x source x reference grid, laid out as Tables 4,
#: 9, 10 and 11 of Dinh et al. (2024) (knockout.sciex._grid)
GRID_LAYOUT = "sciex-grid"


class DataSpec(BaseModel):
    model_config = Strict

    path: PathSpec
    #: grading: the loader (auto, jsonl, csv, saf, sciex, mqm, ...) and its options
    format: Name = "auto"
    options: dict[str, Any] = Field(default_factory=dict)
    #: grading: the first N questions, each with its first M answers; sbs and meta: the first N items
    limit: int | None = Field(default=None, ge=1, le=MAX_INT)
    answers_per_question: int | None = Field(default=None, ge=1, le=MAX_INT)
    #: side-by-side sources
    tie: Literal["C", "D"] = "C"
    candidate: Literal["first", "second"] = "first"
    #: meta-evaluation: the field with the human label
    human: Name = "label"


class PromptSpec(BaseModel):
    """Grading: the prompt options every method uses (a judge's ``prompt`` goes over ``prompt``)."""

    model_config = Strict

    prompt: Spec = "auto"
    #: show each question's reference answer where the data has one (as `knockout grade` does by default)
    reference: bool = True
    shots: int = Field(default=0, ge=0, le=MAX_SHOTS)
    shot_source: Name = "same-question"
    seed: Int = 0
    quoting: Name = "none"
    #: how verdicts are read: auto, expected, constrained, text (docs/methods.md#the-verdict-slot)
    verdict: Name = "auto"
    #: pairwise methods: how a match is decided, letter or soft (docs/methods.md#soft-preferences)
    preference: Name = "letter"
    #: go on where the data has fewer than ``shots`` examples for an answer (recorded per answer)
    allow_fewer_shots: bool = False
    #: figures to the judge: auto (refused for a text-only judge when questions have figures), none, separate,
    #: stacked
    figures: Name = "auto"
    #: questions' rubrics: auto, text or off (docs/rubrics.md)
    rubric: Name = "auto"


class GridSpec(BaseModel):
    """Grading: SciEx's grid (Dinh et al. 2024, Tables 4, 9, 10, 11): one individual-grading run per judge,
    number of shots, shot source (zero-shot: one) and reference setting (knockout.sciex._grid)."""

    model_config = Strict

    shots: list[Annotated[int, Field(ge=0, le=MAX_SHOTS)]] = Field(default_factory=lambda: [0, 1, 2], min_length=1,
                                                                  max_length=16)
    shot_sources: list[Name] = Field(default_factory=lambda: ["same-question", "same-exam", "other-exam"],
                                     min_length=1, max_length=3)
    reference: list[bool] = Field(default_factory=lambda: [False, True], min_length=1, max_length=2)


class MethodSpec(BaseModel):
    model_config = Strict

    name: Name | None = None
    method: Name = "individual"
    debias: bool = False
    options: dict[str, Any] = Field(default_factory=dict)

    def label(self) -> str:
        return self.name or (self.method + ("-d" if self.debias else ""))


class SbsPromptSpec(BaseModel):
    model_config = Strict

    name: Name | None = None
    prompt: Spec = "I"
    debate: Name = "none"
    params: dict[str, Any] = Field(default_factory=dict)

    def label(self) -> str:
        return self.name or (self.prompt + ("" if self.debate == "none" else f" +{self.debate}"))


class SbsSpec(BaseModel):
    model_config = Strict

    window: int = Field(default=20, ge=1, le=MAX_COUNT)
    stride: int = Field(default=5, ge=1, le=MAX_COUNT)


class FrameworkSpec(BaseModel):
    model_config = Strict

    name: Name | None = None
    framework: Name = "jdeval"
    draws: int = Field(default=3, ge=1, le=MAX_DRAWS)
    both_orders: bool = False
    rounds: int = Field(default=5, ge=1, le=MAX_ROUNDS)
    max_criteria: int | None = Field(default=None, ge=1, le=MAX_CRITERIA)
    truncate: int | None = Field(default=None, ge=0, le=MAX_TRUNCATE)
    k: float = Field(default=4.0, ge=0, le=MAX_K)
    shuffles: int = Field(default=200, ge=1, le=MAX_SHUFFLES)
    self_name: Name | None = None
    seed: Seed = 0
    #: how the meta-judge's verdicts are read: auto, expected, constrained, text (docs/meta-evaluation.md)
    verdict: Name = "auto"

    def label(self) -> str:
        return self.name or self.framework


class JurySpec(BaseModel):
    """Grading and sbs: also run the judges as a jury (one jury per method, or per prompt)."""

    model_config = Strict

    aggregate: Name | None = None
    trim: int = Field(default=1, ge=0, le=MAX_COUNT)
    name: Name = "jury"


class CompareSpec(BaseModel):
    model_config = Strict

    #: grading: the method (by name) the others are tested against (default: the first)
    baseline: Name | None = None
    by: list[Name] = Field(default_factory=list, max_length=64)
    resamples: int = Field(default=1000, ge=0, le=MAX_RESAMPLES)
    seed: Seed = 0


class Experiment(BaseModel):
    model_config = Strict

    title: Annotated[Text, Field(max_length=MAX_NAME)] = ""
    kind: Literal["grade", "sbs", "meta"] = "grade"
    root: PathSpec = "."
    store: PathSpec | None = None
    data: DataSpec
    params: dict[str, Any] = Field(default_factory=dict)
    judges: list[dict[str, Any]] = Field(min_length=1)
    prompt: PromptSpec = Field(default_factory=PromptSpec)
    methods: list[MethodSpec] = Field(default_factory=list)
    prompts: list[SbsPromptSpec] = Field(default_factory=list)
    sbs: SbsSpec = Field(default_factory=SbsSpec)
    frameworks: list[FrameworkSpec] = Field(default_factory=list)
    jury: JurySpec | None = None
    grid: GridSpec | None = None
    compare: CompareSpec = Field(default_factory=CompareSpec)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    format_retries: int | None = Field(default=None, ge=0, le=MAX_RETRIES)


class ExperimentFile:
    """A checked experiment: the parsed file, its members and its resolved paths."""

    def __init__(self, path: Path, exp: Experiment, members: list[MemberSpec]) -> None:
        self.path = path
        self.exp = exp
        self.members = members
        self.root = (path.parent / exp.root).resolve()

    def resolve(self, p: str) -> Path:
        q = Path(p).expanduser()
        return q if q.is_absolute() else self.root / q

    @property
    def data_path(self) -> Path:
        return self.resolve(self.exp.data.path)

    def with_judges(self, specs: list[str]) -> ExperimentFile:
        """The experiment with these judges (``knockout run --judge SPEC``) instead of its ``[[judges]]``: each
        a spec with its options after ``?``; the file's per-judge options, prompt and params are not kept."""
        if self.exp.jury is not None and len(specs) < 2:
            raise ConfigError(f"{self.path}: the file asks for a [jury], which needs at least two judges: give "
                              "--judge twice or more")
        return ExperimentFile(self.path, self.exp, [MemberSpec(s) for s in specs])

    def store_path(self, override: Path | None = None) -> Path:
        """``--out``, else the file's ``store`` (an existing folder is refused here, naming the field, before
        any part runs), else ``<file stem>.db``."""
        if override is not None:
            return override
        if self.exp.store:
            store = self.resolve(self.exp.store)
            if store.is_dir():
                raise InputError(f"'{self.exp.store}' is a folder, not a store file", file=str(self.path),
                                 field="store")
            return store
        return Path(f"{self.path.stem}.db")


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc) or "(file)"


def read_experiment(path: Path) -> ExperimentFile:
    """Parse and check an experiment file (module doc)."""
    file = str(path)
    data = read_toml(path)
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = "unknown field" if err["type"] == "extra_forbidden" else field_error(exc)[1]
        raise InputError(msg, file=file, field=_field(err["loc"])) from None
    try:  # the generation parameters: their bounds are GenParams'
        GenParams(**exp.params)
    except ValidationError as exc:
        loc, msg = field_error(exc)
        raise InputError(msg, file=file, field=f"params.{loc}" if loc else "params") from None
    members = [member_from_table(t, file=file, record=f"judges[{i}]") for i, t in enumerate(exp.judges)]
    parts = {"grade": ("methods", exp.methods), "sbs": ("prompts", exp.prompts), "meta": ("frameworks", exp.frameworks)}
    key, listed = parts[exp.kind]
    if exp.grid is not None:
        _check_grid(exp, file, key)
        return ExperimentFile(path, exp, members)
    if not listed:
        raise InputError(f"a {exp.kind} experiment lists its {key} as [[{key}]] tables", file=file, field=key)
    for other, (k, v) in parts.items():
        if other != exp.kind and v:
            raise InputError(f"[[{k}]] belongs to a {other} experiment (this one is kind = \"{exp.kind}\")",
                             file=file, field=k)
    labels = [x.label() for x in listed]  # type: ignore[attr-defined]
    dup = next((n for i, n in enumerate(labels) if n in labels[:i]), None)
    if dup is not None:
        raise InputError(f"two {key} are named '{dup}' (give each a distinct name)", file=file, field=key)
    if exp.compare.baseline is not None and exp.compare.baseline not in labels:
        raise InputError(f"no {key} named '{exp.compare.baseline}' (names: {', '.join(labels)})", file=file,
                         field="compare.baseline")
    if exp.jury is not None and len(members) < 2:
        raise InputError("a jury needs at least two judges", file=file, field="jury")
    return ExperimentFile(path, exp, members)


def _check_grid(exp: Experiment, file: str, parts_key: str) -> None:
    """A ``[grid]`` experiment: grading (the kind whose parts are methods), its parts are the grid's cells (no
    methods, no jury)."""
    from knockout.prompts._fewshot import SHOT_SOURCES

    grid = exp.grid
    assert grid is not None
    if parts_key != "methods":
        raise InputError(f"[grid] is SciEx's grading grid; this experiment is kind = \"{exp.kind}\"", file=file,
                         field="grid")
    for key, given in (("methods", exp.methods), ("prompts", exp.prompts), ("frameworks", exp.frameworks)):
        if given:
            raise InputError(f"a [grid] experiment grades each answer on its own; [[{key}]] has no place in it",
                             file=file, field=key)
    if exp.jury is not None:
        raise InputError("a [grid] experiment runs each judge on its own; leave out [jury]", file=file, field="jury")
    for i, src in enumerate(grid.shot_sources):
        if src not in SHOT_SOURCES:
            raise InputError(f"unknown shot source '{src}' (known: {', '.join(SHOT_SOURCES)})", file=file,
                             field=f"grid.shot_sources.{i}")
    for key, values in (("shots", grid.shots), ("shot_sources", grid.shot_sources), ("reference", grid.reference)):
        if len(set(values)) != len(values):
            raise InputError("a value is listed twice", file=file, field=f"grid.{key}")
