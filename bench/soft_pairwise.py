"""Soft pairwise verdicts against today's letters (issue 43, docs/methods.md#soft-preferences).

Each configuration is run twice on one store: with the letters (``--preference letter``, the default) and with soft
preferences (``--preference soft``: the probability that answer 1 is better, from the judge's token probabilities at
the verdict slot, both orders averaged).  The soft run reads the replies the letters' run stored; it asks the judge
only for what the letters' run did not play (a knockout's later rounds where another answer advanced).

* **PandaLM side-by-side** (``--pandalm N``: the first N pairs of the test set, prompt I, both orders): per item the
  letters of one order (today's verdicts: each order counted, the figure is the mean of the two orders), the letters
  of both orders (equal -> that verdict, else a tie) and the soft verdict (both orders' distributions averaged).
  Accuracy and Cohen's kappa against the ensembled human verdict in three classes (A, B, tie: PandaLM's humans say no
  "both bad"), position bias (PBias@AB and PCon@AB of the letters; the same read from the probabilities for soft),
  with paired bootstrap CIs over items (soft minus letters).
* **Knockout suites** (``--suite``, from bench/accuracy.py; default ``saf-ko-d`` and ``demo-ko-d``): the final
  scores' Pearson with the human grades (paired bootstrap over questions, as the accuracy gate), and per match
  played by either run both readings of the same games: accuracy and kappa of the match verdict (A, B, tie) against
  the order of the two answers' human grades, position bias (PBias: mean of ``first better`` over both orders minus
  one half, times two; consistency: both orders prefer the same answer), CIs over questions.

    python bench/soft_pairwise.py --pandalm 150 --out /tmp/soft.db
    python bench/soft_pairwise.py --suite saf-ko-d --suite demo-ko-d --out /tmp/soft.db
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import SUITES, grade_figures, load_subset, paired_grades

from knockout.engine import Outcome
from knockout.engine._engine import Attempt
from knockout.judges import GenParams, make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._match import Game, Match
from knockout.methods._run import RunConfig, run
from knockout.metrics._bootstrap import paired_bootstrap
from knockout.metrics._kappa import cohen_kappa
from knockout.prompts._builder import PromptBuilder
from knockout.storage._store import Store

ROOT = Path(__file__).resolve().parents[1]
PANDALM = ROOT.parent / "shared" / "data" / "pandalm" / "testset-v1.json"
RESAMPLES = 2000
TIE = "T"


def three(v: str) -> str:
    """A, B, or a tie of any kind (C, D, TIE); E stays E."""
    return v if v in ("A", "B", "E") else TIE


def kappa(j: list[str], h: list[str]) -> float | None:
    k = cohen_kappa(j, h)
    return None if k is None or not np.isfinite(k) else float(k)


def paired(new: Any, base: Any, clusters: np.ndarray) -> dict[str, Any]:
    r = paired_bootstrap(new, base, clusters, resamples=RESAMPLES)
    return {"delta": r.delta, "ci": None if r.low is None else [r.low, r.high], "p": r.p_value}


# -- PandaLM side-by-side ------------------------------------------------------------------------------------
def pandalm(limit: int, store: Store, judge_spec: str, judge_opts: dict[str, str]) -> dict[str, Any]:
    from knockout.sbs import SbsConfig, load_sbs, run_sbs
    from knockout.sbs._metrics import pbias_ab, pcon_ab

    items = load_sbs(PANDALM)[:limit]
    params = GenParams(temperature=0.1, max_tokens=64, seed=0)  # bench/accuracy.py's pandalm-sbs suite
    judge = make_judge(judge_spec, judge_opts)
    letter = run_sbs(items, judge, store, SbsConfig(prompt="I", format_retries=2, params=params), source=str(PANDALM))
    soft = run_sbs(items, make_judge(judge_spec, judge_opts), store,
                   SbsConfig(prompt="I", format_retries=2, params=params, preference="soft"), source=str(PANDALM))
    keep = [i for i, it in enumerate(soft.items) if it.item.human is not None]
    h = [three(str(soft.items[i].item.human)) for i in keep]
    l0 = [three(str(soft.items[i].verdict(0))) for i in keep]
    l1 = [three(str(soft.items[i].verdict(1))) for i in keep]
    both = [a if a == b else TIE for a, b in zip(l0, l1, strict=True)]
    softs = [soft.items[i].soft() for i in keep]
    sv = [three(str(s.verdict)) for s in softs]
    harr, l0a, l1a, ba, sa = (np.array(x, dtype=object) for x in (h, l0, l1, both, sv))
    clusters = np.unique(np.array([soft.items[i].item.question for i in keep]), return_inverse=True)[1]

    def acc(x: np.ndarray) -> Any:
        return lambda s: float(np.mean(x[s] == harr[s]))

    def acc_orders(s: np.ndarray) -> float:
        return float((np.mean(l0a[s] == harr[s]) + np.mean(l1a[s] == harr[s])) / 2)

    def kap(x: np.ndarray) -> Any:
        return lambda s: kappa(list(x[s]), list(harr[s]))

    def kap_orders(s: np.ndarray) -> float | None:
        a, b = kappa(list(l0a[s]), list(harr[s])), kappa(list(l1a[s]), list(harr[s]))
        return None if a is None or b is None else (a + b) / 2

    firsts = [s.first for s in softs if s.first[0] is not None and s.first[1] is not None]
    sw0 = [str(soft.items[i].verdict(0)) for i in keep]
    sw1 = [str(soft.items[i].verdict(1)) for i in keep]

    def side(p: float) -> int:
        return (p > 0.5) - (p < 0.5)

    readings = {
        "letters, one order (today)": {"accuracy": acc_orders(np.arange(len(h))),
                                       "kappa": kap_orders(np.arange(len(h))), "pbias": pbias_ab(sw0, sw1),
                                       "consistency": pcon_ab(sw0, sw1)},
        "letters, both orders (equal, else tie)": {"accuracy": acc(ba)(np.arange(len(h))),
                                                   "kappa": kap(ba)(np.arange(len(h))), "pbias": pbias_ab(sw0, sw1),
                                                   "consistency": pcon_ab(sw0, sw1)},
        "soft, both orders": {"accuracy": acc(sa)(np.arange(len(h))), "kappa": kap(sa)(np.arange(len(h))),
                              "pbias": float(np.mean([a + b - 1 for a, b in firsts])) if firsts else None,
                              "consistency": float(np.mean([side(a) == side(1 - b) for a, b in firsts]))
                              if firsts else None},
    }
    dist = {name: {c: float(np.mean(np.array(v) == c)) for c in ("A", "B", TIE, "E")}
            for name, v in (("human", h), ("soft", sv), ("letters swap0", l0), ("letters swap1", l1))}
    return {
        "n": len(h), "questions": int(clusters.max() + 1) if len(clusters) else 0,
        "letter_run": letter.run_id, "soft_run": soft.run_id,
        "calls": {"letters": letter.summary()["judge_calls"], "soft": soft.summary()["judge_calls"],
                  "requests": letter.summary()["judge_calls"] + letter.summary()["cache_hits"]},
        "readings": readings, "distribution": dist,
        "paired": {
            "soft - letters one order": {"accuracy": paired(acc(sa), acc_orders, clusters),
                                         "kappa": paired(kap(sa), kap_orders, clusters)},
            "soft - letters both orders": {"accuracy": paired(acc(sa), acc(ba), clusters),
                                           "kappa": paired(kap(sa), kap(ba), clusters)},
        },
    }


# -- knockout suites -------------------------------------------------------------------------------------------
def rebuild(row: Any, builder: PromptBuilder, items: Any, soft: bool) -> Match:
    """A stored match as a :class:`Match` (its games' replies and slot distributions), read as letters or soft."""
    q = items.question_of(items.answer(row.a))
    slot = builder.slot(builder.template_for(q), q)
    games = []
    for g in row.games:
        attempts = [Attempt(**{k: a.get(k) for k in ("key", "reply", "cached", "error", "verdict")})
                    for a in g.get("attempts") or []]
        valid = g.get("scores") is not None
        games.append(Game(g["first"], g["second"], Outcome(tuple(g["scores"]) if valid else None, valid, attempts),
                          slot))
    return Match(row.a, row.b, games, row.step, soft)


def knockout_suite(name: str, store: Store, judge_spec: str, judge_opts: dict[str, str]) -> dict[str, Any]:
    s = SUITES[name]
    items = load_subset(s)
    params = GenParams(temperature=0.1, max_tokens=s.max_tokens, seed=0)
    reports = {}
    for pref in ("letter", "soft"):
        options = MethodOptions(reference=s.reference, seed=0, debias=s.debias, preference=pref, **s.options)
        reports[pref] = run(items, make_judge(judge_spec, judge_opts), store,
                            RunConfig(method=s.method, options=options, params=params))
    scores = {p: {r.answer_id: (r.score if r.valid else None) for r in rep.results} for p, rep in reports.items()}
    figures = {p: grade_figures(items, sc) for p, sc in scores.items()}
    gate = paired_grades(items, scores["letter"], scores["soft"])
    # every match either run played, read both ways
    builder = PromptBuilder(items, "pairwise", MethodOptions(reference=s.reference, seed=0, debias=s.debias,
                                                             verdict="expected", **s.options))
    rows: dict[str, Any] = {}
    for rep in reports.values():
        for row in store.matches(rep.run_id):
            rows.setdefault(row.match_id, row)
    h_cls, q_ids, lv, sv, lfirst, sfirst, lcons, scons = [], [], [], [], [], [], [], []
    for row in rows.values():
        ha, hb = items.answer(row.a).human_score, items.answer(row.b).human_score
        if ha is None or hb is None or len(row.games) != 2:
            continue
        letters, soft = rebuild(row, builder, items, False), rebuild(row, builder, items, True)
        if not letters.valid or letters.partial:
            continue
        h_cls.append("A" if ha > hb else "B" if ha < hb else TIE)
        q_ids.append(items.answer(row.a).question_id)
        lv.append(three(str(letters.verdict)))
        sv.append(three(str(soft.verdict)))
        g1, g2 = letters.games
        lp = [g.verdict.score_first() for g in (g1, g2)]
        sp = [g.p_first for g in soft.games]
        lfirst.append(lp[0] + lp[1] - 1)  # type: ignore[operator]
        sfirst.append(sp[0] + sp[1] - 1)  # type: ignore[operator]
        # both orders prefer the same answer (a in game 1 first, a in game 2 second)
        lcons.append(np.sign(lp[0] - 0.5) == np.sign(0.5 - lp[1]) != 0)  # type: ignore[operator]
        scons.append(np.sign(sp[0] - 0.5) == np.sign(0.5 - sp[1]) != 0)  # type: ignore[operator]
    harr, la, sa = (np.array(x, dtype=object) for x in (h_cls, lv, sv))
    clusters = np.unique(np.array(q_ids), return_inverse=True)[1]

    def acc(x: np.ndarray) -> Any:
        return lambda s: float(np.mean(x[s] == harr[s]))

    def decisive(x: np.ndarray) -> Any:  # pairs the humans order: the better one preferred (a tie: half)
        def f(s: np.ndarray) -> float | None:
            m = harr[s] != TIE
            if not m.any():
                return None
            return float(np.mean(np.where(x[s][m] == harr[s][m], 1.0, np.where(x[s][m] == TIE, 0.5, 0.0))))
        return f

    def kap(x: np.ndarray) -> Any:
        return lambda s: kappa(list(x[s]), list(harr[s]))

    every = np.arange(len(harr))
    out_r = {}
    for label, x, first, cons in (("letters", la, lfirst, lcons), ("soft", sa, sfirst, scons)):
        out_r[label] = {"accuracy": acc(x)(every), "decisive": decisive(x)(every), "kappa": kap(x)(every),
                        "pbias": float(np.mean(first)), "consistency": float(np.mean(cons)),
                        "ties": float(np.mean(x == TIE))}
    return {
        "what": s.what, "matches": len(harr), "human_ties": float(np.mean(harr == TIE)) if len(harr) else None,
        "runs": {p: r.run_id for p, r in reports.items()},
        "calls": {p: r.summary()["judge_calls"] for p, r in reports.items()},
        "requests": {p: r.summary()["judge_calls"] + r.summary()["cache_hits"] for p, r in reports.items()},
        "pearson": {p: figures[p]["pearson"] for p in figures}, "pearson_ci": {p: figures[p]["pearson_ci"]
                                                                            for p in figures},
        "gate": gate, "readings": out_r,
        "paired": {"accuracy": paired(acc(sa), acc(la), clusters), "decisive": paired(decisive(sa), decisive(la),
                                                                                       clusters),
                   "kappa": paired(kap(sa), kap(la), clusters)},
    }


def f3(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def ci(d: dict[str, Any]) -> str:
    c = d.get("ci")
    return f"{f3(d['delta'])} [{f3(c[0])}, {f3(c[1])}]" if c else f3(d.get("delta"))


def tables(out: dict[str, Any]) -> str:
    """The figures as markdown tables (the commit message's and docs/methods.md's)."""
    lines: list[str] = []
    p = out.get("pandalm")
    if p:
        lines += [f"PandaLM, first {p['n']} pairs with a human verdict, prompt I, both orders "
                  f"({p['calls']['requests']} requests; the soft run: {p['calls']['soft']} more calls). Three "
                  "classes: A, B, tie.", "",
                  "| reading | accuracy | kappa | PBias of its orders | consistency of its orders |",
                  "| --- | --- | --- | --- | --- |"]
        for name, r in p["readings"].items():
            lines.append(f"| {name} | {f3(r['accuracy'])} | {f3(r['kappa'])} | {f3(r['pbias'])} | "
                         f"{f3(r['consistency'])} |")
        lines += ["", f"| paired ({p.get('questions')} instructions resampled) | delta accuracy [95% CI] | "
                  "delta kappa [95% CI] |",
                  "| --- | --- | --- |"]
        for name, d in p["paired"].items():
            lines.append(f"| {name} | {ci(d['accuracy'])} | {ci(d['kappa'])} |")
        lines.append("")
    for name, k in (out.get("suites") or {}).items():
        lines += [f"{name} ({k['what']}): {k['matches']} matches with both orders read both ways "
                  f"(human ties {f3(k['human_ties'])}); judge calls letters {k['calls']['letter']}, soft "
                  f"{k['calls']['soft']} more.", "",
                  "| reading | accuracy (A/B/tie) | pairs the humans order: preferred the better | kappa | PBias | "
                  "consistency | ties | Pearson of the scores [95% CI] |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for label, key in (("letters", "letter"), ("soft", "soft")):
            r, pc = k["readings"][label], k["pearson_ci"][key]
            lines.append(f"| {label} | {f3(r['accuracy'])} | {f3(r['decisive'])} | {f3(r['kappa'])} | "
                         f"{f3(r['pbias'])} | {f3(r['consistency'])} | {f3(r['ties'])} | {f3(k['pearson'][key])}"
                         + (f" [{f3(pc[0])}, {f3(pc[1])}] |" if pc else " |"))
        g = k["gate"]
        gate_ci = g.get("delta_ci")
        lines += ["", "| paired, soft - letters (questions resampled) | delta [95% CI] |", "| --- | --- |",
                  f"| match accuracy | {ci(k['paired']['accuracy'])} |",
                  f"| pairs the humans order | {ci(k['paired']['decisive'])} |",
                  f"| match kappa | {ci(k['paired']['kappa'])} |",
                  f"| Pearson of the final scores ({g.get('changed')} scores changed) | {f3(g.get('delta'))}"
                  + (f" [{f3(gate_ci[0])}, {f3(gate_ci[1])}] |" if gate_ci else " |"), ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pandalm", type=int, default=0, help="the first N PandaLM pairs (0: none)")
    ap.add_argument("--suite", action="append", default=[], help="knockout suites of bench/accuracy.py")
    ap.add_argument("--judge", default="llamacpp")
    ap.add_argument("--out", type=Path, default=Path("soft_pairwise.db"))
    ap.add_argument("--save", type=Path, help="write the figures to this JSON file")
    args = ap.parse_args()
    judge_opts = {"threads": "2"} if args.judge.startswith("llamacpp") else {}
    out: dict[str, Any] = {"judge": args.judge}
    with Store(args.out) as store:
        if args.pandalm:
            out["pandalm"] = pandalm(args.pandalm, store, args.judge, judge_opts)
        for name in args.suite:
            out.setdefault("suites", {})[name] = knockout_suite(name, store, args.judge, judge_opts)
    if args.save:
        args.save.write_text(json.dumps(out, indent=1) + "\n")
    print(tables(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
