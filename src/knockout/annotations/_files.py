"""Question figures copied into the store's own folder at import time, content-addressed.

The web app never opens a path named by the data: :meth:`ImageFiles.record` (called when an exam is
imported) copies each local figure that resolves inside the data folder and is an image (PNG, JPEG, GIF or
WebP, told by its first bytes) into ``<store>.files/<sha256>`` and records it in ``web_images`` under
(item-set fingerprint, question id, index).  :meth:`ImageFiles.find` returns only such a recorded copy.
Anything else (``/etc/passwd``, ``../../x``, a URL, a missing or non-image file) is counted as skipped and
never served.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from knockout.data._records import Question
from knockout.storage._store import Store

#: Magic bytes -> media type of the image formats served.
SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
#: The largest figure copied (bytes).
MAX_IMAGE_BYTES = 20 * 2**20


def media_type(head: bytes) -> str | None:
    """The media type of an image from its first bytes; None when it is none of the served formats."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((t for sig, t in SIGNATURES if head.startswith(sig)), None)


def files_dir(store: Store) -> Path:
    """The folder next to the store that holds the copies: ``grades.db`` -> ``grades.db.files``."""
    return store.path.with_name(store.path.name + ".files")


@dataclass
class ImportedImages:
    copied: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


class ImageFiles:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.tables = store.annotations

    def record(self, fingerprint: str, questions: list[Question], root: Path | None) -> ImportedImages:
        """Copy the figures of ``questions`` that lie inside ``root`` (the data folder) into the store's
        folder and record them; the rest is counted by reason in the result's ``skipped``."""
        result = ImportedImages()
        base = root.resolve() if root is not None else None
        for q in questions:
            for i, ref in enumerate(q.images):
                why = self._copy(fingerprint, q.id, i, ref, base)
                if why is None:
                    result.copied += 1
                else:
                    result.skip(why)
        return result

    def _copy(self, fingerprint: str, question_id: str, index: int, ref: str, base: Path | None) -> str | None:
        if "://" in ref or ref.startswith("data:"):
            return "not a local file"
        if base is None or str(self.store.path) == ":memory:":
            return "no data folder"
        path = (base / ref).resolve()  # symbolic links followed: a link out of the folder is outside
        if not path.is_relative_to(base):
            return "outside the data folder"
        if not path.is_file():  # also keeps FIFOs and devices out (reading them could hang)
            return "not a file"
        try:
            with path.open("rb") as f:
                data = f.read(MAX_IMAGE_BYTES + 1)
        except OSError:
            return "not readable"
        kind = media_type(data[:16])
        if kind is None:
            return "not an image"
        if len(data) > MAX_IMAGE_BYTES:
            return "too large"
        digest = hashlib.sha256(data).hexdigest()
        folder = files_dir(self.store)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / digest
        if not target.is_file():
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        self.tables.put_image(fingerprint, question_id, index, digest, kind, ref, time.time())
        return None

    def find(self, fingerprint: str, question_id: str, index: int) -> tuple[Path, str] | None:
        """The stored copy of figure ``index`` of a question and its media type, if one was recorded."""
        found = self.tables.image(fingerprint, question_id, index)
        if found is None:
            return None
        path = files_dir(self.store) / found[0]
        return (path, found[1]) if path.is_file() else None

    def recorded(self, fingerprint: str, question_id: str) -> set[int]:
        """The indices of the figures of a question that have a stored copy."""
        return self.tables.image_indices(fingerprint, question_id)
