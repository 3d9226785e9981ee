"""The expected verdict over servers (knockout.judges._expected, docs/methods.md#the-verdict-slot): an ``openai:``
judge reads the grade from the server's token probabilities at the value, as the embedded judge does from the model.

The request shapes are tested against loopback fakes (tests/fake_server.py: real sockets, the real ``openai``
SDK) that answer as each server's documentation says it does; the replies are written by the tests.  The reading
itself runs on a real ``python -m llama_cpp.server`` with the default GGUF and is compared with the embedded judge
(``test_llama_cpp_server_expected_grades_equal_the_embedded_judges``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError
from knockout.judges import GenParams, JudgeRequest, Message, make_judge
from knockout.judges._slot import Slot, read_verdict, score_values
from knockout.methods._base import MethodOptions
from knockout.methods._run import RunConfig, run
from knockout.prompts._slots import resolve_verdict
from knockout.storage._store import Store
from tests.conftest import ROOT, free_port, needs_model
from tests.fake_server import fake_api

ASK = [Message(role="user", content="Grade the answer 'DNS maps names to addresses' from 0 to 5. "
               "Reply in the format: Score: [score]/5")]
SLOT5 = Slot("score", ("Score: ",), score_values(5), "/5")


def _top(probs: dict[str, float]) -> list[dict[str, Any]]:
    return [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in probs.items()]


def _chat_logprobs(content: str, tokens: list[tuple[str, dict[str, float]]]) -> bytes:
    """A chat completion with ``logprobs.content``, as the OpenAI API documents it: each generated token with its
    ``logprob`` and its ``top_logprobs`` (a list of ``{token, logprob, bytes}``)."""
    assert "".join(t for t, _ in tokens) == content
    items = [{"token": t, "logprob": math.log(alts.get(t, 0.5)), "bytes": list(t.encode()), "top_logprobs": _top(alts)}
             for t, alts in tokens]
    return json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": {"content": items},
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": len(tokens), "total_tokens": 40 + len(tokens)},
    }).encode()


def _complete(judge: Any, slot: Slot, params: GenParams | None = None) -> Any:
    return asyncio.run(judge.complete(JudgeRequest(ASK, params or GenParams(), slot, "expected")))


# -- the OpenAI API itself: one reply, read at the value ---------------------------------------------------------
def test_openai_api_request_and_reply_read_at_the_value() -> None:
    """The request: https://platform.openai.com/docs/api-reference/chat/create (``logprobs``: "Whether to return log
    probabilities of the output tokens"; ``top_logprobs``: "An integer between 0 and 20 specifying the number of most
    likely tokens to return at each token position"); the reply's ``choices[0].logprobs.content``: each token with
    its ``logprob`` and ``top_logprobs``.  A half point is seen only after the digit the judge wrote: not exact."""
    tokens = [("Score", {"Score": 0.99}), (":", {":": 1.0}), (" ", {" ": 1.0}),
              ("4", {"4": 0.6, "3": 0.3, "5": 0.05, "x": 0.05}), ("/", {"/": 0.9, ".": 0.1}), ("5", {"5": 1.0})]
    with fake_api(lambda body, n: (200, _chat_logprobs("Score: 4/5", tokens))) as server:
        judge = make_judge(f"openai:gpt-x?base_url={server.url}&server=openai")
        assert judge.slot_modes == ("expected",) and resolve_verdict("auto", judge) == "text"
        assert resolve_verdict("expected", judge) == "expected"
        done = _complete(judge, SLOT5)
        body = server.requests[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] <= 24
    assert "response_format" not in body and body["messages"] == [{"role": "user", "content": ASK[0].content}]
    v = done.verdict
    assert v["mode"] == "expected" and v["chosen"] == ["4"] and v["exact"] is False and v["requests"] == 1
    probs = dict(zip(SLOT5.values, v["probs"][0], strict=True))
    assert probs["4"] == pytest.approx(0.54) and probs["4.5"] == pytest.approx(0.06)
    assert probs["3"] == pytest.approx(0.3) and probs["5"] == pytest.approx(0.05) and probs["2"] == 0
    assert v["mass"][0] == pytest.approx(0.95)
    read = read_verdict(SLOT5, v)  # renormalised over the allowed values seen
    assert read.error is None and read.values[0] == pytest.approx((0.54 * 4 + 0.06 * 4.5 + 0.3 * 3 + 0.05 * 5) / 0.95)
    assert done.text == "Score: 4/5" and done.prompt_tokens == 40


def test_openai_api_whole_point_scale_is_read_exactly() -> None:
    """OpenAI's tokenizers write a number of up to three digits as one token: on a whole-point scale (0-30) every
    allowed value is a first token, and the reading is exact."""
    slot = Slot("score", ("Score: ",), score_values(30), "/30")
    assert "2.5" not in slot.values and "25" in slot.values
    tokens = [("Score: ", {"Score: ": 1.0}), ("25", {"25": 0.5, "20": 0.3, "2": 0.1, "30": 0.1}),
              ("/30", {"/30": 1.0})]
    with fake_api(lambda body, n: (200, _chat_logprobs("Score: 25/30", tokens))) as server:
        done = _complete(make_judge(f"openai:gpt-x?base_url={server.url}&server=openai"), slot)
    v = done.verdict
    assert v["exact"] is True and v["mass"][0] == pytest.approx(1.0) and v["chosen"] == ["25"]
    assert read_verdict(slot, v).values[0] == pytest.approx(0.5 * 25 + 0.3 * 20 + 0.1 * 2 + 0.1 * 30)


def test_too_little_probability_or_none_is_an_invalid_verdict_retried_then_invalid(tmp_path: Path) -> None:
    """Where the allowed values carry less than half of the probability the server listed, or the server sent no
    token probabilities, the verdict is invalid: asked again with the format reminder, then recorded invalid; never a
    grade made up from the text."""
    low = [("Score: ", {"Score: ": 1.0}), ("4", {"4": 0.2, "x": 0.5, "y": 0.3}), ("/5", {"/5": 1.0})]
    with fake_api(lambda body, n: (200, _chat_logprobs("Score: 4/5", low))) as server:
        judge = make_judge(f"openai:gpt-x?base_url={server.url}&server=openai")
        v = _complete(judge, SLOT5).verdict
        assert "invalid" in v and "0.20 of the probability" in v["invalid"]
        items = ItemSet([Question(id="q", text="What does DNS do?", max_points=5, language="en")],
                        [Answer(id="a", question_id="q", text="It maps names.", examinee="e")], source="test")
        cfg = RunConfig(method="individual", options=MethodOptions(verdict="expected", guard="off"))
        with Store(tmp_path / "s.db") as store:
            report = run(items, judge, store, cfg)
        asked = server.hits
    r = report.results[0]
    assert not r.valid and r.score is None and asked == 1 + len(r.details["attempts"]) and asked >= 2
    assert report.summary()["verdict"] == "expected" and report.summary()["invalid"] == 1
    assert "openai-top-logprobs" in report.summary()["info"]["verdict_via"]
    from tests.fake_server import chat_body

    with fake_api(lambda body, n: (200, chat_body("Score: 4/5"))) as server:  # a server that ignores logprobs
        v = _complete(make_judge(f"openai:gpt-x?base_url={server.url}&server=openai"), SLOT5).verdict
    assert "no token probabilities" in v["invalid"]


# -- servers that continue a prefill: every allowed value scored ------------------------------------------------
#: the next token's probabilities after each text the assistant's reply was begun with
TREE = {"Score: ": {"4": 0.5, "3": 0.3, "5": 0.2}, "Score: 4": {"/": 0.8, ".": 0.2}, "Score: 4.": {"5": 1.0},
        "Score: 4.5": {"/": 1.0}, "Score: 3": {"/": 1.0}, "Score: 5": {"/": 1.0}}


def _prefill_server(tail: str, tree: dict[str, dict[str, float]] = TREE
                    ) -> Callable[[dict[str, Any], int], tuple[int, bytes]]:
    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        prefill = body["messages"][-1]["content"]
        if body["max_tokens"] > 1:  # the explanation line after the verdict
            text = tail
            choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": text}}
        else:
            top = tree[prefill]
            first = max(top, key=top.__getitem__)
            choice = {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": first},
                      "logprobs": {"content": [{"token": first, "logprob": math.log(top[first]),
                                                "top_logprobs": _top(top)}]}}
        return 200, json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                "choices": [choice], "usage": {"prompt_tokens": 50, "completion_tokens": 1}}).encode()
    return answer


@pytest.mark.parametrize("kind", ["vllm", "llama-server"])
def test_prefill_servers_score_every_allowed_value(kind: str) -> None:
    """vLLM, https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html (Extra Parameters for Chat API:
    ``continue_final_message``: "the chat will be formatted so that the final message in the chat is open-ended,
    without any EOS tokens. The model will continue this message rather than starting a new one. This allows you to
    'prefill' part of the model's response", not at the same time as ``add_generation_prompt``; ``logprobs`` and
    ``top_logprobs`` as OpenAI's).  llama.cpp's server,
    https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md (``/v1/chat/completions``: OpenAI's
    parameters, ``/completion``-specific ones too: ``n_probs``, "the probabilities of top N tokens for each generated
    token"; a trailing assistant message is continued as a prefill).  One request per node of the values' trie:
    ``4`` is told from ``4.5`` by the next token."""
    slot = Slot("score", ("Score: ",), score_values(5), "/5", " Explanation:")
    with fake_api(_prefill_server(" it is right.")) as server:
        judge = make_judge(f"openai:m?base_url={server.url}&server={kind}")
        assert judge.slot_modes == ("expected",) and resolve_verdict("auto", judge) == "text"
        done = _complete(judge, slot, GenParams(temperature=0.1, max_tokens=64, seed=3))
        bodies = server.requests
    probes = [b for b in bodies if b["max_tokens"] == 1]
    assert sorted(b["messages"][-1]["content"] for b in probes) == sorted(TREE)
    for b in probes:
        assert b["messages"][:-1] == [{"role": "user", "content": ASK[0].content}]
        assert b["messages"][-1]["role"] == "assistant" and b["logprobs"] is True and b["top_logprobs"] == 20
        if kind == "vllm":
            assert b["continue_final_message"] is True and b["add_generation_prompt"] is False
        else:
            assert b["n_probs"] == 20 and "continue_final_message" not in b
    explain = [b for b in bodies if b["max_tokens"] != 1]
    assert len(explain) == 1 and explain[0]["messages"][-1]["content"] == "Score: 4/5 Explanation:"
    assert explain[0]["stop"] == ["\n"] and explain[0]["seed"] == 3 and explain[0]["temperature"] == 0.1
    v = done.verdict
    probs = dict(zip(slot.values, v["probs"][0], strict=True))
    assert probs["4"] == pytest.approx(0.4) and probs["4.5"] == pytest.approx(0.1)
    assert probs["3"] == pytest.approx(0.3) and probs["5"] == pytest.approx(0.2)
    assert v["exact"] is True and v["requests"] == len(bodies) and v["chosen"] == ["4"]
    assert done.text == "Score: 4/5 Explanation: it is right." and done.prompt_tokens == 50 * len(bodies)
    assert read_verdict(slot, v).values[0] == pytest.approx(0.4 * 4 + 0.1 * 4.5 + 0.3 * 3 + 0.2 * 5)


def test_a_matchs_two_grades_the_second_read_after_the_firsts_most_probable_value() -> None:
    """A pair slot (``Answer 1: X/2 Answer 2: Y/2``) over a prefill server, as the embedded judge reads it: the
    second field's distribution after the first's most probable value."""
    tree = {"Answer 1: ": {"2": 0.7, "1": 0.3}, "Answer 1: 2": {"/": 1.0}, "Answer 1: 1": {"/": 0.5, ".": 0.5},
            "Answer 1: 1.": {"5": 1.0}, "Answer 1: 1.5": {"/": 1.0},
            "Answer 1: 2/2 Answer 2: ": {"0": 0.9, "z": 0.1}, "Answer 1: 2/2 Answer 2: 0": {"/": 0.6, ".": 0.4},
            "Answer 1: 2/2 Answer 2: 0.": {"5": 1.0}, "Answer 1: 2/2 Answer 2: 0.5": {"/": 1.0}}
    slot = Slot("pair", ("Answer 1: ", " Answer 2: "), score_values(2), "/2")
    with fake_api(_prefill_server("", tree)) as server:
        done = _complete(make_judge(f"openai:m?base_url={server.url}&server=vllm"), slot)
        asked = sorted(b["messages"][-1]["content"] for b in server.requests)
    assert asked == sorted(tree)
    read = read_verdict(slot, done.verdict)
    assert done.verdict["chosen"] == ["2", "0"] and done.text == "Answer 1: 2/2 Answer 2: 0/2"
    assert read.values[0] == pytest.approx(0.7 * 2 + 0.15 * 1 + 0.15 * 1.5)
    assert read.values[1] == pytest.approx(0.36 * 0.5 / 0.9) and done.verdict["mass"][1] == pytest.approx(0.9)


@needs_model
@pytest.mark.model
def test_llama_cpp_python_server_gets_completions_in_the_ggufs_chat_template(small_gguf: Path) -> None:
    """``python -m llama_cpp.server``'s completions endpoint, https://llama-cpp-python.readthedocs.io/en/latest/server/
    (OpenAI-compatible) with OpenAI's ``logprobs`` of the completions API,
    https://platform.openai.com/docs/api-reference/completions/create ("Include the log probabilities on the
    logprobs most likely output tokens, as well the chosen tokens"), read from ``choices[0].logprobs.top_logprobs``
    (one map of token to log probability per generated token).  The prompt is the GGUF's own chat template, applied
    here (only the GGUF's vocabulary is loaded), the verdict's field after the assistant's turn begins."""

    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        prefill = body["prompt"].rsplit("<|im_start|>assistant\n", 1)[1]
        top = TREE[prefill]
        first = max(top, key=top.__getitem__)
        return 200, json.dumps({"id": "c", "object": "text_completion", "created": 0, "model": "m", "choices": [
            {"index": 0, "text": first, "finish_reason": "length", "logprobs": {
                "tokens": [first], "text_offset": [0], "token_logprobs": [math.log(top[first])],
                "top_logprobs": [{t: math.log(p) for t, p in top.items()}]}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 1, "total_tokens": 31}}).encode()

    with fake_api(answer) as server:
        judge = make_judge(f"openai:small?base_url={server.url}&server=llama-cpp-python&gguf={small_gguf}")
        assert judge.identity()["server_kind"] == "llama-cpp-python" and len(judge.identity()["chat_template"]) == 16
        done = _complete(judge, SLOT5)
        bodies = server.requests
    assert len(bodies) == len(TREE) and all(b["max_tokens"] == 1 and b["logprobs"] == 20 for b in bodies)
    assert all(b["prompt"].startswith("<|im_start|>system\n") and ASK[0].content in b["prompt"] for b in bodies)
    assert "messages" not in bodies[0] and done.verdict["via"] == "llama-cpp-python"
    assert read_verdict(SLOT5, done.verdict).values[0] == pytest.approx(0.4 * 4 + 0.1 * 4.5 + 0.3 * 3 + 0.2 * 5)


def test_expected_is_refused_where_the_server_is_not_named_and_auto_is_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An OpenAI-compatible server of unknown kind offers no expected verdict, and ``--verdict auto`` gives what it
    gave before (text, or the JSON-schema slot on the OpenAI API itself), with the same judge identity."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    other = make_judge("openai:m?base_url=http://127.0.0.1:9/v1")
    assert other.slot_modes == () and resolve_verdict("auto", other) == "text"
    with pytest.raises(ConfigError, match="offers no 'expected'"):
        resolve_verdict("expected", other)
    api = make_judge("openai:gpt-x?api_key=k")
    assert api.slot_modes == ("expected", "constrained") and resolve_verdict("auto", api) == "constrained"
    assert "server_kind" not in api.identity() and "server_kind" not in other.identity()
    with pytest.raises(ConfigError, match="needs gguf"):
        make_judge("openai:m?base_url=http://127.0.0.1:9/v1&server=llama-cpp-python")


# -- a real python -m llama_cpp.server against the embedded judge -------------------------------------------------
def _server_model() -> str | None:
    """The GGUF the comparison serves: the default model where it is installed (``knockout[embedded]``), else the
    0.5B plumbing model that the test extra installs (CI), or ``$KNOCKOUT_SERVER_TEST_MODEL``; None without
    llama_cpp.server or the model's packages."""
    from knockout.judges._models import DEFAULT_MODEL, MODELS

    if importlib.util.find_spec("llama_cpp.server") is None:
        return None
    wanted = [os.environ["KNOCKOUT_SERVER_TEST_MODEL"]] if os.environ.get("KNOCKOUT_SERVER_TEST_MODEL") else [
        DEFAULT_MODEL, "qwen2.5-coder-0.5b"]
    return next((m for m in wanted if all(importlib.util.find_spec(p) is not None for p in MODELS[m].packages)), None)


@pytest.fixture(scope="module")
def default_server() -> Iterator[tuple[str, str]]:
    """A real ``python -m llama_cpp.server`` on 127.0.0.1 serving the default GGUF (assembled from its PyPI packages,
    as the embedded judge finds it; the 0.5B model where the default is not installed): (its URL, the model)."""
    model = _server_model()
    if model is None:
        pytest.skip("needs llama-cpp-python[server] and an embedded model")
    from knockout.judges._models import model_path

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path(model)), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--n_threads", str(os.cpu_count() or 2),
         "--n_threads_batch", str(os.cpu_count() or 2)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import socket

    deadline = time.time() + 120
    while True:
        if proc.poll() is not None:
            pytest.fail("llama_cpp.server died")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.time() > deadline:
                proc.kill()
                pytest.fail("llama_cpp.server did not start in 120 s")
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}/v1", model
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


#: the demo exam's answers graded in the comparison (the first answers of its first questions: about 40 s)
DEMO_QUESTIONS, DEMO_ANSWERS = 2, 2


@pytest.mark.model
@pytest.mark.slow
def test_llama_cpp_server_expected_grades_equal_the_embedded_judges(default_server: tuple[str, str],
                                                                    tmp_path: Path) -> None:
    """The demo exam's first answers (DEMO_QUESTIONS x DEMO_ANSWERS, to keep the test short) graded with the expected
    verdict by the embedded judge and by ``openai:...&server=llama-cpp-python`` on a real ``llama_cpp.server`` with the
    same GGUF: the completions endpoint (https://platform.openai.com/docs/api-reference/completions: ``logprobs``,
    the most likely tokens at each position; llama-cpp-python's server returns them as ``top_logprobs``, a map of
    token to log probability) on the prompt in the GGUF's own chat template.  The grades agree within 0.05 points."""
    from knockout.data import load_items
    from knockout.judges._models import DEFAULT_MODEL

    url, model = default_server
    items = load_items(str(ROOT / "src/knockout/examples/demo_exam.jsonl")).subset(
        limit=DEMO_QUESTIONS, answers_per_question=DEMO_ANSWERS)
    cfg = RunConfig(method="individual", options=MethodOptions(verdict="expected", guard="off"))
    with Store(tmp_path / "embedded.db") as store:
        embedded = run(items, make_judge(f"llamacpp:{model}"), store, cfg)
    spec = f"openai:{model}?base_url={url}&server=llama-cpp-python&concurrency=1"
    with Store(tmp_path / "server.db") as store:
        served = run(items, make_judge(spec), store, cfg)
    s = served.summary()
    assert s["verdict"] == "expected" and s["invalid"] == 0 and "llama-cpp-python" in s["info"]["verdict_via"]
    diffs = {}
    for a, b in zip(embedded.results, served.results, strict=True):
        assert a.answer_id == b.answer_id and a.score is not None and b.score is not None
        diffs[a.answer_id] = abs(a.score - b.score)
        v = b.details["attempts"][-1]["verdict"]
        # the default model puts over 0.9 of its probability on the allowed values; the 0.5B one 0.6-0.7
        assert v["exact"] is True and v["mass"][0] > (0.9 if model == DEFAULT_MODEL else 0.5)
        assert v["via"] == "llama-cpp-python"
    print(f"\nexpected grade ({model}), embedded vs llama_cpp.server:", {k: round(d, 4) for k, d in diffs.items()})
    assert max(diffs.values()) < 0.05, diffs
