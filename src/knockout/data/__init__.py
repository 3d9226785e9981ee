"""Data: records, loaders and writers.

``load_items(path, format="auto", **options)`` returns an :class:`ItemSet`; ``load_item_sets(paths, ...)``
reads several inputs (a list of exams) as one.
Loaders (formats with ``sniff`` and ``load``) are registered by name in :data:`loaders`, plugins
through the entry-point group ``knockout.loaders``; ``auto`` asks each loader's ``sniff``.  Loads are
confined to the data folder (``allow_root``, ``allow_urls``, ``max_file_mb``); loaders read through
:func:`read_text` / :func:`read_bytes` and resolve images with :func:`resolve_image`.  Side-by-side pair files:
``is_pair_file(path)`` and ``read_pairs(path)``.  In-memory tables (one row per answer, CSV's columns):
``from_dataframe(df)``, ``from_dataset(ds)`` (Hugging Face), or ``load_items(df)``.
"""

from __future__ import annotations

from knockout.data._io import is_local, read_bytes, read_text, resolve_image
from knockout.data._loaders import (
    Loader,
    detect_format,
    from_dataframe,
    from_dataset,
    load_item_sets,
    load_items,
    loaders,
)
from knockout.data._pairs import is_pair_file, read_pairs
from knockout.data._records import Answer, Criterion, ItemSet, PairItem, Question, ScoredText
from knockout.data._writer import write_jsonl

__all__ = [
    "Answer",
    "Criterion",
    "ItemSet",
    "Loader",
    "PairItem",
    "Question",
    "ScoredText",
    "detect_format",
    "from_dataframe",
    "from_dataset",
    "is_local",
    "is_pair_file",
    "load_item_sets",
    "load_items",
    "loaders",
    "read_bytes",
    "read_pairs",
    "read_text",
    "resolve_image",
    "write_jsonl",
]
