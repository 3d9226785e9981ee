"""Engine and store: cache, format retries, invalid results, counts (scripted judge = simulation)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from knockout.data._records import Answer, ItemSet, Question
from knockout.engine import Subject, current_subject
from knockout.judges import make_judge
from knockout.judges._base import Completion, Judge, JudgeRequest
from knockout.methods._run import RunConfig, run
from knockout.storage._store import Store


def _items(n: int = 6) -> ItemSet:
    q = Question(id="q", text="Explain TCP.", max_points=4)
    return ItemSet([q], [Answer(id=f"a{i}", question_id="q", examinee=f"e{i}", text=f"answer {i}",
                                human_scores={"g": (i % 5)}) for i in range(n)])


class ReplayJudge(Judge):
    """A canned-reply judge for testing the retry path (not an LLM)."""

    backend = "replay"
    simulated = True

    def __init__(self, replies: list[str]) -> None:
        super().__init__("replay")
        self.replies = replies
        self.calls = 0

    async def complete(self, request: JudgeRequest) -> Completion:
        self.calls += 1
        return Completion(text=self.replies[min(self.calls - 1, len(self.replies) - 1)])


def test_second_identical_run_makes_zero_calls(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    items = _items()
    r1 = run(items, make_judge("scripted"), store, RunConfig())
    r2 = run(items, make_judge("scripted"), store, RunConfig())
    assert r1.stats["judge_calls"] == 6 and r2.stats["judge_calls"] == 0
    assert r2.stats["cache_hits"] == 6
    assert [r.score for r in r1.results] == [r.score for r in r2.results]
    assert r1.run_id == r2.run_id
    assert store.repeated_calls() == 0


def test_unparseable_reply_is_retried_then_recorded_invalid(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    judge = ReplayJudge(["I like it.", "Still no grade.", "Hmm."])
    report = run(_items(1), judge, store, RunConfig(format_retries=2))
    (res,) = report.results
    assert not res.valid and res.score is None
    assert judge.calls == 3
    assert [a["reply"] for a in res.details["attempts"]] == ["I like it.", "Still no grade.", "Hmm."]
    assert report.summary()["invalid"] == 1
    assert report.agreement["invalid"] == 1 and report.agreement["n"] == 0


def test_retry_with_reminder_recovers(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    judge = ReplayJudge(["Looks fine to me.", "Score: 3/4"])
    report = run(_items(1), judge, store, RunConfig())
    (res,) = report.results
    assert res.valid and res.score == 3.0
    assert report.stats["format_retries"] == 1 and report.stats["judge_calls"] == 2
    # the second request carried the first reply and the reminder
    rows = list(store.iter_calls())
    assert "Score: X/4" in rows[-1]["request"]


def test_out_of_range_is_invalid_never_clipped(tmp_path: Path) -> None:
    judge = ReplayJudge(["Score: 9/4"])
    report = run(_items(1), judge, Store(tmp_path / "s.db"), RunConfig(format_retries=0))
    assert report.results[0].score is None and not report.results[0].valid


def test_scripted_judge_is_deterministic_and_labelled() -> None:
    j = make_judge("scripted?noise=0.2&seed=3")
    assert j.simulated
    from knockout.judges._base import Message

    j.bind_simulation(lambda subject: {"kind": "individual", "max_points": 4, "humans": [2.0]})
    req = JudgeRequest([Message(role="user", content="x")])

    async def ask() -> str:
        token = current_subject.set(Subject("individual", ("a1",)))
        try:
            return (await j.complete(req)).text
        finally:
            current_subject.reset(token)

    a = asyncio.run(ask())
    b = asyncio.run(ask())
    assert a == b and "Score:" in a
    assert not hasattr(req, "hint")  # nothing about the truth travels in a request


def test_scripted_judge_outside_a_run_is_a_clear_error() -> None:
    import pytest

    from knockout.errors import ConfigError

    j = make_judge("scripted")
    with pytest.raises(ConfigError, match="only inside a knockout run"):
        asyncio.run(j.complete(JudgeRequest([])))


def test_resumed_run_without_snapshot_gets_one(tmp_path: Path) -> None:
    """A run row begun before item-set snapshots existed gets its snapshot when the run is resumed."""
    store = Store(tmp_path / "s.db")
    items = _items()
    r1 = run(items, make_judge("scripted"), store, RunConfig())
    store.db.execute("UPDATE runs SET data_fingerprint = NULL WHERE id = ?", (r1.run_id,))
    assert store.items_for_run(r1.run_id) is None
    r2 = run(items, make_judge("scripted"), store, RunConfig())
    assert r2.run_id == r1.run_id and r2.stats["judge_calls"] == 0
    snap = store.items_for_run(r1.run_id)
    assert snap is not None and snap.fingerprint() == items.fingerprint()


async def test_compute_runs_off_the_event_loop_with_one_blas_thread(tmp_path: Path) -> None:
    """Issue 59: ``Engine.compute(fn, *args)`` runs ``fn`` in a worker thread of this process with one BLAS thread,
    and the event loop keeps turning meanwhile (a ticker advances while the computation sleeps)."""
    import os
    import threading
    import time

    from knockout.engine import Engine
    from tests._compute import probe

    with Store(tmp_path / "s.db") as store:
        engine = Engine(make_judge("scripted"), store)
        pid, thread, blas, square = await engine.compute(probe, 7)
        assert pid == os.getpid() and square == 49
        assert thread != threading.current_thread().name and thread.startswith("knockout-compute")
        assert blas == 1
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.6:
                await asyncio.sleep(0.02)
                ticks += 1

        await asyncio.gather(engine.compute(time.sleep, 0.8), ticker())
        assert ticks >= 10  # the loop turned while the computation held its thread


def test_a_stopped_run_does_not_wait_for_a_computation_in_progress() -> None:
    """A computation in progress (the second reader's encoding of a chunk) when the run is stopped: the process
    exits at once, not at the computation's end (a ``concurrent.futures`` pool is joined at exit: issue 59 item 5,
    Ctrl-C took minutes to stop a grade)."""
    import subprocess
    import sys
    import time

    code = ("import asyncio, time\n"
            "from knockout.engine._executors import compute_here, computations_in_flight\n"
            "async def main():\n"
            "    task = asyncio.ensure_future(compute_here(time.sleep, 60))\n"
            "    await asyncio.sleep(0.5)\n"
            "    assert computations_in_flight() == 1\n"
            "    task.cancel()\n"
            "asyncio.run(main())\n")
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - t0 < 30  # not the computation's 60 s
