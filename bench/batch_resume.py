"""Provider batch APIs: a run killed between submit and completion resumes by polling the same batch.

    python bench/batch_resume.py [--answers 40] [--backend openai-batch|anthropic-batch]

Against the loopback fake of the batch endpoints (tests/batch_fakes.py: http.server, TCP_NODELAY; a small
deterministic grader, not a model): ``knockout grade --judge BACKEND:m`` is started, SIGKILLed once its
batch is submitted (the fake holds it in progress), and started again after the fake finishes the batch.
Prints batches created, resubmitted batches (target 0), requests answered and repeated calls.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.batch_fakes import FakeBatchServer  # noqa: E402

from knockout.data import write_jsonl  # noqa: E402
from knockout.data._records import Answer, ItemSet, Question  # noqa: E402
from knockout.storage import Store  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--answers", type=int, default=40)
    ap.add_argument("--backend", choices=["openai-batch", "anthropic-batch"], default="openai-batch")
    a = ap.parse_args()
    qs = [Question(id=f"q{i}", text=f"Explain idea {i}.", max_points=4) for i in range(a.answers // 4)]
    answers = [Answer(id=f"q{i}a{j}", question_id=f"q{i}", text=f"answer {j}: " + "x" * j,
                      human_scores={"h": float(j)}) for i in range(len(qs)) for j in range(4)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as d, FakeBatchServer() as fake:
        data, db = Path(d) / "exam.jsonl", Path(d) / "b.db"
        write_jsonl(ItemSet(qs, answers), data)
        base = fake.url + ("/v1" if a.backend == "openai-batch" else "")
        cmd = [sys.executable, "-m", "knockout.cli", "grade", str(data), "--judge",
               f"{a.backend}:m?base_url={base}&api_key=k&poll=0.05", "--out", str(db), "--quiet", "--json"]
        fake.hold = True
        t0 = time.perf_counter()
        first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        fake.wait_for_batches(1)
        time.sleep(0.3)
        first.send_signal(signal.SIGKILL)
        first.wait()
        with Store(db) as store:
            status_after_kill = store.runs()[0].status
            recorded = [b["id"] for b in store.batches()]
        fake.hold = False
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        summary = json.loads(second.stdout)
        with Store(db) as store:
            repeated = store.repeated_calls()
    resubmitted = len(fake.created) - 1
    print(f"{a.backend} against a loopback fake, {len(answers)} answers (individual grading, one wave)")
    for name, value in [("batches created", len(fake.created)), ("batch recorded before the kill", recorded),
                        ("run status after SIGKILL", status_after_kill),
                        ("resubmitted batches (target 0)",
                         f"{resubmitted} ({'met' if resubmitted == 0 else 'MISSED'})"),
                        ("requests answered on resume", summary["judge_calls"]),
                        ("repeated calls", repeated), ("final status", summary["status"]),
                        ("wall s (both invocations)", f"{wall:.1f}")]:
        print(f"{name:<34} {value}")


if __name__ == "__main__":
    main()
