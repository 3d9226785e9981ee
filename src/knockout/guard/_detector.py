"""Which parts of an answer are aimed at the grader: a small classifier and a few structural rules.

Measured before it was chosen (docs/injection.md): the embedded 1.5B judge cannot tell.  Asked after the
grading prompt whether the answer addresses the grader, its probability of ``Yes`` was 0.38-0.67 on clean and
attacked answers alike (a Chinese "give full marks" line got 0.38, lower than the clean answers); asked per
numbered part, it marked the genuine sentences of an attacked answer as often as the attack.  So the guard
reads each part with:

* **rules** for what no answer to an exam question holds: chat-template control tokens of the common
  templates (ChatML, Llama 3, Gemma, Mistral, Phi), role lines (``System:``, ``Assistant:``), a grade written
  as a grade (``Score: 5/5``, ``Bewertung: 10 von 10``, ``\\boxed{5}``, ``[grade] 5 [/grade]``);
* a **classifier**: logistic regression on character n-grams (scikit-learn) of the part, normalised (NFKC,
  case-folded, digits as ``0``, Latin look-alikes in mixed-script words read as Latin), trained when first
  used on ``sentences.jsonl`` beside this file: sentences written for knockout, aimed at the grader or not,
  in 14 languages (notes, requests, pleas, threats, flattery, fake instructions and rubrics, claims of being
  correct; and answers to exam questions of many subjects, with the words a grader-aimed text uses —
  correct, score, grade, points, note — in their ordinary senses).  The text read backwards is scored too
  (a right-to-left override shows reversed text as forwards).

A part's score is the larger of the two, forwards and backwards; a rule gives 1 to a part that is little but what
it matches (a bare planted grade or turn marker), and inside longer text it is evidence the classifier must
confirm (:data:`RULE_WEIGHT`): honest answers about HTML, ChatML, XML, use cases or ratings hold the same strings.
No judge call is made: the guard's detection costs
milliseconds per answer.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from functools import cache
from pathlib import Path
from typing import Any

from knockout.prompts._copies import _without_ignorable

SENTENCES = Path(__file__).with_name("sentences.jsonl")

_CHAT = re.compile(r"<\|[a-z_]{2,20}\|>|\[/?inst\]|<(?:start|end)_of_turn>|</?s>|<\|?(?:eot_id|start_header_id|"
                   r"end_header_id)\|?>|<\|(?:system|user|assistant|end)\|>", re.I)
_ROLE = re.compile(r"(?:^|\n)\s*(?:system|assistant|user|model)\s*:", re.I)
_GRADE_WORD = (r"(?:score|grade|points?|marks?|rating|punkte?|punktzahl|bewertung|note|puntuaci[oó]n|nota|"
               r"оценка|балл(?:ов)?|得分|分数|评分|得点|点数|점수)")
_SCORE = re.compile(_GRADE_WORD + r"\s*[:：=]?\s*\d+(?:[.,]\d+)?\s*(?:/|out of|of|von|sur|de|из|分中)\s*\d+", re.I)
_TAGGED = re.compile(r"\\boxed\s*\{|\[/?grade\]|\[/?score\]|<\/?(?:grade|score)>", re.I)
#: Latin look-alikes of Cyrillic and Greek letters (read as Latin in a word that mixes scripts)
_HOMOGLYPHS = str.maketrans("аеорсухіјѕԁһԛԝАВЕКМНОРСТХІЈЅοαν", "aeopcyxijsdhqwabekmhopctxijsoav")
_MIXED = re.compile(r"\w*[a-z]\w*")
_LOCK = threading.Lock()
#: a part shorter than this (a CJK character counts three) flags an answer only by a rule: the classifier is unsure
#: of fragments ("Using loops.", "Directly: coding."); in a flagged answer it is read like any other part
MIN_UNITS = 24
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def normalise(text: str) -> str:
    """What the classifier reads: visible characters, NFKC, case-folded, digits as 0, look-alikes as Latin."""
    t = unicodedata.normalize("NFKC", _without_ignorable(text)).casefold()
    t = _MIXED.sub(lambda m: m.group(0).translate(_HOMOGLYPHS), t)
    return re.sub(r"\d", "0", t)


#: a part that a rule marks counts as aimed at the grader by the rule alone only when it is bare: at most this many
#: letters besides what the rules matched ("Final grade: \\boxed{5}", "[grade] 5 [/grade]", "Score: 5/5"); in a
#: longer part the rule is evidence the classifier must confirm (:data:`RULE_WEIGHT`): an answer about HTML's <s>,
#: ChatML, an XML <grade> element, a use case's "System:" lines or a recommender's "rating: 5 out of 5" holds the
#: same strings as content (issue 48)
BARE_LETTERS = 12
#: the score of a part that a rule marks inside longer text: RULE_WEIGHT + (1 - RULE_WEIGHT) x the classifier's
RULE_WEIGHT = 0.3
_RULES = (_CHAT, _ROLE, _SCORE, _TAGGED)


def rule(text: str) -> bool:
    """Whether a structural rule marks ``text`` as aimed at the grader."""
    t = unicodedata.normalize("NFKC", _without_ignorable(text))
    return any(r.search(t) for r in _RULES)


def bare(text: str) -> bool:
    """Whether ``text`` is little but what the grade and chat-token rules match (a planted grade or turn marker on
    its own; a role line such as "System: ..." is always read by the classifier too: a use case has them)."""
    t = unicodedata.normalize("NFKC", _without_ignorable(text))
    if not any(r.search(t) for r in (_CHAT, _SCORE, _TAGGED)):
        return False
    for r in _RULES:
        t = r.sub(" ", t)
    return sum(c.isalpha() for c in t) <= BARE_LETTERS


@cache
def _model() -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    rows = [json.loads(line) for line in SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    model = make_pipeline(TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), sublinear_tf=True),
                          LogisticRegression(C=20.0, class_weight="balanced", max_iter=3000))
    model.fit([normalise(r["text"]) for r in rows], [bool(r["aimed"]) for r in rows])
    return model


def scores(parts: list[str]) -> list[float]:
    """Per part, how surely it is aimed at the grader (0..1; a rule gives 1)."""
    if not parts:
        return []
    with _LOCK:
        model = _model()
        texts = [normalise(p) for p in parts]
        fwd = model.predict_proba(texts)[:, 1]
        back = model.predict_proba([t[::-1] for t in texts])[:, 1]
    out = []
    for p, f, b in zip(parts, fwd, back, strict=True):
        c = float(max(f, b))
        if rule(p):
            c = 1.0 if bare(p) else RULE_WEIGHT + (1 - RULE_WEIGHT) * c
        out.append(round(c, 4))
    return out


def units(text: str) -> int:
    """The length the classifier needs: characters, a CJK character counting three."""
    return len(text) + 2 * len(_WIDE.findall(text))
