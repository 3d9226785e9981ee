"""Tables of answers in and out: the same answers as CSV, flat JSONL, Parquet, a pandas DataFrame, a Hugging Face
dataset and a dataset folder load to the same item set, and how long each takes; then the tidy tables of a
debiased knockout run (results_df, Parquet export) and the transcript viewer's pages for it.

    python bench/tables.py [--data ../shared/data/saf/unseen_answers/english] [--copies 1] [--json]

Default data: the SAF unseen-answers set when ``../shared`` is present, else the bundled demo exam.  The
knockout run uses the scripted judge (a SIMULATION: only the sizes and times matter here).  Needs
knockout[dataframes] (and knockout[web] for the viewer rows).
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from knockout.data import from_dataframe, from_dataset, load_items
from knockout.data._records import Answer, ItemSet, Question
from knockout.judges import make_judge
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run
from knockout.reports import results_df
from knockout.storage._store import Store

ROOT = Path(__file__).resolve().parents[1]
SAF = ROOT.parent / "shared/data/saf/unseen_answers/english"
DEMO = ROOT / "src/knockout/examples/demo_exam.jsonl"
COLUMNS = "question_id=qid,question=q,reference=ref,max_points=max,examinee=who,answer=a,answer_id=aid"


def rows_of(items: ItemSet, copies: int) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per answer (the question's fields repeated), with one column per grader."""
    graders = sorted({g for a in items for g in a.human_scores})
    rows = []
    for c in range(copies):
        for a in items:
            q = items.question_of(a)
            rows.append({"qid": f"{q.id}#{c}", "q": q.text, "ref": q.reference, "max": q.max_points,
                         "who": a.examinee, "aid": f"{a.id}#{c}", "a": a.text,
                         **{f"human_score:{g}": a.human_scores.get(g) for g in graders}})
    return rows, graders


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=SAF if SAF.exists() else DEMO)
    ap.add_argument("--copies", type=int, default=1, help="repeat the answers N times (bigger tables)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import datasets
    import pandas as pd

    datasets.disable_progress_bars()

    base = load_items(args.data)
    rows, _ = rows_of(base, args.copies)
    out: dict[str, Any] = {"data": str(args.data), "answers": len(rows), "load": [], "tidy": [], "viewer": []}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        with (d / "a.csv").open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
        (d / "a.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        df = pd.DataFrame(rows)
        df.to_parquet(d / "a.parquet")
        ds = datasets.Dataset.from_list(rows)
        ds.save_to_disk(str(d / "ds"))
        loads: list[tuple[str, Callable[[], ItemSet]]] = [
            ("csv", lambda: load_items(d / "a.csv", columns=COLUMNS)),
            ("flat jsonl", lambda: load_items(d / "a.jsonl", columns=COLUMNS)),
            ("parquet", lambda: load_items(d / "a.parquet", columns=COLUMNS)),
            ("DataFrame", lambda: from_dataframe(df, columns=COLUMNS)),
            ("Dataset", lambda: from_dataset(ds, columns=COLUMNS)),
            ("dataset folder", lambda: load_items(d / "ds", columns=COLUMNS)),
        ]
        reference = None
        for name, load in loads:
            items, secs = timed(load)
            reference = reference or items.fingerprint()
            out["load"].append({"container": name, "answers": len(items), "questions": len(items.questions),
                                "seconds": round(secs, 3), "same_item_set": items.fingerprint() == reference})

        db = d / "runs.db"
        items = load_items(d / "a.csv", columns=COLUMNS)
        with Store(db) as store:
            rid = run(items, make_judge("scripted"), store,
                      RunConfig(method="knockout", options=MethodOptions(debias=True))).run_id
        for table in ("answers", "matches"):
            frame, secs = timed(lambda table=table: results_df(db, rid, table=table))
            out["tidy"].append({"table": table, "rows": len(frame), "columns": len(frame.columns),
                                "seconds": round(secs, 3)})
        from knockout.reports._export import export_tidy

        (_, n, _), secs = timed(lambda: export_tidy(db, rid, "parquet", None, d / "t.parquet"))
        out["tidy"].append({"table": "answers -> parquet", "rows": n, "columns": None, "seconds": round(secs, 3)})
        out["viewer"] = viewer_pages(db, rid, items)

    if args.json:
        print(json.dumps(out))
        return
    con = Console()
    t = Table(title=f"{out['answers']} answers from {out['data']}: load", box=box.SIMPLE)
    for c in ("container", "answers", "questions", "seconds", "same item set"):
        t.add_column(c)
    for r in out["load"]:
        t.add_row(r["container"], str(r["answers"]), str(r["questions"]), f"{r['seconds']:.3f}",
                  "yes" if r["same_item_set"] else "NO")
    con.print(t)
    t = Table(title="tidy tables of a debiased knockout run (scripted judge: a simulation)", box=box.SIMPLE)
    for c in ("table", "rows", "columns", "seconds"):
        t.add_column(c)
    for r in out["tidy"]:
        t.add_row(r["table"], str(r["rows"]), str(r["columns"] or ""), f"{r['seconds']:.3f}")
    con.print(t)
    if out["viewer"]:
        t = Table(title="transcript viewer pages (TestClient, one request each)", box=box.SIMPLE)
        for c in ("page", "status", "KiB", "seconds"):
            t.add_column(c)
        for r in out["viewer"]:
            t.add_row(r["page"], str(r["status"]), f"{r['kib']:.0f}", f"{r['seconds']:.3f}")
        con.print(t)


def viewer_pages(db: Path, rid: str, items: ItemSet) -> list[dict[str, Any]]:
    try:
        from fastapi.testclient import TestClient

        from knockout.web import _auth
        from knockout.web._app import create_app
        from knockout.web._auth import Accounts
    except ImportError:
        return []
    _auth.ARGON2_PARAMS.update({"time_cost": 1, "memory_cost": 1024, "parallelism": 1})
    with Store(db) as store:
        Accounts(store).add_user("bench-viewer", "bench password", "viewer")
    c = TestClient(create_app(db), base_url="http://127.0.0.1", headers={"Origin": "http://127.0.0.1"})
    page = c.get("/login")
    token = page.text.split('name="csrf" value="')[1].split('"')[0]
    c.post("/login", data={"csrf": token, "username": "bench-viewer", "password": "bench password"})
    biggest: Question = max(items.questions.values(), key=lambda q: len(items.answers_for(q.id)))
    first: Answer = items.answers_for(biggest.id)[0]
    from urllib.parse import quote

    out = []
    for name, url in (("runs", "/runs"), ("run (100 items)", f"/runs/{rid}"),
                      ("run, largest gap first", f"/runs/{rid}?sort=gap"),
                      (f"bracket ({len(items.answers_for(biggest.id))} answers)",
                       f"/runs/{rid}/bracket/{quote(biggest.id, safe='')}"),
                      ("answer with its matches", f"/runs/{rid}/item/{quote(first.id, safe='')}")):
        r, secs = timed(lambda url=url: c.get(url))
        assert "/login" not in str(r.url), "the bench viewer is not logged in"
        out.append({"page": name, "status": r.status_code, "kib": len(r.content) / 1024, "seconds": round(secs, 3)})
    return out


if __name__ == "__main__":
    main()
