"""Every dead end names the command that gets out of it (issue 36): ``report``, ``calibrate``, ``review``,
``export`` and ``gradebook`` on an interrupted run say the command that resumes it -- the line the run printed
when it was stopped, stored with the run.  The judge is the scripted SIMULATION, not an LLM."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app
from tests.conftest import default_signals
from tests.test_gradebook import TEACHER


def cli(*args: str) -> tuple[int, str]:
    register_extensions(app)
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def run_row(db: Path) -> tuple[str, str] | None:
    if not db.exists():
        return None
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT id, status FROM runs").fetchall()
    except sqlite3.OperationalError:
        return None
    finally:
        con.close()
    return rows[0] if rows else None


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A grade run stopped by Ctrl-C before its first reply: stored ``interrupted``, no results.  The child is
    started as by a parent that ignores SIGINT (a CI runner, a background job), which it would inherit: it
    restores SIGINT's default handler before it runs (``default_signals``), and stops."""
    db = tmp_path_factory.mktemp("dead") / "k.db"
    cmd = [sys.executable, "-m", "knockout.cli", "grade", str(TEACHER), "--judge", "scripted?delay=60",
           "--concurrency", "1", "-o", str(db), "--json", "-q"]
    ignoring = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=default_signals)
    finally:
        signal.signal(signal.SIGINT, ignoring)
    deadline = time.time() + 120
    while time.time() < deadline and run_row(db) is None:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    row = run_row(db)
    assert row is not None and row[1] == "interrupted"
    printed = stderr.split("resume it with: ", 1)[1].strip()
    return db, row[0], printed


@pytest.mark.parametrize("command", [["report"], ["calibrate"], ["review"], ["gradebook"], ["export"]])
def test_an_interrupted_run_names_its_resume_command(interrupted: tuple[Path, str, str], command: list[str]) -> None:
    db, run_id, printed = interrupted
    code, output = cli(*command, str(db))
    assert code == 2, output
    line = " ".join(output.split())
    assert run_id in line and "interrupted" in line
    # the same command the run printed when it was stopped
    assert f"resume it with: {printed}" in line, (line, printed)


def test_a_run_without_a_stored_command_says_what_it_was(tmp_path: Path) -> None:
    from knockout.reports import resume_hint
    from knockout.storage import Store

    with Store(tmp_path / "s.db") as store:
        store.start_run("r1", kind="grade", method="individual", judge="scripted:sim", config={},
                        data_source="exam.jsonl")
        store.end_run("r1", "interrupted", "stopped by the user")
        run = store.find_run("r1")
    hint = resume_hint(run)
    assert hint.startswith("the command that started it, run again")
    assert "exam.jsonl" in hint and "scripted:sim" in hint and "individual" in hint


def test_a_stored_command_keeps_no_secret() -> None:
    from knockout._redact import redact as redact_secrets

    cmd = "knockout grade x.jsonl --judge 'openai:m?api_key=sk-123&timeout=5' --judge-opt api_key=sk-456 -o s.db"
    got = redact_secrets(cmd)
    assert "sk-123" not in got and "sk-456" not in got
    assert got == ("knockout grade x.jsonl --judge 'openai:m?api_key=***&timeout=5' "
                   "--judge-opt api_key=*** -o s.db")
