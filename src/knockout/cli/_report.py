"""``knockout report``, ``knockout compare`` and ``knockout agreement``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from knockout.cli._common import (
    JsonOpt,
    check_outputs,
    err,
    fail,
    options,
    out,
    print_json,
    print_tables,
    write_html,
)
from knockout.errors import ConfigError, KnockoutError
from knockout.metrics._constants import DEFAULT_RESAMPLES

if TYPE_CHECKING:  # the report modules load numpy, scipy and scikit-learn: only when a command runs
    from knockout.reports._tables import Table

Resamples = Annotated[int, typer.Option("--resamples", help="bootstrap resamples for the 95% CIs (0: none)")]
Seed = Annotated[int, typer.Option(help="bootstrap seed")]
HtmlOpt = Annotated[Path | None, typer.Option("--html", help="write a self-contained HTML report (needs "
                                              "knockout\\[plots])")]
ViewerOpt = Annotated[str | None, typer.Option("--viewer-url", help="with --html: link each run to its page in "
                                               "the transcript viewer of `knockout serve` at this URL")]


def report(
    run: Annotated[str, typer.Argument(help="the SQLite store (STORE or STORE:RUN_ID)")],
    run_id: Annotated[str | None, typer.Option("--run", help="run id (default: the latest grade run, else the "
                                               "latest side-by-side run)")] = None,
    level: Annotated[str, typer.Option(help="level of the headline and breakdowns: question or exam")] = "question",
    by: Annotated[str, typer.Option("--by", help="breakdowns, comma-separated: difficulty, language, examinee, "
                                    "exam, question, task, max_points, round, meta:KEY")] = "",
    html: HtmlOpt = None,
    viewer_url: ViewerOpt = None,
    calibrate: Annotated[bool, typer.Option("--calibrate", help="grading runs: add the grades adapted to the "
                                            "teacher's level on the expert grades (knockout calibrate)")] = False,
    per_question: Annotated[int | None, typer.Option("--calibrate-per-question", help="with --calibrate: "
                                                     "adapt on this many expert grades per question (1+)")] = None,
    resamples: Resamples = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    as_json: JsonOpt = False,
) -> None:
    """Agreement of a stored run with the human grades: metrics with CIs, breakdowns, ranking, plots.

    Each kind of run has its own report: a side-by-side run (knockout sbs) gets verdict distributions per
    order, kappa, MPCC, position-bias metrics, human x judge confusion, annotator agreement and cost."""
    from knockout.cli._progress import freeze_heap, gc_paused
    from knockout.reports._runs import parse_ref, pick_run, reads_as
    from knockout.runs import ReportOptions, kind_of
    from knockout.storage import Store

    try:
        from knockout._bounds import Bootstrap, Calibrating

        options(Bootstrap, resamples=resamples, seed=seed)
        options(Calibrating, calibrate_per_question=per_question)
        check_outputs(html)
        path, ref_id = parse_ref(run)
        with Store.open_existing(path) as store, gc_paused():
            record = pick_run(store, run_id or ref_id, "report")
            rep = kind_of(reads_as(record)).report(store, record, ReportOptions(
                level, by.split(","), resamples, seed, on_loaded=freeze_heap, calibrate=calibrate or
                per_question is not None, calibrate_per_question=per_question))
        emit_report(rep.data, rep.tables, rep.title, rep.plots, html, as_json, links_for(viewer_url, [record.id]))
    except KnockoutError as exc:
        fail(exc)


def links_for(viewer_url: str | None, run_ids: Sequence[str]) -> list[tuple[str, str]]:
    if viewer_url is None:
        return []
    from knockout.reports._html import viewer_links

    return viewer_links(viewer_url, run_ids)


def emit_report(rep: dict[str, Any], tables: Sequence[Table], title: str, plots: Callable[[], dict[str, bytes]],
                html: Path | None, as_json: bool, links: Sequence[tuple[str, str]] = ()) -> None:
    """Write the HTML page (when asked), then print the JSON object or the tables."""
    warn = status_warnings(rep["run"])
    if html is not None:
        from knockout.reports._html import page

        write_html(html, page(title, tables, plots(), warn, links))
    if as_json:
        print_json(rep)
        return
    for w in warn:
        err.print(f"[bold yellow]warning:[/] {w}", highlight=False)
    print_tables(tables)
    if html is not None:
        out.print(f"HTML report written to {html}")


def status_warnings(run: dict[str, Any]) -> list[str]:
    """What a reader must see before any figure: a run that is not complete, a simulated judge."""
    warn = []
    if run.get("status") != "complete":
        warn.append(f"run {run['run_id']} is {run.get('status')}: the figures cover only the "
                    f"{run.get('results', 'written')} results written so far, not the whole run" +
                    (f"; resume it with: {run['resume']}" if run.get("resume") else "."))
    if run.get("simulated_judge"):
        warn.append("The judge of this run is the scripted SIMULATION, not an LLM.")
    return warn


def compare(
    runs: Annotated[list[str], typer.Argument(help="runs: STORE (its latest grade run, else side-by-side run) or "
                                              "STORE:RUN_ID")],
    by: Annotated[str, typer.Option("--by", help="per-group comparison, comma-separated: difficulty, language, "
                                    "examinee, exam, modality, round, question, task, meta:KEY")] = "",
    html: HtmlOpt = None,
    viewer_url: ViewerOpt = None,
    prices: Annotated[Path | None, typer.Option("--prices", help="price table (TOML, per million tokens per "
                                                "judge; docs/reports.md): costs in money, paid and from "
                                                "scratch")] = None,
    resamples: Resamples = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    as_json: JsonOpt = False,
) -> None:
    """Methods x metrics with CIs and costs; paired tests (bootstrap, Williams) against the first run; --by:
    per-group figures and differences.  Side-by-side runs: the paper's table (A-E %, kappa, MPCC, PCon@AB,
    MPCC-Consistency, MPCC-delta) per judge or prompt, the human row first."""
    from contextlib import ExitStack

    from knockout.reports._runs import parse_ref, pick_run, reads_as
    from knockout.runs import ReportOptions, kind_of
    from knockout.storage import Store

    try:
        from knockout._bounds import Bootstrap

        options(Bootstrap, resamples=resamples, seed=seed)
        check_outputs(html)
        table = None
        if prices is not None:
            from knockout.reports._prices import load_prices

            table = load_prices(prices)
        with ExitStack() as stack:
            stores: dict[Path, Store] = {}
            refs = []
            for r in runs:
                path, ref_id = parse_ref(r)
                key = path.resolve()
                if key not in stores:
                    stores[key] = stack.enter_context(Store.open_existing(path))
                refs.append((stores[key], pick_run(stores[key], ref_id, "compare")))
            if len(refs) < 2:
                raise ConfigError("compare needs at least two runs")
            kinds = {reads_as(rec) for _, rec in refs}
            if len(kinds) > 1:
                raise ConfigError("compare reads runs of one kind: all grading runs or all side-by-side runs "
                                  f"(got {', '.join(f'{rec.id} ({reads_as(rec)})' for _, rec in refs)})")
            cmp = kind_of(kinds.pop()).compare(refs, ReportOptions(by=by.split(","), resamples=resamples, seed=seed,
                                                                   prices=table))
        if html is not None:
            from knockout.reports._html import page

            warn = [w for r in cmp.heads for w in status_warnings(r)]
            links = links_for(viewer_url, [rec.id for _, rec in refs])
            write_html(html, page(cmp.title, cmp.tables, cmp.plots(), warn, links))
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json(cmp.data)
        return
    from knockout.reports._tables import transpose

    # few runs: metrics as rows, runs as columns, so that the table fits a terminal
    # (a paper's layout is kept, and the --by tables keep their groups as rows)
    print_tables([transpose(t) if i < 2 and len(t.rows) <= 4 and cmp.transpose else t
                  for i, t in enumerate(cmp.tables)])
    if html is not None:
        out.print(f"HTML report written to {html}")


def agreement(
    verdicts: Annotated[Path, typer.Argument(help="verdict file (JSONL or CSV) or a folder of them")],
    human: Annotated[str, typer.Option("--human", help="field holding the human label or score")],
    verdict: Annotated[str | None, typer.Option("--verdict", help="field holding the judge's verdict (default: "
                                                "the first of verdict, winner, score, judge_score, "
                                                "prediction)")] = None,
    kind: Annotated[str, typer.Option(help="auto, pairwise (labels 0 tie / 1 / 2) or score")] = "auto",
    non_integer: Annotated[str, typer.Option("--non-integer", help="scores like 3.5: keep, exclude or "
                                             "round")] = "keep",
    resamples: Resamples = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    as_json: JsonOpt = False,
) -> None:
    """Agreement of verdicts produced elsewhere with human labels: accuracy or Pearson/Spearman, invalid count."""
    from knockout.reports._verdicts import analyse_verdicts, verdict_tables

    try:
        from knockout._bounds import Bootstrap

        options(Bootstrap, resamples=resamples, seed=seed)
        res = analyse_verdicts(verdicts, human, verdict, kind=kind, non_integer=non_integer,
                               resamples=resamples, seed=seed)
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json(res)
        return
    print_tables(verdict_tables(res))


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command()(compare)
    app.command()(agreement)
