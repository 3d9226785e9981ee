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
given).  A slot reply is read only as the server's structured output (:func:`slot_reply`): the whole reply one
JSON object of the schema, carrying the request's schema check.

The cache identity is the server (normalised ``base_url``) and the model: two servers never share a
cached reply, whatever they call their model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field

from knockout.data import is_local
from knockout.errors import ConfigError
from knockout.judges._base import Completion, JudgeRequest, MalformedReply, Message, image_data_url
from knockout.judges._options import ServerOptions, normalise_url
from knockout.judges._server import ServerJudge, counting_http_client
from knockout.judges._slot import CHECK, Slot, constrained, invalid, parse_object, schema_check

#: requests in flight one HTTP client pool serves well (each request scans its pool: above it, more pools cost
#: less CPU than bigger ones; measured at 256 in flight, 16 a pool: 0.83 of the CPU of 64 a pool, 8: no less)
POOL_SIZE = 16
#: pools at most (each client loads its TLS certificates: tens of ms)
MAX_POOLS = 64


#: where ``slot=auto`` (the default) takes the JSON-schema slot: the OpenAI API itself, which honours it
SCHEMA_HOSTS = ("api.openai.com",)


class OpenAIOptions(ServerOptions):
    images: bool = Field(True, description="the model accepts image parts (no: images are left out, counted)")
    slot: Literal["auto", "none", "json-schema", "json-object"] = Field(
        "auto", description="the server's structured output for verdict slots: json-schema (OpenAI structured "
        "outputs, vLLM guided decoding), json-object (python -m llama_cpp.server: a json_object with a schema); "
        "none: free-text verdicts; auto: json-schema for the OpenAI API itself, none for any other server (its "
        "support is not known unless given here)")
    pools: int | None = Field(None, ge=1, le=MAX_POOLS, description="HTTP client pools requests are spread over "
                              "(default: one per 16 requests in flight, at most 64)")


def resolve_slot(option: str, server: str) -> str:
    """The structured output a judge's verdict slots use: ``option`` as given, or for ``auto`` ``json-schema``
    on the OpenAI API itself (``server``: the normalised address, api.openai.com when no ``base_url`` or
    ``OPENAI_BASE_URL`` is given) and ``none`` (free text) on any other server."""
    if option != "auto":
        return option
    return "json-schema" if urlsplit(server).hostname in SCHEMA_HOSTS else "none"


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
    explanation = obj.get("explanation")
    done.text = slot.text(chosen) + (f"{slot.then} {explanation}" if slot.then and isinstance(explanation, str)
                                     else "")
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
        self.supports_images = o.images
        #: the structured output of its verdict slots (resolve_slot: json-schema for the OpenAI API itself)
        self.slot_format = resolve_slot(o.slot, normalise_url(self.base_url or self.default_base_url))
        if self.slot_format != "none" and self.reads_slots:
            self.slot_modes = ("constrained",)
        # Above POOL_SIZE requests in flight, one client's connection pool becomes the bottleneck (each
        # request scans it): the requests are spread over several clients, in turn.
        def new_client() -> Any:
            return openai.AsyncOpenAI(api_key=api_key, base_url=self.base_url, timeout=o.timeout,
                                      max_retries=o.retries,
                                      http_client=counting_http_client(openai, o.timeout))

        self._new_client = new_client
        self._clients: list[Any] = []
        self._turn = 0
        self.expect_concurrency(o.concurrency)
        self._client = self._clients[0]
        self._connect(openai, self.base_url)

    def expect_concurrency(self, n: int) -> None:
        """Up to ``n`` requests will be in flight: one client pool per 16 of them, at most 64 (or ``pools``)."""
        wanted = self.options.pools or min(MAX_POOLS, max(1, -(-n // POOL_SIZE)))
        while len(self._clients) < wanted:
            self._clients.append(self._new_client())

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
        if request.slot is not None and request.slot_mode in self.slot_modes:
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
        return ident

    async def complete(self, request: JudgeRequest) -> Completion:
        dropped = 0 if self.supports_images else sum(len(m.images) for m in request.messages)
        kwargs = self.body(request)
        client = self._clients[self._turn % len(self._clients)]
        self._turn += 1
        # The SDK's own POST of chat.completions.create, without its request transform (the body is already
        # plain JSON: the transform walks it against the SDK's TypedDicts, about a tenth of a call's CPU at
        # 256 in flight) and without building its reply model (``cast_to=object``: the reply's JSON, read by
        # _reply; the model's construction was about a sixth of a call's CPU at 8 in flight); same path,
        # headers, retries and errors.
        slot = request.slot if request.slot_mode in self.slot_modes else None
        check = self.check_of(request) if slot is not None else None
        return await self._ask(lambda: client.post("/chat/completions", body=kwargs, cast_to=object),
                               lambda r: slot_reply(_reply(r, dropped), slot, check))

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()
