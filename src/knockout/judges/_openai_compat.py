"""Any OpenAI-compatible chat server through the ``openai`` SDK.

Works with OpenAI, vLLM, Ollama (``/v1``) and ``python -m llama_cpp.server``.
Options (spec ``?key=value`` or ``--judge-opt``, typed in :class:`OpenAIOptions`): ``base_url`` (else
``OPENAI_BASE_URL``, else api.openai.com), ``api_key`` (else ``OPENAI_API_KEY``; a local server needs
none), ``timeout`` seconds per attempt, the whole reply included (default 120), ``retries`` (default 4:
the SDK retries timeouts, connection errors, 429 and 5xx with exponential backoff; a 200 reply without a
completion is re-asked here, after ``backoff`` seconds, doubled each time), ``concurrency`` (default 8),
``images`` (whether the model accepts image parts; default yes), ``pools`` (HTTP client pools the
requests are spread over; default one per 16 requests in flight), ``slot`` (the structured output of
verdict slots, :func:`resolve_slot`: ``json-schema`` on the OpenAI API itself, free text elsewhere unless
given), ``server`` (what serves the model, for the ``expected`` verdict read from token probabilities at the value:
:func:`resolve_server`, :mod:`knockout.judges._expected`; ``openai`` on the OpenAI API itself, no expected verdict
elsewhere unless named) and ``gguf`` (with ``server=llama-cpp-python``: the GGUF whose chat template is applied
here).  A slot reply is read only as the server's structured output (:func:`slot_reply`): the whole reply one
JSON object of the schema, carrying the request's schema check; an expected verdict only from the server's token
probabilities, never from the text.

The cache identity is the server (normalised ``base_url``) and the model: two servers never share a
cached reply, whatever they call their model.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field

from knockout._redact import remember, url_secrets
from knockout.data import is_local
from knockout.errors import ConfigError, InputError
from knockout.judges._base import Completion, JudgeRequest, MalformedReply, Message, image_data_url
from knockout.judges._expected import (
    TOP,
    Alternatives,
    Explain,
    Probe,
    alternatives,
    chat_logprobs,
    read_prefilled,
    read_reply,
)
from knockout.judges._gguf import check_gguf
from knockout.judges._options import ServerOptions, normalise_url
from knockout.judges._server import LoopClients, ServerJudge, counting_http_client, shared_ssl_context
from knockout.judges._slot import CHECK, REASONING, Slot, constrained, invalid, parse_object, schema_check

#: requests in flight one HTTP client pool serves well (each request scans its pool: above it, more pools cost
#: less CPU than bigger ones; measured at 256 in flight, 16 a pool: 0.83 of the CPU of 64 a pool, 8: no less)
POOL_SIZE = 16
#: pools at most (each client loads its TLS certificates: tens of ms)
MAX_POOLS = 64


#: where ``slot=auto`` (the default) takes the JSON-schema slot: the OpenAI API itself, which honours it
SCHEMA_HOSTS = ("api.openai.com",)
#: how each server's expected verdict is read (recorded with the run as ``info.verdict_via``)
EXPECTED_VIA = {
    "openai": "openai-top-logprobs: the reply's top_logprobs at the value (half points not exact)",
    "vllm": "vllm-prefill: continue_final_message and top_logprobs, every allowed value scored",
    "llama-server": "llama-server-prefill: a trailing assistant message and top_logprobs (n_probs), every allowed "
                    "value scored",
    "llama-cpp-python": "llama-cpp-python-completions: the chat template applied here, completions logprobs, every "
                        "allowed value scored",
}


def resolve_server(option: str, server: str) -> str:
    """What serves the model: ``option`` as given, or for ``auto`` ``openai`` on the OpenAI API itself and
    ``other`` (no expected verdict) on any other server."""
    if option != "auto":
        return option
    return "openai" if on_openai_api(server) else "other"


def on_openai_api(server: str) -> bool:
    """Whether ``server`` (a normalised address) is the OpenAI API itself."""
    return urlsplit(server).hostname in SCHEMA_HOSTS


class OpenAIOptions(ServerOptions):
    images: bool = Field(True, description="the model accepts image parts (no: images are left out, counted)")
    slot: Literal["auto", "none", "json-schema", "json-object"] = Field(
        "auto", description="the server's structured output for verdict slots: json-schema (OpenAI structured "
        "outputs, vLLM guided decoding), json-object (python -m llama_cpp.server: a json_object with a schema); "
        "none: free-text verdicts; auto: json-schema for the OpenAI API itself, none for any other server (its "
        "support is not known unless given here)")
    pools: int | None = Field(None, ge=1, le=MAX_POOLS, description="HTTP client pools requests are spread over "
                              "(default: one per 16 requests in flight, at most 64)")
    server: Literal["auto", "openai", "vllm", "llama-server", "llama-cpp-python", "other"] = Field(
        "auto", description="what serves the model, for the expected verdict (--verdict expected: token "
        "probabilities at the value): openai (the reply's top_logprobs), vllm and llama-server (an assistant "
        "prefill and top_logprobs, every allowed value scored), llama-cpp-python (python -m llama_cpp.server: the "
        "completions endpoint, the chat template applied here from gguf); other: no expected verdict; auto: openai "
        "for the OpenAI API itself, other elsewhere")
    gguf: str | None = Field(None, description="server=llama-cpp-python: the GGUF the server serves (a path, or an "
                             "embedded model's name), read for its chat template (vocabulary only)")


def resolve_slot(option: str, server: str) -> str:
    """The structured output a judge's verdict slots use: ``option`` as given, or for ``auto`` ``json-schema``
    on the OpenAI API itself (``server``: the normalised address, api.openai.com when no ``base_url`` or
    ``OPENAI_BASE_URL`` is given) and ``none`` (free text) on any other server."""
    if option != "auto":
        return option
    return "json-schema" if on_openai_api(server) else "none"


def _content(m: Message, with_images: bool) -> Any:
    if not m.images or not with_images:
        return m.content
    parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}]
    for path in m.images:
        if not is_local(path):  # kept only when the data was loaded with allow_urls
            parts.append({"type": "image_url", "image_url": {"url": path}})
            continue
        media, data = image_data_url(path)
        parts.append({"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}})
    return parts


def _reply(data: Any, images_dropped: int) -> Completion:
    """The completion in a chat-completions reply (its JSON, as the server sent it), or MalformedReply."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply("no choices in the reply")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedReply("a choice without a message")
    text = message.get("content")
    if text is None:
        text = message.get("refusal")  # a refusal is the judge's reply (parsed as invalid)
    if not isinstance(text, str):
        raise MalformedReply("a message without text")
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    finish = choice.get("finish_reason")
    return Completion(
        text=text,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        finish_reason=finish if isinstance(finish, str) else None,
        images_dropped=images_dropped,
    )


def slot_reply(done: Completion, slot: Slot | None, check: str | None = None) -> Completion:
    """A structured-output reply to a slot request: its **whole** text read as exactly one JSON object of the
    slot's schema (:meth:`Slot.object_error`: no key repeated, missing or other, every value an allowed one,
    and ``check``, the value only the request's schema allows, repeated) into the slot's verdict, its text
    shown as the verdict line with the explanation.  Nothing is searched for inside a text reply: any other
    reply keeps its text and gets an invalid verdict saying why (asked again, then recorded invalid)."""
    if slot is None:
        return done
    obj, error = parse_object(done.text)
    if error is None:
        error = slot.object_error(obj, check)
    elif check is not None:  # not JSON at all: free text, the schema was not applied
        error = slot.object_error(None, check)
    if error is not None:
        done.verdict = invalid(error)
        return done
    chosen = slot.from_json(obj, check)
    assert chosen is not None
    done.text = slot.written(chosen, obj.get(REASONING), obj.get("explanation"))
    done.verdict = constrained(slot, chosen)
    return done


def _count(value: Any) -> int:
    """A token count as the server wrote it (a whole number; anything else counts 0)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0


class OpenAIJudge(ServerJudge):
    backend = "openai"
    Options = OpenAIOptions
    options: OpenAIOptions
    default_base_url = "https://api.openai.com/v1"
    #: whether its replies are read for verdict slots (a batch judge reads its result lines as free text)
    reads_slots: ClassVar[bool] = True

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, options)
        if not self.model:
            raise ConfigError("openai judge spec needs a model name: openai:MODEL")
        try:
            import openai
        except ImportError:
            raise ConfigError("the openai backend needs the openai SDK: pip install 'knockout[openai]'") from None
        o = self.options
        self.base_url = o.base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = (o.api_key.get_secret_value() if o.api_key else None) or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            if not self.base_url:
                raise ConfigError(
                    "openai judge: set OPENAI_API_KEY, or give base_url for a local server "
                    "(e.g. openai:MODEL?base_url=http://127.0.0.1:8080/v1)"
                )
            api_key = "not-needed"
        remember([api_key, *url_secrets(self.base_url or "")])  # from the environment too
        self.supports_images = o.images
        #: the structured output of its verdict slots (resolve_slot: json-schema for the OpenAI API itself)
        address = normalise_url(self.base_url or self.default_base_url)
        self.slot_format = resolve_slot(o.slot, address)
        #: what serves the model (resolve_server): how an expected verdict is read, if at all
        self.server_kind = resolve_server(o.server, address)
        if self.reads_slots:
            self.slot_modes = tuple(m for m, on in (("expected", self.server_kind in EXPECTED_VIA),
                                                     ("constrained", self.slot_format != "none")) if on)
        self._gguf: Path | None = None
        self._template_sha: str | None = None
        if o.gguf is not None and self.server_kind != "llama-cpp-python":
            raise ConfigError(f"judge option 'gguf' of backend 'openai' is read only with server=llama-cpp-python "
                              f"(its chat template is applied here); this judge's server is {self.server_kind}: "
                              "leave gguf out, or give server=llama-cpp-python")
        if self.server_kind == "llama-cpp-python":
            self._gguf, self._template_sha = _gguf_of(o.gguf or self.model)
        # Above POOL_SIZE requests in flight, one client's connection pool becomes the bottleneck (each
        # request scans it): the requests are spread over several clients, in turn.
        tls: list[Any] = []  # one TLS context for every client of this judge

        def new_client() -> Any:
            if not tls:
                tls.append(shared_ssl_context(openai))
            return openai.AsyncOpenAI(api_key=api_key, base_url=self.base_url, timeout=o.timeout,
                                      max_retries=o.retries,
                                      http_client=counting_http_client(openai, o.timeout, tls[0]))

        self._pool = LoopClients(new_client)
        self.expect_concurrency(o.concurrency)
        self._connect(openai, self.base_url)

    def default_slot_mode(self) -> str | None:
        """``--verdict auto``: the constrained verdict where the structured output is on (the OpenAI API itself, or a
        server named with ``slot=``), else free text.  The expected verdict is taken only when asked for
        (``--verdict expected``): auto gives what it gave before it existed."""
        return "constrained" if "constrained" in self.slot_modes else None

    def verdict_via(self, mode: str) -> str | None:
        if mode == "expected":
            return EXPECTED_VIA.get(self.server_kind)
        if mode == "constrained":
            return f"structured output ({self.slot_format}) with the schema check"
        return None

    def expect_concurrency(self, n: int) -> None:
        """Up to ``n`` requests will be in flight: one client pool per 16 of them, at most 64 (or ``pools``)."""
        self._pool.wanted = max(self._pool.wanted, self.options.pools or min(MAX_POOLS, max(1, -(-n // POOL_SIZE))))

    def body(self, request: JudgeRequest) -> dict[str, Any]:
        """The chat-completions request body (sent live, or as one line of a batch)."""
        p = request.params
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": _content(m, self.supports_images)} for m in request.messages],
            "temperature": p.temperature,
            "max_tokens": p.max_tokens,
        }
        if p.seed is not None:
            body["seed"] = p.seed
        if p.stop:
            body["stop"] = list(p.stop)
        if p.top_p is not None:
            body["top_p"] = p.top_p
        if p.frequency_penalty is not None:
            body["frequency_penalty"] = p.frequency_penalty
        if request.slot is not None and request.slot_mode == "constrained" and "constrained" in self.slot_modes:
            schema = request.slot.json_schema(self.check_of(request))
            if self.slot_format == "json-object":
                body["response_format"] = {"type": "json_object", "schema": schema}
            else:
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": "verdict", "strict": True, "schema": schema}}
        return body

    @staticmethod
    def check_of(request: JudgeRequest) -> str | None:
        """The schema check of a slot request (:func:`knockout.judges._slot.schema_check`): the value its verdict
        object must carry in its ``check`` field, which only a reply written under the schema has."""
        if request.slot is None:
            return None
        return schema_check([[m.role, m.content, list(m.images)] for m in request.messages], request.slot)

    def identity(self) -> dict[str, Any]:
        ident = super().identity()
        if self.slot_format != "none":  # another request body (its schema with the check): its replies are its own
            ident["slot"] = self.slot_format
            ident["slot_check"] = CHECK
        if self.options.server != "auto":  # how expected verdicts are asked (auto: as before, nothing added)
            ident["server_kind"] = self.server_kind
        if self._template_sha is not None:  # the chat template applied here is part of every prompt
            ident["chat_template"] = self._template_sha
        return ident

    def _client_now(self) -> Any:
        return self._pool.next()

    @property
    def _client(self) -> Any:
        """The first client of the running loop (the batch API's requests)."""
        return self._pool.first()

    async def complete(self, request: JudgeRequest) -> Completion:
        dropped = 0 if self.supports_images else sum(len(m.images) for m in request.messages)
        if request.slot is not None and request.slot_mode == "expected" and "expected" in self.slot_modes:
            return await self._expected(request, request.slot, dropped)
        kwargs = self.body(request)
        client = self._client_now()
        # The SDK's own POST of chat.completions.create, without its request transform (the body is already
        # plain JSON: the transform walks it against the SDK's TypedDicts, about a tenth of a call's CPU at
        # 256 in flight) and without building its reply model (``cast_to=object``: the reply's JSON, read by
        # _reply; the model's construction was about a sixth of a call's CPU at 8 in flight); same path,
        # headers, retries and errors.
        slot = request.slot if request.slot_mode == "constrained" and "constrained" in self.slot_modes else None
        check = self.check_of(request) if slot is not None else None
        return await self._ask(lambda: client.post("/chat/completions", body=kwargs, cast_to=object),
                               lambda r: slot_reply(_reply(r, dropped), slot, check))

    # -- the expected verdict: token probabilities at the value (knockout.judges._expected) -------------------
    async def _post(self, path: str, body: dict[str, Any], pick: Callable[[dict[str, Any]], Any]) -> tuple[Any,
                                                                                                        Completion]:
        """One request: ``pick(reply)`` of its JSON (a reply without choices is malformed: asked again), and its
        token counts and failed attempts."""
        client = self._client_now()
        box: list[Any] = []

        def read(r: Any) -> Completion:
            if not isinstance(r, dict) or not isinstance(r.get("choices"), list) or not r["choices"] \
                    or not isinstance(r["choices"][0], dict):
                raise MalformedReply("no choices in the reply")
            box.append(pick(r))
            usage = r.get("usage")
            if not isinstance(usage, dict):
                usage = {}
            return Completion(text="", prompt_tokens=_count(usage.get("prompt_tokens")),
                              completion_tokens=_count(usage.get("completion_tokens")))

        done = await self._ask(lambda: client.post(path, body=body, cast_to=object), read)
        return box[-1], done

    async def _expected(self, request: JudgeRequest, slot: Slot, dropped: int) -> Completion:
        """An expected verdict: the OpenAI API's reply read at the value, or a prefill server's every allowed value
        scored (the module docs of :mod:`knockout.judges._expected`)."""
        t0 = time.perf_counter()
        via = self.server_kind
        if via == "openai":
            body = self.body(request)
            body.update(logprobs=True, top_logprobs=TOP)
            if not slot.then and slot.reasoning is None:  # the verdict alone: a few tokens
                body["max_tokens"] = min(request.params.max_tokens, REPLY_TOKENS)
            # a reply without a message is malformed (asked again) before it is read
            (data, said), done = await self._post("/chat/completions", body, lambda r: (r, _reply(r, dropped)))
            done.text, done.finish_reason, done.images_dropped = said.text, said.finish_reason, dropped
            done.verdict = await read_reply(slot, said.text, chat_logprobs(data), via, request.shown)
            done.latency_s = time.perf_counter() - t0
            return done
        probe, explain = await self._prefill_calls(request)
        reading = await read_prefilled(slot, probe, explain if slot.then or slot.reasoning is not None else None,
                                       via, request.params, request.shown)
        if via == "llama-cpp-python":
            dropped = sum(len(m.images) for m in request.messages)
        return Completion(text=reading.text, prompt_tokens=reading.prompt_tokens,
                          completion_tokens=reading.completion_tokens, latency_s=time.perf_counter() - t0,
                          finish_reason="stop", images_dropped=dropped, failed_attempts=reading.failed_attempts,
                          verdict=reading.verdict)

    async def _prefill_calls(self, request: JudgeRequest) -> tuple[Callable[[str], Awaitable[Probe]], Explain]:
        """The two requests of a prefill server: the next token's alternatives after the assistant's reply begun
        with a text, and what the judge writes after it (up to a token bound and stops)."""
        p = request.params
        sampling: dict[str, Any] = {"temperature": p.temperature}
        if p.seed is not None:
            sampling["seed"] = p.seed
        if self.server_kind == "llama-cpp-python":
            prompt = await self._chat_prompt(request)

            def completions(prefill: str, extra: dict[str, Any]) -> dict[str, Any]:
                return {"model": self.model, "prompt": prompt + prefill, **extra}

            async def probe(prefill: str) -> Probe:
                alts, done = await self._post("/completions", completions(prefill, {
                    "max_tokens": 1, "temperature": 0, "logprobs": TOP}), _completion_alternatives)
                return Probe(alts, done.prompt_tokens, done.completion_tokens, done.failed_attempts)

            async def explain(prefill: str, max_tokens: int, stop: list[str]) -> tuple[str, bool, Probe]:
                (text, ended), done = await self._post("/completions", completions(prefill, {
                    **sampling, "max_tokens": max_tokens, "stop": stop}), _completion_text)
                return text, ended, Probe(None, done.prompt_tokens, done.completion_tokens, done.failed_attempts)

            return probe, explain
        messages = [{"role": m.role, "content": _content(m, self.supports_images)} for m in request.messages]
        cont: dict[str, Any] = ({"continue_final_message": True, "add_generation_prompt": False}
                                if self.server_kind == "vllm" else {})

        def chat(prefill: str, extra: dict[str, Any]) -> dict[str, Any]:
            return {"model": self.model, "messages": [*messages, {"role": "assistant", "content": prefill}],
                    **extra, **cont}

        probe_params: dict[str, Any] = {"max_tokens": 1, "temperature": 0, "logprobs": True, "top_logprobs": TOP}
        if self.server_kind == "llama-server":
            probe_params["n_probs"] = TOP

        async def chat_probe(prefill: str) -> Probe:
            alts, done = await self._post("/chat/completions", chat(prefill, probe_params), _chat_alternatives)
            return Probe(alts, done.prompt_tokens, done.completion_tokens, done.failed_attempts)

        async def chat_explain(prefill: str, max_tokens: int, stop: list[str]) -> tuple[str, bool, Probe]:
            (text, ended), done = await self._post("/chat/completions", chat(prefill, {
                **sampling, "max_tokens": max_tokens, "stop": stop}), _chat_text)
            return text, ended, Probe(None, done.prompt_tokens, done.completion_tokens, done.failed_attempts)

        return chat_probe, chat_explain

    async def _chat_prompt(self, request: JudgeRequest) -> str:
        """The request's messages in the GGUF's own chat template (as the embedded judge and llama-cpp-python's
        chat endpoint format them), ending where the assistant's reply starts."""
        from knockout.judges._chat import chat_prompt

        assert self._gguf is not None
        llm = await asyncio.to_thread(_vocab, self._gguf)
        prompt, _, _ = chat_prompt(llm, [{"role": m.role, "content": m.content} for m in request.messages])
        return prompt

    async def aclose(self) -> None:
        await self._pool.aclose()


#: the most tokens an expected verdict without an explanation may take on the OpenAI API ("Answer 1: 4.5/5 ...")
REPLY_TOKENS = 24


def _chat_alternatives(r: dict[str, Any]) -> Alternatives:
    toks = chat_logprobs(r)
    return toks[0][1] if toks else None


def _completion_alternatives(r: dict[str, Any]) -> Alternatives:
    try:
        top = r["choices"][0]["logprobs"]["top_logprobs"][0]
    except (KeyError, IndexError, TypeError):
        return None
    return alternatives(top)


def _chat_text(r: dict[str, Any]) -> tuple[str, bool]:
    """A chat reply's text, and whether the judge stopped before its token bound."""
    message = r["choices"][0].get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        raise MalformedReply("a message without text")
    return text, r["choices"][0].get("finish_reason") != "length"


def _completion_text(r: dict[str, Any]) -> tuple[str, bool]:
    """A completion's text, and whether the judge stopped before its token bound."""
    text = r["choices"][0].get("text")
    if not isinstance(text, str):
        raise MalformedReply("a completion without text")
    return text, r["choices"][0].get("finish_reason") != "length"


#: vocabulary-only models of GGUF files (their chat templates), by path
_VOCABS: dict[str, Any] = {}
_VOCAB_LOCK = threading.Lock()


@atexit.register
def _close_vocabs() -> None:
    """Free the vocabulary-only models before the interpreter tears down the modules ``Llama.__del__`` needs (left
    to the exit, each printed a ``Llama.__del__`` traceback after ``make test``'s summary)."""
    with _VOCAB_LOCK:
        for llm in _VOCABS.values():
            with contextlib.suppress(Exception):  # best effort at exit
                llm.close()
        _VOCABS.clear()


def _vocab(path: Path) -> Any:
    """The GGUF's vocabulary and metadata (``vocab_only``: no weights), loaded once."""
    with _VOCAB_LOCK:
        found = _VOCABS.get(str(path))
        if found is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise ConfigError("server=llama-cpp-python applies the GGUF's chat template with llama-cpp-python; "
                                  "install it with: pip install 'knockout[embedded]'") from None
            from llama_cpp._utils import suppress_stdout_stderr

            try:
                with suppress_stdout_stderr(disable=False):  # llama.cpp's own notes on a context it does not need
                    found = Llama(model_path=str(path), vocab_only=True, n_ctx=64, verbose=False)
            except (ValueError, RuntimeError, OSError) as exc:  # a GGUF llama.cpp cannot read past its header
                raise InputError(f"gguf=: llama.cpp cannot read this GGUF ({exc})", file=str(path)) from None
            _VOCABS[str(path)] = found
        return found


def _gguf_of(name: str) -> tuple[Path, str]:
    """The GGUF of ``gguf=`` (an embedded model's name, or a path) and the digest of its chat template."""
    import hashlib

    from knockout.judges._models import MODELS, model_path

    if name in MODELS:
        path = model_path(name)
    elif name.endswith(".gguf") and Path(name).expanduser().is_file():
        path = check_gguf(name, "gguf=")  # before llama.cpp opens it
    else:
        raise ConfigError(f"server=llama-cpp-python needs gguf=PATH (or an embedded model's name: "
                          f"{', '.join(MODELS)}), the GGUF the server serves, for its chat template; got {name!r}")
    template = _vocab(path).metadata.get("tokenizer.chat_template")
    if not template:
        raise ConfigError(f"the GGUF {path} has no chat template (tokenizer.chat_template)")
    return path, hashlib.sha256(str(template).encode()).hexdigest()[:16]
