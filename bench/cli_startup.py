"""CLI start-up: wall time of ``knockout --help`` and ``knockout grade --help`` (target: under 0.3 s), and
which heavy modules the command line loads for them (none of scipy, scikit-learn, matplotlib, the web stack;
no pydantic for `knockout --help`: typer 0.29 loads it for a command's own `--help`).

    python bench/cli_startup.py [--runs 7]

Each command runs ``--runs`` times in a fresh interpreter (``python -m knockout.cli``, the same code as the
``knockout`` script); the table shows the median and the best, next to a bare ``python -c pass``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("scipy", "sklearn", "matplotlib", "fastapi", "uvicorn", "jinja2", "numpy", "openai", "anthropic", "pydantic")


def timed(cmd: list[str], runs: int, env: dict[str, str]) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - t0)
    return out


def loaded(args: list[str], env: dict[str, str]) -> list[str]:
    code = ("import runpy, sys\nsys.argv = ['knockout', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('knockout.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return [m for m in r.stderr.strip().splitlines()[-1].split(",") if m] if r.stderr.strip() else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    rows = [("python -c pass", [sys.executable, "-c", "pass"], None)]
    for args in (["--help"], ["grade", "--help"], ["report", "--help"]):
        rows.append((f"knockout {' '.join(args)}", [sys.executable, "-m", "knockout.cli", *args], args))
    print(f"{'command':<26} {'median s':>9} {'best s':>7}  target   heavy modules loaded")
    for name, cmd, args in rows:
        t = timed(cmd, a.runs, env)
        heavy = ", ".join(loaded(args, env)) if args is not None else ""
        target = "" if args is None else ("met" if statistics.median(t) < 0.3 else "MISSED")
        print(f"{name:<26} {statistics.median(t):>9.3f} {min(t):>7.3f}  {target:<7}  {heavy or '-'}")


if __name__ == "__main__":
    main()
