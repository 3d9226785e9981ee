"""Outputs are written into what the user named (issue 42): a regular file is replaced atomically through a
temporary file in its folder, a symbolic link's target is written (the link kept), a FIFO or a character
device (``/dev/null``) is written directly and never replaced, a folder or a missing parent folder is one
line and exit code 2.  One helper (:mod:`knockout.data._output`) does it for every output option; the
bad-input corpus (``tests/test_bad_input.py``) refuses a folder and a missing parent for each command."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knockout.cli import register_extensions
from knockout.cli._main import app
from knockout.data._output import atomic_output, atomic_output_bytes, output_target, write_output
from knockout.errors import InputError

register_extensions(app)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_regular_file_replaced_atomically_and_kept_on_error(tmp_path: Path) -> None:
    out = tmp_path / "grades.csv"
    out.write_text("old\n")
    os.chmod(out, 0o640)
    before = out.stat().st_ino
    with pytest.raises(RuntimeError), atomic_output(out) as f:
        f.write("half a fi")
        assert out.read_text() == "old\n"  # nothing replaced while it is written
        raise RuntimeError("the disk is full")
    assert out.read_text() == "old\n" and leftovers(tmp_path) == []
    write_output(out, "new\n")
    assert out.read_text() == "new\n" and out.stat().st_ino != before  # a new file moved into place
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and leftovers(tmp_path) == []


def test_symlink_target_written_and_link_kept(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "book.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    write_output(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n" and leftovers(tmp_path / "real") == [] and leftovers(tmp_path) == []
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "real" / "new.csv")
    write_output(dangling, "x\n")
    assert dangling.is_symlink() and (tmp_path / "real" / "new.csv").read_text() == "x\n"


def test_fifo_written_directly_never_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    write_output(fifo, "a,b\n1,2\n")
    t.join(10)
    assert got == [b"a,b\n1,2\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and leftovers(tmp_path) == []


def test_dev_null_written_directly_never_replaced() -> None:
    before = os.stat("/dev/null")
    write_output("/dev/null", "x\n")
    with atomic_output_bytes(Path("/dev/null")) as f:
        f.write(b"y")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert output_target("/dev/null") == (Path("/dev/null"), True)
    assert output_target("/dev/stdout")[1]  # a stream the shell opened: written directly


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK), reason="no /dev/shm")
def test_a_regular_file_under_dev_is_replaced_not_appended_to(tmp_path: Path) -> None:
    """Issue 49: every path under ``/dev/`` or ``/proc/`` was written directly, in append mode, so an existing
    ``/dev/shm/x.csv`` grew; a regular file is replaced atomically wherever it lives, and only a file
    descriptor's path (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``, a link to one) is written directly."""
    import secrets

    shm = Path("/dev/shm") / f"knockout-test-{secrets.token_hex(4)}.csv"
    shm.write_text("old,rows\n1,2\n")
    try:
        before = os.stat(shm).st_ino
        assert output_target(shm) == (shm, False)
        write_output(shm, "new\n")
        assert shm.read_text() == "new\n" and os.stat(shm).st_ino != before
        assert not [p for p in shm.parent.iterdir() if p.name.startswith(f".{shm.name}.")]
    finally:
        shm.unlink(missing_ok=True)
    for fd_path in ("/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/1"):
        assert output_target(fd_path)[1], fd_path
    link = tmp_path / "out"
    link.symlink_to("/dev/stdout")
    assert output_target(link)[1]  # a link to a stream the shell opened


def test_folder_and_missing_parent_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder"):
        write_output(tmp_path, "x")
    with pytest.raises(InputError, match=r"folder .*nope does not exist"):
        write_output(tmp_path / "nope" / "out.csv", "x")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="a part of its folder is a file"):
        write_output(tmp_path / "file" / "out.csv", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("store")
    rows = [{"type": "question", "id": "q1", "text": "What does DNS do?", "max_points": 2}]
    rows += [{"type": "answer", "id": f"a{i}", "question_id": "q1", "examinee": f"e{i}", "text": f"answer {i}",
              "human_score": i % 3} for i in range(8)]  # enough expert grades for calibrate
    (d / "exam.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = CliRunner().invoke(app, ["grade", str(d / "exam.jsonl"), "--judge", "scripted", "-o", str(d / "k.db"), "-q"])
    assert r.exit_code == 0, r.output
    return d / "k.db"


#: every command with an output file, and how it names it
OUTPUTS = {
    "gradebook": ["gradebook", "{db}", "-o", "{out}"],
    "export": ["export", "{db}", "-O", "{out}"],
    "export-parquet": ["export", "{db}", "--format", "parquet", "-O", "{out}"],
    "report-html": ["report", "{db}", "--resamples", "0", "--html", "{out}"],
    "calibrate": ["calibrate", "{db}", "--resamples", "0", "-O", "{out}"],
    "annotations-export": ["annotations", "export", "--db", "{db}", "-O", "{out}"],
}


@pytest.mark.parametrize("command", list(OUTPUTS))
def test_every_output_option_writes_through_links_and_pipes(command: str, store: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("old")
    link = tmp_path / "out"
    link.symlink_to(target)
    args = [a.format(db=store, out=link) for a in OUTPUTS[command]]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and target.read_bytes() != b"old" and leftovers(tmp_path) == []
    r = CliRunner().invoke(app, [a.format(db=store, out="/dev/null") for a in OUTPUTS[command]])
    assert r.exit_code == 0, r.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    r = CliRunner().invoke(app, [a.format(db=store, out=tmp_path) for a in OUTPUTS[command]])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(tmp_path) in lines[0] and "is a folder" in lines[0], r.stderr
