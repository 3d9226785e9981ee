"""Writing a file the user named (``-o``, ``-O``, ``--output``, ``--html``, ``--csv``, ``--export-matches``):
one helper for every output of the CLI and the Python API (:func:`atomic_output`, :func:`atomic_output_bytes`).

What the path names decides how it is written:

* a regular file, or nothing yet: written to a temporary file in the same folder and moved into place with
  ``os.replace`` when the block ends without error (removed otherwise): a reader never sees half a file, and a
  failed write leaves the old file as it was; the old file's permission bits are kept;
* a symbolic link: its target is written (the link resolved, then the target replaced as above), never the
  link itself;
* a FIFO or a character device (``/dev/null``, a terminal), or a file descriptor's path (``/dev/stdout``,
  ``/dev/fd/N``, ``/proc/self/fd/N``, or a link to one: a stream the shell opened, even onto a regular file):
  written to directly, in append mode (nothing truncated that the shell opened), never replaced;  a regular file
  anywhere else is a regular file, wherever it lives (``/dev/shm/x.csv`` is replaced as above);
* a folder, a path whose parent folder does not exist, a block device or a socket: refused with an
  :class:`~knockout.errors.InputError` naming the path (one line, exit code 2 in the CLI), before anything is
  written.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, BinaryIO, TextIO, cast

from knockout.errors import InputError

#: a file descriptor's path: written directly even when it leads to a regular file (a stream the shell opened)
_FD_PATH = re.compile(r"/dev/(?:std(?:in|out|err)|fd/\d+)|/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd/\d+")


def _names_a_descriptor(p: Path) -> bool:
    """Whether ``p`` is a file descriptor's path, or a chain of links that reaches one (before it reaches the file
    the descriptor is open on)."""
    name = os.path.abspath(p)
    for _ in range(40):  # the kernel's own limit of links followed
        if _FD_PATH.fullmatch(name):
            return True
        name = os.path.join(os.path.realpath(os.path.dirname(name)), os.path.basename(name))  # its folders' links
        if _FD_PATH.fullmatch(name):
            return True
        try:
            link = os.readlink(name)
        except OSError:  # not a link (or gone): the chain ends at a file
            return False
        name = os.path.normpath(os.path.join(os.path.dirname(name), link))
    return False


def output_target(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    """(the file to write, whether to write it directly) for the output ``path``; an InputError naming
    ``path`` for what cannot be written (a folder, a missing parent folder, a block device or a socket)."""
    p = Path(path)
    name = str(p)
    try:
        st: os.stat_result | None = os.stat(p)  # follows symbolic links
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise InputError("cannot be written: a part of its folder is a file, not a folder", file=name) from None
    except OSError as e:
        raise InputError(f"cannot be written: {e.strerror}", file=name) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InputError("is a folder; give a file name to write", file=name)
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
            return p, True
        if not stat.S_ISREG(st.st_mode):
            raise InputError("is not a regular file, FIFO or character device (a block device or a socket); "
                             "refused", file=name)
        if _names_a_descriptor(p):
            return p, True
        return Path(os.path.realpath(p)), False
    target = Path(os.path.realpath(p))  # a dangling link: its target; else the path with its folders resolved
    if not target.parent.is_dir():
        folder = p.parent if not p.is_symlink() else target.parent
        raise InputError(f"cannot be written: the folder {folder} does not exist", file=name)
    return target, False


@contextmanager
def _output(path: str | os.PathLike[str], mode: str, newline: str | None) -> Iterator[IO[Any]]:
    target, direct = output_target(path)
    name = str(path)
    encoding = None if "b" in mode else "utf-8"
    if direct:
        try:
            f = open(target, mode.replace("x", "a"), encoding=encoding, newline=newline)  # noqa: SIM115
        except OSError as e:
            raise InputError(f"cannot be written: {e.strerror}", file=name) from None
        with f:
            yield f
        return
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        try:
            f = open(tmp, mode, encoding=encoding, newline=newline)  # noqa: SIM115
        except OSError as e:
            raise InputError(f"cannot be written in {target.parent}: {e.strerror}", file=name) from None
        with f:
            yield f
        with suppress(FileNotFoundError):  # the old file's permission bits, when there is one
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_output(path: str | os.PathLike[str], *, newline: str | None = "\n") -> Iterator[TextIO]:
    """A text file (UTF-8) to write to ``path``, as the module says: a regular file replaced atomically, a
    link's target written, a FIFO or device written directly, a folder or missing parent refused."""
    with _output(path, "x", newline) as f:
        yield cast(TextIO, f)


@contextmanager
def atomic_output_bytes(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """:func:`atomic_output` for bytes (a Parquet file)."""
    with _output(path, "xb", None) as f:
        yield cast(BinaryIO, f)


def write_output(path: str | os.PathLike[str], text: str, *, newline: str | None = "\n") -> None:
    """``text`` to the output ``path`` (:func:`atomic_output`)."""
    with atomic_output(path, newline=newline) as f:
        f.write(text)


def output_folder(path: str | os.PathLike[str], *, make: bool = True) -> Path:
    """The folder ``path`` to write files into, made when it does not exist (unless not ``make``: only checked);
    an InputError when it is something else (a file, a FIFO)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError("is not a folder; give a folder to write into", file=str(p))
    if not make:
        return p
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot be made: {e.strerror}", file=str(p)) from None
    return p
