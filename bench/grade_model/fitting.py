"""``bench/fit_grade_model.py fit``: every candidate by question-grouped CV, the table, the shipped model."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MODEL_OUT = ROOT / "src" / "knockout" / "grading" / "model.json"
CACHE = Path("/tmp/grade-model-readings.json")
NEG_SHARE = 0.25  # the negatives' total weight, as a share of the real answers'
MARGINS = (0.05, 0.1, 0.15, 0.2, 0.3, None)


def load_rows() -> list[dict[str, Any]]:
    """Every collected answer with its text, question, reference, target share, exam and judge readings."""
    import fit_grade_model as fg

    from knockout.data import load_items

    readings = [json.loads(x) for x in fg.READINGS_FILE.read_text().splitlines() if x.strip()]
    items_of: dict[str, Any] = {}
    for stage in fg.STAGES:
        try:
            for source, items in fg.stage_items(stage):
                items_of.setdefault(source, items)
        except SystemExit:
            continue
    full = {"mohler": load_items(fg.MOHLER)}
    rows = []
    for r in readings:
        if not r["valid"] or r["judge"] is None:
            continue
        src = r["source"]
        items = full.get(src) or items_of[src]
        q = items.questions[r["question_id"]]
        a = next((x for x in items if x.id == r["answer_id"]), None) if src not in full else None
        if a is None:
            a = _answer(items, r["answer_id"])
        scores = [float(v) for v in a.human_scores.values()]
        meta = a.meta or {}
        rows.append({"source": src, "question_id": q.id, "answer_id": a.id, "text": a.text, "question": q.text,
                     "reference": q.reference, "language": q.language, "max_points": q.max_points,
                     "target": float(np.mean(scores)) / q.max_points, "exam": fg.exam_of(
                         "mohler" if src in ("mohler",) or meta.get("source") == "mohler" else src, q),
                     "kind": meta.get("kind", "real"), "test": bool(meta.get("test", False)),
                     "neg_source": meta.get("source"), "judge": r["judge"], "judge_sd": r["judge_sd"]})
    return rows


_INDEX: dict[int, dict[str, Any]] = {}


def _answer(items: Any, answer_id: str) -> Any:
    idx = _INDEX.setdefault(id(items), {a.id: a for a in items})
    return idx[answer_id]


def add_readings(rows: list[dict[str, Any]]) -> None:
    """The other readings of every row (cached by text, question and reference in /tmp)."""
    from knockout.grading._readings import default_encoder, read_answers
    from knockout.guard import detect

    cache: dict[str, Any] = json.loads(CACHE.read_text()) if CACHE.exists() else {}

    def key(r: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps([r["text"], r["question"], r["reference"], r["language"]]).encode()
                              ).hexdigest()

    todo = [r for r in rows if key(r) not in cache]
    if todo:
        t0 = time.monotonic()
        enc = default_encoder()
        got = read_answers([r["text"] for r in todo], [r["question"] for r in todo],
                           [r["reference"] for r in todo], [r["language"] for r in todo], enc,
                           [float(detect(r["text"])["p_address"]) for r in todo])  # type: ignore[arg-type]
        for r, g in zip(todo, got, strict=True):
            cache[key(r)] = g.values
        CACHE.write_text(json.dumps(cache))
        print(f"readings of {len(todo)} answers in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    for r in rows:
        r.update({k: v for k, v in cache[key(r)].items() if k not in ("judge", "judge_sd")})


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x, y)[0, 1]) if len(x) > 2 and np.std(x) > 0 and np.std(y) > 0 else float("nan")


def cluster_ci(pred: np.ndarray, y: np.ndarray, groups: np.ndarray, stat: Any, n: int = 1000) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    uniq = np.unique(groups)
    idx = {g: np.flatnonzero(groups == g) for g in uniq}
    vals = []
    for _ in range(n):
        pick = np.concatenate([idx[g] for g in rng.choice(uniq, len(uniq))])
        vals.append(stat(pred[pick], y[pick]))
    return float(np.nanpercentile(vals, 2.5)), float(np.nanpercentile(vals, 97.5))


def weights_of(rows: list[dict[str, Any]]) -> np.ndarray:
    real = sum(r["kind"] == "real" for r in rows)
    neg = sum(r["kind"] != "real" for r in rows)
    w_neg = NEG_SHARE * real / max(neg, 1)
    return np.array([1.0 if r["kind"] == "real" else w_neg for r in rows])


def fit_main(args: argparse.Namespace) -> int:
    from sklearn.model_selection import GroupKFold

    from knockout.grading._model import GradeModel

    rows = load_rows()
    add_readings(rows)
    train = [r for r in rows if r["source"] in ("mohler", "saf-train")
             or (r["source"] == "negatives" and not r["test"])]
    mohler = [r for r in train if r["source"] == "mohler"]
    print(f"rows: {len(rows)}; training {len(train)} (mohler {len(mohler)}, "
          f"saf-train {sum(r['source'] == 'saf-train' for r in train)}, negatives {sum(r['source'] == 'negatives' for r in train)})",
          file=sys.stderr)
    # question-grouped CV: folds by exam; a fold's test questions (and their negatives) never in its training
    exams = np.array([f"{r.get('neg_source') or r['source']}:{r['exam']}" for r in train])
    folds = list(GroupKFold(n_splits=5).split(np.zeros(len(train)), groups=exams))
    y = np.array([r["target"] for r in train])
    w = weights_of(train)
    cands: dict[str, dict[str, Any]] = {}
    for alpha in (0.3, 1.0, 3.0):
        for m in MARGINS:
            cands[f"gam a={alpha} margin={m}"] = {"alpha": alpha, "margin": m}
    oof: dict[str, np.ndarray] = {k: np.full(len(train), np.nan) for k in cands}
    oof["judge-linear"] = np.full(len(train), np.nan)
    for tr, te in folds:
        tr_real = [i for i in tr]
        for name, c in cands.items():
            model = GradeModel.fit([train[i] for i in tr_real], y[tr_real], w[tr_real], alpha=c["alpha"],
                                   margin=c["margin"])
            oof[name][te] = [p.share for p in model.predict([train[i] for i in te])]
        j = np.array([r["judge"] for r in train])
        real_tr = [i for i in tr if train[i]["kind"] == "real"]
        b = np.polyfit(j[real_tr], y[real_tr], 1)
        oof["judge-linear"][te] = np.clip(np.polyval(b, j[te]), 0, 1)
    is_m = np.array([r["source"] == "mohler" for r in train])
    pts = np.array([r["max_points"] for r in train])
    np.array([r["question_id"] for r in train])
    table = []
    print(f"{'candidate':32s} {'mohler r':>9s} {'RMSE':>6s} {'saf-tr r':>9s} " +
          " ".join(f"{k[:8]:>8s}" for k in ("question", "question_edit", "keywords", "scrambled", "negated", "swapped",
                                               "other_question", "filler", "bare")))
    raw = {"judge-raw": np.array([r["judge"] for r in train])}
    for name, pred in {**raw, **oof}.items():
        m = is_m
        r_m = pearson(pred[m], y[m])
        rmse = float(np.sqrt(np.mean(((pred[m] - y[m]) * pts[m]) ** 2)))
        s = np.array([r["source"] == "saf-train" for r in train])
        negs = {k: float(np.mean(pred[[i for i, r in enumerate(train) if r["kind"] == k]]))
                for k in ("question", "question_edit", "keywords", "scrambled", "negated", "swapped", "other_question",
                          "filler", "bare")}
        table.append({"candidate": name, "mohler_pearson": round(r_m, 4), "mohler_rmse": round(rmse, 4),
                      "saf_train_pearson": round(pearson(pred[s], y[s]), 4),
                      "negatives_cv_mean": {k: round(v, 4) for k, v in negs.items()}})
        print(f"{name:32s} {r_m:9.3f} {rmse:6.3f} {pearson(pred[s], y[s]):9.3f} " +
              " ".join(f"{v:8.3f}" for v in negs.values()))
    Path("/tmp/grade-model-cv.json").write_text(json.dumps({"table": table, "oof": {k: v.tolist() for k, v in
                                                                                     oof.items()},
                                                             "ids": [[r["source"], r["answer_id"]] for r in train]}))
    return 0


def data_sha256(rows: list[dict[str, Any]]) -> str:
    """SHA-256 of the training data as fitted: every row's ids, texts, target and readings, in order."""
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps([r["source"], r["answer_id"], r["text"], r["question"], r["reference"], r["target"],
                             r["judge"], r["judge_sd"]], sort_keys=True).encode())
    return h.hexdigest()


def write_model(train: list[dict[str, Any]], alpha: float, margin: float | None, table: list[dict[str, Any]],
                prior: dict[str, float], extra: dict[str, Any]) -> Any:
    from knockout.grading._model import GradeModel

    y = np.array([r["target"] for r in train])
    meta = {"name": f"knockout-grade-{time.strftime('%Y-%m-%d')}", "fitted": time.strftime("%Y-%m-%d"),
            "judge": "llamacpp (Qwen2.5-Coder-1.5B-Instruct, the default prompt, verdict slot)",
            "encoder": "all-minilm-l6-v2", "alpha": alpha,
            "data": {"sha256": data_sha256(train), "rows": len(train),
                     "sources": sorted({r["source"] for r in train}),
                     "real": sum(r["kind"] == "real" for r in train),
                     "negatives": sum(r["kind"] != "real" for r in train), "negatives_weight_share": NEG_SHARE},
            "adapt": prior, "cv": table, **extra}
    model = GradeModel.fit(train, y, weights_of(train), alpha=alpha, margin=margin, meta=meta)
    MODEL_OUT.write_text(json.dumps(model.to_json(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {MODEL_OUT} ({model.name}, {model.digest})", file=sys.stderr)
    return model
