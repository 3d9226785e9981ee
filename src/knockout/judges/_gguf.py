"""A GGUF file's fixed header, read before llama.cpp opens the file (``gguf=`` of the OpenAI backend with
``server=llama-cpp-python``, the embedded judge's ``llamacpp:PATH.gguf``).

llama.cpp reads whatever it is given as the user running knockout, and a file that is not a GGUF (garbage, an
empty file, a header with absurd counts, a link to a system file) ends in a long traceback from llama-cpp-python,
or in llama.cpp allocating what the counts ask for.  The header is 24 bytes, little-endian (the GGUF
specification, ggml/docs/gguf.md): the magic ``GGUF``, the version (``uint32``; llama.cpp reads 2 and 3, version 1
had 32-bit counts and is refused by it), the number of tensors and of metadata key-value pairs (``uint64`` each).
Those are read here with :mod:`struct` rather than with the ``gguf`` package: 24 bytes read, nothing else opened,
no dependency (``gguf`` is not one of knockout's, and its reader memory-maps and parses the whole file, the very
step that should not run on a file that is not a GGUF).  Each key-value pair takes at least 13 bytes (key length,
one character, type, one byte of value) and each tensor's description at least 24 (name length, one character,
dimension count, type, offset), so counts the file is too short to hold are refused too.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

from knockout.errors import InputError

MAGIC = b"GGUF"
#: the versions llama.cpp reads
VERSIONS = (2, 3)
HEADER = struct.Struct("<4sIQQ")
#: at most this many tensors and metadata pairs (the largest published models hold a few thousand tensors)
MAX_TENSORS = 1 << 20
MAX_KV = 1 << 20
_MIN_KV_BYTES = 13
_MIN_TENSOR_BYTES = 24


def check_gguf(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` when it is a regular file that starts with a GGUF header llama.cpp reads and whose counts fit its
    size; else an :class:`~knockout.errors.InputError` naming the file and ``what`` (the option it came from).
    Nothing of the file's content is quoted back (it may be any file the user can read)."""
    p = Path(path).expanduser()
    name = str(path)

    def refuse(why: str) -> InputError:
        return InputError(f"{what}: {why}", file=name)

    try:
        st = os.stat(p)
    except OSError as e:
        raise refuse(f"cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise refuse("is not a regular file, so not a GGUF model")
    try:
        with open(p, "rb") as f:
            head = f.read(HEADER.size)
    except OSError as e:
        raise refuse(f"cannot be read ({e.strerror})") from None
    if len(head) < HEADER.size:
        raise refuse(f"is not a GGUF file ({len(head)} bytes, shorter than a GGUF header)")
    magic, version, n_tensors, n_kv = HEADER.unpack(head)
    if magic != MAGIC:
        raise refuse("is not a GGUF file (it does not start with the magic 'GGUF')")
    if version not in VERSIONS:
        raise refuse(f"is a GGUF of version {version}, which llama.cpp does not read (versions 2 and 3)")
    if n_tensors > MAX_TENSORS or n_kv > MAX_KV:
        raise refuse(f"is not a readable GGUF: its header counts {n_tensors} tensors and {n_kv} metadata pairs "
                     f"(at most {MAX_TENSORS} each)")
    if HEADER.size + n_kv * _MIN_KV_BYTES + n_tensors * _MIN_TENSOR_BYTES > st.st_size:
        raise refuse(f"is not a readable GGUF: its header counts {n_tensors} tensors and {n_kv} metadata pairs, "
                     f"more than its {st.st_size} bytes can hold (a truncated or damaged file)")
    return p
