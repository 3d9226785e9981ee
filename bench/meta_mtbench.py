"""Meta-evaluation on MT-bench: the embedded model as meta-judge over the study's recorded evaluators.

    python bench/meta_mtbench.py [--meta-judge llamacpp] [--items 40] [--frameworks jdeval,jdeval-i]
                                 [--max-tokens 512] [--n-ctx N] [--truncate 2000] [--out meta-mtbench.db]
                                 [--verdict auto|expected|constrained|text] [--vs-text]

Runs each framework on the first ``--items`` pairwise items of the meta-evaluation study (the first
391 are MT-bench, then 100 LLMBar), with the five recorded evaluators (gpt-4-1106-preview,
gpt-3.5-turbo, Qwen1.5-7B/14B/72B-Chat), through the store (cached and resumable: run the same
command again after a kill), and prints per framework: the ranking next to the human accuracy
ranking (the study's Table 1), Kendall tau, invalid replies, calls and time.  JDEval's outcomes are
exported to ``<out>.jdeval-matches.jsonl`` and re-analysed like ``knockout elo`` would at 200 and
1000 shuffles.  Judge calls: JDEval 3 per item, JDEval-i 5 per item (plus format retries).

``--verdict`` reads the meta-judge's verdicts as ``knockout meta --verdict`` does (``expected`` or
``constrained``: the meta presets' reasoning-first verdict slots; ``auto`` and ``text``: the free text).
``--vs-text`` (issue 51's gate of the meta presets' slots, like ``bench/accuracy.py --vs-text``) runs each
framework twice, with ``--verdict text`` and with the slot mode given, and prints the paired comparison on the
same judgements: the meta-judge's agreement with the human labels on the judgements both read, the text
reading's figure, the slot's, their paired-bootstrap delta with its 95% CI and p-value (items resampled), the
invalid judgements of each, and Kendall tau of each ranking against the study's human ranking.  The agreement:
JDEval/MDEval (a match of two assessments): the human labels make one evaluator right and the other wrong (its
target: that one wins) or both wrong (target: equally good, as the prompt asks); a match of two right ones has
no target and is left out; the figure is the share of matches whose outcome is the target.  JDEval-i/BSMEval
(a 1-5 score per assessment): on each item every pair of a right and a wrong assessment, 1 where the right one
scored higher, 0.5 level, 0 lower; the figure is their mean.

Gate of the meta presets' slots (run by the coordinator; about 2 x 8 calls per item with the 1.5B model):

    python bench/meta_mtbench.py --verdict expected --vs-text --items 40

Plumbing check (a handful of calls, weak model, short replies - mostly invalid):

    python bench/meta_mtbench.py --meta-judge llamacpp:qwen2.5-coder-0.5b --items 2 --max-tokens 64
    python bench/meta_mtbench.py --meta-judge llamacpp:qwen2.5-coder-0.5b --items 2 --max-tokens 64 \
        --verdict expected --vs-text
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from knockout.judges import GenParams, make_judge
from knockout.meta import (
    MetaConfig,
    MetaOptions,
    MetaReport,
    load_matches,
    load_verdicts,
    outcome_rows,
    run_meta,
    write_outcomes,
)
from knockout.meta._analysis import elo_report
from knockout.metrics._bootstrap import paired_bootstrap
from knockout.storage._store import Store

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VERDICTS = ROOT.parent / "shared" / "data" / "meta-evaluation" / "evaluator_results" / "pairwise"
MT_BENCH_ITEMS = 391  # rows 0..390 of the recorded files are MT-bench, then LLMBar
SLOT_MODES = ("expected", "constrained")
RESAMPLES = 2000
console = Console()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verdicts", type=Path, default=DEFAULT_VERDICTS)
    ap.add_argument("--meta-judge", default="llamacpp")
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--frameworks", default="jdeval,jdeval-i")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--n-ctx", type=int, default=None, help="llamacpp context (judge option n_ctx)")
    ap.add_argument("--truncate", type=int, default=2000)
    ap.add_argument("--shuffles", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("meta-mtbench.db"))
    ap.add_argument("--json", type=Path, default=None, help="also write the summaries to this file")
    ap.add_argument("--verdict", default="auto", help="how the meta-judge's verdicts are read (knockout meta "
                    "--verdict): auto, expected, constrained, text")
    ap.add_argument("--vs-text", action="store_true", help="run each framework with --verdict text too and print "
                    "the slot paired against the text reading")
    args = ap.parse_args(argv)
    if args.items > MT_BENCH_ITEMS:
        ap.error(f"only the first {MT_BENCH_ITEMS} items are MT-bench")
    if args.vs_text and args.verdict not in SLOT_MODES:
        ap.error(f"--vs-text pairs a slot mode against the text reading: add --verdict {' or '.join(SLOT_MODES)}")

    vs = load_verdicts(args.verdicts)
    opts = {"n_ctx": str(args.n_ctx)} if args.n_ctx else {}
    summaries: dict[str, Any] = {}
    pairs: dict[str, dict[str, Any]] = {}

    def meta(fw: str, verdict: str) -> MetaReport:
        judge = make_judge(args.meta_judge, opts)
        cfg = MetaConfig(options=MetaOptions(framework=fw, truncate=args.truncate, seed=args.seed),
                         params=GenParams(max_tokens=args.max_tokens, seed=args.seed), shuffles=args.shuffles,
                         verdict=verdict)
        store = Store(args.out)
        try:
            return run_meta(vs, judge, store, cfg, limit=args.items)
        finally:
            store.close()

    for fw in args.frameworks.split(","):
        if args.vs_text:  # the same framework, items and meta-judge, read from the free text: the slot's pair
            text = meta(fw, "text")
            summaries[f"{fw} (text)"] = text.summary()
            show(summaries[f"{fw} (text)"])
        report = meta(fw, args.verdict)
        s = report.summary()
        summaries[fw] = s
        show(s)
        if args.vs_text:
            pairs[fw] = paired(text, report)
        if fw in ("jdeval", "mdeval"):
            path = args.out.with_suffix(f".{fw}-matches.jsonl")
            write_outcomes(path, outcome_rows(report.judgements, run_id=report.run_id, meta_judge=report.judge))
            matches, skipped = load_matches(path) if s["matches"] else ([], 0)
            if matches:
                rep = elo_report(matches, shuffles=200, check=1000)
                console.print(f"{path}: {len(matches)} matches ({skipped} invalid); Elo 200 vs 1000 shuffles: "
                              f"max shift {rep['convergence']['max_shift']:.2f} points")
    if pairs:
        show_paired(pairs, args.verdict)
    if args.json:
        args.json.write_text(json.dumps({**summaries, **({"paired": pairs} if pairs else {})}, indent=1, default=str))
    return 0


# -- --vs-text: the meta-judge's agreement with the human labels, slot against text --------------------------------
def agreement(report: MetaReport) -> dict[str, float | None]:
    """Per unit (a match, or a pair of a right and a wrong assessment of one item), whether the meta-judge's
    verdict agrees with the human labels (1, 0.5 level scores, 0), None where it gave no valid verdict; units
    without a target (a match of two right assessments) are left out.  Keys: ``item|unit``."""
    items = {i.id: i for i in report.vs.items}

    def right(item_id: str, evaluator: str) -> bool:
        item = items[item_id]
        return item.assessments[evaluator].verdict == item.human

    out: dict[str, float | None] = {}
    if report.vs.kind != "pairwise":
        raise SystemExit("--vs-text reads the human labels of pairwise items (MT-bench)")
    js = [j for j in report.judgements if items[j.item].human is not None]
    if len(js) and len(js[0].evaluators) == 2:  # a match: the first shown evaluator's score, 1 / 0.5 / 0
        for j in js:
            a, b = (right(j.item, e) for e in j.evaluators)
            if a and b:
                continue
            target = 1.0 if a else 0.0 if b else 0.5
            out[f"{j.item}|{j.id}"] = None if not j.valid or j.value is None else float(j.value == target)
        return out
    scores: dict[str, dict[str, float | None]] = {}
    for j in js:
        scores.setdefault(j.item, {})[j.evaluators[0]] = j.value if j.valid else None
    for item_id, per in sorted(scores.items()):
        good = [e for e in per if right(item_id, e)]
        bad = [e for e in per if not right(item_id, e)]
        for g in good:
            for w in bad:
                x, y = per[g], per[w]
                out[f"{item_id}|{g}>{w}"] = None if x is None or y is None else (
                    1.0 if x > y else 0.5 if x == y else 0.0)
    return out


def paired(text: MetaReport, slot: MetaReport) -> dict[str, Any]:
    """The slot's agreement against the text reading's on the units both read, with the paired bootstrap."""
    a, b = agreement(text), agreement(slot)
    keys = sorted(k for k in b if b[k] is not None and a.get(k) is not None)
    st, ss = text.summary(), slot.summary()
    out: dict[str, Any] = {
        "units": len(b), "n": len(keys), "invalid_text": st["invalid"], "invalid_slot": ss["invalid"],
        "judgements": ss["judgements"], "tau_text": (st.get("kendall_tau") or {}).get("tau"),
        "tau_slot": (ss.get("kendall_tau") or {}).get("tau"),
        "agreement_text_all": _mean([v for v in a.values() if v is not None]),
        "agreement_slot_all": _mean([v for v in b.values() if v is not None]),
    }
    if not keys:
        return out
    t = np.array([a[k] for k in keys], dtype=float)
    s = np.array([b[k] for k in keys], dtype=float)
    clusters = np.unique(np.array([k.split("|")[0] for k in keys]), return_inverse=True)[1]
    pb = paired_bootstrap(lambda i: float(np.mean(s[i])), lambda i: float(np.mean(t[i])), clusters,
                          resamples=RESAMPLES if len(set(clusters.tolist())) >= 2 else 0)
    out.update(agreement_text=float(np.mean(t)), agreement_slot=float(np.mean(s)), delta=pb.delta,
               delta_ci=None if pb.low is None else [pb.low, pb.high], p_bootstrap=pb.p_value,
               changed=int(np.sum(t != s)))
    return out


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _f(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def show_paired(pairs: dict[str, dict[str, Any]], mode: str) -> None:
    t = Table(title=f"verdict slot ({mode}) paired against the text reading: agreement with the human labels")
    for col in ("framework", "units both read", "text", f"slot ({mode})", "delta [95% CI]", "p", "changed",
                "invalid text / slot", "Kendall tau text / slot"):
        t.add_column(col)
    for fw, p in pairs.items():
        ci = p.get("delta_ci")
        delta = f"{p['delta']:+.3f}" if p.get("delta") is not None else "-"
        t.add_row(fw, f"{p['n']} of {p['units']}", _f(p.get("agreement_text")), _f(p.get("agreement_slot")),
                  delta + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""), _f(p.get("p_bootstrap")),
                  str(p.get("changed", "-")), f"{p['invalid_text']} / {p['invalid_slot']} of {p['judgements']}",
                  f"{_f(p['tau_text'], 2)} / {_f(p['tau_slot'], 2)}")
    console.print(t, width=max(console.width, 150))
    console.print("units: JDEval/MDEval matches with a target (one evaluator right by the human label, or both wrong: "
                  "equally good); JDEval-i/BSMEval pairs of a right and a wrong assessment of one item (the right one "
                  "scored higher: 1, level: 0.5); items resampled")


def show(s: dict[str, Any]) -> None:
    human = s.get("human") or {}
    acc = {r["evaluator"]: (r["rank"], r["value"]) for r in human["all_items"]["ranking"]} if human else {}
    t = Table(title=f"{s['framework']} — meta-judge {s['judge']} — {s['items']} items (run {s['run_id']})")
    for col in ("rank", "evaluator", str(s["metric"]), "human accuracy (491 items)", "human rank"):
        t.add_column(col)
    for r in s["ranking"]:
        rank, value = acc.get(r["evaluator"], (None, None))
        t.add_row(str(r["rank"]), r["evaluator"], f"{r['value']:.3f}" if r["value"] is not None else "-",
                  f"{value:.4f}" if value is not None else "-", str(rank))
    console.print(t)
    tau = s.get("kendall_tau") or {}
    console.print(f"Kendall tau {tau.get('tau')} (p {tau.get('p_value')}); judgements {s['judgements']}: "
                  f"{s['valid']} valid, {s['invalid']} invalid; {s['judge_calls']} live calls, {s['cache_hits']} "
                  f"cached, {s['format_retries']} format retries; {s['wall_s']} s")


if __name__ == "__main__":
    sys.exit(main())
