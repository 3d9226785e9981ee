"""``knockout sbs``: side-by-side evaluation of a candidate against a baseline (Titova et al.)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from knockout.cli._common import (
    AggregateOpt,
    FreqPenaltyOpt,
    JsonOpt,
    JudgeKV,
    JudgesOpt,
    JuryOpt,
    TopPOpt,
    fail,
    gen_params,
    options,
    out,
    parse_kv,
    print_json,
)
from knockout.cli._main import ExecutorOpt, jury_members
from knockout.errors import ConfigError, KnockoutError


def print_sbs(out_db: Path, summary: dict[str, Any]) -> None:
    """The tables of ``knockout report`` for the run just made (one rendering), then this invocation's cost."""
    from knockout.cli._common import print_tables
    from knockout.reports._runs import reads_as
    from knockout.runs import ReportOptions, kind_of
    from knockout.storage import Store

    with Store.open_existing(out_db) as store:
        record = store.find_run(summary["run_id"])
        print_tables(kind_of(reads_as(record)).report(store, record, ReportOptions()).tables)
    out.print(f"this invocation: {summary['judge_calls']} live judge calls, {summary['cache_hits']} from the cache, "
              f"{summary['waves']} waves, {summary['prompt_tokens']} + {summary['completion_tokens']} tokens, "
              f"{summary['wall_s']:.1f} s")


def sbs(
    data: Annotated[Path, typer.Argument(help="sbs JSONL, PandaLM JSON or meta-eval pairwise JSONL")],
    judge: JudgesOpt = None,
    judge_opt: JudgeKV = None,
    jury: JuryOpt = None,
    aggregate: AggregateOpt = None,
    prompt: Annotated[str, typer.Option(help="I, II, II-fact, II-reason, II-fact-reason, a preset or a file")] = "I",
    debate: Annotated[str, typer.Option(help="multi-agent judging: none, soft or hard")] = "none",
    verdict: Annotated[str, typer.Option("--verdict", help="how verdicts are read: auto (a choice slot where the "
                                         "prompt and backend have one, else free text), expected, constrained, "
                                         "text (docs/methods.md#the-verdict-slot)")] = "auto",
    preference: Annotated[str, typer.Option("--preference", help="letter (each order's verdict as the judge gave "
                                            "it) or soft (besides, each item's verdict from both orders' token "
                                            "probabilities, position prior removed; needs --verdict expected; "
                                            "docs/methods.md#soft-preferences)")] = "letter",
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
    top_p: TopPOpt = None,
    frequency_penalty: FreqPenaltyOpt = None,
    format_retries: Annotated[int, typer.Option(help="re-asks with a format reminder before E "
                                                "(paper: 0, E is counted)")] = 0,
    show_items: Annotated[bool, typer.Option(help="print the per-item verdicts")] = False,
    executor: ExecutorOpt = "local",
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Side-by-side: judge candidate vs baseline in both orders; verdict shares, kappa, MPCC, position bias."""
    from knockout.cli._progress import execute_in_store
    from knockout.judges import make_judge
    from knockout.sbs._data import load_sbs
    from knockout.sbs._run import SbsConfig, SbsRun

    try:
        from knockout._bounds import Selection

        # every option becomes a model first: a refused value stops here, before anything is read or opened
        selection = options(Selection, limit=limit)
        cfg = options(SbsConfig, prompt=prompt, debate=debate, verdict=verdict, preference=preference,
                      params=gen_params(temperature=temperature, max_tokens=max_tokens, seed=seed, top_p=top_p,
                                        frequency_penalty=frequency_penalty),
                      format_retries=format_retries, concurrency=concurrency, window=window, stride=stride)
        members, jury_file = jury_members(judge, jury)
        if aggregate and len(members) == 1 and jury_file is None:
            raise ConfigError("--aggregate needs a jury (several --judge, or --jury FILE)")
        items = load_sbs(data, tie=tie, candidate=candidate)[:selection.limit]
        kv = parse_kv(judge_opt, "--judge-opt")
        if len(members) > 1 or jury_file is not None:
            from knockout.jury import make_jury, sbs_member_runs

            runs = sbs_member_runs(items, members, cfg, kv, source=str(data), file=str(jury or "<command line>"))
            jr = make_jury(runs, members, aggregate=aggregate or (jury_file.aggregate if jury_file else None),
                           trim=jury_file.trim if jury_file else None)
            summary = execute_in_store(out_db, jr, quiet=quiet, executor=executor, as_json=as_json).summary()
            if as_json:
                print_json(summary)
            else:
                print_sbs(out_db, summary)
            return
        report = execute_in_store(out_db, SbsRun(items, make_judge(members[0].judge, kv), cfg, source=str(data)),
                                  quiet=quiet, executor=executor, as_json=as_json)
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
    try:
        print_sbs(out_db, summary)
    except KnockoutError as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    app.command(name="sbs")(sbs)
