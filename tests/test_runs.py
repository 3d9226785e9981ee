"""The one run pipeline: lifecycle and states, migrations of older stores, export of every reply of every
kind of run, the synchronous entry inside an event loop, progress events (scripted judge = simulation)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from knockout.data._loaders import load_items
from knockout.data._records import Answer, ItemSet, Question
from knockout.engine import Done, Event, Planned, Queued
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.judges._base import Completion, Judge, JudgeRequest
from knockout.meta import MetaConfig, MetaOptions, load_verdicts, run_meta
from knockout.methods import MethodOptions, RunConfig, run, run_async
from knockout.runs import kind_of, run_kinds
from knockout.sbs import SbsConfig, SbsItem, run_sbs
from knockout.storage import Store, latest
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
EXE = [sys.executable, "-m", "knockout.cli"]


def knockout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300)


def items(n_q: int = 2, n_a: int = 4) -> ItemSet:
    qs = [Question(id=f"q{i}", text=f"Explain topic {i}.", max_points=4) for i in range(n_q)]
    answers = [Answer(id=f"q{i}a{j}", question_id=f"q{i}", examinee=f"e{j}", text=f"answer {j} to {i}",
                      human_scores={"h": float((i + j) % 5)}) for i in range(n_q) for j in range(n_a)]
    return ItemSet(qs, answers, source="synthetic")


def sbs_items(n: int = 4) -> list[SbsItem]:
    return [SbsItem(id=f"p{k}", question=f"Q{k}?", candidate=f"cand {k}", baseline=f"base {k}",
                    human_verdicts={"h1": "ABCD"[k % 4]}) for k in range(n)]


def write_verdicts(folder: Path) -> Path:
    folder.mkdir()
    for e, w in (("good", "1121"), ("poor", "2212")):
        rows = [{"question": f"Question {i}?", "answer1": f"first {i}", "answer2": f"second {i}", "winner": w[i],
                 "explanation": "x", "label": 1} for i in range(4)]
        (folder / f"merged_eval_results_{e}_pairwise.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


# -- the registry of kinds ------------------------------------------------------------------------
def test_run_kinds_are_registered_by_name() -> None:
    assert {"grade", "sbs", "meta"} <= set(run_kinds.names())
    assert kind_of("grade").run_class.kind == "grade" and kind_of("sbs").run_class.kind == "sbs"
    assert all(kind_of(n).name == n for n in run_kinds.names())


# -- states ---------------------------------------------------------------------------------------
class FailingJudge(Judge):
    """A backend that always fails (not an LLM): the run must end 'incomplete', never 'complete'."""

    backend = "failing"

    def __init__(self) -> None:
        super().__init__("down")

    async def complete(self, request: JudgeRequest) -> Completion:
        raise ConnectionError("server down")


def test_a_judge_that_fails_every_call_leaves_the_run_incomplete_and_not_exported_without_partial(
        tmp_path: Path) -> None:
    """The engine stops sending after three failures with no reply (issue 42): the run ends ``incomplete``, with
    why it stopped as its error, every answer invalid (none graded), and export refuses it without --partial."""
    db = tmp_path / "s.db"
    with Store(db) as store:
        report = run(items(), FailingJudge(), store, RunConfig())
    assert report.status == "incomplete" and report.summary()["valid"] == 0
    with Store(db) as store:
        (r,) = store.runs()
        assert r.status == "incomplete" and "failed on every call" in (r.error or "")
    res = knockout("export", str(db))
    assert res.returncode == 2 and "incomplete" in res.stderr and "--partial" in res.stderr
    listed = json.loads(knockout("runs", str(db), "--json").stdout)
    assert listed[0]["status"] == "incomplete" and "failed on every call" in listed[0]["error"]


class SlowJudge(Judge):
    """Replies after a delay (not an LLM), so a run can be cancelled mid-way."""

    backend = "slow"

    def __init__(self) -> None:
        super().__init__("slow")

    async def complete(self, request: JudgeRequest) -> Completion:
        await asyncio.sleep(5)
        return Completion(text="Score: 1/4")


def test_cancelled_run_is_interrupted(tmp_path: Path) -> None:
    async def main() -> None:
        with Store(tmp_path / "s.db") as store:
            task = asyncio.create_task(run_async(items(), SlowJudge(), store, RunConfig()))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            (r,) = store.runs()
            assert r.status == "interrupted"

    asyncio.run(main())


def test_bad_configuration_writes_nothing(tmp_path: Path) -> None:
    """Validation happens before the run is written: no phantom 'running' run."""
    db = tmp_path / "s.db"
    with Store(db) as store:
        with pytest.raises(ConfigError, match="reference"):
            run(items(), make_judge("scripted"), store,
                RunConfig(options=MethodOptions(prompt="knockout-individual-en-ref")))
        with pytest.raises(ConfigError, match="no option"):
            run(items(), make_judge("scripted"), store, RunConfig(method="knockout",
                                                                  options=MethodOptions(extra={"k": "3"})))
        with pytest.raises(ConfigError, match="format retries"):
            run(items(), make_judge("scripted"), store, RunConfig(format_retries=-1))
        assert store.runs() == []


def test_complete_run_and_store_context_manager(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        rep = run(items(), make_judge("scripted"), store, RunConfig(method="knockout"))
        r = store.get_run(rep.run_id)
        assert r is not None and r.status == "complete" and r.simulated
        assert rep.summary()["status"] == "complete" and rep.summary()["kind"] == "grade"
    with pytest.raises(sqlite3.ProgrammingError):
        store.runs()  # closed on leaving the block


def test_a_cached_rerun_keeps_the_wall_time_of_the_run_that_did_the_work(tmp_path: Path) -> None:
    """The rerun sends no call: the stored ``wall_s`` (which ``report`` shows) stays the first invocation's, the
    rerun's own is ``last_wall_s``; a jury's and its members' alike."""
    from knockout.jury import grade_member_runs, make_jury
    from knockout.jury._members import MemberSpec
    from knockout.runs import execute

    data = items()
    with Store(tmp_path / "s.db") as store:
        first = run(data, make_judge("scripted?noise=0.2&delay=0.05"), store, RunConfig())
        members = [MemberSpec("scripted?delay=0.05"), MemberSpec("scripted?noise=0.5&delay=0.05")]
        jury = execute(make_jury(grade_member_runs(data, members, RunConfig(), {}), members), store)
        ids = [first.run_id, jury.run_id, *(m["run_id"] for m in jury.summary()["members"])]
        worked = {i: store.get_run(i).summary for i in ids}  # type: ignore[union-attr]
        assert all(s is not None and s["judge_calls"] > 0 and "last_wall_s" not in s for s in worked.values())
        again = run(data, make_judge("scripted?noise=0.2&delay=0.05"), store, RunConfig())
        execute(make_jury(grade_member_runs(data, members, RunConfig(), {}), members), store)
        assert again.summary()["judge_calls"] == 0
        for i in ids:
            stored = store.get_run(i).summary  # type: ignore[union-attr]
            assert stored is not None and stored["judge_calls"] == 0, stored
            assert stored["wall_s"] == worked[i]["wall_s"] and stored["calls_per_s"] == worked[i]["calls_per_s"]
            assert isinstance(stored["last_wall_s"], float)  # the rerun's own
        cost = kind_of("grade").cost(store, store.find_run(first.run_id))
        assert cost["wall_s"] == worked[first.run_id]["wall_s"]  # what `report` shows


# -- one synchronous entry, also inside a running event loop (Jupyter) ---------------------------
def test_sync_entry_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    async def notebook_cell() -> float | None:
        with Store(tmp_path / "s.db") as store:
            rep = run(items(), make_judge("scripted"), store, RunConfig())
            return rep.agreement["pearson"]

    assert asyncio.run(notebook_cell()) is not None


# -- progress is an observer ----------------------------------------------------------------------
def test_progress_events_count_every_request(tmp_path: Path) -> None:
    events: list[Event] = []
    with Store(tmp_path / "s.db") as store:
        rep = run(items(2, 5), make_judge("scripted"), store, RunConfig(method="knockout"), observer=events.append)
    queued = sum(e.requests for e in events if isinstance(e, Queued))
    done = [e for e in events if isinstance(e, Done)]
    assert queued == len(done) == rep.stats["judge_calls"] + rep.stats["cache_hits"] == 8
    assert sorted({e.wave for e in events if isinstance(e, Queued)}) == [1, 2, 3]  # pipelined per question
    assert not any(isinstance(e, Planned) for e in events)


# -- export: every reply of every kind ------------------------------------------------------------
def test_export_writes_every_reply_of_every_kind(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        ko = run(items(), make_judge("scripted"), store, RunConfig(method="knockout",
                                                                   options=MethodOptions(debias=True)))
        ind = run(items(), make_judge("scripted"), store, RunConfig())
        sbs = run_sbs(sbs_items(), make_judge("scripted"), store, SbsConfig(debate="soft"), source="synthetic")
        meta = run_meta(load_verdicts(write_verdicts(tmp_path / "v")), make_judge("scripted"), store,
                        MetaConfig(options=MetaOptions(draws=1)))
        n_matches = len(store.matches(ko.run_id))
    rows = {}
    for rid in (ko.run_id, ind.run_id, sbs.run_id, meta.run_id):
        res = knockout("export", f"{db}:{rid}", "--format", "jsonl")
        assert res.returncode == 0, res.stderr
        rows[rid] = [json.loads(x) for x in res.stdout.splitlines()]
    # knockout, debiased: each match (both orders) is in both players' rows, every reply non-empty
    ko_rows = rows[ko.run_id]
    assert sum(len(r["replies"]) for r in ko_rows) == 2 * 2 * n_matches
    assert all(r["replies"] and all(r["replies"]) for r in ko_rows)
    assert all("games" in m for r in ko_rows for m in r["details"]["matches"])
    assert all(len(r["replies"]) == 1 for r in rows[ind.run_id])
    assert all(len(r["replies"]) == 6 for r in rows[sbs.run_id])  # 2 orders x 3 debate turns
    assert all(r["replies"] for r in rows[meta.run_id])
    assert {r["kind"] for v in rows.values() for r in v} == {"grade", "sbs", "meta"}
    csv_out = knockout("export", str(db), "--run", ko.run_id)
    assert csv_out.returncode == 0 and "Answer 1:" in csv_out.stdout  # the replies column is filled


# -- migrations ----------------------------------------------------------------------------------
def test_store_written_by_the_previous_version_is_migrated(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / "stores" / "v0-df07242.db", db)
    expected = json.loads((FIXTURES / "stores" / "v0-df07242.expected.json").read_text())
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 0
    with Store(db) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == latest()
        got = {r.id: r for r in store.runs()}
        for exp in expected["runs"]:
            r = got[exp["id"]]
            assert (r.kind, r.method, r.status) == (exp["kind"], exp["method"], exp["status"])
            results = [{"item_id": x["item_id"], "score": x["score"], "valid": x["valid"]}
                       for x in store.results(r.id)]
            assert results == exp["results"]
        knockout_run = next(r for r in got.values() if r.method == "knockout")
        matches = store.matches(knockout_run.id)
        assert matches and all(m.games and m.games[0]["attempts"] for m in matches)
        for res in store.results(knockout_run.id):
            for ref in res["details"]["matches"]:
                assert "games" not in ref and ref["match_id"] in {m.match_id for m in matches}
        grades = store.db.execute("SELECT answer_id, grader, score FROM human_grades").fetchall()
        assert {(a, g): s for a, g, s in grades} == {(a, g): s for a, by in expected["human_grades"].items()
                                                     for g, s in by.items()}
    # reopening does nothing more; report and export read the migrated runs
    with Store(db) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == latest()
    rep = knockout("report", f"{db}:{knockout_run.id}", "--json", "--resamples", "0", "--by", "round")
    assert rep.returncode == 0, rep.stderr
    js = json.loads(rep.stdout)
    assert js["run"]["status"] == "complete" and js["rounds"] is not None  # groups added by step 3
    assert {g["group"] for g in js["breakdowns"]["round"]} >= {"1", "winner"}
    exp = knockout("export", f"{db}:{knockout_run.id}", "--format", "jsonl")
    assert exp.returncode == 0
    exported = [json.loads(x) for x in exp.stdout.splitlines()]
    assert all(len(r["replies"]) == 2 * len(r["details"]["matches"]) for r in exported)  # debiased: 2 per match
    assert sum(len(r["replies"]) for r in exported) > 0


def test_a_store_from_a_newer_version_or_not_sqlite_is_refused(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    with Store(newer):
        pass
    con = sqlite3.connect(newer)
    con.execute(f"PRAGMA user_version = {latest() + 5}")
    con.close()
    with pytest.raises(ConfigError, match="newer knockout"):
        Store(newer)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match=r"not a knockout store|cannot"):
        Store(junk)


def test_report_of_an_interrupted_run_warns_and_says_its_status(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    data = load_items(FIXTURES / "tiny.jsonl")
    with Store(db) as store:
        rep = run(data, make_judge("scripted"), store, RunConfig(figures="none"))  # a text-only judge
        store.end_run(rep.run_id, "interrupted", "stopped by the user")
    res = knockout("report", str(db), "--resamples", "0")
    assert res.returncode == 0 and "interrupted" in res.stderr and "SIMULATION" in res.stderr
    js = json.loads(knockout("report", str(db), "--json", "--resamples", "0").stdout)
    assert js["run"]["status"] == "interrupted" and js["run"]["simulated_judge"] is True


# -- per-question pipelining ------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["knockout", "pairwise", "allpairs", "heapsort", "window"])
@pytest.mark.parametrize("debias", [False, True])
def test_pipelined_and_lockstep_give_the_same_results(method: str, debias: bool) -> None:
    data = ItemSet([Question(id=f"q{i}", text=f"Explain {i}.", max_points=4) for i in range(3)],
                   [Answer(id=f"q{i}a{j}", question_id=f"q{i}", text=f"answer {j}", human_scores={"h": (i + j) % 5})
                    for i, n in enumerate([7, 4, 2]) for j in range(n)])
    judge = "scripted?noise=0.3&invalid=0.1&seed=4"
    got = {}
    for lockstep in (False, True):
        cfg = RunConfig(method=method, options=MethodOptions(debias=debias, seed=3), lockstep=lockstep,
                        format_retries=0)
        with Store(":memory:") as store:
            rep = run(data, make_judge(judge), store, cfg)
            got[lockstep] = ([(r.answer_id, r.score, r.valid, r.details) for r in rep.results], rep.info,
                             rep.stats["judge_calls"], rep.stats["waves"],
                             sorted((m.match_id, m.step, m.games[0]["attempts"][0]["reply"] if m.games[0]["attempts"]
                                     else None) for m in store.matches(rep.run_id)))
    assert got[False] == got[True]


def test_a_step_merged_later_with_a_lower_number_is_still_applied(tmp_path: Path) -> None:
    """Migrations are recorded one by one: a gap below the newest applied step is filled on the next open."""
    from knockout.storage import _migrations as mig

    db = tmp_path / "s.db"
    with Store(db):
        pass
    con = sqlite3.connect(db)
    con.execute("DELETE FROM schema_migrations WHERE version = 3")  # as if step 3 had landed after step 4
    con.commit()
    con.close()
    with Store(db) as store:
        got = {int(r[0]) for r in store.db.execute("SELECT version FROM schema_migrations")}
        assert got == {m.version for m in mig.MIGRATIONS}
