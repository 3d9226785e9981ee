"""``knockout meta`` (meta-evaluate judges with a meta-judge) and ``knockout elo`` (win rates and
shuffled Elo from recorded pairwise outcomes)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from knockout.cli._common import (
    JsonOpt,
    JudgeKV,
    check_outputs,
    fail,
    fmt,
    gen_params,
    options,
    out,
    parse_kv,
    print_json,
)
from knockout.cli._main import ExecutorOpt
from knockout.errors import ConfigError, KnockoutError


def _ranking_table(summary: dict[str, Any]) -> Table:
    metric = summary["metric"]
    human = summary.get("human") or {}
    base = (human.get("all_items") or {}).get("evaluators", {})
    hkey = human.get("metric", "")
    hrank = {r["evaluator"]: r["rank"] for r in (human.get("all_items") or {}).get("ranking", [])}
    t = Table(title=f"meta-evaluation {summary['run_id']} — {summary['framework']} — meta-judge {summary['judge']}")
    for col in ("rank", "evaluator", "Elo" if metric == "elo" else "mean score", "± (shuffles)" if metric == "elo"
                else "scored", f"human {hkey}" if hkey else "human", "human rank"):
        t.add_column(col, justify="left" if col == "evaluator" else "right", no_wrap=col == "evaluator")
    for r in summary["ranking"]:
        e = r["evaluator"]
        if metric == "elo":
            spread = fmt((summary["elo"] or {}).get("std", {}).get(e), 1)
        else:
            s = summary["scores"][e]
            spread = f"{s['n']} (+{s['invalid']} invalid)"
        t.add_row(str(r["rank"]), e, fmt(r["value"], 2 if metric == "elo" else 3), spread,
                  fmt((base.get(e) or {}).get(hkey)), fmt(hrank.get(e)))
    return t


def _win_table(table: dict[str, dict[str, dict[str, float]]], title: str) -> Table:
    players = sorted(table)
    t = Table(title=title)
    t.add_column("row beats column", no_wrap=True)
    for p in players:
        t.add_column(p, justify="right")
    for a in players:
        cells = []
        for b in players:
            c = table[a].get(b)
            cells.append("" if c is None else f"{c['win']:.2f} ({int(c['n'])})")
        t.add_row(a, *cells)
    return t


def _print_elo(elo: dict[str, Any]) -> None:
    c = elo["convergence"]
    state = "converged" if c["converged"] else "NOT converged"
    out.print(f"Elo: K={elo['k']:g} from {elo['initial']:g}, mean of {elo['shuffles']} shuffled orders; "
              f"with {c['shuffles']} shuffles no rating moves more than {c['max_shift']:.2f} points ({state}, "
              f"tolerance {c['tolerance']:g})")


def register(app: typer.Typer) -> None:
    @app.command()
    def meta(
        verdicts: Annotated[Path, typer.Argument(help="folder of evaluator files, a JSONL/CSV with an "
                                                 "'evaluator' field, or a knockout store (.db)")],
        meta_judge: Annotated[str, typer.Option("--meta-judge", "-j", help="the meta-judge's spec")] = "llamacpp",
        judge_opt: JudgeKV = None,
        framework: Annotated[str, typer.Option(help="jdeval | mdeval | jdeval-i | bsmeval")] = "jdeval",
        human: Annotated[str, typer.Option("--human", help="field with the human label")] = "label",
        limit: Annotated[int | None, typer.Option(help="only the first N items")] = None,
        self_name: Annotated[str | None, typer.Option("--self", help="the evaluator that is the meta-judge "
                                                      "itself (self-preference check), or none")] = None,
        draws: Annotated[int, typer.Option(help="jdeval/mdeval: pairs of evaluators drawn per item")] = 3,
        both_orders: Annotated[bool, typer.Option(help="jdeval/mdeval: show each drawn pair in both orders "
                                                  "(the study shows one random order)")] = False,
        rounds: Annotated[int, typer.Option(help="mdeval: the judge must decide by this round")] = 5,
        debater: Annotated[str | None, typer.Option(help="mdeval: spec of the debater agents (default: the "
                                                    "meta-judge)")] = None,
        max_criteria: Annotated[int, typer.Option(help="bsmeval: sub-criteria at most")] = 5,
        prompts: Annotated[str, typer.Option(help="mdeval/bsmeval: own (knockout's presets) or authors (the "
                                             "prompts of the authors' published code; bsmeval: OpenMEVA "
                                             "stories only)")] = "own",
        verdict: Annotated[str, typer.Option("--verdict", help="how the meta-judge's verdicts are read: auto (free "
                                             "text: the meta presets' slots are used only when named), expected, "
                                             "constrained (the verdict slot: JDEval's and MDEval's choice, "
                                             "JDEval-i's and BSMEval's score), text "
                                             "(docs/meta-evaluation.md#the-verdict-slot)")] = "auto",
        truncate: Annotated[int | None, typer.Option(help="cut each long field to N characters (0: never; "
                                                     "default: the framework's, 2000)")] = None,
        k: Annotated[float, typer.Option("--k", help="Elo K")] = 4.0,
        shuffles: Annotated[int, typer.Option(help="Elo: shuffled orders averaged")] = 200,
        export_matches: Annotated[Path | None, typer.Option(help="jdeval/mdeval: write the outcomes as JSONL "
                                                            "for 'knockout elo'")] = None,
        out_db: Annotated[Path, typer.Option("--out", "-o", help="SQLite store for calls and runs")] = Path(
            "knockout.db"),
        concurrency: Annotated[int | None, typer.Option(help="calls in flight (default: backend's)")] = None,
        seed: Annotated[int, typer.Option(help="seed for the draws, the positions and the judge")] = 0,
        temperature: Annotated[float, typer.Option(help="sampling temperature")] = 0.1,
        max_tokens: Annotated[int, typer.Option(help="max tokens per reply")] = 512,
        format_retries: Annotated[int, typer.Option(help="re-asks with a format reminder before invalid")] = 2,
        executor: ExecutorOpt = "local",
        as_json: JsonOpt = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
    ) -> None:
        """Meta-evaluate evaluators (LLM judges) from their recorded verdicts with a meta-judge."""
        from knockout.cli._progress import execute_in_store
        from knockout.judges import make_judge
        from knockout.meta import MetaConfig, MetaOptions, MetaRun, load_verdicts, outcome_rows, write_outcomes
        from knockout.meta._frameworks import is_paired
        from knockout.meta._prompts import DEFAULT_TRUNCATE

        try:
            from knockout._bounds import Selection

            # every option becomes a model first: a refused value stops here, before anything is opened
            selection = options(Selection, limit=limit)
            opts = options(MetaOptions, framework=framework, draws=draws, both_orders=both_orders, rounds=rounds,
                           max_criteria=max_criteria,
                           truncate=DEFAULT_TRUNCATE if truncate is None else truncate, seed=seed,
                           prompts=prompts)
            opts.check()
            cfg = options(MetaConfig, options=opts, params=gen_params(temperature=temperature, max_tokens=max_tokens,
                                                                     seed=seed),
                          k=k, shuffles=shuffles, self_name=None if (self_name or "none").lower() == "none"
                          else self_name, concurrency=concurrency, format_retries=format_retries, verdict=verdict)
            if export_matches and not is_paired(framework):
                raise ConfigError("--export-matches needs a paired framework (jdeval or mdeval)")
            check_outputs(export_matches)
            vs = load_verdicts(verdicts, human_field=human)
            kv = parse_kv(judge_opt, "--judge-opt")
            j = make_judge(meta_judge, kv)
            d = make_judge(debater, kv) if debater else None
            report = execute_in_store(out_db, MetaRun(vs, j, cfg, limit=selection.limit, debater=d), quiet=quiet,
                                      label="meta-judging", executor=executor, as_json=as_json)
            if export_matches:
                write_outcomes(export_matches, outcome_rows(report.judgements, run_id=report.run_id,
                                                            meta_judge=report.judge))
        except KnockoutError as exc:
            fail(exc)
            return
        summary = report.summary()
        if as_json:
            print_json(summary)
            return
        out.print(_ranking_table(summary))
        if summary["metric"] == "elo":
            out.print(_win_table(summary["win_rates"], "win rates (eq. 1: wins / matches; ties apart), (matches)"))
            if summary["elo"]:
                _print_elo(summary["elo"])
        tau = summary.get("kendall_tau") or {}
        if summary.get("human"):
            out.print(f"Kendall tau (meta ranking vs human {summary['human']['metric']} on all "
                      f"{summary['human']['all_items']['items']} items): {fmt(tau.get('tau'))} "
                      f"(p = {fmt(tau.get('p_value'))}, n = {tau.get('n')}); on the run's items: "
                      f"{fmt((summary.get('kendall_tau_run_items') or {}).get('tau'))}")
        sp = summary.get("self_preference")
        if sp:
            out.print(f"self-preference ({sp['evaluator']}): " + ", ".join(
                f"{k_} {fmt(v)}" for k_, v in sp.items() if k_ != "evaluator"))
        read = "from free text" if summary["verdict"] == "text" else f"from the verdict slot ({summary['verdict']})"
        out.print(f"{summary['judgements']} meta-judgements ({summary['valid']} valid, {summary['invalid']} invalid) "
                  f"on {summary['items']} items, verdicts read {read}; {summary['judge_calls']} live calls, "
                  f"{summary['cache_hits']} from cache, {summary['wall_s']:.1f} s")
        if summary["simulated_judge"]:
            out.print("NOTE: scripted judge: a simulation, not an LLM")

    @app.command()
    def elo(
        matches: Annotated[Path, typer.Argument(help="JSONL/CSV outcomes: evaluator_1, evaluator_2 (or model_a, "
                                                "model_b), winner (Assistant1 / Assistant2 / equally good)")],
        k: Annotated[float, typer.Option("--k", help="Elo K")] = 4.0,
        shuffles: Annotated[int, typer.Option(help="shuffled orders averaged")] = 200,
        check: Annotated[int | None, typer.Option(help="convergence check: shuffles to compare with "
                                                  "(default 5 x --shuffles)")] = None,
        seed: Annotated[int, typer.Option(help="seed of the shuffles")] = 0,
        as_json: JsonOpt = False,
    ) -> None:
        """Win rates and Elo (averaged over shuffled match orders) from recorded pairwise outcomes."""
        from knockout.meta import _analysis as analysis
        from knockout.meta._outcomes import load_matches

        try:
            options(analysis.EloOptions, k=k, shuffles=shuffles, check=check, seed=seed)
            ms, skipped = load_matches(matches)
        except KnockoutError as exc:
            fail(exc)
            return
        table = analysis.match_table(ms)
        report = analysis.elo_report(ms, k=k, shuffles=shuffles, seed=seed, check=check)
        ranked = analysis.ranking(dict(report["ratings"]))
        result = {"matches": len(ms), "skipped": skipped, "elo": report, "win_rates": table, "ranking": ranked}
        if as_json:
            print_json(result)
            return
        t = Table(title=f"Elo from {matches} ({len(ms)} matches, {skipped} without a valid outcome)")
        for col in ("rank", "player", "Elo", "± (shuffles)", f"Elo ({report['convergence']['shuffles']})"):
            t.add_column(col, justify="left" if col == "player" else "right", no_wrap=col == "player")
        for r in ranked:
            p = r["evaluator"]
            t.add_row(str(r["rank"]), p, f"{r['value']:.2f}", f"{report['std'][p]:.1f}",
                      f"{report['convergence']['ratings'][p]:.2f}")
        out.print(t)
        out.print(_win_table(table, "win rates (eq. 1: wins / matches; ties apart), (matches)"))
        _print_elo(report)
