"""Data: records, loaders and writers.

``load_items(path, format="auto", **options)`` returns an :class:`ItemSet`.
Loaders are registered by name in :data:`loaders`; ``auto`` picks one from the
path (extension, folder layout, first record).  Side-by-side pair files:
``is_pair_file(path)`` and ``read_pairs(path)``.
"""

from __future__ import annotations

from knockout.data._loaders import detect_format, load_items, loaders
from knockout.data._pairs import is_pair_file, read_pairs
from knockout.data._records import Answer, ItemSet, PairItem, Question, ScoredText
from knockout.data._writer import write_jsonl

__all__ = [
    "Answer",
    "ItemSet",
    "PairItem",
    "Question",
    "ScoredText",
    "detect_format",
    "is_pair_file",
    "load_items",
    "loaders",
    "read_pairs",
    "write_jsonl",
]
