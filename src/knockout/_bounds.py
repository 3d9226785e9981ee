"""The bounds every user-supplied value is checked against, as pydantic annotated types.

The records (``knockout.data``), the configuration objects (``GenParams``, ``RunConfig``, ``MethodOptions``,
``SbsConfig``, ``MetaConfig``, ``SolveConfig``), experiment and jury files and the web app's forms use these
types, so a bound is written once, on the model, and every entry point (the CLI, TOML files, the Python API,
the web forms) meets the same check.  The CLI builds the models from its options and reports a refused value
as one line naming the option (exit code 2).
"""

from __future__ import annotations

import math
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from knockout.errors import ConfigError

#: ids, names (examinee, grader, exam, pair set, member), languages, scale names: at most this many characters
MAX_NAME = 1024
#: prompt names, template paths, spec strings
MAX_SPEC = 4096
#: nesting of a ``meta`` object (JSON objects and lists inside each other)
MAX_DEPTH = 32
#: the largest integer stored as is (SQLite's INTEGER, JSON readers that use doubles are the caller's concern)
MAX_INT = 2**63 - 1
#: generation: tokens per reply at most
MAX_TOKENS = 1_000_000
#: calls in flight at most
MAX_CONCURRENCY = 4096
#: format re-asks at most
MAX_RETRIES = 100
#: a sampling temperature at most
MAX_TEMPERATURE = 10.0
#: a question's maximum points at most (a grade scale, not a count: the judge is shown every allowed grade)
MAX_POINTS = 10_000.0
#: a count that bounds work: rounds, draws, shots, windows, resamples, shuffles (at most)
MAX_COUNT = 1_000_000
#: few-shot examples per prompt at most
MAX_SHOTS = 1000
#: Elo: K and shuffled orders at most (``knockout elo``, ``knockout meta``)
MAX_K = 1000.0
MAX_SHUFFLES = 100_000
#: meta-evaluation: drawn pairs per item, debate rounds, characters per field at most
MAX_DRAWS = 1000
MAX_ROUNDS = 100
MAX_TRUNCATE = 10_000_000
#: a data file's size bound (``max_file_mb``) at most: 1 TiB
MAX_FILE_MB = 2.0**20
#: a seed at most: numpy's legacy generator and scikit-learn's ``random_state`` (calibration's folds and refits)
#: take seeds in [0, 2**32 - 1]
MAX_SEED = 2**32 - 1

# characters that show nothing: a text made only of these (and white space) is empty
_INVISIBLE = frozenset("\u115f\u1160\u2800\u3164\uffa0")


def valid_unicode(s: str) -> str:
    """``s`` when it can be written as UTF-8 (no lone surrogate such as ``"\\ud800"`` from JSON) and holds
    no NUL character (C libraries, llama.cpp among them, would cut the text there)."""
    if "\x00" in s:
        raise ValueError(f"a NUL character at character {s.index(chr(0))}")
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"not valid Unicode text: a lone surrogate U+{ord(s[e.start]):04X} at character "
                             f"{e.start}") from None
    return s


def visible(s: str) -> bool:
    """Whether ``s`` holds a character that shows: not only white space, zero-width or other format
    characters (``\\u200b``, ``\\ufeff``, ...)."""
    if s.isascii():
        return bool(s.strip())
    return any(not c.isspace() and c not in _INVISIBLE and unicodedata.category(c) != "Cf" for c in s)


def is_text(s: str) -> bool:
    """Whether ``s`` passes :data:`NonEmptyText`'s checks (:func:`valid_unicode`, :func:`visible`), without
    raising: a loader's quick check before it builds no model (the model's own error names a failure)."""
    if s.isascii():
        return "\x00" not in s and bool(s.strip())
    try:
        valid_unicode(s)
    except ValueError:
        return False
    return visible(s)


def is_name(s: str) -> bool:
    """Whether ``s`` passes :data:`Name`'s checks, as :func:`is_text`."""
    return len(s) <= MAX_NAME and is_text(s)


def _non_empty(s: str) -> str:
    if not visible(s):
        raise ValueError("must not be empty (white space and zero-width characters only)")
    return s


def _no_bool(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("must be a number, not true/false")
    return v


def _finite(v: float) -> float:
    if not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


def check_json(value: Any, *, depth: int = 0) -> Any:
    """A JSON-like value (``meta``): at most :data:`MAX_DEPTH` levels deep, every string valid Unicode,
    every float finite."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        valid_unicode(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("must hold finite numbers only")
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                valid_unicode(k)
            check_json(v, depth=depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            check_json(v, depth=depth + 1)
    return value


#: any text (questions, answers, references): valid Unicode
Text = Annotated[str, AfterValidator(valid_unicode)]
#: a text that must show something
NonEmptyText = Annotated[str, AfterValidator(valid_unicode), AfterValidator(_non_empty)]
#: an id or a name: valid Unicode, 1..MAX_NAME characters, not blank
Name = Annotated[str, Field(max_length=MAX_NAME), AfterValidator(valid_unicode), AfterValidator(_non_empty)]


#: the words of the web app's addresses after an exam's name (``/exam/<exam>/examinee/<n>/q/<k>/info``)
_ROUTE_WORDS = frozenset({"examinee", "q", "info"})


def _exam_name(s: str) -> str:
    if not s.isprintable():
        c = next(c for c in s if not c.isprintable())
        raise ValueError(f"must not hold a control or invisible character ({c!a} at character {s.index(c)})")
    if s in (".", ".."):
        raise ValueError(f"must not be '.' or '..' (folder names in a path): the web app's address /exam/{s} "
                         "would not open the exam")
    if "/" in s:
        parts = s.split("/")
        bad = next((p for p in parts if p in ("", ".", "..") or p in _ROUTE_WORDS), None)
        if bad is not None:
            raise ValueError(f"a path-like name: its part {bad!r} between '/' would be read as part of the web "
                             "app's address (an exam name may hold '/', not an empty part, '.', '..', "
                             f"{', '.join(sorted(_ROUTE_WORDS))})")
    return s


#: an exam's name (``exam_id``, ``import --exam``): a :data:`Name` of printable characters, not ``.`` or ``..``,
#: whose parts between ``/`` are not empty, ``.``, ``..`` or a word of the web app's addresses (``nlp/2023`` is fine,
#: ``x/examinee/1`` is not: ``/exam/x/examinee/1`` is exam ``x``'s first examinee)
ExamName = Annotated[str, Field(max_length=MAX_NAME), AfterValidator(valid_unicode), AfterValidator(_non_empty),
                     AfterValidator(_exam_name)]
#: a prompt name, a template path, a judge spec
Spec = Annotated[str, Field(min_length=1, max_length=MAX_SPEC), AfterValidator(valid_unicode)]


def _no_control(s: str) -> str:
    c = next((c for c in s if unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)
    if c is not None:
        raise ValueError(f"a path must not hold a control character or a line break ({c!a} at character "
                         f"{s.index(c)})")
    return s


#: a path written in a file (an experiment's ``store``, ``root``, ``data.path``): a :data:`Spec` without control
#: characters or line breaks (``"k\n.db"`` names no file anyone meant)
PathSpec = Annotated[str, Field(min_length=1, max_length=MAX_SPEC), AfterValidator(valid_unicode),
                     AfterValidator(_no_control)]
#: a finite number (true/false refused)
Number = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_finite)]
#: an integer (true/false refused) that SQLite and JSON hold
Int = Annotated[int, BeforeValidator(_no_bool), Field(ge=-MAX_INT, le=MAX_INT)]
#: a seed of numpy's generators and scikit-learn (Elo shuffles, bootstrap resamples, meta-evaluation draws,
#: calibration's folds): in [0, :data:`MAX_SEED`]
Seed = Annotated[int, BeforeValidator(_no_bool), Field(ge=0, le=MAX_SEED)]
#: a JSON object (``meta``)
JsonObject = Annotated[dict[str, Any], AfterValidator(check_json)]


def field_error(exc: Any) -> tuple[str, str]:
    """(the dotted location, the message) of a pydantic ValidationError's first error."""
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    if err["type"] != "missing" and (value is None or isinstance(value, (str, int, float, bool))):
        text = repr(value)
        msg += f" (got {text if len(text) <= 60 else text[:57] + '...'})"
    return loc, msg


def max_points_ok(v: float) -> float:
    """``v`` as a question's maximum points: a number in (0, :data:`MAX_POINTS`] (NaN and infinities are not),
    else a ValueError saying so (the records' field and the web app's exam form)."""
    if not 0 < v <= MAX_POINTS:
        raise ValueError(f"must be a number in (0, {MAX_POINTS:g}]")
    return v


def check_name(value: str, what: str, kind: Any = None) -> str:
    """``value`` as a :data:`Name` (or ``kind``, e.g. :data:`ExamName`), or a ConfigError naming ``what`` (an
    option such as ``--exam``)."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return str(TypeAdapter(kind or Name).validate_python(value))
    except ValidationError as exc:
        raise ConfigError(f"{what}: {field_error(exc)[1]}") from None


class Selection(BaseModel):
    """The part of a data set a run takes: its first ``limit`` questions (items), each with its first
    ``answers_per_question`` answers (``ItemSet.subset``, side-by-side and meta-evaluation limits)."""

    model_config = ConfigDict(extra="forbid")

    limit: int | None = Field(default=None, ge=1, le=MAX_INT)
    answers_per_question: int | None = Field(default=None, ge=1, le=MAX_INT)


#: bootstrap resamples at most
MAX_RESAMPLES = 1_000_000


class Bootstrap(BaseModel):
    """Bootstrap options of reports and comparisons (0 resamples: no confidence intervals)."""

    model_config = ConfigDict(extra="forbid")

    resamples: int = Field(default=1000, ge=0, le=MAX_RESAMPLES)
    seed: Seed = 0  # numpy's generators take no negative seed


class Seeded(BaseModel):
    """A command's ``--seed`` alone (``calibrate``, ``review``, ``gradebook``: scikit-learn's folds and refits)."""

    model_config = ConfigDict(extra="forbid")

    seed: Seed = 0


class Calibrating(BaseModel):
    """The calibration's counts: ``calibrate --per-question`` and ``--resamples``, ``report
    --calibrate-per-question``, ``review --next`` (checked here, one line, where typer's ``min``/``max`` printed
    its usage box)."""

    model_config = ConfigDict(extra="forbid")

    per_question: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    calibrate_per_question: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    resamples: int = Field(default=1000, ge=0, le=100_000)
    next: int = Field(default=10, ge=1, le=10_000)


class BoundsError(ConfigError):
    """A configuration value outside its bounds (a ConfigError: one line, exit code 2), with the field's
    location, so that the CLI can name the option it came from."""

    def __init__(self, loc: tuple[Any, ...], message: str) -> None:
        self.loc = loc
        where = ".".join(str(x) for x in loc).replace("_", " ")
        super().__init__(f"{where}: {message}" if where else message)


def bounded(data: Any, handler: Any) -> Any:
    """The body of a configuration dataclass's wrap validator: its ValidationError as a :class:`BoundsError`."""
    from pydantic import ValidationError

    try:
        return handler(data)
    except ValidationError as exc:
        raise BoundsError(tuple(exc.errors()[0]["loc"]), field_error(exc)[1]) from None
