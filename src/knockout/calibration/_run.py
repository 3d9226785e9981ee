"""The calibration of a stored grading run: ``knockout calibrate``, ``report --calibrate``, ``grade --calibrate``,
the ``calibrated`` tidy table of ``export`` and the web app's calibrated column.

The expert grades are the run's human grades: its data file's and the web app's (``web:<user>``), as
:func:`knockout.reports.load_run` reads them.  Every calibrated grade is shown labelled as calibrated, with the
map and the number of expert grades behind it (:func:`label`), and, when the map is constant, that the judge
does not rank the answers (the experts' mean); when calibration declined every map, as the judge's grade.
"""

from __future__ import annotations

from typing import Any

from knockout.calibration._fit import Calibration, calibrate, first_per_question, graded_rows, label_for
from knockout.reports._runs import LoadedRun
from knockout.reports._tables import Table, kv, num, with_ci

#: the key of the report section (``report --calibrate``, ``--json``)
SECTION = "calibrated"


def label(section: dict[str, Any]) -> str:
    """How a calibrated grade is labelled wherever it is shown (:func:`knockout.calibration._fit.label_for`)."""
    return label_for(section["map"], section["expert_grades"], section.get("shapes"))


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


def calibrate_loaded(run: LoadedRun, *, per_question: int | None = None, seed: int = 0,
                     resamples: int = 1000) -> dict[str, Any]:
    """The calibration section of a loaded grading run (raises ConfigError when there are too few expert
    grades).  ``per_question``: fit on that many expert-graded answers per question (drawn with ``seed``) and
    compute the figures on the others (what experts who graded only these would get)."""
    rows = graded_rows(run.items, run.results)
    fit = first_per_question(rows, per_question, seed) if per_question else None
    cal: Calibration = calibrate(rows, fit_ids=fit, seed=seed, resamples=resamples)
    section = cal.to_dict()
    section["per_question"] = per_question
    section["label"] = label(section)
    section["fit_ids"] = sorted(fit) if fit is not None else None
    section["expert_graded"] = sum(1 for r in rows if r.expert is not None)
    section["answers"] = len(rows)
    # the web app's grades not used, by reason (not a number, out of range, ...): counted and shown
    section["expert_grades_left_out"] = dict((run.human_grades or {}).get("web_skipped") or {})
    return section


def calibration_tables(section: dict[str, Any]) -> list[Table]:
    """The calibration's tables: the map chosen, the held-out figures before and after."""
    f = section["figures"]
    fit = (f"{section['per_question']} expert grades per question ({section['expert_grades']} answers)"
           if section.get("per_question") else f"every expert grade ({section['expert_grades']} answers)")
    held = ("the other expert-graded answers (holdout)" if section["heldout"] == "holdout" else
            "each answer predicted by a map chosen and fitted without it (nested cross-validation)")
    cv = ", ".join(f"{m} {v:.3f}" for m, v in section["cv_rmse"].items())
    if section["map"] == "raw":
        note = "no map beat the judge's own grades in cross-validation: the grades stay the judge's; "
    elif section.get("constant"):
        note = ("the chosen map gives every answer the same grade (the experts' mean): the judge does not rank "
                "these answers, and the calibrated grades say nothing about any single answer; ")
    else:
        note = ""
    t1 = kv("calibration: judge grades mapped to expert grades", [
        ("fitted on", fit),
        ("map chosen by cross-validation", f"{section['map']}: {section['description']}"),
        ("cross-validated RMSE of each map (share of max)", cv),
        ("figures computed on", f"{f['n']} held-out answers of {f['questions']} questions: {held}"),
        *([("expert grades left out (web app)", ", ".join(f"{n} {why}" for why, n in sorted(left.items())))]
          if (left := section.get("expert_grades_left_out")) else []),
    ], note + "the grades are labelled as such everywhere they are shown: " + section["label"] +
        "; a map never reverses the judge's order (a linear slope is at least 0)")
    flat = ""
    if section.get("constant") and section["heldout"] != "holdout":
        flat = " (a constant map: the folds' maps differ only in their means, which is no ranking)"
    rows = [
        ["RMSE (points) [95% CI]", figure(f, "rmse_raw"), figure(f, "rmse_calibrated"),
         figure(f, "rmse_difference")],
        ["Pearson (share of max points) [95% CI]", figure(f, "pearson_raw"),
         figure(f, "pearson_calibrated") + (flat if f.get("pearson_calibrated") is not None else ""),
         difference(f, "pearson")],
        ["Cohen's kappa, quadratic (points) [95% CI]", figure(f, "kappa_raw"),
         figure(f, "kappa_calibrated") + (flat if f.get("kappa_calibrated") is not None else ""),
         difference(f, "kappa")],
    ]
    no_ci = any("--resamples 0" in str(v) for k, v in f.items() if k.endswith("_ci_why"))
    step = f.get("kappa_step")
    same = ("the same answers and unit as knockout report's Pearson when every expert-graded answer is held "
            "out in turn" if section["heldout"] != "holdout" else
            "knockout report's Pearson is over every expert-graded answer, these over the held-out ones only")
    t2 = Table("held-out agreement with the experts: judge grades before and after calibration",
               ["figure", "raw judge", "calibrated", "calibrated - raw"], rows,
               "held-out answers only, never those a map was fitted on; RMSE in points, Pearson on each grade as a "
               f"share of its question's max points ({same}); " +
               ("no CIs: --resamples 0" if no_ci else "95% CIs: cluster bootstrap over questions") +
               (f"; kappa on grades rounded to steps of {num(step)}" if step else
                "; kappa: the expert grades are on no half-point grid"))
    return [t1, t2]


def calibrated_rows(section: dict[str, Any], rows: list[dict[str, Any]], id_key: str = "answer_id"
                    ) -> list[dict[str, Any]]:
    """``rows`` (one per answer) with the calibrated grade beside the raw one, labelled."""
    out = []
    for r in rows:
        aid = str(r.get(id_key))
        g = section["grades"].get(aid)
        out.append({**r, "calibrated_score": g, "calibrated_sd": section["sd"].get(aid),
                    "calibration_map": section["map"], "calibration_expert_grades": section["expert_grades"],
                    "calibration_label": section["label"]})
    return out


def section_or_refusal(run: LoadedRun, **kw: Any) -> dict[str, Any]:
    """The section, or ``{"refused": why}`` when there are too few expert grades (a report still prints)."""
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
