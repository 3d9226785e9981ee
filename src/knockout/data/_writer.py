"""Writer for the project's JSONL format (the inverse of the ``jsonl`` loader)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from knockout.data._io import atomic_output, is_local
from knockout.data._records import ItemSet


def _compact(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None and v != [] and v != {}}


def write_jsonl(items: ItemSet, path: str | os.PathLike[str]) -> None:
    """Write questions, then answers, one JSON object per line, atomically (temp file + rename).

    Fields that are None or empty are left out; image paths inside the target folder are written
    relative to it (the loader resolves them against the file's folder again).
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = out.parent.resolve()
    lines = []
    for q in items.questions.values():
        d = q.model_dump()
        d["images"] = [
            os.path.relpath(im, folder)
            if is_local(im) and Path(im).is_absolute() and Path(im).is_relative_to(folder)
            else im
            for im in q.images
        ]
        lines.append({"type": "question", **_compact(d)})
    lines += [{"type": "answer", **_compact(a.model_dump())} for a in items.answers]
    with atomic_output(out) as f:
        for obj in lines:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
