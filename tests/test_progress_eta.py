"""Time you can plan with: the progress bar's ETA from the first live calls on, the hint when calls are slow,
and ``knockout.grade(progress=)`` in notebooks."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from knockout.cli._progress import SLOW_CALL_S, EtaColumn, Pace, ProgressBar, slow_hint
from knockout.engine import Done, Planned


def done(cached: bool = False) -> Done:
    return Done(label="x", cached=cached, valid=True, failed=False, invalid_total=0, tokens_total=0)


def test_eta_from_the_first_live_call() -> None:
    """One call of 90 s done, 9 left: 13.5 minutes left (rich's own estimate needs several completions within
    30 s and showed -:--:--)."""
    pace = Pace(0.0)
    assert pace.eta(10, 5.0) is None
    pace.done(False, 90.0)
    assert pace.eta(9, 90.0) == pytest.approx(810.0)
    assert pace.per_call(90.0) == pytest.approx(90.0)


def test_cache_hits_take_no_time() -> None:
    """A rerun: 50 cache hits answered at once, then live calls of 10 s each; the ETA is the live calls'."""
    pace = Pace(0.0)
    for i in range(50):
        pace.done(True, 0.01 * i if i < 49 else 0.5)
    t = 0.5
    for _ in range(3):
        t += 10
        pace.done(False, t)
    assert pace.per_call(t) == pytest.approx(10.0)
    assert pace.eta(7, t) == pytest.approx(70.0)


def test_the_eta_after_a_resume_comes_from_live_calls_only() -> None:
    """A resumed run: the store answers what was done before, in the order it was done, also after the first
    live calls; then every request left is live.  The hits seen count for nothing: each request left at the
    live calls' pace (discounted by the share of hits seen, the ETA said 15 s a call where calls took 77 s)."""
    pace = Pace(0.0)
    pace.queued(0.0)
    t = 0.0
    for _ in range(4):  # four calls in flight together, 77 s each
        t += 77 / 4
        pace.done(False, t)
    for _ in range(16):  # the rest of what was done before, answered as its questions come up
        pace.done(True, t)
    assert pace.per_call(t) == pytest.approx(77 / 4)
    assert pace.eta(80, t) == pytest.approx(80 * 77 / 4)  # 80 live calls left, four at a time
    for _ in range(80):
        t += 77 / 4
        pace.done(False, t)
    assert pace.per_call(t) == pytest.approx(77 / 4)


def test_the_bar_shows_the_eta_and_a_hint_when_calls_are_slow() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False)
    bar = ProgressBar("grading (llamacpp)", console=console, slow_hint=slow_hint("llamacpp"))
    clock = iter([0.0, *(SLOW_CALL_S * 2 * k for k in range(1, 20))])
    bar.progress.get_time = lambda: next(clock)  # type: ignore[method-assign]
    bar.pace = Pace(0.0)
    bar.progress.update(bar.task, pace=bar.pace)
    bar(Planned(requests=10))
    for _ in range(3):
        bar(done())
    task = bar.progress.tasks[0]
    assert str(EtaColumn().render(task)) != "ETA -:--:--"
    text = buf.getvalue()
    assert text.count("hint: judge calls take") == 1, text
    assert "llamacpp:qwen2.5-coder-0.5b" in text and "parallel=" in text and "threads=" in text
    bar(done())
    assert buf.getvalue().count("hint:") == 1  # once


def test_no_hint_when_calls_are_fast() -> None:
    buf = io.StringIO()
    bar = ProgressBar("grading (scripted)", console=Console(file=buf), slow_hint=slow_hint("scripted"))
    bar(Planned(requests=5))
    for _ in range(5):
        bar(done())
    assert "hint" not in buf.getvalue()


def table() -> list[dict[str, object]]:
    return [{"question_id": f"q{i % 2}", "question": "Why?", "answer": f"because {i}", "human_score": i % 3}
            for i in range(6)]


@pytest.mark.parametrize("progress", [True, "rich", "tqdm"])
def test_grade_shows_a_progress_bar(progress: bool | str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    import knockout

    if progress == "tqdm":
        pytest.importorskip("tqdm")
    out = knockout.grade(table(), judge="scripted", language="en", max_points=2, store=tmp_path / "s.db",
                         progress=progress)
    assert len(out) == 6
    err = capsys.readouterr().err
    assert "grading (scripted" in err and "6" in err, err


def test_grade_progress_false_is_silent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import knockout

    knockout.grade(table(), judge="scripted", language="en", max_points=2, store=tmp_path / "s.db", progress=False)
    knockout.grade(table(), judge="scripted", language="en", max_points=2, store=tmp_path / "s.db")  # not watched
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_grade_progress_refuses_an_unknown_bar(tmp_path: Path) -> None:
    import knockout
    from knockout.errors import ConfigError

    with pytest.raises(ConfigError, match="progress='bars'"):
        knockout.grade(table(), judge="scripted", language="en", max_points=2, store=tmp_path / "s.db",
                       progress="bars")


def test_the_clock_starts_when_requests_are_queued() -> None:
    """Loading the data and opening the store before the first request is no call's time."""
    pace = Pace(0.0)
    pace.queued(30.0)
    pace.done(False, 40.0)
    assert pace.per_call(40.0) == pytest.approx(10.0)
    pace.queued(45.0)  # a later wave does not move the clock
    pace.done(False, 50.0)
    assert pace.per_call(50.0) == pytest.approx(10.0)
