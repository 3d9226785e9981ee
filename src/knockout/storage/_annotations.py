"""The annotation tables of a store: every SQL statement on what people enter (:attr:`Store.annotations`).

Tables (schema in :mod:`knockout.storage._migrations`; what they mean: :mod:`knockout.annotations`)
------
``web_settings``     key -> value (the anonymisation salt).
``web_assignments``  who grades which exam (``kind='exam'``) or annotates which pair set (``kind='pairset'``).
``web_exams``        exam id -> fingerprint of the item-set snapshot that holds it.
``web_images``       the question figures copied at import.
``question_info``    the question information an organizer set.
``human_grades``     one row per (answer, grader), versioned; ``grade_history`` every accepted save; both say
                     the answer group a grade was given through (``via_group``) and its action (``action``:
                     one group grade, import or override, what undo reverts).
``answer_groups``    each answer's group in a grade run (:mod:`knockout.groups`).
``pairsets``, ``pairs``, ``pair_views``, ``pair_verdicts``  side-by-side sets, their pairs, each annotator's
                     queue and their versioned verdicts.

Grades and verdicts follow the optimistic-write rule (:meth:`AnnotationTables.save_grade`,
:meth:`AnnotationTables.save_verdict`): the first save inserts version 1, a later one updates the row only
where it still has the version the save was based on; anything else raises :class:`StaleWrite`.  The
validation of what is saved (scores, choices, names, permissions) is the caller's
(:mod:`knockout.annotations`, :mod:`knockout.web`).
"""

from __future__ import annotations

import math
import secrets
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from knockout._verdict import Verdict


def _number(value: Any) -> float:
    """A stored grade as a float; NaN for one that is not a number (a store written by hand: text, a blob),
    which readers leave out and count (:func:`knockout.annotations.add_web_grades`)."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


class StaleWrite(Exception):
    """A save based on an older version than the stored one; ``current`` is the newer row."""

    def __init__(self, current: dict[str, Any] | None) -> None:
        self.current = current
        super().__init__("the stored value changed since it was loaded")


def dict_rows(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    """Every row of ``cur`` as a dict keyed by column name."""
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur]


_GRADE_COLS = "answer_id, grader, question_id, exam_id, score, comment, version, created, updated, via_group"
_VERDICT_COLS = "pairset, pair_id, annotator, shown, swapped, verdict, comment, version, created, updated"


class AnnotationTables:
    """Reads and writes of the annotation tables of one store (its connection and transactions)."""

    def __init__(self, db: sqlite3.Connection, transaction: Callable[[], AbstractContextManager[None]]) -> None:
        self.db = db
        self.transaction = transaction  # the store's: several writes as one

    def _versioned(self, base_version: int, insert: tuple[str, tuple[Any, ...]],
                   update: tuple[str, tuple[Any, ...]]) -> int:
        """Inside the caller's transaction: insert version 1 (``base_version`` 0) or update the row that still
        has ``base_version``; 0 when neither wrote a row (stale), else the new version."""
        cur = self.db.execute(*insert) if base_version == 0 else self.db.execute(*update)
        return base_version + 1 if cur.rowcount == 1 else 0

    # -- settings ----------------------------------------------------------------------
    def setting(self, key: str) -> str:
        """The value of ``key`` in ``web_settings``; a missing key gets a fresh random secret (32 bytes)."""
        self.db.execute("INSERT OR IGNORE INTO web_settings (key, value) VALUES (?, ?)",
                        (key, secrets.token_urlsafe(32)))
        return str(self.db.execute("SELECT value FROM web_settings WHERE key = ?", (key,)).fetchone()[0])

    # -- assignments -------------------------------------------------------------------
    def assign(self, user: str, kind: str, target: str, created: float) -> None:
        self.db.execute("INSERT OR IGNORE INTO web_assignments (user, kind, target, created) VALUES (?,?,?,?)",
                        (user, kind, target, created))

    def unassign(self, user: str, kind: str, target: str) -> None:
        self.db.execute("DELETE FROM web_assignments WHERE user = ? AND kind = ? AND target = ?",
                        (user, kind, target))

    def remove_assignments(self, user: str) -> None:
        """Every assignment of ``user``."""
        self.db.execute("DELETE FROM web_assignments WHERE user = ?", (user,))

    def assigned_targets(self, user: str, kind: str) -> list[str]:
        """The exams or pair sets ``user`` is assigned to, by name."""
        return [r[0] for r in self.db.execute(
            "SELECT target FROM web_assignments WHERE user = ? AND kind = ? ORDER BY target", (user, kind))]

    def assigned_users(self, kind: str, target: str) -> list[str]:
        """Users assigned to ``target``, in the order they were assigned."""
        return [r[0] for r in self.db.execute(
            "SELECT user FROM web_assignments WHERE kind = ? AND target = ? ORDER BY created, user",
            (kind, target))]

    # -- exams, figures and question information ----------------------------------------
    def put_exam(self, exam_id: str, fingerprint: str, *, fallback: bool, updated: float) -> None:
        """Exam ``exam_id`` is in the snapshot ``fingerprint`` (``fallback``: it holds the questions without
        an exam id)."""
        self.db.execute("INSERT OR REPLACE INTO web_exams (exam_id, fingerprint, fallback, updated) "
                        "VALUES (?,?,?,?)", (exam_id, fingerprint, int(fallback), updated))

    def exam_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT exam_id FROM web_exams ORDER BY exam_id")]

    def exam_source(self, exam_id: str) -> tuple[str, bool] | None:
        """(snapshot fingerprint, fallback) of an exam; None when there is no such exam."""
        row = self.db.execute("SELECT fingerprint, fallback FROM web_exams WHERE exam_id = ?",
                              (exam_id,)).fetchone()
        return (row[0], bool(row[1])) if row else None

    def put_image(self, fingerprint: str, question_id: str, index: int, sha256: str, media_type: str,
                  source: str, created: float) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO web_images (fingerprint, question_id, idx, sha256, media_type, source, created) "
            "VALUES (?,?,?,?,?,?,?)", (fingerprint, question_id, index, sha256, media_type, source, created))

    def image(self, fingerprint: str, question_id: str, index: int) -> tuple[str, str] | None:
        """(sha256, media type) of a recorded figure."""
        row = self.db.execute(
            "SELECT sha256, media_type FROM web_images WHERE fingerprint = ? AND question_id = ? AND idx = ?",
            (fingerprint, question_id, index)).fetchone()
        return (str(row[0]), str(row[1])) if row else None

    def image_indices(self, fingerprint: str, question_id: str) -> set[int]:
        """The indices of the recorded figures of a question."""
        return {int(r[0]) for r in self.db.execute(
            "SELECT idx FROM web_images WHERE fingerprint = ? AND question_id = ?", (fingerprint, question_id))}

    def question_info(self, question_id: str) -> tuple[float | None, float | None, str | None, str | None] | None:
        """(max points, student average, reference, difficulty) set for a question; None when nothing is."""
        row = self.db.execute(
            "SELECT max_points, student_average, reference, difficulty FROM question_info WHERE question_id = ?",
            (question_id,)).fetchone()
        return (row[0], row[1], row[2], row[3]) if row else None

    def put_question_info(self, question_id: str, *, max_points: float, student_average: float | None,
                          reference: str | None, difficulty: str | None, updated: float, updated_by: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO question_info (question_id, max_points, student_average, reference, "
            "difficulty, updated, updated_by) VALUES (?,?,?,?,?,?,?)",
            (question_id, max_points, student_average, reference, difficulty, updated, updated_by))

    def changed_max_points(self) -> dict[str, float]:
        """Question id -> the maximum an organizer set (questions whose maximum was set)."""
        return {r[0]: float(r[1]) for r in self.db.execute(
            "SELECT question_id, max_points FROM question_info WHERE max_points IS NOT NULL")}

    # -- grades ------------------------------------------------------------------------
    def grades_above(self, question_id: str, score: float) -> int:
        """How many grades of the question lie above ``score``."""
        row = self.db.execute("SELECT COUNT(*) FROM human_grades WHERE question_id = ? AND score > ?",
                              (question_id, score)).fetchone()
        return int(row[0])

    def grade(self, answer_id: str, grader: str) -> dict[str, Any] | None:
        found = dict_rows(self.db.execute(
            f"SELECT {_GRADE_COLS} FROM human_grades WHERE answer_id = ? AND grader = ?", (answer_id, grader)))
        return found[0] if found else None

    def save_grade(self, *, answer_id: str, grader: str, question_id: str, exam_id: str, score: float,
                   comment: str, base_version: int, now: float, via_group: str | None = None,
                   action: str | None = None) -> int:
        """Write a grade (the first: version 1; a later one: the row that still has ``base_version``) and its
        history row, in one transaction; returns the new version.  :class:`StaleWrite` with the stored row,
        and nothing written, when the row has another version.  ``via_group``: the answer group the grade was
        given through; ``action``: the action it belongs to (what :meth:`undo_action` reverts)."""
        with self.transaction():
            version = self._versioned(
                base_version,
                (f"INSERT OR IGNORE INTO human_grades ({_GRADE_COLS}, action) VALUES (?,?,?,?,?,?,1,?,?,?,?)",
                 (answer_id, grader, question_id, exam_id, score, comment, now, now, via_group, action)),
                ("UPDATE human_grades SET score = ?, comment = ?, version = version + 1, updated = ?, via_group = ?, "
                 "action = ? WHERE answer_id = ? AND grader = ? AND version = ?",
                 (score, comment, now, via_group, action, answer_id, grader, base_version)))
            if not version:
                raise StaleWrite(self.grade(answer_id, grader))
            self.db.execute(
                "INSERT INTO grade_history (answer_id, grader, score, comment, version, time, via_group, action) "
                "VALUES (?,?,?,?,?,?,?,?)", (answer_id, grader, score, comment, version, now, via_group, action))
        return version

    def last_action(self, grader: str) -> str | None:
        """The grader's latest action (group grade, import, override) not undone yet; None when there is none."""
        row = self.db.execute(
            "SELECT action FROM grade_history h WHERE grader = ? AND action IS NOT NULL AND action NOT LIKE 'undo:%' "
            "AND NOT EXISTS (SELECT 1 FROM grade_history u WHERE u.action = 'undo:' || h.action) "
            "ORDER BY id DESC LIMIT 1", (grader,)).fetchone()
        return str(row[0]) if row else None

    def undo_action(self, action: str, now: float) -> tuple[int, int]:
        """Revert every grade ``action`` wrote, in one transaction: each answer gets back the grade it had before
        (a new version, recorded as the action ``undo:<action>``), or none when it had none.  An answer whose grade
        changed since the action is left as it is.  Returns (reverted, left as they are)."""
        reverted = kept = 0
        with self.transaction():
            rows = self.db.execute("SELECT id, answer_id, grader, version FROM grade_history WHERE action = ? "
                                   "ORDER BY id", (action,)).fetchall()
            for hid, answer_id, grader, _version in rows:
                now_row = self.db.execute("SELECT action FROM human_grades WHERE answer_id = ? AND grader = ?",
                                          (answer_id, grader)).fetchone()
                if now_row is None or now_row[0] != action:  # saved again since (or removed): left as it is
                    kept += 1
                    continue
                current = self.grade(answer_id, grader)
                assert current is not None
                # the state before the action: the answer's history row just before it (version 0: removed)
                prev = self.db.execute(
                    "SELECT score, comment, via_group, action, version FROM grade_history WHERE answer_id = ? "
                    "AND grader = ? AND id < ? ORDER BY id DESC LIMIT 1", (answer_id, grader, hid)).fetchone()
                if prev is not None and prev[4] == 0:
                    prev = None
                if prev is None:
                    # the answer had no grade: the row goes; its history row (version 0) keeps the grade removed
                    self.db.execute("DELETE FROM human_grades WHERE answer_id = ? AND grader = ?", (answer_id, grader))
                    self.db.execute("INSERT INTO grade_history (answer_id, grader, score, comment, version, time, "
                                    "via_group, action) VALUES (?,?,?,?,?,?,?,?)",
                                    (answer_id, grader, current["score"], "(undone: grade removed)", 0, now, None,
                                     "undo:" + action))
                else:
                    # the row is again what the action before wrote (its action too: undo goes on back)
                    self.db.execute("UPDATE human_grades SET score = ?, comment = ?, via_group = ?, action = ?, "
                                    "version = version + 1, updated = ? WHERE answer_id = ? AND grader = ?",
                                    (prev[0], prev[1], prev[2], prev[3], now, answer_id, grader))
                    self.db.execute("INSERT INTO grade_history (answer_id, grader, score, comment, version, time, "
                                    "via_group, action) VALUES (?,?,?,?,?,?,?,?)",
                                    (answer_id, grader, prev[0], prev[1], current["version"] + 1, now, prev[2],
                                     "undo:" + action))
                reverted += 1
        return reverted, kept

    # -- answer groups -----------------------------------------------------------------
    def save_groups(self, run_id: str, rows: list[tuple[str, str, str, bool]], now: float) -> None:
        """Replace the answer groups of ``run_id`` by ``rows`` (answer id, question id, group id, representative),
        in one transaction."""
        with self.transaction():
            self.db.execute("DELETE FROM answer_groups WHERE run_id = ?", (run_id,))
            self.db.executemany(
                "INSERT INTO answer_groups (run_id, answer_id, question_id, group_id, representative, updated) "
                "VALUES (?,?,?,?,?,?)", [(run_id, a, q, g, int(r), now) for a, q, g, r in rows])

    def groups(self, run_id: str) -> list[tuple[str, str, str, bool]]:
        """(answer id, question id, group id, representative) of each answer of ``run_id``'s groups."""
        return [(r[0], r[1], r[2], bool(r[3])) for r in self.db.execute(
            "SELECT answer_id, question_id, group_id, representative FROM answer_groups WHERE run_id = ? "
            "ORDER BY question_id, group_id, answer_id", (run_id,))]

    def regroup(self, run_id: str, moves: list[tuple[str, str, bool]], now: float) -> None:
        """Move answers to groups: (answer id, group id, representative), in one transaction."""
        with self.transaction():
            self.db.executemany(
                "UPDATE answer_groups SET group_id = ?, representative = ?, updated = ? WHERE run_id = ? "
                "AND answer_id = ?", [(g, int(r), now, run_id, a) for a, g, r in moves])

    def grades(self, *, exam_id: str | None = None, grader: str | None = None) -> list[dict[str, Any]]:
        """Every current grade (of one exam, of one grader), by exam, question, answer and grader."""
        sql = f"SELECT {_GRADE_COLS} FROM human_grades WHERE 1=1"
        args: list[Any] = []
        if exam_id is not None:
            sql += " AND exam_id = ?"
            args.append(exam_id)
        if grader is not None:
            sql += " AND grader = ?"
            args.append(grader)
        return dict_rows(self.db.execute(sql + " ORDER BY exam_id, question_id, answer_id, grader", args))

    def grade_scores(self) -> list[tuple[str, str, float]]:
        """(answer id, grader, score) of every current grade, by answer and grader."""
        return [(r[0], r[1], _number(r[2])) for r in self.db.execute(
            "SELECT answer_id, grader, score FROM human_grades ORDER BY answer_id, grader")]

    def grades_stamp(self) -> tuple[Any, ...]:
        """A value that changes whenever an expert grade or a question's maximum is saved (the last history row
        and the last question-info update): what a reader keeps its grade-derived figures by."""
        last = self.db.execute("SELECT MAX(id), COUNT(*) FROM grade_history").fetchone()
        info = self.db.execute("SELECT MAX(updated), COUNT(*) FROM question_info").fetchone()
        return (*last, *info)

    def grade_history(self) -> list[dict[str, Any]]:
        """Every accepted save, oldest first."""
        return dict_rows(self.db.execute(
            "SELECT answer_id, grader, score, comment, version, time, via_group, action FROM grade_history "
            "ORDER BY id"))

    # -- pair sets ---------------------------------------------------------------------
    def add_pairs(self, pairset: str, pairs: list[tuple[str, str]], *, source: str | None, overlap: int,
                  seed: int, created: float) -> int:
        """Add ``pairs`` (id, the pair as JSON) after the pair set's last (the set created on first use, with
        ``source``, ``overlap`` and ``seed``), in one transaction; returns how many were new."""
        with self.transaction():
            self.db.execute("INSERT OR IGNORE INTO pairsets (id, source, overlap, seed, created) VALUES (?,?,?,?,?)",
                            (pairset, source, overlap, seed, created))
            start = self.db.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM pairs WHERE pairset = ?",
                                    (pairset,)).fetchone()[0]
            new = 0
            for pair_id, data in pairs:
                cur = self.db.execute(
                    "INSERT OR IGNORE INTO pairs (pairset, pair_id, position, data) VALUES (?,?,?,?)",
                    (pairset, pair_id, start + new, data))
                new += cur.rowcount
        return new

    def set_overlap(self, pairset: str, overlap: int) -> None:
        self.db.execute("UPDATE pairsets SET overlap = ? WHERE id = ?", (overlap, pairset))

    def pairset_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM pairsets ORDER BY id")]

    def pairset(self, pairset: str) -> dict[str, Any] | None:
        """id, source, overlap, seed and the number of pairs of a pair set."""
        row = self.db.execute("SELECT id, source, overlap, seed FROM pairsets WHERE id = ?", (pairset,)).fetchone()
        if row is None:
            return None
        n = self.db.execute("SELECT COUNT(*) FROM pairs WHERE pairset = ?", (pairset,)).fetchone()[0]
        return {"id": row[0], "source": row[1], "overlap": row[2], "seed": row[3], "pairs": n}

    def pair_data(self, pairset: str) -> list[str]:
        """The pairs of a pair set as JSON, in import order."""
        return [r[0] for r in self.db.execute(
            "SELECT data FROM pairs WHERE pairset = ? ORDER BY position", (pairset,))]

    def pair_views(self, pairset: str, annotator: str) -> dict[str, tuple[int, bool]]:
        """Pair id -> (position in the annotator's queue, shown swapped)."""
        return {r[0]: (r[1], bool(r[2])) for r in self.db.execute(
            "SELECT pair_id, position, swapped FROM pair_views WHERE pairset = ? AND annotator = ?",
            (pairset, annotator))}

    def add_pair_view(self, pairset: str, annotator: str, pair_id: str, position: int, swapped: bool) -> None:
        self.db.execute("INSERT OR IGNORE INTO pair_views (pairset, annotator, pair_id, position, swapped) "
                        "VALUES (?,?,?,?,?)", (pairset, annotator, pair_id, position, int(swapped)))

    def judged_pairs(self, pairset: str, annotator: str) -> set[str]:
        """The pairs of a set the annotator gave a verdict on."""
        return {r[0] for r in self.db.execute(
            "SELECT pair_id FROM pair_verdicts WHERE pairset = ? AND annotator = ?", (pairset, annotator))}

    def save_verdict(self, *, pairset: str, pair_id: str, annotator: str, shown: str, swapped: bool,
                     verdict: Verdict, comment: str, base_version: int, now: float) -> int:
        """Write a verdict, in one transaction and by the same version rule as :meth:`save_grade`."""
        with self.transaction():
            version = self._versioned(
                base_version,
                (f"INSERT OR IGNORE INTO pair_verdicts ({_VERDICT_COLS}) VALUES (?,?,?,?,?,?,?,1,?,?)",
                 (pairset, pair_id, annotator, shown, int(swapped), verdict, comment, now, now)),
                ("UPDATE pair_verdicts SET shown = ?, verdict = ?, comment = ?, version = version + 1, "
                 "updated = ? WHERE pairset = ? AND pair_id = ? AND annotator = ? AND version = ?",
                 (shown, verdict, comment, now, pairset, pair_id, annotator, base_version)))
            if not version:
                found = self.verdicts(pairset, pair_id=pair_id, annotator=annotator)
                raise StaleWrite(found[0] if found else None)
        return version

    def verdicts(self, pairset: str | None = None, *, pair_id: str | None = None,
                 annotator: str | None = None) -> list[dict[str, Any]]:
        """The verdicts (of a set, a pair, an annotator), each ``verdict`` a :class:`~knockout.Verdict`."""
        sql = f"SELECT {_VERDICT_COLS} FROM pair_verdicts WHERE 1=1"
        args: list[str] = []
        for column, value in (("pairset", pairset), ("pair_id", pair_id), ("annotator", annotator)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        found = dict_rows(self.db.execute(sql + " ORDER BY pairset, pair_id, annotator", args))
        for r in found:
            r["verdict"] = Verdict(r["verdict"])
        return found
