"""Storage: one SQLite file per store — the judge-call cache, runs, results, matches, item-set snapshots
(and the web app's annotation and account tables, :class:`AnnotationTables` and :class:`AccountTables`) —
with a versioned schema (:mod:`knockout.storage._migrations`).  Every SQL statement on a store is run here."""

from knockout.storage._accounts import AccountTables
from knockout.storage._annotations import AnnotationTables, StaleWrite
from knockout.storage._migrations import MIGRATIONS, Migration, latest, migrate
from knockout.storage._store import RUN_STATES, MatchRow, ResultRow, RunRecord, Store

__all__ = [
    "MIGRATIONS",
    "RUN_STATES",
    "AccountTables",
    "AnnotationTables",
    "MatchRow",
    "Migration",
    "ResultRow",
    "RunRecord",
    "StaleWrite",
    "Store",
    "latest",
    "migrate",
]
