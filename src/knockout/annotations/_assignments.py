"""Who grades which exam and who annotates which pair set (table ``web_assignments``)."""

from __future__ import annotations

import time
from typing import Literal

from knockout.errors import ConfigError
from knockout.storage._store import Store

Kind = Literal["exam", "pairset"]


class Assignments:
    """Assignments of users (by name) to exams (``kind='exam'``) and pair sets (``kind='pairset'``).

    The order in which annotators were assigned to a pair set decides the allocation of its pairs."""

    def __init__(self, store: Store) -> None:
        self.tables = store.annotations

    def targets(self, kind: Kind) -> list[str]:
        """Every exam or pair set in the store."""
        return self.tables.exam_ids() if kind == "exam" else self.tables.pairset_ids()

    def check(self, kind: Kind, target: str) -> None:
        """ConfigError unless the exam or pair set ``target`` is in the store."""
        every = self.targets(kind)
        if target not in every:
            what = "exam" if kind == "exam" else "pair set"
            raise ConfigError(f"no {what} '{target}' in the store ({what}s: {', '.join(every) or 'none'})")

    def assign(self, user: str, kind: Kind, target: str) -> None:
        self.check(kind, target)
        self.tables.assign(user, kind, target, time.time())

    def unassign(self, user: str, kind: Kind, target: str) -> None:
        self.tables.unassign(user, kind, target)

    def remove_user(self, user: str) -> None:
        self.tables.remove_assignments(user)

    def of_user(self, user: str, kind: Kind) -> list[str]:
        return self.tables.assigned_targets(user, kind)

    def users_of(self, kind: Kind, target: str) -> list[str]:
        """Users assigned to ``target``, in the order they were assigned."""
        return self.tables.assigned_users(kind, target)
