"""In-memory tables and Hugging Face datasets: one row per answer, the same columns and mapping as CSV
(:mod:`.table`).

* :func:`from_dataframe` — a pandas DataFrame (``pip install 'knockout[dataframes]'``);
* :func:`from_dataset` — a Hugging Face ``datasets.Dataset`` (or a ``DatasetDict`` with ``split``);
* the ``hf-dataset`` loader (this module's :func:`sniff` / :func:`load`) — a folder written by
  ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``, read with ``datasets.load_from_disk``: local
  files only, nothing is downloaded.  ``datasets.load_dataset("name")`` (which downloads) is left to
  the user: pass its result to :func:`from_dataset`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from knockout.data._formats.table import Row, load_rows
from knockout.data._io import check_file, confine
from knockout.data._records import ItemSet
from knockout.errors import ConfigError, InputError

DATASET_FILES = ("state.json", "dataset_info.json")
DATASET_DICT_FILE = "dataset_dict.json"


def is_dataframe(obj: object) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "to_dict") and hasattr(obj, "columns")


def is_dataset(obj: object) -> bool:
    """A ``datasets.Dataset`` or ``DatasetDict`` (told by duck type, so datasets need not be imported)."""
    return type(obj).__name__ in ("Dataset", "DatasetDict") and hasattr(obj, "column_names")


def from_dataframe(df: Any, *, columns: Mapping[str, str] | str | None = None,
                   source: str = "<DataFrame>") -> ItemSet:
    """The item set of a pandas DataFrame with one row per answer (errors name the row's index label)."""
    names, rows = frame_rows(df, source=source)
    return load_rows(rows, names, columns=columns, path=Path(source), source=source, header_where="columns",
                     columns_in="the columns")


def frame_rows(df: Any, *, source: str = "<DataFrame>") -> tuple[list[str], Iterator[Row]]:
    """A DataFrame's column names and its rows as ``("row LABEL", {column: value})``, in order."""
    if not is_dataframe(df):
        raise ConfigError(f"expected a pandas DataFrame, got {type(df).__name__}")
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise InputError("duplicate column names", file=source, record="columns")

    def rows() -> Iterator[Row]:
        for label, values in zip(df.index, df.itertuples(index=False, name=None), strict=True):
            yield f"row {label}", dict(zip(names, values, strict=True))

    return names, rows()


def from_dataset(ds: Any, *, columns: Mapping[str, str] | str | None = None, split: str | None = None,
                 source: str = "<Dataset>") -> ItemSet:
    """The item set of a Hugging Face dataset (a ``DatasetDict`` needs ``split``, unless it has one split)."""
    if type(ds).__name__ == "DatasetDict":
        splits = list(ds.keys())
        if split is None and len(splits) == 1:
            split = splits[0]
        if split not in splits:
            raise ConfigError(f"{source}: name a split with split=NAME (splits: {', '.join(splits)})")
        ds, source = ds[split], f"{source}[{split}]"
    elif split is not None:
        raise ConfigError(f"{source}: a Dataset has no splits (split={split!r})")
    if not is_dataset(ds):
        raise ConfigError(f"expected a Hugging Face datasets.Dataset, got {type(ds).__name__}")
    names = [str(c) for c in ds.column_names]
    return load_rows(((f"row {i}", r) for i, r in enumerate(ds, 1)), names, columns=columns, path=Path(source),
                     source=source, header_where="features", columns_in="the features")


def load_frame(obj: Any, *, columns: Mapping[str, str] | str | None = None, split: str | None = None,
               source: str | None = None) -> ItemSet:
    """A DataFrame or a dataset object, by its type."""
    if is_dataframe(obj):
        if split is not None:
            raise ConfigError("a DataFrame has no splits (option split)")
        return from_dataframe(obj, columns=columns, source=source or "<DataFrame>")
    if is_dataset(obj):
        return from_dataset(obj, columns=columns, split=split, source=source or "<Dataset>")
    raise ConfigError(f"cannot load items from a {type(obj).__name__}: give a path, a pandas DataFrame or a "
                      "Hugging Face Dataset")


# -- the hf-dataset loader: a folder written by save_to_disk ------------------------------------
def sniff(path: Path) -> bool:
    """A folder written by ``save_to_disk``: ``state.json`` + ``dataset_info.json``, or ``dataset_dict.json``."""
    if not path.is_dir():
        return False
    return (path / DATASET_DICT_FILE).is_file() or all((path / f).is_file() for f in DATASET_FILES)


def load(path: Path, *, columns: Mapping[str, str] | str | None = None, split: str | None = None) -> ItemSet:
    """Options: ``columns`` (as for CSV); ``split`` for a folder holding several splits."""
    if not sniff(path):
        raise InputError("not a dataset folder written by save_to_disk (no state.json and dataset_info.json, "
                         "no dataset_dict.json)", file=str(path))
    for root, dirs, files in os.walk(path):  # every file inside the data folder, regular, within the size bound
        for name in dirs:
            confine(Path(root) / name, file=path, what="dataset folder")
        for name in files:
            check_file(Path(root) / name, file=path, what="dataset file")
    try:
        import datasets
    except ImportError:
        raise ConfigError("reading a dataset folder needs datasets: pip install 'knockout[dataframes]'") from None
    try:
        ds = datasets.load_from_disk(str(path))
    except (OSError, ValueError, FileNotFoundError) as e:
        raise InputError(f"cannot read the dataset folder: {e}", file=str(path)) from None
    return from_dataset(ds, columns=columns, split=split, source=str(path))
