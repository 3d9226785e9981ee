"""What the backends behind an HTTP API (OpenAI-compatible, Anthropic) share: options, the server in
the identity, and one request with its error mapping and re-asks of malformed replies."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar

from knockout._redact import redact_url
from knockout.errors import JudgeError
from knockout.judges._base import Completion, Judge, MalformedReply, retry_malformed
from knockout.judges._options import ServerOptions, normalise_url


@dataclass
class _Attempts:
    """The HTTP attempts of one request (the SDK's own retries included) and the malformed replies."""

    sent: int = 0
    answered: int = 0  # responses with a status below 400
    malformed: int = 0

    @property
    def failed(self) -> int:
        return self.sent - self.answered + self.malformed


_attempts: ContextVar[_Attempts | None] = ContextVar("knockout_attempts", default=None)


async def _on_request(request: Any) -> None:
    if (a := _attempts.get()) is not None:
        a.sent += 1


async def _on_response(response: Any) -> None:
    if (a := _attempts.get()) is not None and response.status_code < 400:
        a.answered += 1


@functools.cache
def _deadline_client(base: type) -> type:
    """``base`` (an SDK's async HTTP client class) whose ``send`` must end within ``deadline_s`` seconds:
    connection, request, status and the whole body.  The client's own time-out bounds each read only, so
    a server trickling one byte at a time would hold a request for ever; past the deadline the attempt
    ends with the HTTP library's ``TimeoutException``, which the SDK retries like any time-out."""
    http_client = next(c for c in base.__mro__ if c.__name__ == "AsyncClient")
    timeout_error: Any = sys.modules[http_client.__module__.split(".")[0]].TimeoutException

    class DeadlineClient(base):  # type: ignore[misc]
        deadline_s: float | None = None

        async def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            if self.deadline_s is None:
                return await super().send(request, *args, **kwargs)
            attempts = _attempts.get()
            answered = attempts.answered if attempts is not None else 0
            try:  # a timer on this task (no task of its own per request, as asyncio.wait_for made)
                async with asyncio.timeout(self.deadline_s):
                    return await super().send(request, *args, **kwargs)
            except TimeoutError:
                if attempts is not None:  # a status arrived, but not the whole reply: a failed attempt
                    attempts.answered = answered
                raise timeout_error(f"no complete reply within {self.deadline_s:g} s", request=request) from None

    DeadlineClient.__name__ = DeadlineClient.__qualname__ = f"Deadline{base.__name__}"
    return DeadlineClient


def shared_ssl_context(sdk: Any) -> Any:
    """The TLS context the SDK's HTTP client makes for itself (certificates verified, the environment's
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` read), made once, so that a judge's several clients share it: loading
    the certificate store is most of what building a client costs."""
    http = sys.modules[next(c for c in sdk.DefaultAsyncHttpxClient.__mro__
                            if c.__name__ == "AsyncClient").__module__.split(".")[0]]
    return http.create_ssl_context(verify=True, trust_env=True)


def counting_http_client(sdk: Any, deadline_s: float | None = None, ssl_context: Any = None) -> Any:
    """The SDK's aiohttp-backed async HTTP client (``DefaultAioHttpClient``: the ``aiohttp`` extra of the
    openai and anthropic SDKs; it costs about a quarter less CPU a call than the SDK's httpx transport,
    docs/scale-out.md#cpu-per-call), with hooks that count each attempt of the current request
    (every 429, 5xx, time-out and dropped connection the SDK retries is a failed attempt), and with
    ``deadline_s`` seconds for each whole attempt (see :func:`_deadline_client`); ``ssl_context``: one
    :func:`shared_ssl_context` for several clients (default: the client makes its own)."""
    client = _deadline_client(sdk.DefaultAioHttpClient)(
        event_hooks={"request": [_on_request], "response": [_on_response]},
        **({} if ssl_context is None else {"verify": ssl_context}),
    )
    client.deadline_s = deadline_s
    return client


async def _closed_at_loop_end(clients: list[Any]) -> AsyncGenerator[None, None]:
    """Held open until it is closed: by :meth:`LoopClients.aclose`, or by its loop as the loop ends (``asyncio.run``
    closes the async generators still open); then closes ``clients``."""
    try:
        yield
    finally:
        for client in clients:
            await client.close()


class LoopClients:
    """A judge's SDK clients, made for the event loop that sends through them.  An aiohttp session belongs to
    the loop it was opened on: a judge used from another loop (a second ``asyncio.run``, a notebook cell after
    a run) gets fresh clients, and clients closed by :meth:`aclose` are made again when next used.  ``wanted``
    clients are kept and used in turn.  Clients a loop ends with are closed as it ends (``asyncio.run`` closes
    the async generators still open, and one of them holds the clients), so a judge used from ``asyncio.run``
    without :meth:`aclose` leaves no aiohttp session open."""

    def __init__(self, make: Callable[[], Any], wanted: int = 1) -> None:
        self._make, self.wanted = make, wanted
        self._clients: list[Any] = []
        self._closers: list[AsyncGenerator[None, None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turn = 0

    def _current(self) -> list[Any]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # the clients of another loop (closed, or not this one's) are not used here;
            self._clients, self._closers, self._loop = [], [], loop  # that loop closes them (its closers' ends)
        if len(self._clients) < self.wanted:
            made = [self._make() for _ in range(self.wanted - len(self._clients))]
            self._clients.extend(made)
            closer = _closed_at_loop_end(made)
            with contextlib.suppress(StopIteration):  # run to its yield now (the loop tracks it from its first
                closer.__anext__().send(None)  # step on), and held here until it is closed
            self._closers.append(closer)
        return self._clients

    def next(self) -> Any:
        """The next client in turn (inside the running loop)."""
        clients = self._current()
        self._turn += 1
        return clients[self._turn % len(clients)]

    def first(self) -> Any:
        """The first client (inside the running loop): for requests that are not judge calls (batches)."""
        return self._current()[0]

    async def aclose(self) -> None:
        closers, self._clients, self._closers, self._loop = self._closers, [], [], None
        for closer in closers:  # each closes its clients
            await closer.aclose()


class ServerJudge(Judge):
    """A judge reached through a vendor SDK.  Subclasses set ``default_base_url`` and call
    :meth:`_connect` with the SDK module once they have built their client."""

    Options = ServerOptions
    options: ServerOptions
    default_base_url: ClassVar[str] = ""

    def _connect(self, sdk: Any, base_url: str | None) -> None:
        self._sdk = sdk
        self.server = normalise_url(base_url or self.default_base_url)

    @property
    def where(self) -> str:
        """The backend and its server as errors name them (the server redacted: knockout._redact.redact_url)."""
        return f"{self.backend} ({redact_url(self.server)})"

    def identity(self) -> dict[str, Any]:
        # The server is part of the identity: two servers may serve different weights under one name.
        return {"backend": self.backend, "server": self.server, "model": self.model}

    def default_concurrency(self) -> int:
        return self.options.concurrency

    async def _ask(self, create: Callable[[], Awaitable[Any]], read: Callable[[Any], Completion]) -> Completion:
        """``read(await create())``: SDK errors (after the SDK's own retries) become JudgeError; a reply
        without a completion (``read`` raises MalformedReply, or the body is not the API's JSON) is
        asked again up to ``retries`` times, ``backoff`` seconds apart, doubling.  The failed attempts
        (HTTP errors, time-outs, dropped connections, malformed replies) are counted in
        ``Completion.failed_attempts`` (or in the ``failed_attempts`` of the JudgeError)."""
        attempts = _Attempts()
        token = _attempts.set(attempts)

        async def once() -> Completion:
            t0 = time.perf_counter()
            try:
                try:
                    resp = await create()
                except self._sdk.APIResponseValidationError as exc:
                    raise MalformedReply(str(exc)) from exc
                except self._sdk.APIError as exc:
                    raise JudgeError(f"{self.backend} backend ({redact_url(self.server)}): {exc}") from exc
                except ValueError as exc:  # a 200 body that is not JSON
                    raise MalformedReply(f"{type(exc).__name__}: {exc}") from exc
                completion = read(resp)
            except MalformedReply:
                attempts.malformed += 1
                raise
            completion.latency_s = time.perf_counter() - t0
            return completion

        what = f"{self.backend} backend ({redact_url(self.server)})"
        try:
            done = await retry_malformed(once, retries=self.options.retries, backoff=self.options.backoff, what=what)
        except JudgeError as exc:
            exc.failed_attempts = attempts.failed
            raise
        finally:
            _attempts.reset(token)
        done.failed_attempts = attempts.failed
        return done
