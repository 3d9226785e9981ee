"""Knockout with stragglers: pipelined questions against lock-step waves.

    python bench/straggler.py [--questions 32] [--answers 16] [--delay 0.1] [--slow 1.0] [--concurrency 128]

The scripted judge (a SIMULATION, not an LLM) answers every request after ``--delay`` seconds, except one
request per lock-step wave, which takes ``--slow`` seconds (wave r's straggler is a match of the r-th
question, so each straggler holds back another question).  The same
knockout (same seed, so the same matches and results) runs pipelined (each question's round r + 1 starts
when its own round r is played; the default) and lock-step (``RunConfig(lockstep=True)``: round r of every
question is one wave).  Ideal: the deepest question's rounds x delay, plus one slow request.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from knockout.data._records import Answer, ItemSet, Question  # noqa: E402
from knockout.engine import current_subject  # noqa: E402
from knockout.judges._base import Completion, JudgeRequest  # noqa: E402
from knockout.judges._scripted import ScriptedJudge  # noqa: E402
from knockout.methods import RunConfig, run  # noqa: E402
from knockout.storage import Store  # noqa: E402


class StragglerJudge(ScriptedJudge):
    """Scripted replies; the requests named in ``slow_ids`` (pairs of answer ids) take ``slow`` seconds."""

    def __init__(self, delay: float, slow: float, slow_pairs: set[tuple[str, ...]], **kw: Any) -> None:
        super().__init__("sim", {"delay": 0.0, **kw})
        self.base, self.slow, self.slow_pairs = delay, slow, slow_pairs
        self.slow_seen = 0

    async def complete(self, request: JudgeRequest) -> Completion:
        import asyncio

        subject = current_subject.get()
        ids = tuple(sorted(subject.ids)) if subject else ()
        wait = self.slow if ids in self.slow_pairs else self.base
        self.slow_seen += ids in self.slow_pairs
        await asyncio.sleep(wait)
        return await super().complete(request)


def exam(nq: int, na: int) -> ItemSet:
    qs = [Question(id=f"q{i:03d}", text=f"Question {i}?", max_points=4) for i in range(nq)]
    ans = [Answer(id=f"q{i:03d}a{j:02d}", question_id=f"q{i:03d}", text=f"answer {j} to {i}",
                  human_scores={"h": float(j % 5)}) for i in range(nq) for j in range(na)]
    return ItemSet(qs, ans, source="straggler-bench")


def slow_pairs(items: ItemSet, seed: int) -> set[tuple[str, ...]]:
    """One match per round, each in another question: round r's straggler is the first match of the r-th
    question in that round (the rounds are found by playing the knockout once with a fast judge)."""
    judge = StragglerJudge(0.0, 0.0, set(), noise=0.2)
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "s.db") as store:
        run(items, judge, store, RunConfig(method="knockout", lockstep=True))
        rounds: dict[int, tuple[str, ...]] = {}
        qids = items.question_ids()
        for m in store.matches(store.runs()[0].id):
            if m.question_id == qids[(m.step - 1) % len(qids)]:
                rounds.setdefault(m.step, tuple(sorted((m.a, m.b))))
    return set(rounds.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=32)
    ap.add_argument("--answers", type=int, default=16)
    ap.add_argument("--delay", type=float, default=0.1)
    ap.add_argument("--slow", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=128)
    a = ap.parse_args()
    items = exam(a.questions, a.answers)
    slow = slow_pairs(items, 0)
    rows = []
    for name, lockstep in (("pipelined (default)", False), ("lock-step waves", True)):
        judge = StragglerJudge(a.delay, a.slow, slow, noise=0.2)
        with tempfile.TemporaryDirectory() as d, Store(Path(d) / "s.db") as store:
            t0 = time.perf_counter()
            rep = run(items, judge, store, RunConfig(method="knockout", lockstep=lockstep,
                                                     concurrency=a.concurrency))
            wall = time.perf_counter() - t0
        rows.append((name, wall, rep.stats["judge_calls"], rep.stats["waves"], judge.slow_seen,
                     [r.score for r in rep.results]))
    waves = rows[1][3]
    ideal = waves * a.delay + a.slow
    print(f"knockout, {a.questions} questions x {a.answers} answers, scripted judge (SIMULATION) {a.delay * 1000:.0f} "
          f"ms per call, one {a.slow:.1f} s straggler per lock-step wave ({len(slow)} in all), concurrency "
          f"{a.concurrency}")
    print(f"{'mode':<22} {'wall s':>7} {'calls':>6} {'waves':>6} {'slow':>5} {'x ideal':>8}")
    for name, wall, calls, w, seen, _ in rows:
        print(f"{name:<22} {wall:>7.2f} {calls:>6} {w:>6} {seen:>5} {wall / ideal:>8.2f}")
    print(f"ideal (rounds x delay + one straggler): {ideal:.2f} s; lock-step / pipelined: "
          f"{rows[1][1] / rows[0][1]:.2f}x; same results: {rows[0][5] == rows[1][5]}")


if __name__ == "__main__":
    main()
