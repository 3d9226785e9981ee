"""What the backends behind an HTTP API (OpenAI-compatible, Anthropic) share: options, the server in
the identity, and one request with its error mapping and re-asks of malformed replies."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from knockout.errors import JudgeError
from knockout.judges._base import Completion, Judge, MalformedReply, retry_malformed
from knockout.judges._options import ServerOptions, normalise_url


class ServerJudge(Judge):
    """A judge reached through a vendor SDK.  Subclasses set ``default_base_url`` and call
    :meth:`_connect` with the SDK module once they have built their client."""

    Options = ServerOptions
    options: ServerOptions
    default_base_url: ClassVar[str] = ""

    def _connect(self, sdk: Any, base_url: str | None) -> None:
        self._sdk = sdk
        self.server = normalise_url(base_url or self.default_base_url)

    def identity(self) -> dict[str, Any]:
        # The server is part of the identity: two servers may serve different weights under one name.
        return {"backend": self.backend, "server": self.server, "model": self.model}

    def default_concurrency(self) -> int:
        return self.options.concurrency

    async def _ask(self, create: Callable[[], Awaitable[Any]], read: Callable[[Any], Completion]) -> Completion:
        """``read(await create())``: SDK errors (after the SDK's own retries) become JudgeError; a reply
        without a completion (``read`` raises MalformedReply, or the body is not the API's JSON) is
        asked again up to ``retries`` times, ``backoff`` seconds apart, doubling."""

        async def once() -> Completion:
            t0 = time.perf_counter()
            try:
                resp = await create()
            except self._sdk.APIResponseValidationError as exc:
                raise MalformedReply(str(exc)) from exc
            except self._sdk.APIError as exc:
                raise JudgeError(f"{self.backend} backend ({self.server}): {exc}") from exc
            except ValueError as exc:  # a 200 body that is not JSON
                raise MalformedReply(f"{type(exc).__name__}: {exc}") from exc
            completion = read(resp)
            completion.latency_s = time.perf_counter() - t0
            return completion

        what = f"{self.backend} backend ({self.server})"
        return await retry_malformed(once, retries=self.options.retries, backoff=self.options.backoff, what=what)
