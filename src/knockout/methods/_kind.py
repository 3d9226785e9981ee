"""The ``grade`` run kind: answers graded by a method (individual, knockout, pairwise, all-pairs, sorting).

How its runs are read: ``knockout report`` (agreement with the human grades, :mod:`knockout.reports._report`),
``compare`` (methods x metrics with paired tests), the tidy ``answers`` and ``matches`` tables, and the
viewer's rows (question, examinee, human and judge grade, gap) with each question's bracket or matches.
A grading jury reads as this kind (its aggregate is a grade per answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knockout.data._records import Answer, ItemSet, Question
from knockout.methods._anchors import anchored_words
from knockout.methods._run import GradeRun, GradeSummary
from knockout.runs import Column, ReportOptions, ReportPage, RunKind
from knockout.storage._store import MatchRow, RunRecord, Store

GRADE = "grade"


class GradeKind(RunKind):
    name = GRADE
    title = "grade"
    run = GradeRun
    summary_model = GradeSummary
    tables = ("answers", "matches", "calibrated")
    grades_answers = True
    rank = 0

    def report(self, store: Store, record: RunRecord, options: ReportOptions) -> ReportPage:
        from knockout.reports._report import build_report, report_tables
        from knockout.reports._runs import load_run

        loaded = load_run(store, record.id, details=options.details)
        if options.on_loaded is not None:
            options.on_loaded()
        rep, an = build_report(loaded, level=options.level, by=options.by, resamples=options.resamples,
                               seed=options.seed, options=options)

        def plots() -> dict[str, bytes]:
            from knockout.reports._plots import report_plots

            return report_plots(rep, an)

        return ReportPage(f"knockout report: run {record.id}", rep, list(report_tables(rep)), plots, [rep["run"]])

    def compare(self, runs: Sequence[tuple[Store, RunRecord]], options: ReportOptions) -> ReportPage:
        from knockout.reports._report import build_comparison
        from knockout.reports._runs import load_run

        loaded = [load_run(store, rec.id, details=False) for store, rec in runs]
        cmp = build_comparison(loaded, resamples=options.resamples, seed=options.seed, by=options.by,
                               prices=options.prices)
        noise = _noise(loaded, options)
        if noise:
            cmp["noise"] = noise

        def plots() -> dict[str, bytes]:
            from knockout.reports._plots import cost_vs_agreement, group_deltas

            return {"cost vs agreement": cost_vs_agreement(cmp),
                    **{f"difference to the baseline by {g['key']}": group_deltas(cmp, g) for g in cmp["by"]}}

        return ReportPage("knockout: runs compared", cmp, self.compare_tables(cmp), plots, cmp["runs"])

    def compare_tables(self, data: dict[str, Any]) -> list[Any]:
        from knockout.reports._report import comparison_tables

        tables = list(comparison_tables(data))
        if data.get("noise"):
            tables.append(_noise_compare_table(data["noise"]))
        return tables

    # -- report sections: repeated judge draws (--samples K), criteria rubrics' verdicts, --calibrate ----
    def report_sections(self, loaded: Any, options: ReportOptions) -> dict[str, Any]:
        from knockout.calibration._noise import noise_report
        from knockout.calibration._trust import trust_of_loaded
        from knockout.methods._criteria import criteria_section

        noise = noise_report(loaded.items, loaded.results, resamples=options.resamples, seed=options.seed)
        criteria = criteria_section(loaded.items, loaded.results)  # answers graded by criteria rubrics
        trust = trust_of_loaded(loaded)  # each question's reliability, the persuasion defence's flags
        return {**({"noise": noise} if noise else {}), **({"criteria": criteria} if criteria else {}),
                **({"trust": trust.to_dict()} if trust.questions or trust.flagged else {}),
                **calibration_section(loaded, options)}

    def section_tables(self, report: dict[str, Any]) -> list[Any]:
        from knockout.calibration._noise import noise_tables
        from knockout.calibration._run import section_tables
        from knockout.calibration._trust import trust_tables
        from knockout.methods._criteria import criteria_tables

        return ((noise_tables(report["noise"]) if report.get("noise") else []) + criteria_tables(report.get("criteria"))
                + (trust_tables(report["trust"]) if report.get("trust") else []) + section_tables(report))

    def tidy(self, store: Store, record: RunRecord, table: str) -> list[dict[str, Any]]:
        from knockout.annotations import add_web_grades
        from knockout.reports._tidy import answer_rows, match_rows, snapshot

        # the human grades of the report: the file's and the web app's (web:<user>)
        items, _ = add_web_grades(store, snapshot(store, record))
        if table == "matches":
            return match_rows(store, record, items)
        from knockout.calibration._trust import trust_of_loaded, trust_rows
        from knockout.reports._runs import read_run

        loaded = read_run(store, record, details=True, web_grades=True)
        rows = trust_rows(trust_of_loaded(loaded), answer_rows(store, record, items))
        if table == "calibrated":  # the answers table with each calibrated grade beside the raw one
            from knockout.calibration._run import calibrate_loaded, calibrated_rows

            return calibrated_rows(calibrate_loaded(loaded, resamples=0), rows)
        return rows

    # -- the viewer -----------------------------------------------------------------------------------
    def columns(self, store: Store, record: RunRecord) -> list[Column]:
        cols = [Column("question", "question_id", "question"), Column("examinee", "examinee", "item"),
                Column("human", "human", "points"), Column("judge", "value", "num"), Column("max", "max", "points"),
                Column("gap", "gap", "gap")]
        if store.has_matches(record.id):
            cols.append(Column("round", "round"))
        cal = viewer_calibration(store, record)
        if cal is not None:  # beside the judge's grade, labelled: adapted on how many teacher grades
            cols.insert(4, Column(cal.label, "calibrated", "num"))
        return cols

    def listing(self, store: Store, record: RunRecord, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        items = graded_items(store, record)
        cal = viewer_calibration(store, record)
        rows = [_row(r, items) for r in results]
        if cal is not None:
            for row in rows:
                row["calibrated"] = cal.grades.get(row["id"])
        return rows

    def item_view(self, store: Store, record: RunRecord, row: dict[str, Any], view: dict[str, Any]) -> None:
        from knockout.reports._replies import expand

        items = graded_items(store, record)
        d = row["details"]
        a: Answer | None = None
        if items is not None:
            try:
                a = items.answer(row["item_id"])
                q = items.question_of(a)
                view["answer"], view["question"] = a, q
                view["names"] = {x.id: x.examinee or x.id for x in items.answers_for(q.id)}
            except KeyError:
                pass
        view["step"] = "round" if record.method == "knockout" else "step"
        q = view["question"]
        if row["valid"]:
            view["facts"].append(grade_fact(row["score"], d, q.max_points if q is not None else None))
        if a is not None:
            human = ", ".join(f"{g} {s:g}" for g, s in a.human_scores.items())
            view["facts"].append(("Human", f"{human} (mean {a.human_score:g})" if a.human_scores and
                                  a.human_score is not None else "no human grade"))
        for i, c in enumerate(d.get("criteria") or [], 1):  # graded by a criteria rubric: each verdict
            view["facts"].append((f"Criterion {i}", f"{c['awarded']:g} of {c['points']:g} points: {c['criterion']}"))
        if d.get("scores"):
            view["facts"].append(("Grades received", ", ".join(str(s) for s in d["scores"])))
        anchored = d.get("anchored")
        if isinstance(anchored, dict):  # reference anchors: the judge's grade read on its question's anchors
            view["facts"].append(("Anchors", anchored_words(anchored)))
        readers = d.get("readers")
        if isinstance(readers, dict):  # two readers: both readings beside the grade they make
            view["facts"].append(("Readers", readers_words(readers)))
        guard = d.get("guard")
        if isinstance(guard, dict) and guard.get("flagged"):  # the persuasion defence's flag, for every role
            view["facts"].append(("Flagged", guard_words(guard)))
        if d.get("draws"):  # --samples K: the grade is the mean of the valid draws
            view["facts"].append(("Draws", ", ".join("invalid" if s is None else f"{s:g}" for s in d["draws"]) +
                                  " (the grade: their mean)"))
        if d.get("champion"):
            view["facts"].append(("Champion", "★ Champion of its question."))
        elif d.get("eliminated_round"):
            byes = f"; byes in round {', '.join(str(b) for b in d['byes'])}" if d.get("byes") else ""
            view["facts"].append(("Eliminated", f"in round {d['eliminated_round']}{byes}."))
        if record.method != "individual" and q is not None:
            view["links"].append((("Bracket" if record.method == "knockout" else "Matches") +
                                  f" of question {q.id}", "bracket", q.id))
        if isinstance(d.get("matches"), list):
            view["details"] = expand(d, {m.match_id: m for m in store.matches(record.id,
                                                                              question_id=row["question_id"])})

    def bracket(self, store: Store, record: RunRecord, question_id: str) -> dict[str, Any]:
        return bracket(store, record, question_id, graded_items(store, record))


def calibration_section(loaded: Any, options: ReportOptions) -> dict[str, Any]:
    """``report --calibrate``: the calibration of a run whose results are grades (its own or a jury's)."""
    if not options.calibrate:
        return {}
    from knockout.calibration._run import SECTION, section_or_refusal

    return {SECTION: section_or_refusal(loaded, per_question=options.calibrate_per_question, seed=options.seed,
                                        resamples=options.resamples)}


_VIEWER_CALIBRATIONS: dict[tuple[Any, ...], Any] = {}


def viewer_calibration(store: Store, record: RunRecord) -> Any:
    """The viewer's calibration of a run (None: too few expert grades), kept while the run's results (none
    written or rewritten) and the expert grades are the same (a few runs at a time): a page asks twice (its
    columns and its rows) and reads the run once."""
    from knockout.calibration._fit import calibrate, enough, graded_rows
    from knockout.errors import ConfigError
    from knockout.reports._runs import read_run

    key = (str(store.path.resolve()), record.id, record.status, store.results_stamp(record.id),
           store.annotations.grades_stamp())
    if key not in _VIEWER_CALIBRATIONS:
        try:
            loaded = read_run(store, record, details=False, web_grades=True)
        except ConfigError:  # a run without items or results has no calibration to show
            return None
        rows = graded_rows(loaded.items, loaded.results)
        if len(_VIEWER_CALIBRATIONS) >= 8:
            _VIEWER_CALIBRATIONS.pop(next(iter(_VIEWER_CALIBRATIONS)))
        _VIEWER_CALIBRATIONS[key] = (calibrate(rows, resamples=0, refits=0, heldout=False)
                                     if enough(rows) is None else None)
    return _VIEWER_CALIBRATIONS[key]


def _noise(loaded: Sequence[Any], options: ReportOptions) -> list[dict[str, Any]]:
    """``compare``: the judge's noise of every run with repeated draws (``--samples``)."""
    from knockout.calibration._noise import noise_report

    out = []
    for r in loaded:
        noise = noise_report(r.items, r.results, resamples=options.resamples, seed=options.seed)
        if noise:
            out.append({"run_id": r.run.id, "label": r.label, **noise})
    return out


def _noise_compare_table(noise: list[dict[str, Any]]) -> Any:
    from knockout.reports._tables import Table, num

    def ci(v: list[float] | None) -> str:
        return "-" if not v else f"[{v[0]:.3f}, {v[1]:.3f}]"

    rows = []
    for n in noise:
        p = (n.get("intervals") or {}).get("pearson") or {}
        rows.append([n["run_id"], n["label"], str(n["draws"]), f"{num(n['icc1_1'])} {ci(n['icc1_1_ci'])}",
                     num(n["sd_share_mean"]), num(p.get("first")), ci(p.get("answers_ci")), num(p.get("value")),
                     ci(p.get("answers_draws_ci")), ci(p.get("draws_ci"))])
    return Table("the judges' own noise (runs with repeated draws, --samples)",
                 ["run", "method / judge", "draws", "ICC(1,1) [95% CI]", "mean SD (share)", "Pearson (first draw)",
                  "answers only", "Pearson (mean of draws)", "answers and draws", "draws only"], rows,
                 "Pearson with the humans; 95% bootstrap intervals: answers resampled with the first draw; answers "
                 "and their draws resampled, and the draws alone, re-centred on the mean of draws.")


def graded_items(store: Store, record: RunRecord) -> ItemSet | None:
    """The run's item set with the human grades of its report (the file's and the web app's)."""
    from knockout.annotations import add_web_grades
    from knockout.reports._transcripts import snapshot

    items = snapshot(store, record)
    if items is not None:
        items, _ = add_web_grades(store, items)
    return items


def _row(r: dict[str, Any], items: ItemSet | None) -> dict[str, Any]:
    a: Answer | None = None
    q: Question | None = None
    if items is not None:
        try:
            a = items.answer(r["item_id"])
            q = items.question_of(a)
        except KeyError:
            pass
    human = a.human_score if a else None
    mx = q.max_points if q else 1.0
    gap = None if human is None or r["score"] is None else abs(r["score"] - human) / mx
    d = r["details"]
    rnd = (d.get("groups") or {}).get("round")
    return {"id": r["item_id"], "question_id": r["question_id"],
            "examinee": (a.examinee if a else None) or r["item_id"], "human": human, "value": r["score"],
            "max": mx, "valid": r["valid"], "gap": gap,
            "error": d.get("error"), "round": f"{rnd or ''}{' ★' if d.get('champion') else ''}"}


# -- the bracket of a question ------------------------------------------------------------------------------
def _score(m: MatchRow, aid: str) -> float | None:
    got = []
    for g in m.games:
        s = g.get("scores")
        if s:
            got.append(float(s[0]) if g.get("first") == aid else float(s[1]))
    return sum(got) / len(got) if got else None


def bracket(store: Store, run: RunRecord, question_id: str, items: ItemSet | None) -> dict[str, Any]:
    """Rounds (steps) of one question's matches; for the knockout also the byes and the champion."""
    if items is None or question_id not in items.questions:
        raise KeyError(question_id)
    answers = {a.id: a for a in items.answers_for(question_id)}
    results = {r["item_id"]: r for r in store.results(run.id, question_id=question_id) if r["item_id"] in answers}
    matches = store.matches(run.id, question_id=question_id)
    steps = sorted({m.step for m in matches})
    knockout = run.method == "knockout"
    eliminated = {aid: r["details"].get("eliminated_round") for aid, r in results.items()}
    rounds = []
    for s in steps:
        played = []
        for m in (m for m in matches if m.step == s):
            sa, sb = _score(m, m.a), _score(m, m.b)
            if knockout:
                winner = m.b if eliminated.get(m.a) == s else m.a if eliminated.get(m.b) == s else None
            else:
                winner = None if sa is None or sb is None or sa == sb else (m.a if sa > sb else m.b)
            games = []
            for g in m.games:
                games.append({"first": g.get("first"), "second": g.get("second"), "scores": g.get("scores"),
                              "valid": g.get("valid"), "error": g.get("error"),
                              "replies": [str(a.get("reply") or "") for a in g.get("attempts") or []
                                          if isinstance(a, dict)]})
            played.append({"id": m.match_id, "a": m.a, "b": m.b, "score_a": sa, "score_b": sb, "winner": winner,
                           "valid": m.valid, "partial": m.partial, "games": games})
        byes = [aid for aid, r in results.items() if s in (r["details"].get("byes") or [])]
        rounds.append({"step": s, "matches": played, "byes": byes})
    champion = next((aid for aid, r in results.items() if r["details"].get("champion")), None)
    return {"question": items.questions[question_id], "answers": answers, "results": results, "rounds": rounds,
            "champion": champion, "knockout": knockout}


def grade_fact(score: float | None, d: dict[str, Any], max_points: float | None) -> tuple[str, str]:
    """The viewer's line of a grade: the grade (2 decimals) and where it comes from, so that a grade that is not
    the number the reply wrote (combined readers, the expected grade of a verdict slot) is not called parsed
    (issue 61: "Parsed grade 2.77812" beside a raw "4/4")."""
    from knockout.reports._tables import points

    text = points(score) + (f" of {max_points:g}" if max_points is not None else "")
    readers = d.get("readers")
    attempts = d.get("attempts") or []
    verdict = attempts[-1].get("verdict") if attempts and isinstance(attempts[-1], dict) else None
    if isinstance(readers, dict) and readers.get("combined") is not None:
        judge = readers.get("judge")
        how = ("the grade model's grade from the judge's grade and the other readings (see Readers)" +
               (f"; the judge's own: {points(judge)}" if isinstance(judge, int | float) else ""))
    elif isinstance(verdict, dict) and verdict.get("mode") == "expected":
        how = "the judge's expected grade over its probabilities for each grade, not the number its reply wrote"
    elif isinstance(d.get("anchored"), dict):
        how = "the judge's grade read on its question's anchors (see Anchors)"
    else:
        return "Parsed grade", text
    return "Grade", f"{text} ({how})"


def readers_words(rd: dict[str, Any]) -> str:
    """What a grade rests on, in words (the viewer's answer page): the judge's grade, the readings, the grade
    model (name and digest) and its grade, and whether the cap bound."""
    from knockout.meaning._words import meaning_points

    judge = rd.get("judge")
    head = "the judge " + ("–" if judge is None else f"{judge:.2f}")
    if rd.get("combined") is None:
        return f"{head}; the grade model did not apply ({rd.get('why_not') or 'not read'}): the grade is the judge's"
    readings = rd.get("readings") or {}
    shown = ", ".join(f"{k} {v:.3f}" for k, v in readings.items() if isinstance(v, int | float) and k != "judge")
    words = (f"{head}; readings: {shown or 'none'}; the grade model {rd.get('model') or '?'} "
             f"({rd.get('model_sha') or '?'}, readings {rd.get('pattern') or '?'}): {rd['combined']:.2f}")
    if rd.get("why_not"):
        words += f" (the meaning reader did not apply: {rd['why_not']})"
    if rd.get("disagree"):
        words += (f"; the judge's grade is far above what the meaning side allows ({meaning_points(rd)}): capped "
                  "there, check it")
    return words


def guard_words(g: dict[str, Any]) -> str:
    """The persuasion defence's flag in words (the viewer's answer page)."""
    full = g.get("grade_full")
    kept = g.get("graded_whole")
    return ("the persuasion defence flagged this answer" + (f" (it would have had {full:g})" if
                                                            isinstance(full, int | float) else "")
            + ("; the flagged parts are most of it: graded whole, check it" if kept else "")
            + (f"; parts removed: {len(g.get('removed') or [])}"))
