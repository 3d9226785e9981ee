"""The teacher's path as a new teacher met it (issue 61 item 6): each friction fixed, tested here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import needs_model


def test_a_similarity_of_zero_is_not_shown_as_a_grade_on_the_scale() -> None:
    """An answer saying nothing beyond its question (similarity 0.000) was shown as "meaning 2.19/4"."""
    from knockout.calibration._trust import trust_tables
    from knockout.methods._kind import readers_words

    nothing = {"judge": 3.0, "meaning": 2.19, "similarity": 0.0, "combined": 2.5, "encoder": "all-minilm-l6-v2",
               "disagree": True, "readings": {"judge": 3.0, "similarity": 0.0}}
    words = readers_words(nothing)
    assert "allows (nothing beyond the question)" in words and "2.19" not in words
    some = {**nothing, "similarity": 0.42, "readings": {"judge": 3.0, "similarity": 0.42}}
    assert "allows (2.19)" in readers_words(some)
    section = {"questions": {}, "flagged": {}, "readings": {"a1": nothing},
               "counts": {"needs_expert_questions": 0, "questions": 0}}
    rows = next(t for t in trust_tables(section) if t.title.startswith("two readers")).rows
    assert rows == [["a1", "3.00", "nothing beyond the question", "0.000"]]


def test_a_progress_bar_on_a_pipe_prints_plain_lines() -> None:
    """``make demo`` piped printed no progress for 50 minutes: rich draws no live bar where stderr is no terminal."""
    import io

    from rich.console import Console

    from knockout.cli._progress import LINE_EVERY_S, ProgressBar
    from knockout.engine import Done, Planned

    buf = io.StringIO()
    bar = ProgressBar("judging (scripted)", console=Console(file=buf, force_terminal=False, width=200))
    clock = iter(float(t) for t in range(0, 10_000, 7))
    bar.progress.get_time = lambda: next(clock)
    bar.progress.start()
    bar(Planned(24))
    for i in range(24):
        bar(Done("x", cached=False, valid=True, failed=False, invalid_total=0, tokens_total=i))
    bar.progress.stop()
    lines = [x for x in buf.getvalue().splitlines() if x.startswith("judging (scripted): ")]
    assert lines[0].startswith("judging (scripted): 1/24 requests, invalid 0")
    assert lines[-1].startswith("judging (scripted): 24/24 requests")
    assert 3 <= len(lines) < 24  # one every LINE_EVERY_S seconds of its clock, not one per request
    assert LINE_EVERY_S == 30.0


def test_the_demo_says_its_expected_time_first() -> None:
    from knockout.cli._main import demo_expected_time

    line = demo_expected_time("llamacpp", 24)
    assert "24 answers" in line and "expect about 12 to 62 minutes" in line
    assert "minutes" not in demo_expected_time("openai:gpt-4o-mini", 24)


def test_the_viewer_does_not_call_a_combined_or_expected_grade_parsed() -> None:
    """The viewer showed "Parsed grade 2.77812" beside the reply's raw "4/4"."""
    from knockout.methods._kind import grade_fact

    combined = {"readers": {"judge": 4.0, "meaning": 1.9, "similarity": 0.3, "combined": 2.77812}}
    label, text = grade_fact(2.77812, combined, 4.0)
    assert label == "Grade" and text.startswith("2.78 of 4 (the grade model's grade from the judge's grade")
    assert "the judge's own: 4" in text and "2.77812" not in text
    expected = {"attempts": [{"reply": "4/4", "verdict": {"mode": "expected", "chosen": "4"}}]}
    assert grade_fact(3.61, expected, 4.0) == (
        "Grade", "3.61 of 4 (the judge's expected grade over its probabilities for each grade, not the number its "
                 "reply wrote)")
    assert grade_fact(3.0, {"attempts": [{"reply": "3"}]}, 4.0) == ("Parsed grade", "3 of 4")


def test_the_demos_call_count_is_reports_count_from_the_store(tmp_path: Path) -> None:
    """The demo said "23 live, 1 from cache" where ``knockout report`` said 24 live calls for the same run: the
    demo counted its own invocation, report every call the store logged for the run.  Both now print the store's
    count (a rerun answered from the store says so beside it)."""
    from tests.test_calibration import knockout

    db = tmp_path / "demo.db"
    for _ in range(2):  # the second invocation sends nothing: every reply is in the store
        code, out, err = knockout("demo", "--judge", "scripted?noise=0", "--out", str(db), "--quiet")
        assert code == 0, err
    demo = re.search(r"judge requests\s+(\d+) \((\d+) live calls logged; this time 0 sent, 24 answered from the "
                     r"store\)", flat(out))
    assert demo is not None, out
    code, rep, err = knockout("report", str(db), "--resamples", "0")
    assert code == 0, err
    report = re.search(r"judge requests (\d+) \((\d+) live calls logged\)", flat(rep))
    assert report is not None, rep
    assert demo.groups() == report.groups() == ("24", "24")


def flat(text: str) -> str:
    """A rich table's text on one line, without its borders."""
    return re.sub(r"[│┃\s]+", " ", text)


EXIT_SCRIPT = """
import asyncio, gc, sys
from knockout.judges import GenParams, JudgeRequest, Message, make_judge
gguf = sys.argv[1]
# the GGUF's chat template for server=llama-cpp-python: a vocabulary-only llama_cpp.Llama
served = make_judge(f"openai:small?base_url=http://127.0.0.1:9/v1&server=llama-cpp-python&gguf={gguf}")
assert served.identity()["chat_template"]
# the embedded judge itself, one short call
embedded = make_judge(f"llamacpp:{gguf}?threads=1")
ask = JudgeRequest([Message(role="user", content="Say yes.")], GenParams(max_tokens=2, temperature=0.0))
print(asyncio.run(embedded.complete(ask)).text)
gc.collect()
gc.freeze()  # as a command run in process does (knockout.cli._progress.freeze_heap): the models live to the exit
"""


@needs_model
@pytest.mark.model
def test_no_llama_del_traceback_at_the_interpreters_exit(small_gguf: Path) -> None:
    """``make test`` ended with ``Llama.__del__`` tracebacks (issue 61 item 6): the vocabulary-only model read for
    server=llama-cpp-python's chat template was never closed, and where a command had frozen the heap it was freed
    after the interpreter had torn down the llama_cpp modules its ``__del__`` needs ('NoneType' object is not
    callable in free_model).  Every loaded model is now closed at exit, before that."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(small_gguf)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "__del__" not in r.stderr, r.stderr
