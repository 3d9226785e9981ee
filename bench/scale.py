"""Judging at scale: a scripted individual run of N answers through the command line, end to end.

    nice -n 10 python bench/scale.py --answers 1000000      # the issue's targets (1M answers)
    python bench/scale.py --answers 10000                   # the smoke-test size (seconds)
    python bench/scale.py --answers 10000,100000 --format flat,csv --steps grade   # RSS per answer
    python bench/scale.py --answers 10000 --steps grade --judge loopback --latency-ms 1 --references \
        --readers two,judge --texts distinct --encoder 2000      # the second reader's cost (issue 59)

It writes an exam of ``--answers`` answers (``--per-question`` answers per question, human grades on 0..4;
texts written here) in each ``--format``: ``typed`` JSONL (question and answer records), ``flat`` JSONL (one
answer per line with its question's fields, the shape of a CSV) or ``csv``; then runs, each in a fresh process
(``--steps``: all four by default):

1. ``knockout grade DATA --judge scripted --quiet --json`` (the scripted judge is a SIMULATION, not an LLM;
   ``--judge loopback``: a real OpenAI-compatible server on 127.0.0.1, ``bench/loopback.py``, that answers every
   request after ``--latency-ms``, so that a grade reads the answers with both readers by default);
2. the same command again (every request a cache hit);
3. ``knockout report STORE --json`` (agreement with bootstrap CIs);
4. ``knockout export STORE --format jsonl``.

and prints wall time and peak RSS of each, the store's size (and per table), and the targets: peak RSS
under 2 GB (1 GB for the flat formats), store under 1.5 GB, rerun under 25% of the first run, report under
60 s (targets are for 1M answers; smaller runs print the same table).  With several sizes or formats it ends
with one table of peak RSS per step, per answer (peak RSS / answers) and per added answer (the growth from
the size before) and the peak RSS that slope gives at 1M answers (the issue's bound: 1 GB with two readers),
each ``--readers`` apart.  With several ``--readers`` (``two,judge``) each size is graded with each, one after the
other, and a table gives each one's CPU per answer, wall and peak RSS against the last's.

The answers' texts: ``--texts bench`` (the default) repeats about 100 distinct texts whatever the size (ten words
rotated), which flatters anything that reads a text once (the encoder); ``--texts distinct`` gives every answer a
text of its own (12 to 18 words drawn from an English vocabulary, the same lengths).  ``--references`` gives each
question a reference answer (the second reader's similarity reads it).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


FORMATS = {"typed": "exam.jsonl", "flat": "exam-flat.jsonl", "csv": "exam.csv"}
FLAT_COLUMNS = ("question_id", "question", "max_points", "answer_id", "examinee", "answer", "human_score:h1")
WORDS = ("gradient", "entropy", "lemma", "vector", "proof", "kernel", "tensor", "bound", "prior", "graph")
#: the distinct texts' vocabulary (``--texts distinct``): English words of the exam's subject
_VOCABULARY = (
    "the a of to in is it that by for with on as each when its their this so which than more less because error "
    "model data sample mean variance loss rate step update weight layer input output signal noise estimate "
    "gradient entropy lemma vector proof kernel tensor bound prior graph matrix norm limit series function "
    "converges grows shrinks stays depends measures controls reduces increases keeps defines splits joins "
    "small large stable unstable exact rough linear convex smooth sparse dense random fixed")
VOCABULARY = tuple(_VOCABULARY.split())


def answer_text(q: int, j: int, index: int, texts: str) -> str:
    """Answer ``j`` of question ``q`` (the ``index``-th of the exam): ``bench`` repeats few texts (about 100 distinct
    texts whatever the size: the words rotate through ten), ``distinct`` draws 12 to 18 words from
    :data:`VOCABULARY` per answer, seeded by its index (every text its own, the same length range)."""
    if texts == "distinct":
        import random

        rng = random.Random(index)
        return f"Answer {j}: " + " ".join(rng.choice(VOCABULARY) for _ in range(12 + index % 7)) + "."
    return f"Answer {j}: " + " ".join(WORDS[(q + j + k) % 10] for k in range(12 + j % 7)) + "."


def write_exam(path: Path, answers: int, per_question: int, fmt: str = "typed", references: bool = False,
               texts: str = "bench") -> None:
    """The same exam in any of :data:`FORMATS` (the flat formats: one row per answer, its question's fields
    repeated; the same questions, answers, grades and ids); ``references``: each question with a reference
    answer; ``texts``: the answers' texts (:func:`answer_text`)."""
    words = WORDS
    columns = FLAT_COLUMNS + (("reference",) if references else ())
    with path.open("w", encoding="utf-8", newline="") as f:
        table = csv.writer(f) if fmt == "csv" else None
        if table is not None:
            table.writerow(columns)
        for q in range(-(-answers // per_question)):
            question = f"Explain the role of the {words[q % 10]} in problem {q}."
            reference = (f"In problem {q} the {words[q % 10]} bounds the {words[(q + 3) % 10]}, so the "
                         f"{words[(q + 7) % 10]} converges.")
            if fmt == "typed":
                f.write(json.dumps({"type": "question", "id": f"q{q}", "max_points": 4, "text": question}
                                   | ({"reference": reference} if references else {})) + "\n")
            for j in range(per_question):
                if q * per_question + j >= answers:
                    break
                text = answer_text(q, j, q * per_question + j, texts)
                grade = float((q + j) % 5)
                if fmt == "typed":
                    f.write(json.dumps({"type": "answer", "id": f"q{q}a{j}", "question_id": f"q{q}",
                                        "examinee": f"e{j}", "text": text, "human_scores": {"h1": grade}}) + "\n")
                    continue
                row = (f"q{q}", question, 4, f"q{q}a{j}", f"e{j}", text, grade) + ((reference,) if references else ())
                if table is not None:
                    table.writerow(row)
                else:
                    f.write(json.dumps(dict(zip(columns, row, strict=True))) + "\n")


#: CPU seconds (user + system) of the last command :func:`measure` ran
LAST_CPU: list[float] = [0.0]


#: the knockout command in a fresh process, its own peak RSS and CPU printed to stderr at its end
DRIVER = ("import resource, runpy, sys\n"
          "sys.argv = ['knockout', *sys.argv[1:]]\n"
          "try:\n    runpy.run_module('knockout.cli', run_name='__main__')\n"
          "except SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
          "sys.stdout.flush()\n"
          "u = resource.getrusage(resource.RUSAGE_SELF)\n"
          "print('RSS_KB', u.ru_maxrss, u.ru_utime + u.ru_stime, file=sys.stderr)\n"
          "sys.exit(code)\n")


def measure(args: list[str], env: dict[str, str], out: Path | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and stdout of one command in a fresh process (also logged to stderr as
    each step ends, so a long run shows its figures before the table); its CPU seconds in :data:`LAST_CPU`."""
    code = DRIVER
    t0 = time.perf_counter()
    with (out.open("w") if out else tempfile.TemporaryFile("w+")) as sink:
        r = subprocess.run([sys.executable, "-c", code, *args], env=env, stdout=sink if out else subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"knockout {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    line = next(line for line in reversed(r.stderr.splitlines()) if line.startswith("RSS_KB")).split()
    rss, LAST_CPU[0] = int(line[1]) / 1024, float(line[2])
    print(f"[{time.strftime('%H:%M:%S')}] knockout {args[0]}: {wall:.1f} s, CPU {LAST_CPU[0]:.1f} s, "
          f"peak RSS {rss:.0f} MB", file=sys.stderr, flush=True)
    return wall, rss, (r.stdout or "")


def table_sizes(db: Path) -> dict[str, float]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    except sqlite3.Error:
        rows = []
    con.close()
    return {n: s / 1e6 for n, s in rows}


STEPS = ("grade", "rerun", "report", "export")


def run_one(answers: int, fmt: str, steps: list[str], a: argparse.Namespace, env: dict[str, str],
            judge: str = "scripted", readers: str | None = None) -> dict[str, Any]:
    """One size in one format: the steps asked for, each in a fresh process; the figures as a dict.  ``judge``:
    the judge's spec; ``readers``: ``--readers`` given to the grade (None: the default)."""
    with tempfile.TemporaryDirectory(prefix="knockout-scale-") as tmp:
        work = a.dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        data, db = work / FORMATS[fmt], work / "scale.db"
        for p in work.glob("scale.db*"):
            p.unlink()
        t0 = time.perf_counter()
        write_exam(data, answers, a.per_question, fmt, a.references, a.texts)
        gen_s = time.perf_counter() - t0
        result: dict[str, Any] = {"answers": answers, "format": fmt, "data_s": round(gen_s, 1),
                                  "data_mb": round(data.stat().st_size / 1e6, 1), "judge": a.judge,
                                  "readers": readers or "default", "texts": a.texts, "references": a.references}
        grade = ["grade", str(data), "--judge", judge, "--out", str(db), "--quiet", "--json",
                 *(["--readers", readers] if readers else [])]
        if "grade" in steps or "rerun" in steps:
            first_s, first_rss, out1 = measure(grade, env)
            summary = json.loads(out1)
            result |= {"first_run_s": round(first_s, 1), "first_run_rss_mb": round(first_rss),
                       "first_run_cpu_s": round(LAST_CPU[0], 1),
                       "first_run_cpu_ms_per_answer": round(1000 * LAST_CPU[0] / answers, 3),
                       "judge_calls": summary["judge_calls"], "grade_readers": summary.get("readers")}
        if "rerun" in steps:
            again_s, again_rss, out2 = measure(grade, env)
            result |= {"rerun_s": round(again_s, 1), "rerun_rss_mb": round(again_rss),
                       "rerun_cache_hits": json.loads(out2)["cache_hits"],
                       "rerun_ratio": round(again_s / result["first_run_s"], 3)}
        if db.exists():
            result["store_mb"] = round(db.stat().st_size / 1e6 + sum(p.stat().st_size for p in work.glob("scale.db-*"))
                                       / 1e6, 1)
        if "report" in steps:
            report_s, report_rss, _ = measure(["report", str(db), "--json", "--resamples", str(a.resamples)], env)
            result |= {"report_s": round(report_s, 1), "report_rss_mb": round(report_rss)}
        if "export" in steps:
            export_s, export_rss, _ = measure(["export", str(db), "--format", "jsonl"], env, out=work / "export.jsonl")
            result |= {"export_s": round(export_s, 1), "export_rss_mb": round(export_rss)}
        if db.exists():
            result["tables_mb"] = {k: round(v, 1) for k, v in table_sizes(db).items()}
    result["peak_rss_mb"] = max(v for k, v in result.items() if k.endswith("_rss_mb"))
    return result


def print_one(r: dict[str, Any]) -> None:
    n, scale = r["answers"], r["answers"] / 1_000_000
    bound = 1024 if r["format"] != "typed" else 2048
    judge = ("scripted individual run (a SIMULATION)" if r.get("judge", "scripted") == "scripted"
             else "individual run, loopback judge (a real OpenAI-compatible server)")
    print(f"{judge}, readers {r.get('readers', 'default')}, {n} answers, {r['format']} data ({r['data_mb']} MB)")
    print(f"{'figure':<28} {'value':>12}  {'target (1M answers)':<22}")
    rows = [("peak RSS (any step)", f"{r['peak_rss_mb']:.0f} MB",
             f"< {bound} MB " + ("met" if r["peak_rss_mb"] < bound else "MISSED"))]
    if "first_run_s" in r:
        rows.insert(0, ("first run", f"{r['first_run_s']:.1f} s", f"{r['judge_calls']} calls, CPU "
                        f"{r['first_run_cpu_s']:.1f} s ({r['first_run_cpu_ms_per_answer']:.3f} ms an answer)"))
        rows.append(("  first run RSS", f"{r['first_run_rss_mb']:.0f} MB", ""))
    if "rerun_s" in r:
        rows.append(("  rerun RSS", f"{r['rerun_rss_mb']:.0f} MB", ""))
        rows.append(("cache-hit rerun", f"{r['rerun_s']:.1f} s",
                     f"ratio {r['rerun_ratio']:.2f} < 0.25 " + ("met" if r["rerun_ratio"] < 0.25 else "MISSED")))
    if "store_mb" in r:
        size = r["store_mb"]
        rows.append(("store size", f"{size:.1f} MB", "< 1500 MB " + ("met" if size / scale < 1500 else "MISSED")))
    if "report_s" in r:
        rows.append(("report", f"{r['report_s']:.1f} s (RSS {r['report_rss_mb']} MB)",
                     "< 60 s " + ("met" if r["report_s"] < 60 else "MISSED")))
    if "export_s" in r:
        rows.append(("export (jsonl)", f"{r['export_s']:.1f} s (RSS {r['export_rss_mb']} MB)", ""))
    for name, value, target in rows:
        print(f"{name:<28} {value:>12}  {target}")
    if "tables_mb" in r:
        print("store by table (MB): " + ", ".join(f"{k} {v:.1f}" for k, v in r["tables_mb"].items() if v >= 0.05))


def print_rss_table(results: list[dict[str, Any]]) -> None:
    """Peak RSS per step and per answer, each format and readers by size: the growth per added answer from the
    size before (the slope, which leaves out the process's fixed cost) and the peak it gives at 1M answers."""
    steps = [s for s in ("first_run", "rerun", "report", "export") if any(f"{s}_rss_mb" in r for r in results)]
    print()
    print("| format | readers | answers | " + " | ".join(f"{s} RSS MB" for s in steps)
          + " | peak RSS MB | KB per answer | KB per added answer | peak RSS at 1M MB (slope) "
            "| first run CPU ms per answer |")
    print("| --- " * (8 + len(steps)) + "|")
    before: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: (r["format"], r.get("readers", ""), r["answers"])):
        n, peak, key = r["answers"], r["peak_rss_mb"], (r["format"], r.get("readers", "default"))
        prev = before.get(key)
        slope = None if prev is None else (peak - prev["peak_rss_mb"]) / (n - prev["answers"])  # MB an answer
        added = "-" if slope is None else f"{slope * 1024:.2f}"
        at_1m = "-" if slope is None else f"{peak + slope * (1_000_000 - n):,.0f}"
        print(f"| {r['format']} | {key[1]} | {n:,} | " + " | ".join(str(r.get(f"{s}_rss_mb", "-")) for s in steps)
              + f" | {peak} | {peak * 1024 / n:.2f} | {added} | {at_1m} | "
                f"{r.get('first_run_cpu_ms_per_answer', '-')} |")
        before[key] = r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--answers", default="1000000", help="one size or several, comma-separated")
    ap.add_argument("--format", default="typed", help=f"one or several of {', '.join(FORMATS)}, comma-separated")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"which of {', '.join(STEPS)} to run")
    ap.add_argument("--per-question", type=int, default=10)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object (a list for several)")
    ap.add_argument("--judge", choices=("scripted", "loopback"), default="scripted",
                    help="scripted (a SIMULATION) or loopback: a real OpenAI-compatible server on 127.0.0.1 "
                         "(bench/loopback.py) that answers every request after --latency-ms")
    ap.add_argument("--latency-ms", type=float, default=1.0, help="the loopback judge's latency")
    ap.add_argument("--references", action="store_true", help="each question with a reference answer")
    ap.add_argument("--texts", choices=("bench", "distinct"), default="bench",
                    help="bench: the answers repeat about 100 texts; distinct: every answer's text its own")
    ap.add_argument("--readers", default="",
                    help="--readers of each grade, one or several, comma-separated (e.g. two,judge: each size run "
                         "with both, interleaved, and their CPU, wall and RSS ratios printed); default: the CLI's")
    ap.add_argument("--encoder", type=int, default=0, metavar="N",
                    help="also measure the encoder on N of the exam's answer texts, in this process (one BLAS "
                         "thread): CPU ms per answer beside its FLOP limit (bench/encoders.py)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.answers.split(",") if x.strip()]
    formats = [f.strip() for f in a.format.split(",") if f.strip()]
    steps = [s.strip() for s in a.steps.split(",") if s.strip()]
    readers: list[str | None] = [r.strip() for r in a.readers.split(",") if r.strip()] or [None]
    if unknown := [f for f in formats if f not in FORMATS] + [s for s in steps if s not in STEPS]:
        raise SystemExit(f"unknown format or step: {', '.join(unknown)}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    encoder = encoder_figures(a.encoder, a.per_question, a.texts) if a.encoder else None  # first: seconds
    server = None
    judge = "scripted"
    if a.judge == "loopback":
        server = subprocess.Popen([sys.executable, str(ROOT / "bench/loopback.py"), "--latency-ms",
                                   str(a.latency_ms), "--reply", "The answer is partly right.\nScore: 3/4"],
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None
        judge = f"openai:loopback?base_url=http://127.0.0.1:{int(server.stdout.readline())}/v1&api_key=x"
    try:
        results = [run_one(n, fmt, steps, a, env, judge, r) for fmt in formats for n in sizes for r in readers]
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    if a.json:
        print(json.dumps((results[0] if len(results) == 1 else results) if encoder is None
                         else {"runs": results, "encoder": encoder}))
        return
    for r in results:
        print_one(r)
    print_rss_table(results)
    if len(readers) > 1:
        print_readers_table(results, readers)
    if encoder is not None:
        print(f"\nencoder ({encoder['texts']} texts, {encoder['n']} answers, {encoder['tokens']:.1f} tokens each, one "
              f"BLAS thread): {encoder['ms_cpu']:.2f} ms CPU an answer ({encoder['ms_wall']:.2f} ms wall); its FLOP "
              f"limit {encoder['ms_limit']:.2f} ms ({encoder['gflop']:.3f} GFLOP at {encoder['gemm_gflops']:.0f} "
              f"GFLOP/s); {encoder['ms_cpu'] / encoder['ms_limit']:.2f}x the limit")


def print_readers_table(results: list[dict[str, Any]], readers: list[str | None]) -> None:
    """Each size and format: every ``--readers`` against the first's (CPU per answer, wall, peak RSS)."""
    print(f"\n| format | answers | readers | first run s | CPU ms per answer | max RSS MB | CPU ratio | wall ratio "
          f"(against --readers {readers[-1]}) |")
    print("| --- " * 8 + "|")
    for fmt in dict.fromkeys(r["format"] for r in results):
        for n in dict.fromkeys(r["answers"] for r in results):
            rows = [r for r in results if r["format"] == fmt and r["answers"] == n and "first_run_s" in r]
            if not rows:
                continue
            base = rows[-1]
            for r in rows:
                print(f"| {fmt} | {n:,} | {r['readers']} | {r['first_run_s']:.1f} | "
                      f"{r['first_run_cpu_ms_per_answer']:.2f} | {r['first_run_rss_mb']} | "
                      f"{r['first_run_cpu_s'] / max(base['first_run_cpu_s'], 1e-9):.2f} | "
                      f"{r['first_run_s'] / max(base['first_run_s'], 1e-9):.2f} |")


def encoder_figures(n: int, per_question: int, texts: str) -> dict[str, Any]:
    """The packaged encoder on the exam's first ``n`` answer texts (those the grade reads), one BLAS thread: CPU
    and wall ms per answer, and the FLOP limit at this machine's matrix product rate (bench/encoders.py)."""
    from threadpoolctl import threadpool_limits

    sys.path.insert(0, str(ROOT / "bench"))
    import encoders

    answers = [answer_text(i // per_question, i % per_question, i, texts) for i in range(n)]
    with threadpool_limits(1):
        gemm = encoders.gemm_gflops()
        c = encoders.load_minilm()
        c.encode(answers[:32])  # warm (the fused weights made)
        t0, c0 = time.perf_counter(), time.process_time()
        c.encode(answers)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert c.flop_per_token is not None and c.tokens is not None
    tokens = c.tokens(answers)
    flop = c.flop_per_token * sum(min(t, 256) for t in tokens) / n
    return {"texts": texts, "n": n, "distinct": len(set(answers)), "tokens": sum(tokens) / n,
            "ms_cpu": 1000 * cpu / n, "ms_wall": 1000 * wall / n, "gflop": flop / 1e9, "gemm_gflops": gemm,
            "ms_limit": 1000 * flop / (gemm * 1e9)}


if __name__ == "__main__":
    main()
