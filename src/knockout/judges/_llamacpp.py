"""Embedded judge: llama-cpp-python in process, with a GGUF verified by SHA-256.

The model is text-only: images in a request are left out and counted.  Calls
run one at a time in a worker thread (a llama.cpp context is not thread-safe), or, with
``parallel=N``, N at a time in one context (:mod:`knockout.judges._parallel`: continuous batching
with prompt-prefix reuse).

Each completion says how many of its prompt tokens were taken from the KV cache rather than evaluated
(``reused_prompt_tokens``): one at a time, the tokens the context still held from the call before it that
start this prompt too (llama-cpp-python's prefix match, or the slot reader's, :class:`_Kept`); in parallel,
those the decoder kept or shared from another sequence.  The answers of one question share their
instructions and question text, so sent one after the other they reuse them.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from knockout.errors import ConfigError, JudgeError
from knockout.judges._base import OPTIONAL_PARAMS, Completion, Judge, JudgeRequest
from knockout.judges._gguf import check_gguf
from knockout.judges._models import DEFAULT_MODEL, MODELS, file_sha256, model_path
from knockout.judges._options import JudgeOptions
from knockout.judges._slot import constrained, distribution

#: Loaded models, shared by every judge with the same file and settings, each with the lock that
#: serialises its calls (a llama.cpp context is not thread-safe, even across judge instances).
_LOADED: dict[tuple[str, int, int, bool], tuple[Any, threading.Lock]] = {}
_LOAD_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    """Free the models before the interpreter tears down the modules ``Llama.__del__`` needs; a model still
    answering a call (a run stopped by a signal: its thread is a daemon, see :meth:`LlamaCppJudge._in_thread`) is
    left to the exit, never freed under it."""
    with _LOAD_LOCK:
        for dec in _DECODERS.values():
            with contextlib.suppress(Exception):  # best effort at exit
                dec.close()
        _DECODERS.clear()
        for llm, lock in _LOADED.values():
            if not lock.acquire(blocking=False):
                continue
            with contextlib.suppress(Exception):  # best effort at exit
                llm.close()
            lock.release()
        _LOADED.clear()


def _load(path: Path, n_ctx: int, n_threads: int, flash_attn: bool = False) -> tuple[Any, threading.Lock]:
    key = (str(path), n_ctx, n_threads, flash_attn)
    with _LOAD_LOCK:
        if key not in _LOADED:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise ConfigError(
                    "the embedded judge needs llama-cpp-python; install it with: pip install 'knockout[embedded]'"
                ) from None
            try:
                llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, flash_attn=flash_attn,
                            verbose=False)
            except ValueError as exc:  # llama-cpp-python's "Failed to load model from file": past the header
                raise ConfigError(f"{path}: llama.cpp cannot load this GGUF ({exc})") from None
            _LOADED[key] = (llm, threading.Lock())
        return _LOADED[key]


class LlamaCppOptions(JudgeOptions):
    n_ctx: int = Field(4096, ge=64, le=1 << 20, description="context window in tokens")
    threads: int | None = Field(None, ge=1, le=1024, description="CPU threads (default: all cores)")
    parallel: int = Field(1, ge=1, le=64, description="sequences decoded together (continuous batching with "
                          "prompt-prefix reuse; 1: one request at a time)")
    flash_attn: bool = Field(False, description="llama.cpp's fused attention kernel: about 5-10% faster on a CPU, "
                             "but it rounds differently, so its replies are cached as another judge's")


#: parallel decoders, one per model file and settings (knockout.judges._parallel)
_DECODERS: dict[tuple[str, int, int, int, bool], Any] = {}


def _built_decoder(path: Path, n_ctx: int, n_threads: int, parallel: int, flash_attn: bool = False) -> Any:
    """The parallel decoder when it is already built (None: :func:`_decoder` builds it, in a thread)."""
    return _DECODERS.get((str(path), n_ctx, n_threads, parallel, flash_attn))


def _decoder(path: Path, n_ctx: int, n_threads: int, parallel: int, flash_attn: bool = False) -> Any:
    key = (str(path), n_ctx, n_threads, parallel, flash_attn)
    with _LOAD_LOCK:
        found = _DECODERS.get(key)
    if found is not None:
        return found
    from knockout.judges._parallel import ParallelDecoder

    llm, _ = _load(path, 64, 1)  # the weights, tokenizer and chat template (its own context stays tiny)
    with _LOAD_LOCK:
        if key not in _DECODERS:
            _DECODERS[key] = ParallelDecoder(llm, parallel, n_ctx, n_threads, flash_attn=flash_attn)
        return _DECODERS[key]


class LlamaCppJudge(Judge):
    backend = "llamacpp"
    supports_images = False
    #: the verdict slot read from the model's token probabilities, or written under a grammar
    slot_modes: tuple[str, ...] = ("expected", "constrained")
    Options = LlamaCppOptions
    options: LlamaCppOptions

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model or DEFAULT_MODEL, options)
        if self.model in MODELS:
            self.sha256 = MODELS[self.model].sha256
            self._path: Path | None = None
            self._identity_model = self.model
        elif self.model.endswith(".gguf"):
            p = Path(self.model).expanduser()
            if not p.is_file():
                raise ConfigError(f"GGUF file not found: {self.model}")
            self._path = check_gguf(p, "llamacpp judge model")  # before it is hashed, and before llama.cpp opens it
            self.sha256 = file_sha256(p)
            # The same bytes as an embedded model are that model (and share its cached replies).
            same = [m.name for m in MODELS.values() if m.sha256 == self.sha256]
            self._identity_model = same[0] if same else "gguf"
        else:
            known = ", ".join(MODELS)
            raise ConfigError(f"unknown embedded model '{self.model}' (known: {known}, or a path to a .gguf)")
        self.n_ctx = self.options.n_ctx
        self.n_threads = self.options.threads or os.cpu_count() or 2
        self._lock = asyncio.Lock()

    def identity(self) -> dict[str, Any]:
        """The GGUF's SHA-256 (not its path): the same file anywhere is the same judge; flash attention (other
        arithmetic) is part of it."""
        ident: dict[str, Any] = {"backend": self.backend, "model": self._identity_model, "sha256": self.sha256}
        if self.options.flash_attn:  # another attention kernel rounds differently: its replies are its own
            ident["flash_attn"] = True
        return ident

    def default_concurrency(self) -> int:
        return 1 if self.options.parallel == 1 else 2 * self.options.parallel

    def _llm(self) -> tuple[Any, threading.Lock]:
        path = self._path or model_path(self.model)
        return _load(path, self.n_ctx, self.n_threads, self.options.flash_attn)

    def _run(self, request: JudgeRequest) -> Completion:
        llm, lock = self._llm()
        dropped, messages, p = _chat_parts(request)
        with lock, _Kept(llm) as kept:
            t0 = time.perf_counter()
            out = llm.create_chat_completion(
                messages=messages,
                temperature=p.temperature,
                max_tokens=p.max_tokens,
                seed=p.seed,
                stop=list(p.stop) or None,
                **{k: v for k in OPTIONAL_PARAMS if (v := getattr(p, k)) is not None},
            )
            latency = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        n_prompt = int(usage.get("prompt_tokens", 0))
        return Completion(
            text=choice["message"].get("content") or "",
            prompt_tokens=n_prompt,
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
            images_dropped=dropped,
            reused_prompt_tokens=min(kept.tokens, n_prompt),
        )

    def _run_slot(self, request: JudgeRequest) -> Completion:
        """A request with a verdict slot (:mod:`knockout.judges._slot`): (a reasoning-first slot: the model first
        reasons freely, up to its own first field or its token bound, :mod:`knockout.judges._reasoning`) knockout
        writes each field, the model gives the
        value (``expected``: the distribution over the allowed values from its token probabilities, the most
        probable one written; ``constrained``: sampled under a grammar of the allowed values), then, with
        ``then``, goes on freely for one line."""
        from knockout.judges._chat import SlotReader, chat_prompt, tokens_of
        from knockout.judges._reasoning import Generated, Step, run_reasoning

        slot, mode = request.slot, request.slot_mode
        assert slot is not None
        llm, lock = self._llm()
        dropped, messages, p = _chat_parts(request)
        with lock, _Kept(llm) as kept:
            t0 = time.perf_counter()
            prompt, stop, special = chat_prompt(llm, messages)
            n_prompt = len(tokens_of(llm, prompt, special))
            written, chosen, probs = "", [], []
            reader = SlotReader(llm)
            generated = 0
            if slot.reasoning is not None:  # reasoning first: free, up to the judge's own field or the token bound

                def generate(step: Step) -> Generated:
                    nonlocal generated
                    out = llm.create_completion(prompt + step.prefix, max_tokens=step.max_tokens,
                                                temperature=p.temperature, seed=p.seed,
                                                stop=[*stop, *p.stop, *([slot.reasoning_stop()] if step.stop else [])])
                    n = int((out.get("usage") or {}).get("completion_tokens", 0))
                    generated += n
                    choice = out["choices"][0]
                    return Generated(str(choice["text"]), n, choice.get("finish_reason") != "length")

                said = run_reasoning(slot, request.shown, p.max_tokens, generate)
                written = slot.reasoning + said.strip()
            for i, field in enumerate(slot.fields):
                written += field
                values = slot.values_at(i)
                if mode == "expected":
                    ps = reader.distribution(prompt + written, values, special)
                    best = values[max(range(len(ps)), key=ps.__getitem__)]
                    probs.append(ps)
                else:
                    best = self._sample_value(llm, prompt + written, values, slot.suffix_at(i), p)
                chosen.append(best)
                written += best + slot.suffix_at(i)
                generated += 1
            tail = ""
            if slot.then:
                written += slot.then
                out = llm.create_completion(prompt + written, max_tokens=p.max_tokens, temperature=p.temperature,
                                            seed=p.seed, stop=[*stop, *p.stop, "\n"])
                tail = out["choices"][0]["text"]
                generated += int((out.get("usage") or {}).get("completion_tokens", 0))
            latency = time.perf_counter() - t0
        verdict = distribution(slot, probs, chosen) if mode == "expected" else constrained(slot, chosen)
        return Completion(text=written + tail, prompt_tokens=n_prompt, completion_tokens=generated,
                          latency_s=latency, finish_reason="stop", images_dropped=dropped, verdict=verdict,
                          reused_prompt_tokens=min(kept.tokens, n_prompt))

    def _sample_value(self, llm: Any, text: str, values: tuple[str, ...], suffix: str, p: Any) -> str:
        """One of a field's allowed ``values``, sampled under a grammar that admits only those."""
        from llama_cpp.llama_grammar import LlamaGrammar

        # the suffix is part of the grammar: after "3" the model may write "/" (its "3/5"), not only "." or end
        alts = " | ".join(json.dumps(v) for v in sorted(values, key=len, reverse=True))
        tail = f" {json.dumps(suffix)}" if suffix else ""
        grammar = LlamaGrammar.from_string(f"root ::= ({alts}){tail}", verbose=False)
        out = llm.create_completion(text, max_tokens=16, temperature=p.temperature, seed=p.seed, grammar=grammar)
        value = str(out["choices"][0]["text"]).removesuffix(suffix)
        if value not in values:  # the grammar admits nothing else; a model that stopped early
            raise JudgeError(f"the grammar-constrained verdict {value!r} is not an allowed value")
        return value

    @staticmethod
    async def _in_thread(fn: Any, request: JudgeRequest) -> Completion:
        """``fn(request)`` in a daemon thread: a run stopped by a signal (its task cancelled) exits at once instead
        of waiting for the llama.cpp call in progress to finish (up to a long reply's generation), which a
        worker of the loop's default executor would make it do."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Completion] = loop.create_future()

        def work() -> None:
            _IN_FLIGHT.append(1)
            try:
                done = fn(request)
            except BaseException as exc:  # handed to the caller
                _hand(loop, fut, None, exc)
            else:
                _hand(loop, fut, done, None)
            finally:
                _IN_FLIGHT.pop()

        threading.Thread(target=work, name="knockout-llama-call", daemon=True).start()
        return await fut

    async def complete(self, request: JudgeRequest) -> Completion:
        if request.slot is not None and request.slot_mode in self.slot_modes:
            async with self._lock:
                return await self._in_thread(self._run_slot, request)
        if self.options.parallel > 1:
            path = self._path or model_path(self.model)
            args = (path, self.n_ctx, self.n_threads, self.options.parallel, self.options.flash_attn)
            # built: queued at once, so requests reach the decoder in the order they were sent (one question's
            # answers together); a thread's return would reorder them
            decoder = _built_decoder(*args) or await asyncio.to_thread(_decoder, *args)
            t0 = time.perf_counter()
            done: Completion = await decoder.complete(request)
            done.latency_s = time.perf_counter() - t0
            return done
        async with self._lock:
            return await self._in_thread(self._run, request)


class _Kept:
    """The tokens a model's context already held when a call's first evaluation began (``tokens``): those of
    the call before it that start this call's prompt too, kept in the KV cache instead of evaluated again
    (llama-cpp-python's ``generate`` keeps the longest common prefix; the slot reader keeps it in whole
    blocks).  Read by watching the model's ``eval`` for the length of the call (the caller holds the model's
    lock)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.tokens = 0
        self._seen = False
        self._own: Any = None

    def __enter__(self) -> _Kept:
        llm = self.llm
        self._own = vars(llm).get("eval")
        inner = llm.eval

        def counted(tokens: Any) -> Any:
            if not self._seen:
                self._seen = True
                self.tokens = int(llm.n_tokens)
            return inner(tokens)

        llm.eval = counted
        return self

    def __exit__(self, *exc: object) -> None:
        if self._own is not None:
            self.llm.eval = self._own
        else:
            with contextlib.suppress(AttributeError):
                del self.llm.eval


#: one entry per llama.cpp call running in its daemon thread
_IN_FLIGHT: list[int] = []


def calls_in_flight() -> int:
    """llama.cpp calls still running (a command stopped by a signal exits at once when there are: the
    interpreter's shutdown would free the model under them)."""
    return len(_IN_FLIGHT)


def _chat_parts(request: JudgeRequest) -> tuple[int, list[dict[str, str]], Any]:
    """A request as llama-cpp-python takes it: the images left out (their count), the chat messages, the
    generation parameters (a text-only model)."""
    return (sum(len(m.images) for m in request.messages),
            [{"role": m.role, "content": m.content} for m in request.messages], request.params)


def _hand(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Completion], done: Completion | None,
          exc: BaseException | None) -> None:
    """A call's outcome to its waiting coroutine (nothing when the loop is gone: the run has stopped)."""

    def settle() -> None:
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(done)  # type: ignore[arg-type]

    with contextlib.suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(settle)
