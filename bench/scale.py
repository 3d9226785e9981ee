"""Judging at scale: a scripted individual run of N answers through the command line, end to end.

    nice -n 10 python bench/scale.py --answers 1000000      # the issue's targets (1M answers)
    python bench/scale.py --answers 10000                   # the smoke-test size (seconds)

It writes a JSONL exam of ``--answers`` answers (``--per-question`` answers per question, human grades on
0..4; texts written here), then runs, each in a fresh process:

1. ``knockout grade DATA --judge scripted --quiet --json`` (the scripted judge is a SIMULATION, not an LLM);
2. the same command again (every request a cache hit);
3. ``knockout report STORE --json`` (agreement with bootstrap CIs);
4. ``knockout export STORE --format jsonl``.

and prints wall time and peak RSS of each, the store's size (and per table), and the targets: peak RSS
under 2 GB, store under 1.5 GB, rerun under 25% of the first run, report under 60 s (targets are for
1M answers; smaller runs print the same table).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_exam(path: Path, answers: int, per_question: int) -> None:
    words = ("gradient", "entropy", "lemma", "vector", "proof", "kernel", "tensor", "bound", "prior", "graph")
    with path.open("w", encoding="utf-8") as f:
        for q in range(-(-answers // per_question)):
            f.write(json.dumps({"type": "question", "id": f"q{q}", "max_points": 4,
                                "text": f"Explain the role of the {words[q % 10]} in problem {q}."}) + "\n")
            for j in range(per_question):
                if q * per_question + j >= answers:
                    break
                text = " ".join(words[(q + j + k) % 10] for k in range(12 + j % 7))
                f.write(json.dumps({"type": "answer", "id": f"q{q}a{j}", "question_id": f"q{q}",
                                    "examinee": f"e{j}", "text": f"Answer {j}: {text}.",
                                    "human_scores": {"h1": float((q + j) % 5)}}) + "\n")


def measure(args: list[str], env: dict[str, str], out: Path | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and stdout of one command in a fresh process (also logged to stderr as
    each step ends, so a long run shows its figures before the table)."""
    code = ("import resource, runpy, sys\n"
            "sys.argv = ['knockout', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('knockout.cli', run_name='__main__')\n"
            "except SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
            "sys.stdout.flush()\n"
            "print('RSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(code)\n")
    t0 = time.perf_counter()
    with (out.open("w") if out else tempfile.TemporaryFile("w+")) as sink:
        r = subprocess.run([sys.executable, "-c", code, *args], env=env, stdout=sink if out else subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"knockout {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    rss = max(int(line.split()[1]) for line in r.stderr.splitlines() if line.startswith("RSS_KB")) / 1024
    print(f"[{time.strftime('%H:%M:%S')}] knockout {args[0]}: {wall:.1f} s, peak RSS {rss:.0f} MB", file=sys.stderr,
          flush=True)
    return wall, rss, (r.stdout or "")


def table_sizes(db: Path) -> dict[str, float]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    except sqlite3.Error:
        rows = []
    con.close()
    return {n: s / 1e6 for n, s in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--answers", type=int, default=1_000_000)
    ap.add_argument("--per-question", type=int, default=10)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory(prefix="knockout-scale-") as tmp:
        work = a.dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        data, db = work / "exam.jsonl", work / "scale.db"
        db.unlink(missing_ok=True)
        t0 = time.perf_counter()
        write_exam(data, a.answers, a.per_question)
        gen_s = time.perf_counter() - t0
        grade = ["grade", str(data), "--judge", "scripted", "--out", str(db), "--quiet", "--json"]
        first_s, first_rss, out1 = measure(grade, env)
        summary = json.loads(out1)
        again_s, again_rss, out2 = measure(grade, env)
        again = json.loads(out2)
        size = db.stat().st_size / 1e6 + sum(p.stat().st_size for p in work.glob("scale.db-*")) / 1e6
        report_s, report_rss, _ = measure(["report", str(db), "--json", "--resamples", str(a.resamples)], env)
        export_s, export_rss, _ = measure(["export", str(db), "--format", "jsonl"], env, out=work / "export.jsonl")
        tables = table_sizes(db)
    ratio = again_s / first_s
    peak = max(first_rss, again_rss, report_rss, export_rss)
    result = {
        "answers": a.answers, "data_s": round(gen_s, 1),
        "first_run_s": round(first_s, 1), "first_run_rss_mb": round(first_rss), "judge_calls": summary["judge_calls"],
        "rerun_s": round(again_s, 1), "rerun_rss_mb": round(again_rss), "rerun_cache_hits": again["cache_hits"],
        "rerun_ratio": round(ratio, 3), "store_mb": round(size, 1),
        "report_s": round(report_s, 1), "report_rss_mb": round(report_rss),
        "export_s": round(export_s, 1), "export_rss_mb": round(export_rss), "peak_rss_mb": round(peak),
        "tables_mb": {k: round(v, 1) for k, v in tables.items()},
    }
    if a.json:
        print(json.dumps(result))
        return
    scale = a.answers / 1_000_000
    print(f"scripted individual run (a SIMULATION), {a.answers} answers, {a.per_question} per question")
    print(f"{'figure':<28} {'value':>12}  {'target (1M answers)':<22}")
    rows = [
        ("first run", f"{first_s:.1f} s", f"{summary['judge_calls']} calls"),
        ("peak RSS (any step)", f"{peak:.0f} MB", "< 2048 MB " + ("met" if peak < 2048 else "MISSED")),
        ("  first run / rerun RSS", f"{first_rss:.0f}/{again_rss:.0f} MB", ""),
        ("  report / export RSS", f"{report_rss:.0f}/{export_rss:.0f} MB", ""),
        ("store size", f"{size:.1f} MB", "< 1500 MB " + ("met" if size < 1500 * max(scale, 1e-9) / scale
                                                         else "MISSED")),
        ("cache-hit rerun", f"{again_s:.1f} s", f"ratio {ratio:.2f} < 0.25 " + ("met" if ratio < 0.25 else "MISSED")),
        ("report", f"{report_s:.1f} s", "< 60 s " + ("met" if report_s < 60 else "MISSED")),
        ("export (jsonl)", f"{export_s:.1f} s", ""),
    ]
    for name, value, target in rows:
        print(f"{name:<28} {value:>12}  {target}")
    print("store by table (MB): " + ", ".join(f"{k} {v:.1f}" for k, v in tables.items() if v >= 0.05))
    if a.answers < 1_000_000:
        print(f"(targets are for 1M answers; per 1M at this size: store {size / scale:.0f} MB, "
              f"first run {first_s / scale:.0f} s)")


if __name__ == "__main__":
    main()
