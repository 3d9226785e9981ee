"""CSV: one row per answer; question fields repeat on each row of the same question (see :mod:`.table`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from knockout.data._formats.table import Row, load_rows, parse_column_map
from knockout.data._io import CsvRows, iter_csv_lines
from knockout.data._records import ItemSet
from knockout.errors import InputError

__all__ = ["load", "parse_column_map", "sniff"]


def sniff(path: Path) -> bool:
    """A ``.csv`` file."""
    return path.suffix.lower() == ".csv" and path.is_file()


def load(path: Path, *, columns: Mapping[str, str] | str | None = None, delimiter: str = ",") -> ItemSet:
    """Options: ``columns`` maps our field names to the file's column names (or a "field=column,..."
    string); ``delimiter`` (default ",")."""
    reader = CsvRows(iter_csv_lines(path), file=path, delimiter=delimiter)  # read a line at a time
    header = [h.strip() for h in next(reader, [])]
    if not any(header):
        raise InputError("empty CSV file (no header)", file=str(path), record="line 1")

    def rows() -> Iterator[Row]:
        line = 1
        for row in reader:
            start, line = line + 1, reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise InputError(f"expected {len(header)} columns, found {len(row)}", file=str(path),
                                 record=f"line {start}")
            yield f"line {start}", {name: row[i] for i, name in enumerate(header)}

    return load_rows(rows(), header, columns=columns, path=path, header_where="line 1")
