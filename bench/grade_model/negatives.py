"""Non-answers made from the training questions (issue 58 item 4): the answers a grade model must learn are worth
nothing, generated deterministically (seeded) from a question, its reference and its exam's other questions.

Kinds (label: share of max points): the question copied (0), the question with small edits (0), the reference's
content words as a list (0.25: the partial credit a list of the right terms can defend), the reference's words
scrambled (0.1), the reference negated (0), one key term of the reference swapped for a wrong one (0.2), an answer
to another question of the same exam (0), filler padding (0), a bare ":" or "Thought process:" (0; Zhao et al.
2025's one-token attack on LLM judges).  Every third question (by its order in the data) is the **test part**:
its non-answers are never fitted on, only reported.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from knockout.grading._readings import content_words

KINDS = {"question": 0.0, "question_edit": 0.0, "keywords": 0.25, "scrambled": 0.1, "negated": 0.0,
         "swapped": 0.2, "other_question": 0.0, "filler": 0.0, "bare": 0.0}
FILLER = ("This is an important question and there are many aspects to consider here. In general it depends on the "
          "situation and on how one looks at it. Many people have different opinions about this topic, and all of "
          "them have some merit. It is good to think about it carefully.")
_AUX = re.compile(r"\b(is|are|was|were|can|will|does|do|has|have|should|must|would|could)\b", re.IGNORECASE)


@dataclass(frozen=True)
class NonAnswer:
    question_id: str
    kind: str
    text: str
    label: float  # share of max points
    test: bool


def negate(reference: str) -> str:
    """The reference negated: 'not' after its first auxiliary verb, else 'It is not true that ...'."""
    m = _AUX.search(reference)
    if m:
        return reference[:m.end()] + " not" + reference[m.end():]
    return "It is not true that " + reference[:1].lower() + reference[1:]


def make(questions: list[tuple[str, str, str | None, str | None]], seed: int = 0) -> list[NonAnswer]:
    """Non-answers for ``questions`` (id, text, reference, exam), every kind for every question with a reference."""
    rng = random.Random(seed)
    out: list[NonAnswer] = []
    refs = [r for _, _, r, _ in questions if r]
    for k, (qid, qtext, ref, exam) in enumerate(questions):
        if not ref:
            continue
        test = k % 3 == 2
        words = content_words(ref, "en")
        edit = re.sub(r"\?\s*$", "", qtext.strip())
        edit = (edit[:1].lower() + edit[1:]) if edit else edit
        scrambled = ref.split()
        rng.shuffle(scrambled)
        others = [r for (oid, _, r, oexam) in questions if r and oid != qid and oexam == exam] or \
                 [r for r in refs if r != ref]
        other_words = [w for r in others for w in content_words(r, "en") if w not in set(words) and len(w) > 3]
        swapped = ref
        keys = sorted({w for w in words if len(w) > 3}, key=lambda w: (-len(w), w))
        if keys and other_words:
            key = keys[rng.randrange(min(3, len(keys)))]
            swapped = re.sub(rf"\b{re.escape(key)}\b", rng.choice(other_words), ref, count=1, flags=re.IGNORECASE)
        texts = {
            "question": qtext,
            "question_edit": f"The answer to {edit} is that {edit}.",
            "keywords": ", ".join(dict.fromkeys(words)) or ref,
            "scrambled": " ".join(scrambled),
            "negated": negate(ref),
            "swapped": swapped,
            "other_question": rng.choice(others),
            "filler": FILLER,
            "bare": rng.choice([":", "Thought process:"]),
        }
        out += [NonAnswer(qid, kind, text, KINDS[kind], test) for kind, text in texts.items()]
    return out
