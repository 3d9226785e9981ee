"""``knockout agreement``: agreement of verdict files produced elsewhere with the human labels they carry.

A verdict file is JSONL (one object per line) or CSV (a header row); a folder means every ``*.jsonl``
and ``*.csv`` under it, one evaluator per file.  Two kinds:

* ``pairwise``: the verdict and the human label are one of ``0`` (tie), ``1`` (first answer better),
  ``2`` (second better), as in the meta-evaluation study and ``load_pairs``, read as
  :class:`knockout.Verdict` ``TIE``, ``A``, ``B``.  Accuracy is plain equality
  of verdict and label; a tie is a label like the others (a tie verdict on a tied pair is correct, a tie
  verdict on a non-tied pair is wrong).  Also reported: the accuracy with invalid verdicts counted as
  wrong (``accuracy_all``), the accuracy on the pairs the humans did not call a tie, and Cohen's kappa.
* ``score``: numbers; Pearson, Spearman and Kendall, each with a 95% bootstrap interval (records
  resampled, seeded).

Invalid verdicts: a missing field, an empty value, or (pairwise) a value outside 0/1/2 or (score) text
that is not a number.  They are excluded from every figure and counted, with the first few shown; they
are never coerced into a grade.  Non-integer scores (e.g. ``"3.5"`` on a 1-5 scale) are valid numbers;
``non_integer`` says what to do with them: ``keep`` (default: used as they are), ``exclude`` (counted
as invalid) or ``round`` (half away from zero).  Records whose human label is missing or unreadable are
left out and counted separately.  ``kind="auto"`` picks ``pairwise`` when every readable human label is
0, 1 or 2, else ``score``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from knockout._verdict import META_SPELLING, Verdict
from knockout.data._io import iter_json_lines, natural_key, read_text, unique_header
from knockout.errors import ConfigError, InputError
from knockout.metrics._analysis import ci_pair, correlations_np, finite_or_none
from knockout.metrics._bootstrap import DEFAULT_RESAMPLES, Interval, bootstrap
from knockout.metrics._kappa import cohen_kappa
from knockout.reports._tables import Table, num, with_ci

KINDS = ("auto", "pairwise", "score")
NON_INTEGER = ("keep", "exclude", "round")
PAIR_LABELS = (Verdict.TIE, Verdict.A, Verdict.B)
SHOW_INVALID = 5
#: Verdict fields tried, in order, when none is given.
VERDICT_FIELDS = ("verdict", "winner", "score", "judge_score", "prediction")


def iter_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(record reference, record) for a JSONL or CSV file."""
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(read_text(path)))
        unique_header(reader.fieldnames or [], file=path)
        for n, row in enumerate(reader, 2):
            yield f"line {n}", dict(row)
    else:
        for n, obj in iter_json_lines(path):
            yield f"line {n}", obj


def verdict_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = [p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in (".jsonl", ".csv")]
        if not files:
            raise InputError("no *.jsonl or *.csv verdict files in this folder", file=str(path))
        return sorted(files, key=lambda p: natural_key(str(p.relative_to(path))))
    raise InputError("not found", file=str(path))


def as_number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, str):
        try:
            x = float(v.strip().replace(",", "."))
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    return None


def as_label(v: Any) -> Verdict | None:
    """A pairwise label '0', '1' or '2' (numbers such as 1.0 accepted) as TIE, A or B, else None."""
    x = as_number(v)
    if x is None or not float(x).is_integer() or str(int(x)) not in META_SPELLING.values():
        return None
    return Verdict.parse(str(int(x)))


def _evaluator(path: Path) -> str:
    stem = path.stem
    for prefix in ("merged_eval_results_", "merged_scores_"):
        stem = stem.removeprefix(prefix)
    for suffix in ("_pairwise", "_pointwise"):
        stem = stem.removesuffix(suffix)
    return stem


def analyse_file(path: Path, human_field: str, verdict_field: str | None = None, *, kind: str = "auto",
                 non_integer: str = "keep", resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """Agreement of one verdict file; raises InputError when no record has one of the two fields."""
    if kind not in KINDS:
        raise ConfigError(f"unknown kind '{kind}' ({', '.join(KINDS)})")
    if non_integer not in NON_INTEGER:
        raise ConfigError(f"unknown non-integer rule '{non_integer}' ({', '.join(NON_INTEGER)})")
    records = list(iter_records(path))
    if verdict_field is None:
        found = [f for f in VERDICT_FIELDS if any(f in r for _, r in records)]
        if not found:
            raise InputError(f"no verdict field (tried {', '.join(VERDICT_FIELDS)}); name one with --verdict",
                             file=str(path), field="verdict")
        verdict_field = found[0]
    for fld in (verdict_field, human_field):
        if not any(fld in r for _, r in records):
            raise InputError(f"no record has the field '{fld}'", file=str(path), field=fld)
    if kind == "auto":
        humans = [r.get(human_field) for _, r in records]
        readable = [h for h in humans if as_number(h) is not None]
        kind = "pairwise" if readable and all(as_label(h) is not None for h in readable) else "score"
    invalid: list[dict[str, Any]] = []
    without_human = 0
    non_integer_n = 0
    verdicts: list[Any] = []
    labels: list[Any] = []
    for ref, r in records:
        for fld in (verdict_field, human_field):  # JSON's NaN / Infinity: a broken file, not a judge's verdict
            if isinstance(r.get(fld), float) and not math.isfinite(r[fld]):
                raise InputError(f"{r[fld]!r} is not a number a verdict file may hold (NaN or Infinity)",
                                 file=str(path), record=ref, field=fld)
        h = as_label(r.get(human_field)) if kind == "pairwise" else as_number(r.get(human_field))
        if h is None:
            without_human += 1
            continue
        raw = r.get(verdict_field)
        v: Any = as_label(raw) if kind == "pairwise" else as_number(raw)
        reason = None
        if verdict_field not in r:
            reason = "missing field"
        elif v is None:
            reason = "empty" if raw is None or str(raw).strip() == "" else "not a valid verdict"
        elif kind == "score" and not float(v).is_integer():
            non_integer_n += 1
            if non_integer == "exclude":
                reason = "non-integer score (excluded by rule)"
            elif non_integer == "round":
                v = float(math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1))
        if reason:
            invalid.append({"record": ref, "value": raw, "reason": reason})
            continue
        verdicts.append(v)
        labels.append(h)
    out: dict[str, Any] = {
        "file": str(path), "evaluator": _evaluator(path), "kind": kind, "verdict_field": verdict_field,
        "records": len(records),
        "n": len(verdicts), "invalid": len(invalid), "without_human": without_human,
        "invalid_reasons": _count(invalid), "invalid_examples": invalid[:SHOW_INVALID],
    }
    idx_all = np.arange(len(verdicts))
    if kind == "pairwise":
        v_arr, h_arr = np.array(verdicts, dtype=object), np.array(labels, dtype=object)
        hit = (v_arr == h_arr).astype(float) if len(v_arr) else np.array([])
        non_tie = h_arr != Verdict.TIE
        out.update({
            "accuracy": float(hit.mean()) if len(hit) else None,
            "accuracy_all": float(hit.sum() / (len(hit) + len(invalid))) if len(hit) + len(invalid) else None,
            "accuracy_without_human_ties": float(hit[non_tie].mean()) if non_tie.any() else None,
            "human_ties": int((~non_tie).sum()),
            "verdict_ties": int((v_arr == Verdict.TIE).sum()),
            "kappa": cohen_kappa(list(v_arr), list(h_arr), labels=list(PAIR_LABELS)),
        })
        if resamples and len(hit) >= 3:
            (iv,) = bootstrap(lambda s: np.array([hit[s].mean()]), idx_all, resamples=resamples, seed=seed)
            out["accuracy_ci"] = ci_pair(iv)
        else:
            out["accuracy_ci"] = None
    else:
        x, y = np.array(verdicts, dtype=float), np.array(labels, dtype=float)
        out["non_integer"] = non_integer_n
        out["non_integer_rule"] = non_integer
        values = correlations_np(x, y)
        cis = (bootstrap(lambda s: correlations_np(x[s], y[s]), idx_all, resamples=resamples, seed=seed)
               if resamples and len(x) >= 3 else [Interval(None, None, 0)] * 3)
        for name, val, iv in zip(("pearson", "spearman", "kendall"), values, cis, strict=True):
            out[name] = finite_or_none(val)
            out[f"{name}_ci"] = ci_pair(iv)
    return out


def _count(invalid: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in invalid:
        counts[i["reason"]] = counts.get(i["reason"], 0) + 1
    return counts


def analyse_verdicts(path: Path, human_field: str, verdict_field: str | None = None, **kw: Any) -> dict[str, Any]:
    """One result per file (a folder: files lacking either field are listed under ``skipped``)."""
    files = verdict_files(Path(path))
    results, skipped = [], []
    for f in files:
        try:
            results.append(analyse_file(f, human_field, verdict_field, **kw))
        except InputError as exc:
            if len(files) == 1 or exc.field not in (human_field, verdict_field or "verdict"):
                raise
            skipped.append({"file": str(f), "reason": exc.message})
    if not results:
        raise InputError(f"no file has both a verdict field ({verdict_field or ' or '.join(VERDICT_FIELDS)}) "
                         f"and the human field '{human_field}'", file=str(path))
    return {"path": str(path), "human_field": human_field, "verdict_field": verdict_field or "auto",
            "non_integer_rule": kw.get("non_integer", "keep"), "files": results, "skipped": skipped}


def verdict_tables(res: dict[str, Any]) -> list[Table]:
    pair = [f for f in res["files"] if f["kind"] == "pairwise"]
    score = [f for f in res["files"] if f["kind"] == "score"]
    tables = []
    if pair:
        tables.append(Table(
            f"pairwise verdicts vs human '{res['human_field']}'",
            ["evaluator", "verdict field", "records", "n", "invalid", "accuracy [95% CI]", "accuracy (invalid = wrong)",
             "accuracy w/o human ties", "kappa"],
            [[f["evaluator"], f["verdict_field"], num(f["records"]), num(f["n"]), num(f["invalid"]),
              with_ci(f, "accuracy", 4),
              num(f["accuracy_all"], 4), num(f["accuracy_without_human_ties"], 4), num(f["kappa"], 4)]
             for f in pair],
            "accuracy: verdict == label, ties ('0') compared like any other label; invalid verdicts excluded",
        ))
    if score:
        tables.append(Table(
            f"scores vs human '{res['human_field']}'",
            ["evaluator", "verdict field", "records", "n", "invalid", "non-integer", "Pearson [95% CI]",
             "Spearman [95% CI]", "Kendall"],
            [[f["evaluator"], f["verdict_field"], num(f["records"]), num(f["n"]), num(f["invalid"]),
              num(f["non_integer"]),
              with_ci(f, "pearson", 4), with_ci(f, "spearman", 4), num(f["kendall"], 4)] for f in score],
            f"empty or unreadable scores: invalid, excluded; non-integer scores: {res['non_integer_rule']}",
        ))
    bad = [(f["evaluator"], i) for f in res["files"] for i in f["invalid_examples"]]
    if bad:
        tables.append(Table("invalid verdicts (first examples per file)", ["evaluator", "record", "value", "reason"],
                            [[ev, i["record"], repr(i["value"]), i["reason"]] for ev, i in bad]))
    if res["skipped"]:
        tables.append(Table("files skipped", ["file", "reason"], [[s["file"], s["reason"]] for s in res["skipped"]]))
    return tables
