"""Can a reader tell a non-answer from a real answer?  The embedded judge's readings of non-answers (issue 58).

    python bench/nonanswer_readers.py                       # the default prompt and the probes, judge readings
    python bench/nonanswer_readers.py --prompt knockout-individual-en-ref-correct
    python bench/nonanswer_readers.py --likelihood          # the judge model's own likelihood of the answer

The grade model cannot grade a non-answer 0 unless one of its readers reads it differently from a real answer.
This bench asks the embedded judge (Qwen2.5-Coder-1.5B, the default command's options: individual, reference
shown, the verdict slot, seed 0, temperature 0.1) for its expected grade of 30 real Mohler dev answers (two of
each of 15 questions, seeded) and of 5 non-answers of each kind made from the test part's questions
(``bench/grade_model/negatives.py``, never fitted on), under several prompts: the default
(``knockout-individual-en-ref-score``), ``bench/grade_model/prompts/rule.toml`` (one sentence naming what earns
0), ``prompts/strict.toml`` (a strict grader's wording) and the P(True) preset
(``knockout-individual-en-ref-correct``).  Printed per prompt: the real answers' mean and Pearson with the human
grade; per kind, the mean reading (share of max) and the AUC of "real answer" against that kind (1.0: every real
answer reads above every non-answer; 0.5: no separation).

``--likelihood``: the judge model's mean log-probability of the answer's tokens after the question and the
reference ("A student's answer that is correct:"), after the question alone, and their difference (PMI); one
forward pass each with llama.cpp's logits (no generation).

Every grade goes through one store per prompt (``--out DIR``): a rerun makes no judge call.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent
PROMPTS = ("knockout-individual-en-ref-score", str(HERE / "grade_model" / "prompts" / "rule.toml"),
           str(HERE / "grade_model" / "prompts" / "strict.toml"), "knockout-individual-en-ref-correct")


def sample(n_questions: int = 15, per_kind: int = 5) -> tuple[Any, list[Any], list[Any]]:
    """The Mohler dev set, ``2 x n_questions`` real answers and ``per_kind`` test-part non-answers of each kind."""
    import fit_grade_model as fgm

    from knockout.data import load_items

    moh = load_items(fgm.MOHLER)
    rng = random.Random(1)
    by: dict[str, list[Any]] = collections.defaultdict(list)
    for a in moh.answers:
        by[a.question_id].append(a)
    real = [a for q in rng.sample(sorted(moh.questions), n_questions) for a in rng.sample(by[q], 2)]
    kinds: dict[str, list[Any]] = collections.defaultdict(list)
    for a in fgm.negative_items().answers:
        if a.meta["test"] and a.meta["source"] == "mohler":
            kinds[a.meta["kind"]].append(a)
    negs = [a for v in kinds.values() for a in random.Random(2).sample(v, per_kind)]
    return moh, real, negs


def auc(pos: list[float], neg: list[float]) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score([1] * len(pos) + [0] * len(neg), pos + neg))


def report(name: str, moh: Any, real: list[Any], negs: list[Any], value: dict[str, float | None]) -> None:
    from scipy.stats import pearsonr

    def human(a: Any) -> float:
        return float(a.human_scores[next(iter(a.human_scores))]) / moh.questions[a.question_id].max_points

    xs = [(value[a.id], human(a)) for a in real if value[a.id] is not None]
    x = [float(v) for v, _ in xs]
    print(f"{name}: real answers mean {np.mean(x):.2f}, Pearson with the human grade "
          f"{pearsonr(x, [h for _, h in xs])[0]:.3f} (n {len(x)}; invalid {len(real) - len(x)})")
    kinds = list(dict.fromkeys(a.meta["kind"] for a in negs))
    print(f"  {'kind':16s} {'mean':>6s} {'AUC':>6s}")
    for k in kinds:
        v = [float(value[a.id] or 0.0) for a in negs if a.meta["kind"] == k]
        print(f"  {k:16s} {np.mean(v):6.2f} {auc(x, v):6.2f}")


def judge_readings(prompt: str, out: Path, moh: Any, real: list[Any], negs: list[Any]) -> dict[str, float | None]:
    from knockout.data._records import ItemSet
    from knockout.judges import GenParams, make_judge
    from knockout.methods._base import MethodOptions
    from knockout.methods._run import RunConfig, run
    from knockout.storage._store import Store

    items = ItemSet(list(moh.questions.values()), real + negs, source="probe")
    cfg = RunConfig(method="individual", options=MethodOptions(reference=True, seed=0, readers="judge",
                                                               prompt=prompt),
                    params=GenParams(temperature=0.1, max_tokens=512, seed=0))
    with Store(out / f"{Path(prompt).stem}.db") as store:
        t0 = time.monotonic()
        rep = run(items, make_judge("llamacpp", {"threads": "2"}), store, cfg)
        print(f"[{prompt}: {rep.stats.get('judge_calls', 0)} live calls, {time.monotonic() - t0:.0f} s]",
              file=sys.stderr)
    res = {r.answer_id: r for r in rep.results}
    return {a.id: None if res[a.id].score is None else float(res[a.id].score or 0.0) /
            moh.questions[a.question_id].max_points for a in real + negs}


def likelihood(moh: Any, real: list[Any], negs: list[Any]) -> dict[str, dict[str, float | None]]:
    from llama_cpp import Llama

    from knockout.judges._models import DEFAULT_MODEL, model_path

    llm = Llama(model_path=str(model_path(DEFAULT_MODEL)), n_ctx=2048, n_threads=2, logits_all=True, verbose=False)

    def mean_logprob(context: str, answer: str) -> float:
        c = llm.tokenize(context.encode(), add_bos=True)
        a = llm.tokenize(answer.encode(), add_bos=False)
        llm.reset()
        llm.eval(c + a)
        logits = np.asarray(llm.scores[len(c) - 1:len(c) + len(a) - 1], dtype=np.float64)
        top = logits.max(1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(logits - top).sum(1))
        return float(np.mean(logits[np.arange(len(a)), a] - lse))

    out: dict[str, dict[str, float | None]] = {"given the reference": {}, "given the question": {}, "PMI": {}}
    for a in real + negs:
        q = moh.questions[a.question_id]
        ref = mean_logprob(f"Question: {q.text}\nCorrect answer: {q.reference}\nA student's answer that is correct: ",
                           a.text)
        plain = mean_logprob(f"Question: {q.text}\nA student's answer: ", a.text)
        out["given the reference"][a.id], out["given the question"][a.id], out["PMI"][a.id] = ref, plain, ref - plain
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt", action="append", help="a preset name or template file (default: the four probes)")
    ap.add_argument("--likelihood", action="store_true", help="the judge model's likelihood of the answer instead")
    ap.add_argument("--out", type=Path, default=Path("nonanswer-readers"), help="a folder: one store per prompt")
    args = ap.parse_args()
    moh, real, negs = sample()
    if args.likelihood:
        for name, value in likelihood(moh, real, negs).items():
            report(f"log-probability {name}", moh, real, negs, value)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for prompt in args.prompt or PROMPTS:
        report(Path(prompt).stem, moh, real, negs, judge_readings(prompt, args.out, moh, real, negs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
