"""SQLite store: every judge call (the cache), every run with its results and matches.

Tables (the schema and its versions: :mod:`knockout.storage._migrations`)
------
``calls``     one row per distinct judge request that succeeded: key = SHA-256 of the judge identity,
              generation parameters and full messages; the raw reply, the parsed result, usage, latency.
``call_log``  one row per *live* call (sent to a backend): key, run, time, error.  A key that appears
              twice here with no error is a repeated call.
``runs``      one row per run: kind, method, judge, configuration, status, summary, error.
``results``   per-run, per-item results (score, validity, typed details as JSON).
``matches``   per-run pairwise matches, each stored once (both games with every raw reply); the players'
              results refer to them by ``match_id``.
``itemsets``  snapshots of the item sets runs were made on (questions, answers, human grades), keyed by
              fingerprint, so reports need no data file.
``batches``   provider batch jobs (``openai-batch``, ``anthropic-batch``) with their request keys
              (``batch_requests``), recorded before waiting: a killed run polls the same batch again.
``inflight``  a lease per request being sent (key, owning process, expiry): a second process on the same
              store waits for the reply instead of sending the request again; a lease whose process is gone
              (on this host) or whose time ran out is taken over.

The web app's tables are read and written through :attr:`Store.annotations`
(:class:`~knockout.storage._annotations.AnnotationTables`: exams, figures, question information, grades,
assignments, pair sets and verdicts) and :attr:`Store.accounts`
(:class:`~knockout.storage._accounts.AccountTables`: users, sessions, failed logins): every SQL statement
on a store is a method of this package.

The connection is in autocommit mode with a WAL journal: each call record commits the moment it is
written, so a run killed at any moment keeps every call that returned; results and matches are written
in one transaction per batch (:meth:`put_results`, :meth:`put_matches`).  The store implements the
engine's :class:`~knockout.engine.Cache` protocol.  Use it as a context manager (``with Store(p) as s``)
or call :meth:`close`.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import json
import sqlite3
import time
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from knockout._redact import redact, redact_all, scrub, scrub_all
from knockout.data._records import ItemSet
from knockout.engine._cache import CallRecord
from knockout.errors import ConfigError
from knockout.storage._accounts import AccountTables
from knockout.storage._annotations import AnnotationTables
from knockout.storage._migrations import migrate
from knockout.storage._owner import is_gone, owner
from knockout.storage._snapshots import pack_items, unpack_items

#: A run's states: ``running`` while an invocation works on it; ``complete`` when every result is written;
#: ``incomplete`` when it ran to its end but judge requests failed for good (no reply after the backend's
#: retries: running it again asks only those); ``interrupted`` when the invocation was stopped (Ctrl-C,
#: cancelled); ``failed`` when it ended with an error.  Only a complete run's results are the whole run.
RUN_STATES = ("running", "complete", "incomplete", "interrupted", "failed")


@dataclass
class RunRecord:
    id: str
    kind: str
    method: str
    judge: str
    config: dict[str, Any]
    data_source: str | None
    data_fingerprint: str | None
    status: str
    created: float
    updated: float
    summary: dict[str, Any] | None
    error: str | None = None
    owner: str | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def simulated(self) -> bool:
        """The run's judge (or one of its judges) is a simulation: read from its configuration."""
        return bool(self.config.get("simulated_judge"))


@dataclass
class ResultRow:
    """One item's result, as the run writes it (``details`` is the JSON form of a typed model)."""

    item_id: str
    question_id: str | None
    score: float | None
    valid: bool
    details: dict[str, Any]


@dataclass
class MatchRow:
    """One pairwise match of a run, stored once (``games``: both orders when debiased, with raw replies)."""

    match_id: str
    question_id: str | None
    a: str
    b: str
    step: int
    valid: bool
    partial: bool
    games: list[dict[str, Any]]


#: a blob content of at least this many bytes can become the writer's zlib preset dictionary
DICT_MIN = 256
#: zlib uses at most the last 32 KiB of a preset dictionary
ZDICT_MAX = 32768

#: marks a ``calls.request`` whose contents are in ``blobs`` (schema step 36)
REQUEST_V2 = "blobs@"
def _copy_json(v: Any) -> Any:
    if isinstance(v, dict) and all(isinstance(x, (str, int, float, bool, type(None))) for x in v.values()):
        return dict(v)
    return copy.deepcopy(v)


class ResultRows(Sequence[dict[str, Any]]):
    """A run's results with their breakdown groups only (what an agreement report reads), kept as columns:
    item ids, question ids and groups each stored once per distinct value, scores as floats.  Each row is
    built as the dict :meth:`Store.iter_results` gives (``details``: ``{}`` or ``{"groups": ...}``) when it
    is read, and not kept: a million results take about 80 bytes each instead of a dict each."""

    def __init__(self) -> None:
        self._items: list[str] = []
        self._question = array("i")
        self._questions: list[str | None] = []
        self._score = array("d")
        self._flags = bytearray()  # bit 0: valid; bit 1: the score is None
        self._group = array("i")
        self._groups: list[Any] = []
        self._pos: dict[Any, int] = {}
        #: the details beside the groups that few rows have (repeated draws, criterion verdicts), by row
        self._extra: dict[int, dict[str, Any]] = {}

    def _code(self, kind: str, value: Any, table: list[Any]) -> int:
        k = self._pos.get((kind, value))
        if k is None:
            k = self._pos[(kind, value)] = len(table)
            table.append(value)
        return k

    def append(self, item_id: str, question_id: str | None, score: float | None, valid: bool, groups: Any,
               extra: dict[str, Any] | None = None) -> None:
        """One row; ``groups`` as SQLite's ``json_extract`` gave it (an object's JSON text, or NULL); ``extra``:
        the row's other details read for a report (``draws``, ``criteria``), when it has any."""
        if extra:
            self._extra[len(self._items)] = extra
        self._items.append(item_id)
        self._question.append(self._code("q", question_id, self._questions))
        self._score.append(0.0 if score is None else score)
        self._flags.append(int(bool(valid)) | (2 if score is None else 0))
        if groups is None:
            self._group.append(-1)
        else:
            k = self._pos.get(("g", groups))
            if k is None:  # each distinct value parsed once (and checked as it is read)
                self._pos[("g", groups)] = k = len(self._groups)
                self._groups.append(json.loads(groups) if isinstance(groups, str) else groups)
            self._group.append(k)

    def __len__(self) -> int:
        return len(self._items)

    def row(self, i: int) -> dict[str, Any]:
        g, f = self._group[i], self._flags[i]
        details = {} if g < 0 else {"groups": _copy_json(self._groups[g])}
        if i in self._extra:
            details.update(_copy_json(self._extra[i]))
        return {"item_id": self._items[i], "question_id": self._questions[self._question[i]],
                "score": None if f & 2 else self._score[i], "valid": bool(f & 1), "details": details}

    def shared(self) -> Iterator[tuple[str, float | None, bool, dict[str, Any]]]:
        """(item id, score, valid, details) of each row, with one details dict per distinct value, shared by
        the rows that have it (for readers that do not change them: the agreement analysis)."""
        empty: dict[str, Any] = {}
        details = [{"groups": g} for g in self._groups]
        items, score, flags, group, extra = self._items, self._score, self._flags, self._group, self._extra
        for i in range(len(items)):
            g, f = group[i], flags[i]
            d = empty if g < 0 else details[g]
            if i in extra:
                d = {**d, **extra[i]}
            yield items[i], None if f & 2 else score[i], bool(f & 1), d

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        n = len(self)
        if isinstance(i, slice):
            return [self.row(k) for k in range(*i.indices(n))]
        if not -n <= i < n:
            raise IndexError("result index out of range")
        return self.row(i % n if i < 0 else i)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self.row(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


#: Seconds a command waits for a store that another process is writing before it gives up with an error.
BUSY_TIMEOUT_S = 30.0

_RUN_COLS = ("id, kind, method, judge, config, data_source, data_fingerprint, status, created, updated, summary, "
             "error, owner")


_CALL_COLS = ("key, reply, parsed, prompt_tokens, completion_tokens, latency_s, finish_reason, images_dropped, "
              "parse_id, verdict")


def _call_record(row: tuple[Any, ...]) -> CallRecord:
    return CallRecord(row[0], row[1], json.loads(row[2]) if row[2] else None, row[3], row[4], row[5], row[6], row[7],
                      row[8], json.loads(row[9]) if row[9] else None)


class Store:
    """One store file: open it with ``Store(path)`` to write (created when missing), or
    :meth:`open_existing` to read one that must already be there."""

    #: the most blob digests a store object keeps in memory (issue 59 item 7: before, up to 100,000 and then
    #: none, ~90 bytes an answer in between; 4,096 of them are ~0.5 MiB)
    blobs_seen_max = 4096

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # One connection, used from the thread that runs the event loop (which may not be the thread
            # that opened it: the synchronous entry runs the loop in a worker thread inside notebooks).
            self.db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise ConfigError(f"{path}: cannot open the store ({exc})") from None
        try:
            migrate(self.db, str(path))
        except sqlite3.Error as exc:
            self.db.close()
            raise ConfigError(f"{path}: cannot use the store ({exc})") from None
        except BaseException:
            self.db.close()
            raise
        #: the digests of the blobs this store object wrote lately, most recent last (at most
        #: :attr:`blobs_seen_max`: a template's shared parts and the parameters stay known, an answer's own text
        #: leaves; a digest that left is written again with INSERT OR IGNORE, which keeps the stored one)
        self._blobs_seen: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self._zdict: tuple[bytes, bytes] | None = None  # (hash, content) of this writer's preset dictionary
        self._zdicts: dict[bytes, bytes] = {}  # dictionaries read back, by hash
        #: the web app's tables: what people enter (grades, verdicts, ...) and accounts (users, sessions)
        self.annotations = AnnotationTables(self.db, self.transaction)
        self.accounts = AccountTables(self.db)

    @classmethod
    def open_existing(cls, path: str | Path) -> Store:
        """The store at ``path`` for reading: a clear error when there is none (SQLite would create it)."""
        if not Path(path).is_file():
            raise ConfigError(f"store not found: {path}")
        if Path(path).stat().st_size == 0:  # SQLite would take it as a new store and write one
            raise ConfigError(f"{path}: empty file, not a knockout store")
        return cls(path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Several writes as one: all or nothing."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- calls (the engine's cache) ----------------------------------------------------
    def get_call(self, key: str) -> CallRecord | None:
        row = self.db.execute(f"SELECT {_CALL_COLS} FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else _call_record(row)

    def get_calls(self, keys: list[str]) -> dict[str, CallRecord]:
        found: dict[str, CallRecord] = {}
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            for row in self.db.execute(f"SELECT {_CALL_COLS} FROM calls WHERE key IN ({','.join('?' * len(part))})",
                                       part):
                found[row[0]] = _call_record(row)
        return found

    def put_call(self, key: str, identity: dict[str, Any], request: dict[str, Any], record: CallRecord) -> None:
        self._insert_call(key, identity, self._compact_request(request), record)

    def record_replies(self, replies: list[tuple[str, dict[str, Any], dict[str, Any], CallRecord, str | None,
                                                 float]]) -> None:
        """Live calls' replies, each ``(key, identity, request, record, run_id, started)``: stored, their
        leases released, the calls logged, in one transaction (one commit for a group of replies instead of
        three per reply).  The requests' contents are content-addressed blobs, written inside the same
        transaction once this store object has its compression dictionary (before that, each on its own)."""
        early = self._zdict is None
        stored = [self._compact_request(r[2]) for r in replies] if early else []
        me, now = owner(), time.time()
        with self.transaction():
            for i, (key, identity, request, record, _, _) in enumerate(replies):
                self._insert_call(key, identity, stored[i] if early else self._compact_request(request), record)
            self.db.executemany("DELETE FROM inflight WHERE key = ? AND owner = ?", [(r[0], me) for r in replies])
            self.db.executemany("INSERT INTO call_log (key, run_id, started, finished, error) VALUES (?,?,?,?,?)",
                                [(r[0], r[4], r[5], now, None) for r in replies])

    def _insert_call(self, key: str, identity: dict[str, Any], stored_request: str, record: CallRecord) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO calls (key, backend, model, request, reply, parsed, prompt_tokens, "
            "completion_tokens, latency_s, finish_reason, images_dropped, created, parse_id, verdict) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                key,
                str(identity.get("backend")),
                str(identity.get("model")),
                stored_request,
                scrub(record.reply),  # a secret of a judge the server echoed (knockout._redact)
                scrub(json.dumps(record.parsed, ensure_ascii=False)),
                record.prompt_tokens,
                record.completion_tokens,
                record.latency_s,
                record.finish_reason,
                record.images_dropped,
                time.time(),
                record.parse_id,
                None if record.verdict is None else json.dumps(record.verdict, ensure_ascii=False),
            ),
        )

    # -- content-addressed blobs (request contents, parameters) ----------------------------
    def put_blob(self, data: bytes) -> str:
        """Store ``data`` once by content; its hash (hex).

        Stored as it is (``z`` 0), zlib-compressed where that saves a tenth (``z`` 1), or -- smaller still for
        the many prompts of one template, which differ only in the answer -- compressed with a zlib preset
        dictionary (``z`` 2: the dictionary blob's 16-byte hash, then the compressed bytes).  The dictionary
        is the first content of at least :data:`DICT_MIN` bytes this store object writes outside a transaction
        (itself a blob, committed), and is used only where it beats plain compression."""
        digest = hashlib.sha256(data).digest()[:16]
        if digest in self._blobs_seen:
            self._blobs_seen.move_to_end(digest)
        else:
            packed, z = data, 0
            if len(data) >= 64:
                small = zlib.compress(data, 6)
                if len(small) < 0.9 * len(data):
                    packed, z = small, 1
                if self._zdict is not None and self._zdict[0] != digest:
                    c = zlib.compressobj(6, zdict=self._zdict[1])
                    framed = self._zdict[0] + c.compress(data) + c.flush()
                    if len(framed) < len(packed):
                        packed, z = framed, 2
            self.db.execute("INSERT OR IGNORE INTO blobs (hash, z, data) VALUES (?,?,?)", (digest, z, packed))
            self._blobs_seen[digest] = None
            if len(self._blobs_seen) > self.blobs_seen_max:
                self._blobs_seen.popitem(last=False)
            if self._zdict is None and len(data) >= DICT_MIN and z != 2 and not self.db.in_transaction:
                self._zdict = (digest, data[-ZDICT_MAX:])
        return digest.hex()

    def get_blob(self, ref: str) -> bytes:
        return self._blob(bytes.fromhex(ref))

    def _blob(self, digest: bytes) -> bytes:
        row = self.db.execute("SELECT z, data FROM blobs WHERE hash = ?", (digest,)).fetchone()
        if row is None:
            raise ConfigError(f"{self.path}: the store lacks blob {digest.hex()} (damaged store?)")
        z, data = row[0], bytes(row[1])
        if z == 2:
            key = data[:16]
            zdict = self._zdicts.get(key)
            if zdict is None:
                zdict = self._zdicts[key] = self._blob(key)[-ZDICT_MAX:]
            d = zlib.decompressobj(zdict=zdict)
            return d.decompress(data[16:]) + d.flush()
        return zlib.decompress(data) if z else data

    def _compact_request(self, request: dict[str, Any]) -> str:
        """A request as stored: each message's content and the parameters as blob references."""
        messages = [{**{k: v for k, v in m.items() if k != "content"},
                     "content@": self.put_blob(str(m.get("content", "")).encode())}
                    for m in request.get("messages", [])]
        params = self.put_blob(json.dumps(request.get("params", {}), sort_keys=True).encode())
        return json.dumps({REQUEST_V2: 1, "messages": messages, "params@": params}, ensure_ascii=False)

    def request_of(self, stored: str) -> dict[str, Any]:
        """The full request (messages with their contents, parameters) of a stored ``calls.request``; rows
        written before the blobs (schema step 36) hold it whole."""
        data: dict[str, Any] = json.loads(stored)
        if REQUEST_V2 not in data:
            return data
        messages = [{**{k: v for k, v in m.items() if k != "content@"},
                     "content": self.get_blob(m["content@"]).decode()} for m in data["messages"]]
        return {"messages": messages, "params": json.loads(self.get_blob(data["params@"]))}

    def log_call(self, key: str, run_id: str | None, started: float, error: str | None = None) -> None:
        self.db.execute(
            "INSERT INTO call_log (key, run_id, started, finished, error) VALUES (?,?,?,?,?)",
            (key, run_id, started, time.time(), error and redact(error)),
        )

    def claim(self, key: str, run_id: str | None, lease_s: float) -> bool:
        """Record ``key`` as in flight for this process; False when another live process holds it."""
        me, now = owner(), time.time()
        if self._take(key, run_id, lease_s, me, now):  # the usual case: one statement, one commit
            return True
        with self.transaction():  # another process's lease: taken over only when that process is gone
            return self._take_over(key, run_id, lease_s, me, now)

    def claim_many(self, keys: list[str], run_id: str | None, lease_s: float) -> list[bool]:
        """:meth:`claim` for several keys in one transaction (one commit for a group of requests)."""
        if len(keys) == 1:
            return [self.claim(keys[0], run_id, lease_s)]
        me, now = owner(), time.time()
        with self.transaction():
            return [self._take(key, run_id, lease_s, me, now) or self._take_over(key, run_id, lease_s, me, now)
                    for key in keys]

    def _take(self, key: str, run_id: str | None, lease_s: float, me: str, now: float) -> bool:
        """The lease of ``key`` when there is none yet, or it is this process's, or it has run out."""
        return bool(self.db.execute(
            "INSERT INTO inflight (key, owner, run_id, started, expires) VALUES (?,?,?,?,?) ON CONFLICT(key) DO "
            "UPDATE SET owner = excluded.owner, run_id = excluded.run_id, started = excluded.started, "
            "expires = excluded.expires WHERE inflight.owner = excluded.owner OR inflight.expires <= ?",
            (key, me, run_id, now, now + lease_s, now)).rowcount)

    def _take_over(self, key: str, run_id: str | None, lease_s: float, me: str, now: float) -> bool:
        """Inside a transaction: another process's live lease is honoured; a gone process's is taken over."""
        row = self.db.execute("SELECT owner, expires FROM inflight WHERE key = ?", (key,)).fetchone()
        if row is not None and row[0] != me and row[1] > now and not is_gone(row[0]):
            return False
        self.db.execute("INSERT OR REPLACE INTO inflight (key, owner, run_id, started, expires) VALUES (?,?,?,?,?)",
                        (key, me, run_id, now, now + lease_s))
        return True

    def release(self, key: str) -> None:
        """The request ``key`` is no longer in flight (answered, or failed) for this process."""
        self.db.execute("DELETE FROM inflight WHERE key = ? AND owner = ?", (key, owner()))

    def stale_leases(self) -> list[tuple[str, str | None]]:
        """(key, run) of requests left in flight by processes that are gone: what a restart will send again."""
        rows = self.db.execute("SELECT key, run_id, owner FROM inflight").fetchall()
        return [(k, r) for k, r, who in rows if is_gone(who)]

    def repeated_calls(self) -> int:
        """How many successful live calls asked for a key that had already succeeded."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(n - 1), 0) FROM "
            "(SELECT COUNT(*) AS n FROM call_log WHERE error IS NULL GROUP BY key HAVING n > 1)"
        ).fetchone()
        return int(row[0])

    def live_calls(self, run_id: str | None = None) -> int:
        if run_id is None:
            row = self.db.execute("SELECT COUNT(*) FROM call_log WHERE error IS NULL").fetchone()
        else:
            row = self.db.execute(
                "SELECT COUNT(*) FROM call_log WHERE error IS NULL AND run_id = ?", (run_id,)
            ).fetchone()
        return int(row[0])

    def run_calls(self, run_id: str) -> tuple[int, int, int, float]:
        """(live calls, prompt tokens, completion tokens, summed latency) of every successful call sent for
        ``run_id`` over all its invocations (the call log joined to the cached calls)."""
        try:
            row = self.db.execute(
                "SELECT COUNT(*), COALESCE(SUM(c.prompt_tokens), 0), COALESCE(SUM(c.completion_tokens), 0), "
                "COALESCE(SUM(c.latency_s), 0) FROM call_log l JOIN calls c ON c.key = l.key "
                "WHERE l.run_id = ? AND l.error IS NULL", (run_id,)).fetchone()
        except sqlite3.Error as exc:  # pragma: no cover - a damaged store
            raise ConfigError(f"{self.path}: cannot read the call log ({exc})") from None
        return int(row[0]), int(row[1]), int(row[2]), float(row[3])

    def call_costs(self, keys: Iterable[str] | None = None) -> dict[str, tuple[int, int, float]]:
        """(prompt tokens, completion tokens, latency) of the stored calls ``keys`` (default: every call)."""
        if keys is None:
            return {r[0]: (int(r[1]), int(r[2]), float(r[3])) for r in self.db.execute(
                "SELECT key, prompt_tokens, completion_tokens, latency_s FROM calls")}
        return {k: (pt, ct, lat) for k, (_, pt, ct, lat) in self.call_requests(keys, decode=False).items()}

    def call_requests(self, keys: Iterable[str], *, decode: bool = True
                      ) -> dict[str, tuple[dict[str, Any], int, int, float]]:
        """(request, prompt tokens, completion tokens, latency) of each stored call among ``keys`` (a request
        that cannot be read back is ``{}``; ``decode=False``: no request at all)."""
        wanted = list(dict.fromkeys(keys))
        out: dict[str, tuple[dict[str, Any], int, int, float]] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            rows = self.db.execute(
                f"SELECT key, request, prompt_tokens, completion_tokens, latency_s FROM calls WHERE key IN "
                f"({','.join('?' * len(chunk))})", chunk).fetchall()
            for k, req, pt, ct, lat in rows:
                request: dict[str, Any] = {}
                if decode:
                    try:
                        request = self.request_of(req)
                    except (TypeError, json.JSONDecodeError):
                        request = {}
                out[k] = (request, pt, ct, lat)
        return out

    def iter_calls(self) -> Iterator[dict[str, Any]]:
        cur = self.db.execute(
            "SELECT key, backend, model, request, reply, parsed, prompt_tokens, completion_tokens, "
            "latency_s, images_dropped, created FROM calls ORDER BY created"
        )
        cols = [d[0] for d in cur.description]
        for row in cur.fetchall():
            call = dict(zip(cols, row, strict=True))
            call["request"] = json.dumps(self.request_of(call["request"]), ensure_ascii=False)
            yield call

    # -- provider batch jobs (the batch executor's ledger) -------------------------------
    def open_batches(self, keys: list[str]) -> dict[str, str]:
        """For each of ``keys`` recorded in a batch that has not failed: that batch's id (the latest)."""
        out: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            rows = self.db.execute(
                f"SELECT r.key, r.batch_id FROM batch_requests r JOIN batches b ON b.id = r.batch_id "
                f"WHERE b.status != 'failed' AND r.key IN ({','.join('?' * len(chunk))}) ORDER BY b.created",
                chunk).fetchall()
            out.update({k: b for k, b in rows})
        return out

    def put_batch(self, batch_id: str, run_id: str | None, judge: str, keys: list[str]) -> None:
        """Record a submitted batch with its request keys, in one transaction (before waiting for it)."""
        now = time.time()
        with self.transaction():
            self.db.execute("INSERT OR REPLACE INTO batches (id, run_id, judge, status, requests, created, updated) "
                            "VALUES (?,?,?,?,?,?,?)",
                            (batch_id, run_id, redact(judge), "submitted", len(keys), now, now))
            self.db.executemany("INSERT OR IGNORE INTO batch_requests (batch_id, key) VALUES (?,?)",
                                [(batch_id, k) for k in keys])

    def end_batch(self, batch_id: str, status: str, error: str | None = None) -> None:
        self.db.execute("UPDATE batches SET status = ?, error = ?, updated = ? WHERE id = ?",
                        (status, error and redact(error), time.time(), batch_id))

    def drop_batch_requests(self, batch_id: str, keys: list[str]) -> None:
        with self.transaction():
            self.db.executemany("DELETE FROM batch_requests WHERE batch_id = ? AND key = ?",
                                [(batch_id, k) for k in keys])

    def batches(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The batch jobs recorded (for one run, or all): id, run, judge, status, requests, error."""
        sql = "SELECT id, run_id, judge, status, requests, error, created FROM batches"
        rows = self.db.execute(sql + (" WHERE run_id = ?" if run_id else "") + " ORDER BY created",
                               (run_id,) if run_id else ()).fetchall()
        return [dict(zip(("id", "run_id", "judge", "status", "requests", "error", "created"), r, strict=True))
                for r in rows]

    # -- runs --------------------------------------------------------------------------
    def start_run(
        self,
        run_id: str,
        *,
        kind: str,
        method: str,
        judge: str,
        config: dict[str, Any],
        data_source: str | None,
        data_fingerprint: str | None = None,
    ) -> None:
        """Write a run's row as ``running`` (a run already stored is resumed: its row is kept).  Its judge,
        configuration (command line included) and data source are stored redacted (:mod:`knockout._redact`):
        no secret of a judge spec is written to a store."""
        now = time.time()
        self.db.execute(
            "INSERT INTO runs (id, kind, method, judge, config, data_source, data_fingerprint, status, created, "
            "updated, owner) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET status='running', updated=excluded.updated, error=NULL, "
            "owner=excluded.owner, "
            # a run begun by a version without item-set snapshots gets its snapshot when resumed
            "data_fingerprint=COALESCE(runs.data_fingerprint, excluded.data_fingerprint)",
            (run_id, kind, method, redact(judge), json.dumps(redact_all(config), sort_keys=True),
             data_source and redact(data_source), data_fingerprint, "running", now, now, owner()),
        )

    def finish_run(self, run_id: str, summary: dict[str, Any], status: str = "complete",
                   error: str | None = None) -> None:
        """Mark a run that ran to its end (``complete``, or ``incomplete``: judge requests failed, with why the
        engine stopped sending where it did) with its summary (redacted, as :meth:`start_run`'s row)."""
        if status not in ("complete", "incomplete"):
            raise ValueError(f"not an end state for a finished run: {status}")
        self.db.execute(
            "UPDATE runs SET status = ?, updated = ?, summary = ?, error = ? WHERE id = ?",
            (status, time.time(), json.dumps(redact_all(summary), ensure_ascii=False),
             error and redact(error) if status == "incomplete" else None, run_id),
        )

    def end_run(self, run_id: str, status: str, error: str | None = None) -> None:
        """Mark a run that stopped before completing (``interrupted`` or ``failed``, with the error, redacted)."""
        if status not in RUN_STATES or status == "complete":
            raise ValueError(f"not an end state for an unfinished run: {status}")
        self.db.execute("UPDATE runs SET status = ?, updated = ?, error = ? WHERE id = ?",
                        (status, time.time(), error and redact(error), run_id))

    def get_run(self, run_id: str) -> RunRecord | None:
        row = self.db.execute(f"SELECT {_RUN_COLS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return self._run(row) if row else None

    def find_run(self, ref: str) -> RunRecord:
        """The run whose id is ``ref`` or starts with it (a prefix of at least 4 characters that only one run
        has); a clear error naming the matches (or every run) otherwise."""
        found = self.get_run(ref)
        if found is not None:
            return found
        matches = [r for r in self.runs() if r.id.startswith(ref)] if len(ref) >= 4 else []
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise ConfigError(f"{self.path}: run id prefix '{ref}' is ambiguous: "
                              f"{', '.join(r.id for r in matches)}")
        raise ConfigError(f"{self.path}: no run '{ref}' (runs: {', '.join(r.id for r in self.runs()) or 'none'})")

    def runs(self) -> list[RunRecord]:
        rows = self.db.execute(f"SELECT {_RUN_COLS} FROM runs ORDER BY created, rowid").fetchall()
        return [self._run(r) for r in rows]

    @staticmethod
    def _run(row: tuple[Any, ...]) -> RunRecord:
        status, error = row[7], row[11]
        if status == "running" and is_gone(row[12]):  # its process was killed: it will not finish by itself
            status, error = "interrupted", error or "its process ended before the run completed"
        return RunRecord(
            id=row[0],
            kind=row[1],
            method=row[2],
            judge=row[3],
            config=json.loads(row[4]),
            data_source=row[5],
            data_fingerprint=row[6],
            status=status,
            created=row[8],
            updated=row[9],
            summary=json.loads(row[10]) if row[10] else None,
            error=error,
            owner=row[12],
        )

    # -- item sets ---------------------------------------------------------------------
    def save_items(self, items: ItemSet) -> str:
        """Snapshot ``items`` once (by fingerprint; a stored set is not serialised again), as compressed
        JSON lines written and read record by record."""
        fp = items.fingerprint()
        if self.db.execute("SELECT 1 FROM itemsets WHERE fingerprint = ?", (fp,)).fetchone() is None:
            self.db.execute("INSERT OR IGNORE INTO itemsets (fingerprint, source, data, created) VALUES (?,?,?,?)",
                            (fp, items.source and redact(items.source), pack_items(items), time.time()))
        return fp

    def load_items(self, fingerprint: str) -> ItemSet | None:
        row = self.db.execute("SELECT data FROM itemsets WHERE fingerprint = ?", (fingerprint,)).fetchone()
        if row is None:
            return None
        if isinstance(row[0], bytes):
            return unpack_items(row[0])
        return ItemSet.from_dict(json.loads(row[0]))  # a snapshot written before schema step 36

    def items_for_run(self, run_id: str) -> ItemSet | None:
        run = self.get_run(run_id)
        return self.load_items(run.data_fingerprint) if run and run.data_fingerprint else None

    # -- results and matches -----------------------------------------------------------
    def put_results(self, run_id: str, rows: Iterable[ResultRow]) -> None:
        """Write a batch of results in one transaction."""
        with self.transaction():
            self.db.executemany(
                "INSERT OR REPLACE INTO results (run_id, item_id, question_id, score, valid, details) "
                "VALUES (?,?,?,?,?,?)",
                [(run_id, r.item_id, r.question_id, r.score, int(r.valid),
                  json.dumps(scrub_all(r.details), ensure_ascii=False)) for r in rows],
            )

    def put_result(
        self,
        run_id: str,
        item_id: str,
        *,
        question_id: str | None,
        score: float | None,
        valid: bool,
        details: dict[str, Any],
    ) -> None:
        self.put_results(run_id, [ResultRow(item_id, question_id, score, valid, details)])

    def results(self, run_id: str, *, details: bool = True, question_id: str | None = None,
                item_id: str | None = None) -> list[dict[str, Any]]:
        """A run's results in the order written; only one question's, or one item's, when given;
        ``details=False`` reads only the breakdown groups, the grades of repeated draws (``--samples``) and the
        criterion verdicts of each result's details (what an agreement report needs), not the raw replies."""
        return list(self.iter_results(run_id, details=details, question_id=question_id, item_id=item_id))

    def result_rows(self, run_id: str) -> ResultRows:
        """A run's results with what an agreement report reads of their details (``results(run_id,
        details=False)``: the same rows, in the same order), held as columns (:class:`ResultRows`)."""
        out = ResultRows()
        last = 0
        while True:
            rows = self.db.execute(
                "SELECT rowid, item_id, question_id, score, valid, json_extract(details, '$.groups'), "
                "json_extract(details, '$.draws'), json_extract(details, '$.criteria') FROM results "
                "WHERE +run_id = ? AND rowid > ? ORDER BY rowid LIMIT 5000", (run_id, last)).fetchall()
            if not rows:
                return out
            for r in rows:
                extra = None
                if r[6] is not None or r[7] is not None:  # repeated draws, criterion verdicts: few runs have them
                    extra = {k: json.loads(v) if isinstance(v, str) else v
                             for k, v in (("draws", r[6]), ("criteria", r[7])) if v is not None}
                out.append(r[1], r[2], r[3], r[4], r[5], extra)
            last = rows[-1][0]

    def iter_results(self, run_id: str, *, details: bool = True, question_id: str | None = None,
                     item_id: str | None = None) -> Iterator[dict[str, Any]]:
        """A run's results one by one, in the order written (read in pages, not all at once)."""
        column = ("details" if details else "json_extract(details, '$.groups'), json_extract(details, '$.draws'), "
                  "json_extract(details, '$.criteria')")
        # A whole run is read along the rowid (the table's own order: each page starts where the last ended);
        # "+run_id" keeps SQLite from searching the run's index and sorting all its rows again for every
        # page, which made reading a million results quadratic.  One question or item: its index.
        by_rowid = question_id is None and item_id is None
        where, args = ("+run_id = ?" if by_rowid else "run_id = ?"), [run_id]
        for col, value in (("question_id", question_id), ("item_id", item_id)):
            if value is not None:
                where += f" AND {col} = ?"
                args.append(value)
        last = 0
        while True:
            rows = self.db.execute(
                f"SELECT rowid, item_id, question_id, score, valid, {column} FROM results WHERE {where} "
                "AND rowid > ? ORDER BY rowid LIMIT 5000", (*args, last)).fetchall()
            if not rows:
                return
            for r in rows:
                if details:
                    d = json.loads(r[5])
                else:  # the groups, draws and criterion verdicts alone (SQLite gives JSON text, NULL where absent)
                    d = {}
                    for key, value in (("groups", r[5]), ("draws", r[6]), ("criteria", r[7])):
                        if value is not None:
                            d[key] = json.loads(value) if isinstance(value, str) else value
                yield {"item_id": r[1], "question_id": r[2], "score": r[3], "valid": bool(r[4]), "details": d}
            last = rows[-1][0]

    def result_counts(self) -> dict[str, tuple[int, int, int]]:
        """Per run: (results, invalid results, questions)."""
        return {r[0]: (int(r[1]), int(r[2] or 0), int(r[3])) for r in self.db.execute(
            "SELECT run_id, COUNT(*), SUM(valid = 0), COUNT(DISTINCT question_id) FROM results GROUP BY run_id")}

    def has_matches(self, run_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM matches WHERE run_id = ? LIMIT 1", (run_id,)).fetchone() is not None

    def results_stamp(self, run_id: str) -> tuple[int, int]:
        """(count, last row id) of a run's results: changes whenever one is written or written again (a
        replaced row gets a new row id)."""
        row = self.db.execute("SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM results WHERE run_id = ?",
                              (run_id,)).fetchone()
        return int(row[0]), int(row[1])

    def count_results(self, run_id: str) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", (run_id,)).fetchone()[0])

    def put_matches(self, run_id: str, rows: Iterable[MatchRow]) -> None:
        """Write a batch of matches (a wave's) in one transaction."""
        with self.transaction():
            self.db.executemany(
                "INSERT OR REPLACE INTO matches (run_id, match_id, question_id, a, b, step, valid, partial, games) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                [(run_id, m.match_id, m.question_id, m.a, m.b, m.step, int(m.valid), int(m.partial),
                  json.dumps(scrub_all(m.games), ensure_ascii=False)) for m in rows],
            )

    def matches(self, run_id: str, *, question_id: str | None = None) -> list[MatchRow]:
        """The run's matches by step (round), in the order written; only one question's when given."""
        where, args = ("run_id = ?", [run_id]) if question_id is None else (
            "run_id = ? AND question_id = ?", [run_id, question_id])
        cur = self.db.execute(
            f"SELECT match_id, question_id, a, b, step, valid, partial, games FROM matches WHERE {where} "
            "ORDER BY step, rowid", args)
        return [MatchRow(r[0], r[1], r[2], r[3], int(r[4]), bool(r[5]), bool(r[6]), json.loads(r[7])) for r in cur]
