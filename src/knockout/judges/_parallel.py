"""Parallel sequences for the embedded judge: one llama.cpp context decodes up to N requests together.

``llamacpp:MODEL?parallel=N`` (N > 1) serves requests by continuous batching in one worker thread: each
step decodes one token of every active sequence in a single ``llama_decode`` call (a matrix product
instead of N matrix-vector products, which is what makes it faster on a CPU), and a finished sequence's
slot takes the next waiting request at once.  Each slot keeps the tokens of its last prompt in its part
of the KV cache: a new request goes to the free slot whose cached tokens share the longest prefix with its
prompt, and only the rest is evaluated (prompt-prefix reuse: the engine sends requests in item order, so
the prompts of one question — the same instructions and question text — follow each other).

Sampling follows llama-cpp-python's defaults (top-k 40, top-p 0.95, min-p 0.05, then the temperature and
a seeded draw per request); the replies are the same model's but, as batched arithmetic rounds
differently, not always token for token those of one-at-a-time decoding.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from knockout.errors import JudgeError
from knockout.judges._base import Completion, JudgeRequest
from knockout.judges._chat import chat_prompt, common_prefix, tokens_of

#: a prefix shorter than this is evaluated again rather than shared or waited for
MIN_SHARED = 16


@dataclass
class _Job:
    tokens: list[int]
    max_tokens: int
    temperature: float
    seed: int
    stop: list[str]
    future: asyncio.Future[Completion]
    loop: asyncio.AbstractEventLoop
    images_dropped: int = 0


@dataclass
class _Slot:
    seq: int
    cached: list[int] = field(default_factory=list)  # tokens in this sequence's KV cache
    job: _Job | None = None
    pending: list[int] = field(default_factory=list)  # prompt tokens still to evaluate
    generated: list[int] = field(default_factory=list)
    sampler: Any = None
    reused: int = 0


class ParallelDecoder:
    """Continuous batching of chat requests over ``n_parallel`` sequences of one context."""

    def __init__(self, llm: Any, n_parallel: int, n_ctx: int, n_threads: int, n_batch: int = 512,
                 flash_attn: bool = False) -> None:
        from llama_cpp import llama_cpp as C

        self.C, self.llm = C, llm
        params = C.llama_context_default_params()
        params.n_ctx = n_ctx * n_parallel
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = n_parallel
        params.n_threads = params.n_threads_batch = n_threads
        # off unless asked for, as in llama-cpp-python's Llama (auto is far slower on some CPUs)
        params.flash_attn_type = 1 if flash_attn else 0
        params.kv_unified = True  # one KV buffer: sequences share the cells of a common prompt prefix
        self.ctx = C.llama_init_from_model(llm._model.model, params)
        if not self.ctx:
            raise JudgeError("llama.cpp could not create a context for parallel sequences")
        self.mem = C.llama_get_memory(self.ctx)
        self.vocab = C.llama_model_get_vocab(llm._model.model)
        self.n_batch = n_batch
        self.n_ctx = n_ctx
        self.batch = C.llama_batch_init(n_batch, 0, 1)
        self.slots = [_Slot(i) for i in range(n_parallel)]
        self.queue: deque[_Job] = deque()
        self.cond = threading.Condition()
        self.closed = False
        self.stats = {"prompt_tokens": 0, "reused_tokens": 0, "shared_tokens": 0, "steps": 0}
        self.thread = threading.Thread(target=self._serve, name="knockout-llama-parallel", daemon=True)
        self.thread.start()

    # -- the caller's side ---------------------------------------------------------------------------
    def prompt_tokens(self, messages: list[dict[str, str]]) -> tuple[list[int], list[str]]:
        """The chat-formatted prompt's tokens and the format's own stop strings (as create_chat_completion)."""
        prompt, stop, special = chat_prompt(self.llm, messages)
        return tokens_of(self.llm, prompt, special), stop

    async def complete(self, request: JudgeRequest) -> Completion:
        p = request.params
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        tokens, stop = self.prompt_tokens(messages)
        if len(tokens) + p.max_tokens > self.n_ctx:
            raise JudgeError(f"prompt of {len(tokens)} tokens + {p.max_tokens} does not fit n_ctx {self.n_ctx}")
        loop = asyncio.get_running_loop()
        job = _Job(tokens, p.max_tokens, p.temperature, p.seed or 0, [*stop, *p.stop], loop.create_future(), loop,
                   sum(len(m.images) for m in request.messages))
        with self.cond:
            if self.closed:
                raise JudgeError("the parallel decoder is closed")
            self.queue.append(job)
            self.cond.notify()
        return await job.future

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify()
        self.thread.join(timeout=30)
        C = self.C
        for s in self.slots:
            if s.sampler is not None:
                C.llama_sampler_free(s.sampler)
        C.llama_batch_free(self.batch)
        C.llama_free(self.ctx)

    # -- the worker thread -----------------------------------------------------------------------------
    def _sampler(self, job: _Job) -> Any:
        C = self.C
        chain = C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
        if job.temperature <= 0:
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_greedy())
            return chain
        C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_k(40))
        C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_p(0.95, 1))
        C.llama_sampler_chain_add(chain, C.llama_sampler_init_min_p(0.05, 1))
        C.llama_sampler_chain_add(chain, C.llama_sampler_init_temp(job.temperature))
        C.llama_sampler_chain_add(chain, C.llama_sampler_init_dist(job.seed & 0xFFFFFFFF))
        return chain

    def _admit(self) -> None:
        """Give waiting requests to free slots.  A request starts from the longest prefix of its prompt already
        in the KV cache of any sequence: its own slot's cells, or another slot's shared into it (one unified
        KV buffer: shared cells are not copied).  While another slot is still evaluating a longer prefix of
        it (the first answers of a question arrive together), the request waits for that step to end instead
        of evaluating the same tokens twice."""
        while self.queue:
            free = [s for s in self.slots if s.job is None]
            if not free:
                return
            job = self.queue[0]
            src, best = max(((s, common_prefix(s.cached, job.tokens)) for s in self.slots), key=lambda x: x[1])
            if any(s.job is not None and s.pending
                   and common_prefix(s.cached + s.pending, job.tokens) > best + MIN_SHARED for s in self.slots):
                return  # the next step evaluates that prefix; this request takes it then
            self.queue.popleft()
            slot = max(free, key=lambda s: common_prefix(s.cached, job.tokens))
            keep = min(common_prefix(slot.cached, job.tokens), len(job.tokens) - 1)  # one token evaluated, for logits
            shared = min(best, len(job.tokens) - 1)
            if src is not slot and shared > keep + MIN_SHARED:
                self.C.llama_memory_seq_rm(self.mem, slot.seq, -1, -1)
                self.C.llama_memory_seq_cp(self.mem, src.seq, slot.seq, 0, shared)
                keep = shared
                self.stats["shared_tokens"] += shared
            else:
                self.C.llama_memory_seq_rm(self.mem, slot.seq, keep, -1)
            slot.cached = job.tokens[:keep]
            slot.job, slot.pending, slot.generated, slot.reused = job, job.tokens[keep:], [], keep
            slot.sampler = self._sampler(job)
            self.stats["prompt_tokens"] += len(job.tokens)
            self.stats["reused_tokens"] += keep

    def _serve(self) -> None:
        while True:
            with self.cond:
                while not self.closed and not self.queue and all(s.job is None for s in self.slots):
                    self.cond.wait()
                if self.closed:
                    for s in self.slots:
                        if s.job is not None:
                            self._fail(s, JudgeError("the parallel decoder was closed"))
                    while self.queue:
                        job = self.queue.popleft()
                        job.loop.call_soon_threadsafe(_set_exception, job.future,
                                                      JudgeError("the parallel decoder was closed"))
                    return
                self._admit()
            try:
                self._step()
            except Exception as exc:  # a failed decode fails the requests in flight, not the thread
                for s in self.slots:
                    if s.job is not None:
                        self._fail(s, JudgeError(f"llama.cpp parallel decoding failed: {exc}"))
                        self.C.llama_memory_seq_rm(self.mem, s.seq, -1, -1)
                        s.cached = []

    def _step(self) -> None:
        C, b = self.C, self.batch
        b.n_tokens = 0
        wants: list[tuple[_Slot, int]] = []  # slots whose logits this decode produces, and their batch index

        def add(slot: _Slot, token: int, logits: bool) -> None:
            i = b.n_tokens
            b.token[i] = token
            b.pos[i] = len(slot.cached)
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = slot.seq
            b.logits[i] = logits
            b.n_tokens = i + 1
            slot.cached.append(token)
            if logits:
                wants.append((slot, i))

        active = [s for s in self.slots if s.job is not None]
        for s in active:  # one token for each generating sequence first
            if not s.pending and s.generated:
                add(s, s.generated[-1], True)
        for s in active:  # then as much prompt as fits
            room = self.n_batch - b.n_tokens
            if s.pending and room > 0:
                part, s.pending = s.pending[:room], s.pending[room:]
                for k, tok in enumerate(part):
                    add(s, tok, k == len(part) - 1 and not s.pending)
        if b.n_tokens == 0:
            return
        rc = C.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        self.stats["steps"] += 1
        for slot, i in wants:
            token = int(C.llama_sampler_sample(slot.sampler, self.ctx, i))
            job = slot.job
            assert job is not None
            slot.generated.append(token)
            eog = bool(C.llama_vocab_is_eog(self.vocab, token))
            text = self._text(slot.generated[:-1] if eog else slot.generated)
            hit = next((text.index(st) for st in job.stop if st in text), None)
            if eog or hit is not None or len(slot.generated) >= job.max_tokens:
                reason = "stop" if eog or hit is not None else "length"
                self._finish(slot, text[:hit] if hit is not None else text, reason)

    def _text(self, tokens: list[int]) -> str:
        return bytes(self.llm.detokenize(tokens)).decode("utf-8", errors="ignore")

    def _finish(self, slot: _Slot, text: str, reason: str) -> None:
        job = slot.job
        assert job is not None
        done = Completion(text=text, prompt_tokens=len(job.tokens), completion_tokens=len(slot.generated),
                          finish_reason=reason, images_dropped=job.images_dropped, reused_prompt_tokens=slot.reused)
        job.loop.call_soon_threadsafe(_set_result, job.future, done)
        self._release(slot)

    def _fail(self, slot: _Slot, exc: Exception) -> None:
        job = slot.job
        assert job is not None
        job.loop.call_soon_threadsafe(_set_exception, job.future, exc)
        self._release(slot)

    def _release(self, slot: _Slot) -> None:
        # the last sampled token is not in the KV cache: the cache holds prompt + generated[:-1]
        if slot.sampler is not None:
            self.C.llama_sampler_free(slot.sampler)
        slot.job, slot.sampler, slot.pending, slot.generated = None, None, [], []


def _set_result(fut: asyncio.Future[Completion], value: Completion) -> None:
    if not fut.done():
        fut.set_result(value)


def _set_exception(fut: asyncio.Future[Completion], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)
        with contextlib.suppress(BaseException):
            fut.exception()

