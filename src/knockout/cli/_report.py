"""``knockout report``, ``knockout compare`` and ``knockout agreement``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from knockout._bounds import Bootstrap
from knockout.cli._main import JsonOpt, err, fail, options, out, print_json
from knockout.errors import ConfigError, KnockoutError
from knockout.metrics._constants import DEFAULT_RESAMPLES

if TYPE_CHECKING:  # the report modules load numpy, scipy and scikit-learn: only when a command runs
    from knockout.reports._report import Table
    from knockout.storage._store import RunRecord

Resamples = Annotated[int, typer.Option("--resamples", help="bootstrap resamples for the 95% CIs (0: none)")]
Seed = Annotated[int, typer.Option(help="bootstrap seed")]
HtmlOpt = Annotated[Path | None, typer.Option("--html", help="write a self-contained HTML report (needs "
                                              "knockout[plots])")]
ViewerOpt = Annotated[str | None, typer.Option("--viewer-url", help="with --html: link each run to its page in "
                                               "the transcript viewer of `knockout serve` at this URL")]


def print_tables(tables: Sequence[Table]) -> None:
    from rich.table import Table as RichTable

    for t in tables:
        rt = RichTable(title=t.title, caption=t.note or None, title_justify="left")
        for c in t.columns:
            rt.add_column(c, overflow="fold")
        for row in t.rows:
            rt.add_row(*row)
        out.print(rt)


def write_html(path: Path, text: str) -> None:
    from knockout.data._io import atomic_output

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path, newline=None) as f:
        f.write(text)


def report(
    run: Annotated[str, typer.Argument(help="the SQLite store (STORE or STORE:RUN_ID)")],
    run_id: Annotated[str | None, typer.Option("--run", help="run id (default: the latest grade run, else the "
                                               "latest side-by-side run)")] = None,
    level: Annotated[str, typer.Option(help="level of the headline and breakdowns: question or exam")] = "question",
    by: Annotated[str, typer.Option("--by", help="breakdowns, comma-separated: difficulty, language, examinee, "
                                    "exam, question, task, max_points, round, meta:KEY")] = "",
    html: HtmlOpt = None,
    viewer_url: ViewerOpt = None,
    resamples: Resamples = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    as_json: JsonOpt = False,
) -> None:
    """Agreement of a stored run with the human grades: metrics with CIs, breakdowns, ranking, plots.

    A side-by-side run (knockout sbs) gets its own report: verdict distributions per order, kappa,
    MPCC, position-bias metrics, human x judge confusion, annotator agreement and cost."""
    from knockout.cli._progress import freeze_heap, gc_paused
    from knockout.reports._report import build_report, report_tables
    from knockout.reports._runs import content_kind, find_run, load_run, parse_ref

    try:
        options(Bootstrap, resamples=resamples, seed=seed)
        path, ref_id = parse_ref(run)
        record = find_run(path, run_id or ref_id)
        links = links_for(viewer_url, [record.id])
        if content_kind(record) == "sbs":
            sbs_report(path, record, html, as_json, links, resamples=resamples, seed=seed)
            return
        with gc_paused():
            loaded = load_run(path, record.id, details=False)
        freeze_heap()
        rep, an = build_report(loaded, level=level, by=by.split(","), resamples=resamples, seed=seed)

        def plots() -> dict[str, bytes]:
            from knockout.reports._plots import report_plots

            return report_plots(rep, an)

        emit_report(rep, report_tables(rep), f"knockout report: run {loaded.run.id}", plots, html, as_json, links)
    except KnockoutError as exc:
        fail(exc)


def links_for(viewer_url: str | None, run_ids: Sequence[str]) -> list[tuple[str, str]]:
    if viewer_url is None:
        return []
    from knockout.reports._html import viewer_links

    return viewer_links(viewer_url, run_ids)


def sbs_report(path: Path, record: RunRecord, html: Path | None, as_json: bool,
               links: Sequence[tuple[str, str]] = (), *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> None:
    from knockout.reports._sbs_report import build_sbs_report, sbs_tables

    rep = build_sbs_report(path, record, resamples=resamples, seed=seed)

    def plots() -> dict[str, bytes]:
        from knockout.reports._plots import sbs_distribution

        return {"verdicts by order": sbs_distribution(rep)}

    emit_report(rep, sbs_tables(rep), f"knockout report: side-by-side run {record.id}", plots, html, as_json,
                links)


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
                    f"{run.get('results', 'written')} results written so far, not the whole run.")
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
    resamples: Resamples = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    as_json: JsonOpt = False,
) -> None:
    """Methods x metrics with CIs and costs; paired tests (bootstrap, Williams) against the first run; --by:
    per-group figures and differences.  Side-by-side runs: the paper's table (A-E %, kappa, MPCC, PCon@AB,
    MPCC-Consistency, MPCC-delta) per judge or prompt, the human row first."""
    from knockout.reports._runs import content_kind, find_run, load_run, parse_ref

    try:
        options(Bootstrap, resamples=resamples, seed=seed)
        refs = []
        for r in runs:
            path, ref_id = parse_ref(r)
            refs.append((path, find_run(path, ref_id)))
        kinds = {content_kind(rec) for _, rec in refs}
        if len(kinds) > 1:
            raise ConfigError("compare reads runs of one kind: all grading runs or all side-by-side runs "
                              f"(got {', '.join(f'{rec.id} ({content_kind(rec)})' for _, rec in refs)})")
        if kinds == {"sbs"}:
            if by:
                raise ConfigError("--by compares grading runs; side-by-side runs are compared as a whole")
            from knockout.reports._sbs_compare import build_sbs_comparison, sbs_comparison_tables

            cmp = build_sbs_comparison(refs, resamples=resamples, seed=seed)
            tables = sbs_comparison_tables(cmp)
            plots: Callable[[], dict[str, bytes]] = dict
        else:
            from knockout.reports._report import build_comparison, comparison_tables

            cmp = build_comparison([load_run(p, rec.id, details=False) for p, rec in refs], resamples=resamples,
                                   seed=seed, by=by.split(","))
            tables = comparison_tables(cmp)

            def plots() -> dict[str, bytes]:
                from knockout.reports._plots import cost_vs_agreement, group_deltas

                return {"cost vs agreement": cost_vs_agreement(cmp),
                        **{f"difference to the baseline by {g['key']}": group_deltas(cmp, g) for g in cmp["by"]}}

        if html is not None:
            from knockout.reports._html import page

            warn = [w for r in cmp["runs"] for w in status_warnings(r)]
            links = links_for(viewer_url, [rec.id for _, rec in refs])
            write_html(html, page("knockout: runs compared", tables, plots(), warn, links))
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json(cmp)
        return
    from knockout.reports._report import transpose

    # few runs: metrics as rows, runs as columns, so that the table fits a terminal
    # (the side-by-side table keeps the paper's layout, and the --by tables their groups as rows)
    print_tables([transpose(t) if i < 2 and len(t.rows) <= 4 and cmp.get("kind") != "sbs" else t
                  for i, t in enumerate(tables)])
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
