"""``knockout sbs``: side-by-side evaluation of a candidate against a baseline (Titova et al.)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from knockout.cli.main import JsonOpt, JudgeKV, JudgeOpt, fail, fmt, out, parse_kv, print_json
from knockout.errors import KnockoutError


def _pct(d: dict[str, float]) -> str:
    return "  ".join(f"{c} {100 * d[c]:.1f}" for c in "ABCDE")


def print_sbs(summary: dict[str, Any]) -> None:
    m = summary["metrics"]
    t = Table(title=f"run {summary['run_id']} — {summary['method']} — {summary['prompt']} — {summary['judge']}",
              show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value")
    dist = m["distribution"]
    rows: list[tuple[str, Any]] = [
        ("items", f"{summary['items']} ({summary['orders_invalid']} of {2 * summary['items']} orders E)"),
        ("verdicts % swap 0 (cand. first)", _pct(dist["swap0"])),
        ("verdicts % swap 1 (base. first)", _pct(dist["swap1"])),
        ("verdicts % mean", _pct(dist["mean"])),
    ]
    if "human_distribution" in m:
        kappa, mpcc = m["kappa"], m["mpcc"]
        rows += [
            ("human verdicts %", f"{_pct(m['human_distribution'])}  (n {m['n_human']})"),
            ("Cohen's kappa (0 / 1 / mean)", f"{fmt(kappa['swap0'])} / {fmt(kappa['swap1'])} / {fmt(kappa['mean'])}"),
            ("kappa, C+D merged (mean)", fmt(m["kappa_3class"]["mean"])),
            ("accuracy (mean, delta)", f"{fmt(m['accuracy']['mean'])}, {fmt(m['accuracy']['delta'])}"),
            (f"MPCC N={m['window']} K={m['stride']} (0 / 1 / mean)",
             f"{fmt(mpcc['swap0'])} / {fmt(mpcc['swap1'])} / {fmt(mpcc['mean'])}"),
            ("MPCC-delta", fmt(m["mpcc_delta"])),
        ]
    rows += [
        ("MPCC-Consistency", fmt(m["mpcc_consistency"])),
        ("PBias@AB (+ first, - second)", fmt(m["pbias_ab"])),
        ("Con@ABCD", fmt(m["con_abcd"])),
        ("PCon@AB", fmt(m["pcon_ab"])),
        ("judge calls", f"{summary['judge_calls']} live, {summary['cache_hits']} from cache, {summary['waves']} waves"),
        ("tokens", f"{summary['prompt_tokens']} prompt + {summary['completion_tokens']} completion"),
        ("wall time", f"{summary['wall_s']:.1f} s"),
    ]
    ha = summary.get("human_agreement") or {}
    if ha.get("pairs"):
        rows.append(("annotator kappa (Cohen)", ", ".join(f"{k} {fmt(v)}" for k, v in ha["pairs"].items())))
        rows.append(("annotator Fleiss' kappa", f"{fmt(ha['fleiss'])} (n {ha['n_fleiss']})"))
    if summary.get("simulated_judge"):
        rows.append(("NOTE", "scripted judge: a simulation, not an LLM"))
    for k, v in rows:
        t.add_row(k, str(v))
    out.print(t)


def sbs(
    data: Annotated[Path, typer.Argument(help="sbs JSONL, PandaLM JSON or meta-eval pairwise JSONL")],
    judge: JudgeOpt = "llamacpp",
    judge_opt: JudgeKV = None,
    prompt: Annotated[str, typer.Option(help="I, II, II-fact, II-reason, II-fact-reason, a preset or a file")] = "I",
    debate: Annotated[str, typer.Option(help="multi-agent judging: none, soft or hard")] = "none",
    candidate: Annotated[str, typer.Option(help="pairwise sources: which response is the candidate "
                                           "(first or second)")] = "first",
    tie: Annotated[str, typer.Option(help="pairwise sources: a human tie becomes C (both good) or D")] = "C",
    window: Annotated[int, typer.Option(help="MPCC sliding window size N")] = 20,
    stride: Annotated[int, typer.Option(help="MPCC sliding window stride K")] = 5,
    limit: Annotated[int | None, typer.Option(help="only the first N items")] = None,
    out_db: Annotated[Path, typer.Option("--out", "-o", help="SQLite store for calls and runs")] = Path(
        "knockout.db"
    ),
    concurrency: Annotated[int | None, typer.Option(help="judge calls in flight (default: backend's)")] = None,
    seed: Annotated[int, typer.Option(help="seed for the judge")] = 0,
    temperature: Annotated[float, typer.Option(help="sampling temperature (paper: 0.0)")] = 0.0,
    max_tokens: Annotated[int, typer.Option(help="max tokens per reply (paper: 1024)")] = 1024,
    format_retries: Annotated[int, typer.Option(help="re-asks with a format reminder before E "
                                                "(paper: 0, E is counted)")] = 0,
    show_items: Annotated[bool, typer.Option(help="print the per-item verdicts")] = False,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Side-by-side: judge candidate vs baseline in both orders; verdict shares, kappa, MPCC, position bias."""
    from knockout.judges import GenParams, make_judge
    from knockout.sbs.data import load_sbs
    from knockout.sbs.method import SbsConfig, run_sbs
    from knockout.storage.store import Store

    try:
        items = load_sbs(data, tie=tie, candidate=candidate)[:limit]
        cfg = SbsConfig(prompt=prompt, debate=debate,
                        params=GenParams(temperature=temperature, max_tokens=max_tokens, seed=seed),
                        format_retries=format_retries, concurrency=concurrency, window=window, stride=stride)
        j = make_judge(judge, parse_kv(judge_opt, "--judge-opt"))
        store = Store(out_db)
        try:
            report = run_sbs(items, j, store, cfg, source=str(data), progress=not quiet)
        finally:
            store.close()
    except KnockoutError as exc:
        fail(exc)
        return
    summary = report.summary()
    if as_json:
        print_json(summary)
        return
    if show_items:
        t = Table(title="per-item verdicts (candidate terms: A candidate better, B baseline better)")
        for col in ("item", "human", "swap 0", "swap 1", "note"):
            t.add_column(col)
        for v in report.items:
            d = v.details(report.prompt, report.debate)
            t.add_row(v.item.id, d["human"] or "-", d["verdicts"]["swap0"], d["verdicts"]["swap1"],
                      (d["error"] or "")[:60])
        out.print(t)
    print_sbs(summary)


def register(app: typer.Typer) -> None:
    app.command(name="sbs")(sbs)
