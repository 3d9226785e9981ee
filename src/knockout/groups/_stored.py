"""A grade run's answer groups in its store, and the teacher's grades given through them.

The groups of a run are built once (:func:`run_groups`) and kept in the store (``answer_groups``), so that the
groups a teacher saw (``knockout groups``, the web app) are the ones a group-grades file names and that split and
move change.  A grade given through a group is the teacher's grade of its representative: it is stored as the
teacher's (``human_grades``, the same rows as the web app's grades, read by ``report`` and ``gradebook`` as
``web:<grader>``) on the representative and on the members near-identical to it (:func:`alike`), with the group it
came through (``via_group``) and the action that wrote it (``action``: what :func:`undo` reverts).  The other
members keep their own draft grades, moved by the grade model's adaptation to the teacher, which the group's grade
enters as one judgement (:mod:`knockout.calibration._run`): a member's own draft carries its own evidence, which
another answer's grade would replace (``bench/groups.py --group-grade``: on the grade model's drafts, writing the
grade onto every member made the other answers worse than no action).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from knockout.data._records import ItemSet
from knockout.errors import ConfigError, InputError
from knockout.groups._build import GRADE_WEIGHT, Group, atoms, cluster, make_groups, medoid
from knockout.storage._store import Store


@dataclass
class RunGroups:
    """The answer groups of one grade run, per question (each question's largest first)."""

    run_id: str
    questions: dict[str, list[Group]]

    def group(self, group_id: str) -> Group | None:
        return next((g for gs in self.questions.values() for g in gs if g.id == group_id), None)

    def group_of(self, answer_id: str) -> Group | None:
        return next((g for gs in self.questions.values() for g in gs if answer_id in g.members), None)

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id,
                "questions": {q: [g.as_dict() for g in gs] for q, gs in self.questions.items()}}


def embed(texts: Sequence[str], questions: Sequence[str], encoder: str | None = None) -> np.ndarray:
    """The unit embeddings of ``texts`` with their questions' words taken out (an answer that only repeats its
    question embeds as the empty text: such answers fall together)."""
    from knockout.grading import demote
    from knockout.meaning import DEFAULT_ENCODER, load_encoder

    demoted = [demote(t, q) for t, q in zip(texts, questions, strict=True)]
    return load_encoder(encoder or DEFAULT_ENCODER).encode(demoted)


def _readings(store: Store, run_id: str) -> tuple[ItemSet, dict[str, tuple[float | None, float | None]]]:
    """The run's item set and each graded answer's (draft grade, judge's spread) in points."""
    from knockout.judges._slot import verdict_spread

    items = store.items_for_run(run_id)
    if items is None:
        raise ConfigError(f"run {run_id} has no item-set snapshot: it cannot be grouped")
    out: dict[str, tuple[float | None, float | None]] = {}
    for r in store.results(run_id):
        i = items.find(r["item_id"])
        if i is None:
            continue
        q = items.question_at(i)
        score = r.get("score")
        draft = float(score) if isinstance(score, (int, float)) and np.isfinite(score) else None
        out[r["item_id"]] = (draft, verdict_spread(r.get("details") or {}, float(q.max_points)))
    return items, out


def build_groups(items: ItemSet, readings: Mapping[str, tuple[float | None, float | None]], *,
                 encoder: str | None = None) -> dict[str, list[Group]]:
    """Every question's groups (:func:`knockout.groups._build.cluster`) of the answers of ``items`` that have a
    reading (answer id -> (draft grade, judge spread), points)."""
    by_q: dict[str, list[int]] = {}
    answers = [a for a in items if a.id in readings]
    for i, a in enumerate(answers):
        by_q.setdefault(a.question_id, []).append(i)
    if not answers:
        return {}
    qs = [items.question_of(a) for a in answers]
    vecs = embed([a.text for a in answers], [q.text for q in qs], encoder)
    out: dict[str, list[Group]] = {}
    for qid, idx in by_q.items():
        q = qs[idx[0]]
        mx = float(q.max_points)
        drafts = [readings[answers[i].id][0] for i in idx]
        shares = np.array([np.nan if d is None else d / mx for d in drafts], dtype=float)
        from knockout.grading import demote

        texts = [demote(answers[i].text, q.text) for i in idx]
        labels = cluster(texts, vecs[idx], shares)
        out[qid] = make_groups(qid, [answers[i].id for i in idx], [int(x) for x in labels], vecs[idx], drafts,
                               [readings[answers[i].id][1] for i in idx], mx)
    return out


def run_groups(store: Store, run_id: str, *, rebuild: bool = False, encoder: str | None = None) -> RunGroups:
    """The run's groups: those kept in the store, else (or with ``rebuild``) built and kept."""
    items, readings = _readings(store, run_id)
    stored = [] if rebuild else store.annotations.groups(run_id)
    if not stored:
        built = build_groups(items, readings, encoder=encoder)
        store.annotations.save_groups(run_id, [(a, g.question_id, g.id, a == g.representative)
                                               for gs in built.values() for g in gs for a in g.members], time.time())
        return RunGroups(run_id, built)
    by_q: dict[str, list[tuple[str, str, bool]]] = {}
    for aid, qid, gid, rep in stored:
        if aid in readings:
            by_q.setdefault(qid, []).append((aid, gid, rep))
    out: dict[str, list[Group]] = {}
    for qid, rows in by_q.items():
        mx = float(items.questions[qid].max_points)
        reps = {gid: aid for aid, gid, rep in rows if rep}
        out[qid] = make_groups(qid, [r[0] for r in rows], [r[1] for r in rows], None,
                               [readings[r[0]][0] for r in rows], [readings[r[0]][1] for r in rows], mx, reps)
    return RunGroups(run_id, dict(sorted(out.items(), key=lambda kv: _question_order(items, kv[0]))))


def _question_order(items: ItemSet, qid: str) -> int:
    return list(items.questions).index(qid) if qid in items.questions else len(items.questions)


def _next_id(groups: RunGroups, question_id: str) -> str:
    taken = [int(g.id.rpartition("#")[2]) for g in groups.questions.get(question_id, [])
             if g.id.rpartition("#")[2].isdigit()]
    return f"{question_id}#{max(taken, default=0) + 1}"


def _representative(store: Store, run_id: str, members: list[str], drafts: Mapping[str, float | None],
                    max_points: float) -> str:
    items = store.items_for_run(run_id)
    assert items is not None
    answers = [items.answer(a) for a in members]
    vecs = embed([a.text for a in answers], [items.question_of(a).text for a in answers])
    shares = np.array([(drafts.get(a) or 0.0) / max_points for a in members])
    return members[medoid(np.hstack([vecs, GRADE_WEIGHT * shares[:, None]]))]


def _member_atoms(store: Store, run_id: str, members: Sequence[str]) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """A group's member answers, their embeddings and their atoms (near-identical answers share one: their
    question-demoted texts equal, or embeddings within :data:`knockout.groups._build.NEAR`; :func:`atoms`)."""
    from knockout.grading import demote

    items = store.items_for_run(run_id)
    assert items is not None
    answers = [items.answer(a) for a in members]
    questions = [items.question_of(a).text for a in answers]
    vecs = embed([a.text for a in answers], questions)
    return answers, vecs, atoms([demote(a.text, q) for a, q in zip(answers, questions, strict=True)], vecs)


def split_group(store: Store, run_id: str, group_id: str) -> list[str]:
    """Split a group in two (the same clustering with two groups; near-identical answers stay together): the
    larger part keeps the id, the other gets the question's next; returns both ids."""
    from sklearn.cluster import AgglomerativeClustering

    groups = run_groups(store, run_id)
    g = _known(groups, group_id)
    answers, vecs, atom = _member_atoms(store, run_id, g.members)
    if int(atom.max()) + 1 < 2:
        raise InputError(f"group {group_id}: its answers are near-identical, it cannot be split", field="group")
    shares = np.array([(g.drafts.get(a.id) or 0.0) / g.max_points for a in answers])
    feats = np.hstack([vecs, GRADE_WEIGHT * shares[:, None]])
    m = int(atom.max()) + 1
    centres = np.vstack([feats[atom == a].mean(0) for a in range(m)])
    lab = AgglomerativeClustering(n_clusters=2, linkage="ward").fit_predict(centres)[atom]
    big = int(np.bincount(lab).argmax())
    new_id = _next_id(groups, g.question_id)
    keep = [a.id for a, x in zip(answers, lab, strict=True) if x == big]
    other = [a.id for a, x in zip(answers, lab, strict=True) if x != big]
    rep_keep = _representative(store, run_id, keep, g.drafts, g.max_points)
    rep_other = _representative(store, run_id, other, g.drafts, g.max_points)
    store.annotations.regroup(run_id, [(a, group_id, a == rep_keep) for a in keep] +
                              [(a, new_id, a == rep_other) for a in other], time.time())
    return [group_id, new_id]


def move_out(store: Store, run_id: str, answer_id: str) -> str:
    """Move one answer out of its group into a group of its own; returns the new group's id."""
    groups = run_groups(store, run_id)
    g = groups.group_of(answer_id)
    if g is None:
        raise InputError(f"answer {answer_id} is in no group of run {run_id}", field="answer")
    if len(g.members) == 1:
        return g.id
    new_id = _next_id(groups, g.question_id)
    rest = [a for a in g.members if a != answer_id]
    rep = g.representative if g.representative != answer_id else _representative(store, run_id, rest, g.drafts,
                                                                                   g.max_points)
    store.annotations.regroup(run_id, [(answer_id, new_id, True)] + [(a, g.id, a == rep) for a in rest],
                              time.time())
    return new_id


def _known(groups: RunGroups, group_id: str) -> Group:
    g = groups.group(group_id)
    if g is None:
        raise InputError(f"no group '{group_id}' in run {groups.run_id}", field="group")
    return g


def exam_of(items: ItemSet, question_id: str) -> str:
    """The exam a question's grades are filed under: its exam id, else the data file's stem (as the web app's
    import names an exam without one)."""
    q = items.questions[question_id]
    return q.exam_id or Path(items.source).stem or "exam"


@dataclass(frozen=True)
class GroupGrade:
    """What one group grade wrote: the action (what undo reverts), the answers graded (the representative and the
    members near-identical to it), those kept (graded one by one by the same grader before: an override stands),
    and the members left to the adaptation (their own drafts, moved by the teacher's grades)."""

    action: str
    group: str
    score: float
    graded: list[str]
    kept: list[str]
    adapted: list[str] = field(default_factory=list)


def alike(store: Store, run_id: str, group: Group) -> list[str]:
    """The members of ``group`` that take the teacher's grade of its representative: the representative and the
    members near-identical to it (one atom: equal tidied texts, or embeddings within
    :data:`knockout.groups._build.NEAR` cosine distance; :func:`knockout.groups._build.atoms`)."""
    if len(group.members) == 1:
        return list(group.members)
    _, _, atom = _member_atoms(store, run_id, group.members)
    mine = atom[group.members.index(group.representative)]
    return [a for a, x in zip(group.members, atom, strict=True) if x == mine]


def graded_groups(grades: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The ids of the groups graded already, from answer id -> stored grade (``via_group``): a graded group is
    not proposed again, though most of its members keep their adapted drafts."""
    return {str(g["via_group"]) for g in grades.values() if g.get("via_group")}


def grade_group(store: Store, run_id: str, group_id: str, score: float, grader: str, *, comment: str = "",
                exam_id: str | None = None, action: str | None = None,
                groups: RunGroups | None = None) -> GroupGrade:
    """The teacher's grade of a group's representative, stored as ``grader``'s grade given through the group on the
    representative and the members near-identical to it (:func:`alike`); an answer the same grader graded one by
    one (an override) keeps that grade.  The other members are left to the adaptation (``adapted``): the grade
    enters it as one judgement and moves their own drafts."""
    from knockout.annotations._common import check_version
    from knockout.annotations._exams import check_half_points

    groups = groups or run_groups(store, run_id)
    g = _known(groups, group_id)
    items = store.items_for_run(run_id)
    assert items is not None
    score = check_half_points(score, g.max_points)
    action = action or "group:" + secrets.token_hex(6)
    exam = exam_id or exam_of(items, g.question_id)
    graded, kept = [], []
    now = time.time()
    taking = alike(store, run_id, g)
    for aid in taking:
        current = store.annotations.grade(aid, grader)
        if current is not None and current.get("via_group") is None:
            kept.append(aid)
            continue
        store.annotations.save_grade(answer_id=aid, grader=grader, question_id=g.question_id, exam_id=exam,
                                     score=score, comment=comment, now=now, via_group=g.id, action=action,
                                     base_version=check_version(current["version"] if current else 0))
        graded.append(aid)
    return GroupGrade(action, g.id, score, graded, kept, [a for a in g.members if a not in taking])


def override(store: Store, run_id: str, answer_id: str, score: float, grader: str, *, comment: str = "",
             exam_id: str | None = None) -> GroupGrade:
    """The teacher's own grade of one member (graded one by one: a later group grade leaves it)."""
    from knockout.annotations._exams import check_half_points

    items = store.items_for_run(run_id)
    assert items is not None
    if items.find(answer_id) is None:
        raise InputError(f"no answer '{answer_id}' in run {run_id}", field="answer")
    q = items.question_of(items.answer(answer_id))
    score = check_half_points(score, float(q.max_points))
    current = store.annotations.grade(answer_id, grader)
    action = "override:" + secrets.token_hex(6)
    store.annotations.save_grade(answer_id=answer_id, grader=grader, question_id=q.id,
                                 exam_id=exam_id or exam_of(items, q.id), score=score, comment=comment,
                                 base_version=current["version"] if current else 0, now=time.time(),
                                 action=action)
    return GroupGrade(action, "", score, [answer_id], [])


def undo(store: Store, grader: str) -> dict[str, Any] | None:
    """Revert ``grader``'s latest action (a group grade, an import, an override): every answer it graded gets
    back its grade before (or none).  None when there is nothing to undo."""
    action = store.annotations.last_action(grader)
    if action is None:
        return None
    reverted, kept = store.annotations.undo_action(action, time.time())
    return {"action": action, "reverted": reverted, "changed_since": kept}


def teacher_grades(store: Store, run_id: str) -> dict[str, dict[str, Any]]:
    """Answer id -> {grader, score, via_group} of every grade stored on the run's answers (what the grade model's
    adaptation to the teacher reads: the grades given through groups, and one by one)."""
    items = store.items_for_run(run_id)
    ids = {a.id for a in items} if items is not None else set()
    return {r["answer_id"]: {"grader": r["grader"], "score": float(r["score"]), "via_group": r.get("via_group")}
            for r in store.annotations.grades() if r["answer_id"] in ids}


def run_for_answers(store: Store, answer_ids: set[str]) -> str | None:
    """The latest complete grading run in ``store`` that graded some of ``answer_ids`` (the web app's exam):
    whose draft grades the groups of the exam are built on; None when none did."""
    from knockout.runs import kind_of

    for record in reversed(store.runs()):
        if record.status != "complete" or not kind_of(kind_of(record.kind).reads_as(record)).grades_answers:
            continue
        if any(r["item_id"] in answer_ids for r in store.results(record.id, details=False)):
            return record.id
    return None


def stored_groups(store: Store, run_id: str) -> RunGroups | None:
    """The run's groups when they are kept in the store already (None: nobody grouped this run yet; nothing is
    built, so a reader that only shows them costs no encoder pass)."""
    return run_groups(store, run_id) if store.annotations.groups(run_id) else None
