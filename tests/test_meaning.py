"""The second reader's sentence encoder (knockout.meaning): the packaged all-MiniLM-L6-v2 run with numpy."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from knockout.errors import ConfigError
from knockout.meaning import ENCODERS, encoder_available, load_encoder
from knockout.meaning._encoder import Encoder, PackagedEncoder

pytestmark = pytest.mark.skipif(encoder_available() is not None, reason=str(encoder_available()))


def test_the_models_published_similarities() -> None:
    """sentence-transformers' README (Quickstart, v3) prints these for all-MiniLM-L6-v2:
    tensor([[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]])."""
    e = load_encoder()
    v = e.encode(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(v @ v.T, [[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]],
                               atol=6e-5)


def test_a_batch_is_read_as_each_text_alone() -> None:
    """Padding and length-sorted batches change nothing: each text's embedding is the one it has alone."""
    e = load_encoder()
    texts = ["A stack is last in, first out.", "x", "A queue is first in first out; a stack is last in first "
             "out, so the element added last is removed first.", ""]
    together = e.encode(texts, batch=3)
    alone = np.stack([e.encode([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-5)


def test_the_window() -> None:
    e = load_encoder()
    window = ENCODERS["all-minilm-l6-v2"].max_tokens
    assert e.token_count("short answer") == 4 <= window  # [CLS] short answer [SEP]
    long = "word " * 400
    assert e.token_count(long) > window and e.token_counts(["short answer", long]) == [4, e.token_count(long)]
    assert e.encode([long]).shape == (1, 384)  # read up to the window


def test_weights_that_are_not_the_pinned_ones_are_refused(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path / "cache"))  # no verified copy to fall back on
    spec = ENCODERS["all-minilm-l6-v2"]
    bad = tmp_path / "model.zip"
    with zipfile.ZipFile(spec.archive_path()) as src, zipfile.ZipFile(bad, "w") as dst:
        dst.writestr(spec.tokenizer, src.read(spec.tokenizer))
        dst.writestr(spec.weights, b"not the weights")

    class Moved(PackagedEncoder):
        def archive_path(self):  # type: ignore[no-untyped-def]
            return bad

    moved = Moved(**{f: getattr(spec, f) for f in spec.__dataclass_fields__})
    with pytest.raises(ConfigError, match="SHA-256"):
        Encoder(moved)


def test_a_missing_package_is_one_clear_line() -> None:
    spec = ENCODERS["all-minilm-l6-v2"]
    gone = PackagedEncoder(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__},
                              "package": "no_such_encoder_package_x"})
    with pytest.raises(ConfigError, match=r"requirements-encoder\.txt"):
        gone.archive_path()


def test_encode_texts_is_the_encoders_reading_computed_off_the_loop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 59: ``Engine.compute(encode_texts, encoder, texts)`` gives the encoder's own rows (unit float32),
    computed in a compute thread with one BLAS thread."""
    import asyncio

    import numpy as np

    from knockout.engine import Engine
    from knockout.judges import make_judge
    from knockout.meaning._encoder import DEFAULT_ENCODER, encode_texts, load_encoder
    from knockout.storage import Store

    texts = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium.", ""]

    async def main() -> np.ndarray:
        with Store(tmp_path / "s.db") as store:
            return await Engine(make_judge("scripted"), store).compute(encode_texts, DEFAULT_ENCODER, texts)

    rows = asyncio.run(main())
    assert rows.dtype == np.float32 and rows.shape == (4, 384)
    assert np.allclose(np.linalg.norm(rows[:3], axis=1), 1.0, atol=1e-5)
    assert np.allclose(rows, load_encoder().encode(texts), atol=1e-6)
