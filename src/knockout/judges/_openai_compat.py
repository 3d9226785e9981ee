"""Any OpenAI-compatible chat server through the ``openai`` SDK.

Works with OpenAI, vLLM, Ollama (``/v1``) and ``python -m llama_cpp.server``.
Options (spec ``?key=value`` or ``--judge-opt``): ``base_url`` (else
``OPENAI_BASE_URL``), ``api_key`` (else ``OPENAI_API_KEY``; a local server
needs none), ``timeout`` seconds (default 120), ``retries`` (default 4: the
SDK retries timeouts, connection errors, 429 and 5xx with exponential backoff),
``images`` (``yes``/``no``: whether the model accepts image parts; default yes).
"""

from __future__ import annotations

import os
import time
from typing import Any

from knockout.errors import ConfigError, JudgeError
from knockout.judges._base import Completion, Judge, JudgeRequest, Message, image_data_url


def _content(m: Message, with_images: bool) -> Any:
    if not m.images or not with_images:
        return m.content
    parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}]
    for path in m.images:
        media, data = image_data_url(path)
        parts.append({"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}})
    return parts


class OpenAIJudge(Judge):
    backend = "openai"

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        if not self.model:
            raise ConfigError("openai judge spec needs a model name: openai:MODEL")
        try:
            import openai
        except ImportError:
            raise ConfigError("the openai backend needs the openai SDK: pip install 'knockout[openai]'") from None
        self.base_url = self.options.get("base_url") or os.environ.get("OPENAI_BASE_URL")
        api_key = self.options.get("api_key") or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            if not self.base_url:
                raise ConfigError(
                    "openai judge: set OPENAI_API_KEY, or give base_url for a local server "
                    "(e.g. openai:MODEL?base_url=http://127.0.0.1:8080/v1)"
                )
            api_key = "not-needed"
        self.supports_images = self.options.get("images", "yes").lower() not in ("no", "0", "false")
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            timeout=float(self.options.get("timeout", "120")),
            max_retries=int(self.options.get("retries", "4")),
        )
        self._openai = openai

    def identity(self) -> dict[str, Any]:
        # The server address is not part of the identity: the same model behind
        # another URL gives the same answers (and may be cached as such).
        return {"backend": self.backend, "model": self.model}

    def default_concurrency(self) -> int:
        return int(self.options.get("concurrency", "8"))

    async def complete(self, request: JudgeRequest) -> Completion:
        p = request.params
        messages = [{"role": m.role, "content": _content(m, self.supports_images)} for m in request.messages]
        dropped = 0 if self.supports_images else sum(len(m.images) for m in request.messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": p.temperature,
            "max_tokens": p.max_tokens,
        }
        if p.seed is not None:
            kwargs["seed"] = p.seed
        if p.stop:
            kwargs["stop"] = list(p.stop)
        if p.top_p is not None:
            kwargs["top_p"] = p.top_p
        if p.frequency_penalty is not None:
            kwargs["frequency_penalty"] = p.frequency_penalty
        t0 = time.perf_counter()
        try:
            resp = await self._client.chat.completions.create(**kwargs)
        except self._openai.APIError as exc:
            raise JudgeError(f"openai backend ({self.base_url or 'api.openai.com'}): {exc}") from exc
        latency = time.perf_counter() - t0
        choice = resp.choices[0]
        usage = resp.usage
        return Completion(
            text=choice.message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_s=latency,
            finish_reason=choice.finish_reason,
            images_dropped=dropped,
        )

    async def aclose(self) -> None:
        await self._client.close()
