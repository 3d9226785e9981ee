"""The judge's prompt-prefix reuse: one question's answers are sent one after the other (their prompts start
alike) under concurrency and on a resumed run, and the run summary reports the prompt tokens the judge took
from its KV cache.  The order is checked with the scripted judge (a SIMULATION, not an LLM) that records what it
is sent and simulates a KV cache of the last prompt; the reuse itself with the real embedded 0.5B GGUF."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from knockout.data import Answer, ItemSet, Question
from knockout.engine._engine import prompt_reuse
from knockout.errors import JudgeError
from knockout.judges import make_judge
from knockout.judges._base import Completion, JudgeRequest, current_subject
from knockout.judges._scripted import ScriptedJudge
from knockout.jury._run import summed_stats
from knockout.methods._run import GradeRun, RunConfig
from knockout.runs import execute
from knockout.storage import Store
from tests.conftest import SMALL_MODEL, needs_model


class RecordingJudge(ScriptedJudge):
    """The scripted judge (a simulation) that records the answer of each request it is sent, fails the answers
    in :attr:`fail` (a backend error: the run ends incomplete, a rerun asks them again) and reports as reused
    the words its last prompt started with too (a simulated KV cache of one prompt)."""

    sent: ClassVar[list[str]] = []
    fail: ClassVar[set[str]] = set()
    _last: ClassVar[list[str]] = []

    async def complete(self, request: JudgeRequest) -> Completion:
        subject = current_subject.get()
        assert subject is not None
        self.sent.append(subject.ids[0])
        if subject.ids[0] in self.fail:
            raise JudgeError("the simulated backend failed")
        words = " ".join(m.content for m in request.messages).split()
        kept = next((i for i, (a, b) in enumerate(zip(words, RecordingJudge._last, strict=False)) if a != b),
                    min(len(words), len(RecordingJudge._last)))
        RecordingJudge._last = words
        done = await super().complete(request)
        done.reused_prompt_tokens = min(kept, done.prompt_tokens)
        return done


@pytest.fixture
def recording() -> type[RecordingJudge]:
    RecordingJudge.sent, RecordingJudge.fail, RecordingJudge._last = [], set(), []
    return RecordingJudge


def interleaved(nq: int = 3, na: int = 3) -> ItemSet:
    """``na`` answers to each of ``nq`` questions, in the file one examinee after the other (q0, q1, q2, q0, ...):
    no two answers of one question next to each other."""
    qs = [Question(id=f"q{i}", text=f"Explain topic number {i} in a few sentences, with an example of it.",
                   max_points=4) for i in range(nq)]
    ans = [Answer(id=f"q{i}a{j}", question_id=f"q{i}", examinee=f"s{j}", text=f"Answer {j} about topic {i}.",
                  human_scores={"prof": float(j % 5)}) for j in range(na) for i in range(nq)]
    return ItemSet(qs, ans, source="prefix-test")


def test_one_questions_answers_are_sent_together_under_concurrency(tmp_path: Path,
                                                                   recording: type[RecordingJudge]) -> None:
    items = interleaved()
    with Store(tmp_path / "s.db") as store:
        summary = execute(GradeRun(items, RecordingJudge("sim", {"delay": 0.01}), RunConfig(concurrency=3)),
                          store).summary()
    assert recording.sent == ["q0a0", "q0a1", "q0a2", "q1a0", "q1a1", "q1a2", "q2a0", "q2a1", "q2a2"]
    # the simulated cache: each question's second and third prompts reuse the first's start
    assert summary["judge_calls"] == 9 and 0 < summary["reused_prompt_tokens"] < summary["prompt_tokens"]
    assert summary["prompt_reuse"] == round(summary["reused_prompt_tokens"] / summary["prompt_tokens"], 3)
    assert summary["evaluated_prompt_tokens_per_call"] == round(
        (summary["prompt_tokens"] - summary["reused_prompt_tokens"]) / 9, 1)


def test_a_resumed_run_sends_the_rest_grouped_by_question(tmp_path: Path, recording: type[RecordingJudge]) -> None:
    items = interleaved()
    recording.fail = {"q2a0", "q0a1", "q1a1", "q2a2"}
    with Store(tmp_path / "s.db") as store:
        first = execute(GradeRun(items, RecordingJudge("sim"), RunConfig(concurrency=4)), store).summary()
        assert first["status"] == "incomplete" and first["failed"] == 4
        recording.sent.clear()
        recording.fail = set()
        again = execute(GradeRun(items, RecordingJudge("sim"), RunConfig(concurrency=4)), store).summary()
    assert again["run_id"] == first["run_id"] and again["status"] == "complete"
    # only the four not answered, each question's together, the questions where their first answer comes
    assert recording.sent == ["q2a0", "q2a2", "q0a1", "q1a1"]
    assert again["cache_hits"] == 5 and again["judge_calls"] == 4


def test_engine_groups_only_the_tasks_that_say_so() -> None:
    """Tasks without a group keep their place; a group is sent where its first task comes."""
    import asyncio

    from knockout.engine import Engine, Task
    from knockout.judges import Message
    from knockout.prompts._parsers import Parsed

    sent: list[str] = []

    class Judge(ScriptedJudge):
        async def complete(self, request: JudgeRequest) -> Completion:
            sent.append(request.messages[0].content)
            return Completion(text="4", prompt_tokens=10, reused_prompt_tokens=6)

    from knockout.storage import Store as _Store

    def task(text: str, group: str) -> Task:
        return Task([Message(role="user", content=text)], parse=lambda s: Parsed(value=float(s)), group=group)

    async def go(store: _Store) -> list[float]:
        engine = Engine(Judge("sim"), store, concurrency=2)
        outs = await engine.ask_all([task("a1", "a"), task("x", ""), task("b1", "b"), task("a2", "a"),
                                     task("y", ""), task("b2", "b")])
        assert engine.stats.reused_prompt_tokens == 36 and engine.stats.as_dict()["prompt_reuse"] == 0.6
        return [o.value for o in outs]

    import tempfile

    with tempfile.TemporaryDirectory() as d, _Store(Path(d) / "s.db") as store:
        values = asyncio.run(go(store))
    assert values == [4.0] * 6
    assert sent == ["a1", "a2", "x", "b1", "b2", "y"]


def test_a_jury_adds_up_its_members_reuse() -> None:
    members = [{"judge_calls": 2, "prompt_tokens": 100, "reused_prompt_tokens": 40},
               {"judge_calls": 2, "prompt_tokens": 100, "reused_prompt_tokens": 10}]
    out = summed_stats(members, {"wall_s": 1.0})
    assert out["reused_prompt_tokens"] == 50
    assert out == {**out, **prompt_reuse(200, 50, 4)} and out["prompt_reuse"] == 0.25
    assert out["evaluated_prompt_tokens_per_call"] == 37.5


@needs_model
@pytest.mark.model
# the settings of test_verdict_slot's and test_parallel_decoding's judges: the suite loads each model once
@pytest.mark.parametrize("spec", [f"llamacpp:{SMALL_MODEL}", f"llamacpp:{SMALL_MODEL}?parallel=2&n_ctx=512"])
def test_the_embedded_judge_reuses_one_questions_prompt_start(tmp_path: Path, small_gguf: Path, spec: str) -> None:
    """The real 0.5B GGUF grades an interleaved file (the expected grade, one at a time; free text with parallel
    sequences): sent by question, the prompts after each question's first take its start from the KV cache."""
    from knockout.methods._base import MethodOptions

    items = interleaved(2, 2)
    options = MethodOptions(verdict="text") if "parallel" in spec else MethodOptions()
    params = {"max_tokens": 8, "temperature": 0.0}
    from knockout.judges import GenParams

    with Store(tmp_path / "s.db") as store:
        s = execute(GradeRun(items, make_judge(spec), RunConfig(options=options, params=GenParams(**params))),
                    store).summary()
    assert s["judge_calls"] >= 4
    assert s["reused_prompt_tokens"] > 0 and 0 < s["prompt_reuse"] < 1
    assert s["evaluated_prompt_tokens_per_call"] < s["prompt_tokens"] / s["judge_calls"]
