"""Parquet: one row per answer, the same columns and mapping as CSV (:mod:`.table`); needs pyarrow
(``pip install 'knockout[dataframes]'``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from knockout.data._formats.table import Row, load_rows
from knockout.data._io import read_bytes
from knockout.data._records import ItemSet
from knockout.errors import ConfigError, InputError

MAGIC = b"PAR1"
BATCH = 8192  # rows made into Python objects at a time


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
        parquet = pq.ParquetFile(pa.BufferReader(data))
        names = parquet.schema_arrow.names
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"cannot read the Parquet file: {e}", file=str(path)) from None

    def rows() -> Iterator[Row]:
        """The rows, a batch of them at a time (never the whole table as Python objects)."""
        n = 0
        batches = parquet.iter_batches(batch_size=BATCH)
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError) as e:
                raise InputError(f"cannot read the Parquet file: {e}", file=str(path)) from None
            if batch is None:
                return
            for r in batch.to_pylist():
                n += 1
                yield f"row {n}", r

    return load_rows(rows(), names, columns=columns, path=path, header_where="schema", columns_in="the schema")
