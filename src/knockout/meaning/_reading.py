"""The meaning reader: how close an answer's meaning is to its question's reference, beyond what the question says.

Each answer is read as the cosine between its sentence embedding and the reference's, both with the question's
words taken out first (*question demoting*, Mohler, Bunescu and Mihalcea 2011; Sultan, Salazar and Sumner 2016):
an answer earns nothing for repeating the question, and the reference is compared on what it adds to it.  On the
Mohler dev set this lifts the encoder's Pearson with the graders from 0.462 to 0.540 (docs/methods.md#two-readers).
An answer with nothing left once the question's words are out reads as :data:`NOTHING_BEYOND`.

Where the reader does not apply it says why, and the grade is the judge's alone: no reference shown, a language
the encoder was not trained for, an answer longer than its window, a criteria rubric (the grade is a sum of
per-criterion verdicts).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from knockout.meaning._encoder import DEFAULT_ENCODER, ENCODERS, Encoder, load_encoder

#: the similarity of an answer that says nothing beyond its question's words
NOTHING_BEYOND = 0.0
_WORD = re.compile(r"\w+")


def demote(text: str, question: str) -> str:
    """``text`` without the words of ``question`` (case-folded word tokens), whitespace tidied."""
    words = {w.casefold() for w in _WORD.findall(question)}
    out = _WORD.sub(lambda m: "" if m.group(0).casefold() in words else m.group(0), text)
    return re.sub(r"\s+", " ", out).strip()


@dataclass(frozen=True)
class Reading:
    """One answer's reading: its similarity to the reference (demoted), or why the reader does not apply."""

    similarity: float | None
    why_not: str | None = None


def read_meaning(texts: Sequence[str], questions: Sequence[str], references: Sequence[str | None],
                 languages: Sequence[str], encoder: str = DEFAULT_ENCODER) -> list[Reading]:
    """Each answer's :class:`Reading` (one batched encoder pass over the answers and the distinct references); the
    encoder is loaded only when some answer is in one of its languages and has a reference."""
    spec = ENCODERS[encoder]
    out: list[Reading | None] = [None] * len(texts)
    todo: list[int] = []
    for i, (ref, lang) in enumerate(zip(references, languages, strict=True)):
        if not ref:
            out[i] = Reading(None, "no reference")
        elif lang.split("-")[0].lower() not in spec.languages:
            out[i] = Reading(None, f"language '{lang}': the encoder reads {', '.join(spec.languages)}")
        else:
            todo.append(i)
    if todo:
        enc = load_encoder(encoder)
        counts = enc.token_counts([texts[i] for i in todo])
        long = {i for i, n in zip(todo, counts, strict=True) if n > spec.max_tokens}
        for i in long:
            out[i] = Reading(None, f"the answer is longer than the encoder's window ({spec.max_tokens} tokens)")
        todo = [i for i in todo if i not in long]
        _read(enc, todo, texts, questions, references, out)
    return [o if o is not None else Reading(None, "not read") for o in out]


def _read(enc: Encoder, todo: list[int], texts: Sequence[str], questions: Sequence[str],
          references: Sequence[str | None], out: list[Reading | None]) -> None:
    """The similarities of the answers ``todo`` to their references (demoted), written into ``out``."""
    answers = [a if _WORD.search(a := demote(texts[i], questions[i])) else "" for i in todo]  # no word: nothing
    refs: dict[tuple[str, str], int] = {}
    for i in todo:
        refs.setdefault((str(references[i]), questions[i]), len(refs))
    ref_texts = [demote(r, q) or r for r, q in refs]  # a reference that only repeats the question: read whole
    vecs = enc.encode([a for a in answers if a] + ref_texts)
    n_answers = sum(bool(a) for a in answers)
    avec, rvec = vecs[:n_answers], vecs[n_answers:]
    k = 0
    for i, a in zip(todo, answers, strict=True):
        if not a:
            out[i] = Reading(NOTHING_BEYOND)
            continue
        r = rvec[refs[(str(references[i]), questions[i])]]
        out[i] = Reading(round(float(np.clip(avec[k] @ r, -1.0, 1.0)), 6))
        k += 1
