"""Embedded judge: llama-cpp-python in process, with a GGUF verified by SHA-256.

The model is text-only: images in a request are left out and counted.  Calls
run one at a time in a worker thread (a llama.cpp context is not thread-safe), or, with
``parallel=N``, N at a time in one context (:mod:`knockout.judges._parallel`: continuous batching
with prompt-prefix reuse).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from knockout.errors import ConfigError
from knockout.judges._base import OPTIONAL_PARAMS, Completion, Judge, JudgeRequest
from knockout.judges._models import DEFAULT_MODEL, MODELS, file_sha256, model_path
from knockout.judges._options import JudgeOptions

#: Loaded models, shared by every judge with the same file and settings, each with the lock that
#: serialises its calls (a llama.cpp context is not thread-safe, even across judge instances).
_LOADED: dict[tuple[str, int, int, bool], tuple[Any, threading.Lock]] = {}
_LOAD_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    """Free the models before the interpreter tears down the modules ``Llama.__del__`` needs."""
    with _LOAD_LOCK:
        for dec in _DECODERS.values():
            with contextlib.suppress(Exception):  # best effort at exit
                dec.close()
        _DECODERS.clear()
        for llm, _ in _LOADED.values():
            with contextlib.suppress(Exception):  # best effort at exit
                llm.close()
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
            llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, flash_attn=flash_attn, verbose=False)
            _LOADED[key] = (llm, threading.Lock())
        return _LOADED[key]


class LlamaCppOptions(JudgeOptions):
    n_ctx: int = Field(4096, ge=64, le=1 << 20, description="context window in tokens")
    threads: int | None = Field(None, ge=1, le=1024, description="CPU threads (default: all cores)")
    parallel: int = Field(1, ge=1, le=64, description="sequences decoded together (continuous batching with "
                          "prompt-prefix reuse; 1: one request at a time)")
    flash_attn: bool = Field(False, description="llama.cpp's fused attention kernel: about 5-10% faster on a CPU, "
                             "but it rounds differently, so its replies are cached as another judge's")
    grammar: Literal["none", "verdict"] = Field(
        "none", description="constrain the reply (GBNF): 'verdict' admits only 'Explanation: <one line>' and then "
        "'Score: X/Y' or 'Answer 1: X/Y Answer 2: Z/Y' (knockout's grading formats); not with parallel > 1")


#: The 'verdict' grammar: one explanation line, then one verdict in a format the score or pairwise parser reads.
VERDICT_GBNF = r"""
root ::= "Explanation: " line "\n" verdict
line ::= [^\n]{1,1200}
verdict ::= "Score: " num "/" num | "Answer 1: " num "/" num " Answer 2: " num "/" num
num ::= [0-9]{1,3} ("." [0-9]{1,2})?
"""


#: parallel decoders, one per model file and settings (knockout.judges._parallel)
_DECODERS: dict[tuple[str, int, int, int, bool], Any] = {}


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
            self._path = p
            self.sha256 = file_sha256(p)
            # The same bytes as an embedded model are that model (and share its cached replies).
            same = [m.name for m in MODELS.values() if m.sha256 == self.sha256]
            self._identity_model = same[0] if same else "gguf"
        else:
            known = ", ".join(MODELS)
            raise ConfigError(f"unknown embedded model '{self.model}' (known: {known}, or a path to a .gguf)")
        self.n_ctx = self.options.n_ctx
        self.n_threads = self.options.threads or os.cpu_count() or 2
        if self.options.grammar != "none" and self.options.parallel > 1:
            raise ConfigError("the llamacpp option grammar needs parallel=1")
        self._grammar: Any = None
        self._lock = asyncio.Lock()

    def identity(self) -> dict[str, Any]:
        """The GGUF's SHA-256 (not its path): the same file anywhere is the same judge; a grammar that
        constrains its replies, and flash attention (other arithmetic), are part of it."""
        ident: dict[str, Any] = {"backend": self.backend, "model": self._identity_model, "sha256": self.sha256}
        if self.options.grammar != "none":
            ident["grammar"] = self.options.grammar
        if self.options.flash_attn:  # another attention kernel rounds differently: its replies are its own
            ident["flash_attn"] = True
        return ident

    def _constraint(self) -> Any:
        if self.options.grammar == "none":
            return None
        if self._grammar is None:
            from llama_cpp.llama_grammar import LlamaGrammar

            self._grammar = LlamaGrammar.from_string(VERDICT_GBNF, verbose=False)
        return self._grammar

    def default_concurrency(self) -> int:
        return 1 if self.options.parallel == 1 else 2 * self.options.parallel

    def _llm(self) -> tuple[Any, threading.Lock]:
        path = self._path or model_path(self.model)
        return _load(path, self.n_ctx, self.n_threads, self.options.flash_attn)

    def _run(self, request: JudgeRequest) -> Completion:
        llm, lock = self._llm()
        dropped = sum(len(m.images) for m in request.messages)
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        p = request.params
        with lock:
            t0 = time.perf_counter()
            out = llm.create_chat_completion(
                messages=messages,
                temperature=p.temperature,
                max_tokens=p.max_tokens,
                seed=p.seed,
                stop=list(p.stop) or None,
                grammar=self._constraint(),
                **{k: v for k in OPTIONAL_PARAMS if (v := getattr(p, k)) is not None},
            )
            latency = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
            images_dropped=dropped,
        )

    async def complete(self, request: JudgeRequest) -> Completion:
        if self.options.parallel > 1:
            path = self._path or model_path(self.model)
            decoder = await asyncio.to_thread(_decoder, path, self.n_ctx, self.n_threads, self.options.parallel,
                                            self.options.flash_attn)
            t0 = time.perf_counter()
            done: Completion = await decoder.complete(request)
            done.latency_s = time.perf_counter() - t0
            return done
        async with self._lock:
            return await asyncio.to_thread(self._run, request)
