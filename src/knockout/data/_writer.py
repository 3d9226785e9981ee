"""Writer for the project's JSONL format (the inverse of the ``jsonl`` loader)."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from knockout.data._io import is_local
from knockout.data._output import atomic_output
from knockout.data._records import ItemSet


def _compact(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None and v != [] and v != {}}


#: the folder beside a written JSONL that holds copies of figures from outside its folder
FIGURES = "figures"


def _figure_path(image: str, folder: Path) -> str:
    """An image path as the JSONL in ``folder`` writes it: relative to the folder.  A local file outside the
    folder is copied into ``figures/`` beside the JSONL first (named by a hash of its content and its file
    name, so the same figure is copied once), because the loader reads figures only inside the data folder."""
    if not is_local(image):
        return image
    p = Path(image)
    if not p.is_absolute():
        return image
    if p.resolve().is_relative_to(folder):
        return os.path.relpath(p.resolve(), folder)
    if not p.is_file():
        return image  # not there to copy: kept as it was (the loader will name it)
    digest = hashlib.sha256(p.read_bytes()).hexdigest()[:12]
    target = folder / FIGURES / f"{digest}-{p.name}"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        shutil.copyfile(p, tmp)
        os.replace(tmp, target)
    return os.path.relpath(target, folder)


def write_jsonl(items: ItemSet, path: str | os.PathLike[str]) -> None:
    """Write questions, then answers, one JSON object per line, atomically (temp file + rename).

    Fields that are None or empty are left out.  Figures keep relative paths: an image inside the target
    folder is written relative to it, one outside it is copied into ``figures/`` beside the file and written
    relative to it (the loader resolves them against the file's folder again), so the file can be graded
    where it lies and moved together with its folder.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = out.parent.resolve()
    lines = []
    for q in items.questions.values():
        d = q.model_dump()
        d["images"] = [_figure_path(im, folder) for im in q.images]
        lines.append({"type": "question", **_compact(d)})
    lines += [{"type": "answer", **_compact(a.model_dump())} for a in items.answers]
    with atomic_output(out) as f:
        for obj in lines:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
