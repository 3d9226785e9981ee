"""Accounts, server-side sessions and login throttling of the web app.

Tables (schema in :mod:`knockout.storage._migrations`; read and written through :attr:`Store.accounts`)
------
``web_users``           graders, organizers and viewers: name, argon2id password hash, role.
``web_sessions``        one row per logged-in browser: ``id`` is the SHA-256 of the cookie's random token
                        (256 bits; the token itself is never stored), the user, the session's CSRF token,
                        creation, expiry and last use.  Deleted on logout; all of a user's rows are deleted
                        when their password changes or the user is removed.
``web_login_failures``  failed logins by account name and by client address, for the lockout window.

Password hashing is argon2id (argon2-cffi's defaults, RFC 9106 low-memory profile: 64 MiB, 3 passes);
:class:`HashSlots` bounds how many hashes run at once so that a burst of logins cannot take the server's
memory to gigabytes.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from knockout.annotations import Assignments
from knockout.errors import ConfigError
from knockout.storage._store import Store

#: grader: grades / annotates what is assigned; organizer: sees and decides everything; viewer: reads the
#: judge runs of the store (transcript viewer), nothing else
ROLES = ("grader", "organizer", "viewer")
MIN_PASSWORD = 8
MAX_PASSWORD = 1024
MAX_NAME = 128

#: Parameters of argon2-cffi's PasswordHasher; empty = its defaults (RFC 9106 low-memory profile:
#: time_cost 3, memory 64 MiB, parallelism 4).  Tests lower them to keep the suite fast.
ARGON2_PARAMS: dict[str, Any] = {}

T = TypeVar("T")


def password_hasher() -> Any:
    from argon2 import PasswordHasher

    return PasswordHasher(**ARGON2_PARAMS)


def check_password(password: str) -> str:
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise ConfigError(f"password must have {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    return password


@dataclass(frozen=True)
class User:
    name: str
    role: str

    @property
    def is_organizer(self) -> bool:
        return self.role == "organizer"

    @property
    def sees_runs(self) -> bool:
        """May read the judge runs (the transcript viewer): viewers and organizers."""
        return self.role in ("viewer", "organizer")


class Accounts:
    """The users of the web app (table ``web_users``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.tables = store.accounts

    @staticmethod
    def check_new(name: str, password: str, role: str) -> None:
        """What a new account must be, checked without a store (a refused ``users add`` creates no file)."""
        if not name.strip() or name != name.strip() or len(name) > MAX_NAME or not name.isprintable():
            raise ConfigError(f"user name {name[:MAX_NAME]!r} must be 1 to {MAX_NAME} printable characters "
                              "without surrounding spaces")
        if role not in ROLES:
            raise ConfigError(f"unknown role '{role}' (known: {', '.join(ROLES)})")
        check_password(password)

    def add_user(self, name: str, password: str, role: str = "grader") -> None:
        self.check_new(name, password, role)
        if self.user(name) is not None:
            raise ConfigError(f"user '{name}' exists (remove it first, or use `knockout users passwd`)")
        self.tables.add_user(name, password_hasher().hash(password), role, time.time())

    def set_password(self, name: str, password: str) -> int:
        """A new password; every session of the user ends.  Returns how many sessions ended."""
        if self.user(name) is None:
            raise ConfigError(f"no user '{name}'")
        check_password(password)
        self.tables.set_password_hash(name, password_hasher().hash(password))
        return Sessions(self.store).revoke_user(name)

    def remove_user(self, name: str) -> None:
        """Remove the account, its assignments and its sessions; the grades and verdicts it made stay."""
        if self.user(name) is None:
            raise ConfigError(f"no user '{name}'")
        self.tables.remove_user(name)
        Assignments(self.store).remove_user(name)
        Sessions(self.store).revoke_user(name)

    def user(self, name: str) -> User | None:
        row = self.tables.user(name)
        return User(*row) if row else None

    def users(self) -> list[User]:
        return [User(*r) for r in self.tables.users()]

    def authenticate(self, name: str, password: str) -> User | None:
        """The user when the password matches its argon2 hash (rehashed when parameters changed).

        Costs one hash whether or not the user exists (so the clock does not tell); run it through
        :class:`HashSlots` in the server."""
        from argon2.exceptions import InvalidHashError, VerificationError

        ph = password_hasher()
        row = self.tables.password_hash(name)
        if row is None:
            ph.hash(password)
            return None
        try:
            ph.verify(row[0], password)
        except (VerificationError, InvalidHashError):
            return None
        if ph.check_needs_rehash(row[0]):
            self.tables.set_password_hash(name, ph.hash(password))
        return User(name, row[1])


# -- sessions -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Session:
    user: str
    csrf: str
    expires: float


def token_id(token: str) -> str:
    """What the store keeps of a session token: its SHA-256 (a leaked store does not log anyone in)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Sessions:
    """Server-side sessions: the cookie holds a random token, the store the rest."""

    def __init__(self, store: Store) -> None:
        self.tables = store.accounts

    def create(self, user: str, hours: float) -> tuple[str, Session]:
        """A new session of ``user`` valid for ``hours``; returns the cookie token and the session."""
        now = time.time()
        self.tables.drop_expired_sessions(now)
        token = secrets.token_urlsafe(32)
        session = Session(user, secrets.token_urlsafe(32), now + hours * 3600)
        self.tables.add_session(token_id(token), user, session.csrf, now, session.expires)
        return token, session

    def get(self, token: str) -> Session | None:
        """The live session of ``token`` (None when unknown, revoked or expired)."""
        if not token or len(token) > 256:
            return None
        row = self.tables.session(token_id(token))
        if row is None:
            return None
        if row[2] <= time.time():
            self.revoke(token)
            return None
        return Session(row[0], row[1], row[2])

    def revoke(self, token: str) -> None:
        self.tables.drop_session(token_id(token))

    def revoke_user(self, user: str) -> int:
        return self.tables.drop_sessions_of(user)

    def of_user(self, user: str) -> int:
        """How many live sessions ``user`` has."""
        return self.tables.live_sessions(user, time.time())


# -- throttling ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThrottlePolicy:
    """After ``account_failures`` failed logins for one account name, or ``address_failures`` from one
    client address, within ``window_s`` seconds, further logins of that account / from that address are
    refused (HTTP 429, without checking the password) until the failures age out of the window."""

    account_failures: int = 5
    address_failures: int = 20
    window_s: float = 900.0


class LoginThrottle:
    def __init__(self, store: Store, policy: ThrottlePolicy) -> None:
        self.tables = store.accounts
        self.policy = policy

    def _wait(self, scope: str, key: str, limit: int, now: float) -> float:
        times = self.tables.failure_times(scope, key, now - self.policy.window_s, limit)
        if len(times) < limit:
            return 0.0
        return max(0.0, float(times[limit - 1]) + self.policy.window_s - now)

    def wait(self, account: str, address: str) -> float:
        """Seconds until a login of ``account`` from ``address`` is allowed again (0: allowed now)."""
        now = time.time()
        return max(self._wait("account", account, self.policy.account_failures, now),
                   self._wait("address", address, self.policy.address_failures, now))

    def failed(self, account: str, address: str) -> None:
        now = time.time()
        self.tables.add_failures([("account", account), ("address", address)], now,
                                 forget_before=now - self.policy.window_s)

    def succeeded(self, account: str) -> None:
        self.tables.clear_failures("account", account)


class Busy(Exception):
    """Too many password checks are already waiting."""


class HashSlots:
    """At most ``slots`` password hashes at once (argon2 takes 64 MiB each) and at most ``queue`` waiting;
    the waiting ones hold no worker thread."""

    def __init__(self, slots: int = 2, queue: int = 64) -> None:
        import anyio

        if slots < 1 or queue < 0:
            raise ConfigError("hash slots must be >= 1 and the queue >= 0")
        self.limiter = anyio.CapacityLimiter(slots)
        self.queue = queue

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        import anyio.to_thread

        if self.limiter.statistics().tasks_waiting >= self.queue:
            raise Busy()
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter)
