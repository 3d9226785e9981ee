"""An answer's readings: what the readers say of it, each cheap, stored with its grade, the grade model's input.

Every text is normalised once (:func:`knockout.grading._normalise.normalise`) before any reader reads it.  The
readings (shares of max points and similarities, so that they mean the same on every question):

=====================  ==============================================================  ===========================
reading                what it is                                                      needs
=====================  ==============================================================  ===========================
``judge``              the judge's grade as a share of max points (the expected grade   the judge's valid reply
                       where its verdict slot gave token probabilities)
``judge_sd``           the spread (SD) of the judge's distribution over the grades,     a slot's probabilities
                       as a share of max points
``similarity``         the answer's meaning against the reference, both with the        the encoder's language
                       question's words taken out (question demoting)                   and a reference
``similarity_plain``   the same without demoting                                        "
``question_similarity``  the answer's meaning against the question's                    the encoder's language
``nothing_beyond``     1 when the answer has no content word beyond the question's      always
``length_ratio``       log of the answer's content words over the reference's           a reference
``reference_share``    the share of the answer's content words that stand in the        a reference
                       reference
``guard``              the persuasion guard's score of its most addressed part          always
=====================  ==============================================================  ===========================

An answer longer than the encoder's window is read in windows (each at most the window, split between words) and
its embedding is the token-weighted mean of theirs: a long answer is read whole, never skipped.  Where a reading
does not apply it is ``None`` and the reason is kept: the grade model is defined for every pattern of missing
readings (:mod:`knockout.grading._model`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from knockout.grading._normalise import normalise

#: every reading the grade model may read, in its order
READINGS = ("judge", "judge_sd", "similarity", "similarity_plain", "question_similarity", "nothing_beyond",
            "length_ratio", "reference_share", "guard")
#: the readings that need the sentence encoder in the answer's language, and those that need a reference
ENCODER_READINGS = ("similarity", "similarity_plain", "question_similarity")
REFERENCE_READINGS = ("similarity", "similarity_plain", "length_ratio", "reference_share")

_WORD = re.compile(r"\w+")


def _stop_words(language: str) -> frozenset[str]:
    if language.split("-")[0].lower() == "en":
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        return frozenset(ENGLISH_STOP_WORDS)
    return frozenset()


def content_words(text: str, language: str) -> list[str]:
    """The text's word tokens, case-folded, without the language's stop words (English: scikit-learn's list)."""
    stop = _stop_words(language)
    return [w for w in (m.casefold() for m in _WORD.findall(text)) if w not in stop]


def demote(text: str, question: str) -> str:
    """``text`` without the words of ``question`` (case-folded word tokens), whitespace tidied (question demoting,
    Mohler, Bunescu and Mihalcea 2011)."""
    words = {w.casefold() for w in _WORD.findall(question)}
    out = _WORD.sub(lambda m: "" if m.group(0).casefold() in words else m.group(0), text)
    return re.sub(r"\s+", " ", out).strip()


@dataclass
class Readings:
    """One answer's readings (``None`` where a reading does not apply) and why the meaning reader is off."""

    values: dict[str, float | None] = field(default_factory=dict)
    why_not: str | None = None

    def get(self, name: str) -> float | None:
        return self.values.get(name)

    def record(self) -> dict[str, float | None]:
        return {k: (None if self.values.get(k) is None else round(float(self.values[k] or 0.0), 6))
                for k in READINGS}


#: ``encode(texts) -> unit vectors`` (rows), the encoder's token counts, and its window in tokens
Encode = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class EncoderUse:
    """How the readings reach the encoder: its name, languages and window, and the function that encodes."""

    name: str
    languages: tuple[str, ...]
    window: int
    encode: Encode
    token_counts: Callable[[list[str]], list[int]]


def windows(text: str, counts: Callable[[list[str]], list[int]], window: int) -> list[str]:
    """``text`` split between words, in order, into pieces of at most ``window`` tokens (one piece when it fits)."""
    words = text.split()
    total = counts([text])[0]
    k = max(1, math.ceil(total / (0.9 * window)))
    while True:
        k = min(k, len(words)) if words else 1
        size = math.ceil(len(words) / k) if words else 1
        pieces = [" ".join(words[s:s + size]) for s in range(0, len(words), size)] or [text]
        if k >= len(words) or all(n <= window for n in counts(pieces)):
            return pieces
        k += max(1, k // 4)


def embed(texts: Sequence[str], enc: EncoderUse) -> np.ndarray:
    """Unit vectors of ``texts``; a text longer than the window is read in windows (token-weighted mean)."""
    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    counts = enc.token_counts(list(texts))
    flat: list[str] = []
    spans: list[tuple[int, int]] = []
    for t, n in zip(texts, counts, strict=True):
        parts = [t] if n <= enc.window else windows(t, enc.token_counts, enc.window)
        spans.append((len(flat), len(flat) + len(parts)))
        flat += parts
    vecs = enc.encode(flat)
    if len(flat) == len(texts):
        return vecs
    weights = np.array(enc.token_counts(flat), dtype=np.float32)
    out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
    for i, (a, b) in enumerate(spans):
        v = (vecs[a:b] * weights[a:b, None]).sum(0)
        out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
    return out


def read_answers(texts: Sequence[str], questions: Sequence[str], references: Sequence[str | None],
                 languages: Sequence[str], encoder: EncoderUse | None,
                 guard: Sequence[float | None] | None = None) -> list[Readings]:
    """The readings of each answer beside its judge's (``judge``/``judge_sd`` are added by the caller): the
    meaning readings where ``encoder`` reads the language, the lexical ones always, ``guard`` as given.  Texts are
    normalised here; one batched encoder pass over the answers, the distinct references and the distinct
    questions."""
    n = len(texts)
    texts = [normalise(t) for t in texts]
    questions = [normalise(q) for q in questions]
    refs = [normalise(r) if r else None for r in references]
    out = [Readings() for _ in range(n)]
    for i in range(n):
        lang = languages[i]
        words = content_words(texts[i], lang)
        qwords = set(content_words(questions[i], lang))
        v = out[i].values
        v["nothing_beyond"] = 0.0 if any(w not in qwords for w in words) else 1.0
        v["guard"] = None if guard is None else guard[i]
        r = refs[i]
        if r:
            rwords = content_words(r, lang)
            v["length_ratio"] = math.log((1 + len(words)) / (1 + len(rwords)))
            rset = set(rwords)
            v["reference_share"] = (sum(w in rset for w in words) / len(words)) if words else 0.0
        else:
            out[i].why_not = "no reference"
    if encoder is None:
        for rd in out:
            rd.why_not = rd.why_not or "the sentence encoder is not installed"
        return out
    todo = [i for i in range(n) if languages[i].split("-")[0].lower() in encoder.languages]
    read = set(todo)
    for i in range(n):
        if i not in read:
            out[i].why_not = f"language '{languages[i]}': the encoder reads {', '.join(encoder.languages)}"
    if not todo:
        return out
    demoted = [demote(texts[i], questions[i]) for i in todo]
    has_word = [bool(_WORD.search(d)) for d in demoted]
    uniq: dict[str, int] = {}

    def slot(t: str) -> int:
        return uniq.setdefault(t, len(uniq))

    a_plain = [slot(texts[i]) for i in todo]
    a_dem = [slot(d) if h else -1 for d, h in zip(demoted, has_word, strict=True)]
    q_idx = [slot(questions[i]) for i in todo]
    r_plain = [slot(str(refs[i])) if refs[i] else -1 for i in todo]
    r_dem = [slot(demote(str(refs[i]), questions[i]) or str(refs[i])) if refs[i] else -1 for i in todo]
    vecs = embed(list(uniq), encoder)

    def cos(x: int, y: int) -> float:
        return round(float(np.clip(vecs[x] @ vecs[y], -1.0, 1.0)), 6)

    for k, i in enumerate(todo):
        v = out[i].values
        v["question_similarity"] = cos(a_plain[k], q_idx[k])
        if r_plain[k] >= 0:
            v["similarity_plain"] = cos(a_plain[k], r_plain[k])
            v["similarity"] = cos(a_dem[k], r_dem[k]) if a_dem[k] >= 0 else 0.0
    return out


def default_encoder(name: str | None = None) -> EncoderUse | None:
    """The packaged encoder (knockout.meaning) as the readings use it, or None where it is not installed."""
    from knockout.meaning._encoder import DEFAULT_ENCODER, ENCODERS, encoder_available, load_encoder

    name = name or DEFAULT_ENCODER
    if encoder_available(name) is not None:
        return None
    spec = ENCODERS[name]

    def encode(texts: list[str]) -> np.ndarray:
        return load_encoder(name).encode(texts)

    def counts(texts: list[str]) -> list[int]:
        return load_encoder(name).token_counts(texts)

    return EncoderUse(name, spec.languages, spec.max_tokens, encode, counts)


def read_all(texts: list[str], questions: list[str], references: list[str | None],
             languages: list[str]) -> list[Readings]:
    """Every reading but the judge's of each answer, with the packaged encoder and the guard (a module-level
    function of plain values: the engine runs it off the event loop, on a Ray worker with the Ray executor)."""
    from knockout.guard import detect

    guard = [float(detect(t)["p_address"]) for t in texts]  # type: ignore[arg-type]
    return read_answers(texts, questions, references, languages, default_encoder(), guard)
