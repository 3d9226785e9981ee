"""Loaders: ``load_items(path, format="auto", **options) -> ItemSet``.

A loader (a data format) is anything with ``sniff(path) -> bool`` (is this path in my format?) and
``load(path, **options) -> ItemSet`` — knockout's own are the modules in ``knockout.data._formats``.
Loaders are registered by name in :data:`loaders` (lazily: a format module is imported on first
use); third-party formats come through the entry-point group ``knockout.loaders``.  ``auto`` asks
every loader's ``sniff``: exactly one must claim the path.  Every load runs under an
:class:`~knockout.data._io.InputPolicy`: files and images only inside the data folder (or an
``allow_root``), image URLs only with ``allow_urls``, no file over ``max_file_mb``.  The formats are
described in docs/data-formats.md.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from knockout._bounds import MAX_FILE_MB, valid_unicode
from knockout._registry import Registry
from knockout.data._formats.frames import from_dataframe, from_dataset, load_frame
from knockout.data._formats.metaeval import load_pairs, load_scored_texts
from knockout.data._formats.table import parse_column_map
from knockout.data._io import DEFAULT_MAX_FILE_MB, InputPolicy, input_policy
from knockout.data._records import ItemSet
from knockout.errors import ConfigError, InputError, KnockoutError

log = logging.getLogger(__name__)


class Loader(Protocol):
    """A data format: ``sniff`` says whether a path is in it (cheaply, never raising), ``load`` reads
    it; ``load``'s keyword-only parameters are the format's options."""

    def sniff(self, path: Path) -> bool: ...

    def load(self, path: Path, **options: Any) -> ItemSet: ...


loaders: Registry[Loader] = Registry("format", group="knockout.loaders")
loaders.add("jsonl", "knockout.data._formats.jsonl",
            "the project's own JSONL (type: question / answer), or flat: one answer per line; option columns")
loaders.add("csv", "knockout.data._formats.csvfile", "one row per answer; options columns, delimiter")
loaders.add("parquet", "knockout.data._formats.parquet", "one row per answer (as CSV); option columns")
loaders.add("hf-dataset", "knockout.data._formats.frames",
            "a Hugging Face dataset folder (save_to_disk), one row per answer; options columns, split")
loaders.add("wmt", "knockout.data._formats.wmt",
            "WMT DA in the mt-metrics-eval layout; options pairs, human, min_translations, duplicates, ...")
loaders.add("sciex", "knockout.data._formats.sciex", "SciEx exam folder or exam JSON; option language")
loaders.add("sciex-repo", "knockout.data._formats.sciex_repo",
            "the SciEx authors' repository layout (exams_json/, human_feedback/, llm_out_filtered/); options exams, "
            "language")
loaders.add("saf", "knockout.data._formats.saf", "SAF XML file or folder; option max_points")
loaders.add(
    "mqm",
    "knockout.data._formats.mqm",
    "MQM TSV pair or folder; options pair, include_reference_systems, segments, reference_system",
)
loaders.add(
    "metaeval",
    "knockout.data._formats.metaeval",
    "meta-evaluation JSONL (scoring or pairwise) or PandaLM JSON; option instruction",
)

#: Options every format accepts (they set the input policy, not the loader).
COMMON_OPTIONS = ("allow_root", "allow_urls", "max_file_mb")

__all__ = [
    "COMMON_OPTIONS",
    "Loader",
    "detect_format",
    "from_dataframe",
    "from_dataset",
    "load_item_sets",
    "load_items",
    "load_pairs",
    "load_scored_texts",
    "loaders",
    "parse_column_map",
]


def check_input(path: Path) -> None:
    """The input must exist and be a folder or a regular file (a FIFO or device is refused at once), named in
    valid Unicode (a file name with bytes that are not UTF-8 cannot be recorded as the data's source)."""
    try:
        valid_unicode(str(path))
    except ValueError:
        raise InputError("the path is not valid UTF-8; rename the file or folder",
                         file=str(path).encode("utf-8", "backslashreplace").decode()) from None
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError("no such file or folder", file=str(path)) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", file=str(path)) from None
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise InputError("not a regular file or folder (a FIFO, device or socket); refused", file=str(path))


def detect_format(path: str | os.PathLike[str]) -> str:
    """The name of the one loader whose ``sniff`` claims ``path``."""
    p = Path(path)
    check_input(p)
    claims: list[str] = []
    broken: list[str] = []
    for name in loaders.names():
        try:
            loader = loaders.get(name)
        except (KnockoutError, ImportError) as exc:  # a plugin that fails to import
            log.warning("%s", exc)
            broken.append(f"{name}: {exc}")
            continue
        try:
            if loader.sniff(p):
                claims.append(name)
        except (KnockoutError, OSError, ValueError):
            continue
    if len(claims) == 1:
        return claims[0]
    known = ", ".join(loaders.names())
    if claims:
        raise InputError(
            f"several formats claim this input ({', '.join(claims)}); name one with --format", file=str(p)
        )
    failed = f"; not asked: {'; '.join(broken)}" if broken else ""
    raise InputError(f"cannot tell the format; name it with --format (known: {known}){failed}", file=str(p))


def _policy(
    path: Path, allow_root: Any, allow_urls: Any, max_file_mb: Any
) -> InputPolicy:
    data_root = Path(os.path.realpath(path if path.is_dir() else path.parent))
    roots = [data_root]
    extra: Sequence[Any] = (
        [] if allow_root is None else [allow_root] if isinstance(allow_root, (str, os.PathLike)) else allow_root
    )
    for r in extra:
        root = Path(os.path.realpath(Path(r).expanduser()))
        if not root.is_dir():
            raise ConfigError(f"option allow_root: no such folder: {r}")
        roots.append(root)
    urls = _coerce("", "allow_urls", allow_urls, "bool")
    mb = DEFAULT_MAX_FILE_MB if max_file_mb is None else _coerce("", "max_file_mb", max_file_mb, "float")
    if not isinstance(mb, (int, float)) or not math.isfinite(mb) or not 0 < mb <= MAX_FILE_MB:
        raise ConfigError(f"option max_file_mb must be a number > 0 and <= {MAX_FILE_MB:g}, got {max_file_mb!r}")
    return InputPolicy(roots=tuple(roots), allow_urls=bool(urls), max_bytes=int(mb * 2**20))


def load_items(
    path: str | os.PathLike[str] | Any,
    format: str = "auto",
    *,
    allow_root: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    allow_urls: bool | str = False,
    max_file_mb: float | str | None = None,
    **options: Any,
) -> ItemSet:
    """Load questions and answers from ``path`` with the named loader (``auto``: :func:`detect_format`).

    Files and images are read only inside the data folder (the folder given, or the file's folder)
    and the folders in ``allow_root``; image URLs are kept only with ``allow_urls``; files over
    ``max_file_mb`` (default :data:`DEFAULT_MAX_FILE_MB`) are refused.  Other options go to the loader.

    ``path`` may also be a pandas DataFrame or a Hugging Face ``Dataset``/``DatasetDict`` with one row
    per answer (options ``columns``, and ``split`` for a DatasetDict), read as a CSV file would be.
    """
    if not isinstance(path, (str, os.PathLike)):
        unknown = sorted(set(options) - {"columns", "split"})
        if unknown or format not in ("auto", "dataframe", "dataset"):
            raise ConfigError(f"a {type(path).__name__} takes only the options columns and split "
                              f"(got format={format!r}{', ' + ', '.join(unknown) if unknown else ''})")
        return load_frame(path, **options)
    p = Path(path)
    check_input(p)
    policy = _policy(p, allow_root, allow_urls, max_file_mb)
    with input_policy(policy):
        name = detect_format(p) if format == "auto" else format
        if name not in loaders:
            raise InputError(f"unknown format '{name}' (known: {', '.join(loaders.names())})", file=str(p))
        load = loaders.get(name).load
        params = {k: v for k, v in inspect.signature(load).parameters.items() if v.kind is v.KEYWORD_ONLY}
        unknown = sorted(set(options) - set(params))
        if unknown:
            hint = ", ".join([*params, *COMMON_OPTIONS])
            raise ConfigError(f"unknown option(s) {', '.join(unknown)} for format '{name}' (known: {hint})")
        return load(p, **{k: _coerce(name, k, v, str(params[k].annotation)) for k, v in options.items()})


def _coerce(fmt: str, option: str, value: Any, annotation: str) -> Any:
    """Options given as text (``--option segments=20`` on the command line) get the loader's type."""
    if not isinstance(value, str) or "str" in annotation:
        return value
    text = value.strip().lower()
    try:
        if "None" in annotation and text in ("none", ""):
            return None
        if "bool" in annotation:
            return {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}[text]
        if "int" in annotation:
            return int(text)
        if "float" in annotation:
            return float(text.replace(",", "."))
    except (KeyError, ValueError):
        of = f" of format '{fmt}'" if fmt else ""
        raise ConfigError(f"option {option}{of} must be {annotation}, got {value!r}") from None
    return value


def load_item_sets(
    paths: Sequence[str | os.PathLike[str]], format: str = "auto", **options: Any
) -> ItemSet:
    """Several inputs (a list of exams, each a file or folder :func:`load_items` reads) as one item set: their
    questions and answers together, in the order given.  Each input is read under its own folder's policy;
    a question or answer id found in two inputs is an :class:`InputError` naming the second input."""
    if not paths:
        raise ConfigError("no data given")
    if len(paths) == 1:
        return load_items(paths[0], format, **options)
    questions: dict[str, str] = {}
    sets: list[tuple[str, ItemSet]] = []
    for p in paths:
        s = load_items(p, format, **options)
        for qid in s.questions:
            if qid in questions:
                raise InputError(f"question id also in {questions[qid]}; give each exam once", file=str(p),
                                 record=qid, field="id")
            questions[qid] = str(p)
        for i in range(len(s)):
            aid = s.answer_id_at(i)
            before = next((where for where, prev in sets if prev.find(aid) is not None), None)
            if before is not None:
                raise InputError(f"answer id also in {before}", file=str(p), record=aid, field="id")
        sets.append((str(p), s))
    return ItemSet.concat([s for _, s in sets], source=", ".join(str(p) for p in paths))
