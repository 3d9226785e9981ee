"""The same grading work through knockout, a bare ``openai`` SDK asyncio loop, inspect_ai and alpaca_eval:
N answers graded pointwise, one judge call each, against the loopback server (``bench/loopback.py``) that
answers every request after L ms.  Interleaved rounds; each tool is a fresh process on a fresh store/log.

    python bench/peers.py [--answers 2000] [--latency-ms 100] [--concurrency 8,64,256] [--rounds 2]
                          [--tools knockout,bare,bare-aio,aiohttp,inspect,alpaca] [--venv .peers-venv] [--json FILE]

Printed per concurrency and tool: the rounds it completed (of ``--rounds``; a tool that fails in a round, a crash
or a time-out, is named with the round and its error, and still run in the other rounds and concurrencies), wall
time and CPU time (median over the rounds it completed), CPU per call, the ratio of the
bare loop's wall time to the tool's (1.0: as fast as the bare loop) and the ratio of the ideal time
(calls x L / C) to the tool's.  The peers are installed in their own virtualenv (``--venv``, made by this
script from PyPI on first use: ``inspect-ai``, ``alpaca-eval``, ``aiohttp``); they are not knockout's dependencies.  A
peer that cannot be installed or run here is reported as such, with the reason, never left out silently.

What each tool runs:
* knockout: ``knockout grade DATA --judge openai:loopback?base_url=... --readers judge`` (individual grading, the
  default preset, fresh store), CLI as a user runs it, with the judge as its one reader: the work every other
  tool here does (one judge call an answer);
* knockout-two: the same with the default readers (the judge and the sentence encoder, the grade model): what
  the second reader adds to the same calls (the encoder's CPU, about 10 ms an answer on one core, is no request
  overhead; not in the default ``--tools``);
* bare: ``AsyncOpenAI`` with a semaphore of C, the same messages, no store, no parsing beyond ``.content``;
* bare-aio: the SDK's floor under knockout's request path: ``AsyncOpenAI`` with its aiohttp client
  (``DefaultAioHttpClient``, the ``aiohttp`` extra) and ``client.post`` of the same body, no request transform
  and no reply model, as knockout sends it;
* aiohttp: the same requests from one ``aiohttp`` session with a semaphore of C (the raw floor: no SDK);
* inspect: ``inspect eval`` of a task with a no-op solver and ``model_graded_qa()`` (one grader call per
  sample), ``--max-connections C``;
* alpaca: ``alpaca_eval evaluate`` with an annotator config whose every annotation is one call to the
  loopback server, ``max_concurrency`` C (where its version supports it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
console = Console()


def write_data(folder: Path, n: int) -> Path:
    """N answers to N/40 questions (our own fixture text), human grades 0..2."""
    path = folder / "answers.jsonl"
    questions = max(1, n // 40)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            q = i % questions
            f.write(json.dumps({"question_id": f"q{q}", "question": f"Question {q}: name one property of a hash "
                                "function and say why it matters.", "max_points": 2, "answer_id": f"a{i}",
                                "answer": f"Answer {i}: it is deterministic, so the same input always gives "
                                "the same digest.", "human_score": i % 3, "language": "en"}) + "\n")
    return path


def start_server(latency_ms: float) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench/loopback.py"), "--latency-ms", str(latency_ms)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, output tail) of one command; an error when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if res.returncode != 0:
        raise RuntimeError(f"{cmd[0]} ... exited {res.returncode}: {(res.stderr or res.stdout)[-600:]}")
    return wall, cpu, res.stdout[-2000:]


BARE = '''
import asyncio, json, sys
from openai import AsyncOpenAI
async def main(path, port, c):
    rows = [json.loads(l) for l in open(path, encoding="utf-8")]
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    sem = asyncio.Semaphore(c)
    async def one(r):
        async with sem:
            out = await client.chat.completions.create(model="loopback", temperature=0.1, max_tokens=256,
                messages=[{"role": "system", "content": "You grade answers to exam questions."},
                          {"role": "user", "content": f"Question: {r['question']}\\nMaximum points: 2\\n"
                                                      f"Answer: {r['answer']}\\nGrade the answer. Score: X/2"}])
            return out.choices[0].message.content
    got = await asyncio.gather(*(one(r) for r in rows))
    print(sum(1 for g in got if g))
asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
'''

#: the SDK's floor: its aiohttp client and the same POST knockout sends (no request transform, no reply model)
BARE_AIO = '''
import asyncio, json, sys
from openai import AsyncOpenAI, DefaultAioHttpClient
async def main(path, port, c):
    rows = [json.loads(l) for l in open(path, encoding="utf-8")]
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0,
                         http_client=DefaultAioHttpClient())
    sem = asyncio.Semaphore(c)
    async def one(r):
        async with sem:
            out = await client.post("/chat/completions", cast_to=object, body={"model": "loopback",
                "temperature": 0.1, "max_tokens": 256,
                "messages": [{"role": "system", "content": "You grade answers to exam questions."},
                             {"role": "user", "content": f"Question: {r['question']}\\nMaximum points: 2\\n"
                                                         f"Answer: {r['answer']}\\nGrade the answer. Score: X/2"}]})
            return out["choices"][0]["message"]["content"]
    got = await asyncio.gather(*(one(r) for r in rows))
    await client.close()
    print(sum(1 for g in got if g))
asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
'''

AIOHTTP = '''
import asyncio, json, sys
import aiohttp
async def main(path, port, c):
    rows = [json.loads(l) for l in open(path, encoding="utf-8")]
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    sem = asyncio.Semaphore(c)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as session:
        async def one(r):
            body = {"model": "loopback", "temperature": 0.1, "max_tokens": 256,
                    "messages": [{"role": "system", "content": "You grade answers to exam questions."},
                                 {"role": "user", "content": f"Question: {r['question']}\\nMaximum points: 2\\n"
                                                             f"Answer: {r['answer']}\\nGrade the answer. Score: X/2"}]}
            async with sem:
                async with session.post(url, json=body, headers={"Authorization": "Bearer x"}) as resp:
                    return (await resp.json())["choices"][0]["message"]["content"]
        got = await asyncio.gather(*(one(r) for r in rows))
    print(sum(1 for g in got if g))
asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
'''

INSPECT_TASK = '''
import json
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import model_graded_qa
from inspect_ai.solver import solver

@solver
def keep():
    async def solve(state, generate):
        state.output.completion = state.metadata["answer"]
        return state
    return solve

@task
def grade(data: str):
    rows = [json.loads(l) for l in open(data, encoding="utf-8")]
    return Task(dataset=[Sample(input=r["question"], target="a correct property with its reason",
                                metadata={"answer": r["answer"]}, id=r["answer_id"]) for r in rows],
                solver=keep(), scorer=model_graded_qa())
'''


ALPACA_CONFIG = """
ko:
  prompt_template: "ko/prompt.txt"
  fn_completions: "openai_completions"
  completions_kwargs:
    model_name: "loopback"
    max_tokens: 50
    temperature: 0
  completion_parser_kwargs:
    outputs_to_match:
      1: 'Score'
      2: 'Output \\(b\\)'
  batch_size: 1
"""
ALPACA_PROMPT = """<|im_start|>system
You grade answers to exam questions.
<|im_end|>
<|im_start|>user
Question: {instruction}

Output (a): {output_1}

Output (b): {output_2}

Which is better? Score: X/2
<|im_end|>
"""


def ensure_venv(venv: Path, tools: list[str]) -> dict[str, str]:
    """The peers' virtualenv (made and filled from PyPI on first use); {tool: why it cannot run} for the rest."""
    missing: dict[str, str] = {}
    py = venv / "bin/python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    packages = {"inspect": ("inspect_ai", "inspect-ai"), "alpaca": ("alpaca_eval", "alpaca-eval"),
                "aiohttp": ("aiohttp", "aiohttp")}
    for tool in tools:
        if tool not in packages:
            continue
        module, dist = packages[tool]
        if subprocess.run([str(py), "-c", f"import {module}"], capture_output=True).returncode != 0:
            res = subprocess.run([str(py), "-m", "pip", "install", "-q", dist, "openai"], capture_output=True,
                                 text=True)
            if res.returncode != 0:
                missing[tool] = f"pip install {dist} failed: {res.stderr.strip().splitlines()[-1:]}"
    return missing


def served(port: int) -> int:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=10) as r:
        return int(r.read())


def run_tool(tool: str, data: Path, port: int, c: int, work: Path, venv: Path, n: int) -> tuple[float, float]:
    """(wall s, CPU s) of one tool's run; an error unless the server answered exactly ``n`` calls for it."""
    before = served(port)
    wall, cpu = _run_tool(tool, data, port, c, work, venv, n)
    calls = served(port) - before
    if calls != n:
        raise RuntimeError(f"{tool} made {calls} judge calls for {n} answers")
    return wall, cpu


def _run_tool(tool: str, data: Path, port: int, c: int, work: Path, venv: Path, n: int) -> tuple[float, float]:
    env = {**os.environ, "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
           "PYTHONUNBUFFERED": "1"}
    fresh = Path(tempfile.mkdtemp(dir=work))
    if tool in ("knockout", "knockout-two"):
        spec = f"openai:loopback?base_url=http://127.0.0.1:{port}/v1&api_key=x"
        readers = ["--readers", "judge"] if tool == "knockout" else []  # the peers' work: one judge call an answer
        wall, cpu, out = timed([sys.executable, "-m", "knockout.cli", "grade", str(data), "--judge", spec,
                                "--concurrency", str(c), *readers, "-o", str(fresh / "k.db"), "--quiet", "--json"],
                               env, fresh)
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["judge_calls"] == n, summary
        return wall, cpu
    if tool == "bare":
        wall, cpu, out = timed([sys.executable, "-c", BARE, str(data), str(port), str(c)], env, fresh)
        assert int(out.strip().splitlines()[-1]) == n, out
        return wall, cpu
    if tool == "bare-aio":
        wall, cpu, out = timed([sys.executable, "-c", BARE_AIO, str(data), str(port), str(c)], env, fresh)
        assert int(out.strip().splitlines()[-1]) == n, out
        return wall, cpu
    if tool == "aiohttp":  # the raw floor: one aiohttp session, the same bodies, no SDK
        wall, cpu, out = timed([str(venv / "bin/python"), "-c", AIOHTTP, str(data), str(port), str(c)], env, fresh)
        assert int(out.strip().splitlines()[-1]) == n, out
        return wall, cpu
    if tool == "inspect":
        (fresh / "task.py").write_text(textwrap.dedent(INSPECT_TASK), encoding="utf-8")
        wall, cpu, _ = timed([str(venv / "bin/inspect"), "eval", "task.py@grade", "-T", f"data={data}",
                              "--model", "openai/loopback", "-M", "responses_api=false", "--model-base-url", f"http://127.0.0.1:{port}/v1",
                              "--max-connections", str(c), "--log-dir", str(fresh / "logs"), "--display", "none",
                              "--no-log-samples"], env, fresh)
        return wall, cpu
    if tool == "alpaca":  # one annotation (one call) per item: the answer against a reference answer
        rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]
        (fresh / "ko").mkdir()
        (fresh / "ko/configs.yaml").write_text(textwrap.dedent(ALPACA_CONFIG), encoding="utf-8")
        (fresh / "ko/prompt.txt").write_text(ALPACA_PROMPT, encoding="utf-8")
        inst = [f"[{r['answer_id']}] {r['question']}" for r in rows]  # unique: alpaca_eval joins on it
        (fresh / "model.json").write_text(json.dumps([{"instruction": i, "output": r["answer"], "generator": "x"}
                                                      for i, r in zip(inst, rows, strict=True)]), encoding="utf-8")
        (fresh / "reference.json").write_text(json.dumps([{"instruction": i, "output": "A reference answer.",
                                                          "generator": "ref"} for i in inst]), encoding="utf-8")
        env = {**env, "OPENAI_API_BASE": f"http://127.0.0.1:{port}/v1", "OPENAI_MAX_CONCURRENCY": str(c)}
        wall, cpu, _ = timed([str(venv / "bin/alpaca_eval"), "evaluate", "--model_outputs", "model.json",
                              "--reference_outputs", "reference.json", "--annotators_config",
                              str(fresh / "ko/configs.yaml"), "--output_path", str(fresh / "out"),
                              "--fn_metric", "get_winrate", "--sort_by", "win_rate"], env, fresh)  # LC: a download
        return wall, cpu
    raise ValueError(tool)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--answers", type=int, default=2000)
    p.add_argument("--latency-ms", type=float, default=100.0)
    p.add_argument("--concurrency", default="8,64,256")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--tools", default="knockout,bare,bare-aio,aiohttp,inspect,alpaca")
    p.add_argument("--venv", type=Path, default=ROOT / ".peers-venv")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args()
    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    conc = [int(x) for x in a.concurrency.split(",")]
    unavailable = ensure_venv(a.venv, tools)
    work = Path(tempfile.mkdtemp(prefix="peers-"))
    data = write_data(work, a.answers)
    server, port = start_server(a.latency_ms)
    got: dict[tuple[int, str], list[tuple[float, float]]] = {}
    #: a tool that failed in a round (a crash, a time-out) is named with its round; it is still run in the others
    failed: dict[tuple[int, str], list[str]] = {}
    try:
        for r in range(a.rounds):
            for c in conc:
                for tool in (tools if r % 2 == 0 else list(reversed(tools))):  # interleaved, order alternating
                    if tool in unavailable:
                        continue
                    try:
                        wall, cpu = run_tool(tool, data, port, c, work, a.venv, a.answers)
                    except Exception as exc:
                        failed.setdefault((c, tool), []).append(f"round {r + 1}: {str(exc)[:300]}")
                        console.print(f"round {r + 1} concurrency {c} {tool}: {exc}", style="red")
                        continue
                    got.setdefault((c, tool), []).append((wall, cpu))
                    console.print(f"round {r + 1} concurrency {c} {tool}: {wall:.2f} s wall, {cpu:.2f} s CPU",
                                  style="dim")
    finally:
        server.terminate()
    rows: list[dict[str, Any]] = []
    t = Table(title=f"{a.answers} pointwise calls, loopback judge at {a.latency_ms:g} ms, medians over the rounds "
                    f"each tool completed (of {a.rounds})")
    for col in ("concurrency", "tool", "rounds", "wall s", "CPU s", "CPU ms/call", "bare / tool (wall)",
                "ideal / tool (wall)"):
        t.add_column(col, justify="right")
    for c in conc:
        ideal = a.answers * a.latency_ms / 1000 / c
        bare = got.get((c, "bare"))
        bare_wall = statistics.median(w for w, _ in bare) if bare else None
        for tool in tools:
            runs = got.get((c, tool))
            fails = failed.get((c, tool), [])
            done = f"{len(runs or [])} of {a.rounds}" + (f" ({len(fails)} failed)" if fails else "")
            if not runs:
                why = unavailable.get(tool) or (fails[-1] if fails else "?")
                t.add_row(str(c), tool, done, "-", "-", "-", "-", f"not run: {why[:60]}")
                rows.append({"concurrency": c, "tool": tool, "rounds": 0, "failed": fails, "error": why})
                continue
            wall, cpu = statistics.median(w for w, _ in runs), statistics.median(u for _, u in runs)
            ratio = bare_wall / wall if bare_wall else None
            rows.append({"concurrency": c, "tool": tool, "wall_s": wall, "cpu_s": cpu, "cpu_ms_per_call":
                         1000 * cpu / a.answers, "bare_over_tool": ratio, "ideal_over_tool": ideal / wall,
                         "runs": runs, "rounds": len(runs), "failed": fails})
            t.add_row(str(c), tool, done, f"{wall:.2f}", f"{cpu:.2f}", f"{1000 * cpu / a.answers:.2f}",
                      "-" if ratio is None else f"{ratio:.2f}", f"{ideal / wall:.2f}")
    console.print(t)
    for (c, tool), fails in failed.items():
        for line in fails:
            console.print(f"failed: concurrency {c} {tool}, {line}", style="red")
    if a.json:
        a.json.write_text(json.dumps({"answers": a.answers, "latency_ms": a.latency_ms, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
