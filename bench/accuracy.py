"""The accuracy gate: agreement with human grades on fixed suites of real data, paired against a baseline.

    python bench/accuracy.py --quick                      # SAF and demo-exam individual grading, ~10 min
    python bench/accuracy.py                              # every suite but the extra ones (~45 min)
    python bench/accuracy.py --suite saf-ko-d --suite pandalm-sbs
    python bench/accuracy.py --quick --set quoting=all    # a variant: MethodOptions field or GenParams field
    python bench/accuracy.py --suite demo-ind-rubric --suite demo-ind-rubric-text   # rubrics, paired with demo-ind
    python bench/accuracy.py --quick --record             # write the baseline (bench/baselines/accuracy.json)
    python bench/accuracy.py --suite saf-ind --set prompt=knockout --set verdict=expected --vs-text
                                                          # a verdict slot paired against the same prompt's text

Each suite is a fixed slice of human-graded data (from ``../shared/data`` beside the checkout, and the
demo exam that ships with knockout) graded by one method with the embedded judge (default
``llamacpp``: Qwen2.5-Coder-1.5B, two threads, seed 0, temperature 0.1).  Every call goes through one
store (``--out``), so a rerun of the same configuration makes no judge call and a killed bench resumes;
the embedded judge is deterministic for a seed, so two runs whose grades differ differ in their requests.

The Mohler dev suites (``mohler-ind``: a fixed sample per question, ``mohler-ind-all``: the whole set) are
extra: run them by name.  For every suite graded in points a second table gives the figures per question:
within-question Pearson of the judge with the humans, the judge's within-question spread (SD, points) against
the humans', and the level offset (the judge's mean minus the humans', points); a summary row beside (the
median within-question Pearson, the mean spreads, the SD of the offsets).

Printed per suite: answers graded (n) and invalid, Pearson and Spearman with the human grades
(normalised by max points, pooled, as in the papers) with 95% cluster-bootstrap CIs over questions,
RMSE in points, and quadratic-weighted Cohen's kappa on grades binned to quarters of max points (both only
where the human grades are points: MQM scores are not); for the
side-by-side suite, accuracy and Cohen's kappa of the four-class verdicts against the ensembled human
verdict.  Then, per suite, the paired comparison against the committed baseline: the baseline's figure
and this run's on the items valid in both, the paired-bootstrap delta with its CI and p-value (questions
resampled) and Williams' test for the two dependent correlations, and how many item grades changed.

``--vs-text`` (issue 51's gate: a preset family's verdict slot against today's text reading) grades each suite
twice with the same options, once with ``verdict=text`` (the free-text parser) and once as given (``--set
verdict=expected`` or ``constrained``: the slot), and pairs the slot against the text reading instead of the
baseline: the same table, its "baseline" the text reading of the same prompt, judge and items.

The rule (README, docs/architecture.md): a change to what a judge sees or how its reply is read
(presets, rendering, defaults, parsers, the default model) comes with this table before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from knockout.data import load_items
from knockout.data._records import Criterion, ItemSet, with_rubrics
from knockout.judges import GenParams, make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run
from knockout.metrics._bootstrap import bootstrap, paired_bootstrap
from knockout.metrics._kappa import cohen_kappa
from knockout.metrics._measures import williams_test
from knockout.storage._store import Store

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DEMO = ROOT / "src" / "knockout" / "examples" / "demo_exam.jsonl"
DEMO_RUBRICS = ROOT / "src" / "knockout" / "examples" / "demo_exam_rubrics.json"
BASELINE = ROOT / "bench" / "baselines" / "accuracy.json"
RESAMPLES = 2000


@dataclass(frozen=True)
class Suite:
    name: str
    what: str
    path: Path
    loader: str | None = None
    kind: str = "grade"  # grade | sbs
    method: str = "individual"
    debias: bool = False
    reference: bool = True
    limit: int | None = None
    answers: int | None = None
    max_tokens: int = 512
    quick: bool = False
    extra: bool = False  # run only when named (--suite)
    options: dict[str, str] = field(default_factory=dict)
    #: the baseline suite this one is paired against (default: its own name): a rubric variant against the
    #: same items graded without a rubric
    paired_with: str | None = None
    #: SAF has no rubric: its reference answer becomes a one-criterion rubric worth the question's points
    reference_rubric: bool = False
    #: rubrics written apart from the data (question id -> rubric), added to its questions
    rubrics: Path | None = None


SUITES = {s.name: s for s in (
    Suite("saf-ind", "SAF English unseen answers, 6 questions x 8 answers, individual, reference",
          SHARED / "saf/unseen_answers/english", "saf", limit=6, answers=8, quick=True),
    Suite("demo-ind", "demo exam (2 English, 2 German questions x 6 answers), individual, reference",
          DEMO, quick=True),
    Suite("demo-ind-rubric", "demo exam, individual, reference, the criteria rubrics written for it (a verdict "
          "per criterion, the grade is their sum)", DEMO, extra=True, paired_with="demo-ind", rubrics=DEMO_RUBRICS),
    Suite("demo-ind-rubric-text", "demo exam, individual, reference, the rubrics written for it shown as text "
          "(one grade)", DEMO, extra=True, options={"rubric": "text"}, paired_with="demo-ind", rubrics=DEMO_RUBRICS),
    Suite("saf-ind-noref", "SAF 6 x 8, individual, no reference", SHARED / "saf/unseen_answers/english", "saf",
          limit=6, answers=8, reference=False, extra=True),
    Suite("demo-ind-noref", "demo exam, individual, no reference", DEMO, reference=False, extra=True),
    Suite("saf-ind-rubric", "SAF 6 x 8, individual, the reference answer as a one-criterion rubric instead of "
          "the reference", SHARED / "saf/unseen_answers/english", "saf", limit=6, answers=8, reference=False,
          extra=True, paired_with="saf-ind", reference_rubric=True),
    Suite("saf-ko", "SAF 6 x 8, knockout", SHARED / "saf/unseen_answers/english", "saf", method="knockout",
          limit=6, answers=8),
    Suite("saf-ko-d", "SAF 6 x 8, debiased knockout", SHARED / "saf/unseen_answers/english", "saf",
          method="knockout", debias=True, limit=6, answers=8),
    Suite("demo-ko-d", "demo exam, debiased knockout", DEMO, method="knockout", debias=True),
    Suite("mqm-ind", "MQM TED en-de, 6 segments x 4 translations, individual MT 0-100", SHARED / "mqm-ted",
          "mqm", limit=6, answers=4, reference=False, max_tokens=256),
    Suite("mohler-ind", "Mohler dev set (issue 41), first 24 questions x 8 answers, individual, reference, 0-5 "
          "points, the two graders' mean", SHARED / "mohler-dev/mohler_dev.csv", limit=24, answers=8, extra=True),
    Suite("mohler-ko-d", "Mohler dev set, the first 24 questions x 8 answers (mohler-ind's), debiased knockout: each "
          "answer's grade the mean of those it got in its matches, in both orders",
          SHARED / "mohler-dev/mohler_dev.csv", method="knockout", debias=True, limit=24, answers=8, extra=True,
          paired_with="mohler-ind"),
    Suite("mohler-ind-60x8", "Mohler dev set, the first 60 questions x their first 8 answers (480: the 10 exams of "
          "issue 48's held-out slices' size that bench/readers.py --slices 6 cuts), individual, reference",
          SHARED / "mohler-dev/mohler_dev.csv", limit=60, answers=8, extra=True),
    Suite("mohler-ind-all", "Mohler dev set, all 63 questions and 1,756 answers, individual, reference (a long "
          "run: about 2.5 h with the embedded judge)", SHARED / "mohler-dev/mohler_dev.csv", extra=True),
    Suite("pandalm-sbs", "PandaLM test set, first 24 pairs, side-by-side prompt I, both orders",
          SHARED / "pandalm/testset-v1.json", kind="sbs", limit=24, max_tokens=64),
)}


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def split_sets(pairs: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--set key=value`` into MethodOptions fields and GenParams fields."""
    opt_fields = {f.name: f for f in fields(MethodOptions)}
    gen_fields = set(GenParams.model_fields)
    opts: dict[str, Any] = {}
    gen: dict[str, Any] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep:
            raise SystemExit(f"--set {p!r} must look like key=value")
        value: Any = v
        if v.lower() in ("true", "false"):
            value = v.lower() == "true"
        else:
            try:
                value = int(v)
            except ValueError:
                try:
                    value = float(v)
                except ValueError:
                    value = v
        if k in opt_fields:
            opts[k] = value
        elif k in gen_fields:
            gen[k] = value
        else:
            raise SystemExit(f"--set {k!r}: not a MethodOptions or GenParams field")
    return opts, gen


# -- figures -------------------------------------------------------------------------------------------
def grade_figures(items: ItemSet, scores: dict[str, float | None]) -> dict[str, Any]:
    ids, j, h, m, q, pts = [], [], [], [], [], []
    invalid = 0
    for a in items:
        s = scores.get(a.id)
        if a.id in scores and s is None:
            invalid += 1
        if s is None or a.human_score is None:
            continue
        qq = items.question_of(a)
        ids.append(a.id)
        j.append(s / qq.max_points)
        h.append(a.human_score / qq.max_points if qq.human_scale == "points" else a.human_score)
        m.append(qq.max_points)
        q.append(qq.id)
        pts.append(qq.human_scale == "points")
    jn, hn, mp = np.array(j), np.array(h), np.array(m)
    points = bool(pts) and all(pts)  # RMSE and kappa need human grades in points (MQM scores are not)
    clusters = np.unique(np.array(q), return_inverse=True)[1] if q else np.zeros(0, dtype=int)

    def stat(idx: np.ndarray) -> np.ndarray:
        x, y = jn[idx], hn[idx]
        if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
            return np.array([np.nan, np.nan, np.nan])
        from scipy.stats import spearmanr

        kap = (cohen_kappa(np.rint(x * 4).astype(int), np.rint(y * 4).astype(int), weights="quadratic")
               if points else None)
        return np.array([np.corrcoef(x, y)[0, 1], spearmanr(x, y).statistic, np.nan if kap is None else kap])

    full = stat(np.arange(len(jn))) if len(jn) else np.array([np.nan] * 3)
    cis = bootstrap(stat, clusters, resamples=RESAMPLES) if len(jn) >= 3 else []
    rmse = float(np.sqrt(np.mean(((jn - hn) * mp) ** 2))) if len(jn) and points else None
    # a constant at the humans' mean (normalised, on the same answers): a grade worse than it is no grade
    constant = float(np.sqrt(np.mean(((hn.mean() - hn) * mp) ** 2))) if len(jn) and points else None
    out: dict[str, Any] = {"n": len(jn), "invalid": invalid, "rmse": rmse, "rmse_constant": constant,
                           "mean_judge": float(np.mean(jn * mp)) if len(jn) else None,
                           "mean_human": float(np.mean(hn * mp)) if len(jn) else None}
    for i, name in enumerate(("pearson", "spearman", "kappa")):
        v = full[i]
        out[name] = None if not np.isfinite(v) else float(v)
        out[f"{name}_ci"] = [cis[i].low, cis[i].high] if cis and cis[i].low is not None else None
    return out


def question_figures(items: ItemSet, scores: dict[str, float | None]) -> dict[str, Any]:
    """Per question: within-question Pearson of the judge with the humans, both spreads (SD, points) and the level
    offset (judge mean - human mean, points); and their summary over questions."""
    per: dict[str, list[tuple[float, float]]] = {}
    for a in items:
        s = scores.get(a.id)
        q = items.question_of(a)
        if s is None or a.human_score is None or q.human_scale != "points":
            continue
        per.setdefault(q.id, []).append((float(s), float(a.human_score)))
    rows = []
    for qid, pairs in per.items():
        j, h = np.array(pairs).T
        r = float(np.corrcoef(j, h)[0, 1]) if len(j) >= 3 and np.std(j) > 0 and np.std(h) > 0 else None
        rows.append({"question": qid, "n": len(j), "pearson": r, "judge_sd": float(np.std(j, ddof=1)) if len(j) > 1
                     else None, "human_sd": float(np.std(h, ddof=1)) if len(j) > 1 else None,
                     "offset": float(np.mean(j) - np.mean(h))})
    rs = [r["pearson"] for r in rows if r["pearson"] is not None]
    js = [r["judge_sd"] for r in rows if r["judge_sd"] is not None]
    hs = [r["human_sd"] for r in rows if r["human_sd"] is not None]
    offs = [r["offset"] for r in rows]
    summary = {"questions": len(rows), "pearson_median": float(np.median(rs)) if rs else None,
               "pearson_mean": float(np.mean(rs)) if rs else None,
               "pearson_below_0.3": sum(r < 0.3 for r in rs), "judge_sd_mean": float(np.mean(js)) if js else None,
               "human_sd_mean": float(np.mean(hs)) if hs else None,
               "offset_sd": float(np.std(offs)) if offs else None,
               "offset_max_abs": float(np.max(np.abs(offs))) if offs else None}
    return {"summary": summary, "questions": rows}


def paired_grades(items: ItemSet, base: dict[str, float | None], new: dict[str, float | None]) -> dict[str, Any]:
    """New minus baseline on the answers valid in both (questions resampled)."""
    ids = [a.id for a in items if a.human_score is not None and base.get(a.id) is not None
           and new.get(a.id) is not None]
    changed = sum(1 for k in set(base) | set(new) if base.get(k) != new.get(k))
    if len(ids) < 4:
        return {"n": len(ids), "changed": changed}
    qs = [items.question_of(items.answer(i)) for i in ids]
    h = np.array([items.answer(i).human_score / q.max_points if q.human_scale == "points"  # type: ignore[operator]
                  else items.answer(i).human_score for i, q in zip(ids, qs, strict=True)], dtype=float)
    mp = np.array([q.max_points for q in qs])
    b = np.array([base[i] for i in ids], dtype=float) / mp
    n = np.array([new[i] for i in ids], dtype=float) / mp
    clusters = np.unique(np.array([q.id for q in qs]), return_inverse=True)[1]

    def corr(x: np.ndarray) -> Any:
        return lambda s: None if np.std(x[s]) == 0 or np.std(h[s]) == 0 else float(np.corrcoef(x[s], h[s])[0, 1])

    def neg_rmse(x: np.ndarray) -> Any:
        return lambda s: float(np.sqrt(np.mean(((x[s] - h[s]) * mp[s]) ** 2)))

    pb = paired_bootstrap(corr(n), corr(b), clusters, resamples=RESAMPLES)
    points = all(q.human_scale == "points" for q in qs)
    pr = paired_bootstrap(neg_rmse(n), neg_rmse(b), clusters, resamples=RESAMPLES if points else 0)
    out: dict[str, Any] = {"n": len(ids), "changed": changed, "pearson_base": corr(b)(np.arange(len(ids))),
                           "pearson_new": corr(n)(np.arange(len(ids))), "delta": pb.delta,
                           "delta_ci": None if pb.low is None else [pb.low, pb.high], "p_bootstrap": pb.p_value,
                           "rmse_delta": pr.delta if points else None,
                           "rmse_delta_ci": None if pr.low is None else [pr.low, pr.high]}
    r12, r13 = out["pearson_new"], out["pearson_base"]
    r23 = None if np.std(n) == 0 or np.std(b) == 0 else float(np.corrcoef(n, b)[0, 1])
    if None not in (r12, r13, r23) and len(ids) > 3 and r23 is not None and abs(r23) < 1:
        with contextlib.suppress(ValueError):
            out["p_williams"] = williams_test(r12, r13, r23, len(ids)).p_two_sided
    return out


def sbs_figures(verdicts: dict[str, str | None], humans: dict[str, str]) -> dict[str, Any]:
    keys = [k for k in verdicts if humans.get(k.split("#")[0]) is not None]
    valid = [k for k in keys if verdicts[k] is not None]
    j = np.array([verdicts[k] for k in valid], dtype=object)
    h = np.array([humans[k.split("#")[0]] for k in valid], dtype=object)
    clusters = np.unique(np.array([k.split("#")[0] for k in valid]), return_inverse=True)[1] if valid else []

    def stat(idx: np.ndarray) -> np.ndarray:
        if not len(idx):
            return np.array([np.nan, np.nan])
        kap = cohen_kappa(list(j[idx]), list(h[idx]))
        return np.array([float(np.mean(j[idx] == h[idx])), np.nan if kap is None else kap])

    full = stat(np.arange(len(valid)))
    cis = bootstrap(stat, np.asarray(clusters), resamples=RESAMPLES) if len(valid) >= 3 else []
    out: dict[str, Any] = {"n": len(valid), "invalid": len(keys) - len(valid)}
    for i, name in enumerate(("accuracy", "kappa")):
        out[name] = None if not np.isfinite(full[i]) else float(full[i])
        out[f"{name}_ci"] = [cis[i].low, cis[i].high] if cis and cis[i].low is not None else None
    return out


def paired_sbs(base: dict[str, str | None], new: dict[str, str | None], humans: dict[str, str]) -> dict[str, Any]:
    keys = [k for k in new if base.get(k) is not None and new[k] is not None and humans.get(k.split("#")[0])]
    changed = sum(1 for k in set(base) | set(new) if base.get(k) != new.get(k))
    if len(keys) < 4:
        return {"n": len(keys), "changed": changed}
    h = np.array([humans[k.split("#")[0]] for k in keys], dtype=object)
    b = np.array([base[k] for k in keys], dtype=object) == h
    n = np.array([new[k] for k in keys], dtype=object) == h
    clusters = np.unique(np.array([k.split("#")[0] for k in keys]), return_inverse=True)[1]
    pb = paired_bootstrap(lambda s: float(np.mean(n[s])), lambda s: float(np.mean(b[s])), clusters,
                          resamples=RESAMPLES)
    return {"n": len(keys), "changed": changed, "accuracy_base": float(np.mean(b)), "accuracy_new": float(np.mean(n)),
            "delta": pb.delta, "delta_ci": None if pb.low is None else [pb.low, pb.high], "p_bootstrap": pb.p_value}


# -- running ---------------------------------------------------------------------------------------------
def grade_suite(s: Suite, items: ItemSet, store: Store, judge_spec: str, judge_opts: dict[str, str],
                opts: dict[str, Any], gen: dict[str, Any]) -> tuple[Any, dict[str, float | None]]:
    """``items`` (the suite's, or a variant of them) graded as the suite grades: its method and options (``opts``
    over them), seed 0, temperature 0.1 (``gen`` over them); the run's report and each answer's grade."""
    options = MethodOptions(reference=s.reference, seed=0, debias=s.debias, **{**s.options, **opts})
    params = GenParams(**{"temperature": 0.1, "max_tokens": s.max_tokens, "seed": 0, **gen})
    cfg = RunConfig(method=s.method, options=options, params=params)
    report = run(items, make_judge(judge_spec, judge_opts), store, cfg)
    return report, {r.answer_id: (r.score if r.valid else None) for r in report.results}


CV_GRADES = ROOT / "bench" / "grade_model" / "cv_grades.json"


def cross_validated(s: Suite, report: Any, scores: dict[str, float | None]) -> tuple[dict[str, float | None], str]:
    """The grades of a suite whose answers the shipped grade model was fitted on, replaced by their question-grouped
    cross-validated grades (``bench/grade_model/cv_grades.json``, written by ``bench/fit_grade_model.py fit``: each
    answer graded by the model fitted without its exam's questions), so that no figure of this table is one of
    data the model was fitted on; "" when the suite is not in the model's training data."""
    from knockout.grading import default_model

    model = default_model()
    if "mohler" not in model.meta.get("data", {}).get("sources", []) or "mohler" not in str(s.path):
        return scores, ""
    cv = json.loads(CV_GRADES.read_text()) if CV_GRADES.exists() else {}
    if cv.get("model_sha") != model.digest:
        raise SystemExit(f"{s.name}: the shipped grade model was fitted on this data and {CV_GRADES} is not its "
                         "cross-validation (run bench/fit_grade_model.py fit)")
    grades = cv["grades"]
    out: dict[str, float | None] = {}
    for r in report.results:
        rd = (r.details or {}).get("readers") or {}
        share = grades.get(f"mohler/{r.answer_id}")
        if r.valid and rd.get("combined") is not None and share is not None:
            out[r.answer_id] = round(share * float(report.max_points[r.answer_id]), 6)
        else:
            out[r.answer_id] = scores.get(r.answer_id)
    return out, f"question-grouped CV ({cv.get('folds')})"


def run_grade(s: Suite, store: Store, judge_spec: str, judge_opts: dict[str, str], opts: dict[str, Any],
              gen: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    items = load_subset(s)
    report, scores = grade_suite(s, items, store, judge_spec, judge_opts, opts, gen)
    if opts.get("readers", "auto") != "judge":
        report.max_points = {a.id: items.question_of(a).max_points for a in items}
        scores, how = cross_validated(s, report, scores)
    else:
        how = ""
    st = report.summary()
    figures = grade_figures(items, scores)
    if figures.get("rmse") is not None:  # points: the per-question figures (within-question signal, level)
        figures["per_question"] = question_figures(items, scores)
    if how:
        figures["grades"] = how
    figures.update(requests=st["judge_calls"] + st["cache_hits"], live_calls=st["judge_calls"],
                   invalid_replies=st["invalid"], format_retries=st["format_retries"], run_id=report.run_id)
    return figures, {"items": scores}


def run_sbs_suite(s: Suite, store: Store, judge_spec: str, judge_opts: dict[str, str], opts: dict[str, Any],
                  gen: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    from knockout.sbs import SbsConfig, load_sbs, run_sbs

    items = load_sbs(s.path)[: s.limit]
    cfg = SbsConfig(prompt=opts.get("prompt", "I"), debate="none", format_retries=2,
                    verdict=opts.get("verdict", "auto"),
                    params=GenParams(**{"temperature": 0.1, "max_tokens": s.max_tokens, "seed": 0, **gen}))
    report = run_sbs(items, make_judge(judge_spec, judge_opts), store, cfg, source=str(s.path))
    verdicts: dict[str, str | None] = {}
    humans: dict[str, str] = {}
    for it in report.items:
        for swap, o in enumerate(it.orders):
            verdicts[f"{it.item.id}#swap{swap}"] = str(it.verdict(swap).value) if o.valid else None
        if it.item.human is not None:
            humans[it.item.id] = str(it.item.human.value)
    st = report.summary()
    figures = sbs_figures(verdicts, humans)
    figures.update(requests=st.get("judge_calls", 0) + st.get("cache_hits", 0), live_calls=st.get("judge_calls"),
                   run_id=report.run_id)
    return figures, {"items": verdicts, "humans": humans}


def fmt(v: Any, ci: Any = None) -> str:
    if v is None:
        return "-"
    text = f"{v:.3f}" if isinstance(v, float) else str(v)
    if ci:
        text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", action="append", default=[], help=f"one of {list(SUITES)} (repeatable)")
    ap.add_argument("--quick", action="store_true", help="the quick suites: " +
                    ", ".join(k for k, s in SUITES.items() if s.quick))
    ap.add_argument("--judge", default="llamacpp")
    ap.add_argument("--judge-opt", action="append", default=[],
                    help="backend option key=value (the embedded judge: threads=2 unless given)")
    ap.add_argument("--set", action="append", default=[], help="MethodOptions or GenParams field key=value")
    ap.add_argument("--out", type=Path, default=Path("accuracy.db"), help="the SQLite store")
    ap.add_argument("--baseline", type=Path, default=BASELINE)
    ap.add_argument("--record", action="store_true", help="write these results as the baseline")
    ap.add_argument("--save", type=Path, help="write these results (per item) to a JSON file")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    ap.add_argument("--vs-text", action="store_true",
                    help="grade each suite with verdict=text too, and pair the run as set (its slot) against it")
    args = ap.parse_args()

    names = args.suite or [k for k, s in SUITES.items() if s.quick or not (args.quick or s.extra)]
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise SystemExit(f"unknown suite {unknown[0]!r} (known: {', '.join(SUITES)})")
    opts, gen = split_sets(args.set)
    if args.vs_text and opts.get("verdict", "auto") in ("auto", "text"):
        raise SystemExit("--vs-text pairs a slot mode against the text reading: add --set verdict=expected "
                         "(or constrained)")
    if args.vs_text and args.record:
        raise SystemExit("--vs-text pairs against the text reading, not the baseline: it records none")
    judge_opts = dict(p.split("=", 1) for p in args.judge_opt)
    if args.judge.startswith("llamacpp"):
        judge_opts.setdefault("threads", "2")  # the thread count changes llama.cpp's arithmetic: keep it fixed
    base = json.loads(args.baseline.read_text()) if args.baseline.exists() else {"suites": {}}
    results: dict[str, Any] = {"commit": commit(), "judge": args.judge, "judge_opts": judge_opts, "set": args.set,
                               "date": time.strftime("%Y-%m-%d"), "suites": {}}
    store = Store(args.out)
    try:
        for name in names:
            s = SUITES[name]
            if not s.path.exists():
                print(f"{name}: skipped ({s.path} not found)", file=sys.stderr)
                continue
            t0 = time.monotonic()
            runner = run_sbs_suite if s.kind == "sbs" else run_grade
            figures, per_item = runner(s, store, args.judge, judge_opts, opts, gen)
            figures["wall_s"] = round(time.monotonic() - t0, 1)
            entry: dict[str, Any] = {"what": s.what, "figures": figures, **per_item}
            b = base["suites"].get(s.paired_with or name)
            if args.vs_text:  # the same suite and options read from the free text: what the slot is paired with
                text_figures, b = runner(s, store, args.judge, judge_opts, {**opts, "verdict": "text"}, gen)
                entry["text"] = {"figures": text_figures, **b}
            if b is not None:
                entry["paired_with"] = f"{name} (text)" if args.vs_text else s.paired_with or name
                entry["paired"] = (paired_sbs(b["items"], per_item["items"], per_item["humans"]) if s.kind == "sbs"
                                   else paired_grades(load_subset(s), b["items"], per_item["items"]))
            results["suites"][name] = entry
            print(f"{name}: done in {figures['wall_s']} s ({figures.get('live_calls')} live calls)", file=sys.stderr)
    finally:
        store.close()
    if args.record:
        args.baseline.parent.mkdir(parents=True, exist_ok=True)
        old = base["suites"] if args.baseline.exists() else {}
        kept = {k: {**{kk: vv for kk, vv in v.items() if kk not in ("paired", "paired_with")},
                    "commit": results["commit"], "date": results["date"], "set": results["set"]}
                for k, v in results["suites"].items()}
        merged = {**results, "suites": {**old, **kept}}
        args.baseline.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    if args.save:
        args.save.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(results, indent=1, sort_keys=True))
        return 0
    print_tables(results, {"commit": "the same run", "date": "verdict=text"} if args.vs_text else base)
    return 0


def load_subset(s: Suite) -> ItemSet:
    items = load_items(s.path, s.loader) if s.loader else load_items(s.path)
    items = items.subset(limit=s.limit, answers_per_question=s.answers) if s.limit or s.answers else items
    if s.reference_rubric:
        questions = [q.model_copy(update={"rubric": [Criterion(criterion=q.reference, points=q.max_points)]})
                     if q.reference else q for q in items.questions.values()]
        items = ItemSet(questions, list(items), source=items.source)
    if s.rubrics is not None:
        items = with_rubrics(items, json.loads(s.rubrics.read_text(encoding="utf-8")), file=str(s.rubrics))
    return items


def print_tables(results: dict[str, Any], base: dict[str, Any]) -> None:
    console = Console(width=200)
    title = (f"accuracy at {results['commit']} ({results['date']}), judge {results['judge']}"
             + (f", {' '.join(results['set'])}" if results["set"] else ""))
    t = Table(title=title, box=box.MARKDOWN)
    for c in ("suite", "n", "invalid", "pearson [95% CI]", "spearman", "rmse", "rmse of the humans' mean",
              "kappa [95% CI]", "requests", "live calls", "wall s"):
        t.add_column(c, justify="left" if c == "suite" else "right")
    for name, e in results["suites"].items():
        f = e["figures"]
        if "accuracy" in f:
            t.add_row(name, str(f["n"]), str(f["invalid"]), "acc " + fmt(f["accuracy"], f["accuracy_ci"]), "-", "-",
                      "-", fmt(f["kappa"], f["kappa_ci"]), str(f["requests"]), str(f["live_calls"]), str(f["wall_s"]))
        else:
            t.add_row(name, str(f["n"]), str(f["invalid"]), fmt(f["pearson"], f["pearson_ci"]), fmt(f["spearman"]),
                      fmt(f["rmse"]), fmt(f.get("rmse_constant")), fmt(f["kappa"], f["kappa_ci"]), str(f["requests"]),
                      str(f["live_calls"]),
                      str(f["wall_s"]))
    console.print(t)
    per = [(name, e["figures"]["per_question"]) for name, e in results["suites"].items()
           if e["figures"].get("per_question")]
    if per:
        w = Table(title="per question: the judge's signal inside a question and its level", box=box.MARKDOWN)
        for c in ("suite", "questions", "within-question Pearson: median / mean", "questions below 0.3",
                  "SD inside a question (points): judge / humans", "level offset judge - humans: SD / max |.|"):
            w.add_column(c, justify="left" if c == "suite" else "right")
        for name, pq in per:
            sm = pq["summary"]
            w.add_row(name, str(sm["questions"]), f"{fmt(sm['pearson_median'])} / {fmt(sm['pearson_mean'])}",
                      str(sm["pearson_below_0.3"]), f"{fmt(sm['judge_sd_mean'])} / {fmt(sm['human_sd_mean'])}",
                      f"{fmt(sm['offset_sd'])} / {fmt(sm['offset_max_abs'])}")
        console.print(w)
    if not any("paired" in e for e in results["suites"].values()):
        print("(no baseline for these suites: record one with --record)")
        return
    p = Table(title=f"paired against the baseline ({base.get('commit')}, {base.get('date')}): new - baseline",
              box=box.MARKDOWN)
    for c in ("suite", "baseline suite", "n both valid", "items changed", "baseline", "new", "delta [95% CI]",
              "p (bootstrap)", "p (Williams)", "delta RMSE [95% CI]"):
        p.add_column(c, justify="left" if c == "suite" else "right")
    for name, e in results["suites"].items():
        d = e.get("paired")
        if d is None:
            continue
        is_sbs = "accuracy_new" in d
        p.add_row(name, e.get("paired_with", name), str(d["n"]), str(d["changed"]),
                  fmt(d.get("accuracy_base" if is_sbs else "pearson_base")),
                  fmt(d.get("accuracy_new" if is_sbs else "pearson_new")),
                  fmt(d.get("delta"), d.get("delta_ci")), fmt(d.get("p_bootstrap")), fmt(d.get("p_williams")),
                  fmt(d.get("rmse_delta"), d.get("rmse_delta_ci")))
    console.print(p)


if __name__ == "__main__":
    raise SystemExit(main())
