"""Every artefact knockout loads from its cache is verified on every load (issue 60 item 1): the encoder's weights
(hashed on each load), the assembled GGUF of an embedded judge (through the digest record knockout wrote, hashed
again when the file's size, times or inode differ).  A file tampered with at the same size is repaired from the
package, or refused in one line, never read."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from knockout.errors import ConfigError


def _same_size_tamper(path: Path, *, zero: bool = False) -> None:
    """Flip bits in the middle of ``path`` (or zero it), keeping its size and its modification time."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    if zero:
        data = bytearray(len(data))
    else:
        for i in range(len(data) // 10, len(data), 997):  # past any header, through every tensor
            data[i] ^= 0x40
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


# -- the embedded GGUF ---------------------------------------------------------------------------------------


@pytest.fixture()
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, bytes]:
    """A registered embedded model of two part packages on sys.path (real files, as pip installs them)."""
    from knockout.judges import _models

    blob = b"GGUF" + bytes(range(256)) * 300
    parts = [blob[:30000], blob[30000:]]
    site = tmp_path / "site"
    for i, part in enumerate(parts, start=1):
        pkg = site / f"ko_test_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(part)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path / "cache"))
    model = _models.EmbeddedModel(name="tiny-test", title="tiny", extra="embedded", packages=("ko_test_part1",
                                  "ko_test_part2"), sha256=hashlib.sha256(blob).hexdigest(), size=len(blob))
    monkeypatch.setitem(_models.MODELS, model.name, model)
    return model.name, blob


@pytest.mark.parametrize("zero", [False, True])
def test_a_cached_gguf_tampered_at_the_same_size_is_assembled_again(tiny_model: tuple[str, bytes],
                                                                   zero: bool) -> None:
    from knockout.judges._models import model_path

    name, blob = tiny_model
    path = model_path(name)
    assert path.read_bytes() == blob
    _same_size_tamper(path, zero=zero)
    again = model_path(name)
    assert again == path and again.read_bytes() == blob  # repaired from the packages, not read as it was


def test_an_untouched_cached_gguf_is_not_hashed_again(tiny_model: tuple[str, bytes],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from knockout.judges import _models

    name, _ = tiny_model
    path = _models.model_path(name)

    def no_hash(p: Path) -> str:
        raise AssertionError("hashed again")

    monkeypatch.setattr(_models, "_sha256", no_hash)
    assert _models.model_path(name) == path  # the record knockout wrote vouches for it


def test_a_tampered_gguf_without_its_packages_is_refused_in_one_line(tiny_model: tuple[str, bytes],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from knockout.judges import _models

    name, _ = tiny_model
    path = _models.model_path(name)
    _same_size_tamper(path)
    monkeypatch.setitem(_models.MODELS, name, _models.MODELS[name].__class__(
        **{**_models.MODELS[name].__dict__, "packages": ("ko_no_such_part_package",)}))
    with pytest.raises(ConfigError) as e:
        _models.model_path(name)
    assert "\n" not in str(e.value) and "ko-no-such-part-package" in str(e.value)


def test_the_digest_record_is_not_fooled_by_an_edit_that_puts_the_mtime_back(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from knockout.judges._models import file_sha256

    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF" + b"\1" * 5000)
    first = file_sha256(f)
    _same_size_tamper(f)
    assert file_sha256(f) == hashlib.sha256(f.read_bytes()).hexdigest() != first


# -- the encoder's weights -----------------------------------------------------------------------------------


def _fake_encoder(tmp_path: Path, weights: bytes) -> tuple[object, Path]:
    from knockout.meaning._encoder import PackagedEncoder

    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.safetensors", weights)
        zf.writestr("tokenizer.json", "{}")
    spec = PackagedEncoder(name="fake", title="fake", distribution="fake", package="fake", archive="model.zip",
                           weights="model.safetensors", tokenizer="tokenizer.json",
                           sha256=hashlib.sha256(weights).hexdigest(),
                           tokenizer_sha256=hashlib.sha256(b"{}").hexdigest(), layers=1, heads=1, max_tokens=8,
                           languages=("en",))
    return spec, archive


@pytest.mark.parametrize("zero", [False, True])
def test_cached_encoder_weights_tampered_at_the_same_size_are_never_read(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        zero: bool) -> None:
    from knockout.meaning import _encoder

    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path / "cache"))
    weights = os.urandom(300_000)
    spec, archive = _fake_encoder(tmp_path, weights)
    assert _encoder._weights(spec, archive) == weights  # type: ignore[arg-type]
    cached = next((tmp_path / "cache" / "encoders").glob("fake-*.safetensors"))
    _same_size_tamper(cached, zero=zero)
    assert _encoder._weights(spec, archive) == weights  # type: ignore[arg-type]
    assert cached.read_bytes() == weights  # repaired from the package's zip


def test_tampered_encoder_weights_without_a_good_package_are_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from knockout.meaning import _encoder

    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path / "cache"))
    weights = os.urandom(100_000)
    spec, archive = _fake_encoder(tmp_path, weights)
    _encoder._weights(spec, archive)  # type: ignore[arg-type]
    _same_size_tamper(next((tmp_path / "cache" / "encoders").glob("fake-*.safetensors")))
    with zipfile.ZipFile(archive, "w") as zf:  # the package's copy damaged too
        zf.writestr("model.safetensors", weights[:-1] + b"\0")
    with pytest.raises(ConfigError) as e:
        _encoder._weights(spec, archive)  # type: ignore[arg-type]
    assert "\n" not in str(e.value) and "SHA-256" in str(e.value)


def test_the_real_encoder_reads_the_pinned_weights_after_its_cache_is_tampered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The meaning readings match the pinned model's after a same-size tamper of the cached weights (before: the
    file was reused when its size matched, and 8 of 9 readings changed)."""
    from knockout.meaning import ENCODERS, encoder_available
    from knockout.meaning._encoder import DEFAULT_ENCODER, Encoder

    if encoder_available() is not None:
        pytest.skip(str(encoder_available()))
    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path / "cache"))
    spec = ENCODERS[DEFAULT_ENCODER]
    texts = ["A stack is last in, first out.", "A queue serves the oldest element first.", "Photosynthesis."]
    before = Encoder(spec).encode(texts)
    cached = next((tmp_path / "cache" / "encoders").glob("*.safetensors"))
    _same_size_tamper(cached)
    after = Encoder(spec).encode(texts)
    assert (after == before).all()
