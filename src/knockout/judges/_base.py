"""The one async interface every judge backend implements."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import mimetypes
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from knockout._bounds import MAX_NAME, MAX_TEMPERATURE, MAX_TOKENS, Int, Text
from knockout._redact import option_secrets, remember
from knockout.data import is_local
from knockout.errors import ConfigError, JudgeError
from knockout.judges._options import JudgeOptions, validate_options
from knockout.judges._slot import Slot

Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    """A chat message; ``images`` are file paths sent to judges that accept images."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str
    images: tuple[str, ...] = ()


#: Optional sampling parameters: sent, hashed into cache keys and stored only when set, so requests and
#: cache keys made without them stay what they were.
OPTIONAL_PARAMS = ("top_p", "frequency_penalty")


class GenParams(BaseModel):
    """Generation parameters; defaults follow the papers (temperature 0.1).

    ``top_p`` and ``frequency_penalty`` (the side-by-side paper's Table 9: 0.1 and 1.0) are optional:
    when unset they are left out of the request, of the dump (``model_dump``) and so of every cache key
    and run id.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    temperature: float = Field(default=0.1, ge=0, le=MAX_TEMPERATURE)
    max_tokens: int = Field(default=512, gt=0, le=MAX_TOKENS)
    seed: Int | None = 0
    stop: tuple[Annotated[Text, Field(min_length=1, max_length=MAX_NAME)], ...] = Field(default=(), max_length=64)
    top_p: float | None = Field(default=None, gt=0, le=1)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)

    @model_serializer(mode="wrap")
    def _drop_unset_optional(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for k in OPTIONAL_PARAMS:
            if out.get(k, 0) is None:
                del out[k]
        return out


@dataclass
class JudgeRequest:
    """What a backend is sent: the messages and generation parameters, and the verdict slot the backend
    fills itself (:mod:`knockout.judges._slot`) when the request has one and the backend offers it."""

    messages: list[Message]
    params: GenParams = field(default_factory=GenParams)
    slot: Slot | None = None
    #: the slot mode asked for (one of the backend's :attr:`Judge.slot_modes`); None with no slot
    slot_mode: str | None = None
    #: the data texts shown in the messages (answers, question, reference): a reasoning-first slot's reasoning is
    #: not ended where the judge quotes a label they hold (:mod:`knockout.judges._reasoning`)
    shown: tuple[str, ...] = ()


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    images_dropped: int = 0
    #: attempts that failed before this completion (HTTP errors, time-outs, dropped connections, malformed
    #: replies), retried by the backend; counted in the run's summary, never stored with the call
    failed_attempts: int = 0
    #: the slot verdict (a request with a slot: :func:`knockout.judges._slot.distribution` or
    #: :func:`~knockout.judges._slot.constrained`), stored with the reply; None for a free-text reply
    verdict: dict[str, Any] | None = None
    #: times the request was sent again because the executor's worker it was on was lost (a Ray actor whose
    #: node died): counted in the run's summary, never stored with the call
    resent_after_lost_worker: int = 0
    #: prompt tokens the backend took from its KV cache instead of evaluating them (the embedded judge's
    #: prompt-prefix reuse: the start of this prompt was the start of one before it); part of
    #: ``prompt_tokens``; counted in the run's summary, never stored with the call
    reused_prompt_tokens: int = 0


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
    #: optional generation parameters (:data:`OPTIONAL_PARAMS`) the backend cannot send
    unsupported_params: tuple[str, ...] = ()
    #: the verdict slot modes the backend fills (:data:`knockout.judges._slot.MODES`), best first; none: the
    #: judge writes its verdict in free text
    slot_modes: tuple[str, ...] = ()
    #: The backend's options; a spec's ``?key=value`` and ``--judge-opt`` are validated against it.
    Options: ClassVar[type[JudgeOptions]] = JudgeOptions

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        self.model = model
        # its secrets are scrubbed from what this process stores and prints (knockout._redact), also where
        # a server echoes them
        remember(option_secrets({str(k): v for k, v in (options or {}).items()}))
        self.options = validate_options(self.backend, self.Options, options or {})
        remember(option_secrets(dict(self.options)))

    @property
    def spec(self) -> str:
        return f"{self.backend}:{self.model}"

    def identity(self) -> dict[str, Any]:
        """What determines this judge's outputs (part of every cache key)."""
        return {"backend": self.backend, "model": self.model}

    def default_concurrency(self) -> int:
        return 4

    def default_slot_mode(self) -> str | None:
        """The slot mode ``--verdict auto`` takes: the best one offered (None: free text)."""
        return self.slot_modes[0] if self.slot_modes else None

    def verdict_via(self, mode: str) -> str | None:
        """How this backend reads a verdict in ``mode`` (recorded with the run as ``info.verdict_via``); None
        where there is nothing to say beside the mode."""
        return None

    def check_params(self, params: GenParams) -> None:
        """Refuse, before a run starts, an optional generation parameter this backend cannot send."""
        for k in self.unsupported_params:
            if getattr(params, k, None) is not None:
                raise ConfigError(f"the {self.backend} backend does not support {k} (leave it unset)")

    def expect_concurrency(self, n: int) -> None:  # noqa: B027 - optional hook
        """The engine will keep up to ``n`` requests in flight (a backend may size its client pools)."""

    def bind_simulation(self, oracle: Callable[[Any], dict[str, Any]]) -> None:  # noqa: B027 - optional hook
        """A simulated judge (``simulated = True``) receives the run's truth here; real backends ignore it."""

    @abstractmethod
    async def complete(self, request: JudgeRequest) -> Completion:
        """Send one request; raise on transport errors after the backend's own retries."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release resources (clients, models)."""


@dataclass(frozen=True)
class Subject:
    """What a request judges: ``kind`` (individual, pairwise, sbs, meta, ...), the ``ids`` of the answers
    or items in the order the judge sees them, and ``facts`` about the step (e.g. the meta task, a debate
    round).  Never ground truth: a simulation looks that up in its own context."""

    kind: str
    ids: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)


#: The subject of the request being sent (set by the engine around each backend call).
current_subject: ContextVar[Subject | None] = ContextVar("knockout_current_subject", default=None)
