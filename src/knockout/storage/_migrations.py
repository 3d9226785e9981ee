"""Schema versions of a knockout store and the ordered migrations between them.

One SQLite file holds the judges' cache and runs and the web app's annotations; its schema version is
``PRAGMA user_version``.  :data:`MIGRATIONS` is the one ordered list of steps, for every table of the
file; :func:`migrate` applies, in order and each in its own transaction, every step newer than the
file's version.  A store written before versioning (version 0, knockout 0.1 up to commit df07242) is
brought up by step 1, which creates what is missing and adds the columns older files lack.

Numbering: steps may leave gaps (blocks of numbers are reserved per concern so that work on separate
branches does not collide: 1-9 judge store and runs, 10-19 web app, 20 and up later features).  Each
applied step is recorded in ``schema_migrations``, and every step not recorded there is applied, so a
step that lands later with a lower number than one already applied is still applied.  A file holding a
step this version does not know was written by a newer knockout and is refused.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from knockout.errors import ConfigError


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[sqlite3.Connection], None]


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def _script(db: sqlite3.Connection, sql: str) -> None:
    """Run ``sql`` statement by statement (``executescript`` would commit the open transaction)."""
    for stmt in sql.split(";"):
        if stmt.strip():
            db.execute(stmt)


V1_STORE = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    reply TEXT NOT NULL,
    parsed TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    latency_s REAL NOT NULL DEFAULT 0,
    finish_reason TEXT,
    images_dropped INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS call_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    run_id TEXT,
    started REAL NOT NULL,
    finished REAL NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS call_log_key ON call_log(key);
CREATE TABLE IF NOT EXISTS itemsets (
    fingerprint TEXT PRIMARY KEY,
    source TEXT,
    data TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL DEFAULT 'grade',
    method TEXT NOT NULL,
    judge TEXT NOT NULL,
    config TEXT NOT NULL,
    data_source TEXT,
    data_fingerprint TEXT,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    summary TEXT
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL,
    item_id TEXT NOT NULL,
    question_id TEXT,
    score REAL,
    valid INTEGER NOT NULL,
    details TEXT NOT NULL,
    PRIMARY KEY (run_id, item_id)
);
"""

V1_WEB = """
CREATE TABLE IF NOT EXISTS web_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS web_users (
    name TEXT PRIMARY KEY,
    password_hash TEXT NOT NULL,
    role TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS web_assignments (
    user TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (user, kind, target)
);
CREATE TABLE IF NOT EXISTS web_exams (
    exam_id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    fallback INTEGER NOT NULL DEFAULT 0,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS question_info (
    question_id TEXT PRIMARY KEY,
    max_points REAL,
    student_average REAL,
    reference TEXT,
    difficulty TEXT,
    updated REAL NOT NULL,
    updated_by TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS human_grades (
    answer_id TEXT NOT NULL,
    grader TEXT NOT NULL,
    question_id TEXT NOT NULL,
    exam_id TEXT NOT NULL,
    score REAL NOT NULL,
    comment TEXT NOT NULL DEFAULT '',
    version INTEGER NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (answer_id, grader)
);
CREATE TABLE IF NOT EXISTS grade_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    answer_id TEXT NOT NULL,
    grader TEXT NOT NULL,
    score REAL NOT NULL,
    comment TEXT NOT NULL,
    version INTEGER NOT NULL,
    time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pairsets (
    id TEXT PRIMARY KEY,
    source TEXT,
    overlap INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pairs (
    pairset TEXT NOT NULL,
    pair_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (pairset, pair_id)
);
CREATE TABLE IF NOT EXISTS pair_views (
    pairset TEXT NOT NULL,
    annotator TEXT NOT NULL,
    pair_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    swapped INTEGER NOT NULL,
    PRIMARY KEY (pairset, annotator, pair_id)
);
CREATE TABLE IF NOT EXISTS pair_verdicts (
    pairset TEXT NOT NULL,
    pair_id TEXT NOT NULL,
    annotator TEXT NOT NULL,
    shown TEXT NOT NULL,
    swapped INTEGER NOT NULL,
    verdict TEXT NOT NULL,
    comment TEXT NOT NULL DEFAULT '',
    version INTEGER NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (pairset, pair_id, annotator)
);
"""


def _v1(db: sqlite3.Connection) -> None:
    _script(db, V1_STORE)
    if "data_fingerprint" not in _columns(db, "runs"):  # stores older than the item-set snapshots
        db.execute("ALTER TABLE runs ADD COLUMN data_fingerprint TEXT")
    _script(db, V1_WEB)


V2 = """
CREATE TABLE IF NOT EXISTS matches (
    run_id TEXT NOT NULL,
    match_id TEXT NOT NULL,
    question_id TEXT,
    a TEXT NOT NULL,
    b TEXT NOT NULL,
    step INTEGER NOT NULL,
    valid INTEGER NOT NULL,
    partial INTEGER NOT NULL,
    games TEXT NOT NULL,
    PRIMARY KEY (run_id, match_id)
)
"""


def match_ref(match_id: str, step: int, opponent: str, score: float | None, opponent_score: float | None,
              valid: bool, partial: bool) -> dict[str, Any]:
    """What a player's result keeps of a match it played (the match itself is stored once)."""
    return {"match_id": match_id, "step": step, "opponent": opponent, "score": score,
            "opponent_score": opponent_score, "valid": valid, "partial": partial}


def _v2(db: sqlite3.Connection) -> None:
    """Matches in their own table, stored once; runs get an ``error`` column.

    Results written before this step copied every match (both games, every raw reply) into both players'
    details; each match moves into ``matches`` (id ``FIRST|SECOND`` of its first game) and the players'
    details keep a reference.
    """
    _script(db, V2)
    if "error" not in _columns(db, "runs"):
        db.execute("ALTER TABLE runs ADD COLUMN error TEXT")
    rows = db.execute("SELECT run_id, item_id, question_id, details FROM results WHERE details LIKE '%\"games\"%'")
    for run_id, item_id, question_id, text in rows.fetchall():
        details = json.loads(text)
        played = details.get("matches")
        if not isinstance(played, list) or not all(isinstance(m, dict) and "games" in m for m in played):
            continue
        refs = []
        for m in played:
            games = m["games"]
            a, b = (games[0]["first"], games[0]["second"]) if games else (item_id, m["opponent"])
            match_id = f"{a}|{b}"
            db.execute(
                "INSERT OR IGNORE INTO matches (run_id, match_id, question_id, a, b, step, valid, partial, games) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                (run_id, match_id, question_id, a, b, int(m["step"]), int(bool(m["valid"])),
                 int(bool(m.get("partial"))), json.dumps(games, ensure_ascii=False)),
            )
            refs.append(match_ref(match_id, int(m["step"]), m["opponent"], m.get("score"), m.get("opponent_score"),
                                  bool(m["valid"]), bool(m.get("partial"))))
        details["matches"] = refs
        db.execute("UPDATE results SET details = ? WHERE run_id = ? AND item_id = ?",
                   (json.dumps(details, ensure_ascii=False), run_id, item_id))


def _v3(db: sqlite3.Connection) -> None:
    """Breakdown groups a method records go in ``details.groups``: the knockout's ``round`` (the round an answer
    was eliminated in, ``winner`` for the champion), read before from ``eliminated_round`` by name."""
    rows = db.execute("SELECT run_id, item_id, details FROM results WHERE details LIKE '%\"eliminated_round\"%'")
    for run_id, item_id, text in rows.fetchall():
        details = json.loads(text)
        if "eliminated_round" not in details or "groups" in details:
            continue
        r = details["eliminated_round"]
        details["groups"] = {"round": "winner" if r is None else str(r)}
        db.execute("UPDATE results SET details = ? WHERE run_id = ? AND item_id = ?",
                   (json.dumps(details, ensure_ascii=False), run_id, item_id))


V4 = """
CREATE TABLE IF NOT EXISTS inflight (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    run_id TEXT,
    started REAL NOT NULL,
    expires REAL NOT NULL
)
"""


def _v4(db: sqlite3.Connection) -> None:
    """Requests in flight (a lease per request, so that two processes on one store do not pay twice) and the
    process that owns each run (a run whose process is gone reads as interrupted)."""
    _script(db, V4)
    if "owner" not in _columns(db, "runs"):
        db.execute("ALTER TABLE runs ADD COLUMN owner TEXT")


V10_WEB_SESSIONS = """
CREATE TABLE IF NOT EXISTS web_sessions (
    id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    last_seen REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS web_sessions_user ON web_sessions(user);
CREATE TABLE IF NOT EXISTS web_login_failures (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    time REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS web_login_failures_key ON web_login_failures(scope, key, time);
"""

V11_WEB_IMAGES = """
CREATE TABLE IF NOT EXISTS web_images (
    fingerprint TEXT NOT NULL,
    question_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    media_type TEXT NOT NULL,
    source TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (fingerprint, question_id, idx)
);
"""


def _v10(db: sqlite3.Connection) -> None:
    """Server-side web sessions (``id`` = SHA-256 of the cookie's random token) and failed logins."""
    _script(db, V10_WEB_SESSIONS)


def _v11(db: sqlite3.Connection) -> None:
    """Question figures copied into the store's folder at import (content-addressed)."""
    _script(db, V11_WEB_IMAGES)


V35_BATCHES = """
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    run_id TEXT,
    judge TEXT NOT NULL,
    status TEXT NOT NULL,
    requests INTEGER NOT NULL,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_requests (
    batch_id TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (batch_id, key)
);
CREATE INDEX IF NOT EXISTS batch_requests_key ON batch_requests(key);
"""


V13_GROUPS = """
CREATE TABLE IF NOT EXISTS answer_groups (
    run_id TEXT NOT NULL,
    answer_id TEXT NOT NULL,
    question_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    representative INTEGER NOT NULL DEFAULT 0,
    updated REAL NOT NULL,
    PRIMARY KEY (run_id, answer_id)
);
CREATE INDEX IF NOT EXISTS answer_groups_by_group ON answer_groups (run_id, group_id)
"""


def _v13(db: sqlite3.Connection) -> None:
    """Answer groups (:mod:`knockout.groups`): each answer's group in a grade run (``answer_groups``), and which
    group a teacher's grade was given through (``via_group``) in which action (``action``: what undo reverts)."""
    _script(db, V13_GROUPS)
    for table in ("human_grades", "grade_history"):
        have = _columns(db, table)
        for col in ("via_group", "action"):
            if col not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {col} TEXT")


def _v35(db: sqlite3.Connection) -> None:
    """Provider batch jobs (openai-batch, anthropic-batch): each batch's id and request keys, recorded before
    waiting, so that a killed run polls the same batch instead of submitting it again."""
    _script(db, V35_BATCHES)


V36_BLOBS = """
CREATE TABLE IF NOT EXISTS blobs (
    hash BLOB PRIMARY KEY,
    z INTEGER NOT NULL,
    data BLOB NOT NULL
) WITHOUT ROWID
"""


def _v36(db: sqlite3.Connection) -> None:
    """Requests stored once by content: message contents and generation parameters in ``blobs`` (keyed by
    a 16-byte SHA-256 prefix, zlib-compressed where that pays), ``calls.request`` refers to them.  Rows
    written before keep their full request JSON and stay readable as they are; item-set snapshots written
    from now on are zlib-compressed (older ones stay JSON text)."""
    _script(db, V36_BLOBS)


def _v12(db: sqlite3.Connection) -> None:
    """Side-by-side annotations in the one verdict vocabulary (:class:`knockout.Verdict`): the verdicts
    ``both_good`` / ``both_bad`` written before are ``C`` / ``D`` (``A`` and ``B`` already were)."""
    for old, new in (("both_good", "C"), ("both_bad", "D")):
        db.execute("UPDATE pair_verdicts SET verdict = ? WHERE verdict = ?", (new, old))


V40_BY_QUESTION = """
CREATE INDEX IF NOT EXISTS results_by_question ON results(run_id, question_id);
CREATE INDEX IF NOT EXISTS matches_by_question ON matches(run_id, question_id);
"""


def _v40(db: sqlite3.Connection) -> None:
    """One question's results and matches without reading the whole run (the transcript viewer's pages)."""
    _script(db, V40_BY_QUESTION)


def _v41(db: sqlite3.Connection) -> None:
    """Each stored reply's parse says which parse made it (``calls.parse_id``: the parser's code and
    arguments, :mod:`knockout.prompts._identity`), so that a cache hit whose parse is the same uses it instead
    of parsing the reply again.  Rows written before have none: their replies are parsed again, as before."""
    if "parse_id" not in _columns(db, "calls"):
        db.execute("ALTER TABLE calls ADD COLUMN parse_id BLOB")


def _v42(db: sqlite3.Connection) -> None:
    """A reply's verdict slot (``calls.verdict``, JSON: the allowed values' probabilities, or the value a
    constrained decoder wrote; :mod:`knockout.judges._slot`).  Free-text replies have none."""
    if "verdict" not in _columns(db, "calls"):
        db.execute("ALTER TABLE calls ADD COLUMN verdict TEXT")


def _v43(db: sqlite3.Connection) -> None:
    """No secret of a judge spec in a store: what versions before wrote unredacted -- a jury's member labels
    (``openai:m?api_key=...``) in a run's judge, configuration and summary, error texts, data sources -- is
    redacted as :class:`~knockout.storage.Store` now redacts it when it writes (:mod:`knockout._redact`)."""
    from knockout._redact import redact, redact_all

    def text(v: Any) -> Any:
        return redact(v) if isinstance(v, str) else v

    def obj(v: Any) -> Any:
        if not isinstance(v, str):
            return v
        try:
            old = json.loads(v)
        except ValueError:
            return redact(v)
        new = redact_all(old)
        return v if new == old else json.dumps(new, ensure_ascii=False)  # the keys in their stored order

    for table, cols in (("runs", {"judge": text, "config": obj, "summary": obj, "error": text,
                                  "data_source": text}),
                        ("itemsets", {"source": text}), ("call_log", {"error": text}),
                        ("batches", {"judge": text, "error": text})):
        have = [c for c in cols if c in _columns(db, table)]
        if not have:
            continue
        where = " OR ".join(f"{c} LIKE '%=%' OR {c} LIKE '%@%'" for c in have)  # what a secret needs
        rows = db.execute(f"SELECT rowid, {', '.join(have)} FROM {table} WHERE {where}").fetchall()
        for row in rows:
            new = [cols[c](v) for c, v in zip(have, row[1:], strict=True)]
            if new != list(row[1:]):
                db.execute(f"UPDATE {table} SET {', '.join(f'{c} = ?' for c in have)} WHERE rowid = ?",
                           (*new, row[0]))


def _v44(db: sqlite3.Connection) -> None:
    """No secret of a judge spec in a store, read by the spec's structure (:func:`knockout._redact.redact_spec`):
    what versions before wrote -- a jury's member labels (the raw specs) as the keys of each answer's
    ``results.details.members``, in its configuration, summary and judge column, command lines -- and what step 43
    left (secrets its pattern did not see: a percent-encoded option name, a URL's user name or a password holding
    ``@``, a signed query in ``base_url``, a value holding ``)``).  Each stored spec is read as the judge reads it;
    its label is replaced by the redacted label wherever it stands, and its secret values (at least
    :data:`~knockout._redact.MIN_SECRET` characters) are scrubbed from every run's row, results, matches, call log,
    batch jobs, item-set sources and stored replies (a server that echoed a key).  Request contents (the data)
    are left as they are."""
    from knockout._redact import MIN_SECRET, argv_secrets, redact, redact_spec, scrub, spec_secrets

    def load(text: Any) -> Any:
        try:
            return json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None

    labels: set[str] = set()
    secrets: set[str] = set()
    jury_runs: set[str] = set()  # runs of members (a jury): their results are keyed by the members' labels
    for run_id, config, summary in db.execute("SELECT id, config, summary FROM runs").fetchall():
        for obj in (load(config), load(summary)):
            if not isinstance(obj, dict):
                continue
            members = obj.get("members")
            for m in members if isinstance(members, list) else ():
                if isinstance(m, dict) and isinstance(m.get("label"), str):
                    labels.add(m["label"])
                    jury_runs.add(run_id)
            command = obj.get("command")
            if isinstance(command, dict) and isinstance(command.get("argv"), str):
                secrets |= argv_secrets(command["argv"])
    for run_id in sorted(jury_runs):
        for (text,) in db.execute("SELECT details FROM results WHERE run_id = ?", (run_id,)):
            details = load(text)
            members = details.get("members") if isinstance(details, dict) else None
            if isinstance(members, dict):
                labels |= {k for k in members if isinstance(k, str)}
    relabel: dict[str, str] = {}
    for label in labels:
        spec, plus, prompt = label.partition(" + ")
        secrets |= spec_secrets(spec) | spec_secrets(label)
        shown = redact_spec(spec) + plus + prompt
        if shown != label:
            relabel[label] = shown
    secrets = {s for s in secrets if len(s) >= MIN_SECRET}
    old_labels = sorted(relabel, key=len, reverse=True)

    def fix(text: str) -> str:
        for old in old_labels:
            if old in text:
                text = text.replace(old, relabel[old])
        return scrub(text, secrets) if secrets else text

    def walk(v: Any, each: Any) -> Any:
        if isinstance(v, str):
            return each(v)
        if isinstance(v, dict):
            return {each(k) if isinstance(k, str) else k: walk(x, each) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, each) for x in v]
        return v

    def run_text(v: str) -> str:  # what the Store redacts when it writes a run
        return redact(fix(v))

    def as_text(each: Any) -> Any:
        def one(v: Any) -> Any:
            return each(v) if isinstance(v, str) else v
        return one

    def as_json(each: Any) -> Any:
        def one(v: Any) -> Any:
            old = load(v)
            if old is None:
                return each(v) if isinstance(v, str) else v
            redacted = walk(old, each)
            return v if redacted == old else json.dumps(redacted, ensure_ascii=False)  # keys in their stored order
        return one

    needles = [*old_labels, *(s for v in secrets for s in {v, json.dumps(v, ensure_ascii=False)[1:-1]})]
    plan: list[tuple[str, dict[str, Any], bool]] = [  # (table, column -> rewrite, whether only rows with a needle)
        ("runs", {"judge": as_text(run_text), "config": as_json(run_text), "summary": as_json(run_text),
                  "error": as_text(run_text), "data_source": as_text(run_text)}, False),
        ("itemsets", {"source": as_text(run_text)}, False),
        ("call_log", {"error": as_text(run_text)}, False),
        ("batches", {"judge": as_text(run_text), "error": as_text(run_text)}, False),
        ("results", {"details": as_json(fix)}, True),
        ("matches", {"games": as_json(fix)}, True),
        ("calls", {"reply": as_text(fix), "parsed": as_text(fix)}, True),
    ]
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, cols, needled in plan:
        if table not in tables:
            continue
        have = [c for c in cols if c in _columns(db, table)]
        if not have or (needled and not needles):
            continue
        chunks = [needles[k:k + 400] for k in range(0, len(needles), 400)] if needled else [[]]
        for chunk in chunks:  # (a row holding needles of two chunks is read twice: the second time unchanged)
            if needled:
                where = " OR ".join(f"instr({c}, ?) > 0" for c in have for _ in chunk)
            else:
                where = " OR ".join(f"{c} IS NOT NULL" for c in have)
            part = [n for _ in have for n in chunk]
            rows = db.execute(f"SELECT rowid, {', '.join(have)} FROM {table} WHERE {where}", part).fetchall()
            for row in rows:
                new = [cols[c](v) for c, v in zip(have, row[1:], strict=True)]
                if new != list(row[1:]):
                    db.execute(f"UPDATE {table} SET {', '.join(f'{c} = ?' for c in have)} WHERE rowid = ?",
                               (*new, row[0]))


MIGRATIONS: list[Migration] = [
    Migration(1, "baseline: the schema of knockout 0.1 (calls, call_log, itemsets, runs, results, web tables)", _v1),
    Migration(2, "matches stored once in their own table; runs.error", _v2),
    Migration(3, "method-declared breakdown groups in results.details.groups (knockout: round)", _v3),
    Migration(4, "in-flight request leases; runs.owner", _v4),
    Migration(10, "web: server-side sessions and failed logins (web_sessions, web_login_failures)", _v10),
    Migration(11, "web: question figures copied at import (web_images)", _v11),
    Migration(12, "web: side-by-side verdicts both_good/both_bad stored as C/D (knockout.Verdict)", _v12),
    Migration(13, "answer groups (answer_groups); a teacher's grade says the group and action it came from "
                  "(human_grades.via_group, .action, and in grade_history)", _v13),
    Migration(35, "provider batch jobs and their request keys (batches, batch_requests)", _v35),
    Migration(36, "requests stored once by content (blobs); compressed item-set snapshots", _v36),
    Migration(40, "indexes of results and matches by (run, question)", _v40),
    Migration(41, "each stored reply's parse with the identity of the parse that made it (calls.parse_id)", _v41),
    Migration(42, "each stored reply's verdict slot: the allowed values' probabilities (calls.verdict)", _v42),
    Migration(43, "no secret of a judge spec stored: runs, item-set sources, call log and batch errors redacted",
              _v43),
    Migration(44, "no secret of a judge spec stored, read by the spec's structure: jury labels in results.details "
                  "and every run, echoed keys in results, matches, call log and replies", _v44),
]


def latest() -> int:
    return max(m.version for m in MIGRATIONS)


def version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def applied(db: sqlite3.Connection) -> set[int]:
    """The steps applied to ``db``; a file from before ``schema_migrations`` has every step up to its
    ``user_version`` (it was written by a version that applied them in order)."""
    has_table = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone()
    if has_table is None:
        return {m.version for m in MIGRATIONS if m.version <= version(db)}
    return {int(r[0]) for r in db.execute("SELECT version FROM schema_migrations")}


def migrate(db: sqlite3.Connection, where: str = "store") -> int:
    """Bring ``db`` (an autocommit connection) to the latest schema; returns the version it had."""
    try:
        before = version(db)
        done = applied(db)
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{where}: not a knockout store (not an SQLite database: {exc})") from None
    known = {m.version for m in MIGRATIONS}
    if before > latest() or done - known:
        unknown = sorted(done - known) or [before]
        raise ConfigError(f"{where}: written by a newer knockout (schema steps {unknown} unknown here); "
                          "upgrade knockout")
    for step in sorted(MIGRATIONS, key=lambda m: m.version):
        if step.version in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                       "description TEXT NOT NULL, applied REAL NOT NULL)")
            if step.version in applied(db):  # another process migrated meanwhile
                db.execute("COMMIT")
                continue
            for v in sorted(done):  # record what an older file had applied before the table existed
                db.execute("INSERT OR IGNORE INTO schema_migrations VALUES (?, ?, strftime('%s','now'))",
                           (v, next(m.description for m in MIGRATIONS if m.version == v)))
            step.apply(db)
            db.execute("INSERT INTO schema_migrations VALUES (?, ?, strftime('%s','now'))",
                       (step.version, step.description))
            db.execute(f"PRAGMA user_version = {max(version(db), step.version)}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return before
