"""``knockout leaderboard STORE``: the SciEx leaderboard from the runs in a store.

What it reads (nothing else is needed: every grade run keeps a snapshot of its item set):

* the **examinees** and their answers: the union of the item sets of the store's complete grade runs
  (``knockout grade`` on a solved exam, a SciEx folder, a JSONL), the human grades in that data and the
  grades entered in the web app on the same answers (grader ``web:<user>``, as ``knockout report`` adds
  them: :func:`knockout.annotations.add_web_grades`);
* the **expert-graded** result of each examinee: its answers' human grades (the mean over graders);
* a **judge-graded** result per judge: each complete grade run is one judge column (its judge, method
  and prompt options), as are the authors' released LLM grades given with ``--llm-grades``;
* the **student average** from the exam info.

Examinees are ranked by their expert-graded percent where experts graded them, else by the first
judge's percent (the leaderboard of the authors is "sorted first by the expert grade, then by the
automatic grade"); ties go by the first judge.  Judges are listed best first by their exam-level
Pearson correlation with the experts (then question level), each with its 95% confidence interval (the
cluster bootstrap of ``knockout report``); the first judge is the one the ranking and the plots use
for examinees without expert grades.  Exam results are defined in :mod:`knockout.sciex._results`.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knockout.data._csv import Writer
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.metrics._bootstrap import DEFAULT_RESAMPLES
from knockout.reports._tables import Table, num, with_ci
from knockout.sciex._copyrate import ShotGrading, copy_rate, run_gradings
from knockout.sciex._german import DEFAULT_NOTE
from knockout.sciex._results import examinee_result, exams_of, expert_grades, student_result
from knockout.storage._store import RunRecord


@dataclass
class JudgeSource:
    """One judge column: the grades of a grade run, or of the authors' released files."""

    key: str
    label: str
    judge: str
    simulated: bool
    grades: dict[str, float | None]  # answer id -> points (None: invalid)
    gradings: list[ShotGrading] = field(default_factory=list)  # few-shot gradings, for the copy rate
    run: RunRecord | None = None

    def results(self) -> list[dict[str, Any]]:
        return [{"item_id": k, "score": v, "valid": v is not None} for k, v in self.grades.items()]


def _label(run: RunRecord, items: ItemSet | None = None, results: Sequence[dict[str, Any]] = ()) -> str:
    """A judge column's label: what the run was asked for and, where its results say so, what it used (the
    examples each answer got, the languages of the questions it graded, figures left out)."""
    from knockout.prompts._fewshot import shots_label, shots_used

    opts = run.config.get("options") or {}
    bits = [run.method]
    if opts.get("prompt") not in (None, "auto"):
        bits.append(str(opts["prompt"]))
    if opts.get("reference"):
        bits.append("ref")
    if opts.get("shots"):
        bits.append(shots_label(shots_used(list(results), int(opts["shots"]), str(opts.get("shot_source", "")))))
    if items is not None and results:
        graded = {str(r["item_id"]) for r in results}
        langs = sorted({items.question_of(a).language for a in items if a.id in graded})
        if langs:
            bits.append("+".join(langs))
    info = (run.summary or {}).get("info") or {}
    if info.get("figures_left_out"):
        bits.append(f"figures left out: {info['figures_left_out']}")
    if opts.get("parser"):
        bits.append(f"parser {opts['parser']}")
    sim = " (SIMULATION)" if run.simulated else ""
    return f"{run.judge}{sim} · {', '.join(bits)} · run {run.id}"


def merge_items(sets: Iterable[ItemSet], source: str) -> ItemSet:
    """One item set from several snapshots: questions and answers by id (the later snapshot's fields win),
    human grades united (per grader, the later snapshot's grade wins)."""
    questions: dict[str, Question] = {}
    answers: dict[str, Answer] = {}
    for s in sets:
        questions.update(s.questions)
        for a in s:
            old = answers.get(a.id)
            answers[a.id] = a if old is None else a.model_copy(
                update={"human_scores": {**old.human_scores, **a.human_scores}})
    return ItemSet(questions.values(), answers.values(), source=source)


def within_exams(items: ItemSet, exams: ItemSet) -> ItemSet:
    """The store's item set restricted to the questions of ``exams`` (an exam set given to the leaderboard),
    united with it: the exams' answers and expert grades are added to what the grade runs snapshotted."""
    keep = set(exams.questions)
    if not keep & set(items.questions):
        raise ConfigError(f"{exams.source}: none of these exams' questions was graded by a run in the store")
    mine = ItemSet([q for q in items.questions.values() if q.id in keep], [a for a in items if a.question_id in keep],
                   source=items.source)
    return merge_items([mine, exams], items.source)


@dataclass
class Gathered:
    items: ItemSet
    judges: list[JudgeSource]
    runs_skipped: dict[str, str]
    #: where the human grades came from (``knockout.annotations.add_web_grades``): the data's graders, the web
    #: app's (``web:<user>``), how many web grades were added and left out
    human_grades: dict[str, Any]


def gather(path: Path, run_ids: Sequence[str] = ()) -> Gathered:
    """The merged item set and one judge per complete grade run of the store (or the runs ``run_ids``)."""
    from knockout.annotations import add_web_grades
    from knockout.runs import kind_of
    from knockout.storage import Store

    with Store.open_existing(path) as store:
        runs = [r for r in store.runs() if kind_of(r.kind).grades_answers]
        skipped: dict[str, str] = {}
        if run_ids:
            known = {r.id: r for r in store.runs()}
            missing = [i for i in run_ids if i not in known and not any(k.startswith(i) for k in known)]
            if missing:
                raise ConfigError(f"{path}: no run {', '.join(missing)}")
            runs = [store.find_run(i) for i in run_ids]  # an id or a unique prefix
            wrong = [r.id for r in runs if not kind_of(r.kind).grades_answers]
            if wrong:
                raise ConfigError(f"{path}: run {', '.join(wrong)} is not a grade run")
        picked: list[tuple[RunRecord, ItemSet, list[dict[str, Any]]]] = []
        for r in runs:
            if not r.complete:
                skipped[r.id] = r.status
                continue
            snapshot = store.items_for_run(r.id)
            if snapshot is None:
                skipped[r.id] = "no item-set snapshot"
                continue
            picked.append((r, snapshot, store.results(r.id)))
        if not picked:
            raise ConfigError(f"{path}: no complete grade run to make a leaderboard from (knockout grade first)")
        items, sources = add_web_grades(store, merge_items((s for _, s, _ in picked), str(path)))
    judges = []
    for r, snapshot, results in picked:
        grades = {str(x["item_id"]): (float(x["score"]) if x["valid"] and x["score"] is not None else None)
                  for x in results}
        judges.append(JudgeSource(key=r.id, label=_label(r, snapshot, results), judge=r.judge, simulated=r.simulated,
                                  grades=grades,
                                  gradings=run_gradings(snapshot, results), run=r))
    return Gathered(items, judges, skipped, sources)


def released_judges(paths: Sequence[Path], items: ItemSet) -> list[JudgeSource]:
    """Judge columns from the authors' released LLM grade files."""
    from knockout.sciex._llm_grades import grades_by_setting, load_llm_grades, released_gradings

    records = [g for p in paths for g in load_llm_grades(p)]
    gradings = released_gradings(records, items)
    return [JudgeSource(key=label, label=label, judge=label, simulated=False, grades=grades,
                        gradings=gradings.get(label, []))
            for label, grades in sorted(grades_by_setting(records, items).items())]


def _judge_row(items: ItemSet, j: JudgeSource, resamples: int, seed: int) -> dict[str, Any]:
    from knockout.metrics._analysis import analyse

    an = analyse(items, j.results(), level="question", resamples=resamples, seed=seed).to_dict()
    ql, el = an["question_level"], an.get("exam_level") or {}
    keep = ("n", "pearson", "pearson_ci", "spearman", "rmse")
    return {
        "key": j.key, "label": j.label, "judge": j.judge, "simulated": j.simulated,
        "run_id": j.run.id if j.run else None,
        "graded": sum(v is not None for v in j.grades.values()), "invalid": sum(v is None for v in j.grades.values()),
        "question_level": {k: ql.get(k) for k in keep},
        "exam_level": {k: el.get(k) for k in ("n", "pearson", "pearson_ci", "spearman")} if el else None,
        "copy_rate": copy_rate(j.gradings),
        "sciex_parser": ((j.run.summary or {}).get("info") or {}).get("sciex_parser") if j.run else None,
    }


def _sort_judges(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(r: dict[str, Any]) -> tuple[float, float]:
        e = (r["exam_level"] or {}).get("pearson")
        q = r["question_level"].get("pearson")
        return (-(e if e is not None else -2.0), -(q if q is not None else -2.0))

    return sorted(rows, key=key)  # stable: runs without correlations keep the store's order


def sample_experts(items: ItemSet, fraction: float, seed: int) -> ItemSet:
    """``items`` with the expert grades of a random ``fraction`` of the expert-graded answers kept (seeded) and
    the others' removed: what the leaderboard would show had the experts graded only those
    (``--expert-sample``)."""
    import numpy as np

    if not 0 < fraction < 1:
        raise ConfigError(f"--expert-sample must be a fraction between 0 and 1 (got {fraction:g})")
    graded = [a.id for a in items if a.human_scores]
    rng = np.random.default_rng(seed)
    keep = set(rng.choice(graded, size=round(fraction * len(graded)), replace=False).tolist()) if graded else set()
    answers = [a if a.id in keep or not a.human_scores else a.model_copy(update={"human_scores": {}}) for a in items]
    return ItemSet(items.questions.values(), answers, source=items.source)


def _ppi_section(items: ItemSet, exams: dict[str, Any], rows: list[dict[str, Any]], judge: JudgeSource,
                 experts: dict[str, float | None], truth: dict[str, float | None] | None,
                 required: bool) -> tuple[dict[str, Any] | None, str | None]:
    """The prediction-powered section for the first judge, or why there is none (a note)."""
    import importlib.util

    from knockout.calibration._ppi import INSTALL

    partial = {a.examinee for a in items if a.examinee is not None and a.id not in experts} & {
        a.examinee for a in items if a.id in experts}
    if not partial and truth is None:
        return None, None  # every expert-graded examinee fully graded: the experts' figures are the figures
    if importlib.util.find_spec("ppi_py") is None:
        why = f"prediction-powered intervals need ppi-python: {INSTALL}"
        if required:
            raise ConfigError(why)
        return None, why
    from knockout.sciex._ppi import leaderboard_ppi

    section = leaderboard_ppi(items, exams, [r["examinee"] for r in rows], judge.grades, experts, truth=truth)
    section["judge"] = judge.key
    return section, None


def build_leaderboard(items: ItemSet, judges: Sequence[JudgeSource], *, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = 0, expert_sample: float | None = None) -> dict[str, Any]:
    """The leaderboard as a JSON-able dict (``knockout leaderboard --json``).  ``expert_sample``: keep the
    expert grades of that fraction of the expert-graded answers only (seeded by ``seed``), and check the
    prediction-powered estimates against the figures from all of them."""
    truth = expert_grades(items) if expert_sample is not None else None
    if expert_sample is not None:
        items = sample_experts(items, expert_sample, seed)
    exams = exams_of(items)
    judge_rows = _sort_judges([_judge_row(items, j, resamples, seed) for j in judges])
    by_key = {j.key: j for j in judges}
    first = judge_rows[0]["key"] if judge_rows else None
    experts = expert_grades(items)
    names = sorted({a.examinee for a in items if a.examinee is not None})
    rows: list[dict[str, Any]] = []
    taken: set[str] = set()
    for name in names:
        expert = examinee_result(items, experts, name, exams=exams, resamples=resamples, seed=seed)
        per_judge = {r["key"]: examinee_result(items, by_key[r["key"]].grades, name, exams=exams,
                                               resamples=resamples, seed=seed) for r in judge_rows}
        if expert is None and all(v is None for v in per_judge.values()):
            continue
        main = per_judge.get(first) if first else None
        ranked_by = "expert" if expert is not None else "judge" if main is not None else None
        source = expert if expert is not None else main
        assert source is not None or ranked_by is None
        for res in [expert, *per_judge.values()]:
            if res is not None:
                taken.update(e["exam"] for e in res.exams)
        rows.append({
            "examinee": name, "ranked_by": ranked_by,
            "expert": expert.to_dict() if expert else None,
            "judges": {k: (v.to_dict() if v else None) for k, v in per_judge.items()},
            "_key": (source.percent if source is not None and source.percent is not None else -1.0,
                     main.percent if main is not None and main.percent is not None else -1.0),
        })
    rows.sort(key=lambda r: (-r["_key"][0], -r["_key"][1], r["examinee"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = i
        del r["_key"]
    ppi, ppi_note = (_ppi_section(items, exams, rows, by_key[first], experts, truth, expert_sample is not None)
                     if first is not None else (None, None))
    students = student_result(items, exams=exams, only=taken or None)
    default_used = any(
        res and res.get("german_default")
        for r in rows for res in [r["expert"], *r["judges"].values()]
    ) or bool(students and students.german_default)
    return {
        "examinees": rows,
        "students": students.to_dict() if students else None,
        "judges": judge_rows,
        "exams": [{"exam": e.exam_id, "language": e.language, "questions": len(e.questions),
                   "max_points": e.max_points, "grade_boundaries": e.info.get("GradeBoundaries"),
                   "default_boundaries": e.boundaries.default} for e in exams.values()],
        "german_default": default_used,
        "notes": ([DEFAULT_NOTE] if default_used else []) + ([ppi_note] if ppi_note else []),
        "resamples": resamples,
        "seed": seed,
        "ppi": ppi,
        "expert_sample": expert_sample,
    }


# -- output ---------------------------------------------------------------------------------------------
def _pct(res: dict[str, Any] | None) -> str:
    if not res or res.get("percent") is None:
        return "-"
    ci = res.get("percent_ci")
    return f"{res['percent']:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")


def _german(res: dict[str, Any] | None) -> str:
    if not res or res.get("german") is None:
        return "-"
    return f"{res['german']:.1f}" + ("*" if res.get("german_default") else "")


def leaderboard_tables(board: dict[str, Any]) -> list[Table]:
    """The leaderboard, the judges, the breakdowns and the per-exam results as plain tables."""
    judges = board["judges"]
    cols = ["rank", "examinee", "expert % [95% CI]", "expert German"]
    ppi = {r["examinee"]: r for r in (board.get("ppi") or {}).get("examinees", [])}
    if board.get("ppi"):
        cols += ["PPI % [95% CI]", "PPI German"]
    for n, _ in enumerate(judges, 1):
        cols += [f"judge {n} % [95% CI]", f"judge {n} German"]
    cols.append("ranked by")
    rows = []
    for r in board["examinees"]:
        row = [str(r["rank"]), r["examinee"], _pct(r["expert"]), _german(r["expert"])]
        if board.get("ppi"):
            row += _ppi_cells(ppi.get(r["examinee"]))
        for j in judges:
            res = r["judges"].get(j["key"])
            row += [_pct(res), _german(res)]
        rows.append([*row, r["ranked_by"] or "-"])
    s = board["students"]
    if s:
        rows.append(["", "student average", _pct(s), _german(s), *(["-", "-"] * (len(judges) + bool(board.get("ppi")))),
                     "exam info"])
    note = ("Grade = mean of the per-exam percentages (SciEx). " +
            " ".join(f"judge {n}: {j['label']}." for n, j in enumerate(judges, 1)) +
            (" *: " + DEFAULT_NOTE + "." if board["german_default"] else ""))
    tables = [Table("SciEx leaderboard", cols, rows, note)]
    jrows = []
    for n, j in enumerate(judges, 1):
        cr = j.get("copy_rate") or {}
        jrows.append([f"judge {n}", j["label"], num(j["graded"]), num(j["invalid"]),
                      with_ci(j["question_level"], "pearson"), with_ci(j["exam_level"], "pearson"),
                      "-" if not cr else f"{100 * cr['copy_rate']:.1f}% of {cr['graded_with_examples']}",
                      num((j.get("sciex_parser") or {}).get("fallbacks"))])
    tables.append(Table("Judges against the experts", ["judge", "what", "graded", "invalid",
                                                        "Pearson question [95% CI]", "Pearson exam [95% CI]",
                                                        "copies example grade", "parser fallbacks"], jrows,
                        "Pearson on scores normalised by max points; 95% cluster-bootstrap CIs over questions."))
    if board.get("ppi"):
        tables.append(_ppi_table(board))
    tables.append(_breakdown_table(board))
    tables.append(_subset_table(board))
    tables.append(_exam_table(board))
    return tables


def _ppi_cells(est: dict[str, Any] | None) -> list[str]:
    if not est:
        return ["-", "-"]
    lo, hi = est["ci"]
    german = "-" if est.get("german") is None else f"{est['german']:.1f} [{est['german_ci'][0]:.1f}, " \
                                                  f"{est['german_ci'][1]:.1f}]"
    return [f"{est['estimate']:.1f} [{lo:.1f}, {hi:.1f}]", german]


def _ppi_table(board: dict[str, Any]) -> Table:
    """Each prediction-powered figure beside the expert-only one, with both interval widths."""
    ppi = board["ppi"]
    check = board.get("expert_sample") is not None
    rows = []

    def add(what: str, est: dict[str, Any]) -> None:
        lo, hi = est["ci"]
        elo, ehi = est["expert_only_ci"]
        row = [what, f"{est['labelled']}/{est['answers']}", f"{est['expert_only']:.1f} [{elo:.1f}, {ehi:.1f}]",
               f"{est['estimate']:.1f} [{lo:.1f}, {hi:.1f}]", f"{est['width']:.1f}", f"{est['expert_only_width']:.1f}",
               " / ".join(f"{x:.2f}" for x in (est["lambda"] if isinstance(est["lambda"], list) else [est["lambda"]])),
               f"{est['judge_only']:.1f}"]
        if check:
            full = est.get("all_experts")
            row.append("-" if full is None else f"{full:.1f}" + ("" if lo <= full <= hi else " (outside)"))
        rows.append(row)

    for est in ppi["examinees"]:
        add(est["examinee"], est)
    for est in ppi["exams"]:
        add(f"exam {est['exam']} (average of {est['examinees']})", est)
    for est in ppi["differences"]:
        add(f"{est['first']} - {est['second']}", est)
    cols = ["figure", "expert-graded", "expert only [95% CI]", "PPI [95% CI]", "PPI width", "expert-only width",
            "lambda", "judge only"]
    if check:
        cols.append("all experts")
    judge_n = next((n for n, j in enumerate(board["judges"], 1) if j["key"] == ppi["judge"]), 1)
    note = (f"Prediction-powered (PPI++, ppi-python) from judge {judge_n}'s grades on every answer and the experts' "
            f"on {ppi['labelled']} of {ppi['answers']} answers; percent, differences in percentage points. lambda: "
            "the power tuning (0: experts alone, 1: plain PPI; a difference: each examinee's, their variances "
            "added). Assumes the expert-graded answers are a random subset; with fewer than about 20 expert grades "
            "in a figure the normal interval is rough (docs/calibration.md).")
    if check:
        note += (f" --expert-sample {board['expert_sample']:g}: the experts' other grades were hidden; 'all experts' "
                 "is the figure from every expert grade.")
    return Table("Prediction-powered estimates", cols, rows, note)


def _source(r: dict[str, Any], board: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    if r["expert"]:
        return r["expert"], "expert"
    if board["judges"]:
        return r["judges"].get(board["judges"][0]["key"]), "judge 1"
    return None, "-"


def _breakdown_table(board: dict[str, Any]) -> Table:
    groups: list[tuple[str, str]] = []
    everyone = [*(_source(r, board)[0] for r in board["examinees"]), board["students"]]
    for key in ("difficulty", "language", "modality"):
        seen: list[str] = []
        for res in everyone:
            for g in (res or {}).get("breakdowns", {}).get(key, []):
                if g["group"] not in seen:
                    seen.append(g["group"])
        groups += [(key, g) for g in seen]
    cols = ["examinee", "graded by", *[g for _, g in groups]]
    rows = []
    for r in [*board["examinees"], {"examinee": "student average", "student": True}]:
        res, by = (board["students"], "exam info") if r.get("student") else _source(r, board)
        if res is None:
            continue
        cells = []
        for key, g in groups:
            hit = next((x for x in res["breakdowns"].get(key, []) if x["group"] == g), None)
            if hit is None:
                cells.append("-")
            elif hit.get("diff_to_students") is not None:
                cells.append(f"{hit['percent']:.1f} ({hit['diff_to_students']:+.1f})")
            else:
                cells.append(f"{hit['percent']:.1f}")
        rows.append([r["examinee"], by, *cells])
    return Table("By difficulty, language and modality (question level, % of max points)", cols, rows,
                 "In brackets: the difference to the student average on the same questions (SciEx Figures 1-3).")


def _subset_table(board: dict[str, Any]) -> Table:
    rows = []
    for r in board["examinees"]:
        res, by = _source(r, board)
        sub = (res or {}).get("text_only_english")
        if sub:
            rows.append([r["examinee"], by, f"{sub['percent']:.1f}", _german(sub), str(sub["exams"])])
    s = (board["students"] or {}).get("text_only_english")
    if s:
        rows.append(["student average", "exam info", f"{s['percent']:.1f}", _german(s), str(s["exams"])])
    return Table("Text-only questions of English exams (SciEx Table 8)", ["examinee", "graded by", "grade %",
                                                                          "German", "exams"], rows)


def _exam_table(board: dict[str, Any]) -> Table:
    rows = []
    for r in board["examinees"]:
        res, by = _source(r, board)
        for e in (res or {}).get("exams", []):
            rows.append([r["examinee"], by, e["exam"], e["language"], f"{e['points']:g} / {e['max_points']:g}",
                         f"{e['percent']:.1f}", _german(e),
                         f"{e['unanswered']}/{e['ungraded']}/{e['invalid']}"])
    for e in (board["students"] or {}).get("exams", []):
        rows.append(["student average", "exam info", e["exam"], e["language"], "-", f"{e['percent']:.1f}",
                     _german(e), "-"])
    return Table("Per exam", ["examinee", "graded by", "exam", "language", "points", "%", "German",
                              "unanswered/ungraded/invalid"], rows,
                 "Unanswered questions score 0; ungraded answers and invalid judge grades are left out of the exam.")


def leaderboard_csv(board: dict[str, Any]) -> str:
    """One row per examinee (and the student average): percent, CI and German grade per source."""
    judges = board["judges"]
    cols = ["rank", "examinee", "ranked_by", "expert_percent", "expert_ci_low", "expert_ci_high", "expert_german"]
    for n, _ in enumerate(judges, 1):
        cols += [f"judge{n}_percent", f"judge{n}_ci_low", f"judge{n}_ci_high", f"judge{n}_german"]
    cols += ["german_default", *[f"judge{n}_label" for n, _ in enumerate(judges, 1)]]
    ppi = {e["examinee"]: e for e in (board.get("ppi") or {}).get("examinees", [])}
    if board.get("ppi"):
        cols += ["ppi_percent", "ppi_ci_low", "ppi_ci_high", "ppi_german", "ppi_expert_graded"]

    def ppi_cells(name: str) -> list[Any]:
        if not board.get("ppi"):
            return []
        e = ppi.get(name)
        return [e["estimate"], e["ci"][0], e["ci"][1], e.get("german", ""), e["labelled"]] if e else [""] * 5

    def cells(res: dict[str, Any] | None) -> list[Any]:
        if not res:
            return ["", "", "", ""]
        ci = res.get("percent_ci") or ["", ""]
        return [res.get("percent"), ci[0], ci[1], res.get("german")]

    buf = io.StringIO()
    w = Writer(buf)  # the one CSV writer: an examinee or label read as a formula is neutralised
    w.writerow(cols)
    labels = [j["label"] for j in judges]
    for r in board["examinees"]:
        row = [r["rank"], r["examinee"], r["ranked_by"] or "", *cells(r["expert"])]
        for j in judges:
            row += cells(r["judges"].get(j["key"]))
        default = any(x and x.get("german_default") for x in [r["expert"], *r["judges"].values()])
        w.writerow([*row, default, *labels, *ppi_cells(r["examinee"])])
    s = board["students"]
    if s:
        w.writerow(["", "student average", "exam info", *cells(s), *([""] * 4 * len(judges)), s["german_default"],
                    *labels, *ppi_cells("")])
    return buf.getvalue()


def leaderboard_html(board: dict[str, Any], title: str = "SciEx leaderboard") -> str:
    """A self-contained HTML page: the tables and bar charts (needs matplotlib)."""
    from knockout.reports._html import page
    from knockout.sciex._plots import leaderboard_plots

    warnings = list(board["notes"])
    if any(j["simulated"] for j in board["judges"]):
        warnings.append("A judge of this leaderboard is the scripted judge: a simulation, not an LLM.")
    return page(title, leaderboard_tables(board), leaderboard_plots(board), warnings)

