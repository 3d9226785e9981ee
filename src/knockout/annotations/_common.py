"""What the annotation tables share: the optimistic-write rule's version bound and its error.

The tables themselves are read and written through the store (:attr:`Store.annotations`,
:class:`knockout.storage.AnnotationTables`), which applies the rule and raises :class:`StaleWrite`."""

from __future__ import annotations

from knockout.errors import InputError
from knockout.storage._annotations import StaleWrite

__all__ = ["MAX_VERSION", "StaleWrite", "check_version"]

#: The largest version a save may name (grades and verdicts grow by one per save).
MAX_VERSION = 2**31 - 1


def check_version(base_version: int) -> int:
    """The version a save is based on: 0 (nothing saved yet) .. :data:`MAX_VERSION` - 1."""
    if not 0 <= base_version < MAX_VERSION:
        raise InputError(f"{base_version} is outside 0..{MAX_VERSION - 1}", field="version")
    return base_version
