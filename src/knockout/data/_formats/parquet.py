"""Parquet: one row per answer, the same columns and mapping as CSV (:mod:`.table`); needs pyarrow
(``pip install 'knockout[dataframes]'``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from knockout.data._formats.table import load_rows
from knockout.data._io import read_bytes
from knockout.data._records import ItemSet
from knockout.errors import ConfigError, InputError

MAGIC = b"PAR1"


def sniff(path: Path) -> bool:
    """A ``.parquet`` file."""
    return path.suffix.lower() in (".parquet", ".pq") and path.is_file()


def load(path: Path, *, columns: Mapping[str, str] | str | None = None) -> ItemSet:
    """Option ``columns``: our field -> the file's column, as for CSV."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("reading Parquet needs pyarrow: pip install 'knockout[dataframes]'") from None

    data = read_bytes(path)  # confined to the data folder and bounded like every data file
    if not data.startswith(MAGIC) or not data.endswith(MAGIC):
        raise InputError("not a Parquet file (no PAR1 magic bytes)", file=str(path))
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"cannot read the Parquet file: {e}", file=str(path)) from None
    rows = table.to_pylist()
    return load_rows(((f"row {i}", r) for i, r in enumerate(rows, 1)), table.column_names, columns=columns,
                     path=path, header_where="schema", columns_in="the schema")
