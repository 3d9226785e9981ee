"""The calibration of a stored grading run: ``knockout calibrate``, ``report --calibrate``, ``grade --calibrate``,
the ``calibrated`` tidy table of ``export`` and the web app's calibrated column.

The teacher grades are the run's human grades: its data file's and the web app's (``web:<user>``), as
:func:`knockout.reports.load_run` reads them.  Every adapted grade is shown labelled as moved by the teacher's
grades, with how many (:func:`label`); the table of ``knockout calibrate`` says how far the grades it writes
moved and which grades its held-out figures measure.

A grade the teacher gave a whole answer group at once (``knockout groups``, the web app's group pages: stored per
answer, with the group it came through) is one teacher judgement, not one per member: each member's grade weighs
``1 / k`` in the adaptation, ``k`` the group's members graded by that grade (:func:`group_weights`), so a
40-member group moves the exam's level as one grade does, not as 40.
"""

from __future__ import annotations

from typing import Any

from knockout.calibration._fit import FOLDS, Calibration, calibrate, first_per_question, graded_rows, label_for
from knockout.reports._runs import LoadedRun
from knockout.reports._tables import Table, kv, num, with_ci

#: the key of the report section (``report --calibrate``, ``--json``)
SECTION = "calibrated"


def label(section: dict[str, Any]) -> str:
    """How an adapted grade is labelled wherever it is shown (:func:`knockout.calibration._fit.label_for`)."""
    return label_for(section["expert_grades"])


def figure(f: dict[str, Any], key: str) -> str:
    """A held-out figure with its CI, or ``-`` with the reason it has none (and why a CI is missing)."""
    if f.get(key) is None:
        return f"- ({f.get(f'{key}_why', 'not computed')})"
    out = with_ci(f, key)
    why = f.get(f"{key}_ci_why")
    # no CI for want of a bootstrap is said once, in the table's note
    return out + (f" (no CI: {why})" if f.get(f"{key}_ci") is None and why and "--resamples 0" not in why else "")


def difference(f: dict[str, Any], key: str) -> str:
    """calibrated - raw of a figure without a CI of its own."""
    a, b = f.get(f"{key}_calibrated"), f.get(f"{key}_raw")
    if a is None or b is None:
        return "- (a figure is missing)"
    return f"{a - b:+.3f} (no CI)"


def group_weights(store_path: Any, answer_ids: set[str]) -> dict[str, float]:
    """Answer id -> the weight of its teacher grade in the adaptation: ``1 / k`` for a grade given through an
    answer group (``k``: the answers among ``answer_ids`` that the same grader graded through the same group),
    absent (1) for a grade given one by one or read from the data file."""
    import sqlite3

    from knockout.errors import KnockoutError
    from knockout.storage._store import Store

    try:
        with Store.open_existing(store_path) as store:
            rows = store.annotations.grades()
    except (OSError, sqlite3.Error, KnockoutError):  # no web grades to read: every grade its own judgement
        return {}
    members: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        if r.get("via_group") and r["answer_id"] in answer_ids:
            members.setdefault((str(r["grader"]), str(r["via_group"])), []).append(str(r["answer_id"]))
    return {a: 1.0 / len(ids) for ids in members.values() for a in ids}


def calibrate_loaded(run: LoadedRun, *, per_question: int | None = None, seed: int = 0,
                     resamples: int = 1000) -> dict[str, Any]:
    """The calibration section of a loaded grading run (raises ConfigError when there are too few teacher
    grades).  ``per_question``: adapt on that many teacher-graded answers per question (drawn with ``seed``) and
    compute the figures on the others (what a teacher who graded only these would get)."""
    rows = graded_rows(run.items, run.results)
    fit = first_per_question(rows, per_question, seed) if per_question else None
    weights = group_weights(run.store_path, {r.id for r in rows if r.expert is not None})
    cal: Calibration = calibrate(rows, fit_ids=fit, seed=seed, resamples=resamples, weights=weights)
    section = cal.to_dict()
    section["per_question"] = per_question
    section["label"] = label(section)
    section["fit_ids"] = sorted(fit) if fit is not None else None
    section["expert_graded"] = sum(1 for r in rows if r.expert is not None)
    # grades given through answer groups: how many, and as how many teacher judgements they count
    section["group_grades"] = {"answers": len(weights), "judgements": round(sum(weights.values()), 6)}
    section["answers"] = len(rows)
    # the web app's grades not used, by reason (not a number, out of range, ...): counted and shown
    section["expert_grades_left_out"] = dict((run.human_grades or {}).get("web_skipped") or {})
    return section


def moved_words(section: dict[str, Any]) -> str:
    """How far the grades written moved from the model's, in words."""
    m = section.get("moved") or {}
    return (f"{int(m.get('answers', 0))} answers' grades: moved by {float(m.get('mean', 0.0)):.2f} points on "
            f"average, at most {float(m.get('max', 0.0)):.2f} (adapted minus the model's grade)")


def calibration_tables(section: dict[str, Any]) -> list[Table]:
    """The calibration's tables: the adaptation and the grades it writes, the held-out figures before and
    after."""
    f = section["figures"]
    n = section["expert_grades"]
    fit = (f"{section['per_question']} teacher grades per question ({n} answers)"
           if section.get("per_question") else f"every teacher grade ({n} answers)")
    if section["heldout"] == "holdout":
        held = ("the other teacher-graded answers (holdout): their adapted grades here are exactly the grades "
                "written for them")
        measures = "the grades written for the held-out answers"
    else:
        held = (f"each teacher-graded answer's grade adapted on the other folds ({min(FOLDS, int(f['n']))}-fold "
                f"cross-validation, never on its own grade); the grades written come from the adaptation on all "
                f"{n}, the same procedure on a few more grades")
        measures = "each graded answer's grade adapted without it (cross-validation), not the grades written"
    t1 = kv("calibration: the model adapted to the teacher's level", [
        ("adapted on", fit),
        ("adaptation", section["description"]),
        ("grades written", moved_words(section)),
        *([("grades given through answer groups", f"{gg['answers']} answers' grades, counted as "
            f"{gg['judgements']:g} teacher judgements (a group's grade is one judgement, whatever its size)")]
          if (gg := section.get("group_grades") or {}).get("answers") else []),
        ("figures computed on", f"{f['n']} held-out answers of {f['questions']} questions: {held}"),
        *([("teacher grades left out (web app)", ", ".join(f"{k} {why}" for why, k in sorted(left.items())))]
          if (left := section.get("expert_grades_left_out")) else []),
    ], "the grades are labelled as such everywhere they are shown: " + section["label"] +
        "; the frozen model is the prior, so a few teacher grades move the grades a little and many as far as "
        "they say")
    rows = [
        ["RMSE (points) [95% CI]", figure(f, "rmse_raw"), figure(f, "rmse_calibrated"),
         figure(f, "rmse_difference")],
        ["Pearson (share of max points) [95% CI]", figure(f, "pearson_raw"), figure(f, "pearson_calibrated"),
         difference(f, "pearson")],
        ["Cohen's kappa, quadratic (points) [95% CI]", figure(f, "kappa_raw"), figure(f, "kappa_calibrated"),
         difference(f, "kappa")],
    ]
    no_ci = any("--resamples 0" in str(v) for k, v in f.items() if k.endswith("_ci_why"))
    step = f.get("kappa_step")
    same = ("the same answers and unit as knockout report's Pearson when every teacher-graded answer is held "
            "out in turn" if section["heldout"] != "holdout" else
            "knockout report's Pearson is over every teacher-graded answer, these over the held-out ones only")
    t2 = Table("held-out agreement with the teacher: the model's grades before and after the adaptation",
               ["figure", "model (raw)", "adapted", "adapted - raw"], rows,
               f"held-out answers only, never those whose teacher grade the adaptation was given; adapted: "
               f"{measures}; RMSE in points, Pearson on each grade as a share of its question's max points "
               f"({same}); " +
               ("no CIs: --resamples 0" if no_ci else "95% CIs: cluster bootstrap over questions") +
               (f"; kappa on grades rounded to steps of {num(step)}" if step else
                "; kappa: the teacher grades are on no half-point grid"))
    return [t1, t2]


def calibrated_rows(section: dict[str, Any], rows: list[dict[str, Any]], id_key: str = "answer_id"
                    ) -> list[dict[str, Any]]:
    """``rows`` (one per answer) with the adapted grade beside the model's, labelled."""
    out = []
    for r in rows:
        aid = str(r.get(id_key))
        g = section["grades"].get(aid)
        out.append({**r, "calibrated_score": g, "calibrated_sd": section["sd"].get(aid),
                    "calibration_map": section["map"], "calibration_expert_grades": section["expert_grades"],
                    "calibration_label": section["label"]})
    return out


def section_or_refusal(run: LoadedRun, **kw: Any) -> dict[str, Any]:
    """The section, or ``{"refused": why}`` when there are too few teacher grades (a report still prints)."""
    from knockout.errors import ConfigError

    try:
        return calibrate_loaded(run, **kw)
    except ConfigError as exc:
        return {"refused": str(exc)}


def section_tables(report: dict[str, Any]) -> list[Table]:
    """The tables of the report's ``calibrated`` section (``report --calibrate``)."""
    sec = report.get(SECTION)
    if not sec:
        return []
    if "refused" in sec:
        return [kv("calibration", [("not calibrated", sec["refused"])])]
    return calibration_tables(sec)
