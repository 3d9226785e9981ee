"""Anthropic Messages API through the ``anthropic`` SDK.

Options: ``api_key`` (else ``ANTHROPIC_API_KEY``), ``base_url`` (else
``ANTHROPIC_BASE_URL``), ``timeout`` (120 s), ``retries`` (4; the SDK retries
timeouts, 429 and 5xx with exponential backoff).  System messages go to the
``system`` field; images are sent as base64 image blocks.
"""

from __future__ import annotations

import os
import time
from typing import Any

from knockout.errors import ConfigError, JudgeError
from knockout.judges._base import Completion, Judge, JudgeRequest, Message, image_data_url


def _blocks(m: Message) -> Any:
    if not m.images:
        return m.content
    blocks: list[dict[str, Any]] = []
    for path in m.images:
        media, data = image_data_url(path)
        blocks.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
    blocks.append({"type": "text", "text": m.content})
    return blocks


class AnthropicJudge(Judge):
    backend = "anthropic"
    supports_images = True
    unsupported_params = ("frequency_penalty",)  # the Messages API has no such parameter

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        if not self.model:
            raise ConfigError("anthropic judge spec needs a model name: anthropic:MODEL")
        try:
            import anthropic
        except ImportError:
            raise ConfigError(
                "the anthropic backend needs the anthropic SDK: pip install 'knockout[anthropic]'"
            ) from None
        api_key = self.options.get("api_key") or os.environ.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise ConfigError("anthropic judge: set ANTHROPIC_API_KEY (or ?api_key=...)")
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=self.options.get("base_url") or os.environ.get("ANTHROPIC_BASE_URL"),
            timeout=float(self.options.get("timeout", "120")),
            max_retries=int(self.options.get("retries", "4")),
        )
        self._anthropic = anthropic

    def default_concurrency(self) -> int:
        return int(self.options.get("concurrency", "4"))

    async def complete(self, request: JudgeRequest) -> Completion:
        p = request.params
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        messages = [{"role": m.role, "content": _blocks(m)} for m in request.messages if m.role != "system"]
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": p.temperature,
            "max_tokens": p.max_tokens,
        }
        if system:
            kwargs["system"] = system
        if p.stop:
            kwargs["stop_sequences"] = list(p.stop)
        if p.top_p is not None:  # in the body: SDKs from 2.x on no longer name it, the API takes it
            kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "top_p": p.top_p}
        t0 = time.perf_counter()
        try:
            resp = await self._client.messages.create(**kwargs)
        except self._anthropic.APIError as exc:
            raise JudgeError(f"anthropic backend: {exc}") from exc
        latency = time.perf_counter() - t0
        text = "".join(getattr(b, "text", "") for b in resp.content)
        return Completion(
            text=text,
            prompt_tokens=resp.usage.input_tokens,
            completion_tokens=resp.usage.output_tokens,
            latency_s=latency,
            finish_reason=resp.stop_reason,
        )

    async def aclose(self) -> None:
        await self._client.close()
