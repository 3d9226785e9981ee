"""The new user's path: README's commands work as printed, and so do the commands knockout prints to run next.

``test_readme_using_it`` runs every command of README's "Using it" shell blocks, in order, in one folder, through
a ``knockout`` on PATH (this checkout's code), with the scripted judge (a simulation) in place of the embedded
one and a small graded exam as ``exam.jsonl``; a command that needs what a test machine lacks is skipped with the
reason.  Each must exit 0.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SAF = ROOT.parent / "shared" / "data" / "saf" / "unseen_answers" / "english"


def write_exam(path: Path) -> None:
    """``exam.jsonl`` for the README's commands: one exam of 4 questions x 6 graded examinees (the few-shot
    line takes 2 examples from other questions of the same exam, which the 2-question demo exams lack)."""
    rows: list[dict[str, object]] = []
    for q in range(1, 5):
        rows.append({"type": "question", "id": f"q{q}", "exam_id": "net-2024", "language": "en", "max_points": 4,
                     "text": f"Question {q}: name and explain one property of TCP.",
                     "reference": "Reliable, ordered delivery through sequence numbers and acknowledgements."})
        for e in range(1, 7):
            rows.append({"type": "answer", "id": f"q{q}/e{e}", "question_id": f"q{q}", "examinee": f"e{e}",
                         "text": f"Answer {e} to question {q}: " + "acknowledgements " * e,
                         "human_score": (e + q) % 5})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def readme_blocks(section: str) -> list[str]:
    """The command lines of the ```bash blocks of README's ``## section`` (its ### subsections included)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start:end if end >= 0 else None]
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", body, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip():
                lines.append(line.strip())
    return lines


def strip_comment(line: str) -> str:
    return re.sub(r"\s+#\s.*$", "", line).strip()


def why_skip(cmd: str) -> str | None:
    """The reason a README command cannot run on this machine, or None."""
    words = shlex.split(cmd)
    if "../shared/data" in cmd and not SAF.is_dir():
        return f"needs ../shared/data ({SAF} not here)"
    if "parquet" in words and importlib.util.find_spec("pyarrow") is None:
        return "needs pyarrow (knockout[dataframes])"
    if "allpairs" in words and importlib.util.find_spec("choix") is None:
        return "needs choix (knockout[ranking])"
    if any(w.startswith(("openai", "anthropic")) for w in words):
        return "needs network and an API key"
    return None


def as_run_here(cmd: str) -> str:
    """The README command with this test's substitutions: the scripted judge for the embedded one (the 1.5B
    model is not run by the tests), the SAF folder where ``../shared`` is, and a grade without ``--judge``
    given the scripted judge (the default is the embedded one)."""
    cmd = strip_comment(cmd)
    cmd = re.sub(r"--judge llamacpp\S*", "--judge scripted", cmd)
    cmd = cmd.replace("../shared/data/saf/unseen_answers/english", shlex.quote(str(SAF)))
    words = shlex.split(cmd)
    if words[:2] == ["knockout", "grade"] and "--judge" not in words and "--jury" not in words:
        cmd += " --judge scripted"
    return cmd


COMMANDS = readme_blocks("Using it")


def test_readme_using_it_has_commands() -> None:
    assert len(COMMANDS) >= 10 and all(c.startswith("knockout ") for c in COMMANDS), COMMANDS


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A folder holding ``exam.jsonl`` and a PATH whose ``knockout`` runs this checkout."""
    here = tmp_path_factory.mktemp("readme")
    write_exam(here / "exam.jsonl")
    bin_dir = here / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "knockout"
    exe.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m knockout.cli \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "COLUMNS": "160"}
    return here, env


@pytest.mark.parametrize("cmd", COMMANDS, ids=[strip_comment(c)[:60] for c in COMMANDS])
def test_readme_using_it(cmd: str, workdir: tuple[Path, dict[str, str]]) -> None:
    reason = why_skip(cmd)
    if reason:
        pytest.skip(reason)
    here, env = workdir
    run = as_run_here(cmd)
    r = subprocess.run(["bash", "-c", run], cwd=here, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{run}\n{r.stderr[-2000:]}"


def test_knockout_command_is_runnable_as_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from knockout.cli._common import knockout_command

    bin_dir = tmp_path / "venv bin"
    bin_dir.mkdir()
    exe = bin_dir / "knockout"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(exe), "demo"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert knockout_command() == shlex.quote(str(exe))  # not on PATH (no activated venv): the full path
    monkeypatch.setenv("PATH", str(bin_dir))
    assert knockout_command() == "knockout"
    monkeypatch.chdir(bin_dir)
    monkeypatch.setattr(sys, "argv", ["./knockout", "demo"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert knockout_command() == shlex.quote(str(exe))
    monkeypatch.setattr(sys, "argv", [str(ROOT / "src" / "knockout" / "cli" / "__main__.py"), "demo"])
    assert knockout_command() == shlex.join([sys.executable, "-m", "knockout.cli"])


def test_demo_prints_report_commands_that_run(tmp_path: Path) -> None:
    """``knockout demo`` ends with the commands of its HTML report and CSV export, runnable as printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "100"}
    r = subprocess.run([sys.executable, "-m", "knockout.cli", "demo", "--judge", "scripted", "-o", "d.db", "-q"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    printed = [line.strip() for line in r.stdout.split("\nNext:", 1)[1].splitlines() if line.startswith("  ")]
    assert len(printed) == 2 and "--html demo-report.html" in printed[0], r.stdout
    for line in printed:
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, (line, done.stderr)
    assert (tmp_path / "demo-report.html").stat().st_size > 1000
    assert (tmp_path / "demo.csv").read_text().count("\n") > 24


def test_no_valid_grade_names_the_export_command_that_runs(tmp_path: Path) -> None:
    """A run with no valid grade exits 1 and names the export command of its own store and run."""
    write_exam(tmp_path / "exam.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-m", "knockout.cli", "grade", "exam.jsonl", "--judge", "scripted?invalid=1",
                        "--limit", "1", "--format-retries", "0", "-o", "k.db", "-q"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    cmd = line.split("every reply is stored: ", 1)[1].removesuffix(" shows them")
    assert " export k.db:" in cmd, line
    done = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.count("\n") > 6, done.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_ends_with_the_activate_line() -> None:
    """`make demo` installs into .venv and says how to put `knockout` on PATH (README's set-up shows it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # under make test
    r = subprocess.run(["make", "--no-print-directory", "-n", "demo"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith('echo "    source .venv/bin/activate"'), r.stdout
    assert "source .venv/bin/activate" in (ROOT / "README.md").read_text(encoding="utf-8")
