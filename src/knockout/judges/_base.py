"""The one async interface every judge backend implements."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import mimetypes
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from knockout.data import is_local
from knockout.errors import JudgeError
from knockout.judges._options import JudgeOptions, validate_options

Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    """A chat message; ``images`` are file paths sent to judges that accept images."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str
    images: tuple[str, ...] = ()


class GenParams(BaseModel):
    """Generation parameters; defaults follow the papers (temperature 0.1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = 0.1
    max_tokens: int = Field(default=512, gt=0)
    seed: int | None = 0
    stop: tuple[str, ...] = ()


@dataclass
class JudgeRequest:
    """What a backend is sent: the messages and generation parameters, nothing else."""

    messages: list[Message]
    params: GenParams = field(default_factory=GenParams)


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    images_dropped: int = 0


def image_digest(path: str) -> str:
    """Content hash of an image file (so a cache key changes when the image does); a URL is its own key."""
    if not is_local(path):
        return "url:" + hashlib.sha256(path.encode()).hexdigest()[:16]
    p = Path(path)
    if not p.is_file():
        return f"missing:{path}"
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


def image_data_url(path: str) -> tuple[str, str]:
    """(media type, base64 data) of an image file (a local path, not a URL)."""
    media = mimetypes.guess_type(path)[0] or "image/png"
    return media, base64.b64encode(Path(path).read_bytes()).decode("ascii")


class MalformedReply(Exception):
    """A reply the server sent with success status but without a usable completion (no choices, no
    message, a body that is not the API's JSON).  Backends retry it, then raise :class:`JudgeError`."""


async def retry_malformed(
    call: Callable[[], Awaitable[Completion]], *, retries: int, backoff: float, what: str
) -> Completion:
    """``call()`` again after a :class:`MalformedReply`, up to ``retries`` times, waiting ``backoff``
    seconds and doubling; then a :class:`JudgeError`.  (Transport errors, 429 and 5xx are retried by
    the SDKs themselves.)"""
    for attempt in range(retries + 1):
        try:
            return await call()
        except MalformedReply as exc:
            problem = str(exc)
        if attempt < retries:
            await asyncio.sleep(backoff * 2**attempt)
    raise JudgeError(f"{what}: malformed reply after {retries + 1} attempt(s): {problem}")


class Judge(ABC):
    """A judge backend.  Subclasses set ``backend`` and ``Options`` and implement :meth:`complete`."""

    backend: str = "?"
    supports_images: bool = False
    #: True for the scripted judge: results are a simulation, not an LLM's.
    simulated: bool = False
    #: The backend's options; a spec's ``?key=value`` and ``--judge-opt`` are validated against it.
    Options: ClassVar[type[JudgeOptions]] = JudgeOptions

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.options = validate_options(self.backend, self.Options, options or {})

    @property
    def spec(self) -> str:
        return f"{self.backend}:{self.model}"

    def identity(self) -> dict[str, Any]:
        """What determines this judge's outputs (part of every cache key)."""
        return {"backend": self.backend, "model": self.model}

    def default_concurrency(self) -> int:
        return 4

    def expect_concurrency(self, n: int) -> None:  # noqa: B027 - optional hook
        """The engine will keep up to ``n`` requests in flight (a backend may size its client pools)."""

    def bind_simulation(self, oracle: Callable[[Any], dict[str, Any]]) -> None:  # noqa: B027 - optional hook
        """A simulated judge (``simulated = True``) receives the run's truth here; real backends ignore it."""

    @abstractmethod
    async def complete(self, request: JudgeRequest) -> Completion:
        """Send one request; raise on transport errors after the backend's own retries."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release resources (clients, models)."""
