"""The grade model (issue 58): collect the judge's readings, fit the model by question-grouped CV, ship it.

    python bench/fit_grade_model.py collect [--stage NAME ...]   # the embedded judge's readings (long; resumable)
    python bench/fit_grade_model.py fit                          # CV table of every candidate; writes the model
    python bench/fit_grade_model.py fit --no-write               # the table only

``collect`` grades, with the default command's judge and options (individual, reference shown, the verdict slot,
seed 0, temperature 0.1; ``readers=judge``: the judge's own grade), the training data and the evaluation suites
through one store (``--out``, so a rerun makes no judge call and a killed collection resumes) and appends each
answer's judge reading (its grade as a share of max points and the spread of its distribution) to
``bench/grade_model/judge_readings.jsonl``: ids and numbers only, never a text of the data.  Stages, in order:
``eval`` (the quick accuracy suites: SAF 6 x 8 unseen answers, the demo exam; and SAF's unseen questions 4 x 12),
``mohler-0`` (the first 8 answers of every Mohler dev question), ``negatives`` (non-answers made from the training
questions, ``bench/grade_model/negatives.py``), ``saf-train`` (8 answers per SAF training question, spread over
the file), ``mohler-1`` .. ``mohler-6`` (the next 4 answers of every question each).

``fit`` reads the other readings (``knockout.grading``: the meaning reader's similarities, the lexical readings,
the guard's score) for every collected answer, fits every candidate by question-grouped cross-validation (the
questions a fold tests are never in its training; folds by exam), prints the table, and writes the chosen model
with the training data's SHA-256, the date and the table to ``src/knockout/grading/model.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
MOHLER = SHARED / "mohler-dev" / "mohler_dev.csv"
SAF_TRAIN = SHARED / "saf" / "training" / "english"
SAF_UA = SHARED / "saf" / "unseen_answers" / "english"
SAF_UQ = SHARED / "saf" / "unseen_questions" / "english"
DEMO = ROOT / "src" / "knockout" / "examples" / "demo_exam.jsonl"
READINGS_FILE = ROOT / "bench" / "grade_model" / "judge_readings.jsonl"
STAGES = ("eval", "mohler-0", "negatives", "saf-train", *(f"mohler-{b}" for b in range(1, 7)))


def spread(items: Any, k: int) -> Any:
    """``k`` answers per question, evenly spaced over the question's answers in file order."""
    from knockout.data._records import ItemSet

    by_q: dict[str, list[Any]] = {}
    for a in items:
        by_q.setdefault(a.question_id, []).append(a)
    keep = []
    for answers in by_q.values():
        step = max(1, len(answers) // k)
        keep += answers[::step][:k]
    return ItemSet(list(items.questions.values()), keep, source=items.source)


def window(items: Any, start: int, stop: int) -> Any:
    """The answers ``start..stop`` (within each question, file order)."""
    from knockout.data._records import ItemSet

    seen: dict[str, int] = {}
    keep = []
    for a in items:
        i = seen.get(a.question_id, 0)
        seen[a.question_id] = i + 1
        if start <= i < stop:
            keep.append(a)
    return ItemSet(list(items.questions.values()), keep, source=items.source)


def exam_of(source: str, q: Any) -> str:
    return q.exam_id or (q.id.split(".")[0] if source == "mohler" else q.id)


def negative_items() -> Any:
    from grade_model.negatives import make

    from knockout.data import load_items
    from knockout.data._records import Answer, ItemSet

    questions, answers = [], []
    for source, path, loader in (("mohler", MOHLER, None), ("saf-train", SAF_TRAIN, "saf")):
        items = load_items(path, loader) if loader else load_items(path)
        qs = list(items.questions.values())
        for n in make([(q.id, q.text, q.reference, exam_of(source, q)) for q in qs]):
            answers.append(Answer(id=f"neg:{n.kind}:{n.question_id}", question_id=n.question_id, text=n.text,
                                  human_scores={"label": n.label * items.questions[n.question_id].max_points},
                                  meta={"kind": n.kind, "test": n.test, "source": source}))
        questions += qs
    return ItemSet(questions, answers, source="negatives")


def stage_items(stage: str) -> list[tuple[str, Any]]:
    from knockout.data import load_items

    if stage == "eval":
        ua = load_items(SAF_UA, "saf").subset(limit=6, answers_per_question=8)
        return [("saf-ind", ua), ("demo-ind", load_items(DEMO)), ("saf-uq", spread(load_items(SAF_UQ, "saf"), 12))]
    if stage.startswith("mohler-"):  # mohler-0: the first 8 answers of each question; then 4 more each
        b = int(stage.split("-")[1])
        start = 0 if b == 0 else 8 + 4 * (b - 1)
        return [("mohler", window(load_items(MOHLER), start, 8 if b == 0 else start + 4))]
    if stage == "negatives":
        return [("negatives", negative_items())]
    if stage == "saf-train":
        return [("saf-train", spread(load_items(SAF_TRAIN, "saf"), 8))]
    raise SystemExit(f"unknown stage {stage}")


def collect(args: argparse.Namespace) -> int:
    from knockout.judges import GenParams, make_judge
    from knockout.judges._slot import verdict_spread
    from knockout.methods._base import MethodOptions
    from knockout.methods._run import RunConfig, run
    from knockout.storage._store import Store

    done = set()
    if READINGS_FILE.exists():
        for line in READINGS_FILE.read_text().splitlines():
            r = json.loads(line)
            done.add((r["source"], r["answer_id"]))
    store = Store(args.out)
    judge = make_judge(args.judge, {"threads": "2"} if args.judge.startswith("llamacpp") else {})
    cfg = RunConfig(method="individual", options=MethodOptions(reference=True, seed=0, readers="judge"),
                    params=GenParams(temperature=0.1, max_tokens=512, seed=0))
    try:
        for stage in args.stage or STAGES:
            for source, items in stage_items(stage):
                if all((source, a.id) in done for a in items):
                    print(f"{stage}/{source}: collected before", file=sys.stderr)
                    continue
                t0 = time.monotonic()
                report = run(items, judge, store, cfg)
                with READINGS_FILE.open("a") as f:
                    for r in report.results:
                        if (source, r.answer_id) in done:
                            continue
                        q = items.questions[r.question_id]
                        sd = verdict_spread(r.details, q.max_points) if r.details else None
                        f.write(json.dumps({"source": source, "question_id": r.question_id, "answer_id": r.answer_id,
                                            "valid": r.valid, "judge": None if r.score is None else
                                            round(r.score / q.max_points, 6),
                                            "judge_sd": None if sd is None else round(sd / q.max_points, 6)}) + "\n")
                        done.add((source, r.answer_id))
                print(f"{stage}/{source}: {len(items)} answers in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    finally:
        store.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--stage", action="append", choices=STAGES)
    c.add_argument("--out", type=Path, default=Path("grade-model.db"))
    c.add_argument("--judge", default="llamacpp")
    f = sub.add_parser("fit")
    f.add_argument("--no-write", action="store_true")
    f.add_argument("--alphas", type=float, nargs="+", default=[1.0, 3.0])
    f.add_argument("--pick", help="the candidate to ship (default: the best Mohler CV Pearson whose non-answers "
                   "stay at most 0.25 of max on average)")
    args = ap.parse_args()
    if args.cmd == "collect":
        return collect(args)
    from grade_model.fitting import fit_main

    return fit_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
