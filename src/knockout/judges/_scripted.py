"""The scripted judge: a SIMULATION for tests and benchmarks, not an LLM.

Nothing about the truth travels in the requests it is sent.  A run binds its
*oracle* to the judge (:meth:`ScriptedJudge.bind_simulation`): given the subject
of the request being sent (:data:`knockout.judges._base.current_subject`: the kind of
judgement and the ids of the answers or items in display order), the oracle
returns the facts the simulation needs (the human scores of those answers, the
quality of side-by-side responses or of meta-evaluated assessments).  The judge
replies in the format the real parsers accept.  Each answer's score is its normalised human score plus seeded Gaussian
noise, plus an optional bonus for the answer shown first (position bias) and an
optional inflation, clipped to the scale and rounded to half points.

Spec: ``scripted[:name][?noise=0.1&bias=0&inflation=0&invalid=0&delay=0&seed=0]``
(noise, bias and inflation are fractions of the maximum points; ``invalid`` is
the probability of an unparseable reply; ``delay`` seconds per call).
Solve requests (``kind = "solve"``, knockout solve) get the first part of the reference answer.
Side-by-side requests (``kind = "sbs"``) carry ``quality = [q1, q2]`` (0..1, the answers in display
order, None for unknown): each gets noise, the first gets the ``bias`` bonus, and the reply is
``[[A]]``/``[[B]]`` when they differ by more than :data:`SBS_TIE_MARGIN`, else ``[[C]]`` (mean >= 0.5)
or ``[[D]]``.  ``disagree_with = X`` (the second agent of a "hard" debate) turns a verdict equal to X
into its opposite (A<->B, C<->D).
The noise is a deterministic function of the seed and the request (its messages, and its generation seed
when that is not 0), so the same request always gets the same reply, as a cached LLM call would, and the
draws of ``--samples K`` (seeds ``seed + k``) each get their own noise: a simulated judge with known
draw-to-draw noise.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from pydantic import Field

from knockout.errors import ConfigError
from knockout.judges._base import Completion, Judge, JudgeRequest
from knockout.judges._options import JudgeOptions

SBS_TIE_MARGIN = 0.15
#: a reasoning-first slot's reasoning (a simulation that says it is one)
REASONED = "simulated reasoning (scripted judge)."
_OPPOSITE = {"A": "B", "B": "A", "C": "D", "D": "C"}


class ScriptedOptions(JudgeOptions):
    noise: float = Field(0.1, ge=0, le=100, description="Gaussian noise, a fraction of the maximum points")
    bias: float = Field(0.0, ge=-100, le=100, description="bonus for the answer shown first (position bias), "
                        "fraction of max")
    inflation: float = Field(0.0, ge=-100, le=100, description="added to every grade, fraction of max")
    invalid: float = Field(0.0, ge=0, le=1, description="probability of an unparseable reply")
    delay: float = Field(0.0, ge=0, le=3600, description="seconds per call")
    seed: int = Field(0, ge=-(2**63 - 1), le=2**63 - 1, description="seed of the noise")
    slot: bool = Field(False, description="fill verdict slots (a simulated distribution around its grade, or the "
                       "grade itself), as a backend with token probabilities does; off: free text only")


class ScriptedJudge(Judge):
    backend = "scripted"
    simulated = True
    Options = ScriptedOptions
    options: ScriptedOptions

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model or "sim", options)
        o = self.options
        self.noise, self.bias, self.inflation = o.noise, o.bias, o.inflation
        self.invalid, self.delay, self.seed = o.invalid, o.delay, o.seed
        if o.slot:
            self.slot_modes = ("expected", "constrained")

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model": self.model,
            "noise": self.noise,
            "bias": self.bias,
            "inflation": self.inflation,
            "invalid": self.invalid,
            "seed": self.seed,
            **({"slot": True} if self.options.slot else {}),
        }

    def default_concurrency(self) -> int:
        return 16

    def _rng(self, request: JudgeRequest) -> np.random.Generator:
        # the request's own seed counts when it is not the default 0 (a repeated draw, --samples, asks with
        # seed + draw): each draw gets its own noise, and a request with seed 0 the noise it always had
        drawn = [request.params.seed] if request.params.seed not in (0, None) else []
        payload = json.dumps(
            [self.seed, [(m.role, m.content) for m in request.messages], *drawn], ensure_ascii=False
        ).encode()
        return np.random.default_rng(int.from_bytes(hashlib.sha256(payload).digest()[:8], "big"))

    def score(self, human: float | None, max_points: float, position: int, rng: np.random.Generator) -> float:
        """Simulated score for one answer shown at ``position`` (0 = first)."""
        base = rng.uniform(0, 1) if human is None else human / max_points
        value = base + rng.normal(0, self.noise) + self.inflation + (self.bias if position == 0 else 0.0)
        return round(float(np.clip(value, 0.0, 1.0)) * max_points * 2) / 2

    def bind_simulation(self, oracle: Callable[[Any], dict[str, Any]]) -> None:
        self._oracle = oracle

    def facts(self) -> dict[str, Any]:
        """What the simulation knows about the request being sent, through the run's oracle."""
        from knockout.judges._base import current_subject

        subject = current_subject.get()
        oracle = getattr(self, "_oracle", None)
        if subject is None or oracle is None:
            raise ConfigError("the scripted judge (a simulation) answers only inside a knockout run, which tells "
                              "it the truth about each request's subject")
        facts: dict[str, Any] = oracle(subject)
        return facts

    def reply(self, request: JudgeRequest, rng: np.random.Generator) -> str:
        hint = self.facts()
        kind = hint.get("kind", "individual")
        if rng.uniform() < self.invalid:
            return "I am not sure how to grade this."
        other = {"sbs": self.sbs_reply, "meta": self.meta_reply, "solve": self.solve_reply}.get(kind)
        if other is not None:  # the subject of a side-by-side, meta-evaluation or solve run
            return other(hint, rng)
        max_points = float(hint.get("max_points", 1.0))
        humans: list[float | None] = list(hint.get("humans", [None]))
        scores = [self.score(h, max_points, i, rng) for i, h in enumerate(humans)]
        m = f"{max_points:g}"
        if kind == "individual":
            lines = [f"Criterion {i}: {x:g}/{p:g}" for i, (x, p) in
                     enumerate(split_points(scores[0], hint.get("criteria") or []), 1)]
            return "\n".join(["Explanation: simulated grade (scripted judge).", *lines, f"Score: {scores[0]:g}/{m}"])
        if kind == "pairwise":
            return (
                "Explanation: simulated grades (scripted judge).\n"
                f"Answer 1: {scores[0]:g}/{m}\nAnswer 2: {scores[1]:g}/{m}"
            )
        raise ConfigError(f"scripted judge cannot answer requests of kind '{kind}'")

    def sbs_reply(self, hint: dict[str, Any], rng: np.random.Generator) -> str:
        """A simulated side-by-side verdict in display order."""
        q = [rng.uniform(0, 1) if v is None else float(v) for v in hint.get("quality", [None, None])]
        first = q[0] + rng.normal(0, self.noise) + self.bias
        second = q[1] + rng.normal(0, self.noise)
        if abs(first - second) > SBS_TIE_MARGIN:
            verdict = "A" if first > second else "B"
        else:
            verdict = "C" if (first + second) / 2 >= 0.5 else "D"
        if hint.get("disagree_with") == verdict:
            verdict = _OPPOSITE[verdict]
        return f"Simulated side-by-side verdict (scripted judge).\n[[{verdict}]]"

    def solve_reply(self, hint: dict[str, Any], rng: np.random.Generator) -> str:
        """A simulated examinee (knockout solve): the first part of the reference answer, its length drawn at
        random (more noise, shorter on average)."""
        words = str(hint.get("reference") or "I do not know.").split()
        share = float(np.clip(rng.uniform(1.0 - 2 * self.noise - 0.3, 1.0), 0.1, 1.0))
        kept = " ".join(words[: max(1, round(share * len(words)))])
        return f"Simulated answer (scripted examinee, not an LLM): {kept}"

    def meta_reply(self, hint: dict[str, Any], rng: np.random.Generator) -> str:
        """A simulated meta-judge (knockout.meta): reads how right each assessment is (``quality``,
        0..1 from the human label) and prefers / scores the better one, with noise and position bias."""
        task = hint.get("task")
        q = [rng.uniform(0, 1) if x is None else float(x) for x in hint.get("quality", [])]
        noisy = [x + rng.normal(0, self.noise) + (self.bias if i == 0 else 0.0) for i, x in enumerate(q)]
        if task == "debate" and hint.get("round") == 0:
            return "<Question>Why is your choice of the better answer right? (simulated)</Question>"
        if task in ("better", "debate"):
            diff = noisy[0] - noisy[1]
            choice = "equally good" if abs(diff) < 0.1 else "Assistant1" if diff > 0 else "Assistant2"
            return (
                "<Reasoning_for_choosing_better_answer>simulated</Reasoning_for_choosing_better_answer>\n"
                "<Better_answer>AnswerA</Better_answer>\n"
                "<Reasoning_for_choosing_better_assistant>simulated</Reasoning_for_choosing_better_assistant>\n"
                f"<Better_assistant>{choice}</Better_assistant>"
            )
        authors = hint.get("format") == "authors"  # the BSMEval prompts of the authors' code
        if task == "score":
            score = int(np.clip(round(1 + 4 * noisy[0] + self.inflation * 4), 1, 5))
            if authors:
                return f"<Explanation>\nsimulated\n</Explanation>\n\n<Score>\n{score}\n</Score>"
            return (
                "<Reasoning_for_scoring_Assistant>simulated</Reasoning_for_scoring_Assistant>\n"
                f"<Score_for_Assistant>{score}</Score_for_Assistant>"
            )
        if task == "criteria" and authors:
            return ("<Evaluation Plan>\n1. Verdict: is the assessment's score right for the story?\n"
                    "2. Explanation: is the reasoning accurate?\n</Evaluation Plan>")
        if task == "criteria":
            return (
                "<Criterion>verdict: is the conclusion right?</Criterion>\n"
                "<Criterion>explanation: is the reasoning accurate?</Criterion>"
            )
        if task == "argue":
            return "My assessment is the more reasonable one (simulated argument, scripted judge)."
        raise ConfigError(f"scripted judge cannot answer meta requests of task '{task}'")

    def slot_reply(self, request: JudgeRequest, rng: np.random.Generator) -> Completion:
        """A slot request: each field's simulated grade, as a distribution (half the probability on it, the
        rest on its neighbours) or as the value written."""
        from knockout.judges._slot import constrained, distribution

        slot = request.slot
        assert slot is not None
        hint = self.facts()
        if hint.get("kind") == "meta":
            return self.meta_slot_reply(request, hint, rng)
        if slot.kind == "choice":  # a side-by-side verdict: the letter, most of the probability on it
            letter = self.sbs_reply(hint, rng)[-3]
            ps = [0.7 if v == letter else 0.1 for v in slot.values]
            verdict = (distribution(slot, [ps], [letter]) if request.slot_mode == "expected"
                       else constrained(slot, [letter]))
            return Completion(text=slot.written([letter], REASONED), prompt_tokens=sum(len(m.content.split())
                              for m in request.messages), completion_tokens=1, latency_s=self.delay,
                              finish_reason="stop", verdict=verdict)
        max_points = float(hint.get("max_points", 1.0))
        humans: list[float | None] = list(hint.get("humans", [None]))[:len(slot.fields)]
        if slot.kind == "criteria":  # each criterion graded as the answer's share of the question's points
            humans = [None if humans[0] is None else humans[0] / max_points * slot.number(c[-1])
                      for c in slot.choices]
        chosen, probs = [], []
        for i, h in enumerate(humans):
            nums = [slot.number(v) for v in slot.values_at(i)]
            top = nums[-1] if slot.kind == "criteria" else max_points
            x = self.score(h, top, i, rng)
            k = min(range(len(nums)), key=lambda j: abs(nums[j] - x))
            ps = [0.0] * len(nums)
            ps[k] = 0.5
            for j in (k - 1, k + 1):
                if 0 <= j < len(nums):
                    ps[j] += 0.2
            chosen.append(slot.values_at(i)[k])
            probs.append(ps)
        text = slot.written(chosen, REASONED, "simulated (scripted judge).")
        verdict = (distribution(slot, probs, chosen) if request.slot_mode == "expected"
                   else constrained(slot, chosen))
        return Completion(text=text, prompt_tokens=sum(len(m.content.split()) for m in request.messages),
                          completion_tokens=len(text.split()), latency_s=self.delay, finish_reason="stop",
                          verdict=verdict)

    def meta_slot_reply(self, request: JudgeRequest, hint: dict[str, Any], rng: np.random.Generator) -> Completion:
        """A meta-judge's slot (knockout.meta): the class (``Assistant1``, ``Assistant2``, ``equally good``) or the
        score its text reply would give, most of the probability on it, its neighbours sharing the rest."""
        from knockout.judges._slot import constrained, distribution

        slot = request.slot
        assert slot is not None
        reply = self.meta_reply({**hint, "round": None}, rng)  # a debate's decision (round None: never a question)
        tag = "Better_assistant" if slot.kind == "choice" else "Score" if hint.get("format") == "authors" else \
            "Score_for_Assistant"
        value = reply.rsplit(f"<{tag}>", 1)[1].split("</", 1)[0].strip()
        k = slot.values.index(value)
        ps = [0.7 if j == k else 0.15 if abs(j - k) == 1 else 0.0 for j in range(len(slot.values))]
        verdict = distribution(slot, [ps], [value]) if request.slot_mode == "expected" else constrained(slot, [value])
        text = slot.written([value], REASONED)
        return Completion(text=text, prompt_tokens=sum(len(m.content.split()) for m in request.messages),
                          completion_tokens=len(text.split()), latency_s=self.delay, finish_reason="stop",
                          verdict=verdict)

    async def complete(self, request: JudgeRequest) -> Completion:
        if self.delay:
            await asyncio.sleep(self.delay)
        if request.slot is not None and request.slot_mode in self.slot_modes:
            return self.slot_reply(request, self._rng(request))
        text = self.reply(request, self._rng(request))
        return Completion(
            text=text,
            prompt_tokens=sum(len(m.content.split()) for m in request.messages),
            completion_tokens=len(text.split()),
            latency_s=self.delay,
            finish_reason="stop",
        )


def split_points(total: float, criteria: list[float]) -> list[tuple[float, float]]:
    """A simulated grade spread over a criteria rubric, the criteria filled in order: (awarded, points) each."""
    out, left = [], total
    for p in criteria:
        x = min(p, max(left, 0.0))
        out.append((x, p))
        left -= x
    return out
