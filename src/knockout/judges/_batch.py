"""Provider batch APIs: ``openai-batch:MODEL`` and ``anthropic-batch:MODEL``.

The requests of a wave are submitted as one batch job (half the price at those providers) instead of one
HTTP request each; the engine's :class:`knockout.engine._batch.BatchExecutor` collects them, records the
batch id in the store *before* waiting (so a killed run resumes by polling the same batch, never
submitting it again), polls, and maps the results back by request key (the ``custom_id`` of each
request is its cache key).  A request the provider answers with an error is a failed request, counted
like a failed live call (asked again, in a new batch, by the next run).

A batch judge has the options of its live backend plus ``poll`` (seconds between status checks, default
30) and ``batch_size`` (requests per batch at most; OpenAI takes 50,000, Anthropic 100,000).  Its cache
identity is the live backend's (``openai``/``anthropic``, the server, the model): a reply obtained in a
batch is the same judge's reply, and a later live run reuses it.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import Field

from knockout.errors import JudgeError
from knockout.judges._anthropic_backend import AnthropicJudge, AnthropicOptions
from knockout.judges._anthropic_backend import _reply as anthropic_reply
from knockout.judges._base import Completion, Judge, JudgeRequest, MalformedReply
from knockout.judges._openai_compat import OpenAIJudge, OpenAIOptions
from knockout.judges._openai_compat import _reply as openai_reply


@dataclass
class BatchState:
    """A batch's progress: ``done`` (results can be read), ``failed`` (no results will come: expired,
    cancelled, rejected) or still running; ``error`` says why it failed."""

    done: bool = False
    failed: bool = False
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


#: what a batch returns per request: a completion, or the provider's error for that request
BatchResult = Completion | str


class BatchJudge(Judge):
    """A judge whose requests go to a provider's batch API (through the engine's batch executor)."""

    #: batch result lines are read as free text (no verdict slot: ``--verdict auto`` reads text)
    slot_modes: tuple[str, ...] = ()

    #: the provider ("openai", "anthropic"): tells the engine to use its batch executor
    batch_api: ClassVar[str]
    #: the live backend whose replies a batch's replies are (its cache identity)
    live_backend: ClassVar[str]

    def default_concurrency(self) -> int:
        return int(getattr(self.options, "batch_size", 10_000))

    @property
    def poll_s(self) -> float:
        return float(getattr(self.options, "poll", 30.0))

    def identity(self) -> dict[str, Any]:
        identity = super().identity()
        identity["backend"] = self.live_backend
        return identity

    @abstractmethod
    async def submit_batch(self, requests: list[tuple[str, JudgeRequest]]) -> str:
        """Submit ``(custom_id, request)`` pairs as one batch; return the batch id."""

    @abstractmethod
    async def poll_batch(self, batch_id: str) -> BatchState:
        """The batch's state."""

    @abstractmethod
    async def batch_results(self, batch_id: str) -> dict[str, BatchResult]:
        """Each request's completion (or error text), by custom id."""

    async def complete(self, request: JudgeRequest) -> Completion:
        """One request as a batch of one (outside a run; a run batches a whole wave)."""
        batch_id = await self.submit_batch([("r0", request)])
        while not (state := await self.poll_batch(batch_id)).done and not state.failed:
            await asyncio.sleep(self.poll_s)
        if state.failed:
            raise JudgeError(f"{self.spec}: batch {batch_id} failed: {state.error}")
        got = (await self.batch_results(batch_id)).get("r0", "no result for the request")
        if isinstance(got, str):
            raise JudgeError(f"{self.spec}: {got}")
        return got


class OpenAIBatchOptions(OpenAIOptions):
    poll: float = Field(30.0, gt=0, le=86400, description="seconds between batch status checks")
    batch_size: int = Field(50_000, ge=1, le=50_000, description="requests per batch at most")


def _openai_line(body: Any) -> BatchResult:
    """One line of an OpenAI batch output/error file as a completion or an error text."""
    if not isinstance(body, dict):
        return "a result line that is not a JSON object"
    err = body.get("error")
    response = body.get("response") or {}
    status = response.get("status_code")
    if err or (status is not None and status != 200):
        detail = err or (response.get("body") or {}).get("error") or response
        return f"request failed in the batch (status {status}): {json.dumps(detail)[:300]}"
    try:
        return openai_reply(response.get("body") or {}, 0)
    except MalformedReply as exc:
        return f"malformed result in the batch: {exc}"


class OpenAIBatchJudge(BatchJudge, OpenAIJudge):
    """OpenAI's Batch API (``/v1/files`` + ``/v1/batches``, endpoint ``/v1/chat/completions``)."""

    backend = "openai-batch"
    Options = OpenAIBatchOptions
    options: OpenAIBatchOptions
    batch_api: ClassVar[str] = "openai"
    live_backend: ClassVar[str] = "openai"
    #: its result lines are read as free text (its identity keeps the live backend's slot all the same)
    reads_slots: ClassVar[bool] = False

    async def submit_batch(self, requests: list[tuple[str, JudgeRequest]]) -> str:
        lines = []
        for custom_id, request in requests:
            lines.append(json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
                                     "body": self.body(request)}, ensure_ascii=False))
        data = ("\n".join(lines) + "\n").encode()
        try:
            upload = await self._client.files.create(file=("knockout-batch.jsonl", data), purpose="batch")
            batch = await self._client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                                      completion_window="24h")
        except self._sdk.APIError as exc:
            raise JudgeError(f"{self.where}: cannot submit the batch: {exc}") from exc
        return str(batch.id)

    async def poll_batch(self, batch_id: str) -> BatchState:
        try:
            b = await self._client.batches.retrieve(batch_id)
        except self._sdk.APIError as exc:
            raise JudgeError(f"{self.where}: cannot read batch {batch_id}: {exc}") from exc
        info = {"output_file_id": b.output_file_id, "error_file_id": b.error_file_id}
        if b.status == "completed":
            return BatchState(done=True, info=info)
        if b.status in ("failed", "expired", "cancelled", "cancelling"):
            errors = getattr(getattr(b, "errors", None), "data", None) or []
            why = "; ".join(str(getattr(e, "message", e)) for e in errors) or b.status
            return BatchState(failed=True, error=why, info=info)
        return BatchState(info=info)

    async def batch_results(self, batch_id: str) -> dict[str, BatchResult]:
        state = await self.poll_batch(batch_id)
        out: dict[str, BatchResult] = {}
        for file_id in (state.info.get("output_file_id"), state.info.get("error_file_id")):
            if not file_id:
                continue
            try:
                content = await self._client.files.content(file_id)
            except self._sdk.APIError as exc:
                raise JudgeError(f"{self.where}: cannot read results file {file_id}: {exc}") \
                    from exc
            for raw in content.text.splitlines():
                if not raw.strip():
                    continue
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                custom_id = line.get("custom_id") if isinstance(line, dict) else None
                if isinstance(custom_id, str):
                    out[custom_id] = _openai_line(line)
        return out


class AnthropicBatchOptions(AnthropicOptions):
    poll: float = Field(30.0, gt=0, le=86400, description="seconds between batch status checks")
    batch_size: int = Field(100_000, ge=1, le=100_000, description="requests per batch at most")


class AnthropicBatchJudge(BatchJudge, AnthropicJudge):
    """Anthropic's Message Batches API (``/v1/messages/batches``)."""

    backend = "anthropic-batch"
    Options = AnthropicBatchOptions
    options: AnthropicBatchOptions
    batch_api: ClassVar[str] = "anthropic"
    live_backend: ClassVar[str] = "anthropic"

    def params(self, request: JudgeRequest) -> dict[str, Any]:
        """One request's Messages parameters (the live backend's, with the temperature in them)."""
        params = self.message_params(request)
        extra = params.pop("extra_body", {})  # a batch request's params are the API body itself
        return {**params, **extra, "temperature": request.params.temperature}

    async def submit_batch(self, requests: list[tuple[str, JudgeRequest]]) -> str:
        try:
            entries: Any = [{"custom_id": cid, "params": self.params(r)} for cid, r in requests]
            batch = await self._client.messages.batches.create(requests=entries)
        except self._sdk.APIError as exc:
            raise JudgeError(f"{self.where}: cannot submit the batch: {exc}") from exc
        return str(batch.id)

    async def poll_batch(self, batch_id: str) -> BatchState:
        try:
            b = await self._client.messages.batches.retrieve(batch_id)
        except self._sdk.APIError as exc:
            raise JudgeError(f"{self.where}: cannot read batch {batch_id}: {exc}") from exc
        if b.processing_status == "ended":
            return BatchState(done=True)
        return BatchState()

    async def batch_results(self, batch_id: str) -> dict[str, BatchResult]:
        out: dict[str, BatchResult] = {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                stream = await self._client.messages.batches.results(batch_id)
            async for entry in stream:
                result = entry.result
                if result.type == "succeeded":
                    try:
                        out[entry.custom_id] = anthropic_reply(result.message)
                    except MalformedReply as exc:
                        out[entry.custom_id] = f"malformed result in the batch: {exc}"
                else:
                    detail = getattr(result, "error", None)
                    out[entry.custom_id] = f"request {result.type} in the batch: {detail}"[:400]
        except self._sdk.APIError as exc:
            raise JudgeError(f"{self.where}: cannot read the results of {batch_id}: {exc}") \
                from exc
        return out
