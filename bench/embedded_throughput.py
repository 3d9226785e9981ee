"""Embedded judge throughput: one request at a time against parallel sequences (continuous batching with
prompt-prefix reuse), on the same prompts.

    nice -n 10 python bench/embedded_throughput.py [--questions 3] [--answers 4] [--parallel 6] [--max-tokens 48]
                                                   [--rounds 1] [--model qwen2.5-coder-1.5b] [--flash-attn]
                                                   [--steps] [--order grouped|interleaved]
                                                   [--verdict text|expected] [--data synthetic|demo]
                                                   [--skip-raw]

The GGUF (``--model``: the default judge's 1.5B by default, or the 0.5B of knockout[embedded-small]) grades
``--questions`` x ``--answers`` answers with the English individual prompt (the prompts of one question share
their instructions and question text), through ``llamacpp:MODEL`` (knockout's judge, one call at a time),
then ``llamacpp:MODEL?parallel=N`` (one context decoding N sequences together), and last through
llama-cpp-python alone (``Llama.create_chat_completion``, no knockout code: the raw row).  Prints calls/s,
completion tokens/s (and as a fraction of the raw row's) and, for knockout's two modes, the prompt tokens per
grade, those evaluated per grade and the share reused from the KV cache (the judge's own count, the
completions' ``reused_prompt_tokens``, as the run summary gives it); for the parallel mode in brackets the
tokens shared from another sequence's cells.  ``--order grouped`` (the default) sends one question's answers
one after the other, as knockout's engine does; ``--order interleaved`` sends each answer after one of another
question (what a file ordered by examinee gave before the engine grouped them).  ``--verdict expected``
grades with the verdict slot read from token probabilities (the default grade of ``knockout grade`` with
this judge; one request at a time in both modes, so only the one-at-a-time row is run).  ``--data demo``
grades the answers of knockout's demo exam (two English and two German questions of a few sentences, answers
of a few lines: prompts as long as real ones, where one question's answers share more than the instructions)
instead of the short synthetic ones; ``--skip-raw`` leaves out the raw row.  ``--flash-attn`` runs
all three with llama.cpp's flash attention.  The machine's load average is printed too: on a shared 2-core
machine, the numbers move with it, so ``--rounds R`` repeats the three modes R times (each round with fresh
KV caches) and prints medians, with the ratios taken round by round.

``--steps`` first prints what one decode step costs by the number of sequences it decodes (one token
each, 120 tokens of context each), which bounds what parallel sequences can gain: on a CPU a step is a
matrix product whose cost grows with its rows.  On 2 AVX2 cores six sequences gave the most tokens per
second for both models (the 0.5B: 1.77x one sequence, three cost what four do; the 1.5B: 1.74x, eight only
1.29x): why the default is 6.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from knockout.data._records import Answer, ItemSet, Question  # noqa: E402
from knockout.judges import GenParams, Message, make_judge  # noqa: E402
from knockout.judges._base import Completion, JudgeRequest  # noqa: E402
from knockout.judges._models import DEFAULT_MODEL  # noqa: E402
from knockout.methods._base import MethodOptions  # noqa: E402
from knockout.methods._individual import grade_task  # noqa: E402
from knockout.prompts._builder import PromptBuilder  # noqa: E402

TOPICS = ["what a hash table is", "why TCP needs a handshake", "what a deadlock is", "how binary search works"]


def requests(nq: int, na: int, max_tokens: int, order: str = "grouped", verdict: str = "text",
             data: str = "synthetic") -> list[JudgeRequest]:
    """The requests grading ``na`` answers to each of ``nq`` questions: one question's answers together
    (``grouped``) or each after an answer of another question (``interleaved``)."""
    pairs = [(i, j) for i in range(nq) for j in range(na)] if order == "grouped" else \
        [(i, j) for j in range(na) for i in range(nq)]
    if data == "demo":
        from importlib import resources

        from knockout.data import load_items

        with resources.as_file(resources.files("knockout.examples") / "demo_exam.jsonl") as path:
            demo = load_items(path, "jsonl")
        qids = demo.question_ids()[:nq]
        qs = [demo.questions[q] for q in qids]
        ans = [demo.answers_for(qids[i])[j] for i, j in pairs]
    else:
        qs = [Question(id=f"q{i}", text=f"Explain {TOPICS[i % len(TOPICS)]}.", max_points=4) for i in range(nq)]
        ans = [Answer(id=f"q{i}a{j}", question_id=f"q{i}", text=f"Answer {j}: it is about {TOPICS[(i + j) % 4]}.")
               for i, j in pairs]
    items = ItemSet(qs, ans)
    builder = PromptBuilder(items, "individual", MethodOptions(verdict=verdict))
    params = GenParams(max_tokens=max_tokens, temperature=0.1)
    tasks = [grade_task(builder, a, a.id)[0] for a in items.answers]
    return [JudgeRequest(t.messages, params, t.slot, t.slot_mode) for t in tasks]


async def measure(spec: str, reqs: list[JudgeRequest], concurrency: int) -> tuple[float, int, dict[str, int]]:
    """Wall time, completion tokens and the prompt tokens (all, and reused from the KV cache) of ``reqs`` sent
    in their order with ``concurrency`` in flight; the model loaded first by another prompt (so the first
    request finds no prefix of its own in the cache)."""
    judge = make_judge(spec)
    await judge.complete(JudgeRequest([Message(role="system", content="Warm up."),
                                       Message(role="user", content="Say hello.")],
                                      GenParams(max_tokens=4, temperature=0.1)))  # load and warm, before timing
    sem = asyncio.Semaphore(concurrency)

    async def one(r: JudgeRequest) -> Completion:
        async with sem:
            return await judge.complete(r)

    t0 = time.perf_counter()
    done = await asyncio.gather(*(one(r) for r in reqs))
    wall = time.perf_counter() - t0
    from knockout.judges._llamacpp import _DECODERS

    stats = dict(next(iter(_DECODERS.values())).stats) if _DECODERS and "parallel" in spec else {}
    stats["prompt"] = sum(c.prompt_tokens for c in done)
    stats["reused"] = sum(c.reused_prompt_tokens for c in done)
    return wall, sum(c.completion_tokens for c in done), stats


def raw(reqs: list[JudgeRequest], model: str, threads: int, flash_attn: bool) -> tuple[float, int]:
    """llama-cpp-python alone (no knockout judge, engine or parsing) generating for the same requests, one at
    a time in this process: ``Llama.create_chat_completion`` with the same messages and parameters."""
    from llama_cpp import Llama

    from knockout.judges._models import model_path

    llm = Llama(model_path=str(model_path(model)), n_ctx=4096, n_threads=threads, flash_attn=flash_attn,
                verbose=False)
    llm.create_chat_completion(messages=[{"role": m.role, "content": m.content} for m in reqs[0].messages],
                               max_tokens=reqs[0].params.max_tokens, temperature=0.1, seed=0)  # warm, as measure
    t0 = time.perf_counter()
    tokens = 0
    for r in reqs:
        out = llm.create_chat_completion(messages=[{"role": m.role, "content": m.content} for m in r.messages],
                                         max_tokens=r.params.max_tokens, temperature=r.params.temperature or 0.1,
                                         seed=r.params.seed or 0)
        tokens += int(out["usage"]["completion_tokens"])  # type: ignore[index]
    wall = time.perf_counter() - t0
    llm.close()
    return wall, tokens


def step_costs(model: str, threads: int, flash_attn: bool, sizes: tuple[int, ...] = (1, 2, 3, 4, 6, 8),
               repeats: int = 15) -> list[tuple[int, float]]:
    """Seconds per decode step of k sequences (one token each), in a context set up as the parallel decoder's."""
    from llama_cpp import Llama
    from llama_cpp import llama_cpp as C

    from knockout.judges._models import model_path

    llm = Llama(model_path=str(model_path(model)), n_ctx=64, n_threads=1, verbose=False)
    n = max(sizes)
    params = C.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = 512 * n, 512, 512, n
    params.n_threads = params.n_threads_batch = threads
    params.flash_attn_type, params.kv_unified = int(flash_attn), True
    ctx = C.llama_init_from_model(llm._model.model, params)
    batch = C.llama_batch_init(512, 0, 1)
    pos = [0] * n

    def decode(tokens: list[tuple[int, int]]) -> None:
        batch.n_tokens = 0
        for i, (seq, tok) in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = tok, pos[seq], 1, True
            batch.seq_id[i][0] = seq
            pos[seq] += 1
        batch.n_tokens = len(tokens)
        if C.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    for seq in range(n):  # 120 tokens of context each, as a prompt would leave
        for k in range(0, 120, 40):
            decode([(seq, 100 + j) for j in range(k, k + 40)])
    out = []
    for k in sizes:
        decode([(seq, 500) for seq in range(k)])  # warm
        t0 = time.perf_counter()
        for _ in range(repeats):
            decode([(seq, 500) for seq in range(k)])
        out.append((k, (time.perf_counter() - t0) / repeats))
    C.llama_batch_free(batch)
    C.llama_free(ctx)
    llm.close()
    return out


def fresh_models() -> None:
    """Drop the one-at-a-time models' contexts (a cleared KV cache: the next round reuses nothing of this one)."""
    from knockout.judges._llamacpp import _LOADED

    for llm, _ in _LOADED.values():
        llm.reset()


def fresh_decoders() -> None:
    """Close the parallel decoders, so that the next round starts with an empty KV cache (no prefix left
    over from the round before)."""
    from knockout.judges._llamacpp import _DECODERS

    for d in _DECODERS.values():
        d.close()
    _DECODERS.clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--answers", type=int, default=4)
    ap.add_argument("--parallel", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds; medians and per-round ratios")
    ap.add_argument("--model", default=DEFAULT_MODEL, help="an embedded model (knockout judges)")
    ap.add_argument("--flash-attn", action="store_true", help="all three modes with llama.cpp's flash attention")
    ap.add_argument("--steps", action="store_true", help="first, the cost of one decode step by its sequences")
    ap.add_argument("--order", choices=("grouped", "interleaved"), default="grouped",
                    help="one question's answers sent together, or each after one of another question")
    ap.add_argument("--verdict", choices=("text", "expected"), default="text",
                    help="free text, or the expected grade from the verdict slot (one at a time only)")
    ap.add_argument("--data", choices=("synthetic", "demo"), default="synthetic",
                    help="short synthetic questions and answers, or the demo exam's (at most 4 x 6)")
    ap.add_argument("--skip-raw", action="store_true", help="leave out the raw llama-cpp-python row")
    a = ap.parse_args()
    if a.steps:
        costs = step_costs(a.model, a.threads, a.flash_attn)
        one = costs[0][1]
        print(f"{a.model}: one decode step of k sequences ({a.threads} threads, flash attention "
              f"{'on' if a.flash_attn else 'off'})")
        print(f"{'k':>3} {'ms/step':>8} {'ms/token':>9} {'tokens/s vs k=1':>16}")
        for k, sec in costs:
            print(f"{k:>3} {sec * 1000:>8.1f} {sec * 1000 / k:>9.1f} {one * k / sec:>15.2f}x")
    reqs = requests(a.questions, a.answers, a.max_tokens, a.order, a.verdict, a.data)
    base = f"llamacpp:{a.model}?threads={a.threads}" + ("&flash_attn=true" if a.flash_attn else "")
    par = f"parallel={a.parallel}"
    text = a.verdict == "text"  # the expected grade is read one request at a time, in both modes
    raw_row = text and not a.skip_raw
    names = (["raw llama.cpp"] if raw_row else []) + ["one at a time"] + ([par] if text else [])
    walls: dict[str, list[float]] = {n: [] for n in names}
    tokens: dict[str, list[int]] = {n: [] for n in names}
    loads: dict[str, list[float]] = {n: [] for n in names}
    stats: dict[str, dict[str, int]] = {}
    modes = (("one at a time", base, 1), (par, f"{base}&{par}", 2 * a.parallel))
    for _ in range(a.rounds):
        for name, spec, conc in modes[:2 if text else 1]:
            loads[name].append(os.getloadavg()[0])
            wall, tok, st = asyncio.run(measure(spec, reqs, conc))
            walls[name].append(wall)
            tokens[name].append(tok)
            stats[name] = st  # the same requests each round: the same counts (fresh caches)
            fresh_decoders()
            fresh_models()
        if raw_row:
            loads["raw llama.cpp"].append(os.getloadavg()[0])
            # last: the model's pages are then as warm as for the others
            wall, tok = raw(reqs, a.model, a.threads, a.flash_attn)
            walls["raw llama.cpp"].append(wall)
            tokens["raw llama.cpp"].append(tok)
    med = statistics.median
    print(f"{a.model}{' (flash attention)' if a.flash_attn else ''}, {len(reqs)} prompts "
          f"({a.questions} questions x {a.answers} answers, {a.data}, {a.order}), verdict {a.verdict}, max_tokens "
          f"{a.max_tokens}, {a.threads} threads, {a.rounds} round(s): medians; ratios taken round by round, "
          "then their median")
    print(f"{'mode':<16} {'wall s':>7} {'calls/s':>8} {'tok/s':>7} {'vs one':>7} {'of raw':>7} "
          f"{'prompt/grade':>12} {'evaluated/grade':>15} {'reused':>6} {'(shared)':>8} {'load':>5}")
    for name in names:
        rate = [t / w for t, w in zip(tokens[name], walls[name], strict=True)]
        raw_rate = [t / w for t, w in zip(tokens[names[0]], walls[names[0]], strict=True)]
        vs_one = med([o / w for o, w in zip(walls["one at a time"], walls[name], strict=True)])
        of_raw = med([r / q for r, q in zip(rate, raw_rate, strict=True)]) if raw_row else float("nan")
        st = stats.get(name)
        reuse = (f"{st['prompt'] / len(reqs):>12.1f} {(st['prompt'] - st['reused']) / len(reqs):>15.1f} "
                 f"{st['reused'] / st['prompt']:>6.0%} {st.get('shared_tokens', '-'):>8}") if st else \
            f"{'-':>12} {'-':>15} {'-':>6} {'-':>8}"
        print(f"{name:<16} {med(walls[name]):>7.1f} {len(reqs) / med(walls[name]):>8.3f} {med(rate):>7.1f} "
              f"{vs_one:>6.2f}x {of_raw:>6.2f}x {reuse} {med(loads[name]):>5.1f}")
    if a.rounds > 1 and text:
        print("vs one, round by round: " + ", ".join(
            f"{o / w:.2f}x" for o, w in zip(walls["one at a time"], walls[par], strict=True)))
    print("vs one: calls/s over knockout's one-at-a-time judge; of raw: completion tokens/s over llama-cpp-python "
          "alone, one at a time, same requests (raw llama.cpp row); prompt/grade: prompt tokens per request, "
          "evaluated/grade: those not taken from the KV cache, reused: their share of the prompt tokens "
          "(shared: tokens a parallel sequence took from another's cells)")


if __name__ == "__main__":
    main()
