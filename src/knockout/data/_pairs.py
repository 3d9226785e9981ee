"""Side-by-side pair files: telling them from item sets, and reading them as :class:`PairItem`.

Three shapes are pairs: the meta-evaluation pairwise JSONL (``input, output_1, output_2, label``) and the
PandaLM JSON, both read by :func:`knockout.data._formats.metaeval.load_pairs`, and a JSONL of ``PairItem``
objects (``{"id", "question", "answer_a", "answer_b", "reference"?, ...}``).
"""

from __future__ import annotations

from pathlib import Path

from knockout.data._formats.metaeval import load_pairs
from knockout.data._io import build, iter_json_lines
from knockout.data._loaders import detect_format
from knockout.data._records import PairItem


def is_pair_file(path: Path) -> bool:
    """Whether ``path`` holds side-by-side pairs: PandaLM JSON, a meta-evaluation pairwise JSONL
    (``output_1``/``output_2``) or PairItem JSONL (``answer_a``/``answer_b``)."""
    if not path.is_file():
        return False
    if path.suffix.lower() == ".json":
        return detect_format(path) == "metaeval"
    if path.suffix.lower() != ".jsonl":
        return False
    first = next(iter_json_lines(path), (0, {}))[1]
    return "output_1" in first or ("answer_a" in first and "answer_b" in first)


def read_pairs(path: Path) -> list[PairItem]:
    """Pairs from PairItem JSONL (one ``PairItem`` object per line) or anything ``load_pairs`` reads."""
    rows = list(iter_json_lines(path)) if path.suffix.lower() == ".jsonl" else []
    if rows and "answer_a" in rows[0][1]:
        return [build(PairItem, row, file=path, record=f"line {n}") for n, row in rows]
    return load_pairs(path)
