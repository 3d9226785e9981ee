"""Anthropic Messages API through the ``anthropic`` SDK.

Options (typed in :class:`AnthropicOptions`): ``api_key`` (else ``ANTHROPIC_API_KEY``), ``base_url``
(else ``ANTHROPIC_BASE_URL``, else api.anthropic.com), ``timeout`` (120 s per attempt, the whole reply
included), ``retries`` (4; the SDK retries timeouts, 429 and 5xx with exponential backoff; a reply
without text content is re-asked here after ``backoff`` seconds, doubled each time), ``concurrency``
(4).  System messages go to the
``system`` field; images are sent as base64 image blocks (URL blocks for URLs).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from knockout._redact import remember, url_secrets
from knockout.data import is_local
from knockout.errors import ConfigError
from knockout.judges._base import Completion, JudgeRequest, MalformedReply, Message, image_data_url
from knockout.judges._options import ServerOptions
from knockout.judges._server import LoopClients, ServerJudge, counting_http_client
from knockout.judges._slot import REASONING, Slot, constrained, invalid, parse_object


class AnthropicOptions(ServerOptions):
    concurrency: int = Field(4, ge=1, le=1024, description="requests in flight")


def _blocks(m: Message) -> Any:
    if not m.images:
        return m.content
    blocks: list[dict[str, Any]] = []
    for path in m.images:
        if not is_local(path):  # kept only when the data was loaded with allow_urls
            blocks.append({"type": "image", "source": {"type": "url", "url": path}})
            continue
        media, data = image_data_url(path)
        blocks.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
    blocks.append({"type": "text", "text": m.content})
    return blocks


#: the forced tool of a slot request
VERDICT_TOOL = "record_verdict"


def _tool_reply(resp: Any, slot: Slot, raw: str | None = None) -> Completion:
    """A slot request's reply: the forced tool call's input, the server's own structured field, read into the
    slot's verdict when it is exactly a verdict object of the tool's schema (:meth:`Slot.object_error`: no key
    repeated, missing or other, every value an allowed one).  ``raw`` is the reply's body as sent: the input is
    read from it (:func:`knockout.judges._slot.parse_object` keeps a repeated key, which the SDK's reading
    drops).  Any other reply (no such tool call, an input that is not the schema's) keeps its text and gets an
    invalid verdict saying why (asked again, then recorded invalid); a text block is never read for one."""
    content = getattr(resp, "content", None)
    if not isinstance(content, list) or not content:
        raise MalformedReply("no content in the reply")
    usage = getattr(resp, "usage", None)
    done = Completion(text="", prompt_tokens=int(getattr(usage, "input_tokens", None) or 0),
                      completion_tokens=int(getattr(usage, "output_tokens", None) or 0),
                      finish_reason=getattr(resp, "stop_reason", None))
    inputs = [getattr(b, "input", None) for b in content
              if getattr(b, "type", None) == "tool_use" and getattr(b, "name", None) == VERDICT_TOOL]
    if raw is not None:  # the same blocks as the server wrote them
        body, error = parse_object(raw)
        blocks = body.get("content") if isinstance(body, dict) else None
        if error is not None or not isinstance(blocks, list):
            raise MalformedReply(error or "no content in the reply")
        inputs = [b.get("input") for b in blocks
                  if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == VERDICT_TOOL]
    if not inputs:
        done.text = "".join(t for t in (getattr(b, "text", None) for b in content) if isinstance(t, str))
        done.verdict = invalid(f"the reply has no {VERDICT_TOOL} tool call (its text is not read for a verdict)")
        return done
    obj = inputs[0]
    error = slot.object_error(obj) if len(inputs) == 1 else f"the reply has {len(inputs)} {VERDICT_TOOL} tool calls"
    if error is not None:
        done.text = json.dumps(obj, ensure_ascii=False, default=str)
        done.verdict = invalid(error)
        return done
    chosen = slot.from_json(obj)
    assert chosen is not None and isinstance(obj, dict)
    done.text = slot.written(chosen, obj.get(REASONING), obj.get("explanation"))
    done.verdict = constrained(slot, chosen)
    return done


def _reply(resp: Any) -> Completion:
    """The text of a Messages reply, or MalformedReply when it has none."""
    content = getattr(resp, "content", None)
    if not isinstance(content, list) or not content:
        raise MalformedReply("no content in the reply")
    texts = [t for t in (getattr(b, "text", None) for b in content) if isinstance(t, str)]
    if not texts:
        raise MalformedReply("no text block in the reply")
    usage = getattr(resp, "usage", None)
    return Completion(
        text="".join(texts),
        prompt_tokens=int(getattr(usage, "input_tokens", None) or 0),
        completion_tokens=int(getattr(usage, "output_tokens", None) or 0),
        finish_reason=getattr(resp, "stop_reason", None),
    )


class AnthropicJudge(ServerJudge):
    backend = "anthropic"
    supports_images = True
    #: a verdict slot is a forced tool call whose typed input is the verdict
    slot_modes: tuple[str, ...] = ("constrained",)
    unsupported_params = ("frequency_penalty",)  # the Messages API has no such parameter
    Options = AnthropicOptions
    options: AnthropicOptions
    default_base_url = "https://api.anthropic.com"

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, options)
        if not self.model:
            raise ConfigError("anthropic judge spec needs a model name: anthropic:MODEL")
        try:
            import anthropic
        except ImportError:
            raise ConfigError(
                "the anthropic backend needs the anthropic SDK: pip install 'knockout[anthropic]'"
            ) from None
        o = self.options
        api_key = (o.api_key.get_secret_value() if o.api_key else None) or os.environ.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise ConfigError("anthropic judge: set ANTHROPIC_API_KEY (or ?api_key=...)")
        base_url = o.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        remember([api_key, *url_secrets(base_url or "")])  # from the environment too
        self._pool = LoopClients(lambda: anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=o.timeout, max_retries=o.retries,
            http_client=counting_http_client(anthropic, o.timeout),
        ))
        self._connect(anthropic, base_url)
        from anthropic.resources import AsyncMessages

        self._temperature_kw = "temperature" in inspect.signature(AsyncMessages.create).parameters

    def message_params(self, request: JudgeRequest) -> dict[str, Any]:
        """A request's Messages parameters but the temperature (system messages go to ``system``)."""
        p = request.params
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        messages = [{"role": m.role, "content": _blocks(m)} for m in request.messages if m.role != "system"]
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": p.max_tokens}
        if system:
            kwargs["system"] = system
        if p.stop:
            kwargs["stop_sequences"] = list(p.stop)
        if p.top_p is not None:  # in the body: SDKs from 2.x on no longer name it, the API takes it
            kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "top_p": p.top_p}
        if request.slot is not None and request.slot_mode in self.slot_modes:
            kwargs["tools"] = [{"name": VERDICT_TOOL, "description": "Record your verdict.",
                                "input_schema": request.slot.json_schema()}]
            kwargs["tool_choice"] = {"type": "tool", "name": VERDICT_TOOL}
        return kwargs

    async def complete(self, request: JudgeRequest) -> Completion:
        kwargs = self.message_params(request)
        if self._temperature_kw:
            kwargs["temperature"] = request.params.temperature
        else:  # SDKs from 2.x on no longer name it; the API still takes it
            kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "temperature": request.params.temperature}
        slot = request.slot if request.slot_mode in self.slot_modes else None
        if slot is None:
            return await self._ask(lambda: self._client.messages.create(**kwargs), _reply)
        # the raw reply as well: its tool input is read from the body as sent (a repeated key is kept)
        return await self._ask(lambda: self._raw_create(kwargs), lambda r: _tool_reply(r[0], slot, r[1]))

    async def _raw_create(self, kwargs: dict[str, Any]) -> tuple[Any, str | None]:
        """The Messages reply and its body as sent (the SDK's raw response: ``parse`` and ``text`` are
        coroutines from SDK 1.x on, plain in the older legacy response)."""
        raw = await self._client.messages.with_raw_response.create(**kwargs)
        resp, text = raw.parse(), raw.text
        if inspect.isawaitable(resp):
            resp = await resp
        if callable(text):
            text = text()
        if inspect.isawaitable(text):
            text = await text
        return resp, text if isinstance(text, str) else None

    @property
    def _client(self) -> Any:
        """The client of the running loop (:class:`LoopClients`)."""
        return self._pool.first()

    async def aclose(self) -> None:
        await self._pool.aclose()
