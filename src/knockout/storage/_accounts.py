"""The web app's account tables: every SQL statement on users, sessions and failed logins
(:attr:`Store.accounts`).

Tables (schema in :mod:`knockout.storage._migrations`; what they mean: :mod:`knockout.web._auth`)
------
``web_users``           name, password hash, role.
``web_sessions``        id (the SHA-256 of the cookie's token), user, CSRF token, creation, expiry, last use.
``web_login_failures``  failed logins by scope (``account`` or ``address``), key and time.

Hashing passwords and tokens, roles and the throttling policy are the web app's; this stores and reads.
"""

from __future__ import annotations

import sqlite3


class AccountTables:
    """Reads and writes of the account tables of one store."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    # -- users -------------------------------------------------------------------------
    def add_user(self, name: str, password_hash: str, role: str, created: float) -> None:
        self.db.execute("INSERT INTO web_users (name, password_hash, role, created) VALUES (?,?,?,?)",
                        (name, password_hash, role, created))

    def set_password_hash(self, name: str, password_hash: str) -> None:
        self.db.execute("UPDATE web_users SET password_hash = ? WHERE name = ?", (password_hash, name))

    def remove_user(self, name: str) -> None:
        self.db.execute("DELETE FROM web_users WHERE name = ?", (name,))

    def user(self, name: str) -> tuple[str, str] | None:
        """(name, role) of a user."""
        row = self.db.execute("SELECT name, role FROM web_users WHERE name = ?", (name,)).fetchone()
        return (row[0], row[1]) if row else None

    def users(self) -> list[tuple[str, str]]:
        """(name, role) of every user, by name."""
        return [(r[0], r[1]) for r in self.db.execute("SELECT name, role FROM web_users ORDER BY name")]

    def password_hash(self, name: str) -> tuple[str, str] | None:
        """(password hash, role) of a user."""
        row = self.db.execute("SELECT password_hash, role FROM web_users WHERE name = ?", (name,)).fetchone()
        return (row[0], row[1]) if row else None

    # -- sessions ----------------------------------------------------------------------
    def drop_expired_sessions(self, now: float) -> None:
        self.db.execute("DELETE FROM web_sessions WHERE expires <= ?", (now,))

    def add_session(self, session_id: str, user: str, csrf: str, created: float, expires: float) -> None:
        self.db.execute("INSERT INTO web_sessions (id, user, csrf, created, expires, last_seen) VALUES (?,?,?,?,?,?)",
                        (session_id, user, csrf, created, expires, created))

    def session(self, session_id: str) -> tuple[str, str, float] | None:
        """(user, CSRF token, expiry) of a session."""
        row = self.db.execute("SELECT user, csrf, expires FROM web_sessions WHERE id = ?", (session_id,)).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def drop_session(self, session_id: str) -> None:
        self.db.execute("DELETE FROM web_sessions WHERE id = ?", (session_id,))

    def drop_sessions_of(self, user: str) -> int:
        """End every session of ``user``; how many there were."""
        return self.db.execute("DELETE FROM web_sessions WHERE user = ?", (user,)).rowcount

    def live_sessions(self, user: str, now: float) -> int:
        """How many sessions of ``user`` expire after ``now``."""
        return int(self.db.execute("SELECT COUNT(*) FROM web_sessions WHERE user = ? AND expires > ?",
                                   (user, now)).fetchone()[0])

    # -- failed logins -----------------------------------------------------------------
    def failure_times(self, scope: str, key: str, since: float, limit: int) -> list[float]:
        """The times of the latest ``limit`` failures of ``key`` in ``scope`` after ``since``, newest first."""
        return [r[0] for r in self.db.execute(
            "SELECT time FROM web_login_failures WHERE scope = ? AND key = ? AND time > ? ORDER BY time DESC "
            "LIMIT ?", (scope, key, since, limit))]

    def add_failures(self, failures: list[tuple[str, str]], now: float, *, forget_before: float) -> None:
        """Record failed logins ``(scope, key)`` at ``now``, after dropping those at or before ``forget_before``."""
        self.db.execute("DELETE FROM web_login_failures WHERE time <= ?", (forget_before,))
        self.db.executemany("INSERT INTO web_login_failures (scope, key, time) VALUES (?,?,?)",
                            [(scope, key, now) for scope, key in failures])

    def clear_failures(self, scope: str, key: str) -> None:
        self.db.execute("DELETE FROM web_login_failures WHERE scope = ? AND key = ?", (scope, key))
