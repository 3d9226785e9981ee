"""``knockout solve``, ``knockout leaderboard`` and ``knockout demo --sciex`` (SciEx end to end)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from knockout.cli._common import JsonOpt, check_outputs, err, fail, gen_params, options, out, parse_kv, print_json
from knockout.errors import ConfigError, KnockoutError
from knockout.metrics._constants import DEFAULT_RESAMPLES

if TYPE_CHECKING:
    from knockout.data._records import ItemSet
    from knockout.sciex._solve import SolveReport

FiguresOpt = Annotated[str, typer.Option("--figures", help="how figures go to the model: auto (captioned images "
                                         "for a model that takes images, else left out), none, separate, stacked "
                                         "(one image, for models that accept one)")]


def load_exams(paths: Sequence[Path], fmt: str, data_opt: list[str] | None, limit: int | None) -> ItemSet:
    """The questions (and any answers) of every exam given, as one item set; ``limit``: the first N questions."""
    from knockout._bounds import Selection
    from knockout.data import ItemSet, load_item_sets

    limit = options(Selection, limit=limit).limit
    opts: dict[str, Any] = dict(parse_kv(data_opt, "--data-opt"))
    items = load_item_sets(paths, fmt, **opts)
    questions = list(items.questions.values())[:limit]
    keep = {q.id for q in questions}
    return ItemSet(questions, [a for a in items if a.question_id in keep], source=items.source)


def solve_models(exam: ItemSet, models: Sequence[str], store: Path, *, model_opt: dict[str, str], prompt: str,
                 figures: str, max_tokens: int, temperature: float, seed: int, concurrency: int | None,
                 format_retries: int, quiet: bool) -> list[SolveReport]:
    """One solve run per model (``NAME=SPEC`` or ``SPEC``), through the store."""
    from knockout.cli._progress import execute_in_store
    from knockout.judges import make_judge
    from knockout.sciex._solve import SolveConfig, SolveRun, parse_model

    named = [parse_model(m) for m in models]
    names = [n for n, _ in named]
    if not named:
        raise ConfigError("give at least one examinee model: --model SPEC (or NAME=SPEC)")
    if len(set(names)) != len(names):
        raise ConfigError(f"two models have the same examinee name ({', '.join(names)}); use --model NAME=SPEC")
    cfg = options(SolveConfig, prompt=prompt, figures=figures, concurrency=concurrency,
                  format_retries=format_retries, params=gen_params(temperature=temperature, max_tokens=max_tokens,
                                                                   seed=seed))
    runs = [SolveRun(exam, make_judge(spec, model_opt), cfg, examinee=name) for name, spec in named]
    for r in runs:  # every model checked before any is asked
        r.check()
    return [execute_in_store(store, r, quiet=quiet, label=f"solving as {r.examinee}") for r in runs]


def solved_items(exam: ItemSet, reports: Sequence[SolveReport]) -> ItemSet:
    from knockout.data import ItemSet

    return ItemSet(exam.questions.values(), [*exam.answers, *(a for r in reports for a in r.answers)],
                   source=exam.source)


def print_solve(reports: Sequence[SolveReport], folders: Sequence[Path], jsonl: Path) -> None:
    t = Table(title="knockout solve")
    for col in ("examinee", "model", "answered", "empty", "failed", "figures sent", "figures left out",
                "calls live/cached", "wall s"):
        t.add_column(col)
    for r in reports:
        s = r.summary()
        t.add_row(r.examinee, r.model + (" (SIMULATION)" if r.simulated else ""), str(s["answered"]), str(s["empty"]),
                  str(s["failed_answers"]), str(s["figures_sent"]), str(s["figures_left_out"]),
                  f"{s['judge_calls']}/{s['cache_hits']}", f"{s['wall_s']:.1f}")
    out.print(t)
    for r in reports:
        if r.summary()["failed_answers"]:
            err.print(f"[bold yellow]warning:[/] {r.examinee}: some questions got no answer (the backend failed); "
                      "run the same command again to ask them again")
    out.print(f"SciEx exam folders: {', '.join(str(f) for f in folders)}")
    out.print(f"item set (JSONL): {jsonl}   next: knockout grade {jsonl} --reference")


def solve(
    exams: Annotated[list[Path], typer.Argument(help="exams: SciEx exam folders or JSON files, folders of SciEx exam "
                                                "folders, or JSONL item sets (together: one item set)")],
    model: Annotated[list[str], typer.Option("--model", "-m", help="examinee model spec, or NAME=SPEC; repeat for "
                                             "several examinees")],
    model_opt: Annotated[list[str] | None, typer.Option("--model-opt", help="backend option key=value for every "
                                                        "model")] = None,
    out_dir: Annotated[Path, typer.Option("--out-dir", "-d", help="where the solved exams are written (SciEx "
                                          "folders and solved.jsonl)")] = Path("solved"),
    out_db: Annotated[Path, typer.Option("--out", "-o", help="SQLite store for calls and runs")] = Path("knockout.db"),
    prompt: Annotated[str, typer.Option(help="answer prompt: auto (sciex-solve-<language>), a solve preset or a "
                                        "template file")] = "auto",
    figures: FiguresOpt = "auto",
    fmt_: Annotated[str, typer.Option("--format", help="input format (auto, sciex, jsonl, ...)")] = "auto",
    data_opt: Annotated[list[str] | None, typer.Option("--data-opt", help="loader option key=value")] = None,
    limit: Annotated[int | None, typer.Option(help="only the first N questions")] = None,
    temperature: Annotated[float, typer.Option(help="sampling temperature")] = 0.1,
    max_tokens: Annotated[int, typer.Option(help="max tokens per answer")] = 1024,
    seed: Annotated[int, typer.Option(help="seed of the models")] = 0,
    concurrency: Annotated[int | None, typer.Option(help="calls in flight (default: backend's)")] = None,
    format_retries: Annotated[int, typer.Option(help="re-asks of an empty answer")] = 2,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Models answer exam questions as SciEx examinees; writes SciEx exam folders and a JSONL to grade."""
    from knockout.sciex._output import write_solved

    try:
        from knockout.data._output import output_folder

        output_folder(out_dir, make=False)
        exam = load_exams(exams, fmt_, data_opt, limit)
        reports = solve_models(exam, model, out_db, model_opt=parse_kv(model_opt, "--model-opt"), prompt=prompt,
                               figures=figures, max_tokens=max_tokens, temperature=temperature, seed=seed,
                               concurrency=concurrency, format_retries=format_retries, quiet=quiet)
        folders, jsonl = write_solved(solved_items(exam, reports), out_dir)
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json({"runs": [r.summary() for r in reports],
                    "output": {"folders": [str(f) for f in folders], "jsonl": str(jsonl)}})
        return
    print_solve(reports, folders, jsonl)


def make_board(store: Path, runs: Sequence[str], llm_grades: Sequence[Path], resamples: int,
               seed: int, exams: ItemSet | None = None, expert_sample: float | None = None) -> dict[str, Any]:
    from knockout.sciex._leaderboard import build_leaderboard, gather, released_judges, within_exams

    g = gather(store, runs)
    items = g.items if exams is None else within_exams(g.items, exams)
    judges = [*g.judges, *released_judges(llm_grades, items)]
    board = build_leaderboard(items, judges, resamples=resamples, seed=seed, expert_sample=expert_sample)
    board["store"] = str(store)
    board["runs_skipped"] = g.runs_skipped
    board["human_grades"] = g.human_grades
    return board


def show_board(board: dict[str, Any], *, csv_out: Path | None, html: Path | None, as_json: bool) -> None:
    from knockout.cli._common import print_tables, write_html
    from knockout.sciex._leaderboard import leaderboard_csv, leaderboard_html, leaderboard_tables

    if csv_out is not None:
        write_html(csv_out, leaderboard_csv(board))
    if html is not None:
        write_html(html, leaderboard_html(board))
    if as_json:
        print_json(board)
        return
    for note in board["notes"]:
        err.print(f"[bold yellow]note:[/] {note}", highlight=False)
    if any(j["simulated"] for j in board["judges"]):
        err.print("[bold yellow]warning:[/] a judge is the scripted SIMULATION, not an LLM", highlight=False)
    for run_id, why in board["runs_skipped"].items():
        err.print(f"[bold yellow]warning:[/] run {run_id} left out ({why})", highlight=False)
    print_tables(leaderboard_tables(board))
    for path, what in ((csv_out, "CSV"), (html, "HTML page")):
        if path is not None:
            out.print(f"{what} written to {path}")


def leaderboard(
    store: Annotated[Path, typer.Argument(help="the SQLite store with grade runs")],
    run: Annotated[list[str] | None, typer.Option("--run", help="grade runs to use as judges (default: every "
                                                  "complete grade run)")] = None,
    llm_grades: Annotated[list[Path] | None, typer.Option("--llm-grades", help="SciEx's released LLM grade files "
                                                          "(a file or folder of llm_grade_exam.py output)")] = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="write the leaderboard as CSV")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="write an HTML page with bar charts (needs "
                                              "knockout\\[plots])")] = None,
    resamples: Annotated[int, typer.Option("--resamples", help="bootstrap resamples for the 95% CIs (0: "
                                           "none)")] = DEFAULT_RESAMPLES,
    seed: Annotated[int, typer.Option(help="bootstrap seed (and the draw of --expert-sample)")] = 0,
    expert_sample: Annotated[float | None, typer.Option(
        "--expert-sample", help="keep the expert grades of this random fraction of the expert-graded answers "
        "only, and show the prediction-powered estimates (needs knockout\\[calibration]) against the figures from "
        "all of them")] = None,
    exams: Annotated[list[Path] | None, typer.Option("--exams", help="only these exams (SciEx exam folders, a folder "
                                                     "of them, or JSONL; repeat for several: one item set), their "
                                                     "expert grades added")] = None,
    fmt_: Annotated[str, typer.Option("--format", help="input format of --exams")] = "auto",
    data_opt: Annotated[list[str] | None, typer.Option("--data-opt", help="loader option key=value for "
                                                       "--exams")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The SciEx leaderboard: examinees by expert- and judge-graded %, German grades, the student average, and
    each judge's Pearson with the experts; prediction-powered estimates where experts graded a subset."""
    try:
        from knockout._bounds import Bootstrap

        options(Bootstrap, resamples=resamples, seed=seed)
        check_outputs(csv_out, html)
        exam_set = load_exams(exams, fmt_, data_opt, None) if exams else None
        board = make_board(store, run or [], llm_grades or [], resamples, seed, exam_set, expert_sample)
        show_board(board, csv_out=csv_out, html=html, as_json=as_json)
    except KnockoutError as exc:
        fail(exc)


EXAMPLE_EXAMS = ("cs-basics-en", "cs-basics-de")


def sciex_demo(judge: str, judge_opt: dict[str, str], models: Sequence[str], out_db: Path | None, as_json: bool,
               quiet: bool) -> None:
    """``knockout demo --sciex``: the example exam solved by ``models``, graded by ``judge``, the leaderboard."""
    from knockout.judges import GenParams, make_judge
    from knockout.judges._models import cache_dir
    from knockout.methods._base import MethodOptions
    from knockout.methods._run import GradeRun, RunConfig
    from knockout.sciex._output import write_solved

    store = out_db or cache_dir() / "sciex-demo" / "sciex-demo.db"
    folder = resources.files("knockout.examples") / "sciex"
    with resources.as_file(folder) as root:
        exam = load_exams([root / name for name in EXAMPLE_EXAMS], "sciex", None, None)
    reports = solve_models(exam, models, store, model_opt=judge_opt, prompt="auto", figures="auto", max_tokens=384,
                           temperature=0.1, seed=0, concurrency=None, format_retries=2, quiet=quiet)
    _, jsonl = write_solved(solved_items(exam, reports), store.parent / f"{store.stem}-solved")
    from knockout.cli._progress import execute_in_store
    from knockout.data import load_items

    items = load_items(jsonl, "jsonl")
    grader = make_judge(judge, judge_opt)
    # a text-only judge grades without the figures, said so (``--figures none``) and counted in the run
    cfg = RunConfig(options=MethodOptions(prompt="sciex-system", reference=True), params=GenParams(max_tokens=384),
                    figures="auto" if grader.supports_images else "none")
    execute_in_store(store, GradeRun(items, grader, cfg), quiet=quiet, label="grading")
    board = make_board(store, [], [], DEFAULT_RESAMPLES, 0)
    show_board(board, csv_out=None, html=None, as_json=as_json)


def register(app: typer.Typer) -> None:
    app.command()(solve)
    app.command()(leaderboard)
