"""``knockout run EXPERIMENT.toml``: every part of an experiment file, resumably, then its comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table as RichTable

from knockout.cli._common import JsonOpt, JudgeKV, err, fail, out, parse_kv, print_json
from knockout.errors import KnockoutError


def run(
    experiment: Annotated[Path, typer.Argument(help="experiment file (TOML; docs/experiments.md)")],
    out_db: Annotated[Path | None, typer.Option("--out", "-o", "--store", help="store (default: the file's "
                                                "'store', else NAME.db in the current folder)")] = None,
    judge: Annotated[list[str] | None, typer.Option("--judge", "-j", help="judge spec instead of the file's "
                                                    "\\[\\[judges]] (repeat it for several; e.g. scripted, "
                                                    "llamacpp:qwen2.5-coder-0.5b)")] = None,
    judge_opt: JudgeKV = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="check the file and list its parts and run ids; "
                                          "call no judge")] = False,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Run an experiment file: each part (method x judge, prompt x judge, framework x meta-judge, juries)
    through the store, resumably (a rerun makes no judge call), then print its comparison."""
    from knockout.cli._progress import execute_in_store
    from knockout.experiments import experiment_report, experiment_tables, plan, read_experiment, run_parts

    try:
        ef = read_experiment(experiment)
        if judge:
            ef = ef.with_judges(judge)
        store = ef.store_path(out_db)
        parts = plan(ef, parse_kv(judge_opt, "--judge-opt"))
        if dry_run:
            _print_plan(ef.exp.title or experiment.stem, parts, store, as_json)
            return
        for i, p in enumerate(parts, 1):
            if not quiet and not as_json:
                err.print(f"[bold]part {i}/{len(parts)}:[/] {p.name} (run {p.run_id})", highlight=False)

        def runner(path: Path, r: Any, label: str) -> Any:
            return execute_in_store(path, r, quiet=quiet, label=label)

        run_parts(parts, store, runner)
        rep = experiment_report(ef, parts, store)
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json(rep)
        return
    from knockout.cli._common import print_tables

    print_tables(experiment_tables(rep))
    from knockout.cli._common import knockout_command

    out.print(f"store: {store} ({len(parts)} runs; `{knockout_command()} report {store}:RUN_ID` for any of "
              "them)", markup=False, highlight=False)


def _print_plan(title: str, parts: list[Any], store: Path, as_json: bool) -> None:
    from knockout.storage import Store

    done: dict[str, str] = {}
    if store.is_file():
        with Store(store) as s:
            done = {r.id: r.status for r in s.runs()}
    rows = [{"row": p.row, "column": p.column, "kind": p.run.kind, "run_id": p.run_id,
             "status": done.get(p.run_id, "not run")} for p in parts]
    if as_json:
        print_json({"experiment": title, "store": str(store), "parts": rows})
        return
    t = RichTable(title=f"{title}: {len(rows)} parts, store {store}")
    for c in ("part", "judge", "kind", "run", "status"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["row"], r["column"], r["kind"], r["run_id"], r["status"])
    out.print(t)


def register(app: typer.Typer) -> None:
    app.command(name="run")(run)
