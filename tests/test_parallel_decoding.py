"""The embedded judge's parallel sequences (continuous batching with prompt-prefix reuse), on the real 0.5B
GGUF: every request gets its own reply, in any order, and prompts sharing a prefix reuse a slot's KV cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from knockout.errors import ConfigError
from knockout.judges import GenParams, Message, make_judge
from knockout.judges._base import JudgeRequest
from tests.conftest import SMALL_MODEL, needs_model


def test_parallel_option_is_checked() -> None:
    with pytest.raises(ConfigError, match="parallel"):
        make_judge(f"llamacpp:{SMALL_MODEL}?parallel=0")


@needs_model
@pytest.mark.model
def test_parallel_sequences_answer_each_request(small_gguf: Path) -> None:
    from knockout.judges._llamacpp import _DECODERS

    judge = make_judge(f"llamacpp:{SMALL_MODEL}?parallel=2&n_ctx=512")
    assert judge.default_concurrency() == 4
    shared = "You grade answers. Reply with one line: Score: X/2.\nQuestion: What is 2 + 2?\nAnswer: "
    reqs = [JudgeRequest([Message(role="user", content=shared + a)], GenParams(max_tokens=6, temperature=0.0))
            for a in ("4", "5", "four")]

    async def go() -> list[str]:
        return [c.text for c in await asyncio.gather(*(judge.complete(r) for r in reqs))]

    texts = asyncio.run(go())
    assert len(texts) == 3 and all(isinstance(t, str) and t for t in texts)
    stats = next(d.stats for k, d in _DECODERS.items() if k[3] == 2)
    assert stats["reused_tokens"] > 0  # the third prompt reused a finished slot's prefix
    assert stats["shared_tokens"] > 0  # the second waited one step and took the first's prefix cells
    # greedy decoding of the same prompt gives the same reply, whatever ran beside it
    again = asyncio.run(judge.complete(reqs[0]))
    assert again.text == texts[0]


@needs_model
@pytest.mark.model
def test_flash_attention_answers_in_both_modes(small_gguf: Path) -> None:
    """flash_attn=true reaches llama.cpp in one-at-a-time and parallel decoding, and both still answer."""
    from knockout.judges._llamacpp import _DECODERS, _LOADED

    req = JudgeRequest([Message(role="user", content="Reply with one word: yes.")],
                       GenParams(max_tokens=4, temperature=0.0))
    for spec in (f"llamacpp:{SMALL_MODEL}?flash_attn=true&n_ctx=256",
                 f"llamacpp:{SMALL_MODEL}?flash_attn=true&parallel=2&n_ctx=256"):
        assert asyncio.run(make_judge(spec).complete(req)).text
    assert any(k[3] for k in _LOADED)  # the one-at-a-time model was loaded with flash attention
    assert any(k[4] for k in _DECODERS)  # and so was the parallel decoder's context
