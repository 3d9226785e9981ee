"""What the judge was asked and what it wrote, per stored run: the data of the web app's transcript viewer
(``knockout.web._routes_runs``), with no web dependency.

* :func:`run_list` — every run of a store with its status, kind, judge and counts;
* :func:`run_items` — a run's items (answers, side-by-side items, meta-judgements) with the human and the
  judge value, filtered (invalid only) and sorted (largest human-judge gap first);
* :func:`item_view` — one item: its texts, human grades, parsed value or the reason it is invalid, and every
  judge call it involved (for pairwise methods: every match it played, each game's calls), each call with
  its request (from the store's ``calls`` table, by key) and raw reply;
* :func:`bracket` — the knockout bracket of a question: rounds, matches with both games' grades and
  replies, byes, the champion (other pairwise methods: their matches by step).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.reports._export import expand
from knockout.storage._store import MatchRow, RunRecord, Store

PAGE = 100


@dataclass
class Call:
    """One request sent to the judge (a first attempt or a format retry) and its raw reply."""

    key: str
    reply: str
    cached: bool
    error: str | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    stored: bool = False  # the request was found in the store's calls table


@dataclass
class Trace:
    """One task's calls (what the engine recorded: valid, error, the attempts) under a label saying where."""

    label: str
    valid: bool
    error: str | None
    failed: bool
    calls: list[Call]


def _requests(store: Store, keys: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        rows = store.db.execute(
            f"SELECT key, request, prompt_tokens, completion_tokens, latency_s FROM calls WHERE key IN "
            f"({','.join('?' * len(chunk))})", chunk).fetchall()
        for k, req, pt, ct, lat in rows:
            try:
                request = store.request_of(req)
            except (TypeError, json.JSONDecodeError):
                request = {}
            out[k] = {"request": request, "prompt_tokens": pt, "completion_tokens": ct, "latency_s": lat}
    return out


def _label(path: list[str]) -> str:
    return " › ".join(p for p in path if p) or "judge call"


@dataclass
class _Names:
    """How labels name things: answer ids by examinee, and what a pairwise step is called."""

    examinees: dict[str, str] = field(default_factory=dict)
    step: str = "step"

    def of(self, aid: Any) -> str:
        return self.examinees.get(str(aid)) or str(aid)


def _walk(obj: Any, path: list[str], out: list[tuple[str, dict[str, Any]]], names: _Names) -> None:
    if isinstance(obj, dict):
        if isinstance(obj.get("attempts"), list):
            out.append((_label(path), obj))
        for k, v in obj.items():
            if k == "attempts" or not isinstance(v, (dict, list)):
                continue
            _walk(v, [*path, _part(k, v)], out, names)
    elif isinstance(obj, list):
        for i, v in enumerate(obj, 1):
            _walk(v, [*path, _item_part(v, i, names)], out, names)


def _part(key: str, value: Any) -> str:
    return {"calls": "", "games": "", "matches": "", "debate": "debate", "solve": "criterion", "branch": "branch"}.get(
        key, key)


def _item_part(v: Any, i: int, names: _Names) -> str:
    if isinstance(v, dict):
        if "match_id" in v:
            return f"{names.step} {v.get('step')} vs {names.of(v.get('opponent'))}"
        if "first" in v and "second" in v and "scores" in v:
            return f"{names.of(v['first'])} shown first"
    return f"#{i}"


def traces(store: Store, details: dict[str, Any], names: _Names | None = None) -> list[Trace]:
    """Every call trace recorded in ``details`` (matches already expanded), with its requests from the store."""
    found: list[tuple[str, dict[str, Any]]] = []
    _walk(details, [], found, names or _Names())
    keys = [a["key"] for _, t in found for a in t["attempts"] if isinstance(a, dict) and "key" in a]
    stored = _requests(store, list(dict.fromkeys(keys)))
    out = []
    for label, t in found:
        calls = []
        for a in t["attempts"]:
            if not isinstance(a, dict):
                continue
            s = stored.get(str(a.get("key")), {})
            req = s.get("request") or {}
            calls.append(Call(key=str(a.get("key")), reply=str(a.get("reply") or ""), cached=bool(a.get("cached")),
                              error=a.get("error"), messages=list(req.get("messages") or []),
                              params=dict(req.get("params") or {}), prompt_tokens=s.get("prompt_tokens"),
                              completion_tokens=s.get("completion_tokens"), latency_s=s.get("latency_s"),
                              stored=bool(s)))
        out.append(Trace(label, bool(t.get("valid")), t.get("error"), bool(t.get("failed")), calls))
    return out


# -- runs -------------------------------------------------------------------------------------------------------
def run_list(store: Store) -> list[dict[str, Any]]:
    counts = {r[0]: (int(r[1]), int(r[2] or 0), int(r[3])) for r in store.db.execute(
        "SELECT run_id, COUNT(*), SUM(valid = 0), COUNT(DISTINCT question_id) FROM results GROUP BY run_id")}
    out = []
    for r in reversed(store.runs()):
        n, bad, qs = counts.get(r.id, (0, 0, 0))
        s = r.summary or {}
        out.append({"run": r, "results": n, "invalid": bad, "questions": qs,
                    "pearson": (s.get("agreement") or {}).get("pearson"),
                    "debias": (r.config.get("options") or {}).get("debias"),
                    "framework": (r.config.get("options") or {}).get("framework")})
    return out


def get_run(store: Store, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise ConfigError(f"no run '{run_id}'")
    return run


#: item-set snapshots read lately, by (store, fingerprint): a snapshot never changes once written
_SNAPSHOTS: dict[tuple[str, str], ItemSet] = {}


def _snapshot(store: Store, run: RunRecord) -> ItemSet | None:
    if not run.data_fingerprint:
        return None
    key = (str(store.path.resolve()), run.data_fingerprint)
    items = _SNAPSHOTS.get(key)
    if items is None:
        items = store.load_items(run.data_fingerprint)
        if items is None:
            return None
        if len(_SNAPSHOTS) >= 8:
            _SNAPSHOTS.pop(next(iter(_SNAPSHOTS)))
        _SNAPSHOTS[key] = items
    return items


def _items(store: Store, run: RunRecord) -> ItemSet | None:
    """The run's item set with the human grades of its report (the file's and the web app's)."""
    items = _snapshot(store, run)
    if items is not None and run.kind == "grade":
        from knockout.annotations import add_web_grades

        items, _ = add_web_grades(store, items)
    return items


def _grade_row(r: dict[str, Any], items: ItemSet | None) -> dict[str, Any]:
    a: Answer | None = None
    q: Question | None = None
    if items is not None:
        try:
            a = items.answer(r["item_id"])
            q = items.question_of(a)
        except KeyError:
            pass
    human = a.human_score if a else None
    mx = q.max_points if q else 1.0
    gap = None if human is None or r["score"] is None else abs(r["score"] - human) / mx
    d = r["details"]
    return {"id": r["item_id"], "question_id": r["question_id"], "examinee": a.examinee if a else None,
            "human": human, "value": r["score"], "max": mx, "valid": r["valid"], "gap": gap,
            "error": d.get("error"), "round": (d.get("groups") or {}).get("round"),
            "champion": d.get("champion")}


def _sbs_row(r: dict[str, Any]) -> dict[str, Any]:
    d = r["details"]
    v = d.get("verdicts") or {}
    human = d.get("human")
    gap = None if human is None else sum(v.get(k) != human for k in ("swap0", "swap1"))
    return {"id": r["item_id"], "question_id": r["question_id"], "human": human, "swap0": v.get("swap0"),
            "swap1": v.get("swap1"), "valid": r["valid"], "gap": gap, "error": d.get("error")}


def _meta_row(r: dict[str, Any]) -> dict[str, Any]:
    d = r["details"]
    return {"id": r["item_id"], "question_id": r["question_id"], "evaluators": d.get("evaluators") or [],
            "value": r["score"], "valid": r["valid"], "winner": d.get("winner"), "gap": None, "error": d.get("error")}


def run_items(store: Store, run: RunRecord, *, invalid_only: bool = False, sort: str = "order",
              question: str | None = None, page: int = 1) -> dict[str, Any]:
    """A page of the run's items: ``sort`` = ``order`` (as stored) or ``gap`` (largest human-judge gap first:
    grade runs |judge - human| / max points; side-by-side the number of orders whose verdict differs from the
    human one); ``invalid_only`` keeps the invalid ones; ``question`` one question's."""
    results = store.results(run.id)
    items = _items(store, run) if run.kind == "grade" else None
    if run.kind == "grade":
        rows = [_grade_row(r, items) for r in results]
    elif run.kind == "sbs":
        rows = [_sbs_row(r) for r in results]
    else:
        rows = [_meta_row(r) for r in results]
    total, invalid = len(rows), sum(not r["valid"] for r in rows)
    if invalid_only:
        rows = [r for r in rows if not r["valid"]]
    if question:
        rows = [r for r in rows if r["question_id"] == question]
    if sort == "gap":
        rows.sort(key=lambda r: (r["gap"] is None, -(r["gap"] or 0)))
    pages = max(1, -(-len(rows) // PAGE))
    page = min(max(page, 1), pages)
    questions = list(dict.fromkeys(r["question_id"] for r in results if r["question_id"]))
    return {"rows": rows[(page - 1) * PAGE: page * PAGE], "shown": len(rows), "total": total, "invalid": invalid,
            "page": page, "pages": pages, "questions": questions,
            "pairwise": run.kind == "grade" and bool(store.db.execute(
                "SELECT 1 FROM matches WHERE run_id = ? LIMIT 1", (run.id,)).fetchone())}


# -- one item ---------------------------------------------------------------------------------------------------
def item_view(store: Store, run: RunRecord, item_id: str) -> dict[str, Any]:
    found = store.results(run.id, item_id=item_id)
    if not found:
        raise KeyError(item_id)
    row = found[0]
    d = row["details"]
    view: dict[str, Any] = {"result": row, "details": d, "question": None, "answer": None, "answers": []}
    names = _Names(step="round" if run.method == "knockout" else "step")
    if run.kind == "grade":
        items = _items(store, run)
        if items is not None:
            try:
                view["answer"] = items.answer(item_id)
                view["question"] = items.question_of(view["answer"])
                names.examinees = {a.id: a.examinee or a.id for a in items.answers_for(view["question"].id)}
            except KeyError:
                pass
        if isinstance(d.get("matches"), list):
            d = expand(d, {m.match_id: m for m in store.matches(run.id, question_id=row["question_id"])})
    elif run.kind == "sbs":
        items = _snapshot(store, run)
        if items is not None and item_id in items.questions:
            view["question"] = items.questions[item_id]
            view["answers"] = items.answers_for(item_id)
    view["details"] = d
    view["traces"] = traces(store, d, names)
    view["summary"] = {k: v for k, v in d.items() if not isinstance(v, (dict, list)) or k in ("scores", "byes")}
    return view


# -- the bracket of a question ----------------------------------------------------------------------------------
def _score(m: MatchRow, aid: str) -> float | None:
    got = []
    for g in m.games:
        s = g.get("scores")
        if s:
            got.append(float(s[0]) if g.get("first") == aid else float(s[1]))
    return sum(got) / len(got) if got else None


def bracket(store: Store, run: RunRecord, question_id: str) -> dict[str, Any]:
    """Rounds (steps) of one question's matches; for the knockout also the byes and the champion."""
    items = _items(store, run)
    if items is None or question_id not in items.questions:
        raise KeyError(question_id)
    answers = {a.id: a for a in items.answers_for(question_id)}
    results = {r["item_id"]: r for r in store.results(run.id, question_id=question_id) if r["item_id"] in answers}
    matches = store.matches(run.id, question_id=question_id)
    steps = sorted({m.step for m in matches})
    knockout = run.method == "knockout"
    eliminated = {aid: r["details"].get("eliminated_round") for aid, r in results.items()}
    rounds = []
    for s in steps:
        played = []
        for m in (m for m in matches if m.step == s):
            sa, sb = _score(m, m.a), _score(m, m.b)
            if knockout:
                winner = m.b if eliminated.get(m.a) == s else m.a if eliminated.get(m.b) == s else None
            else:
                winner = None if sa is None or sb is None or sa == sb else (m.a if sa > sb else m.b)
            games = []
            for g in m.games:
                games.append({"first": g.get("first"), "second": g.get("second"), "scores": g.get("scores"),
                              "valid": g.get("valid"), "error": g.get("error"),
                              "replies": [str(a.get("reply") or "") for a in g.get("attempts") or []
                                          if isinstance(a, dict)]})
            played.append({"id": m.match_id, "a": m.a, "b": m.b, "score_a": sa, "score_b": sb, "winner": winner,
                           "valid": m.valid, "partial": m.partial, "games": games})
        byes = [aid for aid, r in results.items() if s in (r["details"].get("byes") or [])]
        rounds.append({"step": s, "matches": played, "byes": byes})
    champion = next((aid for aid, r in results.items() if r["details"].get("champion")), None)
    return {"question": items.questions[question_id], "answers": answers, "results": results, "rounds": rounds,
            "champion": champion, "knockout": knockout}
