"""What the annotation tables share: the optimistic-write rule, row dicts and settings."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from typing import Any

from knockout.errors import InputError

#: The largest version a save may name (grades and verdicts grow by one per save).
MAX_VERSION = 2**31 - 1


class StaleWrite(Exception):
    """A save based on an older version than the stored one; ``current`` is the newer row."""

    def __init__(self, current: dict[str, Any] | None) -> None:
        self.current = current
        super().__init__("the stored value changed since it was loaded")


def setting(db: sqlite3.Connection, key: str) -> str:
    """The value of ``key`` in ``web_settings``; a missing key gets a fresh random secret (32 bytes)."""
    db.execute("INSERT OR IGNORE INTO web_settings (key, value) VALUES (?, ?)", (key, secrets.token_urlsafe(32)))
    return str(db.execute("SELECT value FROM web_settings WHERE key = ?", (key,)).fetchone()[0])


def rows(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    """Every row of ``cur`` as a dict keyed by column name."""
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur]


def check_version(base_version: int) -> int:
    """The version a save is based on: 0 (nothing saved yet) .. :data:`MAX_VERSION` - 1."""
    if not 0 <= base_version < MAX_VERSION:
        raise InputError(f"{base_version} is outside 0..{MAX_VERSION - 1}", field="version")
    return base_version


def versioned_write(
    db: sqlite3.Connection,
    base_version: int,
    insert: tuple[str, tuple[Any, ...]],
    update: tuple[str, tuple[Any, ...]],
    current: Callable[[], dict[str, Any] | None],
) -> int:
    """The optimistic-write rule, inside the caller's transaction: the first save (``base_version`` 0)
    inserts version 1, a later one updates the row only where it still has ``base_version``.  Anything
    else raises :class:`StaleWrite` with ``current()`` (the newer row).  Returns the new version."""
    check_version(base_version)
    cur = db.execute(*insert) if base_version == 0 else db.execute(*update)
    if cur.rowcount != 1:
        raise StaleWrite(current())
    return base_version + 1
