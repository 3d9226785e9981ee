"""Typed summaries shared by every kind of run."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class CostStats(BaseModel):
    """What one invocation of a run cost (the engine's counters; see README "--json summary keys")."""

    model_config = ConfigDict(extra="forbid")

    judge_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: tokens of the stored replies the run used instead of calling the judge (its cost from scratch is these
    #: plus the live ones)
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    #: prompt tokens of the live calls the backend took from its KV cache instead of evaluating them (the
    #: embedded judge's prompt-prefix reuse); the prompt tokens it evaluated per live call, and the share reused
    reused_prompt_tokens: int = 0
    evaluated_prompt_tokens_per_call: float = 0.0
    prompt_reuse: float = 0.0
    invalid_requests: int = 0
    failed: int = 0
    failed_attempts: int = 0
    format_retries: int = 0
    #: verdict slots graded by their most probable value: the allowed values carried too little probability
    slot_fallbacks: int = 0
    images_dropped: int = 0
    waves: int = 0
    waited_for_other_process: int = 0
    #: requests sent again because the Ray worker they were on was lost (they may have been paid twice)
    resent_after_lost_worker: int = 0
    #: the Ray executor's live workers over the run: [seconds since the first request, workers] at each change
    workers_over_time: list[tuple[float, int]] | None = None
    wall_s: float = 0.0
    calls_per_s: float = 0.0
    mean_latency_s: float = 0.0


class RunSummary(CostStats):
    """The head of every run's summary: which run, which kind and method, which judge, on which data."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    kind: str
    method: str
    judge: str
    simulated_judge: bool
    data: str
    status: str = "complete"
