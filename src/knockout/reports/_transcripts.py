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

from dataclasses import dataclass, field
from typing import Any

from knockout.data._records import ItemSet
from knockout.runs import kind_of
from knockout.storage._store import RunRecord, Store

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
    return {k: {"request": req, "prompt_tokens": pt, "completion_tokens": ct, "latency_s": lat}
            for k, (req, pt, ct, lat) in store.call_requests(keys).items()}


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
    counts = store.result_counts()
    out = []
    for r in reversed(store.runs()):
        n, bad, qs = counts.get(r.id, (0, 0, 0))
        out.append({"run": r, "kind": kind_of(r.kind), "results": n, "invalid": bad, "questions": qs,
                    "pearson": kind_of(r.kind).headline(r)["pearson"],
                    "debias": (r.config.get("options") or {}).get("debias"),
                    "framework": (r.config.get("options") or {}).get("framework")})
    return out


def get_run(store: Store, run_id: str) -> RunRecord:
    """The run ``run_id`` (or the one run whose id starts with it)."""
    return store.find_run(run_id)


#: item-set snapshots read lately, by (store, fingerprint): a snapshot never changes once written
_SNAPSHOTS: dict[tuple[str, str], ItemSet] = {}


def snapshot(store: Store, run: RunRecord) -> ItemSet | None:
    """The run's item-set snapshot (kept for the next pages of the same run), None when it has none."""
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


def run_items(store: Store, run: RunRecord, *, invalid_only: bool = False, sort: str = "order",
              question: str | None = None, page: int = 1) -> dict[str, Any]:
    """A page of the run's items, in the columns its kind shows (:meth:`knockout.runs.RunKind.listing`):
    ``sort`` = ``order`` (as stored) or ``gap`` (largest human-judge gap first, as the kind measures it:
    grade runs |judge - human| / max points, side-by-side the number of orders whose verdict differs from the
    human one); ``invalid_only`` keeps the invalid ones; ``question`` one question's."""
    kind = kind_of(run.kind)
    results = store.results(run.id)
    rows = kind.listing(store, run, results)
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
            "page": page, "pages": pages, "questions": questions, "columns": kind.columns(store, run),
            "pairwise": kind.has("bracket") and store.has_matches(run.id)}


# -- one item ---------------------------------------------------------------------------------------------------
def item_view(store: Store, run: RunRecord, item_id: str) -> dict[str, Any]:
    """One item: its texts, what its kind says of it (``facts``: label and value; ``links``; a debate's
    ``transcript``) and every judge call it involved."""
    found = store.results(run.id, item_id=item_id)
    if not found:
        raise KeyError(item_id)
    row = found[0]
    view: dict[str, Any] = {"result": row, "details": row["details"], "question": None, "answer": None,
                            "answers": [], "facts": [], "links": [], "transcript": [], "names": {}, "step": "step"}
    kind_of(run.kind).item_view(store, run, row, view)
    d = view["details"]
    view["traces"] = traces(store, d, _Names(examinees=view["names"], step=view["step"]))
    view["summary"] = {k: v for k, v in d.items() if not isinstance(v, (dict, list)) or k in ("scores", "byes")}
    return view


def bracket(store: Store, run: RunRecord, question_id: str) -> dict[str, Any]:
    """Rounds (steps) of one question's matches (kinds whose runs play matches)."""
    return kind_of(run.kind).bracket(store, run, question_id)
