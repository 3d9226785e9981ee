"""Helpers shared by the format loaders: reading files and turning bad input into :class:`InputError`.

Every file a loader reads goes through :func:`read_bytes` (or :func:`read_text`), and every image
path in the data through :func:`resolve_image`.  They refuse, with an ``InputError`` naming file,
record and field:

* what is not a regular file (a FIFO, a device such as ``/dev/zero``, a socket, a folder where a
  file is expected), at once: the file is opened non-blocking and checked before anything is read;
* files over the size bound (:data:`DEFAULT_MAX_FILE_MB`, option ``max_file_mb``);
* while a load runs under an :class:`InputPolicy` with roots (``load_items`` sets one: the data
  folder, plus any ``allow_root``), paths that resolve outside them (``..``, absolute paths,
  symlinks that lead out);
* image URLs (``https://``, ``data:``) unless the policy allows them (``allow_urls``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import InputError

M = TypeVar("M", bound=BaseModel)
# Text given to a submitted but empty answer (Answer.text must not be empty); meta["empty"] marks it.
EMPTY_ANSWER = "(no answer)"


def build(
    model: type[M],
    data: Mapping[str, Any],
    *,
    file: Path,
    record: str | int | None,
    rename: Mapping[str, str] | None = None,
) -> M:
    """Validate ``data`` as ``model``; a ValidationError becomes an InputError on its first error.

    ``rename`` maps a model field (or dotted location such as ``human_scores.human``) to the name the
    user wrote in the input, e.g. a CSV column.
    """
    try:
        return model.model_validate(dict(data))
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        if rename and loc:
            head = loc.split(".")[0]
            loc = rename.get(loc) or rename.get(head, head) + loc[len(head) :]
        message = str(err["msg"]).removeprefix("Value error, ")
        value = err.get("input")
        if err["type"] != "missing" and (value is None or isinstance(value, (str, int, float, bool))):
            message += f" (got {shorten(repr(value))})"
        raise InputError(message, file=str(file), record=record, field=loc or None) from None


def shorten(s: str, width: int = 60) -> str:
    return s if len(s) <= width else s[: width - 3] + "..."


def to_number(value: object, *, file: Path, record: str | int | None, field: str) -> float:
    """A finite number from an int, a float or a string (a decimal comma is accepted: ``"2,5"``)."""
    x: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        x = float(value)
    elif isinstance(value, str):
        try:
            x = float(value.strip().replace(",", "."))
        except ValueError:
            x = None
    if x is None or not math.isfinite(x):
        raise InputError(f"not a number: {shorten(repr(value))}", file=str(file), record=record, field=field)
    return x


#: Files larger than this (MiB) are refused unless the option ``max_file_mb`` raises the bound.
DEFAULT_MAX_FILE_MB = 512.0
_HEAD_BYTES = 4 << 20  # what sniffers read of a file at most


@dataclass(frozen=True)
class InputPolicy:
    """Where loaders may read: inside ``roots`` (resolved folders; none: anywhere), image URLs only
    with ``allow_urls``, no file over ``max_bytes``."""

    roots: tuple[Path, ...] = ()
    allow_urls: bool = False
    max_bytes: int = int(DEFAULT_MAX_FILE_MB * 2**20)


_DEFAULT_POLICY = InputPolicy()
_POLICY: ContextVar[InputPolicy | None] = ContextVar("knockout_input_policy", default=None)


@contextmanager
def input_policy(policy: InputPolicy) -> Iterator[InputPolicy]:
    """Run the loaders called inside the block under ``policy``."""
    token = _POLICY.set(policy)
    try:
        yield policy
    finally:
        _POLICY.reset(token)


def current_policy() -> InputPolicy:
    return _POLICY.get() or _DEFAULT_POLICY


def _mb(n: int) -> str:
    return f"{n / 2**20:.3g} MiB"


def confine(
    path: Path, *, file: Path | str | None = None, record: str | int | None = None, field: str | None = None,
    what: str = "file",
) -> Path:
    """``path`` with symlinks resolved; an InputError when that lies outside the policy's roots."""
    policy = current_policy()
    real = Path(os.path.realpath(path))
    if policy.roots and not any(real.is_relative_to(root) for root in policy.roots):
        raise InputError(
            f"{what} {path} is outside the data folder {policy.roots[0]}; refused "
            "(allow another folder with --data-opt allow_root=DIR)",
            file=str(file if file is not None else path),
            record=record,
            field=field,
        )
    return real


def _check_stat(
    st: os.stat_result, path: Path, *, file: Path | str | None, record: str | int | None, field: str | None,
    what: str,
) -> None:
    name = str(file if file is not None else path)
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {path} is a folder; expected a file", file=name, record=record, field=field)
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{what} {path} is not a regular file (a FIFO, device or socket); refused",
            file=name, record=record, field=field,
        )
    limit = current_policy().max_bytes
    if st.st_size > limit:
        raise InputError(
            f"{what} {path} is {_mb(st.st_size)}, over the {_mb(limit)} bound "
            "(raise it with --data-opt max_file_mb=N)",
            file=name, record=record, field=field,
        )


def check_file(
    path: Path, *, file: Path | str | None = None, record: str | int | None = None, field: str | None = None,
    what: str = "file",
) -> Path:
    """``path`` resolved, when it is a regular file inside the roots and within the size bound."""
    real = confine(path, file=file, record=record, field=field, what=what)
    try:
        st = real.stat()
    except FileNotFoundError:
        raise InputError(
            f"{what} not found: {path}", file=str(file if file is not None else path), record=record, field=field
        ) from None
    except OSError as e:
        raise InputError(f"cannot read {what}: {e.strerror}", file=str(file if file is not None else path)) from None
    _check_stat(st, path, file=file, record=record, field=field, what=what)
    return real


def list_folder(folder: Path, pattern: str) -> list[Path]:
    """The paths under ``folder`` that match ``pattern`` (none when the folder is absent).  A folder, or an
    entry, that is a symlink loop or a dangling link is an :class:`InputError` rather than skipped without a
    word; a folder that leads outside the roots is refused like a file."""
    if folder.is_symlink() or folder.exists():
        if not folder.exists():
            raise InputError("a symlink loop or a dangling link; expected a folder", file=str(folder))
        confine(folder, what="folder")
        if not folder.is_dir():
            raise InputError("not a folder", file=str(folder))
    else:
        return []
    try:
        found = list(folder.glob(pattern))
    except OSError as e:
        raise InputError(f"cannot list the folder: {e.strerror}", file=str(folder)) from None
    try:  # every entry of the folder, matched or not: a loop or dangling link is refused, never skipped
        entries = [*folder.iterdir(), *found]
    except OSError as e:
        raise InputError(f"cannot list the folder: {e.strerror}", file=str(folder)) from None
    for p in entries:
        if p.is_symlink() and not p.exists():
            raise InputError("a symlink loop or a dangling link", file=str(p))
    return found


@contextmanager
def _open_data(path: Path) -> Iterator[Any]:
    """A data file opened non-blocking and checked before any read, so a FIFO or a device never hangs."""
    real = check_file(path)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(f"cannot read file: {e.strerror}", file=str(path)) from None
    with os.fdopen(fd, "rb") as f:
        _check_stat(os.fstat(f.fileno()), path, file=None, record=None, field=None, what="file")
        yield f


def _over_bound(path: Path, bound: int) -> InputError:
    return InputError(f"file is over the {_mb(bound)} bound (raise it with --data-opt max_file_mb=N)",
                      file=str(path))


def read_bytes(path: Path, *, limit: int | None = None) -> bytes:
    """The content of a data file (at most ``limit`` bytes when given: a sniffer's look at the head).

    The file is opened non-blocking and checked before any read, so a FIFO or a device never hangs.
    """
    with _open_data(path) as f:
        bound = current_policy().max_bytes
        data: bytes = f.read(min(bound, limit) + 1 if limit is not None else bound + 1)
    if limit is None and len(data) > bound:  # a file that grew, or lies about its size (/proc)
        raise _over_bound(path, bound)
    return data if limit is None else data[:limit]


def iter_text_lines(path: Path, *, keepends: bool = False) -> Iterator[str]:
    """The lines of a data file (split on ``\\n`` only, UTF-8, a BOM dropped; ``keepends``: each with its
    ``\\n``), read one at a time: a large file is never held whole in memory.  The same checks and bound as
    :func:`read_bytes`."""
    bound = current_policy().max_bytes
    seen = 0
    with _open_data(path) as f:
        for raw in f:
            start = seen
            seen += len(raw)
            if seen > bound:
                raise _over_bound(path, bound)
            try:
                line = raw.decode("utf-8-sig" if start == 0 else "utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"not UTF-8 text (byte {start + e.start}: {e.reason})", file=str(path)) from None
            yield line if keepends or not line.endswith("\n") else line[:-1]


_CR = re.compile(r"(?<=\r)(?!\n)")  # after a lone carriage return


def iter_csv_lines(path: Path) -> Iterator[str]:
    """The lines of a data file as the csv module reads a file opened with ``newline=""``: split after
    ``\\n``, ``\\r\\n`` or a lone ``\\r``, each kept with its line end; read one at a time (what
    :func:`iter_text_lines` checks)."""
    for line in iter_text_lines(path, keepends=True):
        if "\r" in line:
            yield from (part for part in _CR.split(line) if part)
        else:
            yield line


def read_text(path: Path) -> str:
    """A data file as text (UTF-8, a BOM is dropped)."""
    try:
        return read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text (byte {e.start}: {e.reason})", file=str(path)) from None


def _long_int(digits: str) -> int | float:
    """An integer of a JSON text: as written, or infinite past the digits Python converts."""
    return int(digits) if len(digits) <= _INT_DIGITS else float(digits)


_INT_DIGITS = 4000  # below sys.get_int_max_str_digits()'s default 4,300


class DuplicateKey(ValueError):
    """A JSON object names one key twice (``json`` keeps the last value, silently)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r} in a JSON object")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of every JSON read from the user: a key written twice is :class:`DuplicateKey`."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKey(k)
            seen.add(k)
    return obj


def unique_header(header: Iterable[Any], *, file: Path | str, record: str = "line 1",
                  columns_in: str = "the header") -> list[str]:
    """A table's column names (stripped), refused (:class:`InputError` naming file, record and the column) when
    one is written twice: a row would keep one of the two cells without a word.  Unnamed columns are not read
    and may repeat."""
    first: dict[str, int] = {}
    names = []
    for i, h in enumerate((str(h).strip() for h in header), 1):
        if h and h in first:
            raise InputError(f"the column {shorten(h)!r} appears twice in {columns_in} (columns {first[h]} and {i}): "
                             "which one's values count would be a guess; rename or remove one", file=str(file),
                             record=record, field=h)
        first.setdefault(h, i)
        names.append(h)
    return names


def loads(text: str | bytes, *, file: Path | str, record: str | int | None = None) -> Any:
    """``json.loads`` that cannot crash on hostile input: malformed JSON, nesting deeper than the parser's
    recursion bound (``[[[[...``) and NaN/Infinity are one :class:`InputError` naming ``file`` and ``record``
    (malformed JSON reports its line when ``record`` is not given); so is a key written twice in one object
    (naming the key as the field: json would keep the last value without a word).  An integer written with more
    digits than Python converts (4,300) is read as a float, infinite: the record's model then refuses it, naming its
    field (as it refuses ``1e999``)."""
    try:
        try:
            return json.loads(text, object_pairs_hook=unique_keys)
        except ValueError as e:
            if isinstance(e, (json.JSONDecodeError, DuplicateKey)) or "digits" not in str(e):
                raise
            return json.loads(text, parse_int=_long_int, object_pairs_hook=unique_keys)  # a number too long
    except DuplicateKey as e:
        raise InputError(f"the key {shorten(e.key)!r} appears twice in one JSON object: which value counts would be "
                         "a guess; remove one", file=str(file), record=record, field=e.key) from None
    except json.JSONDecodeError as e:
        raise InputError(
            f"malformed JSON: {e.msg} (column {e.colno})", file=str(file),
            record=record if record is not None else f"line {e.lineno}",
        ) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", file=str(file), record=record) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text (byte {e.start}: {e.reason})", file=str(file), record=record) from None


class CsvRows:
    """The rows of a CSV text (``csv.reader`` options), with ``line_num`` as the reader counts it.  A field
    may be as long as the file's size bound allowed (``max_file_mb``: the csv module's default, 131,072
    characters, is raised to it), and what the csv module raises (a NUL byte, a bad dialect) is an
    :class:`InputError` naming the file and line."""

    def __init__(self, text: str | Iterable[str], *, file: Path | str, **options: Any) -> None:
        """``text``: the whole text, or its lines as :func:`iter_csv_lines` reads them (streamed)."""
        bound = min(current_policy().max_bytes, 2**31 - 1)
        if csv.field_size_limit() < bound:
            csv.field_size_limit(bound)
        self.file = str(file)
        try:
            self._reader = csv.reader(io.StringIO(text, newline="") if isinstance(text, str) else text, **options)
        except (TypeError, csv.Error) as e:
            raise InputError(f"cannot read as CSV: {e}", file=self.file) from None

    @property
    def line_num(self) -> int:
        return int(self._reader.line_num)

    def __iter__(self) -> CsvRows:
        return self

    def __next__(self) -> list[str]:
        try:
            return next(self._reader)
        except csv.Error as e:
            raise InputError(f"cannot read as CSV: {e}", file=self.file, record=f"line {self.line_num}") from None


def first_json_line(path: Path) -> Any:
    """The first non-blank line of a JSONL file, parsed; None when it cannot be read or parsed.
    For sniffers: reads only the head of the file."""
    try:
        head = read_bytes(path, limit=_HEAD_BYTES).decode("utf-8-sig", errors="replace")
        line = next((ln for ln in head.split("\n") if ln.strip()), "")
        return json.loads(line)
    except (InputError, ValueError, RecursionError):
        return None


def sniff_json(path: Path) -> Any:
    """A JSON file, parsed; None when it cannot be read or parsed (for sniffers)."""
    try:
        return json.loads(read_text(path))
    except (InputError, ValueError, RecursionError):
        return None


def read_json(path: Path) -> Any:
    return loads(read_text(path), file=path)


def iter_json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file."""
    # Split on "\n" only: str.splitlines() would also split on U+2028 inside JSON strings.
    for n, line in enumerate(iter_text_lines(path), 1):
        if not line.strip():
            continue
        obj = loads(line, file=path, record=f"line {n}")
        if not isinstance(obj, dict):
            raise InputError(
                f"expected a JSON object, got {type(obj).__name__}", file=str(path), record=f"line {n}"
            )
        yield n, obj


def is_local(ref: str) -> bool:
    return not (re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", ref) or ref.startswith("data:"))


#: the URL schemes ``allow_urls`` keeps (passed to the judge API as they are, never fetched by knockout)
URL_SCHEMES = ("http://", "https://", "data:image/")


def resolve_image(ref: object, folder: Path, *, file: Path, record: str | int | None, field: str) -> str:
    """An image path relative to ``folder`` made absolute; it must be a regular file inside the
    allowed roots.  URLs are kept only when the policy allows them."""
    if not isinstance(ref, str) or not ref.strip():
        raise InputError(
            f"image path must be a non-empty string, got {shorten(repr(ref))}",
            file=str(file),
            record=record,
            field=field,
        )
    if not is_local(ref):
        if current_policy().allow_urls and ref.lower().startswith(URL_SCHEMES):
            return ref
        if current_policy().allow_urls:
            raise InputError(
                f"image URL {shorten(ref)} refused: allow_urls keeps http(s) and data:image URLs only",
                file=str(file), record=record, field=field,
            )
        raise InputError(
            f"image URL {shorten(ref)} refused: images must be files inside the data folder "
            "(keep URLs with --data-opt allow_urls=true)",
            file=str(file),
            record=record,
            field=field,
        )
    full = os.path.normpath(folder.resolve() / ref)
    check_file(Path(full), file=file, record=record, field=field, what="image file")
    return full


def natural_key(s: str) -> list[Any]:
    """Sort key that orders "2.1" before "10.1"."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", s)]


def item_set(questions: Iterable[Question], answers: Iterable[Answer], path: Path) -> ItemSet:
    return ItemSet(questions, answers, source=str(path))
