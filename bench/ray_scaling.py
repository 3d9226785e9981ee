"""Ray scale-out: calls/s of the same judge requests in process and on 1 and 2 Ray workers.

    nice -n 10 python bench/ray_scaling.py [--n 8] [--max-tokens 32] [--judge gguf|scripted]

``gguf`` (default): the embedded 0.5B GGUF (knockout[embedded-small]); in process it uses every core (and,
for comparison, one thread), each Ray worker gets one core (``threads=1``, ``cpus=1``) and its own copy of
the model.  ``scripted`` (a
SIMULATION, 50 ms per call) measures the executor's own overhead.  Each mode grades the same ``--n``
answers into a fresh store (no cache hits) through the one run lifecycle; the table shows wall time,
calls/s and the ratio to in process.  A local Ray instance is started with 2 CPUs, only inside a network
namespace whose one interface is loopback: Ray binds the host's own address even when told 127.0.0.1, so the
bench re-executes itself under ``unshare -n`` (root, or user namespaces) and refuses to start Ray otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def exam(n: int):  # type: ignore[no-untyped-def]
    from knockout.data._records import Answer, ItemSet, Question

    qs = [Question(id=f"q{i}", text=f"What is {i} + {i}? Give the number.", max_points=2) for i in range(n)]
    ans = [Answer(id=f"q{i}a", question_id=f"q{i}", text=f"It is {2 * i + (i % 2)}.", human_scores={"h": 2.0})
           for i in range(n)]
    return ItemSet(qs, ans, source="ray-bench")


def one(mode: str, spec: str, n: int, max_tokens: int) -> tuple[float, int]:
    from knockout.judges import GenParams, make_judge
    from knockout.methods import RunConfig, run
    from knockout.storage import Store

    executor = {"in process": None, "in process, 1 thread": None, "ray, 1 worker": "ray?workers=1&cpus=1",
                "ray, 2 workers": "ray?workers=2&cpus=1"}[mode]
    if mode != "in process" and spec.startswith("llamacpp"):
        spec += "?threads=1"
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "b.db") as store:
        cfg = RunConfig(params=GenParams(max_tokens=max_tokens, temperature=0.0), format_retries=0,
                        concurrency=None if executor else 2)
        t0 = time.perf_counter()
        rep = run(exam(n), make_judge(spec), store, cfg, executor=executor)
        wall = time.perf_counter() - t0
    return wall, int(rep.stats["judge_calls"])


def only_loopback() -> bool:
    """This process's network namespace has no interface but ``lo``."""
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]  # per namespace, unlike /sys/class/net
    return {line.split(":", 1)[0].strip() for line in lines} <= {"lo"}


def into_loopback_namespace() -> None:
    """Re-execute this bench in a new network namespace with only ``lo`` (brought up), or refuse."""
    if only_loopback():
        return
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        raise SystemExit("ray_scaling: Ray would listen on this host's address; needs unshare and ip (util-linux, "
                         "iproute2) to run in a loopback-only network namespace")
    argv = [sys.executable, *sys.argv]
    done = subprocess.run(["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv], check=False)
    raise SystemExit(done.returncode)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--judge", choices=["gguf", "scripted"], default="gguf")
    a = ap.parse_args()
    into_loopback_namespace()
    sys.path.insert(0, str(ROOT / "src"))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    spec = "llamacpp:qwen2.5-coder-0.5b" if a.judge == "gguf" else "scripted?delay=0.05"
    if a.judge == "gguf":  # load (and assemble) the model once before timing
        from knockout.judges._models import model_path

        model_path("qwen2.5-coder-0.5b")
    rows = []
    modes = ("in process", "in process, 1 thread", "ray, 1 worker", "ray, 2 workers")
    for mode in modes if a.judge == "gguf" else (modes[0], *modes[2:]):
        wall, calls = one(mode, spec, a.n, a.max_tokens)
        rows.append((mode, wall, calls))
    ray.shutdown()
    base = rows[0][2] / rows[0][1]
    print(f"judge {spec}, {a.n} requests, max_tokens {a.max_tokens} (machine: {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f})")
    print(f"{'mode':<22} {'calls':>5} {'wall s':>8} {'calls/s':>8} {'vs in process':>14}")
    for mode, wall, calls in rows:
        print(f"{mode:<22} {calls:>5} {wall:>8.1f} {calls / wall:>8.3f} {calls / wall / base:>13.2f}x")


if __name__ == "__main__":
    main()
