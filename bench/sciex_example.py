"""SciEx end to end on the example exam (src/knockout/examples/sciex): solve, grade, leaderboard.

Two embedded models answer the English and the German version of the example exam (``knockout solve``),
the embedded judge grades every answer (the models' and the three hand-graded sample examinees',
``knockout grade --prompt sciex-system --reference``), and ``knockout leaderboard`` ranks them.  Prints
the time and the calls of each step, then the leaderboard's figures.  Everything goes through one store,
so a second invocation is all cache hits (and shows what a rerun costs).

    nice -n 10 python bench/sciex_example.py                       # 1.5B and 0.5B examinees, 1.5B judge
    python bench/sciex_example.py --model sim=scripted --judge scripted   # a simulation, seconds
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMS = [ROOT / "src" / "knockout" / "examples" / "sciex" / name for name in ("cs-basics-en", "cs-basics-de")]


def step(name: str, cmd: list[str], rows: list[list[str]]) -> dict[str, object]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "knockout.cli", *cmd, "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{name} failed ({done.returncode}): {done.stderr.strip()}")
    out: dict[str, object] = json.loads(done.stdout)
    runs = out.get("runs") if isinstance(out.get("runs"), list) else [out]
    live = sum(int(r.get("judge_calls", 0)) for r in runs if isinstance(r, dict))
    hits = sum(int(r.get("cache_hits", 0)) for r in runs if isinstance(r, dict))
    rows.append([name, f"{wall:.1f}", str(live), str(hits)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", help="examinee NAME=SPEC (default: qwen-1.5b=llamacpp and "
                    "qwen-0.5b=llamacpp:qwen2.5-coder-0.5b)")
    ap.add_argument("--judge", default="llamacpp")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/knockout-sciex-bench"))
    ap.add_argument("--solve-tokens", type=int, default=512)
    ap.add_argument("--grade-tokens", type=int, default=384)
    ap.add_argument("--threads", default="2", help="llama.cpp threads (--model-opt/--judge-opt threads=N)")
    args = ap.parse_args()
    models = args.model or ["qwen-1.5b=llamacpp", "qwen-0.5b=llamacpp:qwen2.5-coder-0.5b"]
    store, solved = args.workdir / "sciex.db", args.workdir / "solved"
    llama = [] if not any("llamacpp" in m for m in models) else ["--model-opt", f"threads={args.threads}"]
    judge_opt = ["--judge-opt", f"threads={args.threads}"] if args.judge.startswith("llamacpp") else []
    rows: list[list[str]] = []
    step("solve", ["solve", *map(str, EXAMS), *[x for m in models for x in ("--model", m)], *llama,
                   "--max-tokens", str(args.solve_tokens), "-o", str(store), "-d", str(solved), "-q"], rows)
    graded = step("grade", ["grade", str(solved / "solved.jsonl"), "--judge", args.judge, *judge_opt,
                            "--prompt", "sciex-system", "--reference", "--max-tokens", str(args.grade_tokens),
                            "-o", str(store), "-q"], rows)
    board = step("leaderboard", ["leaderboard", str(store), "--html", str(args.workdir / "leaderboard.html"),
                                 "--csv", str(args.workdir / "leaderboard.csv")], rows)
    print(f"{'step':<12} {'wall s':>8} {'live calls':>11} {'cache hits':>11}")
    for r in rows:
        print(f"{r[0]:<12} {r[1]:>8} {r[2]:>11} {r[3]:>11}")
    print(f"\ngrade run: {graded['valid']} valid, {graded['invalid']} invalid of {graded['answers']} answers; "
          f"format retries {graded['format_retries']}")
    judges = board["judges"]  # type: ignore[index]
    first = judges[0]["key"] if judges else None
    print(f"\n{'rank':<5} {'examinee':<16} {'expert %':>18} {'Ger':>5} {'judge %':>20} {'Ger':>5}")

    def pct(res: dict[str, object] | None) -> tuple[str, str]:
        if not res:
            return "-", "-"
        ci = res.get("percent_ci") or []
        ci_s = f" [{ci[0]:.1f},{ci[1]:.1f}]" if ci else ""  # type: ignore[index]
        return f"{res['percent']:.1f}{ci_s}", f"{res['german']:.1f}"

    for r in board["examinees"]:  # type: ignore[attr-defined]
        e, eg = pct(r["expert"])
        j, jg = pct(r["judges"].get(first))
        print(f"{r['rank']:<5} {r['examinee']:<16} {e:>18} {eg:>5} {j:>20} {jg:>5}")
    s = board["students"]  # type: ignore[index]
    if s:
        print(f"{'':<5} {'student average':<16} {s['percent']:>18.1f} {s['german']:>5.1f}")
    for j in judges:
        q, x = j["question_level"], j["exam_level"] or {}

        def ci(d: dict[str, object]) -> str:
            v = d.get("pearson")
            c = d.get("pearson_ci")
            return "-" if v is None else f"{v:.3f}" + (f" [{c[0]:.3f}, {c[1]:.3f}]" if c else "")  # type: ignore[index]

        print(f"\njudge {j['label']}: Pearson question level {ci(q)} (n={q.get('n')}), exam level {ci(x)} "
              f"(n={x.get('n')}), invalid {j['invalid']}")


if __name__ == "__main__":
    main()
